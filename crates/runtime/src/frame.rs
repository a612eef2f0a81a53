//! The wire format: every message is a 40-byte header then the payload. The header
//! carries a magic, the call number and the call's signature (so a rank that runs a
//! different collective, size, dtype or op is detected, not silently combined), the
//! piece number, the payload's kind (the bytes themselves, or a single-copy descriptor
//! of them, `cma.rs`) and the payload length, bounded by `MAX_FRAME_BYTES` so a garbage or
//! hostile header never makes us allocate its claimed size.

use crate::error::CommError;

pub const MAGIC: u32 = 0x5259_4431; // "RYD1"
pub const HEADER_BYTES: usize = 40;
/// The largest payload of one frame; longer transfers are cut into pieces.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// What follows a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `len` payload bytes.
    Data = 0,
    /// A 16-byte descriptor of `len` bytes in the sender's memory, to pull (`cma.rs`).
    Descriptor = 1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub call: u64,
    pub signature: u64,
    pub piece: u64,
    pub len: u64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&(self.kind as u32).to_le_bytes());
        b[8..16].copy_from_slice(&self.call.to_le_bytes());
        b[16..24].copy_from_slice(&self.signature.to_le_bytes());
        b[24..32].copy_from_slice(&self.piece.to_le_bytes());
        b[32..40].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; HEADER_BYTES], peer: usize) -> Result<Header, CommError> {
        let word = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap_or([0; 8]));
        let magic = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if magic != MAGIC {
            return Err(CommError::BadFrame { peer, message: format!("bad magic 0x{magic:08x}") });
        }
        let kind = match u32::from_le_bytes([b[4], b[5], b[6], b[7]]) {
            0 => Kind::Data,
            1 => Kind::Descriptor,
            k => return Err(CommError::BadFrame { peer, message: format!("unknown frame kind {k}") }),
        };
        let h = Header { kind, call: word(8..16), signature: word(16..24), piece: word(24..32), len: word(32..40) };
        if h.len > MAX_FRAME_BYTES as u64 {
            return Err(CommError::BadFrame {
                peer,
                message: format!("frame of {} bytes exceeds the {MAX_FRAME_BYTES}-byte limit", h.len),
            });
        }
        Ok(h)
    }
}

/// Check a received header against the one this rank expects next on that stream.
pub fn check(h: &Header, expect: &Header, peer: usize) -> Result<(), CommError> {
    if h.signature != expect.signature || h.call != expect.call {
        return Err(CommError::Mismatch {
            peer,
            message: format!(
                "rank {peer} is in call {} with signature {:016x}, this rank in call {} with {:016x} (different collective, size, dtype, op, root or algorithm)",
                h.call, h.signature, expect.call, expect.signature
            ),
        });
    }
    if h.piece != expect.piece || h.len != expect.len {
        return Err(CommError::Mismatch {
            peer,
            message: format!(
                "rank {peer} sent piece {} of {} bytes, expected piece {} of {}",
                h.piece, h.len, expect.piece, expect.len
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejections() {
        let h = Header { kind: Kind::Descriptor, call: 7, signature: 42, piece: 1, len: 3 };
        let back = Header::decode(&h.encode(), 1).unwrap();
        assert_eq!(back, h);
        check(&back, &h, 1).unwrap();
        // A 4 GiB length is refused before any allocation.
        let huge = Header { len: 4 << 30, ..h }.encode();
        assert!(matches!(Header::decode(&huge, 1), Err(CommError::BadFrame { .. })));
        assert!(matches!(Header::decode(&[0xffu8; HEADER_BYTES], 1), Err(CommError::BadFrame { .. })));
        let mut odd = h.encode();
        odd[4] = 9;
        assert!(matches!(Header::decode(&odd, 1), Err(CommError::BadFrame { .. })));
        assert!(matches!(check(&back, &Header { signature: 43, ..h }, 1), Err(CommError::Mismatch { .. })));
        assert!(matches!(check(&back, &Header { piece: 2, ..h }, 1), Err(CommError::Mismatch { .. })));
        assert!(matches!(check(&back, &Header { len: 4, ..h }, 1), Err(CommError::Mismatch { .. })));
    }
}

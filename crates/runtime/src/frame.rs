//! The wire format: every message is a 40-byte header then the payload. The header
//! carries a magic, the call number and the call's signature (so a rank that runs a
//! different collective, size, dtype or op is detected, not silently combined), the
//! piece number and the payload length, bounded by `MAX_FRAME_BYTES` so a garbage or
//! hostile header never makes us allocate its claimed size.

use std::io::{Read, Write};

use crate::error::CommError;

pub const MAGIC: u32 = 0x5259_4431; // "RYD1"
pub const HEADER_BYTES: usize = 40;
/// The largest payload of one frame; longer transfers are cut into pieces.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub call: u64,
    pub signature: u64,
    pub piece: u64,
    pub len: u64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
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
        let h = Header { call: word(8..16), signature: word(16..24), piece: word(24..32), len: word(32..40) };
        if h.len > MAX_FRAME_BYTES as u64 {
            return Err(CommError::BadFrame {
                peer,
                message: format!("frame of {} bytes exceeds the {MAX_FRAME_BYTES}-byte limit", h.len),
            });
        }
        Ok(h)
    }
}

pub fn write_frame(w: &mut impl Write, header: &Header, payload: &[u8], peer: usize) -> Result<(), CommError> {
    debug_assert_eq!(header.len as usize, payload.len());
    w.write_all(&header.encode()).and_then(|_| w.write_all(payload)).map_err(|e| CommError::io(peer, "send", e))
}

/// Read one frame straight into `out` (whose length is the expected payload length).
pub fn read_frame_into(r: &mut impl Read, expect: &Header, out: &mut [u8], peer: usize) -> Result<(), CommError> {
    read_header(r, expect, peer)?;
    r.read_exact(out).map_err(|e| CommError::io(peer, "receive", e))
}

/// Read one frame into `out` in slices of `tmp`'s length, combining each slice into place
/// with `apply(out_slice, received_slice)` while it is still in cache.
pub fn read_frame_apply(
    r: &mut impl Read,
    expect: &Header,
    out: &mut [u8],
    tmp: &mut [u8],
    peer: usize,
    mut apply: impl FnMut(&mut [u8], &[u8]),
) -> Result<(), CommError> {
    read_header(r, expect, peer)?;
    for dst in out.chunks_mut(tmp.len().max(1)) {
        let src = &mut tmp[..dst.len()];
        r.read_exact(src).map_err(|e| CommError::io(peer, "receive", e))?;
        apply(dst, src);
    }
    Ok(())
}

fn read_header(r: &mut impl Read, expect: &Header, peer: usize) -> Result<(), CommError> {
    let mut raw = [0u8; HEADER_BYTES];
    r.read_exact(&mut raw).map_err(|e| CommError::io(peer, "receive", e))?;
    let h = Header::decode(&raw, peer)?;
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
        let h = Header { call: 7, signature: 42, piece: 1, len: 3 };
        let mut wire = Vec::new();
        write_frame(&mut wire, &h, b"abc", 1).unwrap();
        let mut buf = [0u8; 3];
        read_frame_into(&mut &wire[..], &h, &mut buf, 1).unwrap();
        assert_eq!(&buf, b"abc");
        // A 4 GiB length is refused before any allocation.
        let mut huge = Header { len: 4 << 30, ..h }.encode().to_vec();
        huge.extend_from_slice(b"abc");
        assert!(matches!(read_frame_into(&mut &huge[..], &h, &mut buf, 1), Err(CommError::BadFrame { .. })));
        let garbage = [0xffu8; 64];
        assert!(matches!(read_frame_into(&mut &garbage[..], &h, &mut buf, 1), Err(CommError::BadFrame { .. })));
        let other = Header { signature: 43, ..h };
        assert!(matches!(read_frame_into(&mut &wire[..], &other, &mut buf, 1), Err(CommError::Mismatch { .. })));
    }
}

//! The wire format: every message is a 56-byte header then the payload. The header
//! carries a magic, the call number with this peer, the call itself (collective, element
//! count, dtype, op, root, peer, algorithm, and the channels, pipeline chunks and
//! all-to-allv matrix that shape its schedule: so a rank that runs a different call is
//! detected, not silently combined, and the error names the field that differs and both
//! values), the piece number, the payload's kind (the bytes themselves, a single-copy
//! descriptor of them, `cma.rs`, or an abort notice) and the payload length, bounded by
//! `MAX_FRAME_BYTES` so a garbage or hostile header never makes us allocate its claimed size.
//! On shared memory a frame that fits in a cache line is followed by padding to the next
//! line (`shm::frame_pad`); a TCP stream carries frames back to back.

use railyard_schedule::{Algorithm, Collective, Dtype};

use crate::error::CommError;
use crate::reduce::RedOp;

pub const MAGIC: u32 = 0x5259_4433; // "RYD3"
pub const HEADER_BYTES: usize = 56;
/// The largest payload of one frame; longer transfers are cut into pieces.
pub const MAX_FRAME_BYTES: usize = 64 << 20;
/// An abort notice's text is at most this long.
pub const MAX_ABORT_BYTES: usize = crate::shm::ABORT_TEXT_BYTES;

/// What follows a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `len` payload bytes.
    Data = 0,
    /// A 16-byte descriptor of `len` bytes in the sender's memory, to pull (`cma.rs`).
    Descriptor = 1,
    /// `len` bytes of text: the sender's first error, which ends the communicator.
    Abort = 2,
}

/// A call as every frame describes it: indices into `Collective::ALL`, `Dtype::ALL`,
/// `RedOp::ALL` and `Algorithm::ALL`, the roots and the element count, and what shapes
/// the schedule beyond them (its channels and pipeline chunks where the algorithm has
/// them, a digest of an all-to-allv's matrix), so ranks that would run different
/// schedules under one name differ here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallSig {
    pub collective: u8,
    pub dtype: u8,
    pub op: u8,
    pub algorithm: u8,
    pub root: u32,
    pub peer: u32,
    pub count: u64,
    pub channels: u8,
    pub chunks: u16,
    pub counts: u32,
}

fn index_of<T: PartialEq>(all: &[T], x: &T) -> u8 {
    all.iter().position(|a| a == x).map_or(u8::MAX, |i| i as u8)
}

fn name<T: Copy>(all: &[T], i: u8, f: impl Fn(T) -> &'static str) -> String {
    all.get(i as usize).map_or_else(|| format!("#{i}"), |&x| f(x).to_string())
}

impl CallSig {
    pub fn new(
        collective: Collective,
        count: u64,
        root: usize,
        peer: usize,
        dtype: Dtype,
        op: RedOp,
        algorithm: Algorithm,
    ) -> CallSig {
        CallSig {
            collective: index_of(&Collective::ALL, &collective),
            dtype: index_of(&Dtype::ALL, &dtype),
            op: index_of(&RedOp::ALL, &op),
            algorithm: index_of(&Algorithm::ALL, &algorithm),
            root: root.min(u32::MAX as usize) as u32,
            peer: peer.min(u32::MAX as usize) as u32,
            count,
            channels: 0,
            chunks: 0,
            counts: 0,
        }
    }

    /// The schedule's shape beyond the call's fields: channels and pipeline chunks
    /// (saturated to the fields' widths; the runtime's limits are far below them) and the
    /// all-to-allv matrix's digest.
    pub fn with_shape(self, channels: usize, chunks: usize, counts: u32) -> CallSig {
        CallSig {
            channels: channels.min(u8::MAX as usize) as u8,
            chunks: chunks.min(u16::MAX as usize) as u16,
            counts,
            ..self
        }
    }

    /// The call's fields by name, as text, in the order a mismatch is reported.
    pub fn fields(&self) -> [(&'static str, String); 10] {
        [
            ("collective", name(&Collective::ALL, self.collective, Collective::as_str)),
            ("size", format!("{} elements", self.count)),
            ("dtype", name(&Dtype::ALL, self.dtype, Dtype::as_str)),
            ("op", name(&RedOp::ALL, self.op, RedOp::as_str)),
            ("root", self.root.to_string()),
            ("peer", self.peer.to_string()),
            ("algorithm", name(&Algorithm::ALL, self.algorithm, Algorithm::as_str)),
            ("channels", self.channels.to_string()),
            ("pipeline chunks", self.chunks.to_string()),
            ("all-to-allv counts", format!("digest {:08x}", self.counts)),
        ]
    }

    /// One line: "all-reduce of 1024 elements, f32, sum, root 0, ring".
    pub fn describe(&self) -> String {
        let f = self.fields();
        format!("{} of {}, {}, {}, root {}, {}", f[0].1, f[1].1, f[2].1, f[3].1, f[4].1, f[6].1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub call: u64,
    pub sig: CallSig,
    pub piece: u64,
    pub len: u64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = self.kind as u8;
        b[5] = self.sig.collective;
        b[6] = self.sig.dtype;
        b[7] = self.sig.op;
        b[8] = self.sig.algorithm;
        b[9] = self.sig.channels;
        b[10..12].copy_from_slice(&self.sig.chunks.to_le_bytes());
        b[12..16].copy_from_slice(&self.sig.root.to_le_bytes());
        b[16..20].copy_from_slice(&self.sig.peer.to_le_bytes());
        b[20..24].copy_from_slice(&self.sig.counts.to_le_bytes());
        b[24..32].copy_from_slice(&self.call.to_le_bytes());
        b[32..40].copy_from_slice(&self.sig.count.to_le_bytes());
        b[40..48].copy_from_slice(&self.piece.to_le_bytes());
        b[48..56].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; HEADER_BYTES], peer: usize) -> Result<Header, CommError> {
        let word = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap_or([0; 8]));
        let half = |r: std::ops::Range<usize>| u32::from_le_bytes(b[r].try_into().unwrap_or([0; 4]));
        let magic = half(0..4);
        if magic != MAGIC {
            return Err(CommError::BadFrame { peer, message: format!("bad magic 0x{magic:08x}") });
        }
        let kind = match b[4] {
            0 => Kind::Data,
            1 => Kind::Descriptor,
            2 => Kind::Abort,
            k => return Err(CommError::BadFrame { peer, message: format!("unknown frame kind {k}") }),
        };
        let sig = CallSig {
            collective: b[5],
            dtype: b[6],
            op: b[7],
            algorithm: b[8],
            root: half(12..16),
            peer: half(16..20),
            count: word(32..40),
            channels: b[9],
            chunks: u16::from_le_bytes([b[10], b[11]]),
            counts: half(20..24),
        };
        let h = Header { kind, call: word(24..32), sig, piece: word(40..48), len: word(48..56) };
        let limit = if kind == Kind::Abort { MAX_ABORT_BYTES } else { MAX_FRAME_BYTES };
        if h.len > limit as u64 {
            return Err(CommError::BadFrame {
                peer,
                message: format!("frame of {} bytes exceeds the {limit}-byte limit", h.len),
            });
        }
        Ok(h)
    }
}

/// Check a received header against the one this rank expects next on that stream; a
/// mismatch names the first field that differs, with both values, and both calls.
pub fn check(h: &Header, expect: &Header, peer: usize) -> Result<(), CommError> {
    let mismatch = |message: String| Err(CommError::Mismatch { peer, message });
    if h.call != expect.call {
        return mismatch(format!(
            "call order: rank {peer} is in its call #{} with this rank ({}), this rank in call #{} ({}): one of them made a call the other did not",
            h.call,
            h.sig.describe(),
            expect.call,
            expect.sig.describe()
        ));
    }
    if h.sig != expect.sig {
        let (theirs, ours) = (h.sig.fields(), expect.sig.fields());
        if let Some(((field, t), (_, o))) = theirs.iter().zip(&ours).find(|(t, o)| t.1 != o.1) {
            return mismatch(format!(
                "{field} differs in call #{}: rank {peer} has {t}, this rank {o} (rank {peer}: {}; this rank: {})",
                h.call,
                h.sig.describe(),
                expect.sig.describe()
            ));
        }
    }
    if h.piece != expect.piece || h.len != expect.len {
        return mismatch(format!(
            "rank {peer} sent piece {} of {} bytes in call #{}, this rank expected piece {} of {}",
            h.piece, h.len, h.call, expect.piece, expect.len
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig() -> CallSig {
        CallSig::new(Collective::AllReduce, 1024, 0, 0, Dtype::F32, RedOp::Sum, Algorithm::Ring).with_shape(1, 1, 0)
    }

    #[test]
    fn round_trip_and_rejections() {
        let h = Header { kind: Kind::Descriptor, call: 7, sig: sig(), piece: 1, len: 3 };
        let back = Header::decode(&h.encode(), 1).unwrap();
        assert_eq!(back, h);
        check(&back, &h, 1).unwrap();
        // A 4 GiB length is refused before any allocation; an abort notice is short.
        let huge = Header { len: 4 << 30, ..h }.encode();
        assert!(matches!(Header::decode(&huge, 1), Err(CommError::BadFrame { .. })));
        let long_abort = Header { kind: Kind::Abort, len: MAX_ABORT_BYTES as u64 + 1, ..h }.encode();
        assert!(matches!(Header::decode(&long_abort, 1), Err(CommError::BadFrame { .. })));
        assert!(matches!(Header::decode(&[0xffu8; HEADER_BYTES], 1), Err(CommError::BadFrame { .. })));
        let mut odd = h.encode();
        odd[4] = 9;
        assert!(matches!(Header::decode(&odd, 1), Err(CommError::BadFrame { .. })));
        assert!(matches!(check(&back, &Header { piece: 2, ..h }, 1), Err(CommError::Mismatch { .. })));
        assert!(matches!(check(&back, &Header { len: 4, ..h }, 1), Err(CommError::Mismatch { .. })));
    }

    proptest::proptest! {
        /// The receive fast path compares raw header bytes with the expected header's
        /// encoding (`progress::take_whole`): equal bytes must be a data header that decodes
        /// and passes `check`, and an encoded header that passes must be
        /// equal. Any 56 bytes, and headers one field off, are tried. (No unsafe code: not
        /// for Miri, where proptest cannot reach its files.)
        #[test]
        #[cfg_attr(miri, ignore)]
        fn equal_bytes_are_exactly_a_header_that_checks(
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), HEADER_BYTES),
            field in 0usize..12,
            delta in 1u64..3,
        ) {
            let want = Header { kind: Kind::Data, call: 5, sig: sig(), piece: 2, len: 64 };
            let mut near = want;
            match field {
                0 => near.call += delta,
                1 => near.piece += delta,
                2 => near.len += delta,
                3 => near.kind = if delta == 1 { Kind::Descriptor } else { Kind::Abort },
                4 => near.sig.count += delta,
                5 => near.sig.root += delta as u32,
                6 => near.sig.dtype += delta as u8,
                7 => near.sig.algorithm += delta as u8,
                8 => near.sig.channels += delta as u8,
                9 => near.sig.chunks += delta as u16,
                10 => near.sig.counts += delta as u32,
                _ => {}
            }
            let raw: [u8; HEADER_BYTES] = raw.try_into().expect("56 bytes");
            for (bytes, encoded) in [(raw, false), (near.encode(), true), (want.encode(), true)] {
                let passes = Header::decode(&bytes, 1)
                    .is_ok_and(|h| h.kind == Kind::Data && check(&h, &want, 1).is_ok());
                let equal = bytes == want.encode();
                proptest::prop_assert!(!equal || passes);
                proptest::prop_assert!(!encoded || equal == passes);
            }
        }
    }

    /// Each field of the call, changed alone, is named with both values.
    #[test]
    fn a_mismatch_names_the_field_and_both_values() {
        let ours = Header { kind: Kind::Data, call: 3, sig: sig(), piece: 0, len: 4096 };
        let cases: [(CallSig, &str, &str, &str); 10] = [
            (CallSig { count: 2048, ..sig() }, "size", "2048 elements", "1024 elements"),
            (CallSig { dtype: 1, ..sig() }, "dtype", "f64", "f32"),
            (CallSig { op: 3, ..sig() }, "op", "max", "sum"),
            (CallSig { root: 2, ..sig() }, "root", "2", "0"),
            (CallSig { peer: 1, ..sig() }, "peer", "1", "0"),
            (CallSig { collective: 2, ..sig() }, "collective", Collective::ALL[2].as_str(), "allreduce"),
            (CallSig { algorithm: 2, ..sig() }, "algorithm", Algorithm::ALL[2].as_str(), "ring"),
            (CallSig { channels: 2, ..sig() }, "channels", "2", "1"),
            (CallSig { chunks: 4, ..sig() }, "pipeline chunks", "4", "1"),
            (CallSig { counts: 0xab, ..sig() }, "all-to-allv counts", "digest 000000ab", "digest 00000000"),
        ];
        for (theirs, field, t, o) in cases {
            let got = Header::decode(&Header { sig: theirs, ..ours }.encode(), 2).unwrap();
            let err = check(&got, &ours, 2).unwrap_err().to_string();
            assert!(err.contains(&format!("{field} differs in call #3: rank 2 has {t}, this rank {o}")), "{err}");
        }
        let err = check(&Header { call: 4, ..ours }, &ours, 2).unwrap_err().to_string();
        assert!(err.contains("call order") && err.contains("#4") && err.contains("#3"), "{err}");
    }
}

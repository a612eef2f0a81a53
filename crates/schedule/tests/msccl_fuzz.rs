//! The MSCCL XML reader on mutated msccl-tools programs: a schedule or an error naming the
//! line, never a panic or a hang.

use proptest::prelude::*;
use railyard_schedule::msccl;

const RING: &str = include_str!("../../../samples/msccl/allreduce_ring_8gpu.xml");
const PAIRS: &str = include_str!("../../../samples/msccl/allreduce_allpairs_8gpu.xml");

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn mutated_programs_never_panic(which in 0usize..2, edits in prop::collection::vec((any::<usize>(), 0usize..24, any::<u8>()), 1..8)) {
        let mut bytes = [RING, PAIRS][which].as_bytes().to_vec();
        let tokens: [&[u8]; 8] = [b"\"-1\"", b"\"99999999\"", b"rrs", b"nop", b"<step/>", b"</tb>", b"\"0\"", b"s"];
        for (at, len, op) in edits {
            let at = at % bytes.len().max(1);
            let end = (at + len).min(bytes.len());
            match op % 3 {
                0 => { bytes.drain(at..end); }
                1 => { bytes.splice(at..at, tokens[op as usize % tokens.len()].iter().copied()); }
                _ => { for b in &mut bytes[at..end] { *b = b.wrapping_add(op); } }
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(program) = msccl::Program::parse(&text) {
            let _ = program.schedule(program.info.chunks, 4);
        }
    }
}

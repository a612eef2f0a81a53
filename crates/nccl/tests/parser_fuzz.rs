//! The nccl-tests parser on random text, mutated real outputs and extreme numbers: a
//! parse or an error naming the problem, never a panic, and every recomputed figure finite.

use proptest::prelude::*;
use railyard_nccl::nccl_tests::{parse, TestKind};

const SEED: &str = include_str!("../../../samples/nccl-tests/seed-000-8.8.txt");
const H100: &str = include_str!("../../../samples/nccl-tests/hgx-h100x2-all_reduce_perf.txt");
const GATHER: &str = include_str!("../../../samples/nccl-tests/hgx-h100x2-all_gather_perf.txt");

fn cases() -> u32 {
    std::env::var("RAILYARD_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

fn all_ways(text: &str) {
    for kind in [None, Some(TestKind::AllReduce), Some(TestKind::Broadcast)] {
        for ranks in [None, Some(2), Some(1 << 20)] {
            if let Ok(o) = parse(text, kind, ranks) {
                for r in &o.rows {
                    for h in [&r.out_of_place, &r.in_place] {
                        assert!(h.algbw_recomputed.is_finite() && h.busbw_recomputed.is_finite(), "{text}");
                    }
                }
            }
        }
    }
}

/// Apply byte-level edits: delete a span, splice in a token, or shift a span's bytes.
fn mutate(base: &str, edits: &[(usize, usize, u8)], tokens: &[&[u8]]) -> String {
    let mut bytes = base.as_bytes().to_vec();
    for &(at, len, op) in edits {
        let at = at % bytes.len().max(1);
        let end = (at + len).min(bytes.len());
        match op % 3 {
            0 => {
                bytes.drain(at..end);
            }
            1 => {
                bytes.splice(at..at, tokens[op as usize % tokens.len()].iter().copied());
            }
            _ => {
                for b in &mut bytes[at..end] {
                    *b = b.wrapping_add(op);
                }
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn garbage_never_panics(text in ".{0,2000}") {
        all_ways(&text);
    }

    #[test]
    fn mutated_outputs_never_panic(which in 0usize..3, edits in prop::collection::vec((any::<usize>(), 0usize..40, any::<u8>()), 1..10)) {
        let tokens: [&[u8]; 8] = [b" ", b"\n", b"-1", b"1e308", b"0", b"N/A", b"nan", b"18446744073709551616"];
        all_ways(&mutate([SEED, H100, GATHER][which], &edits, &tokens));
    }

    #[test]
    fn extreme_rows_are_read_or_refused(size in any::<u64>(), time in prop_oneof![Just("0".to_string()), Just("1e-300".to_string()), Just("1e308".to_string()), any::<f64>().prop_map(|f| f.to_string())]) {
        let text = format!("# Collective test starting: all_reduce_perf\n{size} 1 float sum -1 {time} 1.0 1.0 0 {time} 1.0 1.0 0\n");
        all_ways(&text);
    }
}

const LOG: &str = include_str!("../../../samples/nccl-log/hgx-2x8.log");

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// The log reader on mutated logs: whatever it reads stays within its limits.
    #[test]
    fn mutated_logs_never_panic(edits in prop::collection::vec((any::<usize>(), 0usize..40, any::<u8>()), 1..10)) {
        let tokens: [&[u8]; 7] = [b"->", b"[", b"]", b"-1", b"99999999999", b"/", b" NCCL INFO "];
        let log = railyard_nccl::log::parse(&mutate(LOG, &edits, &tokens));
        prop_assert!(log.ranks.is_none_or(|r| r <= railyard_nccl::log::MAX_RANKS));
        for c in 0..4 {
            let _ = log.tree(c);
        }
    }
}

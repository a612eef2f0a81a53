//! Closed forms of seed 000 §8.1.3–§8.1.4 (α-β and LogP), and the exact forms of our
//! schedules on a uniform full mesh (every pair of ranks on its own link of bandwidth
//! B, α per round), where the per-round model must agree with them. Where the seed's
//! formula and the schedule legitimately differ, the function says how.

use serde::Serialize;

/// α (start-up per round, seconds) and B (bytes per second per link).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AlphaBeta {
    pub alpha_secs: f64,
    pub bytes_per_sec: f64,
}

impl AlphaBeta {
    fn beta(&self) -> f64 {
        1.0 / self.bytes_per_sec
    }
}

/// ⌈log2 p⌉
pub fn log2_ceil(p: usize) -> usize {
    (usize::BITS - p.saturating_sub(1).leading_zeros()) as usize
}

/// Point to point: α + βM.
pub fn p2p(ab: AlphaBeta, bytes: f64) -> f64 {
    ab.alpha_secs + ab.beta() * bytes
}

/// Ring all-reduce: 2(P−1)α + 2(P−1)/P·βM (seed 000 §8.1.3) — exactly the ring schedule:
/// 2(P−1) rounds of one M/P chunk per link.
pub fn ring_all_reduce(ab: AlphaBeta, p: usize, bytes: f64) -> f64 {
    let p = p as f64;
    2.0 * (p - 1.0) * ab.alpha_secs + 2.0 * (p - 1.0) / p * ab.beta() * bytes
}

/// Ring reduce-scatter or all-gather: (P−1)α + (P−1)/P·βM.
pub fn ring_half(ab: AlphaBeta, p: usize, bytes: f64) -> f64 {
    ring_all_reduce(ab, p, bytes) / 2.0
}

/// The seed's tree all-reduce: 2·log2 P·α + 2βM (seed 000 §8.1.3), which assumes the
/// bandwidth term is paid once per phase (perfect pipelining) and depth log2 P.
pub fn tree_all_reduce_seed(ab: AlphaBeta, p: usize, bytes: f64) -> f64 {
    2.0 * (p as f64).log2() * ab.alpha_secs + 2.0 * ab.beta() * bytes
}

/// Our pipelined tree all-reduce on a full mesh: a reduce and a broadcast of C chunks
/// over depth D take D + C − 1 rounds each, every round one chunk M/C per link:
/// 2(D + C − 1)(α + βM/C). With C = 1 it is 2D(α + βM); as C grows the bandwidth term
/// tends to the seed's 2βM while start-ups grow with C — the trade-off the seed's
/// formula hides.
pub fn tree_all_reduce_pipelined(ab: AlphaBeta, depth: usize, chunks: usize, bytes: f64) -> f64 {
    let c = chunks.max(1) as f64;
    2.0 * (depth as f64 + c - 1.0) * (ab.alpha_secs + ab.beta() * bytes / c)
}

/// The seed's recursive halving-doubling: 2·log2 P·α + 2βM (seed 000 §8.1.3).
pub fn rhd_all_reduce_seed(ab: AlphaBeta, p: usize, bytes: f64) -> f64 {
    2.0 * (p as f64).log2() * ab.alpha_secs + 2.0 * ab.beta() * bytes
}

/// Our RHD schedule for a power of two P: the halving steps carry M/2, M/4, …, M/P, so
/// the bandwidth term is 2(P−1)/P·βM — the seed's 2βM rounds (P−1)/P up to 1.
pub fn rhd_all_reduce(ab: AlphaBeta, p: usize, bytes: f64) -> f64 {
    let pf = p as f64;
    2.0 * log2_ceil(p) as f64 * ab.alpha_secs + 2.0 * (pf - 1.0) / pf * ab.beta() * bytes
}

/// All-to-all: (P−1)α + (P−1)/P·βM (seed 000 §8.1.3), M each rank's total — exactly the
/// pairwise schedule (P−1 rounds of one block). The direct schedule sends every block
/// in one round, α + βM/P on a full mesh (but (P−1)/P·βM behind one NIC).
pub fn all_to_all(ab: AlphaBeta, p: usize, bytes: f64) -> f64 {
    let pf = p as f64;
    (pf - 1.0) * ab.alpha_secs + (pf - 1.0) / pf * ab.beta() * bytes
}

/// LogP ring all-reduce (seed 000 §8.1.4): 2(P−1)·max(g, L + 2o), with g the time to
/// push one M/P chunk at B. Bandwidth-bound when g > L + 2o, latency-bound otherwise.
pub fn logp_ring_all_reduce(
    latency_secs: f64,
    overhead_secs: f64,
    bytes_per_sec: f64,
    p: usize,
    bytes: f64,
) -> (f64, &'static str) {
    let pf = p as f64;
    let g = bytes / pf / bytes_per_sec;
    let l2o = latency_secs + 2.0 * overhead_secs;
    let bound = if g > l2o { "bandwidth (g > L + 2o)" } else { "latency (L + 2o ≥ g)" };
    (2.0 * (pf - 1.0) * g.max(l2o), bound)
}

/// nccl-tests' algorithm bandwidth: bytes / time.
pub fn algbw(bytes: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes / secs
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_and_their_relations() {
        let ab = AlphaBeta { alpha_secs: 5e-6, bytes_per_sec: 50e9 };
        let m = 192.0 * 1048576.0;
        // The seed's ring and ours are the same expression.
        assert!((ring_all_reduce(ab, 16, m) - 30.0 * (5e-6 + m / 16.0 / 50e9)).abs() < 1e-15);
        // RHD: ours is below the seed's by 2βM/P.
        assert!((rhd_all_reduce_seed(ab, 16, m) - rhd_all_reduce(ab, 16, m) - 2.0 * m / 16.0 / 50e9).abs() < 1e-12);
        // Pipelining moves the tree toward the seed's bandwidth term.
        assert!(tree_all_reduce_pipelined(ab, 4, 64, m) < tree_all_reduce_pipelined(ab, 4, 1, m));
        let (big, bound) = logp_ring_all_reduce(1e-6, 1e-6, 50e9, 8, m);
        assert!(bound.starts_with("bandwidth") && big > 0.0);
        let (_, bound) = logp_ring_all_reduce(1e-6, 1e-6, 50e9, 8, 64.0);
        assert!(bound.starts_with("latency"));
        assert_eq!((log2_ceil(1), log2_ceil(2), log2_ceil(5), log2_ceil(64)), (0, 1, 3, 6));
    }
}

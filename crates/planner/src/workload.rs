//! A training step's arithmetic (seed 001 §7.1.1, §7.6.4): FLOPs from parameters and
//! tokens, compute time at peak × MFU, the TP message from tokens × hidden × bytes, and
//! the ring all-reduce in α-β form.

/// 6 · params · tokens: forward and backward FLOPs of a dense step (attention's
/// quadratic term left out, as in seed 001 §7.6.4).
pub fn step_flops(params: f64, tokens: f64) -> f64 {
    6.0 * params * tokens
}

/// FLOPs over `gpus` cards at `peak` FLOP/s each and utilisation `mfu`.
pub fn compute_secs(flops: f64, gpus: f64, peak_flops_per_sec: f64, mfu: f64) -> f64 {
    flops / (gpus * peak_flops_per_sec * mfu)
}

/// The hidden-state tensor one TP all-reduce carries: tokens × hidden × bytes per element.
pub fn tp_message_bytes(tokens: f64, hidden: f64, bytes_per_elem: f64) -> f64 {
    tokens * hidden * bytes_per_elem
}

/// Ring all-reduce over `p` ranks: 2(p-1) rounds of α plus 2(p-1)/p · M / B
/// (seed 001 §7.6.3; §7.6.4's TP and local terms).
pub fn ring_allreduce_secs(p: f64, bytes: f64, alpha_secs: f64, bytes_per_sec: f64) -> f64 {
    if p <= 1.0 {
        return 0.0;
    }
    2.0 * (p - 1.0) * alpha_secs + 2.0 * (p - 1.0) / p * bytes / bytes_per_sec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_step_arithmetic() {
        // seed 001 §7.6.4: 6P × 2^20 / (1024 × 405.7 TFLOP/s) ≈ 0.485 s.
        let c = compute_secs(step_flops(32e9, 1048576.0), 1024.0, 989.4e12, 0.41);
        assert!((c - 0.485).abs() < 0.0005, "{c}");
        // 8192 tokens × 5120 × BF16 = 80 MiB.
        assert_eq!(tp_message_bytes(8192.0, 5120.0, 2.0), 80.0 * 1048576.0);
        // seed 001 §7.6.3: 8 ranks, 5 us, 50 GB/s, 8 MiB: about 364 us.
        let t = ring_allreduce_secs(8.0, 8.0 * 1048576.0, 5e-6, 50e9);
        assert!((t - 363.6e-6).abs() < 0.1e-6, "{t}");
    }
}

//! Choosing an algorithm: by predicted time on the given topology and size, explained
//! (the two best and their margin), next to what the seed's NCCL rule of thumb would
//! pick (seed 000 §8.3.4).

use serde::Serialize;

use crate::per_round::Breakdown;

/// The seed's rule of thumb (seed 000 §8.3.4, table 8-2): below 256 KB tree, 256 KB to
/// 4 MB ring, above 4 MB multi-channel ring or CollNet (in-network) where the switches
/// reduce; protocol LL below 16 KB, LL128 to 256 KB, Simple above. The seed writes KB;
/// the thresholds here are binary (256 KiB = 262144 B), as NCCL's constants are.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NcclRule {
    /// "tree", "ring", "ring (multi-channel)" or "collnet"
    pub algorithm: &'static str,
    pub protocol: &'static str,
    pub reason: String,
}

pub fn nccl_rule_of_thumb(bytes: u64, in_network_available: bool) -> NcclRule {
    const KIB: u64 = 1024;
    let (algorithm, why) = if bytes < 256 * KIB {
        ("tree", "< 256 KB: tree (latency first)")
    } else if bytes <= 4 * KIB * KIB {
        ("ring", "256 KB to 4 MB: ring")
    } else if in_network_available {
        ("collnet", "> 4 MB with in-network reduction: CollNet")
    } else {
        ("ring (multi-channel)", "> 4 MB: multi-channel ring")
    };
    let (protocol, pwhy) = if bytes < 16 * KIB {
        ("LL", "< 16 KB: LL")
    } else if bytes <= 256 * KIB {
        ("LL128", "16 KB to 256 KB: LL128")
    } else {
        ("Simple", "> 256 KB: Simple")
    };
    NcclRule { algorithm, protocol, reason: format!("{why}; {pwhy}") }
}

/// Which NCCL family one of our algorithms belongs to (None: NCCL has no such algorithm).
pub fn nccl_family(algorithm: &str) -> Option<&'static str> {
    match algorithm {
        "tree" | "double-tree" => Some("tree"),
        "ring" | "interleaved-ring" | "rail-ring" | "hierarchical" | "chain" => Some("ring"),
        "in-network" | "in-network-chain" => Some("collnet"),
        "nvls" | "nvls-tree" => Some("nvls"),
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub algorithm: String,
    pub secs: f64,
    pub runner_up: Option<String>,
    pub runner_up_secs: Option<f64>,
    /// runner_up / chosen − 1
    pub margin: Option<f64>,
    pub nccl: NcclRule,
    /// Whether our choice is in the family the rule of thumb picks.
    pub agrees_with_nccl: bool,
    /// Whether an algorithm of that family was among those compared: when `--algo`
    /// left it out, a difference is no disagreement.
    pub nccl_family_compared: bool,
}

/// Relative difference below which two predicted times are a tie (float rounding, not a model's verdict).
pub const TIE: f64 = 1e-9;

/// The fastest of `breakdowns`, the first of equals: railyard's one "fastest", what
/// `plan` chooses and what the runtime's tuner runs.
pub fn fastest(breakdowns: &[Breakdown]) -> Option<&Breakdown> {
    breakdowns.iter().min_by(|a, b| a.total_secs.total_cmp(&b.total_secs))
}

/// Pick the fastest of `algorithms` (costed at `bytes`) and explain the pick.
pub fn choose(algorithms: &[Breakdown], bytes: u64, in_network_available: bool) -> Option<Choice> {
    let best = fastest(algorithms)?;
    let second =
        algorithms.iter().filter(|b| !std::ptr::eq(*b, best)).min_by(|a, b| a.total_secs.total_cmp(&b.total_secs));
    let nccl = nccl_rule_of_thumb(bytes, in_network_available);
    let wanted = if nccl.algorithm.starts_with("ring") { "ring" } else { nccl.algorithm };
    // Algorithms as fast as the best (to rounding) tie with it: NCCL's pick among them agrees.
    let tied = |b: &Breakdown| b.total_secs <= best.total_secs * (1.0 + TIE);
    let agrees = algorithms.iter().any(|b| tied(b) && nccl_family(&b.name) == Some(wanted));
    Some(Choice {
        algorithm: best.name.clone(),
        secs: best.total_secs,
        runner_up: second.map(|b| b.name.clone()),
        runner_up_secs: second.map(|b| b.total_secs),
        margin: second.map(|b| if best.total_secs > 0.0 { b.total_secs / best.total_secs - 1.0 } else { 0.0 }),
        agrees_with_nccl: agrees,
        nccl_family_compared: algorithms.iter().any(|b| nccl_family(&b.name) == Some(wanted)),
        nccl,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_of_thumb_thresholds() {
        assert_eq!(nccl_rule_of_thumb(8, false).algorithm, "tree");
        assert_eq!(nccl_rule_of_thumb(8, false).protocol, "LL");
        assert_eq!(nccl_rule_of_thumb(64 << 10, false).protocol, "LL128");
        assert_eq!(nccl_rule_of_thumb(1 << 20, false).algorithm, "ring");
        assert_eq!(nccl_rule_of_thumb(1 << 30, false).algorithm, "ring (multi-channel)");
        assert_eq!(nccl_rule_of_thumb(1 << 30, true).algorithm, "collnet");
    }
}

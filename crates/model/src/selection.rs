//! Choosing an algorithm: by predicted time on the given topology and size, explained
//! (the two best and their margin), next to what the seed's NCCL rule of thumb would
//! pick (seed 000 §8.3.4); and sweeping sizes to find where the fastest changes.

use serde::Serialize;

use crate::error::ModelError;
use crate::plan::{fastest, plan_on};
use crate::request::CollectiveRequest;
use railyard_topology::{Placement, Topology};

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
        "ring" | "interleaved-ring" | "hierarchical" | "chain" => Some("ring"),
        "in-network" => Some("collnet"),
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

/// Pick the fastest of the plan's algorithms and explain the pick.
pub fn choose(plan: &crate::plan::Plan, in_network_available: bool) -> Option<Choice> {
    let best = fastest(&plan.algorithms)?;
    let second =
        plan.algorithms.iter().filter(|b| !std::ptr::eq(*b, best)).min_by(|a, b| a.total_secs.total_cmp(&b.total_secs));
    let nccl = nccl_rule_of_thumb(plan.bytes, in_network_available);
    let wanted = if nccl.algorithm.starts_with("ring") { "ring" } else { nccl.algorithm };
    // Algorithms as fast as the best (to rounding) tie with it: NCCL's pick among them agrees.
    let tied = |b: &crate::per_round::Breakdown| b.total_secs <= best.total_secs * (1.0 + TIE);
    let agrees = plan.algorithms.iter().any(|b| tied(b) && nccl_family(&b.name) == Some(wanted));
    Some(Choice {
        algorithm: best.name.clone(),
        secs: best.total_secs,
        runner_up: second.map(|b| b.name.clone()),
        runner_up_secs: second.map(|b| b.total_secs),
        margin: second.map(|b| if best.total_secs > 0.0 { b.total_secs / best.total_secs - 1.0 } else { 0.0 }),
        agrees_with_nccl: agrees,
        nccl_family_compared: plan.algorithms.iter().any(|b| nccl_family(&b.name) == Some(wanted)),
        nccl,
    })
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    pub bytes: u64,
    pub secs: f64,
    /// bytes / secs
    pub algbw_bytes_per_sec: f64,
    /// algbw x the collective's bus factor (nccl-tests, seed 000 §8.8.1)
    pub busbw_bytes_per_sec: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepSeries {
    pub algorithm: String,
    pub points: Vec<SweepPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Crossover {
    /// The first swept size at which `to` is fastest.
    pub bytes: u64,
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    pub bytes: u64,
    pub fastest: String,
    pub nccl: NcclRule,
    pub agrees_with_nccl: bool,
    /// Whether an algorithm of NCCL's pick was among those swept.
    pub nccl_family_compared: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweep {
    pub topology: String,
    pub collective: railyard_schedule::Collective,
    pub ranks: usize,
    pub sizes: Vec<u64>,
    pub series: Vec<SweepSeries>,
    pub rows: Vec<SweepRow>,
    pub crossovers: Vec<Crossover>,
}

/// Sizes from `from` to `to` multiplying by `factor`, rounded up to whole elements.
pub fn sweep_sizes(from: u64, to: u64, factor: u64, elem_bytes: u64) -> Result<Vec<u64>, ModelError> {
    if factor < 2 || from == 0 || from > to || elem_bytes == 0 {
        return Err(ModelError::BadInput {
            field: "sweep".into(),
            message: "needs 0 < FROM <= TO and a factor of at least 2".into(),
        });
    }
    let mut sizes = Vec::new();
    let mut s = from;
    while s <= to && sizes.len() < 200 {
        sizes.push(s.div_ceil(elem_bytes) * elem_bytes);
        s = s.saturating_mul(factor);
    }
    // The range's end is always swept, even when the factor steps over it.
    if sizes.last().is_some_and(|&l| l < to) {
        sizes.push(to.div_ceil(elem_bytes) * elem_bytes);
    }
    sizes.dedup();
    Ok(sizes)
}

/// Algorithms within 1% of each other are treated as tied.
pub const TIE_MARGIN: f64 = 0.01;

/// `template` at every size of `sizes`: each algorithm's time, the fastest per size
/// (a leader keeps its place through near-ties) and where it changes.
pub fn sweep(topology: &Topology, template: &CollectiveRequest, sizes: &[u64]) -> Result<Sweep, ModelError> {
    let placement = &Placement::new(topology, &template.placement, template.ranks).map_err(ModelError::Placement)?;
    let mut series: Vec<SweepSeries> = Vec::new();
    let mut rows = Vec::new();
    let factor = template.collective.bus_bandwidth_factor(placement.len());
    for &bytes in sizes {
        // A size no algorithm runs at has no row (the others still do).
        let p = match plan_on(topology, placement, &CollectiveRequest { bytes, ..template.clone() }) {
            Err(ModelError::NothingRuns { .. }) => continue,
            p => p?,
        };
        for b in &p.algorithms {
            let point = SweepPoint {
                bytes,
                secs: b.total_secs,
                algbw_bytes_per_sec: crate::closed_form::algbw(bytes as f64, b.total_secs),
                busbw_bytes_per_sec: crate::closed_form::algbw(bytes as f64, b.total_secs) * factor,
            };
            match series.iter_mut().find(|s| s.algorithm == b.name) {
                Some(s) => s.points.push(point),
                None => series.push(SweepSeries { algorithm: b.name.clone(), points: vec![point] }),
            }
        }
        if let Some(c) = p.choice.clone() {
            // A leader keeps its place until another algorithm beats it by more than
            // TIE_MARGIN, so near-ties do not read as crossovers.
            let previous = rows.last().map(|r: &SweepRow| r.fastest.clone());
            let keep = previous.and_then(|name| {
                let t = p.algorithms.iter().find(|b| b.name == name)?.total_secs;
                (t <= c.secs * (1.0 + TIE_MARGIN)).then_some(name)
            });
            let fastest = keep.unwrap_or(c.algorithm);
            let agrees = nccl_family(&fastest)
                == Some(if c.nccl.algorithm.starts_with("ring") { "ring" } else { c.nccl.algorithm })
                || c.agrees_with_nccl;
            rows.push(SweepRow {
                bytes,
                fastest,
                agrees_with_nccl: agrees,
                nccl_family_compared: c.nccl_family_compared,
                nccl: c.nccl,
            });
        }
    }
    let crossovers = rows
        .windows(2)
        .filter(|w| w[0].fastest != w[1].fastest)
        .map(|w| Crossover { bytes: w[1].bytes, from: w[0].fastest.clone(), to: w[1].fastest.clone() })
        .collect();
    Ok(Sweep {
        topology: topology.name.clone(),
        collective: template.collective,
        ranks: placement.len(),
        sizes: sizes.to_vec(),
        series,
        rows,
        crossovers,
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
        assert_eq!(sweep_sizes(8, 64, 2, 4).unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(sweep_sizes(3, 10, 2, 4).unwrap(), vec![4, 8, 12]);
        assert_eq!(sweep_sizes(8, 40, 4, 4).unwrap(), vec![8, 32, 40]);
        assert!(sweep_sizes(0, 10, 2, 4).is_err());
    }
}

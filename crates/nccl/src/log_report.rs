//! What an NCCL log's rings and trees are worth on a topology: each distinct ring (a
//! channel's order) and each channel's tree become railyard schedules of an all-reduce,
//! proved by the symbolic checker and costed by the per-round model; the ring search
//! says what a better order would save; NCCL's own choices in the log are set beside
//! what its tuner (`tuner.rs`) picks from the log's own graph (`Pattern` lines).

use serde::Serialize;

use railyard_model::per_round::cost;
use railyard_model::ring_search::best_ring;
use railyard_schedule::tree::all_reduce_over_trees;
use railyard_schedule::{
    check, generate_compact, ring, Algorithm, Collective, CollectiveSpec, CompactSchedule, ScheduleError,
};
use railyard_topology::{Placement, Topology};

use crate::error::NcclError;
use crate::log::NcclLog;
use crate::tuner::{self, Coll, TunerInput, ALGOS, PROTOS};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostedRing {
    pub channels: Vec<usize>,
    pub order: Vec<usize>,
    /// The symbolic checker's verdict; None above `CHECK_MAX_RANKS`.
    pub checked: Option<bool>,
    pub secs: f64,
    pub bottleneck: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostedTrees {
    pub channels: Vec<usize>,
    /// Distinct trees among them (NCCL's double binary tree has two).
    pub trees: usize,
    pub checked: Option<bool>,
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChoiceCheck {
    pub collective: String,
    pub bytes: u64,
    pub logged: String,
    /// What the tuner reproduced from the log's graph picks.
    pub reproduced: Option<String>,
    pub same: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogReport {
    pub bytes: u64,
    /// Each distinct ring alone, carrying the whole buffer.
    pub rings: Vec<CostedRing>,
    /// Every complete logged ring together, each channel carrying its share of the
    /// buffer — the terms the trees are costed on, and how NCCL runs them.
    pub rings_together: Option<CostedRing>,
    pub trees: Option<CostedTrees>,
    pub tree_problems: Vec<String>,
    /// Rings not costed, and why.
    pub ring_problems: Vec<String>,
    /// The best ring railyard's search finds, and its time.
    pub best_ring: Option<CostedRing>,
    pub transports: Vec<(String, usize)>,
    pub choices: Vec<ChoiceCheck>,
}

/// The checker follows every element of every rank, so schedules are proved on a small
/// instance of the same shape — 64 elements per rank — and costed at the size asked.
pub const CHECK_MAX_RANKS: usize = 64;
/// Ranks above which the ring search is not run (it takes seconds at 64).
pub const RING_SEARCH_MAX_RANKS: usize = 32;

fn small(spec: &CollectiveSpec) -> CollectiveSpec {
    CollectiveSpec::new(spec.collective, spec.ranks, 64 * spec.ranks as u64)
}

/// A ring schedule `make` builds for a spec: proved on the small instance (up to
/// `CHECK_MAX_RANKS`) and costed at `spec`'s size, for the rows of the report.
fn costed(
    make: impl Fn(&CollectiveSpec) -> Result<CompactSchedule, ScheduleError>,
    channels: Vec<usize>,
    order: Vec<usize>,
    spec: &CollectiveSpec,
    topology: &Topology,
    placement: &Placement,
    field: String,
) -> Result<CostedRing, NcclError> {
    let bad = |e: String| NcclError::BadInput { field: field.clone(), message: e };
    let schedule = make(spec).map_err(|e| bad(e.to_string()))?;
    let checked = if spec.ranks <= CHECK_MAX_RANKS {
        let proof = make(&small(spec)).map_err(|e| bad(e.to_string()))?;
        Some(check(&proof.expand()).is_ok())
    } else {
        None
    };
    let b = cost(&schedule, topology, placement).map_err(|e| bad(e.to_string()))?;
    Ok(CostedRing { channels, order, checked, secs: b.total_secs, bottleneck: b.bottleneck.map(|x| x.resource) })
}

fn costed_ring(
    order: &[usize],
    channels: Vec<usize>,
    spec: &CollectiveSpec,
    topology: &Topology,
    placement: &Placement,
) -> Result<CostedRing, NcclError> {
    let field = format!("ring of channel {}", channels.first().map_or("(searched)".into(), |c| c.to_string()));
    let options = railyard_model::gen_options(Algorithm::Ring, 1, 1, Some(order), vec![], Default::default());
    let make = |spec: &CollectiveSpec| generate_compact(Algorithm::Ring, spec, &options, 4);
    costed(make, channels, order.to_vec(), spec, topology, placement, field)
}

/// The logged rings side by side, channel c over its own order and carrying the c-th
/// share of every rank's data, as NCCL's channels split a call.
fn rings_together(
    channels: &[(usize, Vec<usize>)],
    spec: &CollectiveSpec,
    topology: &Topology,
    placement: &Placement,
) -> Result<CostedRing, NcclError> {
    let orders: Vec<Vec<usize>> = channels.iter().map(|(_, o)| o.clone()).collect();
    let make = |spec: &CollectiveSpec| ring::ring_orders(spec, &orders, 4, "nccl-rings");
    let numbers = channels.iter().map(|(c, _)| *c).collect();
    costed(make, numbers, orders[0].clone(), spec, topology, placement, "rings".into())
}

/// Which algorithm/protocol a logged index or name means.
fn logged_name(algo: &str, proto: &str) -> String {
    let a = match algo.parse::<usize>() {
        Ok(i) => ALGOS.get(i).map_or(algo.to_string(), |a| a.as_str().to_string()),
        Err(_) => ALGOS
            .iter()
            .find(|a| a.as_str().eq_ignore_ascii_case(&algo.replace('_', "")))
            .map_or(algo.to_string(), |a| a.as_str().to_string()),
    };
    let p = match proto.parse::<usize>() {
        Ok(i) => PROTOS.get(i).map_or(proto.to_string(), |p| p.as_str().to_string()),
        Err(_) => PROTOS
            .iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(proto))
            .map_or(proto.to_string(), |p| p.as_str().to_string()),
    };
    format!("{a}/{p}")
}

fn coll_of(name: &str) -> Option<Coll> {
    Some(match name.to_ascii_lowercase().as_str() {
        "allreduce" => Coll::AllReduce,
        "allgather" => Coll::AllGather,
        "reducescatter" => Coll::ReduceScatter,
        "broadcast" => Coll::Broadcast,
        "reduce" => Coll::Reduce,
        _ => return None,
    })
}

/// Cost the log's rings and trees for an all-reduce of `bytes` on `topology`, and check
/// its logged choices against the tuner run on `shape` (the log's graph, when it has one).
pub fn report(
    log: &NcclLog,
    topology: &Topology,
    placement: &Placement,
    bytes: u64,
    shape: Option<&TunerInput>,
) -> Result<LogReport, NcclError> {
    let ranks = log.ranks.ok_or_else(|| NcclError::BadInput {
        field: "log".into(),
        message: match log.problems.first() {
            Some((line, why)) => format!("line {line}: {why}: the log does not say how many ranks there are"),
            None => "no `comm … rank r nRanks n` line: the log does not say how many ranks there are".into(),
        },
    })?;
    if placement.len() != ranks {
        return Err(NcclError::BadInput {
            field: "topology".into(),
            message: format!("the log has {ranks} ranks but the topology places {}", placement.len()),
        });
    }
    let spec = CollectiveSpec::new(Collective::AllReduce, ranks, bytes / 4);
    // Distinct rings, with the channels that use each.
    let mut distinct: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    for (&c, order) in &log.rings {
        match distinct.iter_mut().find(|(o, _)| o == order) {
            Some((_, chans)) => chans.push(c),
            None => distinct.push((order.clone(), vec![c])),
        }
    }
    let mut rings = Vec::new();
    let mut ring_problems = Vec::new();
    for (order, channels) in distinct {
        if order.len() != ranks {
            // NCCL prints at most 20 ranks of a ring per line.
            ring_problems.push(format!(
                "channel {}: {} ranks printed of {ranks} (NCCL prints at most 20 per line), not costed",
                channels[0],
                order.len()
            ));
            continue;
        }
        match costed_ring(&order, channels.clone(), &spec, topology, placement) {
            Ok(r) => rings.push(r),
            Err(e) => ring_problems.push(format!("channel {}: {e}", channels[0])),
        }
    }
    // Rings that are orders of every rank (the others are said above, ring by ring).
    let complete: Vec<(usize, Vec<usize>)> =
        log.rings.iter().filter(|(_, o)| ring::check_order(o, ranks).is_ok()).map(|(&c, o)| (c, o.clone())).collect();
    let rings_together = match complete.len() {
        0 | 1 => None,
        _ => match rings_together(&complete, &spec, topology, placement) {
            Ok(r) => Some(r),
            Err(e) => {
                ring_problems.push(format!("the rings together: {e}"));
                None
            }
        },
    };
    // Trees: every channel whose tree is complete; the distinct ones share the data.
    let mut tree_problems = Vec::new();
    let mut trees_found = Vec::new();
    let mut tree_channels = Vec::new();
    for &c in log.trees.keys() {
        match log.tree(c) {
            Ok(t) => {
                tree_channels.push(c);
                if !trees_found.contains(&t) {
                    trees_found.push(t);
                }
            }
            Err(e) => tree_problems.push(e),
        }
    }
    let trees = if trees_found.is_empty() {
        None
    } else {
        match all_reduce_over_trees(&spec, &trees_found, 1, 4, "nccl-trees") {
            Ok(schedule) => {
                let checked = (ranks <= CHECK_MAX_RANKS).then(|| {
                    all_reduce_over_trees(&small(&spec), &trees_found, 1, 4, "nccl-trees")
                        .is_ok_and(|proof| check(&proof.expand()).is_ok())
                });
                let b = cost(&schedule, topology, placement)
                    .map_err(|e| NcclError::BadInput { field: "trees".into(), message: e.to_string() })?;
                Some(CostedTrees { channels: tree_channels, trees: trees_found.len(), checked, secs: b.total_secs })
            }
            Err(e) => {
                tree_problems.push(e.to_string());
                None
            }
        }
    };
    // The search grows steeply with the ranks; beyond these it is not run.
    let best_ring = if rings.is_empty() || ranks > RING_SEARCH_MAX_RANKS {
        None
    } else {
        let search = best_ring(topology, placement, false)
            .map_err(|e| NcclError::BadInput { field: "ring search".into(), message: e.to_string() })?;
        Some(costed_ring(&search.order, Vec::new(), &spec, topology, placement)?)
    };
    let transports = log.transports();
    let mut choices = Vec::new();
    for call in &log.tuned {
        let logged = logged_name(&call.algo, &call.proto);
        let reproduced = match (shape, coll_of(&call.collective)) {
            (Some(input), Some(coll)) => tuner::table(input, coll)
                .ok()
                .and_then(|t| tuner::choose(input, &t, call.bytes))
                .map(|c| format!("{}/{}", c.algo.as_str(), c.proto.as_str())),
            _ => None,
        };
        let same = reproduced.as_deref() == Some(logged.as_str());
        choices.push(ChoiceCheck { collective: call.collective.clone(), bytes: call.bytes, logged, reproduced, same });
    }
    Ok(LogReport { bytes, rings, rings_together, trees, tree_problems, ring_problems, best_ring, transports, choices })
}

/// The tuner's input from the log itself: ranks, nodes and the ring graph's channels and
/// bandwidths (`Pattern 4` is NCCL's ring pattern), where the log has them.
pub fn shape_from_log(log: &NcclLog, arch: tuner::Arch) -> Option<TunerInput> {
    let ranks = log.ranks?;
    let nodes = log.nodes.unwrap_or(1);
    let ring = log.patterns.iter().find(|p| p.pattern == 4).or(log.patterns.first())?;
    let intra_nvlink = ring.type_intra.eq_ignore_ascii_case("NVL") || ring.type_intra.is_empty();
    let algos = log.env.get("NCCL_ALGO").map(|v| crate::shape::parse_algo_env(v, "allreduce")).and_then(Result::ok);
    let protos = log.env.get("NCCL_PROTO").map(|v| crate::shape::parse_proto_env(v, "allreduce")).and_then(Result::ok);
    Some(TunerInput {
        ranks,
        nodes,
        arch,
        cpu: tuner::Cpu::Intel,
        intra_nvlink,
        channels: log.coll_channels.unwrap_or(ring.channels).max(1),
        bw_intra_gb_per_s: ring.bw_intra_gb_per_s,
        bw_inter_gb_per_s: ring.bw_inter_gb_per_s,
        tree_bw_intra_gb_per_s: None,
        nvls_bw_intra_gb_per_s: None,
        nvls_bw_inter_gb_per_s: None,
        nvls_channels: log.nvls_channels.unwrap_or(0),
        collnet: log.collnet_channels.unwrap_or(0) > 0 && nodes > 1,
        pat: nodes == ranks,
        ll128: intra_nvlink,
        latency_inter_us: 0.0,
        algos,
        protos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_topology::{presets::preset, PlacementPolicy};

    /// The logged rings are also costed together, each channel carrying its share — the
    /// terms the trees are costed on — and proved like each ring alone.
    #[test]
    fn the_rings_together_share_the_buffer_as_the_trees_do() {
        let log = crate::log::parse(
            "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 2 localRanks 4 localRank 0\n\
             h:1:1 [0] NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7\n\
             h:1:1 [0] NCCL INFO Channel 01/02 :    0   7   6   5   4   3   2   1\n",
        );
        let t = preset("rail:servers=2,gpus=4").unwrap();
        let p = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
        let r = report(&log, &t, &p, 64 << 20, None).unwrap();
        assert_eq!(r.rings.len(), 2);
        let together = r.rings_together.expect("two rings");
        assert_eq!((together.channels.clone(), together.checked), (vec![0, 1], Some(true)));
        // Opposite directions use both directions of every link: together they take
        // half of what either ring alone takes with the whole buffer.
        let alone = r.rings.iter().map(|x| x.secs).fold(f64::INFINITY, f64::min);
        assert!(together.secs < 0.6 * alone, "{} vs {alone}", together.secs);
    }
}

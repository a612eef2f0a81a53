//! `railyard plan`: generate the schedule of each requested algorithm for a collective
//! on a placed topology, cost each with the per-round model, and compare.

use railyard_schedule::{generate_compact, Algorithm, Collective, CollectiveSpec, GenOptions, Rank};
use railyard_topology::{Placement, RouteTable, Topology};
use serde::Serialize;

use crate::error::ModelError;
use crate::per_round::{cost_with, Breakdown};

#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    pub collective: Collective,
    pub bytes: u64,
    pub elem_bytes: u64,
    pub algorithms: Vec<Algorithm>,
    /// Ring order for `ring` (rank order when `None`).
    pub order: Option<Vec<Rank>>,
    /// Server groups for the hierarchical algorithms (the placement's servers when `None`).
    pub groups: Option<Vec<Vec<Rank>>>,
    /// Root of rooted collectives.
    pub root: Rank,
    /// Parallel rings for ring algorithms.
    pub channels: usize,
    /// Pipelined chunks for chain and trees; `None` tries powers of two up to 128 and keeps the fastest.
    pub pipeline_chunks: Option<usize>,
    /// When set, an algorithm that cannot run here is an error rather than a skipped entry.
    pub strict: bool,
}

impl PlanRequest {
    /// A request for `algorithms` with every option at its default: rank order, servers
    /// as groups, root 0, one channel, pipeline chunks searched, unavailable ones skipped.
    pub fn new(collective: Collective, bytes: u64, elem_bytes: u64, algorithms: Vec<Algorithm>) -> Self {
        PlanRequest {
            collective,
            bytes,
            elem_bytes,
            algorithms,
            order: None,
            groups: None,
            root: 0,
            channels: 1,
            pipeline_chunks: None,
            strict: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub topology: String,
    pub collective: Collective,
    pub bytes: u64,
    pub elem_bytes: u64,
    pub ranks: usize,
    pub round_startup_secs: f64,
    /// How routes were chosen ("path-type" or "widest").
    pub routing: &'static str,
    pub algorithms: Vec<Breakdown>,
    pub skipped: Vec<Skipped>,
    /// Name of the fastest algorithm.
    pub fastest: Option<String>,
}

pub fn plan(topology: &Topology, placement: &Placement, request: &PlanRequest) -> Result<Plan, ModelError> {
    if request.elem_bytes == 0 || !request.bytes.is_multiple_of(request.elem_bytes) {
        return Err(ModelError::SizeNotMultiple { bytes: request.bytes, elem_bytes: request.elem_bytes });
    }
    let count = request.bytes / request.elem_bytes;
    let spec = CollectiveSpec::new(request.collective, placement.len(), count).with_root(request.root);
    let groups = request.groups.clone().unwrap_or_else(|| placement.ranks_by_server(topology));
    let mut algorithms = Vec::new();
    let mut skipped = Vec::new();
    // One route table for every algorithm and pipeline variant: they use the same pairs.
    let mut routes = RouteTable::new(topology);
    // Each algorithm once, in the order asked (`--algo ring,ring` is one ring).
    let mut asked = Vec::with_capacity(request.algorithms.len());
    for &algorithm in &request.algorithms {
        if !asked.contains(&algorithm) {
            asked.push(algorithm);
        }
    }
    // An option no algorithm asked for follows is a mistake to say, not to drop.
    let runs = |a: &Algorithm| a.supports(request.collective);
    let names = || asked.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ");
    if let Some(groups) = &request.groups {
        let mut seen = vec![false; placement.len()];
        for &r in groups.iter().flatten() {
            let problem = if r >= seen.len() {
                Some(format!("rank {r} is out of range 0..{}", seen.len()))
            } else if seen[r] {
                Some(format!("rank {r} is in two groups"))
            } else {
                None
            };
            if let Some(message) = problem {
                return Err(ModelError::BadInput { field: "--groups".into(), message });
            }
            seen[r] = true;
        }
        if let Some(r) = seen.iter().position(|&s| !s) {
            return Err(ModelError::BadInput { field: "--groups".into(), message: format!("rank {r} is in no group") });
        }
    }
    let unused = |option: &str, takers: &str, takes: fn(&Algorithm) -> bool| {
        let why = match asked.iter().find(|a| takes(a)) {
            Some(a) => format!("{a} takes it but does not run {}", request.collective.as_str()),
            None => format!("none of the algorithms asked ({}) is one", names()),
        };
        ModelError::BadInput { field: option.into(), message: format!("sets the order of {takers}, and {why}") }
    };
    if request.order.is_some() && !asked.iter().filter(|a| runs(a)).any(|a| a.uses_order()) {
        return Err(unused("--order", "ring and chain", |a| a.uses_order()));
    }
    if request.groups.is_some() && !asked.iter().filter(|a| runs(a)).any(|a| a.uses_groups()) {
        return Err(unused("--groups", "hierarchical, in-network and interleaved-ring (their server groups)", |a| {
            a.uses_groups()
        }));
    }
    for &algorithm in &asked {
        let chunk_choices: Vec<usize> = match (algorithm.pipelined(), request.pipeline_chunks) {
            (false, _) => vec![1],
            (true, Some(c)) => vec![c.max(1)],
            (true, None) => (0..8).map(|k| 1usize << k).filter(|&c| c == 1 || (c as u64) <= count).collect(),
        };
        let mut best: Option<Result<Breakdown, ModelError>> = None;
        for chunks in chunk_choices {
            let options = GenOptions {
                groups: groups.clone(),
                order: if matches!(algorithm, Algorithm::Ring | Algorithm::Chain) {
                    request.order.clone()
                } else {
                    None
                },
                channels: request.channels.max(1),
                pipeline_chunks: chunks,
                ..GenOptions::default()
            };
            let result = generate_compact(algorithm, &spec, &options, request.elem_bytes)
                .map_err(ModelError::from)
                .and_then(|schedule| cost_with(&schedule, &mut routes, placement))
                .map(|mut b| {
                    b.pipeline_chunks = algorithm.pipelined().then_some(chunks);
                    b.channels = if algorithm.uses_channels() { options.channels } else { 1 };
                    b
                });
            best = match (best, result) {
                (Some(Ok(a)), Ok(b)) => Some(Ok(if b.total_secs < a.total_secs { b } else { a })),
                (Some(Ok(a)), Err(_)) => Some(Ok(a)),
                (_, r) => Some(r),
            };
        }
        let Some(result) = best else { continue };
        if !algorithm.supports(request.collective) && !request.strict {
            continue;
        }
        match result {
            Ok(breakdown) => algorithms.push(breakdown),
            Err(e) if !request.strict => skipped.push(Skipped { name: algorithm.to_string(), reason: e.to_string() }),
            Err(e) => return Err(e),
        }
    }
    let fastest = algorithms.iter().min_by(|a, b| a.total_secs.total_cmp(&b.total_secs)).map(|b| b.name.clone());
    Ok(Plan {
        topology: topology.name.clone(),
        collective: request.collective,
        bytes: request.bytes,
        elem_bytes: request.elem_bytes,
        ranks: placement.len(),
        round_startup_secs: topology.round_startup_secs,
        routing: topology.routing.as_str(),
        algorithms,
        skipped,
        fastest,
    })
}

//! `railyard plan`: generate the schedule of each requested algorithm for a collective
//! on a placed topology, cost each with the per-round model, and compare.

use railyard_schedule::{generate, Algorithm, Collective, CollectiveSpec, Rank};
use railyard_topology::{Placement, Topology};
use serde::Serialize;

use crate::error::ModelError;
use crate::per_round::{cost, Breakdown};

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
    /// When set, an algorithm that cannot run here is an error rather than a skipped entry.
    pub strict: bool,
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
    pub algorithms: Vec<Breakdown>,
    pub skipped: Vec<Skipped>,
    /// Name of the fastest algorithm.
    pub fastest: Option<String>,
}

pub fn plan(topology: &Topology, placement: &Placement, request: &PlanRequest) -> Result<Plan, ModelError> {
    if request.elem_bytes == 0 || !request.bytes.is_multiple_of(request.elem_bytes) {
        return Err(ModelError::SizeNotMultiple { bytes: request.bytes, elem_bytes: request.elem_bytes });
    }
    let spec = CollectiveSpec::new(request.collective, placement.len(), request.bytes / request.elem_bytes);
    let groups = request.groups.clone().unwrap_or_else(|| placement.ranks_by_server(topology));
    let mut algorithms = Vec::new();
    let mut skipped = Vec::new();
    for &algorithm in &request.algorithms {
        let order = if algorithm == Algorithm::Ring { request.order.as_deref() } else { None };
        let result = generate(algorithm, spec, &groups, order, request.elem_bytes)
            .map_err(ModelError::from)
            .and_then(|schedule| cost(&schedule, topology, placement));
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
        algorithms,
        skipped,
        fastest,
    })
}

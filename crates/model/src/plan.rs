//! `railyard plan`: the request resolved (`request.rs`), each variant costed with the
//! per-round model, the fastest taken and the choice explained. What the CLI, Python,
//! the runtime's tuner, the training planner and the NCCL readers all call.

use railyard_schedule::Collective;
use railyard_topology::{Achievable, Placement, RouteTable, Topology};
use serde::Serialize;

use crate::error::ModelError;
use crate::per_round::Breakdown;
use crate::request::{resolve_with_routes, CollectiveRequest, Costs, Resolved, Skipped};
use crate::selection::{choose, fastest, Choice};

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
    /// The fastest, explained: the runner-up and its margin, NCCL's rule of thumb beside it.
    pub choice: Option<Choice>,
    /// Name of the algorithm with the least expected time (at achievable rates).
    pub fastest_expected: Option<String>,
    /// The rates the expected times assume.
    pub achievable: Achievable,
    /// What the topology is built of (GPUs, NICs, switches): what a sweep weighs time against.
    pub hardware: railyard_topology::Hardware,
}

impl Plan {
    /// The fastest algorithm's cost.
    pub fn fastest(&self) -> Option<&Breakdown> {
        fastest(&self.algorithms)
    }
}

/// Cost every algorithm of `request` on `topology`, placed as the request says. Refused
/// when none can run (`ModelError::NothingRuns`, with why each was skipped).
pub fn plan(topology: &Topology, request: &CollectiveRequest) -> Result<Plan, ModelError> {
    let placement = Placement::new(topology, &request.placement, request.ranks).map_err(ModelError::Placement)?;
    plan_on(topology, &placement, request)
}

/// [`plan`] on a placement already made.
pub fn plan_on(topology: &Topology, placement: &Placement, request: &CollectiveRequest) -> Result<Plan, ModelError> {
    plan_with_routes(&mut RouteTable::new(topology), placement, request)
}

/// [`plan_on`] with a route table the caller keeps across many requests on one
/// topology (the training planner costs hundreds of groups on one large fabric).
pub fn plan_with_routes(
    routes: &mut RouteTable,
    placement: &Placement,
    request: &CollectiveRequest,
) -> Result<Plan, ModelError> {
    let topology = routes.topology();
    let Resolved { placement, variants, skipped, .. } = resolve_with_routes(routes, placement, request, Costs::Every)?;
    let mut algorithms = Vec::with_capacity(variants.len());
    for v in variants {
        let Some(mut b) = v.breakdown else { continue };
        b.name = v.algorithm.to_string();
        b.algorithm = v.algorithm;
        b.pipeline_chunks = v.pipeline_chunks;
        b.channels = v.channels;
        algorithms.push(b);
    }
    if algorithms.is_empty() {
        return Err(ModelError::NothingRuns { skipped: skipped.into_iter().map(|s| (s.name, s.reason)).collect() });
    }
    let mut plan = Plan {
        topology: topology.name.clone(),
        collective: request.collective,
        bytes: request.bytes,
        elem_bytes: request.elem_bytes,
        ranks: placement.len(),
        round_startup_secs: topology.round_startup_secs,
        routing: topology.routing.as_str(),
        fastest: fastest(&algorithms).map(|b| b.name.clone()),
        fastest_expected: algorithms
            .iter()
            .min_by(|a, b| a.expected_secs.total_cmp(&b.expected_secs))
            .map(|b| b.name.clone()),
        algorithms,
        skipped,
        choice: None,
        achievable: topology.achievable.clone(),
        hardware: routes.hardware(),
    };
    plan.choice = choose(&plan.algorithms, plan.bytes, request.in_network_available(topology));
    Ok(plan)
}

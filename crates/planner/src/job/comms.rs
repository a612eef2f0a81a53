//! The collectives of a training step, each a railyard schedule on the job's topology:
//! one group of each layout dimension placed by the rank order (`Layout::group`),
//! costed by the per-round model at the rates NCCL-class software reaches
//! (`Breakdown::expected_secs`) with the fastest of NCCL's algorithms, so a layout is
//! weighed by what its communication costs on these links, not by a closed form.
//! Costings are cached by group, collective and size: a layout search asks for the
//! same few many times.
//!
//! With `Engine::Sim` the fastest algorithm's schedule also runs through the flow-level
//! simulator (its defaults: rank-order start, paths split over equal-cost routes), at
//! line rates as the model's bound is, and the simulated makespan over that bound scales
//! the expected time: secs = expected × simulated / bound. The achievable rates stay the
//! model's; flows sharing links are the simulator's (the factor is below 1 where rounds
//! overlap). The group runs beside the other groups of its dimension that share a NIC
//! side with it — a GPU on the same server and rail (its NIC and PCIe switch) — since
//! they run the same collective at the same time through the same NIC; those sharing
//! most first, as many whole groups as fit in `MAX_SIM_RANKS` ranks with it. Collectives
//! that left some out for that are counted (`simulated_without_all_neighbours`), and
//! groups of more than `MAX_SIM_RANKS` ranks are timed by the model, and counted
//! (`simulated_by_model`). Groups that share only a server meet at its NVSwitch (a port
//! per GPU); groups on other servers only above the leaves, which this does not see.

use std::cell::RefCell;
use std::collections::HashSet;

use rustc_hash::FxHashMap;

use railyard_model::nccl_family::{nccl_algorithms, nccl_inter_stage, Spread};
use railyard_model::{plan_with_routes, resolve_on, ChunkPolicy, CollectiveRequest};
use railyard_schedule::{Algorithm, Collective};
use railyard_sim::{simulate, JobSpec, SimOptions};
use railyard_topology::{Placement, RouteTable, Topology};

use crate::comm::{Engine, MAX_SIM_RANKS};
use crate::error::PlannerError;

/// The most distinct costings one job may ask for (each is a schedule costed on the
/// topology; a search of thousands of layouts needs a few hundred).
pub const MAX_COSTINGS: usize = 4096;
/// The largest collective costed (2^50 bytes, 1 PiB): sizes stay exact in f64 and u64.
pub const MAX_COSTED_BYTES: f64 = (1u64 << 50) as f64;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    ranks: Vec<u64>,
    /// The groups simulated beside it (none under the model).
    beside: Vec<Vec<u64>>,
    collective: Collective,
    bytes: u64,
}

/// One costed collective.
#[derive(Debug, Clone, PartialEq)]
pub struct Costed {
    pub secs: f64,
    /// The algorithm that was fastest.
    pub algorithm: String,
}

pub struct Comms<'a> {
    topology: &'a Topology,
    engine: Engine,
    /// One route table for every costing: its index of a large fabric is built once.
    routes: RefCell<RouteTable<'a>>,
    /// Keyed by whole rank lists: a fast hash, as a large group's key is long.
    known: RefCell<FxHashMap<Key, Costed>>,
    /// Under `Engine::Sim`, collectives whose group was too large to simulate.
    too_large_to_simulate: std::cell::Cell<usize>,
    /// Under `Engine::Sim`, collectives simulated without some of the groups that share
    /// their NICs (more ranks than `MAX_SIM_RANKS` together).
    crowded: std::cell::Cell<usize>,
}

impl<'a> Comms<'a> {
    pub fn new(topology: &'a Topology, engine: Engine) -> Self {
        Comms {
            topology,
            engine,
            routes: RefCell::new(RouteTable::new(topology)),
            known: RefCell::new(FxHashMap::default()),
            too_large_to_simulate: std::cell::Cell::new(0),
            crowded: std::cell::Cell::new(0),
        }
    }

    /// Under `Engine::Sim`, how many collectives were simulated without some of the
    /// groups sharing their NICs (over `MAX_SIM_RANKS` ranks together).
    pub fn simulated_without_all_neighbours(&self) -> usize {
        self.crowded.get()
    }

    /// Under `Engine::Sim`, how many collectives had groups over `MAX_SIM_RANKS` ranks and
    /// were timed by the model alone.
    pub fn simulated_by_model(&self) -> usize {
        self.too_large_to_simulate.get()
    }

    /// Whether job ranks `a` and `b` sit in one server (ranks beyond the topology's GPUs
    /// are in none: `time` refuses them).
    pub fn same_server(&self, a: u64, b: u64) -> bool {
        let t = self.topology;
        let server = |r: u64| t.default_ranks.get(r as usize).map(|&d| t.server_of(d));
        matches!((server(a), server(b)), (Some(x), Some(y)) if x == y)
    }

    /// How many distinct collectives were costed.
    pub fn costings(&self) -> usize {
        self.known.borrow().len()
    }

    /// The time of `collective` of `bytes` (the large buffer, as nccl-tests counts it)
    /// among `ranks` (job ranks, placed on the topology's GPUs in order), while `groups`
    /// (every group of its dimension, asked for only by the simulator) run it too. One
    /// rank, or nothing to move, costs nothing.
    pub fn time(
        &self,
        ranks: &[u64],
        groups: &dyn Fn() -> Vec<Vec<u64>>,
        collective: Collective,
        bytes: f64,
    ) -> Result<Costed, PlannerError> {
        if ranks.len() < 2 || bytes < 1.0 {
            return Ok(Costed { secs: 0.0, algorithm: "none".into() });
        }
        // The planner's sizes are derived, not given: rounded to whole 2-byte elements
        // that split evenly over the ranks and 128 pipeline chunks (under 0.01% of any
        // size that matters), so a ring's rounds are alike and costed once, not P².
        let unit = ranks.len() as f64 * 2.0 * 128.0;
        if bytes > MAX_COSTED_BYTES {
            return Err(PlannerError::bad(
                "job",
                format!(
                    "a {} collective of {bytes:e} bytes is more than the {MAX_COSTED_BYTES:e} costed",
                    collective.as_str()
                ),
            ));
        }
        let bytes = ((bytes / unit).round().max(1.0) * unit) as u64;
        let (beside, left_out) = match self.engine {
            Engine::Sim if ranks.len() <= MAX_SIM_RANKS => self.neighbours(ranks, groups()),
            _ => (Vec::new(), false),
        };
        let key = Key { ranks: ranks.to_vec(), beside, collective, bytes };
        if let Some(c) = self.known.borrow().get(&key) {
            return Ok(c.clone());
        }
        if self.known.borrow().len() >= MAX_COSTINGS {
            return Err(PlannerError::bad(
                "job",
                format!(
                    "the search needs more than {MAX_COSTINGS} distinct collectives costed; fix some of the layout"
                ),
            ));
        }
        let costed = self.cost(ranks, &key.beside, collective, bytes)?;
        if left_out {
            self.crowded.set(self.crowded.get() + 1);
        }
        self.known.borrow_mut().insert(key, costed.clone());
        Ok(costed)
    }

    /// The groups of `groups` other than `ranks` that share a server's NIC side with it
    /// — a rank on the same server and rail (its NIC and PCIe switch), or on the same
    /// server where the topology names no rails — those sharing the most first, as many
    /// as fit in `MAX_SIM_RANKS` ranks beside it; and whether some that share were left
    /// out. Groups that share only a server meet at its NVSwitch, one port per GPU.
    fn neighbours(&self, ranks: &[u64], groups: Vec<Vec<u64>>) -> (Vec<Vec<u64>>, bool) {
        let t = self.topology;
        let port =
            |r: u64| t.default_ranks.get(r as usize).map(|&d| (t.server_of(d), t.devices.get(d).and_then(|x| x.rail)));
        // Per server of the group: its rails, and whether one of its GPUs has none.
        let mut mine: FxHashMap<&str, (HashSet<u32>, bool)> = FxHashMap::default();
        for (server, rail) in ranks.iter().filter_map(|&r| port(r)) {
            let e = mine.entry(server).or_default();
            match rail {
                Some(x) => {
                    e.0.insert(x);
                }
                None => e.1 = true,
            }
        }
        let shares = |r: u64| {
            port(r).is_some_and(|(server, rail)| {
                mine.get(server).is_some_and(|(rails, any)| *any || rail.is_none_or(|x| rails.contains(&x)))
            })
        };
        let mut sharing: Vec<(usize, Vec<u64>)> = groups
            .into_iter()
            .filter(|g| g.as_slice() != ranks)
            .map(|g| (g.iter().filter(|&&r| shares(r)).count(), g))
            .filter(|(n, _)| *n > 0)
            .collect();
        sharing.sort_by_key(|s| std::cmp::Reverse(s.0));
        let mut room = MAX_SIM_RANKS.saturating_sub(ranks.len());
        let mut beside = Vec::new();
        let mut left_out = false;
        for (_, g) in sharing {
            if g.len() > room {
                left_out = true;
                continue;
            }
            room -= g.len();
            beside.push(g);
        }
        (beside, left_out)
    }

    fn placement(&self, ranks: &[u64]) -> Result<Placement, PlannerError> {
        let t = self.topology;
        let mut devices = Vec::with_capacity(ranks.len());
        for &r in ranks {
            let Some(&d) = t.default_ranks.get(r as usize) else {
                return Err(PlannerError::bad(
                    "job.topo",
                    format!("rank {r} of the layout is beyond the topology's {} GPUs", t.default_ranks.len()),
                ));
            };
            devices.push(d);
        }
        Ok(Placement { devices })
    }

    fn cost(
        &self,
        ranks: &[u64],
        beside: &[Vec<u64>],
        collective: Collective,
        bytes: u64,
    ) -> Result<Costed, PlannerError> {
        let t = self.topology;
        let placement = self.placement(ranks)?;
        // Point to point (a pipeline stage's activations) is a two-rank broadcast.
        let (collective, mut algorithms) = match collective {
            Collective::SendRecv => (Collective::Broadcast, vec![Algorithm::Direct]),
            c => (c, nccl_algorithms(c, Spread::of(t, &placement))),
        };
        // Plain rings stand in where the rail-aligned ones do not fit the group.
        if algorithms.contains(&Algorithm::RailRing) {
            algorithms.push(Algorithm::Ring);
        }
        // With one GPU per server there is nothing for NVLS or a hierarchy to do inside
        // a server (NCCL does not run NVLS with one rank per node): they would only
        // repeat the flat algorithms, at the price of a reduction-switch search per
        // server.
        let per_server = placement.ranks_by_server(t).iter().map(Vec::len).max().unwrap_or(0);
        if per_server <= 1 {
            algorithms.retain(|a| !matches!(a, Algorithm::Nvls | Algorithm::NvlsTree | Algorithm::Hierarchical));
        }
        let request = CollectiveRequest {
            strict: false,
            chunks: ChunkPolicy::SearchAll,
            inter_stage: nccl_inter_stage(collective, &algorithms),
            ..CollectiveRequest::new(collective, bytes, 2, algorithms)
        };
        let plan = plan_with_routes(&mut self.routes.borrow_mut(), &placement, &request)
            .map_err(|cause| PlannerError::Model { field: "job".into(), cause: Box::new(cause) })?;
        let best = plan
            .algorithms
            .iter()
            .min_by(|a, b| a.expected_secs.total_cmp(&b.expected_secs))
            .ok_or_else(|| PlannerError::bad("job", format!("no algorithm runs a {collective:?} here")))?;
        let secs = match self.engine {
            Engine::Model => best.expected_secs,
            Engine::Sim if placement.len() > MAX_SIM_RANKS => {
                self.too_large_to_simulate.set(self.too_large_to_simulate.get() + 1);
                best.expected_secs
            }
            Engine::Sim => {
                let railyard_model::AlgorithmRef::Builtin(algorithm) = best.algorithm.clone() else {
                    return Err(PlannerError::bad(
                        "job",
                        format!("{} is no built-in algorithm to simulate", best.name),
                    ));
                };
                let chunks = best.pipeline_chunks.unwrap_or(1);
                let mut placements = vec![placement];
                for g in beside {
                    placements.push(self.placement(g)?);
                }
                let simulated = self.simulate(&placements, &request, algorithm, chunks)?;
                best.expected_secs * simulated / best.total_secs
            }
        };
        Ok(Costed { secs, algorithm: best.name.clone() })
    }

    /// The makespan of `algorithm` (cut into `chunks`) for `request` in the flow-level
    /// simulator, run at once by a group on each of `placements`.
    fn simulate(
        &self,
        placements: &[Placement],
        request: &CollectiveRequest,
        algorithm: Algorithm,
        chunks: usize,
    ) -> Result<f64, PlannerError> {
        let model_err = |cause| PlannerError::Model { field: "job".into(), cause: Box::new(cause) };
        let one = CollectiveRequest {
            algorithms: vec![railyard_model::AlgorithmSpec::Builtin(algorithm)],
            chunks: ChunkPolicy::Fixed(chunks),
            // As the plan crossed servers for it; an algorithm that crosses no other way
            // takes the default (the request refuses an option nothing asked for uses).
            inter_stage: if algorithm.uses_inter_stage() { request.inter_stage } else { Default::default() },
            ..request.clone()
        };
        let mut schedules = Vec::with_capacity(placements.len());
        for placement in placements {
            let resolved = resolve_on(self.topology, placement, &one).map_err(model_err)?;
            let variant = resolved
                .variants
                .into_iter()
                .next()
                .ok_or_else(|| PlannerError::bad("job", format!("{algorithm} does not run here")))?;
            schedules.push(variant.schedule);
        }
        let jobs: Vec<JobSpec> = schedules
            .iter()
            .zip(placements)
            .enumerate()
            .map(|(i, (schedule, placement))| {
                JobSpec::new(format!("{algorithm} {i}"), schedule, placement.clone(), 0.0)
            })
            .collect();
        let report = simulate(self.topology, &jobs, &SimOptions::default())
            .map_err(|e| PlannerError::Sim { field: "job".into(), message: e.to_string() })?;
        Ok(report.makespan_secs)
    }
}

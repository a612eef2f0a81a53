//! Where a communication time comes from: given outright, the cut bound of seed 001
//! §7.1.2 (T_C = V_C / B_C), or a collective's schedule on a topology — costed by the
//! per-round model (`--engine model`) or run through the flow-level simulator
//! (`--engine sim`). Requests in flight (§7.3.4) cap the NICs' throughput at
//! B_eff = min(B, N·m/T, m/δ) before the schedule is costed (§7.6.2, figure 7-56).

use railyard_model::{cost, resolve_on, CollectiveRequest};
use railyard_netmodels::concurrency::{concurrency, ConcurrencyInput};
use railyard_schedule::{Algorithm, Collective};
use railyard_sim::{simulate, JobSpec, SimOptions};
use railyard_topology::{LinkClass, Placement, PlacementPolicy, Topology};
use railyard_units::quantity;
use serde::{Deserialize, Serialize};

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::error::{positive, within, PlannerError, MAX_SECS};

/// How schedules are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// The per-round resource model (seed 001 §7.2.1).
    #[default]
    Model,
    /// The flow-level simulator.
    Sim,
}

/// Requests in flight per NIC (seed 001 §7.3.4): N slots of m bytes, each held T.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InFlight {
    pub slots: u64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub request_bytes: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub slot_secs: f64,
    /// δ, the shortest interval between two issued requests (0: no issue limit).
    #[serde(default, deserialize_with = "quantity::secs")]
    pub issue_interval_secs: f64,
}

/// One communication. Exactly one of: `secs`; `cut_bytes` with `cut_bytes_per_sec`; or
/// `topo` with `algo` and `size_bytes` (and optionally `collective`, `elem_bytes`,
/// `in_flight`). A timeline's entry is laid over its section's default entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CommInput {
    #[serde(default, deserialize_with = "quantity::optional_secs", skip_serializing_if = "Option::is_none")]
    pub secs: Option<f64>,
    #[serde(default, deserialize_with = "quantity::optional_bytes", skip_serializing_if = "Option::is_none")]
    pub cut_bytes: Option<f64>,
    #[serde(default, deserialize_with = "quantity::optional_bytes_per_sec", skip_serializing_if = "Option::is_none")]
    pub cut_bytes_per_sec: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algo: Option<String>,
    #[serde(default, deserialize_with = "quantity::optional_bytes", skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elem_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlight>,
}

/// A communication's time and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommTime {
    pub secs: f64,
    /// Rounds × α, where a schedule was costed by the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_secs: Option<f64>,
    /// Bytes between ranks on different servers, where a schedule was costed by the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_server_bytes: Option<f64>,
    /// The NIC throughput the requests in flight allow, where they were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic_bytes_per_sec: Option<f64>,
    /// In words: "ring, allreduce of 192 MiB on hgx-h100x2 (per-round model)".
    pub source: String,
}

/// The largest message a planner communication may carry (1 PiB).
pub const MAX_COMM_BYTES: f64 = (1u64 << 50) as f64;

/// The work one scenario may ask of the engines, counted before each costing as ranks²
/// (a ring whose size does not split evenly is costed round by round: about ranks² transfers;
/// a cached costing is free; the simulator counts 16 per unit): 2^25 is 2 costings of 4,096
/// ranks, 32 of 1,024 or 2,048 of 128 — about 20 s at worst here.
pub const MAX_COSTED_WORK: u64 = 1 << 25;
/// The most ranks one costing may have in a scenario (`railyard plan` takes more).
pub const MAX_COSTED_RANKS: usize = 4096;
/// The most ranks a schedule run through the simulator may have here.
pub const MAX_SIM_RANKS: usize = 512;

/// Times communications for one scenario run: the engine, a cache of what was already
/// costed (timelines often repeat a schedule) and the budget of work left.
pub struct Coster {
    pub engine: Engine,
    known: RefCell<Vec<(CacheKey, CommTime)>>,
    costed_work: Cell<u64>,
    /// The last topology loaded by name (loading a large one costs time and memory).
    last: RefCell<Option<(String, Rc<Topology>)>>,
}

impl Coster {
    pub fn new(engine: Engine) -> Self {
        Coster { engine, known: RefCell::new(Vec::new()), costed_work: Cell::new(0), last: RefCell::new(None) }
    }

    /// The time of `comm` (errors name `field` and the entry's keys under it).
    pub fn time(&self, comm: &CommInput, field: &str) -> Result<CommTime, PlannerError> {
        match comm.resolve(field)? {
            Comm::Given { secs } => Ok(CommTime {
                secs,
                startup_secs: None,
                cross_server_bytes: None,
                nic_bytes_per_sec: None,
                source: "given".into(),
            }),
            // seed 001 §7.1.2: T_C = V_C / B_C, a lower bound on the transfer.
            Comm::Cut { bytes, bytes_per_sec } => Ok(CommTime {
                secs: bytes / bytes_per_sec,
                startup_secs: None,
                cross_server_bytes: None,
                nic_bytes_per_sec: None,
                source: format!(
                    "cut bound: {} across {}",
                    railyard_units::units::format_bytes(bytes),
                    railyard_units::units::format_bytes_per_sec(bytes_per_sec)
                ),
            }),
            Comm::Schedule(schedule) => {
                let key = CacheKey { engine: self.engine, topology: schedule.topo.clone(), schedule: schedule.clone() };
                if let Some(t) = self.cached(&key) {
                    return Ok(t);
                }
                let topology = self.load(&schedule.topo, field)?;
                let t = self.schedule_time(&schedule, field, &topology)?;
                self.known.borrow_mut().push((key, t.clone()));
                Ok(t)
            }
        }
    }

    /// The time of `comm`, a schedule, on `topology` (its `topo` only names it).
    pub fn time_on(&self, comm: &CommInput, field: &str, topology: &Topology) -> Result<CommTime, PlannerError> {
        let named =
            CommInput { topo: Some(comm.topo.clone().unwrap_or_else(|| topology.name.clone())), ..comm.clone() };
        let Comm::Schedule(schedule) = named.resolve(field)? else {
            return Err(PlannerError::bad(field, "a schedule (topo with algo and size_bytes) is needed here"));
        };
        let key = CacheKey { engine: self.engine, topology: topology.name.clone(), schedule: schedule.clone() };
        if let Some(t) = self.cached(&key) {
            return Ok(t);
        }
        let t = self.schedule_time(&schedule, field, topology)?;
        self.known.borrow_mut().push((key, t.clone()));
        Ok(t)
    }

    fn cached(&self, key: &CacheKey) -> Option<CommTime> {
        self.known.borrow().iter().find(|(k, _)| k == key).map(|(_, t)| t.clone())
    }

    /// The topology `topo` names (a preset or a file), loaded once for the sections that
    /// use it one after another; errors name `{field}.topo`.
    pub(crate) fn load(&self, topo: &str, field: &str) -> Result<Rc<Topology>, PlannerError> {
        if let Some((name, t)) = self.last.borrow().as_ref() {
            if name == topo {
                return Ok(t.clone());
            }
        }
        // Drop the last one first: two large topologies need not be held at once.
        *self.last.borrow_mut() = None;
        let t = Rc::new(
            railyard_topology::load(topo)
                .map_err(|cause| PlannerError::Topology { field: format!("{field}.topo"), cause })?,
        );
        *self.last.borrow_mut() = Some((topo.to_string(), t.clone()));
        Ok(t)
    }

    fn schedule_time(&self, comm: &ScheduleComm, field: &str, topology: &Topology) -> Result<CommTime, PlannerError> {
        let ScheduleComm { topo, algorithm, collective, bytes, elem_bytes, .. } = comm.clone();
        let topo_err = |cause| PlannerError::Topology { field: format!("{field}.topo"), cause };
        let mut capped = None;
        let mut nic_bytes_per_sec = None;
        if let Some(f) = &comm.in_flight {
            let f_field = format!("{field}.in_flight");
            let limit = in_flight_bytes_per_sec(&f_field, f)?;
            if !topology.links.iter().any(|l| l.class == LinkClass::Nic) {
                return Err(PlannerError::bad(
                    f_field,
                    format!("{topo} has no NIC links for requests in flight to limit"),
                ));
            }
            if limit < 1.0 {
                return Err(PlannerError::bad(f_field, format!("allows {limit} B/s, below the 1 B/s a link may have")));
            }
            capped = Some(topology.with_class_capped(LinkClass::Nic, limit).map_err(topo_err)?);
            nic_bytes_per_sec = Some(limit);
        }
        let topology = capped.as_ref().unwrap_or(topology);
        let placement = Placement::new(topology, &PlacementPolicy::Contiguous, None).map_err(topo_err)?;
        let ranks = placement.len();
        if ranks > MAX_COSTED_RANKS {
            return Err(PlannerError::bad(
                format!("{field}.topo"),
                format!("{ranks} ranks: a scenario costs schedules of at most {MAX_COSTED_RANKS} ranks (use `railyard plan` for one larger costing)"),
            ));
        }
        if self.engine == Engine::Sim && ranks > MAX_SIM_RANKS {
            return Err(PlannerError::bad(
                format!("{field}.topo"),
                format!("{ranks} ranks: --engine sim runs schedules of at most {MAX_SIM_RANKS} ranks here (use --engine model, or `railyard sim`)"),
            ));
        }
        let work = (ranks as u64 * ranks as u64).saturating_mul(if self.engine == Engine::Sim { 16 } else { 1 });
        let spent = self.costed_work.get().saturating_add(work);
        if spent > MAX_COSTED_WORK {
            return Err(PlannerError::bad(
                field,
                format!(
                    "costing this {ranks}-rank schedule would take the scenario past its work budget of {MAX_COSTED_WORK} \
                     (ranks² per costing{}; already {}); use smaller topologies or fewer sizes, what-ifs, buckets and timelines",
                    if self.engine == Engine::Sim { ", x16 simulated" } else { "" },
                    self.costed_work.get()
                ),
            ));
        }
        self.costed_work.set(spent);
        let model_err = |cause| PlannerError::Model { field: field.to_string(), cause: Box::new(cause) };
        let request = CollectiveRequest::new(collective, bytes, elem_bytes, vec![algorithm]);
        let resolved = resolve_on(topology, &placement, &request).map_err(model_err)?;
        let Some(variant) = resolved.variants.into_iter().next() else {
            return Err(PlannerError::bad(format!("{field}.algo"), format!("{algorithm} does not run here")));
        };
        let b = match variant.breakdown {
            Some(b) => b,
            None => cost(&variant.schedule, topology, &placement).map_err(model_err)?,
        };
        let what = format!(
            "{algorithm}, {} of {} on {topo}",
            collective.as_str(),
            railyard_units::units::format_bytes(bytes as f64)
        );
        match self.engine {
            Engine::Model => Ok(CommTime {
                secs: b.total_secs,
                startup_secs: Some(b.alpha_secs),
                cross_server_bytes: Some(b.cross_server_bytes),
                nic_bytes_per_sec,
                source: format!("{what} (per-round model)"),
            }),
            Engine::Sim => {
                let job = JobSpec::new(algorithm.to_string(), &variant.schedule, placement.clone(), 0.0);
                let report = simulate(topology, &[job], &SimOptions::default())
                    .map_err(|e| PlannerError::Sim { field: field.to_string(), message: e.to_string() })?;
                Ok(CommTime {
                    secs: report.makespan_secs,
                    startup_secs: None,
                    cross_server_bytes: Some(b.cross_server_bytes),
                    nic_bytes_per_sec,
                    source: format!("{what} (flow-level simulator)"),
                })
            }
        }
    }
}

impl CommInput {
    /// `self` laid over `base`: a field left out is taken from `base` — but only fields of
    /// the kind `self` names (a timeline that gives `secs` does not inherit a `topo`).
    pub fn over(&self, base: &CommInput) -> CommInput {
        let kinds = |c: &CommInput| {
            (
                c.secs.is_some(),
                c.cut_bytes.is_some() || c.cut_bytes_per_sec.is_some(),
                c.topo.is_some()
                    || c.algo.is_some()
                    || c.collective.is_some()
                    || c.size_bytes.is_some()
                    || c.elem_bytes.is_some()
                    || c.in_flight.is_some(),
            )
        };
        let (given, cut, schedule) = kinds(self);
        let base = if !(given || cut || schedule) || kinds(base) == (given, cut, schedule) {
            base.clone()
        } else {
            match (given, cut, schedule) {
                (true, false, false) => CommInput { secs: base.secs, ..CommInput::default() },
                (false, true, false) => CommInput {
                    cut_bytes: base.cut_bytes,
                    cut_bytes_per_sec: base.cut_bytes_per_sec,
                    ..CommInput::default()
                },
                (false, false, true) => {
                    CommInput { secs: None, cut_bytes: None, cut_bytes_per_sec: None, ..base.clone() }
                }
                _ => CommInput::default(),
            }
        };
        CommInput {
            secs: self.secs.or(base.secs),
            cut_bytes: self.cut_bytes.or(base.cut_bytes),
            cut_bytes_per_sec: self.cut_bytes_per_sec.or(base.cut_bytes_per_sec),
            topo: self.topo.clone().or_else(|| base.topo.clone()),
            collective: self.collective.clone().or_else(|| base.collective.clone()),
            algo: self.algo.clone().or_else(|| base.algo.clone()),
            size_bytes: self.size_bytes.or(base.size_bytes),
            elem_bytes: self.elem_bytes.or(base.elem_bytes),
            in_flight: self.in_flight.clone().or_else(|| base.in_flight.clone()),
        }
    }

    /// The same communication with a size the planner derived (buckets, token counts):
    /// rounded down to whole elements, at least one.
    pub fn with_size(&self, bytes: f64) -> CommInput {
        let elem = self.elem_bytes.unwrap_or(4).max(1) as f64;
        CommInput { size_bytes: Some(((bytes / elem).floor().max(1.0)) * elem), ..self.clone() }
    }

    /// The one communication this entry gives, checked: a time, a cut bound, or a
    /// schedule (the collective all-reduce and 4-byte elements unless said).
    pub fn resolve(&self, field: &str) -> Result<Comm, PlannerError> {
        let schedule = self.topo.is_some() || self.algo.is_some();
        let cut = self.cut_bytes.is_some() || self.cut_bytes_per_sec.is_some();
        let given = [self.secs.is_some(), cut, schedule].iter().filter(|&&b| b).count();
        if given != 1 {
            return Err(PlannerError::bad(
                field,
                "give exactly one of: secs; cut_bytes with cut_bytes_per_sec; topo with algo and size_bytes",
            ));
        }
        if let Some(secs) = self.secs {
            return Ok(Comm::Given { secs: within(&format!("{field}.secs"), secs, 0.0, MAX_SECS)? });
        }
        if cut {
            let (Some(bytes), Some(bw)) = (self.cut_bytes, self.cut_bytes_per_sec) else {
                return Err(PlannerError::bad(field, "the cut bound needs both cut_bytes and cut_bytes_per_sec"));
            };
            return Ok(Comm::Cut {
                bytes: within(&format!("{field}.cut_bytes"), bytes, 0.0, MAX_COMM_BYTES)?,
                bytes_per_sec: within(&format!("{field}.cut_bytes_per_sec"), bw, 1.0, 1e16)?,
            });
        }
        let topo = self.topo.clone().ok_or_else(|| PlannerError::bad(format!("{field}.topo"), "missing"))?;
        let algo_text = self.algo.as_deref().ok_or_else(|| PlannerError::bad(format!("{field}.algo"), "missing"))?;
        let algorithm: Algorithm =
            algo_text.parse().map_err(|e: String| PlannerError::bad(format!("{field}.algo"), e))?;
        let collective: Collective = self
            .collective
            .as_deref()
            .unwrap_or("allreduce")
            .parse()
            .map_err(|e: String| PlannerError::bad(format!("{field}.collective"), e))?;
        if collective == Collective::AllToAllv {
            return Err(PlannerError::bad(
                format!("{field}.collective"),
                "alltoallv needs per-pair counts, which a scenario cannot give; use alltoall",
            ));
        }
        let size = self.size_bytes.ok_or_else(|| PlannerError::bad(format!("{field}.size_bytes"), "missing"))?;
        if !((1.0..=MAX_COMM_BYTES).contains(&size) && size.fract() == 0.0) {
            return Err(PlannerError::bad(
                format!("{field}.size_bytes"),
                format!("must be a whole number of bytes in 1..=2^50 (got {size})"),
            ));
        }
        let elem_bytes = self.elem_bytes.unwrap_or(4);
        if !matches!(elem_bytes, 1 | 2 | 4 | 8) {
            return Err(PlannerError::bad(
                format!("{field}.elem_bytes"),
                format!("must be 1, 2, 4 or 8 (got {elem_bytes})"),
            ));
        }
        let bytes = size as u64;
        if !bytes.is_multiple_of(elem_bytes) {
            return Err(PlannerError::bad(
                format!("{field}.size_bytes"),
                format!("{bytes} B is not a whole number of {elem_bytes}-byte elements"),
            ));
        }
        Ok(Comm::Schedule(ScheduleComm {
            topo,
            algorithm,
            collective,
            bytes,
            elem_bytes,
            in_flight: self.in_flight.clone(),
        }))
    }
}

/// One communication, as the entry that gives it resolves (`CommInput::resolve`).
#[derive(Debug, Clone, PartialEq)]
pub enum Comm {
    /// A time given outright.
    Given { secs: f64 },
    /// The cut bound T_C = V_C / B_C (seed 001 §7.1.2).
    Cut { bytes: f64, bytes_per_sec: f64 },
    /// A collective's schedule on a topology, costed or simulated.
    Schedule(ScheduleComm),
}

/// A collective's schedule to cost: on `topo` (a preset or file), with its NICs capped
/// by the requests in flight where given.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleComm {
    pub topo: String,
    pub algorithm: Algorithm,
    pub collective: Collective,
    pub bytes: u64,
    pub elem_bytes: u64,
    pub in_flight: Option<InFlight>,
}

/// What a costing is remembered by: the engine, the topology's name and the schedule.
#[derive(Debug, Clone, PartialEq)]
struct CacheKey {
    engine: Engine,
    topology: String,
    schedule: ScheduleComm,
}

/// B_eff = min(N·m/T, m/δ) of seed 001 §7.3.4, the path itself left to the topology.
pub fn in_flight_bytes_per_sec(field: &str, f: &InFlight) -> Result<f64, PlannerError> {
    if f.slots == 0 || f.slots > 1 << 32 {
        return Err(PlannerError::bad(format!("{field}.slots"), format!("must be 1..=2^32 (got {})", f.slots)));
    }
    positive(&format!("{field}.request_bytes"), f.request_bytes)?;
    positive(&format!("{field}.slot_secs"), f.slot_secs)?;
    let input = ConcurrencyInput {
        path_bytes_per_sec: f64::MAX,
        request_bytes: f.request_bytes,
        slot_secs: f.slot_secs,
        issue_interval_secs: f.issue_interval_secs,
        slots: vec![f.slots],
        sweep_request_bytes: Vec::new(),
    };
    let out = concurrency(&input).map_err(|e| PlannerError::bad(field, e.to_string()))?;
    Ok(out.cases[0].effective_bytes_per_sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl CommInput {
        fn time_with(&self, engine: Engine) -> Result<CommTime, PlannerError> {
            Coster::new(engine).time(self, "c")
        }
    }

    fn allreduce(topo: &str, algo: &str) -> CommInput {
        CommInput {
            topo: Some(topo.into()),
            algo: Some(algo.into()),
            size_bytes: Some(192.0 * 1048576.0),
            ..CommInput::default()
        }
    }

    #[test]
    fn the_seeds_ring_and_hierarchical_times_come_from_the_model() {
        // seed 001 §7.2.1: about 7.6 ms and 1.3 ms for 192 MiB on two HGX H100.
        let ring = allreduce("hgx-h100x2", "ring").time_with(Engine::Model).unwrap();
        assert!((ring.secs - 7.575e-3).abs() < 1e-6, "{}", ring.secs);
        let hier = allreduce("hgx-h100x2", "hierarchical").time_with(Engine::Model).unwrap();
        assert!((hier.secs - 1.2996e-3).abs() < 1e-6, "{}", hier.secs);
    }

    #[test]
    fn requests_in_flight_cap_the_nics() {
        // seed 001 §7.6.2: 128 x 256 B per 2 us = 16.4 GB/s per NIC; total about 2.3 ms.
        let mut c = allreduce("hgx-h100x2", "hierarchical");
        c.in_flight = Some(InFlight { slots: 128, request_bytes: 256.0, slot_secs: 2e-6, issue_interval_secs: 0.0 });
        let t = c.time_with(Engine::Model).unwrap();
        assert_eq!(t.nic_bytes_per_sec, Some(16.384e9));
        assert!((t.secs - 2.33e-3).abs() < 0.01e-3, "{}", t.secs);
    }

    #[test]
    fn the_simulator_agrees_with_the_model_on_a_ring() {
        let c = allreduce("hgx-h100x2", "ring");
        let m = c.time_with(Engine::Model).unwrap().secs;
        let s = c.time_with(Engine::Sim).unwrap().secs;
        assert!((s - m).abs() / m < 0.02, "sim {s} vs model {m}");
    }

    #[test]
    fn a_communication_is_one_kind() {
        let both = CommInput { secs: Some(1e-3), cut_bytes: Some(1.0), ..CommInput::default() };
        assert!(Coster::new(Engine::Model).time(&both, "step.comm").unwrap_err().to_string().contains("exactly one"));
        let none = CommInput::default();
        assert!(Coster::new(Engine::Model).time(&none, "x").is_err());
        let cut = CommInput { cut_bytes: Some(360.0 * 1048576.0), ..CommInput::default() };
        assert!(Coster::new(Engine::Model).time(&cut, "x").unwrap_err().to_string().contains("cut_bytes_per_sec"));
        let mut bad = allreduce("hgx-h100x2", "nonesuch");
        assert!(Coster::new(Engine::Model).time(&bad, "x").unwrap_err().to_string().contains("x.algo"));
        bad.algo = Some("ring".into());
        bad.size_bytes = Some(0.0);
        assert!(Coster::new(Engine::Model).time(&bad, "x").unwrap_err().to_string().contains("size_bytes"));
        bad.size_bytes = Some(1023.0);
        assert!(Coster::new(Engine::Model).time(&bad, "x").unwrap_err().to_string().contains("4-byte elements"));
    }

    #[test]
    fn a_timeline_of_another_kind_does_not_inherit_the_schedule() {
        let base = allreduce("hgx-h100x2", "ring");
        let given = CommInput { secs: Some(1e-3), ..CommInput::default() };
        assert_eq!(given.over(&base), given);
        let algo = CommInput { algo: Some("hierarchical".into()), ..CommInput::default() };
        assert_eq!(algo.over(&base).topo.as_deref(), Some("hgx-h100x2"));
        // Derived sizes are whole elements.
        assert_eq!(base.with_size(1023.0).size_bytes, Some(1020.0));
    }

    #[test]
    fn repeated_costings_are_cached_and_the_budget_is_named() {
        let coster = Coster::new(Engine::Model);
        let c = allreduce("hgx-h100x2", "ring");
        for _ in 0..10 {
            coster.time(&c, "c").unwrap();
        }
        assert_eq!(coster.costed_work.get(), 256);
        coster.costed_work.set(MAX_COSTED_WORK - 8);
        let e = coster.time(&c.with_size(1024.0), "step.comm").unwrap_err().to_string();
        assert!(e.contains("step.comm") && e.contains("budget"), "{e}");
    }

    #[test]
    fn in_flight_needs_nics() {
        let mut c = allreduce("mesh", "ring");
        c.in_flight = Some(InFlight { slots: 1, request_bytes: 1.0, slot_secs: 1.0, issue_interval_secs: 0.0 });
        let e = Coster::new(Engine::Model).time(&c, "x").unwrap_err().to_string();
        assert!(e.contains("x.in_flight") && e.contains("no NIC"), "{e}");
    }
}

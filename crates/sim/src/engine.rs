//! The event loop: flows over resources at max-min fair rates, jobs moving through
//! their schedules as flows finish.
//!
//! Events at one simulated time are taken in a fixed order — flows finishing, then
//! ranks entering rounds, then transfers starting — and rates are recomputed once
//! after them, before time moves on. Ties between events of one kind go to the one
//! queued first, so a run is the same bit for bit every time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use railyard_schedule::CompactSchedule;
use railyard_topology::route::in_network_link_streams;
use railyard_topology::{DeviceId, Placement, Resource, RouteTable, Topology};

use crate::component::Components;
use crate::error::SimError;
use crate::fairness::FairShare;
use crate::job::{Action, Dependencies, Job, Op, OpKind};
use crate::job_spec::JobSpec;
use crate::paths::{flow_resources, Connection, Paths};
use crate::queues::Queues;
use crate::report::{CriticalStep, JobReport, ResourceSeries, ResourceUse, SimReport};
use crate::time::Picos;
use crate::trace::{Trace, TraceEvent};

/// Transfers started one by one in a run, at most (a repeated round skipped counts once):
/// about a minute at the 2 µs a flow costs on a 2-core machine.
pub const MAX_STARTED_TRANSFERS: u64 = 1 << 25;
/// Transfers a run that reuses no round (`--every-round`, several jobs, queues) starts
/// at most: about 1.3 million a second are simulated, so this keeps such a run within
/// seconds to a minute (33.5 million once ran for minutes).
pub const MAX_SIMULATED_TRANSFERS: u64 = 1 << 23;
/// Transfers of one round made at once, at most: a flow in flight holds about 700 bytes
/// (its resources, its events, its place in the fairness tables), so about 3 GB.
pub const MAX_ROUND_TRANSFERS: usize = 1 << 22;
/// Items one job holds in the rounds between its slowest and its fastest rank (each
/// op's place per rank, one per round), at most.
pub const MAX_HELD_ITEMS: usize = 1 << 24;
/// Jobs in one run, at most.
pub const MAX_JOBS: usize = 1024;

#[derive(Debug, Clone)]
pub struct SimOptions {
    pub dependencies: Dependencies,
    pub paths: Paths,
    /// Skip runs of rounds that repeat their predecessor in step (only for a job alone
    /// on the network; `false` simulates every round flow by flow).
    pub reuse_repeated_rounds: bool,
    /// Keep trace events (flows and rounds), up to this many.
    pub trace_events: Option<usize>,
    /// Follow switch queues (`queues.rs`): senders push at their host-side rate and the
    /// backlog waits at the port that holds a flow back. Runs every round flow by flow.
    pub queues: bool,
    /// With `queues`: each switch port's egress buffer, to name the ports that overflow.
    pub buffer_bytes: Option<f64>,
    /// Resources (by name) whose utilisation over time is recorded, at every rate change.
    pub watch: Vec<String>,
    /// Keep every op to walk the critical path back from the finish, where the run has
    /// at most `MAX_HISTORY` transfers (it is then simulated flow by flow).
    pub critical_path: bool,
    /// Recompute every live flow's rate at every change, not only the changed flows'
    /// component (for tests that compare the two; the results are the same).
    pub global_rates: bool,
}

/// Transfers of a run up to which every op is kept for the critical path.
pub const MAX_HISTORY: usize = 1 << 18;

/// A finished op, for the critical path.
#[derive(Debug, Clone, Copy)]
struct Record {
    round: usize,
    /// Ranks of a transfer (none for an in-network step).
    from: Option<usize>,
    to: Option<usize>,
    start: Picos,
    end: Picos,
    bottleneck: u32,
    /// The record this op waited for last.
    cause: u32,
}

/// Points kept per watched resource, at most (past it, every other point is dropped).
pub const MAX_SERIES_POINTS: usize = 20_000;

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            dependencies: Dependencies::RankOrder,
            paths: Paths::Split,
            reuse_repeated_rounds: true,
            trace_events: None,
            queues: false,
            buffer_bytes: None,
            watch: Vec::new(),
            critical_path: true,
            global_rates: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    /// A flow's bytes have all left the sender (if its version still matches).
    Finish { flow: u32, version: u32 },
    /// A flow's sender has pushed its last byte (queues only).
    SendDone { flow: u32, version: u32 },
    /// An op's last byte has arrived, the path latency after its flow finished.
    Delivered { job: u32, round: usize, op: u32, record: u32 },
    /// Every rank of a job enters a round (round 0 of a job not yet started: the job starts).
    EnterAll { job: u32, round: usize },
    /// One rank of a job is ready and enters round 0.
    Ready { job: u32, rank: usize },
    /// A transfer (or in-network step) starts.
    Start { job: u32, round: usize, op: u32 },
}

impl EventKind {
    fn order(&self) -> u8 {
        match self {
            EventKind::Finish { .. } | EventKind::Delivered { .. } | EventKind::SendDone { .. } => 0,
            EventKind::EnterAll { .. } | EventKind::Ready { .. } => 1,
            EventKind::Start { .. } => 2,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    at: Picos,
    order: u8,
    seq: u64,
    kind: EventKind,
}

#[derive(Debug, Default)]
struct Flow {
    job: u32,
    round: usize,
    op: u32,
    /// Rank whose trace track shows it.
    track: u32,
    /// The record it waited for last (critical path; u32::MAX if none or not kept).
    cause: u32,
    /// Started since the last rate computation.
    fresh: bool,
    /// Its ranks, when a transfer.
    ends: (Option<usize>, Option<usize>),
    /// From the last byte sent to its arrival.
    latency: Picos,
    /// Its slowest path's lead over its mean path: at rate R the receiver holds R × this
    /// out of order.
    spread_secs: f64,
    /// The resource that set its rate last (u32::MAX before the first rates).
    bottleneck: u32,
    /// Queues only: bytes pushed by the sender by `send_updated`, at `send_rate`.
    sent: f64,
    send_rate: f64,
    send_updated: Picos,
    send_version: u32,
    /// Queues only: the switch port its backlog waits at, kept while it has one.
    queue_port: u32,
    bytes: f64,
    bytes_left: f64,
    rate: f64,
    updated: Picos,
    started: Picos,
    resources: Vec<(u32, f64)>,
    version: u32,
    /// Place in `active` as of the last recompute; u32::MAX once finished (not live).
    active_at: u32,
}

struct Engine<'t, 'r> {
    topology: &'t Topology,
    routes: RouteTable<'r>,
    options: SimOptions,
    capacity: Vec<f64>,
    events: BinaryHeap<Reverse<Event>>,
    seq: u64,
    now: Picos,
    flows: Vec<Flow>,
    free: Vec<u32>,
    active: Vec<u32>,
    dirty: bool,
    fair: FairShare,
    rates: Vec<f64>,
    resource_bytes: Vec<f64>,
    stats: Stats,
    trace: Trace,
    scratch: Vec<(u32, f64)>,
    /// The state when every rank had entered the last round looked at (round, time,
    /// signature), to find a periodic run.
    signature: Option<(usize, Picos, Vec<u64>)>,
    signature_scratch: Vec<u64>,
    /// Each job's ranks' readiness after its start.
    ready: Vec<Vec<Picos>>,
    /// Per job: predecessors not yet finished; and the jobs that wait for it.
    waiting_on: Vec<usize>,
    dependents: Vec<Vec<usize>>,
    /// Whether a job's finish has been passed on to its dependents.
    finish_told: Vec<bool>,
    queues: Option<Queues>,
    send_rates: Vec<f64>,
    watched: Vec<Watched>,
    /// The largest reorder buffer a receiver needed for one flow (bytes).
    reorder_peak_bytes: f64,
    /// Every finished op, for the critical path (kept when the run is small enough).
    history: Option<Vec<Record>>,
    last_started: Option<u32>,
    /// Resources of flows ended since the last rate computation.
    ended: Vec<u32>,
    components: Components,
    /// Per job and round: when its last op so far ended and the resource that held it.
    round_end: Vec<Vec<Option<(Picos, u32)>>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    events: u64,
    flows: u64,
    rate_updates: u64,
    /// Flow rates computed, summed over rate updates.
    rated: u64,
    started: u64,
}

/// Simulate `jobs` together on `topology`.
pub fn simulate(topology: &Topology, jobs: &[JobSpec<'_>], options: &SimOptions) -> Result<SimReport, SimError> {
    simulate_with_progress(topology, jobs, options, &mut |_| {})
}

/// How far a run has got, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Rounds every rank has left, over all jobs, and rounds in all.
    pub rounds_done: usize,
    pub rounds: usize,
    pub simulated_secs: f64,
    pub events: u64,
}

/// Events between two calls of a progress callback.
const PROGRESS_EVERY: u64 = 1 << 14;

/// [`simulate`], calling `progress` every few thousand events.
pub fn simulate_with_progress(
    topology: &Topology,
    jobs: &[JobSpec<'_>],
    options: &SimOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<SimReport, SimError> {
    if jobs.is_empty() {
        return Err(SimError::NoJobs);
    }
    if jobs.len() > MAX_JOBS {
        return Err(SimError::TooManyJobs { jobs: jobs.len(), limit: MAX_JOBS });
    }
    let alpha = Picos::ceil_secs(topology.round_startup_secs).ok_or(SimError::TimeOverflow)?;
    // The critical path walks back over every op: kept when every round's transfers
    // together stay under `MAX_HISTORY` (simulated flow by flow then).
    let all_transfers: u128 = jobs.iter().map(|j| j.schedule.all_transfers_bound()).sum();
    let keep_history = options.critical_path && all_transfers <= MAX_HISTORY as u128;
    // Skipping repeated rounds assumes nothing else shares the network meanwhile, does
    // not carry the queues' sent bytes, and would break the critical path's chain.
    let reuse = options.reuse_repeated_rounds && jobs.len() == 1 && !options.queues && !keep_history;
    let mut states = Vec::with_capacity(jobs.len());
    for spec in jobs {
        let s = spec.schedule;
        if s.spec.ranks != spec.placement.len() {
            return Err(SimError::RankMismatch {
                job: spec.name.clone(),
                schedule: s.spec.ranks,
                placement: spec.placement.len(),
            });
        }
        spec.placement.validate(topology)?;
        let largest = s.largest_round_transfers();
        if largest > MAX_ROUND_TRANSFERS {
            return Err(SimError::RoundTooLarge {
                job: spec.name.clone(),
                transfers: largest,
                limit: MAX_ROUND_TRANSFERS,
            });
        }
        // Rounds that repeat their predecessor are reused only where the run may reuse
        // them; otherwise every round's transfers are started (and bounded).
        let (bound, limit) = if reuse {
            (s.made_transfers_bound(), MAX_STARTED_TRANSFERS)
        } else {
            (s.all_transfers_bound(), MAX_SIMULATED_TRANSFERS)
        };
        if bound > u128::from(limit) {
            return Err(SimError::TooManyTransfers { job: spec.name.clone(), transfers: bound, limit });
        }
        if !(spec.start_secs.is_finite() && spec.start_secs >= 0.0) {
            return Err(SimError::BadStart { job: spec.name.clone(), secs: spec.start_secs });
        }
        if !spec.ready_secs.is_empty() && spec.ready_secs.len() != s.spec.ranks {
            return Err(SimError::ReadyCount {
                job: spec.name.clone(),
                given: spec.ready_secs.len(),
                ranks: s.spec.ranks,
            });
        }
        if let Some(&bad) = spec.ready_secs.iter().find(|&&r| Picos::ceil_secs(r).is_none()) {
            return Err(SimError::BadReady { job: spec.name.clone(), secs: bad });
        }
        if Picos::ceil_secs(spec.compute_secs).is_none() {
            return Err(SimError::BadCompute { job: spec.name.clone(), secs: spec.compute_secs });
        }
        if let Some(&bad) = spec.after.iter().find(|&&a| a >= jobs.len() || a == states.len()) {
            return Err(SimError::BadAfter { job: spec.name.clone(), after: bad, jobs: jobs.len() });
        }
        let mut job = Job::new(s, options.dependencies, alpha, reuse, MAX_HELD_ITEMS);
        // The rounds it stands for without holding them (an MSCCL loop's passes past those
        // built) start up after the held ones, as the model charges them.
        let unheld = topology.round_startup_secs * s.unheld_rounds as f64;
        job.host = Picos::ceil_secs(host_secs(s, topology) + unheld).ok_or(SimError::TimeOverflow)?;
        states.push(job);
    }
    let n = topology.resource_count();
    let mut engine = Engine {
        topology,
        routes: RouteTable::new(topology),
        options: options.clone(),
        capacity: (0..n).map(|i| topology.resource_bytes_per_sec(topology.resource(i))).collect(),
        events: BinaryHeap::new(),
        seq: 0,
        now: Picos::ZERO,
        flows: Vec::new(),
        free: Vec::new(),
        active: Vec::new(),
        dirty: false,
        fair: FairShare::new(n),
        rates: Vec::new(),
        resource_bytes: vec![0.0; n],
        stats: Stats::default(),
        trace: Trace::new(options.trace_events.unwrap_or(0)),
        scratch: Vec::new(),
        signature: None,
        signature_scratch: Vec::new(),
        ready: Vec::new(),
        waiting_on: Vec::new(),
        dependents: Vec::new(),
        finish_told: vec![false; jobs.len()],
        queues: options.queues.then(|| Queues::new(topology, options.buffer_bytes)),
        watched: watched_resources(topology, &options.watch)?,
        reorder_peak_bytes: 0.0,
        history: keep_history.then(Vec::new),
        last_started: None,
        ended: Vec::new(),
        components: Components::new(n),
        send_rates: Vec::new(),
        round_end: states.iter().map(|s| vec![None; s.rounds()]).collect(),
    };
    let waits: Vec<Vec<usize>> = jobs.iter().map(|j| j.after.clone()).collect();
    if let Some(cycle) = on_cycle(&waits) {
        return Err(SimError::CycleInAfter { job: jobs[cycle].name.clone() });
    }
    let mut ready: Vec<Vec<Picos>> = Vec::with_capacity(jobs.len());
    for (j, spec) in jobs.iter().enumerate() {
        // Compute first: every rank is ready `compute_secs` after the start, and later
        // where a readiness is given.
        let compute = Picos::ceil_secs(spec.compute_secs).ok_or(SimError::TimeOverflow)?;
        let mut r: Vec<Picos> = spec.ready_secs.iter().filter_map(|&r| Picos::ceil_secs(r)).collect();
        if compute > Picos::ZERO {
            if r.is_empty() {
                r = vec![Picos::ZERO; spec.placement.len()];
            }
            for x in &mut r {
                *x = x.saturating_add(compute);
            }
        }
        ready.push(r);
        engine.waiting_on.push(distinct(&spec.after).len());
        if spec.after.is_empty() {
            let at = Picos::ceil_secs(spec.start_secs).ok_or(SimError::TimeOverflow)?;
            engine.push(at, EventKind::EnterAll { job: j as u32, round: 0 });
        }
    }
    engine.ready = ready;
    engine.dependents =
        (0..jobs.len()).map(|j| (0..jobs.len()).filter(|&k| jobs[k].after.contains(&j)).collect()).collect();
    engine.run(jobs, &mut states, progress)?;
    // Every job starts (no cycles) and every started one ends; a job left unfinished
    // would be a bug here, said as an error rather than printed as NaN.
    if let Some(j) = states.iter().position(|s| s.finished.is_none()) {
        return Err(SimError::Unfinished { job: jobs[j].name.clone() });
    }
    Ok(engine.report(jobs, &states))
}

impl Engine<'_, '_> {
    fn push(&mut self, at: Picos, kind: EventKind) {
        self.seq += 1;
        self.events.push(Reverse(Event { at, order: kind.order(), seq: self.seq, kind }));
    }

    fn run(
        &mut self,
        jobs: &[JobSpec<'_>],
        states: &mut [Job<'_>],
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<(), SimError> {
        let mut actions = Vec::new();
        // Rounds every rank of a job has entered, looked at once their time step is done.
        let mut entered: Vec<(u32, usize)> = Vec::new();
        loop {
            let next = self.events.peek().map(|Reverse(e)| e.at);
            if next.is_none_or(|t| t > self.now) {
                if !entered.is_empty() {
                    for (job, round) in std::mem::take(&mut entered) {
                        let state = &mut states[job as usize];
                        self.maybe_skip(state, job, round, &jobs[job as usize].placement)?;
                    }
                    continue;
                }
                if self.dirty {
                    self.recompute()?;
                    continue;
                }
            }
            let Some(Reverse(event)) = self.events.pop() else { break };
            self.now = event.at;
            self.stats.events += 1;
            if self.stats.events.is_multiple_of(PROGRESS_EVERY) {
                progress(&Progress {
                    rounds_done: states.iter().map(Job::rounds_done).sum(),
                    rounds: states.iter().map(Job::rounds).sum(),
                    simulated_secs: self.now.secs(),
                    events: self.stats.events,
                });
            }
            let job = match event.kind {
                EventKind::Finish { flow, version } => {
                    let f = &self.flows[flow as usize];
                    if f.version != version || f.active_at == u32::MAX {
                        continue;
                    }
                    let (job, round, op, latency) = (f.job, f.round, f.op, f.latency);
                    let (bottleneck, started, cause, ends) = (f.bottleneck, f.started, f.cause, f.ends);
                    self.finish(flow);
                    self.note_end(job, round, bottleneck, latency);
                    let end = self.now.saturating_add(latency);
                    let record = match &mut self.history {
                        Some(h) => {
                            let (from, to) = ends;
                            h.push(Record { round, from, to, start: started, end, bottleneck, cause });
                            (h.len() - 1) as u32
                        }
                        None => u32::MAX,
                    };
                    if latency > Picos::ZERO {
                        self.push(end, EventKind::Delivered { job, round, op, record });
                        continue;
                    }
                    let state = &mut states[job as usize];
                    state
                        .op_finished(round, op, self.now, record, &mut actions)
                        .map_err(|rounds| window_error(jobs, job, rounds))?;
                    job
                }
                EventKind::EnterAll { job, round } => {
                    let state = &mut states[job as usize];
                    if round == 0 && !state.started {
                        state.started = true;
                        state.started_at = self.now;
                        state.start(self.now, &self.ready[job as usize], &mut actions)
                    } else {
                        state.enter_all(round, self.now, &mut actions)
                    }
                    .map_err(|rounds| window_error(jobs, job, rounds))?;
                    job
                }
                EventKind::SendDone { flow, version } => {
                    let f = &self.flows[flow as usize];
                    if f.send_version == version && f.active_at != u32::MAX {
                        self.observe_queues(Some(flow));
                        // The other senders of its host may now push faster.
                        self.dirty = true;
                    }
                    continue;
                }
                EventKind::Delivered { job, round, op, record } => {
                    states[job as usize]
                        .op_finished(round, op, self.now, record, &mut actions)
                        .map_err(|rounds| window_error(jobs, job, rounds))?;
                    job
                }
                EventKind::Ready { job, rank } => {
                    states[job as usize]
                        .ready(rank, self.now, &mut actions)
                        .map_err(|rounds| window_error(jobs, job, rounds))?;
                    job
                }
                EventKind::Start { job, round, op } => {
                    let Some(o) = states[job as usize].op(round, op).cloned() else { continue };
                    let cause =
                        if self.history.is_some() { states[job as usize].start_cause(round, op) } else { u32::MAX };
                    self.start(job, round, op, &o, &jobs[job as usize].placement)?;
                    if let Some(slot) = self.last_started {
                        self.flows[slot as usize].cause = cause;
                    }
                    continue;
                }
            };
            for a in actions.drain(..) {
                match a {
                    Action::Start { round, op, at } => self.push(at, EventKind::Start { job, round, op }),
                    Action::EnterAll { round, at } => self.push(at, EventKind::EnterAll { job, round }),
                    Action::Ready { rank, at } => self.push(at, EventKind::Ready { job, rank }),
                }
            }
            if let (Some(done), false) = (states[job as usize].finished, self.finish_told[job as usize]) {
                self.finish_told[job as usize] = true;
                for k in self.dependents[job as usize].clone() {
                    self.waiting_on[k] -= 1;
                    if self.waiting_on[k] == 0 {
                        // Its predecessors' finishes are all known now: the last of them.
                        let last = jobs[k].after.iter().filter_map(|&a| states[a].finished).max().unwrap_or(done);
                        let offset = Picos::ceil_secs(jobs[k].start_secs).ok_or(SimError::TimeOverflow)?;
                        self.push(last.saturating_add(offset), EventKind::EnterAll { job: k as u32, round: 0 });
                    }
                }
            }
            let state = &mut states[job as usize];
            if state.reuse {
                entered.extend(state.all_in.drain(..).map(|round| (job, round)));
            } else {
                state.all_in.clear();
            }
        }
        Ok(())
    }

    /// Op of `round` ends `latency` from now, its rate last set by `bottleneck`: the
    /// round's end so far if no op of it ended later.
    fn note_end(&mut self, job: u32, round: usize, bottleneck: u32, latency: Picos) {
        let at = self.now.saturating_add(latency);
        if let Some(slot) = self.round_end.get_mut(job as usize).and_then(|r| r.get_mut(round)) {
            if slot.is_none_or(|(t, _)| at >= t) {
                *slot = Some((at, bottleneck));
            }
        }
    }

    /// The resources of an op's flow, into `self.scratch`, its latency and its reorder
    /// spread (seconds).
    fn resources_of(&mut self, job: u32, op: &Op, placement: &Placement) -> Result<(Picos, f64), SimError> {
        match &op.kind {
            OpKind::Transfer { from, to } => {
                let connection = Connection { job, from: *from as u32, to: *to as u32, channel: op.channel };
                let (src, dst) = (placement.devices[*from], placement.devices[*to]);
                let late =
                    flow_resources(&mut self.routes, self.options.paths, connection, src, dst, &mut self.scratch)?;
                Ok((Picos::ceil_secs(late.last_byte_secs).ok_or(SimError::TimeOverflow)?, late.spread_secs))
            }
            OpKind::InNetwork { ranks, senders, receivers } => {
                let devices_of = |list: &[railyard_schedule::Rank]| -> Vec<DeviceId> {
                    list.iter().map(|&r| placement.devices[r]).collect()
                };
                let (devices, from, to) = (devices_of(ranks), devices_of(senders), devices_of(receivers));
                let streams = in_network_link_streams(&mut self.routes, &devices, &from, &to)?;
                self.scratch.clear();
                for (link, count) in streams {
                    let w = count as f64;
                    let mut add = |resource: Resource| {
                        let index = self.topology.resource_index(resource) as u32;
                        match self.scratch.iter_mut().find(|(r, _)| *r == index) {
                            Some((_, f)) => *f += w,
                            None => self.scratch.push((index, w)),
                        }
                    };
                    add(Resource::Link(link));
                    for u in &self.topology.links[link].interfaces {
                        add(Resource::Interface { interface: u.interface, reverse: u.reverse });
                    }
                }
                // Latency of the reduction tree is not modelled (the seeds' switches have none).
                Ok((Picos::ZERO, 0.0))
            }
        }
    }

    fn start(&mut self, job: u32, round: usize, op_index: u32, op: &Op, placement: &Placement) -> Result<(), SimError> {
        self.stats.started += 1;
        let (latency, spread) = self.resources_of(job, op, placement)?;
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.flows.push(Flow { active_at: u32::MAX, ..Flow::default() });
                (self.flows.len() - 1) as u32
            }
        };
        let now = self.now;
        let active_at = 0;
        let f = &mut self.flows[slot as usize];
        f.job = job;
        f.round = round;
        f.op = op_index;
        f.ends = match &op.kind {
            OpKind::Transfer { from, to } => (Some(*from), Some(*to)),
            OpKind::InNetwork { .. } => (None, None),
        };
        f.track = match &op.kind {
            OpKind::Transfer { from, .. } => *from as u32,
            OpKind::InNetwork { ranks, .. } => ranks.first().map_or(0, |&r| r as u32),
        };
        f.bytes = op.bytes;
        f.bytes_left = op.bytes;
        f.rate = 0.0;
        f.updated = now;
        f.started = now;
        f.latency = latency;
        f.spread_secs = spread;
        f.fresh = true;
        f.bottleneck = u32::MAX;
        f.sent = 0.0;
        f.queue_port = u32::MAX;
        f.send_rate = 0.0;
        f.send_updated = now;
        f.send_version = f.send_version.wrapping_add(1);
        f.version = f.version.wrapping_add(1);
        f.resources.clear();
        f.resources.extend_from_slice(&self.scratch);
        f.active_at = active_at;
        self.active.push(slot);
        self.last_started = Some(slot);
        self.stats.flows += 1;
        if op.bytes <= 0.0 || f.resources.is_empty() {
            // Nothing to move, or nothing to move it over: done as it starts.
            let version = f.version;
            self.push(now, EventKind::Finish { flow: slot, version });
        } else {
            self.dirty = true;
        }
        Ok(())
    }

    fn finish(&mut self, slot: u32) {
        let f = &mut self.flows[slot as usize];
        for &(e, w) in &f.resources {
            self.resource_bytes[e as usize] += f.bytes * w;
        }
        if self.trace.wants() {
            let ev = TraceEvent::flow(f.job, f.track, f.round, f.started, self.now, f.bytes);
            self.trace.push(ev);
        }
        // Its resources' other flows may speed up.
        self.ended.extend(f.resources.iter().map(|&(e, _)| e));
        // Taken out of `active` (and its slot freed) at the next recompute.
        f.active_at = u32::MAX;
        f.version = f.version.wrapping_add(1);
        self.dirty = true;
    }

    /// New max-min fair rates for the active flows; flows whose rate changed get a new
    /// finish time.
    fn recompute(&mut self) -> Result<(), SimError> {
        self.dirty = false;
        self.stats.rate_updates += 1;
        // Flows in one order whatever order they started or ended in (job, round, op), so
        // equal states give equal rates bit for bit.
        let flows = &self.flows;
        let free = &mut self.free;
        self.active.retain(|&s| {
            let live = flows[s as usize].active_at != u32::MAX;
            if !live {
                free.push(s);
            }
            live
        });
        self.active.sort_unstable_by_key(|&s| flow_key(&flows[s as usize]));
        for (i, &s) in self.active.iter().enumerate() {
            self.flows[s as usize].active_at = i as u32;
        }
        if self.queues.is_some() {
            // The queues up to now, behind the bottlenecks of the rates about to change.
            self.observe_queues(None);
        }
        let all: Vec<&[(u32, f64)]> =
            self.active.iter().map(|&s| self.flows[s as usize].resources.as_slice()).collect();
        // Only the flows connected to what changed (`component.rs`; `None`: every flow),
        // unless something reads every flow's rate (watched resources, queues) or most
        // flows changed.
        let component: Option<Vec<usize>> = if self.options.global_rates
            || !self.watched.is_empty()
            || self.queues.is_some()
        {
            None
        } else {
            let fresh: Vec<usize> =
                self.active.iter().enumerate().filter(|(_, &s)| self.flows[s as usize].fresh).map(|(i, _)| i).collect();
            // Most flows new: the whole set changes anyway, skip the search.
            (fresh.len() * 2 <= all.len())
                .then(|| self.components.connected(&all, &self.ended, &fresh))
                .filter(|c| c.len() * 4 <= all.len() * 3)
        };
        self.ended.clear();
        let demands: Vec<&[(u32, f64)]> = match &component {
            None => all,
            Some(c) => c.iter().map(|&i| all[i]).collect(),
        };
        self.stats.rated += demands.len() as u64;
        self.fair.rates(&demands, &self.capacity, &mut self.rates);
        let now = self.now;
        if !self.watched.is_empty() {
            record_watched(&mut self.watched, &demands, &self.rates, &self.capacity, self.now);
        }
        if let Some(queues) = &mut self.queues {
            // A sender that has pushed its last byte no longer shares its host's links.
            let sending: Vec<&[(u32, f64)]> = self
                .active
                .iter()
                .zip(&demands)
                .map(|(&s, &d)| if self.flows[s as usize].sent >= self.flows[s as usize].bytes { &[][..] } else { d })
                .collect();
            queues.send_rates(&sending, &self.rates, &self.capacity, &mut self.send_rates);
        }
        for k in 0..demands.len() {
            let i = component.as_ref().map_or(k, |c| c[k]);
            let slot = self.active[i];
            let rate = self.rates[k];
            let f = &mut self.flows[slot as usize];
            f.fresh = false;
            f.bottleneck = self.fair.bottleneck[k];
            if rate == f.rate && f.rate > 0.0 {
                continue;
            }
            let elapsed = now.saturating_sub(f.updated).secs();
            f.bytes_left = (f.bytes_left - f.rate * elapsed).max(0.0);
            f.updated = now;
            f.rate = rate;
            f.version = f.version.wrapping_add(1);
            if f.spread_secs > 0.0 && rate.is_finite() {
                let held = rate * f.spread_secs;
                if held > self.reorder_peak_bytes {
                    self.reorder_peak_bytes = held;
                }
            }
            let secs = if rate.is_infinite() { 0.0 } else { f.bytes_left / rate };
            let done = Picos::ceil_secs(secs).ok_or(SimError::TimeOverflow)?;
            let at = now.0.checked_add(done.0).ok_or(SimError::TimeOverflow)?;
            self.seq += 1;
            let kind = EventKind::Finish { flow: slot, version: f.version };
            self.events.push(Reverse(Event { at: Picos(at), order: kind.order(), seq: self.seq, kind }));
        }
        if self.queues.is_some() {
            for (i, &slot) in self.active.iter().enumerate() {
                let f = &mut self.flows[slot as usize];
                let rate = if f.sent >= f.bytes { 0.0 } else { self.send_rates[i] };
                if rate == f.send_rate {
                    continue;
                }
                f.send_rate = rate;
                f.send_version = f.send_version.wrapping_add(1);
                if rate > 0.0 && rate.is_finite() {
                    let done = Picos::ceil_secs((f.bytes - f.sent) / rate).ok_or(SimError::TimeOverflow)?;
                    let at = now.0.checked_add(done.0).ok_or(SimError::TimeOverflow)?;
                    self.seq += 1;
                    let kind = EventKind::SendDone { flow: slot, version: f.send_version };
                    self.events.push(Reverse(Event { at: Picos(at), order: kind.order(), seq: self.seq, kind }));
                }
            }
        }
        Ok(())
    }

    /// Bring every live flow's sent bytes up to now (`done`: a sender that has pushed
    /// its last byte) and record the queues behind their bottlenecks.
    fn observe_queues(&mut self, done: Option<u32>) {
        let Some(queues) = &mut self.queues else { return };
        let now = self.now;
        let mut backlog = Vec::with_capacity(self.active.len());
        for &slot in &self.active {
            let f = &mut self.flows[slot as usize];
            if f.active_at == u32::MAX {
                continue;
            }
            let pushed = f.send_rate * now.saturating_sub(f.send_updated).secs();
            f.sent = if done == Some(slot) { f.bytes } else { (f.sent + pushed).min(f.bytes) };
            f.send_updated = now;
            if done == Some(slot) {
                f.send_rate = 0.0;
            }
            let left = (f.bytes_left - f.rate * now.saturating_sub(f.updated).secs()).max(0.0);
            let queued = (f.sent - (f.bytes - left)).max(0.0);
            // A backlog stays at the port where it formed (the flow's bottleneck then, or
            // the first port of its path), even when a tie later names another resource.
            if queued < 1.0 {
                f.queue_port = u32::MAX;
            } else if f.queue_port == u32::MAX {
                f.queue_port = queues.port_of(f.bottleneck, &f.resources);
            }
            backlog.push((f.queue_port, queued));
        }
        queues.observe(now, backlog.into_iter());
    }

    /// Every rank of `job` (the only job) has just entered round `k`. If the whole state —
    /// ranks, flows, pending starts — is the state at the same moment of round k − 1
    /// moved one period on, and the rounds ahead move the same traffic, nothing can
    /// tell the rounds apart but the time: the run of repeats advances one period per
    /// round. Jump over as many as keep every held round inside the run. (Bit for bit:
    /// the state includes the order events and flows are taken in.)
    fn maybe_skip(&mut self, state: &mut Job<'_>, job: u32, k: usize, placement: &Placement) -> Result<(), SimError> {
        let now = self.now;
        let mut sig = std::mem::take(&mut self.signature_scratch);
        sig.clear();
        self.signature(state, k, now, &mut sig);
        let previous = self.signature.take();
        let repeat = state.repeats(k);
        let matched = match &previous {
            Some((pk, pt, psig)) if repeat && *pk + 1 == k && *psig == sig => Some(now.saturating_sub(*pt)),
            _ => None,
        };
        let rounds = state.run_end(k).saturating_sub(state.last_held() + 1);
        match matched {
            Some(period) if rounds >= 1 && period > Picos::ZERO => {
                let by = Picos(period.0.checked_mul(rounds as u64).ok_or(SimError::TimeOverflow)?);
                now.0.checked_add(by.0).ok_or(SimError::TimeOverflow)?;
                // The skipped rounds' bytes: `rounds` times round k's (all its traffic).
                let ops: Vec<Op> = state.held_ops(k).map(<[Op]>::to_vec).unwrap_or_default();
                for op in &ops {
                    self.resources_of(job, op, placement)?;
                    for &(e, w) in &self.scratch {
                        self.resource_bytes[e as usize] += op.bytes * w * rounds as f64;
                    }
                }
                self.shift(rounds, by);
                state.shift(k, rounds, period, by);
                if let Some(ends) = self.round_end.get_mut(job as usize) {
                    for j in (k..=state.last_held()).rev() {
                        if j + rounds < ends.len() {
                            ends[j + rounds] = ends[j].map(|(t, r)| (t.saturating_add(by), r));
                        }
                    }
                    let base = ends[k - 1];
                    for (i, end) in ends[k..k + rounds].iter_mut().enumerate() {
                        *end = base.map(|(t, r)| (t.saturating_add(Picos(period.0 * (i as u64 + 1))), r));
                    }
                }
                self.signature_scratch = sig;
                if let Some((_, _, p)) = previous {
                    self.signature_scratch = p;
                }
            }
            _ => {
                self.signature = Some((k, now, sig));
                if let Some((_, _, p)) = previous {
                    self.signature_scratch = p;
                }
            }
        }
        Ok(())
    }

    /// The state relative to round `k` and time `t` (see [`Engine::maybe_skip`]).
    fn signature(&self, state: &Job<'_>, k: usize, t: Picos, out: &mut Vec<u64>) {
        state.rank_signature(k, t, out);
        out.push(u64::from(self.dirty));
        let rel = |p: Picos| p.0.wrapping_sub(t.0);
        let mut live: Vec<&Flow> =
            self.active.iter().map(|&s| &self.flows[s as usize]).filter(|f| f.active_at != u32::MAX).collect();
        live.sort_unstable_by_key(|f| flow_key(f));
        for f in live {
            out.extend([
                f.round.wrapping_sub(k) as u64,
                u64::from(f.op),
                f.bytes_left.to_bits(),
                f.rate.to_bits(),
                rel(f.updated),
            ]);
        }
        out.push(u64::MAX);
        // Pending events by time, kind and what they are — not by when they were queued,
        // which nothing depends on (flows are ordered by `flow_key`).
        let mut pending: Vec<[u64; 4]> = Vec::new();
        for Reverse(e) in self.events.iter() {
            match e.kind {
                EventKind::Finish { flow, version } => {
                    let f = &self.flows[flow as usize];
                    if f.version == version && f.active_at != u32::MAX {
                        pending.push([rel(e.at), 0, f.round.wrapping_sub(k) as u64, u64::from(f.op)]);
                    }
                }
                EventKind::EnterAll { round, .. } => pending.push([rel(e.at), 1, round.wrapping_sub(k) as u64, 0]),
                EventKind::Ready { rank, .. } => pending.push([rel(e.at), 3, rank as u64, 0]),
                EventKind::SendDone { .. } => {}
                EventKind::Delivered { round, op, .. } => {
                    pending.push([rel(e.at), 4, round.wrapping_sub(k) as u64, u64::from(op)])
                }
                EventKind::Start { round, op, .. } => {
                    pending.push([rel(e.at), 2, round.wrapping_sub(k) as u64, u64::from(op)])
                }
            }
        }
        pending.sort_unstable();
        out.extend(pending.into_iter().flatten());
    }

    /// Move every flow and pending event `rounds` rounds and `by` time on.
    fn shift(&mut self, rounds: usize, by: Picos) {
        self.now = self.now.saturating_add(by);
        for &slot in &self.active {
            let f = &mut self.flows[slot as usize];
            f.round += rounds;
            f.updated = f.updated.saturating_add(by);
            f.started = f.started.saturating_add(by);
        }
        let events = std::mem::take(&mut self.events).into_vec();
        self.events = events
            .into_iter()
            .map(|Reverse(mut e)| {
                e.at = e.at.saturating_add(by);
                match &mut e.kind {
                    EventKind::Start { round, .. }
                    | EventKind::EnterAll { round, .. }
                    | EventKind::Delivered { round, .. } => *round += rounds,
                    EventKind::Finish { .. } | EventKind::Ready { .. } | EventKind::SendDone { .. } => {}
                }
                Reverse(e)
            })
            .collect();
    }

    fn report(mut self, jobs: &[JobSpec<'_>], states: &[Job<'_>]) -> SimReport {
        for (j, state) in states.iter().enumerate() {
            for (round, span) in state.spans.iter().enumerate() {
                if let Some(s) = span {
                    self.trace.round(j as u32, round, s.start, s.end);
                }
            }
        }
        let makespan = states.iter().filter_map(|s| s.finished).max().unwrap_or(Picos::ZERO);
        let topology = self.topology;
        let name = |r: u32| {
            (r != u32::MAX).then(|| {
                let resource = topology.resource(r as usize);
                (topology.resource_name(resource), topology.resource_kind(resource).to_string())
            })
        };
        let job_reports: Vec<JobReport> = jobs
            .iter()
            .zip(states)
            .zip(&self.round_end)
            .map(|((spec, state), ends)| {
                let ends: Vec<Option<(String, String)>> = ends.iter().map(|e| e.and_then(|(_, r)| name(r))).collect();
                let mut report = JobReport::new(spec, state, &ends);
                report.critical_path = self.history.as_ref().map(|h| chain(h, state, topology));
                report
            })
            .collect();
        let secs = makespan.secs();
        let mut resources: Vec<ResourceUse> = (0..self.capacity.len())
            .filter(|&i| self.resource_bytes[i] > 0.0)
            .map(|i| {
                let r = self.topology.resource(i);
                let bytes = self.resource_bytes[i];
                ResourceUse {
                    resource: self.topology.resource_name(r),
                    kind: self.topology.resource_kind(r).to_string(),
                    bytes,
                    bytes_per_sec: self.capacity[i],
                    utilisation: if secs > 0.0 { bytes / (self.capacity[i] * secs) } else { 0.0 },
                }
            })
            .collect();
        resources.sort_by(|a, b| b.utilisation.total_cmp(&a.utilisation).then_with(|| a.resource.cmp(&b.resource)));
        let queues = self.queues.as_ref().map(|q| q.report(self.topology)).unwrap_or_default();
        let utilisation_over_time = self
            .watched
            .iter()
            .map(|(e, points)| ResourceSeries {
                resource: self.topology.resource_name(self.topology.resource(*e as usize)),
                points: points.iter().map(|&(t, u)| (t.secs(), u)).collect(),
            })
            .collect();
        SimReport {
            reorder_peak_bytes: self.reorder_peak_bytes,
            queues,
            utilisation_over_time,
            topology: self.topology.name.clone(),
            dependencies: self.options.dependencies,
            paths: self.options.paths,
            makespan_secs: secs,
            jobs: job_reports,
            events: self.stats.events,
            flows: self.stats.flows,
            rate_updates: self.stats.rate_updates,
            rated_flows: self.stats.rated,
            resources,
            trace_events: self.trace.len(),
            trace_dropped: self.trace.dropped(),
            trace: self.trace,
        }
    }
}

/// The busiest rank's host work, as the per-round model counts it (`HostCosts::secs`).
fn host_secs(schedule: &CompactSchedule, topology: &Topology) -> f64 {
    let work = schedule.host_work();
    let elements = work.copied_elements_max + work.reduced_elements_max;
    let (local, messages) = topology.host.secs(elements.saturating_mul(schedule.elem_bytes), work.messages_max);
    local + messages
}

/// The watched resources' utilisation from now on (the rates just computed).
fn record_watched(watched: &mut [Watched], demands: &[&[(u32, f64)]], rates: &[f64], capacity: &[f64], now: Picos) {
    for (e, points) in watched.iter_mut() {
        let load: f64 = demands
            .iter()
            .zip(rates)
            .filter_map(|(d, &r)| d.iter().find(|(x, _)| x == e).map(|&(_, w)| w * r))
            .filter(|x| x.is_finite())
            .sum();
        let u = load / capacity[*e as usize];
        if points.last().is_none_or(|&(_, v)| v != u) {
            points.push((now, u));
        }
        if points.len() > MAX_SERIES_POINTS {
            // Keep every other point: the shape at half the resolution, bounded memory.
            let mut i = 0;
            points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
        }
    }
}

/// A watched resource: its index, and (time, utilisation) points.
type Watched = (u32, Vec<(Picos, f64)>);

/// The critical path of a job: from the op whose end finished it, back through the
/// ops each one waited for last, in time order.
fn chain(history: &[Record], state: &Job<'_>, topology: &Topology) -> Vec<CriticalStep> {
    let mut steps = Vec::new();
    let mut at = state.finish_cause;
    while let Some(r) = history.get(at as usize) {
        let (from, to) = (r.from, r.to);
        steps.push(CriticalStep {
            round: state.round_label(r.round),
            from,
            to,
            start_secs: r.start.secs(),
            end_secs: r.end.secs(),
            resource: (r.bottleneck != u32::MAX)
                .then(|| topology.resource_name(topology.resource(r.bottleneck as usize))),
        });
        // Causes point to earlier records; the bound only guards against a bug.
        if r.cause >= at || steps.len() > history.len() {
            break;
        }
        at = r.cause;
    }
    steps.reverse();
    steps
}

/// Resource indices of the names to watch; an unknown name is an error naming it.
fn watched_resources(topology: &Topology, names: &[String]) -> Result<Vec<Watched>, SimError> {
    if names.len() > 64 {
        return Err(SimError::TooManyWatched { count: names.len(), limit: 64 });
    }
    names
        .iter()
        .map(|name| {
            (0..topology.resource_count())
                .find(|&i| &topology.resource_name(topology.resource(i)) == name)
                .map(|i| (i as u32, Vec::new()))
                .ok_or_else(|| SimError::UnknownResource { name: name.clone() })
        })
        .collect()
}

/// `after` without repeats (a job named twice is waited for once).
fn distinct(after: &[usize]) -> Vec<usize> {
    let mut v = after.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// A job that waits on itself through `waits` (for each job, the jobs it waits for):
/// the first one on, or behind, a cycle.
pub fn on_cycle(waits: &[Vec<usize>]) -> Option<usize> {
    // Kahn's algorithm: what is never freed is on a cycle or behind one. Repeats in a
    // list are waited for once.
    let waits: Vec<Vec<usize>> = waits.iter().map(|w| distinct(w)).collect();
    let mut waiting: Vec<usize> = waits.iter().map(Vec::len).collect();
    let mut free: Vec<usize> = (0..waits.len()).filter(|&j| waiting[j] == 0).collect();
    let mut seen = 0;
    while let Some(j) = free.pop() {
        seen += 1;
        for (k, w) in waits.iter().enumerate() {
            if w.contains(&j) {
                waiting[k] -= 1;
                if waiting[k] == 0 {
                    free.push(k);
                }
            }
        }
    }
    (seen < waits.len()).then(|| (0..waits.len()).find(|&j| waiting[j] > 0).unwrap_or(0))
}

/// The order flows are taken in: by job, round and place in the round.
fn flow_key(f: &Flow) -> (u32, usize, u32) {
    (f.job, f.round, f.op)
}

fn window_error(jobs: &[JobSpec<'_>], job: u32, rounds: usize) -> SimError {
    SimError::WindowTooLarge { job: jobs[job as usize].name.clone(), rounds, limit: MAX_HELD_ITEMS }
}

//! Flow control, time-stepped (seed 001 §7.5.2): senders that push at their own rate,
//! switch ports with finite buffers, and what happens when one fills.
//!
//! The event engine gives every flow its max-min fair share: ideal congestion control,
//! no queue ever overflows. Here a flow is a fluid pushed by its sender at a rate the
//! sender controls, along one path (its primary path, or its ECMP hash path); every
//! link serves its queue first in, first out (a flow leaves in proportion to its share
//! of the queue), one step `dt` at a time. A switch port's queue holds at most
//! `buffer_bytes`:
//! - `Drop`: what does not fit is lost, counted, and sent again by its sender.
//! - `Pause` (PFC, IEEE 802.1Qbb): a switch counts the bytes it holds per ingress link;
//!   past `xoff` it pauses that link upstream (everything on it, whatever its
//!   destination) until they fall to `xon`. The pause spreads: the paused link's own
//!   queue fills and pauses the links before it, and flows that never cross the
//!   congested port wait behind it (head-of-line blocking).
//!
//! End-to-end rate control (ECN marks, DCQCN-style): a port whose queue passes
//! `mark_bytes` marks the flows in it; `feedback_secs` later each marked sender cuts its
//! rate to `cut` times itself — once per congestion episode (until the queues it waits
//! in have emptied), as the seed's example reacts once — and, a feedback interval after
//! its last cut, raises it by `increase_bytes_per_sec` every microsecond up to its line
//! rate.
//!
//! Jobs run their rounds behind barriers (a round's flows start α after the last of
//! the round before is delivered). Time steps bound the work: this is for incasts and
//! a few jobs' worth of flows, not for thousands of GPUs (the event engine's job).

use railyard_topology::{DeviceKind, LinkId, Placement, RouteTable, Topology};
use serde::Serialize;

use crate::error::SimError;
use crate::job_spec::JobSpec;
use crate::paths::{ecmp_path, Connection, Paths};

/// Flow-hops and links served, summed over steps, one run may take (several seconds on
/// this machine); a run that needs more stops with an error saying how far it got.
pub const MAX_WORK: u128 = 1 << 28;
/// The finest time step of the fluid model.
pub const MIN_DT_SECS: f64 = 1e-10;

/// What a full switch buffer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowControl {
    Drop,
    Pause,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FluidOptions {
    pub dt_secs: f64,
    pub flow_control: FlowControl,
    /// Each switch port's egress buffer.
    pub buffer_bytes: f64,
    /// PFC: pause an ingress link past this many bytes held from it, resume at `xon`.
    pub xoff_bytes: f64,
    pub xon_bytes: f64,
    /// ECN: mark flows in a port queue longer than this (`None`: no rate control).
    pub mark_bytes: Option<f64>,
    pub feedback_secs: f64,
    /// Multiplicative decrease on feedback.
    pub cut: f64,
    /// Additive increase, bytes/s gained per microsecond without feedback.
    pub increase_bytes_per_sec: f64,
    /// Bytes already waiting in every switch port's queue at the start (the seed's
    /// half-full buffer), as a fluid that leaves first.
    pub initial_queue_bytes: f64,
    pub paths: Paths,
    /// Stop after this much simulated time even if flows remain (reported unfinished).
    pub horizon_secs: f64,
}

impl Default for FluidOptions {
    fn default() -> Self {
        FluidOptions {
            dt_secs: 10e-9,
            flow_control: FlowControl::Pause,
            buffer_bytes: 1024.0 * 1024.0,
            xoff_bytes: 512.0 * 1024.0,
            xon_bytes: 256.0 * 1024.0,
            mark_bytes: None,
            feedback_secs: 20e-6,
            cut: 0.5,
            increase_bytes_per_sec: 0.0,
            initial_queue_bytes: 0.0,
            paths: Paths::Split,
            horizon_secs: 0.1,
        }
    }
}

/// One port over a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortReport {
    pub resource: String,
    pub peak_bytes: f64,
    pub peak_secs: f64,
    /// When its queue first reached the buffer.
    pub full_secs: Option<f64>,
    /// When its queue was next empty after being full.
    pub empty_secs: Option<f64>,
    pub dropped_bytes: f64,
    /// Time its upstream link was paused by this switch (PFC), summed.
    pub paused_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FluidFlowReport {
    pub job: String,
    pub from: usize,
    pub to: usize,
    pub round: usize,
    pub bytes: f64,
    pub start_secs: f64,
    /// When its last byte was delivered (absent: not by the horizon).
    pub finish_secs: Option<f64>,
    pub dropped_bytes: f64,
    /// Its sending rate at the end (bytes/s), after any cuts.
    pub final_rate: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FluidJobReport {
    pub name: String,
    pub finish_secs: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FluidReport {
    pub options: FluidOptions,
    pub end_secs: f64,
    pub steps: u64,
    pub jobs: Vec<FluidJobReport>,
    /// Switch ports that queued, largest peak first.
    pub ports: Vec<PortReport>,
    pub flows: Vec<FluidFlowReport>,
    /// The most loaded port's queue over time (seconds, bytes), sampled.
    pub busiest_queue: Vec<(f64, f64)>,
}

/// A transfer of a round: from, to, bytes, channel.
type Planned = (usize, usize, f64, u32);

struct FFlow {
    job: usize,
    round: usize,
    from: usize,
    to: usize,
    path: Vec<LinkId>,
    bytes: f64,
    /// Not yet pushed by the sender (dropped bytes come back here).
    unsent: f64,
    /// Waiting at each hop's egress queue.
    queued: Vec<f64>,
    delivered: f64,
    dropped: f64,
    rate: f64,
    line_rate: f64,
    start: f64,
    finish: Option<f64>,
    next_cut: Option<f64>,
    last_cut: f64,
    /// Cut in the current congestion episode (reset when its queues have emptied).
    cut_this_episode: bool,
}

/// One link over the run: its capacity, whether it is a switch port (with a buffer),
/// and the queues and pauses of the current step and the run.
#[derive(Debug, Clone, Default)]
struct LinkState {
    cap: f64,
    port: bool,
    /// Ends at a switch: its upstream end can be paused by it (PFC).
    into_switch: bool,
    /// The initial fluid still ahead of the flows.
    initial: f64,
    paused: bool,
    /// Bytes queued this step.
    queue: f64,
    /// The share of its queue it serves this step.
    share: f64,
    /// Drop: the share of its flows' bytes it keeps.
    keep: f64,
    /// Pause: bytes the switch holds that came in over this link.
    held: f64,
    /// Pause: it feeds a full port.
    feeds_full: bool,
    /// Pause: a port at its buffer (until it has drained to half).
    full: bool,
    peak: (f64, f64),
    full_at: Option<f64>,
    empty_at: Option<f64>,
    dropped: f64,
    paused_for: f64,
}

impl LinkState {
    /// What the port holds: its flows' queue and the initial fluid.
    fn held_total(&self) -> f64 {
        self.queue + self.initial
    }
}

/// A job's progress: the round it is in, when it next starts a round, when it ended and
/// how many flows of its round are still in flight.
#[derive(Debug, Clone)]
struct JobState {
    round: usize,
    start: Option<f64>,
    done: Option<f64>,
    active: usize,
}

/// The fluid model's state between steps: every flow, link and job, and the clock.
struct Fluid<'a> {
    topology: &'a Topology,
    jobs: &'a [JobSpec<'a>],
    options: &'a FluidOptions,
    routes: RouteTable<'a>,
    /// Every job's rounds, made up front (this model is for small cases).
    rounds: Vec<Vec<Vec<Planned>>>,
    flows: Vec<FFlow>,
    /// Flows not yet delivered, by index into `flows`.
    live: Vec<usize>,
    links: Vec<LinkState>,
    state: Vec<JobState>,
    t: f64,
    step: u64,
    work: u128,
    samples: Vec<(f64, Vec<f64>)>,
    sample_every: u64,
    /// Scratch: what each hop of a flow serves this step.
    out: Vec<f64>,
}

/// Run `jobs` through the fluid model; see the module documentation.
pub fn simulate_fluid(
    topology: &Topology,
    jobs: &[JobSpec<'_>],
    options: &FluidOptions,
) -> Result<FluidReport, SimError> {
    check(options)?;
    if jobs.is_empty() {
        return Err(SimError::NoJobs);
    }
    let mut fluid = Fluid::new(topology, jobs, options);
    loop {
        fluid.admit()?;
        if fluid.state.iter().all(|j| j.done.is_some()) || fluid.t >= options.horizon_secs {
            break;
        }
        let in_flight: u128 = fluid.flows.iter().filter(|f| f.finish.is_none()).map(|f| f.path.len() as u128).sum();
        fluid.charge(in_flight)?;
        if fluid.skip_idle() {
            continue;
        }
        fluid.push();
        fluid.serve();
        fluid.t += options.dt_secs;
        fluid.step += 1;
        let live: u128 = fluid.live.iter().map(|&i| fluid.flows[i].path.len() as u128).sum();
        fluid.charge(live)?;
        fluid.tally_queues();
        match options.flow_control {
            FlowControl::Drop => fluid.drop_overflow(),
            FlowControl::Pause => fluid.pause_upstream(),
        }
        fluid.watch_ports();
        if let Some(mark) = options.mark_bytes {
            fluid.control_rates(mark);
        }
        fluid.complete();
        fluid.sample();
    }
    Ok(fluid.report())
}

/// The options are in their domains.
pub fn check(options: &FluidOptions) -> Result<(), SimError> {
    let bad = |field: &'static str, value: f64| SimError::BadFluidOption { field, value };
    for (field, v, ok) in [
        // A step below 0.1 ns resolves nothing a link does (a byte at 10 PB/s takes 0.1 fs,
        // but queues and pauses act over nanoseconds) and only multiplies the steps.
        ("dt", options.dt_secs, (MIN_DT_SECS..=1e-3).contains(&options.dt_secs)),
        ("buffer", options.buffer_bytes, options.buffer_bytes > 0.0),
        ("xoff", options.xoff_bytes, options.xoff_bytes > 0.0 && options.xoff_bytes <= options.buffer_bytes),
        ("xon", options.xon_bytes, options.xon_bytes >= 0.0 && options.xon_bytes < options.xoff_bytes),
        ("feedback", options.feedback_secs, options.feedback_secs >= 0.0),
        ("cut", options.cut, options.cut > 0.0 && options.cut <= 1.0),
        ("increase", options.increase_bytes_per_sec, options.increase_bytes_per_sec >= 0.0),
        ("initial queue", options.initial_queue_bytes, options.initial_queue_bytes >= 0.0),
        ("horizon", options.horizon_secs, options.horizon_secs > 0.0 && options.horizon_secs <= 10.0),
    ] {
        if !(v.is_finite() && ok) {
            return Err(bad(field, v));
        }
    }
    Ok(())
}

impl<'a> Fluid<'a> {
    fn new(topology: &'a Topology, jobs: &'a [JobSpec<'a>], options: &'a FluidOptions) -> Self {
        let switch = |d: usize| matches!(topology.devices[d].kind, DeviceKind::Switch | DeviceKind::NvSwitch);
        let links = topology
            .links
            .iter()
            .map(|l| LinkState {
                cap: l.bytes_per_sec,
                port: switch(l.from),
                into_switch: switch(l.to),
                initial: if switch(l.from) { options.initial_queue_bytes } else { 0.0 },
                keep: 1.0,
                ..LinkState::default()
            })
            .collect();
        let rounds = jobs
            .iter()
            .map(|spec| {
                let s = spec.schedule;
                s.iter_rounds(None)
                    .map(|r| {
                        r.transfers
                            .iter()
                            .map(|t| (t.from, t.to, t.read.len as f64 * s.elem_bytes as f64, t.channel))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        Fluid {
            topology,
            jobs,
            options,
            routes: RouteTable::new(topology),
            rounds,
            flows: Vec::new(),
            live: Vec::new(),
            links,
            state: jobs
                .iter()
                .map(|j| JobState { round: 0, start: Some(j.start_secs), done: None, active: 0 })
                .collect(),
            t: 0.0,
            step: 0,
            work: 0,
            samples: Vec::new(),
            sample_every: 1,
            out: Vec::new(),
        }
    }

    /// Count a pass over every link and `hops` flow-hops against the run's work limit.
    fn charge(&mut self, hops: u128) -> Result<(), SimError> {
        self.work += self.links.len() as u128 + hops;
        if self.work > MAX_WORK {
            return Err(SimError::FluidTooLarge { work: self.work, limit: MAX_WORK, reached_secs: self.t });
        }
        Ok(())
    }

    /// Start the rounds whose time has come: each transfer a flow at its sender's line
    /// rate (a round with nothing to send ends at once).
    fn admit(&mut self) -> Result<(), SimError> {
        let t = self.t;
        for j in 0..self.jobs.len() {
            let Some(at) = self.state[j].start else { continue };
            if t + 1e-15 < at {
                continue;
            }
            self.state[j].start = None;
            loop {
                let Some(round) = self.rounds[j].get(self.state[j].round) else {
                    // The rounds it stands for without holding them (an MSCCL loop's
                    // passes past those built) start up after the held ones.
                    let unheld = self.jobs[j].schedule.unheld_rounds as f64 * self.topology.round_startup_secs;
                    self.state[j].done = Some(t + unheld);
                    break;
                };
                let placement: &Placement = &self.jobs[j].placement;
                for &(from, to, bytes, channel) in round {
                    if bytes <= 0.0 {
                        continue;
                    }
                    let (src, dst) = (placement.devices[from], placement.devices[to]);
                    let connection = Connection { job: j as u32, from: from as u32, to: to as u32, channel };
                    let path = one_path(&mut self.routes, self.options.paths, connection, src, dst)?;
                    let line_rate = path.first().map_or(f64::INFINITY, |&l| self.links[l].cap);
                    self.flows.push(FFlow {
                        job: j,
                        round: self.state[j].round,
                        from,
                        to,
                        queued: vec![0.0; path.len()],
                        path,
                        bytes,
                        unsent: bytes,
                        delivered: 0.0,
                        dropped: 0.0,
                        rate: line_rate,
                        line_rate,
                        start: t,
                        finish: None,
                        next_cut: None,
                        last_cut: f64::NEG_INFINITY,
                        cut_this_episode: false,
                    });
                    self.live.push(self.flows.len() - 1);
                    self.state[j].active += 1;
                }
                if self.state[j].active > 0 {
                    break;
                }
                self.state[j].round += 1;
            }
        }
        Ok(())
    }

    /// With nothing in flight and the next start later, jump to it (on the step grid).
    fn skip_idle(&mut self) -> bool {
        let flows = &self.flows;
        self.live.retain(|&i| flows[i].finish.is_none());
        if !self.live.is_empty() {
            return false;
        }
        let dt = self.options.dt_secs;
        let next = self.state.iter().filter_map(|j| j.start).fold(f64::INFINITY, f64::min);
        if next.is_finite() && next > self.t + dt {
            let steps = ((next - self.t) / dt).floor();
            self.t += steps * dt;
            self.step += steps as u64;
            return true;
        }
        false
    }

    /// Step 1: senders push (not through a paused first link).
    fn push(&mut self) {
        let dt = self.options.dt_secs;
        for &fi in &self.live {
            let f = &mut self.flows[fi];
            let Some(&first) = f.path.first() else { continue };
            if self.links[first].paused || f.unsent <= 0.0 {
                continue;
            }
            let push = (f.rate * dt).min(f.unsent);
            f.unsent -= push;
            f.queued[0] += push;
        }
    }

    /// Every link's queue: what its flows have waiting at it.
    fn tally_queues(&mut self) {
        self.links.iter_mut().for_each(|l| l.queue = 0.0);
        for &fi in &self.live {
            let f = &self.flows[fi];
            for (i, &l) in f.path.iter().enumerate() {
                self.links[l].queue += f.queued[i];
            }
        }
    }

    /// Step 2: every link serves its queue, first in first out: the initial fluid first, then
    /// each flow in proportion to what it has waiting. What a hop passes on waits a step
    /// at the next.
    fn serve(&mut self) {
        self.tally_queues();
        let dt = self.options.dt_secs;
        for l in &mut self.links {
            l.share = 0.0;
            if l.paused {
                continue;
            }
            let mut budget = l.cap * dt;
            let first = l.initial.min(budget);
            l.initial -= first;
            budget -= first;
            l.share = if l.queue > 0.0 { (budget / l.queue).min(1.0) } else { 0.0 };
        }
        for &fi in &self.live {
            let f = &mut self.flows[fi];
            // What every hop serves, from the queues as they were at the step's start.
            self.out.clear();
            self.out.extend(f.path.iter().enumerate().map(|(i, &l)| f.queued[i] * self.links[l].share));
            for (i, &o) in self.out.iter().enumerate() {
                f.queued[i] -= o;
                if i + 1 < f.path.len() {
                    f.queued[i + 1] += o;
                } else {
                    f.delivered += o;
                }
            }
        }
    }

    /// Step 3, drop: a port past its buffer loses what does not fit, in proportion to what
    /// each flow has waiting there; the senders send it again.
    fn drop_overflow(&mut self) {
        let buffer = self.options.buffer_bytes;
        for l in &mut self.links {
            l.keep = 1.0;
            if l.port && l.held_total() > buffer && l.queue > 0.0 {
                l.keep = ((buffer - l.initial).max(0.0) / l.queue).min(1.0);
            }
        }
        for &fi in &self.live {
            let f = &mut self.flows[fi];
            for (i, &l) in f.path.iter().enumerate() {
                let link = &mut self.links[l];
                if link.keep < 1.0 && f.queued[i] > 0.0 {
                    let lost = f.queued[i] * (1.0 - link.keep);
                    f.queued[i] -= lost;
                    f.dropped += lost;
                    f.unsent += lost;
                    link.dropped += lost;
                    link.queue -= lost;
                }
            }
        }
    }

    /// Step 3, pause (PFC): bytes each switch holds per ingress link (what waits at a port of
    /// the switch having come in over that link), and the links feeding a full port: past
    /// `xoff` held, or into a port at its buffer, an ingress link pauses.
    fn pause_upstream(&mut self) {
        let (buffer, dt) = (self.options.buffer_bytes, self.options.dt_secs);
        for l in &mut self.links {
            l.held = 0.0;
            l.feeds_full = false;
            if l.port {
                if l.held_total() >= buffer {
                    l.full = true;
                } else if l.held_total() <= buffer / 2.0 {
                    l.full = false;
                }
            }
        }
        for &fi in &self.live {
            let f = &self.flows[fi];
            for i in 1..f.path.len() {
                self.links[f.path[i - 1]].held += f.queued[i];
                if self.links[f.path[i]].full {
                    self.links[f.path[i - 1]].feeds_full = true;
                }
            }
        }
        for u in self.links.iter_mut().filter(|u| u.into_switch) {
            if !u.paused && (u.held >= self.options.xoff_bytes || u.feeds_full) {
                u.paused = true;
            } else if u.paused && u.held <= self.options.xon_bytes && !u.feeds_full {
                u.paused = false;
            }
            if u.paused {
                u.paused_for += dt;
            }
        }
    }

    /// Peaks after the drops (what the port holds), fill and empty times.
    fn watch_ports(&mut self) {
        let (t, buffer, dt) = (self.t, self.options.buffer_bytes, self.options.dt_secs);
        for l in self.links.iter_mut().filter(|l| l.port) {
            let q = l.held_total();
            if q > l.peak.0 {
                l.peak = (q, t);
            }
            if l.full_at.is_none() && q >= buffer - 1e-6 {
                l.full_at = Some(t);
            }
            // Empty: no more than the port forwards in one step (what arrived this step
            // waits one step in this discrete model).
            if l.full_at.is_some() && l.empty_at.is_none() && q <= l.cap * dt {
                l.empty_at = Some(t);
            }
        }
    }

    /// Step 4, rate control: marks past `mark` bytes, feedback after the delay, a cut once per
    /// congestion episode, or additive increase.
    fn control_rates(&mut self, mark: f64) {
        let (t, o) = (self.t, self.options);
        for &fi in &self.live {
            let f = &mut self.flows[fi];
            let links = &self.links;
            let marked = f
                .path
                .iter()
                .enumerate()
                .any(|(i, &l)| links[l].port && f.queued[i] > 0.0 && links[l].held_total() > mark);
            let calm = f.path.iter().all(|&l| !links[l].port || links[l].held_total() <= links[l].cap * o.dt_secs);
            if calm {
                f.cut_this_episode = false;
            }
            if marked && f.next_cut.is_none() && !f.cut_this_episode {
                f.next_cut = Some(t + o.feedback_secs);
                f.cut_this_episode = true;
            }
            match f.next_cut {
                Some(at) if t + 1e-15 >= at => {
                    f.rate *= o.cut;
                    f.last_cut = t;
                    f.next_cut = None;
                }
                _ if t - f.last_cut > o.feedback_secs && f.next_cut.is_none() => {
                    f.rate = (f.rate + o.increase_bytes_per_sec * o.dt_secs * 1e6).min(f.line_rate);
                }
                _ => {}
            }
        }
    }

    /// Step 5: flows done, rounds done: a job's next round starts α after its last flow.
    fn complete(&mut self) {
        let (t, alpha) = (self.t, self.topology.round_startup_secs);
        for &fi in &self.live {
            let f = &mut self.flows[fi];
            if f.delivered >= f.bytes * (1.0 - 1e-9) && f.unsent <= 1e-9 {
                f.finish = Some(t);
                let job = &mut self.state[f.job];
                job.active -= 1;
                if job.active == 0 {
                    job.round += 1;
                    job.start = Some(t + alpha);
                }
            }
        }
    }

    /// Every port's queue, every so many steps (halving the resolution to stay bounded).
    fn sample(&mut self) {
        if !self.step.is_multiple_of(self.sample_every) {
            return;
        }
        self.samples.push((self.t, self.links.iter().map(|l| if l.port { l.held_total() } else { 0.0 }).collect()));
        if self.samples.len() >= 4000 {
            let mut i = 0;
            self.samples.retain(|_| {
                i += 1;
                i % 2 == 0
            });
            self.sample_every *= 2;
        }
    }

    fn report(self) -> FluidReport {
        let topology = self.topology;
        let links = &self.links;
        let mut ports: Vec<PortReport> = (0..links.len())
            .filter(|&l| links[l].port && (links[l].peak.0 > 0.0 || links[l].dropped > 0.0))
            .map(|l| PortReport {
                resource: topology.link_name(l),
                peak_bytes: links[l].peak.0,
                peak_secs: links[l].peak.1,
                full_secs: links[l].full_at,
                empty_secs: links[l].empty_at,
                dropped_bytes: links[l].dropped,
                // The longest any link into this port's switch was paused.
                paused_secs: topology
                    .links
                    .iter()
                    .enumerate()
                    .filter(|(u, link)| link.to == topology.links[l].from && *u != l)
                    .map(|(u, _)| links[u].paused_for)
                    .fold(0.0, f64::max),
            })
            .collect();
        ports.sort_by(|a, b| b.peak_bytes.total_cmp(&a.peak_bytes).then_with(|| a.resource.cmp(&b.resource)));
        let busiest =
            (0..links.len()).filter(|&l| links[l].port).max_by(|&a, &b| links[a].peak.0.total_cmp(&links[b].peak.0));
        let busiest_queue = busiest.map_or_else(Vec::new, |l| self.samples.iter().map(|(t, q)| (*t, q[l])).collect());
        FluidReport {
            options: self.options.clone(),
            end_secs: self.t,
            steps: self.step,
            jobs: self
                .jobs
                .iter()
                .zip(&self.state)
                .map(|(j, s)| FluidJobReport { name: j.name.clone(), finish_secs: s.done })
                .collect(),
            ports,
            flows: self
                .flows
                .iter()
                .map(|f| FluidFlowReport {
                    job: self.jobs[f.job].name.clone(),
                    from: f.from,
                    to: f.to,
                    round: f.round,
                    bytes: f.bytes,
                    start_secs: f.start,
                    finish_secs: f.finish,
                    dropped_bytes: f.dropped,
                    final_rate: f.rate,
                })
                .collect(),
            busiest_queue,
        }
    }
}

/// The one path a flow takes: at every split the lowest-numbered link (`Split`: the
/// fluid model does not spread a flow), or the hashed one (`Ecmp`).
fn one_path(
    routes: &mut RouteTable,
    paths: Paths,
    connection: Connection,
    src: usize,
    dst: usize,
) -> Result<Vec<LinkId>, SimError> {
    match paths {
        Paths::Split => Ok(routes.primary_path(src, dst)?),
        Paths::Ecmp { seed } => ecmp_path(routes, seed, connection, src, dst),
    }
}

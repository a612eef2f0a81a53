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

/// Run `jobs` through the fluid model; see the module documentation.
pub fn simulate_fluid(
    topology: &Topology,
    jobs: &[JobSpec<'_>],
    options: &FluidOptions,
) -> Result<FluidReport, SimError> {
    let bad = |field: &'static str, value: f64| SimError::BadFluidOption { field, value };
    for (field, v, ok) in [
        ("dt", options.dt_secs, options.dt_secs > 0.0 && options.dt_secs <= 1e-3),
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
    if jobs.is_empty() {
        return Err(SimError::NoJobs);
    }
    let mut routes = RouteTable::new(topology);
    let switch = |d: usize| matches!(topology.devices[d].kind, DeviceKind::Switch | DeviceKind::NvSwitch);
    let nlinks = topology.links.len();
    let cap: Vec<f64> = topology.links.iter().map(|l| l.bytes_per_sec).collect();
    let port: Vec<bool> = topology.links.iter().map(|l| switch(l.from)).collect();
    // Every job's rounds, made up front (this model is for small cases).
    let mut rounds: Vec<Vec<Vec<Planned>>> = Vec::with_capacity(jobs.len());
    for spec in jobs {
        let s = spec.schedule;
        let mut list = Vec::new();
        for r in s.iter_rounds(None) {
            list.push(
                r.transfers
                    .iter()
                    .map(|t| (t.from, t.to, t.read.len as f64 * s.elem_bytes as f64, t.channel))
                    .collect(),
            );
        }
        rounds.push(list);
    }
    let mut work: u128 = 0;
    let alpha = topology.round_startup_secs;
    let dt = options.dt_secs;
    let mut flows: Vec<FFlow> = Vec::new();
    let mut job_round: Vec<usize> = vec![0; jobs.len()];
    let mut job_start: Vec<Option<f64>> = jobs.iter().map(|j| Some(j.start_secs)).collect();
    let mut job_done: Vec<Option<f64>> = vec![None; jobs.len()];
    let mut active_of_job: Vec<usize> = vec![0; jobs.len()];
    // Per link: the initial fluid still ahead of the flows.
    let mut initial: Vec<f64> = port.iter().map(|&p| if p { options.initial_queue_bytes } else { 0.0 }).collect();
    let mut paused = vec![false; nlinks];
    let mut peak = vec![(0.0f64, 0.0f64); nlinks];
    let mut full_at: Vec<Option<f64>> = vec![None; nlinks];
    let mut empty_at: Vec<Option<f64>> = vec![None; nlinks];
    let mut dropped_at = vec![0.0f64; nlinks];
    let mut paused_for = vec![0.0f64; nlinks];
    let mut samples: Vec<(f64, Vec<f64>)> = Vec::new();
    let mut sample_every = 1u64;
    let mut t = 0.0f64;
    let mut step = 0u64;
    let mut queue = vec![0.0f64; nlinks];
    let mut share = vec![0.0f64; nlinks];
    let mut keep = vec![1.0f64; nlinks];
    let mut held = vec![0.0f64; nlinks];
    let mut feeds_full = vec![false; nlinks];
    let mut full = vec![false; nlinks];
    // Flows not yet delivered, by index into `flows`.
    let mut live: Vec<usize> = Vec::new();
    let mut out: Vec<f64> = Vec::new();
    loop {
        // Start the rounds whose time has come.
        for j in 0..jobs.len() {
            let Some(at) = job_start[j] else { continue };
            if t + 1e-15 < at {
                continue;
            }
            job_start[j] = None;
            loop {
                let Some(round) = rounds[j].get(job_round[j]) else {
                    job_done[j] = Some(t);
                    break;
                };
                let placement: &Placement = &jobs[j].placement;
                for &(from, to, bytes, channel) in round {
                    if bytes <= 0.0 {
                        continue;
                    }
                    let (src, dst) = (placement.devices[from], placement.devices[to]);
                    let connection = Connection { job: j as u32, from: from as u32, to: to as u32, channel };
                    let path = one_path(&mut routes, options.paths, connection, src, dst)?;
                    let line_rate = path.first().map_or(f64::INFINITY, |&l| cap[l]);
                    flows.push(FFlow {
                        job: j,
                        round: job_round[j],
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
                    live.push(flows.len() - 1);
                    active_of_job[j] += 1;
                }
                if active_of_job[j] > 0 {
                    break;
                }
                job_round[j] += 1;
            }
        }
        if job_done.iter().all(Option::is_some) || t >= options.horizon_secs {
            break;
        }
        work +=
            nlinks as u128 + flows.iter().filter(|f| f.finish.is_none()).map(|f| f.path.len() as u128).sum::<u128>();
        if work > MAX_WORK {
            return Err(SimError::FluidTooLarge { work, limit: MAX_WORK, reached_secs: t });
        }
        // Nothing in flight and the next start later: jump to it (on the step grid).
        live.retain(|&i| flows[i].finish.is_none());
        if live.is_empty() {
            let next = job_start.iter().flatten().copied().fold(f64::INFINITY, f64::min);
            if next.is_finite() && next > t + dt {
                let steps = ((next - t) / dt).floor();
                t += steps * dt;
                step += steps as u64;
                continue;
            }
        }
        // 1. Senders push (not through a paused first link).
        for &fi in &live {
            let f = &mut flows[fi];
            let Some(&first) = f.path.first() else { continue };
            if paused[first] || f.unsent <= 0.0 {
                continue;
            }
            let push = (f.rate * dt).min(f.unsent);
            f.unsent -= push;
            f.queued[0] += push;
        }
        // 2. Every link serves its queue, first in first out: the initial fluid first,
        // then each flow in proportion to what it has waiting.
        queue.iter_mut().for_each(|q| *q = 0.0);
        for &fi in &live {
            let f = &flows[fi];
            for (i, &l) in f.path.iter().enumerate() {
                queue[l] += f.queued[i];
            }
        }
        for l in 0..nlinks {
            share[l] = 0.0;
            if paused[l] {
                continue;
            }
            let mut budget = cap[l] * dt;
            let first = initial[l].min(budget);
            initial[l] -= first;
            budget -= first;
            share[l] = if queue[l] > 0.0 { (budget / queue[l]).min(1.0) } else { 0.0 };
        }
        for &fi in &live {
            let f = &mut flows[fi];
            // What every hop serves, from the queues as they were at the step's start;
            // what a hop passes on waits a step at the next.
            out.clear();
            out.extend(f.path.iter().enumerate().map(|(i, &l)| f.queued[i] * share[l]));
            for (i, &o) in out.iter().enumerate() {
                f.queued[i] -= o;
                if i + 1 < f.path.len() {
                    f.queued[i + 1] += o;
                } else {
                    f.delivered += o;
                }
            }
        }
        t += dt;
        step += 1;
        work += nlinks as u128 + live.iter().map(|&i| flows[i].path.len() as u128).sum::<u128>();
        if work > MAX_WORK {
            return Err(SimError::FluidTooLarge { work, limit: MAX_WORK, reached_secs: t });
        }
        // 3. Full buffers: drop what does not fit, or pause the ingress links.
        queue.iter_mut().for_each(|q| *q = 0.0);
        for &fi in &live {
            let f = &flows[fi];
            for (i, &l) in f.path.iter().enumerate() {
                queue[l] += f.queued[i];
            }
        }
        if options.flow_control == FlowControl::Drop {
            // What each port keeps of its flows' bytes, then one pass over the flows.
            for l in 0..nlinks {
                keep[l] = 1.0;
                let q = queue[l] + initial[l];
                if port[l] && q > options.buffer_bytes && queue[l] > 0.0 {
                    keep[l] = ((options.buffer_bytes - initial[l]).max(0.0) / queue[l]).min(1.0);
                }
            }
            for &fi in &live {
                let f = &mut flows[fi];
                for (i, &l) in f.path.iter().enumerate() {
                    if keep[l] < 1.0 && f.queued[i] > 0.0 {
                        let lost = f.queued[i] * (1.0 - keep[l]);
                        f.queued[i] -= lost;
                        f.dropped += lost;
                        f.unsent += lost;
                        dropped_at[l] += lost;
                        queue[l] -= lost;
                    }
                }
            }
        } else {
            // Bytes each switch holds per ingress link (what waits at a port of the
            // switch having come in over that link), and the links feeding a full port:
            // past `xoff` held, or into a port at its buffer, an ingress link pauses.
            held.iter_mut().for_each(|h| *h = 0.0);
            feeds_full.iter_mut().for_each(|x| *x = false);
            for l in 0..nlinks {
                let q = queue[l] + initial[l];
                if port[l] {
                    if q >= options.buffer_bytes {
                        full[l] = true;
                    } else if q <= options.buffer_bytes / 2.0 {
                        full[l] = false;
                    }
                }
            }
            for &fi in &live {
                let f = &flows[fi];
                for i in 1..f.path.len() {
                    held[f.path[i - 1]] += f.queued[i];
                    if full[f.path[i]] {
                        feeds_full[f.path[i - 1]] = true;
                    }
                }
            }
            for u in 0..nlinks {
                if !switch(topology.links[u].to) {
                    continue;
                }
                if !paused[u] && (held[u] >= options.xoff_bytes || feeds_full[u]) {
                    paused[u] = true;
                } else if paused[u] && held[u] <= options.xon_bytes && !feeds_full[u] {
                    paused[u] = false;
                }
                if paused[u] {
                    paused_for[u] += dt;
                }
            }
        }
        // Peaks after the drops (what the port holds), fill and empty times.
        for l in (0..nlinks).filter(|&l| port[l]) {
            let q = queue[l] + initial[l];
            if q > peak[l].0 {
                peak[l] = (q, t);
            }
            if full_at[l].is_none() && q >= options.buffer_bytes - 1e-6 {
                full_at[l] = Some(t);
            }
            // Empty: no more than the port forwards in one step (what arrived this step
            // waits one step in this discrete model).
            if full_at[l].is_some() && empty_at[l].is_none() && q <= cap[l] * dt {
                empty_at[l] = Some(t);
            }
        }
        // 4. Rate control: marks, feedback after the delay, cut or additive increase.
        if let Some(mark) = options.mark_bytes {
            for &fi in &live {
                let f = &mut flows[fi];
                let marked = f
                    .path
                    .iter()
                    .enumerate()
                    .any(|(i, &l)| port[l] && f.queued[i] > 0.0 && queue[l] + initial[l] > mark);
                let calm = f.path.iter().all(|&l| !port[l] || queue[l] + initial[l] <= cap[l] * dt);
                if calm {
                    f.cut_this_episode = false;
                }
                if marked && f.next_cut.is_none() && !f.cut_this_episode {
                    f.next_cut = Some(t + options.feedback_secs);
                    f.cut_this_episode = true;
                }
                match f.next_cut {
                    Some(at) if t + 1e-15 >= at => {
                        f.rate *= options.cut;
                        f.last_cut = t;
                        f.next_cut = None;
                    }
                    _ if t - f.last_cut > options.feedback_secs && f.next_cut.is_none() => {
                        f.rate = (f.rate + options.increase_bytes_per_sec * dt * 1e6).min(f.line_rate);
                    }
                    _ => {}
                }
            }
        }
        // 5. Flows done, rounds done.
        for &fi in &live {
            let f = &mut flows[fi];
            if f.delivered >= f.bytes * (1.0 - 1e-9) && f.unsent <= 1e-9 {
                f.finish = Some(t);
                active_of_job[f.job] -= 1;
                if active_of_job[f.job] == 0 {
                    job_round[f.job] += 1;
                    job_start[f.job] = Some(t + alpha);
                }
            }
        }
        if step.is_multiple_of(sample_every) {
            samples.push((t, (0..nlinks).map(|l| if port[l] { queue[l] + initial[l] } else { 0.0 }).collect()));
            if samples.len() >= 4000 {
                // Half the resolution, bounded memory.
                let mut i = 0;
                samples.retain(|_| {
                    i += 1;
                    i % 2 == 0
                });
                sample_every *= 2;
            }
        }
    }
    let name = |l: usize| topology.link_name(l);
    let mut ports: Vec<PortReport> = (0..nlinks)
        .filter(|&l| port[l] && (peak[l].0 > 0.0 || dropped_at[l] > 0.0))
        .map(|l| PortReport {
            resource: name(l),
            peak_bytes: peak[l].0,
            peak_secs: peak[l].1,
            full_secs: full_at[l],
            empty_secs: empty_at[l],
            dropped_bytes: dropped_at[l],
            paused_secs: topology
                .links
                .iter()
                .enumerate()
                .filter(|(u, link)| link.to == topology.links[l].from && *u != l)
                .map(|(u, _)| paused_for[u])
                .fold(0.0, f64::max),
        })
        .collect();
    ports.sort_by(|a, b| b.peak_bytes.total_cmp(&a.peak_bytes).then_with(|| a.resource.cmp(&b.resource)));
    let busiest = (0..nlinks).filter(|&l| port[l]).max_by(|&a, &b| peak[a].0.total_cmp(&peak[b].0));
    let busiest_queue = busiest.map_or_else(Vec::new, |l| samples.iter().map(|(t, q)| (*t, q[l])).collect());
    Ok(FluidReport {
        options: options.clone(),
        end_secs: t,
        steps: step,
        jobs: jobs
            .iter()
            .zip(&job_done)
            .map(|(j, d)| FluidJobReport { name: j.name.clone(), finish_secs: *d })
            .collect(),
        ports,
        flows: flows
            .iter()
            .map(|f| FluidFlowReport {
                job: jobs[f.job].name.clone(),
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
    })
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

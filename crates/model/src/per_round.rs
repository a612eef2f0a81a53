//! The per-round resource model (seed 001 §7.2.1):
//!
//!   T_comm = Σ_r ( α + max_e V(r,e) / B(e) )
//!
//! Rounds run one after another (barriered); inside a round all transfers run in
//! parallel and the slowest resource decides. A resource e is a link direction or one
//! direction of a shared interface; V(r,e) is the bytes of round r that cross it
//! (routes split bytes over ECMP paths and NIC ports); B(e) its bandwidth. Only
//! payload transfer and per-round start-up are counted (footnote 3): no contention
//! with other jobs, no link latency, no reduction compute — except on topologies that
//! declare host costs (`HostCost`: local copies, reductions, per-message overhead).

use std::borrow::Cow;
use std::collections::BTreeMap;

use railyard_schedule::{CompactSchedule, Step, Transfer};
use railyard_topology::{DeviceKind, Hop, LinkClass, Placement, Protocol, Resource, RouteTable, Topology};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::algorithm_ref::AlgorithmRef;
use crate::error::ModelError;
use crate::expected::{ExpectedSums, Reduction, RoundRates};
use crate::in_network::InNetworkCache;
use crate::server_pairs::ServerPairBytes;

/// Two resources whose times differ by less than this (relative) are a tie; the
/// first in resource order is named, so reports are deterministic.
const TIE: f64 = 1e-12;

/// One resource's load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceLoad {
    pub resource: String,
    /// Link class (`nvlink`, `pcie`, `nic`, `fabric`) or `interface`.
    pub kind: String,
    pub bytes: f64,
    pub bytes_per_sec: f64,
    /// bytes / bytes_per_sec
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundCost {
    pub index: usize,
    pub label: String,
    pub phase: String,
    /// The label's parts: step `step` (from 1) of the phase's `steps`.
    #[serde(skip)]
    pub step: usize,
    #[serde(skip)]
    pub steps: usize,
    /// α + transfer_secs
    pub secs: f64,
    pub alpha_secs: f64,
    /// max over resources of V/B
    pub transfer_secs: f64,
    pub transfers: usize,
    pub bytes_sent: f64,
    pub bottleneck: Option<ResourceLoad>,
    /// Other resources that take as long as the bottleneck in this round (a tie: the
    /// first in resource order is named).
    pub tied_resources: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageCost {
    pub name: String,
    pub rounds: usize,
    pub secs: f64,
    pub bytes_sent: f64,
}

/// The resource that binds for the largest share of the time, over all rounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bottleneck {
    pub resource: String,
    pub kind: String,
    /// Rounds in which it was the bottleneck.
    pub rounds: usize,
    /// Transfer time of those rounds.
    pub secs: f64,
}

/// Which of the topology's achievable rates (`Achievable`'s fraction fields) sets a
/// schedule's expected time, on which resource, and for how long.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExpectedLimit {
    pub resource: String,
    /// `nvlink`, `pcie`, `nic`, `fabric` (a copy's rate) or `nvls`, `sharp` (an
    /// in-switch reduction's streams on NVLink or on the network).
    pub rate: &'static str,
    pub secs: f64,
}

impl ExpectedLimit {
    fn new(topology: &Topology, index: usize, reduction: bool, secs: f64) -> Self {
        let resource = topology.resource(index);
        let rate = match resource {
            Resource::Link(l) => match (topology.links[l].class, reduction) {
                (LinkClass::Nvlink, true) => "nvls",
                (_, true) => "sharp",
                (LinkClass::Nvlink, false) => "nvlink",
                // Shared memory is costed at the PCIe fraction (`Achievable::fraction`).
                (LinkClass::Pcie | LinkClass::Memory | LinkClass::Other, false) => "pcie",
                (LinkClass::Nic, false) => "nic",
                (LinkClass::Fabric, false) => "fabric",
            },
            Resource::Interface { .. } => "pcie",
        };
        ExpectedLimit { resource: topology.resource_name(resource), rate, secs }
    }
}

/// Host-side time of a schedule (see `railyard_topology::HostCosts`): the busiest
/// rank's local copies and reductions at the host's memory bandwidth, and its messages
/// at a fixed overhead each. Added to the link time, not overlapped with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostCost {
    /// Elements the busiest rank copies locally plus elements the busiest rank reduces.
    pub local_elements: u64,
    pub local_secs: f64,
    /// Messages sent or received by the busiest rank.
    pub messages: usize,
    pub message_secs: f64,
    /// local_secs + message_secs
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Breakdown {
    pub name: String,
    /// The algorithm `name` names, typed.
    #[serde(skip)]
    pub algorithm: AlgorithmRef,
    /// Pipelined chunks used (chain and trees).
    pub pipeline_chunks: Option<usize>,
    /// Parallel rings (ring algorithms).
    pub channels: usize,
    /// The bound: line rates and the topology's α per round (nothing is faster on this
    /// hardware; the seeds' model).
    pub total_secs: f64,
    /// What NCCL-class software is expected to take (`crate::expected`): achievable
    /// rates and the fastest protocol's latencies.
    pub expected_secs: f64,
    /// The protocol the expected time assumes.
    pub protocol: Protocol,
    pub rounds: usize,
    /// rounds x α
    pub alpha_secs: f64,
    /// Σ_r max_e V/B
    pub transfer_secs: f64,
    pub bytes_sent_total: f64,
    /// Bytes whose source and destination ranks are on different servers.
    pub cross_server_bytes: f64,
    /// Cross-server bytes by direction, "A->B".
    pub cross_server_bytes_by_direction: BTreeMap<String, f64>,
    /// Bytes that pass through a spine (a switch of tier 2 or above).
    pub spine_bytes: f64,
    pub spine_bytes_by_direction: BTreeMap<String, f64>,
    /// NICs of the servers that hold ranks.
    pub nics_total: usize,
    /// NICs that send nothing (the seed counts a NIC busy when it has bytes to send).
    pub nics_idle: usize,
    /// NICs that neither send nor receive.
    pub nics_unused: usize,
    pub bottleneck: Option<Bottleneck>,
    /// The achievable rate that sets the expected time: the resource slowest at
    /// achievable rates over the most transfer time (it need not be `bottleneck`, the
    /// slowest at line rate).
    pub expected_limit: Option<ExpectedLimit>,
    /// What the topology's hosts add (local copies and reductions, per-message
    /// overhead); absent where the topology counts none, as for the seeds' clusters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostCost>,
    pub stages: Vec<StageCost>,
    pub per_round: Vec<RoundCost>,
    /// Every resource that carried bytes, busiest first.
    pub resources: Vec<ResourceLoad>,
    /// The expected time of each protocol it may run under, as (what does not grow with
    /// the bytes, what does): the same schedule with every transfer `k` times longer
    /// takes `fixed + k · bytes` (see [`Breakdown::scaled`]).
    #[serde(skip)]
    pub expected_parts: [Option<(f64, f64)>; 3],
}

impl Breakdown {
    /// The expected time under `protocol`, host costs included (None where the schedule
    /// does not run under it: an in-switch reduction's, Simple only, or a schedule that
    /// names another).
    pub fn expected_secs_under(&self, protocol: Protocol) -> Option<f64> {
        let host = self.host.as_ref().map_or(0.0, |h| h.secs);
        self.expected_parts[protocol.index()].map(|(fixed, bytes)| fixed + bytes + host)
    }

    /// The bound and the expected time (and its protocol) of the same schedule with every
    /// transfer `k` times longer — exact in the per-round model, where rounds and
    /// latencies stay and every round's load scales with its transfers. None where the
    /// hosts add costs (those do not scale so).
    pub fn scaled(&self, k: f64) -> Option<(f64, f64, Protocol)> {
        if self.host.is_some() || !(k.is_finite() && k > 0.0) {
            return None;
        }
        let (expected, protocol) = Protocol::ALL
            .iter()
            .filter_map(|&p| self.expected_parts[p.index()].map(|(fixed, bytes)| (fixed + k * bytes, p)))
            .min_by(|a, b| a.0.total_cmp(&b.0))?;
        Some((self.alpha_secs + k * self.transfer_secs, expected, protocol))
    }
}

/// Cost `schedule` on `topology` with ranks placed by `placement`.
pub fn cost(schedule: &CompactSchedule, topology: &Topology, placement: &Placement) -> Result<Breakdown, ModelError> {
    cost_with(schedule, &mut RouteTable::new(topology), placement)
}

/// [`cost`] with routes from (and added to) `routes`, so that several schedules on one
/// topology search each route once.
///
/// Rounds are made one at a time from the schedule's sources. A round that moves the
/// traffic of the round before (a ring's 2(P−1) rounds when its blocks are equal) is
/// costed once: the source says so without making it, or the model sees it; its totals
/// are then added once per round it stands for.
pub fn cost_with(
    schedule: &CompactSchedule,
    routes: &mut RouteTable,
    placement: &Placement,
) -> Result<Breakdown, ModelError> {
    cost_rounds(schedule, routes, placement, Repeats::CostOnce)
}

/// Whether a run of rounds repeating their predecessor's traffic is costed once (what
/// the model does) or round by round (what tests compare it with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repeats {
    CostOnce,
    #[cfg(test)]
    CostEach,
}

fn cost_rounds(
    schedule: &CompactSchedule,
    routes: &mut RouteTable,
    placement: &Placement,
    repeats_policy: Repeats,
) -> Result<Breakdown, ModelError> {
    let topology = routes.topology();
    if schedule.spec.ranks != placement.len() {
        return Err(ModelError::RankMismatch { schedule: schedule.spec.ranks, placement: placement.len() });
    }
    // The work is bounded before any is done: every round that does not repeat its
    // predecessor is made, transfer by transfer.
    let bound = schedule.made_transfers_bound();
    if bound > u128::from(MAX_MADE_TRANSFERS) {
        return Err(ModelError::TooManyTransfers { transfers: bound, limit: MAX_MADE_TRANSFERS });
    }
    let largest = schedule.largest_round_transfers();
    if largest > MAX_ROUND_TRANSFERS {
        return Err(ModelError::RoundTooLarge { transfers: largest, limit: MAX_ROUND_TRANSFERS });
    }
    let alpha = topology.round_startup_secs;
    let mut loads = Loads::new(topology, placement, schedule.elem_bytes as f64);
    let mut per_round = Vec::with_capacity(schedule.rounds());
    let mut bottlenecks: BTreeMap<usize, (usize, f64)> = BTreeMap::new();
    let mut expected_limits: BTreeMap<(usize, bool), f64> = BTreeMap::new();
    // The last costed round: what it came to, and how many rounds (itself and those
    // repeating it) it stands for.
    let mut last: Option<LastRound> = None;
    let mut previous: Option<Cow<'_, Step>> = None;
    let mut times = 0u64;
    let mut index = 0usize;
    let mut expected = ExpectedSums::new();
    let reuse = repeats_policy == Repeats::CostOnce;
    for (phase_index, phase) in schedule.phases.iter().enumerate() {
        for k in 0..phase.rounds.rounds() {
            let said_to_repeat = reuse && phase.rounds.repeats_previous(k) && previous.is_some();
            let round = if said_to_repeat { None } else { Some(schedule.whole_round(phase_index, k, index == 0)) };
            let repeats = match (&round, &previous) {
                (None, _) => true,
                (Some(round), Some(p)) => {
                    reuse
                        && round.in_network.is_empty()
                        && p.in_network.is_empty()
                        && same_route_bytes(&p.transfers, &round.transfers)
                }
                (Some(_), None) => false,
            };
            if let (false, Some(round)) = (repeats, round) {
                loads.flush(times);
                times = 0;
                last = Some(loads.round(&round, routes, placement)?);
                previous = Some(round);
            }
            times += 1;
            let Some(costed) = &last else { continue };
            expected.add(&topology.achievable, &costed.rates, 1);
            if let Some((i, secs)) = costed.worst {
                let entry = bottlenecks.entry(i).or_insert((0, 0.0));
                entry.0 += 1;
                entry.1 += secs;
            }
            if let Some((i, reduction, secs)) = costed.expected_worst {
                *expected_limits.entry((i, reduction)).or_insert(0.0) += secs;
            }
            let transfer_secs = costed.worst.map_or(0.0, |(_, s)| s);
            per_round.push(RoundCost {
                index,
                label: schedule.round_label(phase_index, k),
                phase: phase.name.clone(),
                step: k + 1,
                steps: phase.rounds.rounds(),
                secs: alpha + transfer_secs,
                alpha_secs: alpha,
                transfer_secs,
                transfers: costed.transfers,
                bytes_sent: costed.bytes_sent,
                bottleneck: costed.bottleneck.clone(),
                tied_resources: costed.tied_resources,
            });
            index += 1;
        }
    }
    loads.flush(times);
    let mut breakdown = loads.breakdown(schedule, per_round, &bottlenecks, &expected);
    breakdown.expected_limit = expected_limits
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(&(i, reduction), &secs)| ExpectedLimit::new(topology, i, reduction, secs));
    Ok(breakdown)
}

/// The bytes on every resource: this round's (those it touched, in resource order) and
/// the whole schedule's, with the round's and the schedule's bytes between servers and
/// into the spine layer.
struct Loads<'t> {
    topology: &'t Topology,
    elem_bytes: f64,
    bandwidth: Vec<f64>,
    /// Whether a link climbs into the spine layer (a switch of tier 2 or above).
    enters_spine: Vec<bool>,
    round_bytes: Vec<f64>,
    /// This round's bytes on each resource divided by the fraction of line rate they
    /// reach (`Achievable`): its time at achievable rates is this over the bandwidth.
    round_expected_bytes: Vec<f64>,
    /// Whether this round's bytes on a link include an in-switch reduction's streams.
    round_reduction: Vec<bool>,
    /// Fraction of line rate of a copy on each resource, and of an in-switch
    /// reduction's stream on each link.
    fraction: Vec<f64>,
    reduction_fraction: Vec<f64>,
    touched: Vec<usize>,
    total_bytes: Vec<f64>,
    servers: ServerIndex<'t>,
    round_tally: Tally,
    /// Bytes by (source server, destination server); named only at the end.
    totals: Totals,
    in_network_cache: InNetworkCache,
}

impl<'t> Loads<'t> {
    fn new(topology: &'t Topology, placement: &Placement, elem_bytes: f64) -> Self {
        let n = topology.resource_count();
        let tier = |d: usize| {
            if topology.devices[d].kind == DeviceKind::Switch {
                topology.devices[d].tier.unwrap_or(1)
            } else {
                0
            }
        };
        let servers = ServerIndex::new(topology, placement);
        Loads {
            topology,
            elem_bytes,
            bandwidth: (0..n).map(|i| topology.resource_bytes_per_sec(topology.resource(i))).collect(),
            round_expected_bytes: vec![0.0; n],
            round_reduction: vec![false; n],
            // A shared interface is a PCIe slot or the like: PCIe's fraction.
            fraction: (0..n)
                .map(|i| match topology.resource(i) {
                    Resource::Link(l) => topology.achievable.fraction(topology.links[l].class),
                    Resource::Interface { .. } => topology.achievable.pcie,
                })
                .collect(),
            reduction_fraction: topology
                .links
                .iter()
                .map(|l| topology.achievable.reduction_fraction(l.class))
                .collect(),
            enters_spine: topology.links.iter().map(|l| tier(l.to) >= 2 && tier(l.from) < 2).collect(),
            round_bytes: vec![0.0; n],
            touched: Vec::new(),
            total_bytes: vec![0.0; n],
            totals: Totals::new(servers.names.len()),
            servers,
            round_tally: Tally::default(),
            in_network_cache: InNetworkCache::default(),
        }
    }

    /// `bytes` on `link` and the shared interfaces it crosses (a resource enters
    /// `touched` once, when it first has bytes).
    fn add_link(&mut self, link: usize, bytes: f64, reduction: bool) {
        if bytes <= 0.0 {
            return;
        }
        let topology = self.topology;
        let link_fraction = if reduction { self.reduction_fraction[link] } else { self.fraction[link] };
        let mut add = |index: usize, fraction: f64| {
            if self.round_bytes[index] == 0.0 {
                self.touched.push(index);
            }
            self.round_bytes[index] += bytes;
            self.round_expected_bytes[index] += bytes / fraction;
        };
        let index = topology.resource_index(Resource::Link(link));
        add(index, link_fraction);
        self.round_reduction[index] |= reduction;
        for u in &topology.links[link].interfaces {
            let index = topology.resource_index(Resource::Interface { interface: u.interface, reverse: u.reverse });
            add(index, self.fraction[index]);
        }
    }

    /// Add the round just costed to the schedule's totals, `times` over (it and the rounds
    /// repeating it), and clear it.
    fn flush(&mut self, times: u64) {
        self.totals.add(&self.round_tally, times, &self.touched, &self.round_bytes, &mut self.total_bytes);
        self.round_tally.clear();
        for &i in &self.touched {
            self.round_bytes[i] = 0.0;
            self.round_expected_bytes[i] = 0.0;
            self.round_reduction[i] = false;
        }
        self.touched.clear();
    }

    /// Cost one round: its bytes on every resource it crosses, between servers and into
    /// the spine, and its slowest resource.
    fn round(&mut self, round: &Step, routes: &mut RouteTable, placement: &Placement) -> Result<LastRound, ModelError> {
        let mut bytes_sent = 0.0;
        for t in &round.transfers {
            let bytes = t.read.len as f64 * self.elem_bytes;
            bytes_sent += bytes;
            let (src, dst) = (placement.devices[t.from], placement.devices[t.to]);
            let route = routes.get(src, dst)?;
            let mut to_spine = 0.0;
            for &(link, fraction) in route.links {
                self.add_link(link, bytes * fraction, false);
                if self.enters_spine[link] {
                    to_spine += fraction;
                }
            }
            let (a, b) = (self.servers.of_rank[t.from], self.servers.of_rank[t.to]);
            if to_spine > 0.0 {
                *self.round_tally.spine.entry((a, b)).or_insert(0.0) += bytes * to_spine;
            }
            if a != b {
                *self.round_tally.cross.entry((a, b)).or_insert(0.0) += bytes;
            }
        }
        for step in &round.in_network {
            let bytes = step.read.len as f64 * self.elem_bytes;
            bytes_sent += bytes * step.ranks.len() as f64;
            let links: Vec<(usize, usize)> = self.in_network_cache.get(routes, placement, step)?.to_vec();
            for (link, streams) in links {
                let link_bytes = streams as f64 * bytes;
                self.add_link(link, link_bytes, true);
                if self.enters_spine[link] {
                    *self.round_tally.spine_in_network.get_or_insert(0.0) += link_bytes;
                }
            }
            let first = self.servers.of_rank[step.ranks[0]];
            if step.ranks.iter().any(|&r| self.servers.of_rank[r] != first) {
                *self.round_tally.cross_in_network.get_or_insert(0.0) += bytes * step.ranks.len() as f64;
            }
        }
        // Resource order decides ties. A round that touches a good part of the fabric (a
        // ring's every link) is put in order by a scan, not a sort.
        let n = self.round_bytes.len();
        if self.touched.len() > n / 32 {
            self.touched.clear();
            let round_bytes = &self.round_bytes;
            self.touched.extend((0..n).filter(|&i| round_bytes[i] != 0.0));
        } else {
            self.touched.sort_unstable();
        }
        // The slowest resource of the round.
        let secs = |i: usize| self.round_bytes[i] / self.bandwidth[i];
        let mut worst: Option<(usize, f64)> = None;
        for &i in &self.touched {
            if worst.is_none_or(|(_, w)| secs(i) > w * (1.0 + TIE)) {
                worst = Some((i, secs(i)));
            }
        }
        // The same round at achievable rates: its slowest resource there, the slowest
        // hop its transfers cross, and where its in-switch reductions happen.
        let mut expected_secs = 0.0f64;
        let mut expected_worst: Option<usize> = None;
        let mut hop: Option<Hop> = None;
        for &i in &self.touched {
            let secs = self.round_expected_bytes[i] / self.bandwidth[i];
            if secs > expected_secs * (1.0 + TIE) {
                expected_worst = Some(i);
            }
            expected_secs = expected_secs.max(secs);
            if let Resource::Link(l) = self.topology.resource(i) {
                let h = Hop::of(self.topology.links[l].class);
                hop = Some(hop.map_or(h, |o| o.max(h)));
            }
        }
        let reduction = match round.in_network.is_empty() {
            true => None,
            false => Some(match hop {
                Some(Hop::Net) => Reduction::Network,
                _ => Reduction::NvSwitch,
            }),
        };
        let tied_resources = self
            .touched
            .iter()
            .filter(|&&i| worst.is_some_and(|(w, ws)| i != w && secs(i) >= ws * (1.0 - TIE)))
            .count();
        Ok(LastRound {
            rates: RoundRates { transfer_secs: expected_secs, hop, reduction },
            expected_worst: expected_worst.map(|i| (i, self.round_reduction[i], expected_secs)),
            worst,
            bottleneck: worst.map(|(i, _)| load(self.topology, i, self.round_bytes[i])),
            tied_resources,
            bytes_sent,
            transfers: round.transfers.len() + round.in_network.iter().map(|s| s.ranks.len()).sum::<usize>(),
        })
    }

    /// The schedule's breakdown from its costed rounds and these totals.
    fn breakdown(
        self,
        schedule: &CompactSchedule,
        per_round: Vec<RoundCost>,
        bottlenecks: &BTreeMap<usize, (usize, f64)>,
        expected: &ExpectedSums,
    ) -> Breakdown {
        let topology = self.topology;
        let Totals { cross, spine, cross_in_network, spine_in_network } = self.totals;
        let stages = schedule
            .phase_list()
            .iter()
            .map(|p| {
                let rounds: Vec<&RoundCost> = per_round.iter().filter(|r| r.phase == p.name).collect();
                StageCost {
                    name: p.name.clone(),
                    rounds: rounds.len(),
                    secs: rounds.iter().map(|r| r.secs).sum(),
                    bytes_sent: rounds.iter().map(|r| r.bytes_sent).sum(),
                }
            })
            .collect();
        let bottleneck = bottlenecks.iter().max_by(|a, b| a.1 .1.total_cmp(&b.1 .1).then(b.0.cmp(a.0))).map(
            |(&i, &(rounds, secs))| Bottleneck {
                resource: topology.resource_name(topology.resource(i)),
                kind: topology.resource_kind(topology.resource(i)).to_string(),
                rounds,
                secs,
            },
        );
        let cross = self.servers.name_pairs(cross, cross_in_network);
        let spine = self.servers.name_pairs(spine, spine_in_network);
        let total_bytes = &self.total_bytes;
        let (nics_total, nics_idle, nics_unused) = nic_usage(topology, &self.servers.names, total_bytes);
        let mut resources: Vec<ResourceLoad> = (0..total_bytes.len())
            .filter(|&i| total_bytes[i] > 0.0)
            .map(|i| load(topology, i, total_bytes[i]))
            .collect();
        resources.sort_by(|a, b| b.secs.total_cmp(&a.secs).then_with(|| a.resource.cmp(&b.resource)));
        let alpha = topology.round_startup_secs;
        let transfer_secs: f64 = per_round.iter().map(|r| r.transfer_secs).sum();
        // Rounds it stands for without holding them (an MSCCL loop's passes past those
        // built) start up as the held ones do.
        let rounds = per_round.len() + schedule.unheld_rounds;
        let alpha_secs = alpha * rounds as f64;
        let host = host_cost(schedule, topology);
        let link_secs = alpha_secs + transfer_secs;
        let host_secs = host.as_ref().map_or(0.0, |h| h.local_secs + h.message_secs);
        let total_secs = link_secs + host_secs;
        let named = |p: &str| Protocol::ALL.into_iter().find(|q| q.as_str().eq_ignore_ascii_case(p));
        let expected_sums = match schedule.protocol.as_deref().and_then(named) {
            Some(only) => expected.only(only),
            None => expected.clone(),
        };
        let expected_sums = match (schedule.unheld_rounds, per_round.len()) {
            (0, _) | (_, 0) => expected_sums,
            (unheld, held) => expected_sums.latencies_scaled((held + unheld) as f64 / held as f64),
        };
        let expected = &expected_sums;
        let expected =
            expected.finish(&topology.achievable, host_secs, per_round.len(), schedule.path_rounds, alpha_secs);
        Breakdown {
            name: schedule.algorithm.clone(),
            algorithm: AlgorithmRef::from_name(&schedule.algorithm),
            pipeline_chunks: None,
            channels: 1,
            total_secs,
            expected_secs: expected.secs,
            expected_parts: expected_sums.parts(
                &topology.achievable,
                per_round.len(),
                schedule.path_rounds,
                alpha_secs,
            ),
            protocol: expected.protocol,
            rounds,
            alpha_secs,
            transfer_secs,
            bytes_sent_total: per_round.iter().map(|r| r.bytes_sent).sum(),
            cross_server_bytes: cross.values().fold(0.0, |a, b| a + b),
            cross_server_bytes_by_direction: cross,
            spine_bytes: spine.values().fold(0.0, |a, b| a + b),
            spine_bytes_by_direction: spine,
            nics_total,
            nics_idle,
            nics_unused,
            bottleneck,
            expected_limit: None,
            host,
            stages,
            per_round,
            resources,
        }
    }
}

fn host_cost(schedule: &CompactSchedule, topology: &Topology) -> Option<HostCost> {
    let costs = topology.host;
    if !costs.counted() {
        return None;
    }
    let work = schedule.host_work();
    let local_elements = work.copied_elements_max + work.reduced_elements_max;
    let (local_secs, message_secs) = costs.secs(local_elements.saturating_mul(schedule.elem_bytes), work.messages_max);
    let messages = usize::try_from(work.messages_max).unwrap_or(usize::MAX);
    Some(HostCost { local_elements, local_secs, messages, message_secs, secs: local_secs + message_secs })
}

fn load(topology: &Topology, index: usize, bytes: f64) -> ResourceLoad {
    let r = topology.resource(index);
    let bytes_per_sec = topology.resource_bytes_per_sec(r);
    ResourceLoad {
        resource: topology.resource_name(r),
        kind: topology.resource_kind(r).to_string(),
        bytes,
        bytes_per_sec,
        secs: bytes / bytes_per_sec,
    }
}

/// (NICs in servers holding ranks, NICs that send nothing, NICs that send and receive nothing).
/// `servers` are distinct (one name per server: `ServerIndex`).
fn nic_usage(topology: &Topology, servers: &[&str], total_bytes: &[f64]) -> (usize, usize, usize) {
    let nics: Vec<usize> = servers.iter().flat_map(|s| topology.nics_of_server(s).iter().copied()).collect();
    let wire_bytes = |nic: usize, outgoing: bool| -> f64 {
        let links = if outgoing { topology.out_links(nic) } else { topology.in_links(nic) };
        links.iter().filter(|&&l| topology.links[l].class == LinkClass::Nic).map(|&l| total_bytes[l]).sum()
    };
    let idle = nics.iter().filter(|&&n| wire_bytes(n, true) == 0.0).count();
    let unused = nics.iter().filter(|&&n| wire_bytes(n, true) == 0.0 && wire_bytes(n, false) == 0.0).count();
    (nics.len(), idle, unused)
}

/// Servers of the placed ranks as dense indices, so hot loops key maps by integers;
/// reports name them as the first version did ("A->B").
struct ServerIndex<'t> {
    of_rank: Vec<u32>,
    names: Vec<&'t str>,
}

impl<'t> ServerIndex<'t> {
    fn new(topology: &'t Topology, placement: &Placement) -> Self {
        // Placements hold at most one rank per GPU, far fewer than u32::MAX.
        let groups = placement.ranks_by_server(topology);
        let mut of_rank = vec![0u32; placement.len()];
        for (server, ranks) in groups.iter().enumerate() {
            for &r in ranks {
                of_rank[r] = server as u32;
            }
        }
        let names = groups.iter().map(|g| topology.server_of(placement.devices[g[0]])).collect();
        ServerIndex { of_rank, names }
    }

    /// Named per-direction totals; `in_network` is filed under "in-network".
    fn name_pairs(&self, pairs: ServerPairBytes, in_network: Option<f64>) -> BTreeMap<String, f64> {
        let mut named = BTreeMap::new();
        for ((a, b), bytes) in pairs.into_pairs() {
            *named.entry(format!("{}->{}", self.names[a as usize], self.names[b as usize])).or_insert(0.0) += bytes;
        }
        if let Some(bytes) = in_network {
            *named.entry("in-network".to_string()).or_insert(0.0) += bytes;
        }
        named
    }
}

/// The outcome of costing one round, kept for the rounds that repeat its traffic.
struct LastRound {
    rates: RoundRates,
    /// The round's slowest resource at achievable rates, whether an in-switch
    /// reduction's streams are on it, and its time there.
    expected_worst: Option<(usize, bool, f64)>,
    worst: Option<(usize, f64)>,
    bottleneck: Option<ResourceLoad>,
    tied_resources: usize,
    bytes_sent: f64,
    transfers: usize,
}

/// One round's bytes between servers and into the spine layer, by (source server,
/// destination server), and those of its in-network steps.
#[derive(Default)]
struct Tally {
    cross: FxHashMap<(u32, u32), f64>,
    spine: FxHashMap<(u32, u32), f64>,
    cross_in_network: Option<f64>,
    spine_in_network: Option<f64>,
}

impl Tally {
    /// Empty, keeping the maps' room for the next round.
    fn clear(&mut self) {
        self.cross.clear();
        self.spine.clear();
        self.cross_in_network = None;
        self.spine_in_network = None;
    }
}

/// The whole schedule's bytes between servers and into the spine layer.
struct Totals {
    cross: ServerPairBytes,
    spine: ServerPairBytes,
    cross_in_network: Option<f64>,
    spine_in_network: Option<f64>,
}

impl Totals {
    fn new(servers: usize) -> Self {
        Totals {
            cross: ServerPairBytes::new(servers),
            spine: ServerPairBytes::new(servers),
            cross_in_network: None,
            spine_in_network: None,
        }
    }

    /// Add a round's tally and its resources' bytes, `times` over (the round and the
    /// rounds repeating it). Exact for whole byte counts and halves; where routes split
    /// bytes in thirds the product may differ from a round-by-round sum in the last bit.
    fn add(&mut self, round: &Tally, times: u64, touched: &[usize], round_bytes: &[f64], total_bytes: &mut [f64]) {
        if times == 0 {
            return;
        }
        let times = times as f64;
        for (&pair, &bytes) in &round.cross {
            self.cross.add(pair, bytes * times);
        }
        for (&pair, &bytes) in &round.spine {
            self.spine.add(pair, bytes * times);
        }
        for (total, bytes) in
            [(&mut self.cross_in_network, round.cross_in_network), (&mut self.spine_in_network, round.spine_in_network)]
        {
            if let Some(bytes) = bytes {
                *total.get_or_insert(0.0) += bytes * times;
            }
        }
        for &i in touched {
            total_bytes[i] += round_bytes[i] * times;
        }
    }
}

/// Transfers the model makes round by round for one schedule (rounds that repeat their
/// predecessor are not made): 128 Mi, about half a minute on this machine's core.
/// Pairwise all-to-all (no round repeats) passes it above 11,585 ranks, a ring whose
/// blocks are uneven above 8,192.
pub const MAX_MADE_TRANSFERS: u64 = 1 << 27;

/// Transfers of one round made at once: 16 Mi (1.3 GB). A direct all-to-all over 4,096
/// ranks fits; a hierarchical all-gather or reduce-scatter over 131,072 GPUs, whose
/// intra-server rounds carry every server's share, does not.
pub const MAX_ROUND_TRANSFERS: usize = 1 << 24;

/// Whether two rounds send the same sizes between the same ranks, in the same order, so
/// they cost the same bit for bit (what the model needs; `compact::same_traffic` also
/// asks for the same operations and labels, which host costs and simulators need).
fn same_route_bytes(a: &[Transfer], b: &[Transfer]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.from == y.from && x.to == y.to && x.read.len == y.read.len)
}

#[cfg(test)]
mod tests {
    use railyard_schedule::{generate_compact, Algorithm, Collective, CollectiveSpec, GenOptions};
    use railyard_topology::{presets::preset, Placement, PlacementPolicy};

    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
    }

    fn close_maps(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|((ka, va), (kb, vb))| ka == kb && close(*va, *vb))
    }

    /// Costing a run of repeated rounds once and multiplying equals costing every round
    /// and adding, round for round exactly and in the totals to the last bits (exactly
    /// where routes split bytes in halves; within 1e-12 where they split in thirds).
    #[test]
    fn repeated_rounds_costed_once_equal_rounds_costed_each() {
        let mut shortcuts = 0;
        for topo in ["hgx-h100x2", "rail:servers=4", "rail:servers=6,gpus=4,group=2,spines=3"] {
            let t = preset(topo).unwrap();
            let placement = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
            let groups = placement.ranks_by_server(&t);
            let p = placement.len();
            for (algorithm, collective) in [
                (Algorithm::Ring, Collective::AllReduce),
                (Algorithm::InterleavedRing, Collective::AllGather),
                (Algorithm::Hierarchical, Collective::AllReduce),
                (Algorithm::Hierarchical, Collective::ReduceScatter),
                (Algorithm::InNetwork, Collective::AllReduce),
                (Algorithm::Pairwise, Collective::AllToAll),
            ] {
                for (count, channels) in [(p as u64 * 1024, 1), (p as u64 * 1000 + 7, 3)] {
                    let options = GenOptions { groups: groups.clone(), channels, ..GenOptions::default() };
                    let spec = CollectiveSpec::new(collective, p, count);
                    let s = generate_compact(algorithm, &spec, &options, 4).unwrap();
                    let at = format!("{topo} {algorithm} {collective:?} count={count} channels={channels}");
                    let once = cost_rounds(&s, &mut RouteTable::new(&t), &placement, Repeats::CostOnce).unwrap();
                    let each = cost_rounds(&s, &mut RouteTable::new(&t), &placement, Repeats::CostEach).unwrap();
                    assert_eq!(once.per_round, each.per_round, "{at}");
                    assert_eq!(
                        (once.total_secs, &once.stages, &once.bottleneck),
                        (each.total_secs, &each.stages, &each.bottleneck),
                        "{at}"
                    );
                    assert!(close(once.bytes_sent_total, each.bytes_sent_total), "{at}");
                    assert!(
                        close_maps(&once.cross_server_bytes_by_direction, &each.cross_server_bytes_by_direction),
                        "{at}"
                    );
                    assert!(close_maps(&once.spine_bytes_by_direction, &each.spine_bytes_by_direction), "{at}");
                    assert_eq!(once.resources.len(), each.resources.len(), "{at}");
                    let by_name = |b: &Breakdown| -> BTreeMap<String, f64> {
                        b.resources.iter().map(|r| (r.resource.clone(), r.bytes)).collect()
                    };
                    assert!(close_maps(&by_name(&once), &by_name(&each)), "{at}");
                    shortcuts += usize::from(
                        s.phases.iter().any(|ph| (1..ph.rounds.rounds()).any(|k| ph.rounds.repeats_previous(k))),
                    );
                }
            }
        }
        assert!(shortcuts > 10, "only {shortcuts} schedules took the shortcut");
    }

    #[test]
    fn work_past_the_limit_is_refused_before_it_is_done() {
        // Pairwise over 65,536 ranks would make 65,535 rounds of 65,536 transfers.
        let t = preset("rail:servers=8192").unwrap();
        let placement = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
        let spec = CollectiveSpec::new(Collective::AllToAll, placement.len(), 1 << 20);
        let s = generate_compact(Algorithm::Pairwise, &spec, &GenOptions::default(), 4).unwrap();
        let err = cost(&s, &t, &placement).unwrap_err();
        assert_eq!(err, ModelError::TooManyTransfers { transfers: 65_535 * 65_536, limit: MAX_MADE_TRANSFERS });
    }
}

//! Switch queues (seed 001 §7.5.1): where senders push faster than a switch port
//! drains, the difference waits in the port's egress buffer.
//!
//! Each flow is sent at the rate its host side allows — max-min fair over the links up
//! to its first switch (GPU, PCIe, NIC) — and delivered at its max-min fair rate over
//! the whole path. What is sent and not yet delivered waits at the switch port that
//! holds the flow's delivery rate down (its bottleneck): dQ/dt = λ(t) − B there. Queues
//! are piecewise linear between events, so their peaks are found at events: when rates
//! change and when a sender has pushed its last byte. Buffers are taken as large as the
//! backlog (the seed's assumption in example 7.5); a `buffer_bytes` names the ports whose
//! backlog would not fit and by how much, without modelling drops or pauses.

use railyard_topology::{DeviceKind, Resource, Topology};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::fairness::FairShare;
use crate::time::Picos;

/// One port's queue over a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueReport {
    pub resource: String,
    pub peak_bytes: f64,
    /// When the peak was reached.
    pub peak_secs: f64,
    /// When the queue was next empty after its peak (absent if it never emptied).
    pub drained_secs: Option<f64>,
    /// Bytes past the buffer at the peak (absent when no buffer was given or it fits).
    pub over_buffer_bytes: Option<f64>,
}

#[derive(Debug, Clone, Copy)]
struct Peak {
    bytes: f64,
    at: Picos,
    drained: Option<Picos>,
}

/// Sending rates and queue peaks; see the module documentation.
#[derive(Debug)]
pub struct Queues {
    /// Whether a resource is on the host side (a link not leaving a switch, or an
    /// interface such a link draws from).
    host_side: Vec<bool>,
    /// Whether a resource is a switch's egress port (where a queue can build).
    port: Vec<bool>,
    fair: FairShare,
    rates: Vec<f64>,
    demands: Vec<Vec<(u32, f64)>>,
    now_bytes: FxHashMap<u32, f64>,
    peaks: FxHashMap<u32, Peak>,
    buffer_bytes: Option<f64>,
}

impl Queues {
    pub fn new(topology: &Topology, buffer_bytes: Option<f64>) -> Self {
        let n = topology.resource_count();
        let switch = |d: usize| matches!(topology.devices[d].kind, DeviceKind::Switch | DeviceKind::NvSwitch);
        let mut host_side = vec![false; n];
        let mut port = vec![false; n];
        for (l, link) in topology.links.iter().enumerate() {
            let i = topology.resource_index(Resource::Link(l));
            if switch(link.from) {
                port[i] = true;
            } else {
                host_side[i] = true;
                for u in &link.interfaces {
                    host_side
                        [topology.resource_index(Resource::Interface { interface: u.interface, reverse: u.reverse })] =
                        true;
                }
            }
        }
        Queues {
            host_side,
            port,
            fair: FairShare::new(n),
            rates: Vec::new(),
            demands: Vec::new(),
            now_bytes: FxHashMap::default(),
            peaks: FxHashMap::default(),
            buffer_bytes,
        }
    }

    /// Where a new backlog of a flow waits: at its bottleneck if that is a switch port,
    /// else at the first switch port of its path.
    pub fn port_of(&self, bottleneck: u32, resources: &[(u32, f64)]) -> u32 {
        if bottleneck != u32::MAX && self.port[bottleneck as usize] {
            return bottleneck;
        }
        resources.iter().map(|&(e, _)| e).find(|&e| self.port[e as usize]).unwrap_or(u32::MAX)
    }

    /// Sending rates of flows (their host-side max-min share, never below the delivery
    /// rate `delivery[i]`), into `out`.
    pub fn send_rates(&mut self, flows: &[&[(u32, f64)]], delivery: &[f64], capacity: &[f64], out: &mut Vec<f64>) {
        self.demands.resize_with(flows.len(), Vec::new);
        for (d, f) in self.demands.iter_mut().zip(flows) {
            d.clear();
            d.extend(f.iter().copied().filter(|&(e, _)| self.host_side[e as usize]));
        }
        let refs: Vec<&[(u32, f64)]> = self.demands[..flows.len()].iter().map(Vec::as_slice).collect();
        self.fair.rates(&refs, capacity, &mut self.rates);
        out.clear();
        out.extend(self.rates.iter().zip(delivery).map(|(&s, &r)| if s.is_finite() { s.max(r) } else { r }));
    }

    /// The queues at `now`, from every flow's sent and delivered bytes: peaks recorded,
    /// a queue that emptied after its peak marked drained.
    pub fn observe(&mut self, now: Picos, flows: impl Iterator<Item = (u32, f64)>) {
        for v in self.now_bytes.values_mut() {
            *v = 0.0;
        }
        for (bottleneck, backlog) in flows {
            if bottleneck != u32::MAX && self.port[bottleneck as usize] && backlog > 0.0 {
                *self.now_bytes.entry(bottleneck).or_insert(0.0) += backlog;
            }
        }
        for (&e, &bytes) in &self.now_bytes {
            let peak = self.peaks.entry(e).or_insert(Peak { bytes: 0.0, at: now, drained: None });
            // A backlog below a byte is the rounding of sent against delivered.
            if bytes > peak.bytes + 1.0 {
                *peak = Peak { bytes, at: now, drained: None };
            } else if bytes < 1.0 && peak.drained.is_none() && peak.bytes > 0.0 {
                peak.drained = Some(now);
            }
        }
        self.now_bytes.retain(|_, v| *v > 0.0);
    }

    /// Ports that queued, largest peak first.
    pub fn report(&self, topology: &Topology) -> Vec<QueueReport> {
        let mut out: Vec<QueueReport> = self
            .peaks
            .iter()
            .filter(|(_, p)| p.bytes >= 1.0)
            .map(|(&e, p)| QueueReport {
                resource: topology.resource_name(topology.resource(e as usize)),
                peak_bytes: p.bytes,
                peak_secs: p.at.secs(),
                drained_secs: p.drained.map(Picos::secs),
                over_buffer_bytes: self.buffer_bytes.and_then(|b| (p.bytes > b).then_some(p.bytes - b)),
            })
            .collect();
        out.sort_by(|a, b| b.peak_bytes.total_cmp(&a.peak_bytes).then_with(|| a.resource.cmp(&b.resource)));
        out
    }
}

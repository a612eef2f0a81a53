//! The width of a route: the largest bottleneck bandwidth of any path (max-min).
//!
//! A Dijkstra per pair explores the whole fabric (every device is reachable at the NIC
//! rate), so at 100,000 GPUs it costs a second per pair. Instead, for each distinct link
//! bandwidth `w` (widest first) the forwarding devices are grouped into the components
//! joined by links at least `w` wide; a pair's width is then the largest `w` at which
//! one of the source's out-links and one of the destination's in-links (both at least
//! `w`) touch the same component — O(thresholds · degree²) per pair.
//!
//! Components stand for reachability only when every link between forwarding devices
//! has a reverse link of the same bandwidth (true of every preset and generator). A
//! topology where that does not hold, or that has very many distinct bandwidths, falls
//! back to the Dijkstra, which is exact everywhere.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

use crate::graph::{DeviceId, Topology};

/// More distinct bandwidths than this and the component tables would cost more than
/// they save: use the Dijkstra.
const MAX_THRESHOLDS: usize = 64;
/// Upper bound on thresholds × devices entries held (256 MiB of labels).
const MAX_LABELS: usize = 64 << 20;
/// Label of a device that does not forward (a GPU): in no component.
const NO_COMPONENT: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub(super) enum WidthIndex {
    Components {
        /// Distinct link bandwidths, widest first.
        thresholds_bytes_per_sec: Vec<f64>,
        /// `labels[k * devices + d]`: component of forwarding device `d` over links at
        /// least `thresholds_bytes_per_sec[k]` wide.
        labels: Vec<u32>,
        devices: usize,
    },
    Dijkstra,
}

impl WidthIndex {
    pub(super) fn new(t: &Topology) -> Self {
        let forwards = |d: DeviceId| t.devices[d].kind.forwards();
        let mut thresholds_bytes_per_sec: Vec<f64> = t.links.iter().map(|l| l.bytes_per_sec).collect();
        thresholds_bytes_per_sec.sort_by(|a, b| b.total_cmp(a));
        thresholds_bytes_per_sec.dedup();
        let devices = t.devices.len();
        if thresholds_bytes_per_sec.len() > MAX_THRESHOLDS
            || thresholds_bytes_per_sec.len().saturating_mul(devices) > MAX_LABELS
        {
            return WidthIndex::Dijkstra;
        }
        let fabric: Vec<usize> =
            (0..t.links.len()).filter(|&l| forwards(t.links[l].from) && forwards(t.links[l].to)).collect();
        let present: HashSet<(DeviceId, DeviceId, u64)> =
            fabric.iter().map(|&l| (t.links[l].from, t.links[l].to, t.links[l].bytes_per_sec.to_bits())).collect();
        if fabric
            .iter()
            .any(|&l| !present.contains(&(t.links[l].to, t.links[l].from, t.links[l].bytes_per_sec.to_bits())))
        {
            return WidthIndex::Dijkstra;
        }
        let mut by_width = fabric;
        by_width.sort_by(|&a, &b| t.links[b].bytes_per_sec.total_cmp(&t.links[a].bytes_per_sec));
        let mut parent: Vec<usize> = (0..devices).collect();
        let mut labels = Vec::with_capacity(thresholds_bytes_per_sec.len() * devices);
        let mut next = 0;
        for &w in &thresholds_bytes_per_sec {
            while next < by_width.len() && t.links[by_width[next]].bytes_per_sec >= w {
                let link = &t.links[by_width[next]];
                let (a, b) = (find(&mut parent, link.from), find(&mut parent, link.to));
                parent[a.max(b)] = a.min(b);
                next += 1;
            }
            for d in 0..devices {
                // Device counts are bounded by MAX_LABELS, so a root always fits in u32.
                labels.push(if forwards(d) { find(&mut parent, d) as u32 } else { NO_COMPONENT });
            }
        }
        WidthIndex::Components { thresholds_bytes_per_sec, labels, devices }
    }

    /// The width from `src` to `dst` (`src != dst`), or `None` when no path exists.
    pub(super) fn width(&self, t: &Topology, src: DeviceId, dst: DeviceId) -> Option<f64> {
        let WidthIndex::Components { thresholds_bytes_per_sec, labels, devices } = self else {
            return dijkstra(t, src, dst);
        };
        let forwards = |d: DeviceId| t.devices[d].kind.forwards();
        for (k, &w) in thresholds_bytes_per_sec.iter().enumerate() {
            let label = |d: DeviceId| labels[k * devices + d];
            // A forwarding end is in a component itself: compare the other end's
            // neighbours with it (a spine's thousands of links are never scanned).
            if forwards(src) || forwards(dst) {
                let (end, others, from_side) =
                    if forwards(src) { (src, t.in_links(dst), true) } else { (dst, t.out_links(src), false) };
                let meets = others.iter().any(|&l| {
                    let link = &t.links[l];
                    let next = if from_side { link.from } else { link.to };
                    link.bytes_per_sec >= w && (next == end || label(next) == label(end))
                });
                if meets {
                    return Some(w);
                }
                continue;
            }
            for &l in t.out_links(src) {
                let first = &t.links[l];
                if first.bytes_per_sec < w {
                    continue;
                }
                if first.to == dst {
                    return Some(w);
                }
                let component = label(first.to);
                if component == NO_COMPONENT {
                    continue;
                }
                let meets = t.in_links(dst).iter().any(|&m| {
                    let last = &t.links[m];
                    last.bytes_per_sec >= w && label(last.from) == component
                });
                if meets {
                    return Some(w);
                }
            }
        }
        None
    }
}

fn find(parent: &mut [usize], mut d: usize) -> usize {
    while parent[d] != d {
        parent[d] = parent[parent[d]];
        d = parent[d];
    }
    d
}

#[derive(PartialEq)]
struct Widest(f64, DeviceId);
impl Eq for Widest {}
impl PartialOrd for Widest {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Widest {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then_with(|| other.1.cmp(&self.1))
    }
}

/// The largest bottleneck bandwidth of any path from `src` to `dst` (max-min
/// Dijkstra); GPUs other than `src` are never left.
pub(super) fn dijkstra(t: &Topology, src: DeviceId, dst: DeviceId) -> Option<f64> {
    let mut best = vec![0.0f64; t.devices.len()];
    best[src] = f64::INFINITY;
    let mut heap = BinaryHeap::new();
    heap.push(Widest(f64::INFINITY, src));
    while let Some(Widest(width, u)) = heap.pop() {
        if width < best[u] {
            continue;
        }
        if u == dst {
            return Some(width);
        }
        if u != src && !t.devices[u].kind.forwards() {
            continue;
        }
        for &l in t.out_links(u) {
            let link = &t.links[l];
            let w = width.min(link.bytes_per_sec);
            if w > best[link.to] {
                best[link.to] = w;
                heap.push(Widest(w, link.to));
            }
        }
    }
    None
}

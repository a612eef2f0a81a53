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

use super::search::Adjacency;
use crate::graph::DeviceId;

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
    /// Over the links of `adj` (the whole topology's, or one path type's).
    pub(super) fn new(adj: &Adjacency) -> Self {
        let devices = adj.devices();
        let all = || (0..devices).flat_map(|d| adj.out(d).iter().map(move |h| (d, h)));
        let mut thresholds_bytes_per_sec: Vec<f64> = all().map(|(_, h)| h.bytes_per_sec).collect();
        thresholds_bytes_per_sec.sort_by(|a, b| b.total_cmp(a));
        thresholds_bytes_per_sec.dedup();
        if thresholds_bytes_per_sec.len() > MAX_THRESHOLDS
            || thresholds_bytes_per_sec.len().saturating_mul(devices) > MAX_LABELS
        {
            return WidthIndex::Dijkstra;
        }
        // Links between forwarding devices: (from, to, bandwidth).
        let fabric: Vec<(DeviceId, DeviceId, f64)> = all()
            .filter(|(d, h)| adj.forwards(*d) && adj.forwards(h.device as usize))
            .map(|(d, h)| (d, h.device as usize, h.bytes_per_sec))
            .collect();
        let present: HashSet<(DeviceId, DeviceId, u64)> = fabric.iter().map(|&(a, b, w)| (a, b, w.to_bits())).collect();
        if fabric.iter().any(|&(a, b, w)| !present.contains(&(b, a, w.to_bits()))) {
            return WidthIndex::Dijkstra;
        }
        let mut by_width = fabric;
        by_width.sort_by(|a, b| b.2.total_cmp(&a.2));
        let mut parent: Vec<usize> = (0..devices).collect();
        let mut labels = Vec::with_capacity(thresholds_bytes_per_sec.len() * devices);
        let mut next = 0;
        for &w in &thresholds_bytes_per_sec {
            while next < by_width.len() && by_width[next].2 >= w {
                let (a, b) = (find(&mut parent, by_width[next].0), find(&mut parent, by_width[next].1));
                parent[a.max(b)] = a.min(b);
                next += 1;
            }
            for d in 0..devices {
                // Device counts are bounded by MAX_LABELS, so a root always fits in u32.
                labels.push(if adj.forwards(d) { find(&mut parent, d) as u32 } else { NO_COMPONENT });
            }
        }
        WidthIndex::Components { thresholds_bytes_per_sec, labels, devices }
    }

    /// The width from `src` to `dst` (`src != dst`) over the links of `adj` (those the
    /// index was made from), or `None` when no path exists.
    pub(super) fn width(&self, adj: &Adjacency, src: DeviceId, dst: DeviceId) -> Option<f64> {
        let WidthIndex::Components { thresholds_bytes_per_sec, labels, devices } = self else {
            return dijkstra(adj, src, dst);
        };
        for (k, &w) in thresholds_bytes_per_sec.iter().enumerate() {
            let label = |d: DeviceId| labels[k * devices + d];
            // A forwarding end is in a component itself: compare the other end's
            // neighbours with it (a spine's thousands of links are never scanned).
            if adj.forwards(src) || adj.forwards(dst) {
                let (end, others) = if adj.forwards(src) { (src, adj.inn(dst)) } else { (dst, adj.out(src)) };
                let meets = others.iter().any(|h| {
                    let next = h.device as usize;
                    h.bytes_per_sec >= w && (next == end || label(next) == label(end))
                });
                if meets {
                    return Some(w);
                }
                continue;
            }
            for first in adj.out(src) {
                if first.bytes_per_sec < w {
                    continue;
                }
                if first.device as usize == dst {
                    return Some(w);
                }
                let component = label(first.device as usize);
                if component == NO_COMPONENT {
                    continue;
                }
                let meets =
                    adj.inn(dst).iter().any(|last| last.bytes_per_sec >= w && label(last.device as usize) == component);
                if meets {
                    return Some(w);
                }
            }
        }
        None
    }
}

impl WidthIndex {
    /// Whether one component of forwarding devices (over links of any width) is entered
    /// from every one of `ends` and leads into every one of them: then every pair of them
    /// is joined, which a fabric shows in O(ends · degree) instead of O(ends²) pairs.
    /// `false` says nothing (check the pairs).
    pub(super) fn one_component_joins(&self, adj: &Adjacency, ends: &[DeviceId]) -> bool {
        let WidthIndex::Components { thresholds_bytes_per_sec, labels, devices } = self else {
            return false;
        };
        let Some(k) = thresholds_bytes_per_sec.len().checked_sub(1) else {
            return false;
        };
        let label = |d: usize| labels[k * devices + d];
        let Some(&first) = ends.first() else {
            return true;
        };
        let candidates: Vec<u32> =
            adj.out(first).iter().map(|h| label(h.device as usize)).filter(|&c| c != NO_COMPONENT).collect();
        candidates.into_iter().any(|c| {
            ends.iter().all(|&e| {
                adj.out(e).iter().any(|h| label(h.device as usize) == c)
                    && adj.inn(e).iter().any(|h| label(h.device as usize) == c)
            })
        })
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
/// Dijkstra) over the links of `adj`; GPUs other than `src` are never left.
pub(super) fn dijkstra(adj: &Adjacency, src: DeviceId, dst: DeviceId) -> Option<f64> {
    let mut best = vec![0.0f64; adj.devices()];
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
        if u != src && !adj.forwards(u) {
            continue;
        }
        for h in adj.out(u) {
            let (to, w) = (h.device as usize, width.min(h.bytes_per_sec));
            if w > best[to] {
                best[to] = w;
                heap.push(Widest(w, to));
            }
        }
    }
    None
}

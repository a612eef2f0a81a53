//! The links of a route once its width is known: the shortest paths over links at
//! least that wide, found by a breadth-first search from both ends that stops where
//! they meet, then the unit of traffic pushed hop by hop with an equal split at every
//! device (see the module documentation of `route`).
//!
//! A search from one end alone visits every device within the route's length — in a
//! fat-tree, the whole fabric. Growing both ends until the layers meet visits only the
//! balls of half that radius around the two GPUs (their servers, their leaves, the
//! spines), so a route costs the same at 100,000 GPUs as at 16. Scratch arrays are
//! reused across searches and reset by an epoch stamp, not cleared.

use super::BANDWIDTH_TOLERANCE;
use crate::graph::{DeviceId, LinkId, Topology};

/// One link as seen from one of its ends: the device at the other end.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hop {
    /// The device at the other end.
    pub(super) device: u32,
    /// The link's id in the whole topology (also in a path type's adjacency).
    pub(super) link: u32,
    pub(super) bytes_per_sec: f64,
}

/// The topology's links by device, packed so that a device's links are one contiguous
/// run (a search touches a cache line per device, not one per link), in link order.
#[derive(Debug, Clone)]
pub(super) struct Adjacency {
    out_start: Vec<u32>,
    out: Vec<Hop>,
    in_start: Vec<u32>,
    inn: Vec<Hop>,
    forwards: Vec<bool>,
}

impl Adjacency {
    /// Device and link counts are bounded by `MAX_DEVICES` and `MAX_LINKS`, so u32 holds them.
    pub(super) fn new(t: &Topology) -> Self {
        Self::of_links(t, |_| true)
    }

    /// Only the links `keep` keeps (one path type's), under their ids in `t`.
    pub(super) fn of_links(t: &Topology, keep: impl Fn(LinkId) -> bool) -> Self {
        let pack = |outgoing: bool| {
            let mut start = Vec::with_capacity(t.devices.len() + 1);
            let mut hops = Vec::new();
            for d in 0..t.devices.len() {
                start.push(hops.len() as u32);
                let ends = if outgoing { t.out_links(d) } else { t.in_links(d) };
                hops.extend(ends.iter().filter(|&&l| keep(l)).map(|&l| {
                    let link = &t.links[l];
                    let device = if outgoing { link.to } else { link.from };
                    Hop { device: device as u32, link: l as u32, bytes_per_sec: link.bytes_per_sec }
                }));
            }
            start.push(hops.len() as u32);
            (start, hops)
        };
        let (out_start, out) = pack(true);
        let (in_start, inn) = pack(false);
        Adjacency { out_start, out, in_start, inn, forwards: t.devices.iter().map(|d| d.kind.forwards()).collect() }
    }

    /// Links leaving `d`, in link order.
    pub(super) fn out(&self, d: DeviceId) -> &[Hop] {
        &self.out[self.out_start[d] as usize..self.out_start[d + 1] as usize]
    }

    /// Links into `d`, in link order; `device` is the link's sending end.
    pub(super) fn inn(&self, d: DeviceId) -> &[Hop] {
        &self.inn[self.in_start[d] as usize..self.in_start[d + 1] as usize]
    }

    pub(super) fn devices(&self) -> usize {
        self.forwards.len()
    }

    pub(super) fn forwards(&self, d: DeviceId) -> bool {
        self.forwards[d]
    }
}

/// Reusable scratch of the search; one per route table.
#[derive(Debug, Clone)]
pub(super) struct Search {
    epoch: u32,
    /// `forward_seen[d] == epoch`: `forward_hops[d]` is d's distance from the source.
    forward_seen: Vec<u32>,
    forward_hops: Vec<u32>,
    backward_seen: Vec<u32>,
    backward_hops: Vec<u32>,
    /// `on_path[d] == epoch`: d is on a shortest wide path, at hop `layer[d]`.
    on_path: Vec<u32>,
    layer: Vec<u32>,
    flow_seen: Vec<u32>,
    flow: Vec<f64>,
    /// Position of a device in the flow's frontier at its hop.
    position: Vec<u32>,
    forward_layers: Vec<Vec<DeviceId>>,
    backward_layers: Vec<Vec<DeviceId>>,
    /// Devices on a path, by hop.
    path_layers: Vec<Vec<DeviceId>>,
    /// (frontier position of the sender, link, receiver) of one hop's links, to put in order.
    hop_links: Vec<(u32, u32, u32)>,
}

impl Search {
    pub(super) fn new(devices: usize) -> Self {
        Search {
            epoch: 0,
            forward_seen: vec![0; devices],
            forward_hops: vec![0; devices],
            backward_seen: vec![0; devices],
            backward_hops: vec![0; devices],
            on_path: vec![0; devices],
            layer: vec![0; devices],
            flow_seen: vec![0; devices],
            flow: vec![0.0; devices],
            position: vec![0; devices],
            forward_layers: Vec::new(),
            backward_layers: Vec::new(),
            path_layers: Vec::new(),
            hop_links: Vec::new(),
        }
    }

    fn next_epoch(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            for stamps in [&mut self.forward_seen, &mut self.backward_seen, &mut self.on_path, &mut self.flow_seen] {
                stamps.iter_mut().for_each(|s| *s = 0);
            }
            self.epoch = 1;
        }
    }

    /// `device` lies on a shortest wide path, `hop` hops from the source.
    fn mark_on_path(&mut self, device: DeviceId, hop: usize) {
        self.on_path[device] = self.epoch;
        self.layer[device] = hop as u32;
        self.path_layers[hop].push(device);
    }

    /// The links from `src` to `dst` (distinct) over links at least `width` wide (up to
    /// the tolerance), each with its fraction of the bytes, in hop order; and the hops.
    /// `None` when no such path exists.
    pub(super) fn links(
        &mut self,
        adj: &Adjacency,
        src: DeviceId,
        dst: DeviceId,
        width: f64,
        out: &mut Vec<(LinkId, f64)>,
    ) -> Option<usize> {
        self.next_epoch();
        let epoch = self.epoch;
        let min_bw = width * (1.0 - BANDWIDTH_TOLERANCE);
        // Only the endpoints and forwarding devices pass traffic on.
        let transit = |d: DeviceId| d == src || d == dst || adj.forwards[d];
        // Only the source and forwarding devices send onwards.
        let may_leave = |d: DeviceId| d == src || adj.forwards[d];
        let wide = |h: &Hop| h.bytes_per_sec >= min_bw;

        self.forward_layers.iter_mut().for_each(Vec::clear);
        self.backward_layers.iter_mut().for_each(Vec::clear);
        push_layer(&mut self.forward_layers, 0, src);
        push_layer(&mut self.backward_layers, 0, dst);
        self.forward_seen[src] = epoch;
        self.forward_hops[src] = 0;
        self.backward_seen[dst] = epoch;
        self.backward_hops[dst] = 0;
        let (mut a, mut b) = (0usize, 0usize);
        let mut best = usize::MAX;
        // Grow the smaller frontier until every path of length <= a + b would have met.
        while best == usize::MAX || a + b < best {
            let forward_open = !self.forward_layers[a].is_empty();
            let backward_open = !self.backward_layers[b].is_empty();
            if !forward_open || !backward_open {
                // One side is exhausted: every reachable device was met from it.
                if best == usize::MAX {
                    return None;
                }
                break;
            }
            // Grow the side with fewer links to follow (a spine has thousands).
            let forward_links: usize = self.forward_layers[a].iter().map(|&u| adj.out(u).len()).sum();
            let backward_links: usize = self.backward_layers[b].iter().map(|&x| adj.inn(x).len()).sum();
            let grow_forward = forward_links <= backward_links;
            // One side's next layer; a device also reached from the other side closes a path.
            let (layers, seen, hops, other_seen, other_hops, at) = if grow_forward {
                a += 1;
                (
                    &mut self.forward_layers,
                    &mut self.forward_seen,
                    &mut self.forward_hops,
                    &self.backward_seen,
                    &self.backward_hops,
                    a,
                )
            } else {
                b += 1;
                (
                    &mut self.backward_layers,
                    &mut self.backward_seen,
                    &mut self.backward_hops,
                    &self.forward_seen,
                    &self.forward_hops,
                    b,
                )
            };
            ensure_layer(layers, at);
            for i in 0..layers[at - 1].len() {
                let u = layers[at - 1][i];
                if !transit(u) {
                    continue;
                }
                for h in if grow_forward { adj.out(u) } else { adj.inn(u) } {
                    let v = h.device as usize;
                    if !wide(h) || seen[v] == epoch {
                        continue;
                    }
                    seen[v] = epoch;
                    hops[v] = at as u32;
                    layers[at].push(v);
                    if other_seen[v] == epoch && transit(v) {
                        best = best.min(at + other_hops[v] as usize);
                    }
                }
            }
        }
        let hops = best;

        // The seam: a hop `m` at which both distances are known for every device.
        let m = hops - hops.min(b);
        debug_assert!(m <= a, "the two searches overlap once a + b >= hops");
        self.path_layers.iter_mut().for_each(Vec::clear);
        ensure_layer(&mut self.path_layers, hops);
        for i in 0..self.forward_layers[m].len() {
            let x = self.forward_layers[m][i];
            if transit(x) && self.backward_seen[x] == epoch && self.backward_hops[x] as usize == hops - m {
                self.mark_on_path(x, m);
            }
        }
        // Back towards the source: a device is on a path when a wide link leads from it
        // to a device on a path one hop further.
        for k in (0..m).rev() {
            for i in 0..self.forward_layers[k].len() {
                let x = self.forward_layers[k][i];
                if !may_leave(x) {
                    continue;
                }
                let leads_on = adj.out(x).iter().any(|h| {
                    let y = h.device as usize;
                    wide(h) && self.on_path[y] == epoch && self.layer[y] as usize == k + 1
                });
                if leads_on {
                    self.mark_on_path(x, k);
                }
            }
        }
        // On towards the destination: devices `hops - k` from it, fed by one on a path at k - 1.
        for k in m + 1..=hops {
            let j = hops - k;
            for i in 0..self.backward_layers[j].len() {
                let y = self.backward_layers[j][i];
                if !transit(y) {
                    continue;
                }
                let fed = adj.inn(y).iter().any(|h| {
                    let x = h.device as usize;
                    wide(h) && may_leave(x) && self.on_path[x] == epoch && self.layer[x] as usize == k - 1
                });
                if fed {
                    self.mark_on_path(y, k);
                }
            }
        }

        // Push the unit of traffic hop by hop, splitting equally at every device. The
        // links of a hop are those from the frontier to the path's next layer, taken in
        // frontier order and, per device, in link order; they are found from whichever
        // side has fewer links (a spine's thousands of down-links against one leaf's
        // handful of up-links).
        out.clear();
        self.flow_seen[src] = epoch;
        self.flow[src] = 1.0;
        self.position[src] = 0;
        let mut frontier = vec![src];
        let mut next_frontier = Vec::new();
        for hop in 0..hops {
            let on = |h: &Hop| {
                let v = h.device as usize;
                wide(h) && self.on_path[v] == epoch && self.layer[v] as usize == hop + 1
            };
            let out_degree: usize = frontier.iter().map(|&u| adj.out(u).len()).sum();
            let in_degree: usize = self.path_layers[hop + 1].iter().map(|&v| adj.inn(v).len()).sum();
            self.hop_links.clear();
            if out_degree <= in_degree {
                for (i, &u) in frontier.iter().enumerate() {
                    for h in adj.out(u).iter().filter(|h| on(h)) {
                        self.hop_links.push((i as u32, h.link, h.device));
                    }
                }
            } else {
                for &v in &self.path_layers[hop + 1] {
                    for h in adj.inn(v) {
                        let u = h.device as usize;
                        let in_frontier = self.flow_seen[u] == epoch
                            && self.on_path[u] == epoch
                            && self.layer[u] as usize == hop
                            && may_leave(u);
                        if in_frontier && wide(h) {
                            self.hop_links.push((self.position[u], h.link, v as u32));
                        }
                    }
                }
                self.hop_links.sort_unstable();
            }
            let mut i = 0;
            while i < self.hop_links.len() {
                let sender = self.hop_links[i].0;
                let fan_out = self.hop_links[i..].iter().take_while(|&&(p, _, _)| p == sender).count();
                let u = frontier[sender as usize];
                let amount = if self.flow_seen[u] == epoch { self.flow[u] } else { 0.0 };
                let share = amount / fan_out as f64;
                for &(_, l, v) in &self.hop_links[i..i + fan_out] {
                    let v = v as usize;
                    out.push((l as usize, share));
                    if self.flow_seen[v] != epoch {
                        self.flow_seen[v] = epoch;
                        self.flow[v] = 0.0;
                    }
                    if self.flow[v] == 0.0 {
                        self.position[v] = next_frontier.len() as u32;
                        next_frontier.push(v);
                    }
                    self.flow[v] += share;
                }
                i += fan_out;
            }
            std::mem::swap(&mut frontier, &mut next_frontier);
            next_frontier.clear();
        }
        Some(hops)
    }
}

fn ensure_layer(layers: &mut Vec<Vec<DeviceId>>, index: usize) {
    while layers.len() <= index {
        layers.push(Vec::new());
    }
}

fn push_layer(layers: &mut Vec<Vec<DeviceId>>, index: usize, device: DeviceId) {
    ensure_layer(layers, index);
    layers[index].push(device);
}

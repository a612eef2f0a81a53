//! The first route search, kept as the oracle the fast search is tested against: a
//! widest-path Dijkstra and two whole-graph BFS per pair, O(links · log devices) each.
//! It defines what a route is; `search.rs` must find exactly the same links, in the
//! same order, with the same fractions.

use std::collections::{HashMap, VecDeque};

use super::search::Adjacency;
use super::{Route, BANDWIDTH_TOLERANCE};
use crate::error::TopologyError;
use crate::graph::{DeviceId, LinkId, Topology};

fn may_leave(t: &Topology, device: DeviceId, src: DeviceId) -> bool {
    device == src || t.devices[device].kind.forwards()
}

fn hop_distances(
    t: &Topology,
    start: DeviceId,
    min_bw: f64,
    backward: bool,
    src: DeviceId,
    dst: DeviceId,
) -> Vec<usize> {
    let mut dist = vec![usize::MAX; t.devices.len()];
    dist[start] = 0;
    let mut queue = VecDeque::from([start]);
    while let Some(u) = queue.pop_front() {
        let transit_ok = u == src || u == dst || t.devices[u].kind.forwards();
        if !transit_ok && u != start {
            continue;
        }
        let next: Vec<DeviceId> = if backward {
            t.in_links(u).iter().map(|&l| &t.links[l]).filter(|l| l.bytes_per_sec >= min_bw).map(|l| l.from).collect()
        } else {
            t.out_links(u).iter().map(|&l| &t.links[l]).filter(|l| l.bytes_per_sec >= min_bw).map(|l| l.to).collect()
        };
        for v in next {
            if dist[v] == usize::MAX {
                dist[v] = dist[u] + 1;
                queue.push_back(v);
            }
        }
    }
    dist
}

/// The route under the topology's routing (`Reference::route`): in the first path type
/// (link classes) that joins the pair, the widest paths over its links; else the widest
/// over every link. The path types of a topology, each as a topology of its links, made once.
pub(super) struct Reference<'a> {
    t: &'a Topology,
    adjacency: Adjacency,
    tiers: Vec<(Topology, Vec<LinkId>, Adjacency)>,
}

impl<'a> Reference<'a> {
    pub(super) fn new(t: &'a Topology) -> Self {
        let tiers = t
            .routing
            .tiers()
            .iter()
            .map(|classes| {
                let keep = |l: LinkId| classes.contains(&t.links[l].class);
                let ids: Vec<LinkId> = (0..t.links.len()).filter(|&l| keep(l)).collect();
                let tier = t.with_links_where(t.name.clone(), keep).expect("a topology's own links build");
                let adjacency = Adjacency::new(&tier);
                (tier, ids, adjacency)
            })
            .collect();
        Reference { t, adjacency: Adjacency::new(t), tiers }
    }

    pub(super) fn route(&self, src: DeviceId, dst: DeviceId) -> Result<Route, TopologyError> {
        for (tier, ids, adjacency) in &self.tiers {
            if let Ok(mut r) = widest(tier, adjacency, src, dst) {
                r.links.iter_mut().for_each(|(l, _)| *l = ids[*l]);
                return Ok(r);
            }
        }
        widest(self.t, &self.adjacency, src, dst)
    }
}

fn widest(t: &Topology, adjacency: &Adjacency, src: DeviceId, dst: DeviceId) -> Result<Route, TopologyError> {
    if src == dst {
        return Ok(Route { links: Vec::new(), bottleneck_bytes_per_sec: f64::INFINITY, hops: 0 });
    }
    let no_route = || TopologyError::NoRoute { from: t.devices[src].name.clone(), to: t.devices[dst].name.clone() };
    let width = super::width::dijkstra(adjacency, src, dst).ok_or_else(no_route)?;
    let min_bw = width * (1.0 - BANDWIDTH_TOLERANCE);
    let from_src = hop_distances(t, src, min_bw, false, src, dst);
    let to_dst = hop_distances(t, dst, min_bw, true, src, dst);
    let hops = from_src[dst];
    if hops == usize::MAX {
        return Err(no_route());
    }
    let on_path = |l: LinkId| {
        let link = &t.links[l];
        link.bytes_per_sec >= min_bw
            && from_src[link.from] != usize::MAX
            && to_dst[link.to] != usize::MAX
            && from_src[link.from] + 1 + to_dst[link.to] == hops
            && may_leave(t, link.from, src)
            // A GPU next to the path is not on it, however close it is to `dst`: it
            // would not pass the bytes on. (The first version missed this and sent part
            // of the bytes into GPUs joined to the destination by a direct link.)
            && (link.to == dst || t.devices[link.to].kind.forwards())
    };
    let mut flow: HashMap<DeviceId, f64> = HashMap::from([(src, 1.0)]);
    let mut frontier = vec![src];
    let mut links = Vec::new();
    for _ in 0..hops {
        let mut next_frontier = Vec::new();
        for &u in &frontier {
            let amount = flow.get(&u).copied().unwrap_or(0.0);
            let out: Vec<LinkId> = t.out_links(u).iter().copied().filter(|&l| on_path(l)).collect();
            let share = amount / out.len() as f64;
            for l in out {
                let v = t.links[l].to;
                links.push((l, share));
                let entry = flow.entry(v).or_insert(0.0);
                if *entry == 0.0 {
                    next_frontier.push(v);
                }
                *entry += share;
            }
        }
        frontier = next_frontier;
    }
    Ok(Route { links, bottleneck_bytes_per_sec: width, hops })
}

//! Routes between devices.
//!
//! A route is the set of links a transfer's bytes cross, with the fraction of the
//! bytes on each. The rule: take the widest paths (largest bottleneck link
//! bandwidth — a transfer never detours through PCIe when NVLink reaches), and of
//! those the fewest hops; where several such paths exist (ECMP across spines,
//! several ports of a NIC) every hop splits its bytes equally over its next hops,
//! as ECMP hashing and NIC port striping do on average. GPUs never forward.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use crate::error::TopologyError;
use crate::graph::{DeviceId, LinkId, Topology};

/// Relative tolerance when comparing bandwidths, so 50e9 computed two ways is one value.
const BANDWIDTH_TOLERANCE: f64 = 1e-9;

#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Every link the route uses, with the fraction of the bytes that cross it.
    pub links: Vec<(LinkId, f64)>,
    /// The narrowest link on every chosen path.
    pub bottleneck_bytes_per_sec: f64,
    /// Hops of each chosen path.
    pub hops: usize,
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

impl Topology {
    fn may_leave(&self, device: DeviceId, src: DeviceId) -> bool {
        device == src || self.devices[device].kind.forwards()
    }

    /// The largest bottleneck bandwidth of any path from `src` to `dst` (max-min Dijkstra).
    fn widest(&self, src: DeviceId, dst: DeviceId) -> Option<f64> {
        let mut best = vec![0.0f64; self.devices.len()];
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
            if !self.may_leave(u, src) {
                continue;
            }
            for &l in self.out_links(u) {
                let link = &self.links[l];
                let w = width.min(link.bytes_per_sec);
                if w > best[link.to] {
                    best[link.to] = w;
                    heap.push(Widest(w, link.to));
                }
            }
        }
        None
    }

    /// Hop distances over links at least `min_bw` wide, forward from `src` (or backward to
    /// `src` when `backward`), never passing through a GPU other than the endpoints.
    fn hop_distances(&self, start: DeviceId, min_bw: f64, backward: bool, src: DeviceId, dst: DeviceId) -> Vec<usize> {
        let mut dist = vec![usize::MAX; self.devices.len()];
        dist[start] = 0;
        let mut queue = VecDeque::from([start]);
        while let Some(u) = queue.pop_front() {
            let transit_ok = u == src || u == dst || self.devices[u].kind.forwards();
            if !transit_ok && u != start {
                continue;
            }
            let next: Vec<DeviceId> = if backward {
                self.in_links(u)
                    .iter()
                    .map(|&l| &self.links[l])
                    .filter(|l| l.bytes_per_sec >= min_bw)
                    .map(|l| l.from)
                    .collect()
            } else {
                self.out_links(u)
                    .iter()
                    .map(|&l| &self.links[l])
                    .filter(|l| l.bytes_per_sec >= min_bw)
                    .map(|l| l.to)
                    .collect()
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

    /// The route from `src` to `dst`; see the module documentation for the rule.
    pub fn route(&self, src: DeviceId, dst: DeviceId) -> Result<Route, TopologyError> {
        if src == dst {
            return Ok(Route { links: Vec::new(), bottleneck_bytes_per_sec: f64::INFINITY, hops: 0 });
        }
        let no_route =
            || TopologyError::NoRoute { from: self.devices[src].name.clone(), to: self.devices[dst].name.clone() };
        let width = self.widest(src, dst).ok_or_else(no_route)?;
        let min_bw = width * (1.0 - BANDWIDTH_TOLERANCE);
        let from_src = self.hop_distances(src, min_bw, false, src, dst);
        let to_dst = self.hop_distances(dst, min_bw, true, src, dst);
        let hops = from_src[dst];
        if hops == usize::MAX {
            return Err(no_route());
        }
        // A link u->v is on a shortest wide path iff d(src,u) + 1 + d(v,dst) == hops.
        let on_path = |l: LinkId| {
            let link = &self.links[l];
            link.bytes_per_sec >= min_bw
                && from_src[link.from] != usize::MAX
                && to_dst[link.to] != usize::MAX
                && from_src[link.from] + 1 + to_dst[link.to] == hops
                && self.may_leave(link.from, src)
        };
        // Push the unit of traffic hop by hop, splitting equally at every device.
        let mut flow: HashMap<DeviceId, f64> = HashMap::from([(src, 1.0)]);
        let mut frontier = vec![src];
        let mut links = Vec::new();
        for _ in 0..hops {
            let mut next_frontier = Vec::new();
            for &u in &frontier {
                let amount = flow.get(&u).copied().unwrap_or(0.0);
                let out: Vec<LinkId> = self.out_links(u).iter().copied().filter(|&l| on_path(l)).collect();
                let share = amount / out.len() as f64;
                for l in out {
                    let v = self.links[l].to;
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

    /// Hop counts from `src` to every device, through devices that forward (any bandwidth).
    pub fn hops_from(&self, src: DeviceId) -> Vec<usize> {
        self.hop_distances(src, 0.0, false, src, src)
    }

    /// One concrete path of the route: at every ECMP split, the lowest-numbered link.
    /// Used where traffic cannot be split, e.g. the tree of an in-network reduction.
    pub fn primary_path(&self, src: DeviceId, dst: DeviceId) -> Result<Vec<LinkId>, TopologyError> {
        let route = self.route(src, dst)?;
        let mut path = Vec::with_capacity(route.hops);
        let mut at = src;
        while at != dst {
            let next =
                route.links.iter().map(|&(l, _)| l).filter(|&l| self.links[l].from == at).min().ok_or_else(|| {
                    TopologyError::NoRoute { from: self.devices[src].name.clone(), to: self.devices[dst].name.clone() }
                })?;
            path.push(next);
            at = self.links[next].to;
        }
        Ok(path)
    }
}

/// Routes computed once per device pair and reused (a ring asks for the same pairs every round).
#[derive(Debug)]
pub struct RouteCache<'a> {
    topology: &'a Topology,
    routes: HashMap<(DeviceId, DeviceId), Route>,
}

impl<'a> RouteCache<'a> {
    pub fn new(topology: &'a Topology) -> Self {
        RouteCache { topology, routes: HashMap::new() }
    }

    pub fn get(&mut self, src: DeviceId, dst: DeviceId) -> Result<&Route, TopologyError> {
        if !self.routes.contains_key(&(src, dst)) {
            let route = self.topology.route(src, dst)?;
            self.routes.insert((src, dst), route);
        }
        Ok(&self.routes[&(src, dst)])
    }
}

#[cfg(test)]
mod tests {
    use crate::presets::preset;
    use crate::LinkClass;

    fn sum_on(t: &crate::Topology, route: &crate::Route, class: LinkClass) -> f64 {
        route.links.iter().filter(|(l, _)| t.links[*l].class == class).map(|(_, f)| f).sum()
    }

    #[test]
    fn nvlink_inside_a_server_nics_across() {
        let t = preset("hgx-h100x2").unwrap();
        let (a0, a1, b0) =
            (t.device_id("A.gpu0").unwrap(), t.device_id("A.gpu1").unwrap(), t.device_id("B.gpu0").unwrap());
        let local = t.route(a0, a1).unwrap();
        assert_eq!(local.hops, 2);
        assert_eq!(local.bottleneck_bytes_per_sec, 450e9);
        assert!(local.links.iter().all(|(l, f)| t.links[*l].class == LinkClass::Nvlink && *f == 1.0));
        let same_rail = t.route(a0, b0).unwrap();
        assert_eq!(same_rail.bottleneck_bytes_per_sec, 50e9);
        assert_eq!(sum_on(&t, &same_rail, LinkClass::Fabric), 0.0);
    }

    #[test]
    fn cross_rail_traffic_splits_over_the_spines() {
        let t = preset("hgx-h100x2").unwrap();
        let route = t.route(t.device_id("A.gpu7").unwrap(), t.device_id("B.gpu0").unwrap()).unwrap();
        // leaf -> spine0 / spine1 half each, then spine -> leaf half each.
        let fabric: Vec<f64> =
            route.links.iter().filter(|(l, _)| t.links[*l].class == LinkClass::Fabric).map(|(_, f)| *f).collect();
        assert_eq!(fabric, vec![0.5, 0.5, 0.5, 0.5]);
        let first = t.primary_path(t.device_id("A.gpu7").unwrap(), t.device_id("B.gpu0").unwrap()).unwrap();
        assert_eq!(first.len(), route.hops);
    }

    #[test]
    fn nic_ports_stripe_and_share_the_slot() {
        let t = preset("a100-pcie-control:ports=2").unwrap();
        let route = t.route(t.device_id("A.gpu3").unwrap(), t.device_id("B.gpu0").unwrap()).unwrap();
        assert_eq!(route.bottleneck_bytes_per_sec, 25e9);
        let ports: Vec<f64> =
            route.links.iter().filter(|(l, _)| t.links[*l].class == LinkClass::Nic).map(|(_, f)| *f).collect();
        assert_eq!(ports, vec![0.5, 0.5, 0.5, 0.5]);
        let slot_users = route.links.iter().filter(|(l, _)| !t.links[*l].interfaces.is_empty()).count();
        assert_eq!(slot_users, 4, "both ports' PCIe links on both servers use a slot");
    }

    #[test]
    fn direct_links_beat_the_pcie_detour() {
        let t = preset("a100-pcie-control:local=300GB/s").unwrap();
        let route = t.route(t.device_id("A.gpu0").unwrap(), t.device_id("A.gpu2").unwrap()).unwrap();
        assert_eq!((route.hops, route.bottleneck_bytes_per_sec), (1, 300e9));
    }

    #[test]
    fn gpus_do_not_forward() {
        let mut b = crate::TopologyBuilder::new("chain");
        let g0 = b.device("g0", crate::DeviceKind::Gpu, Some("a"));
        let g1 = b.device("g1", crate::DeviceKind::Gpu, Some("a"));
        let g2 = b.device("g2", crate::DeviceKind::Gpu, Some("a"));
        b.duplex(g0, g1, 1e9, 0.0, &[]);
        b.duplex(g1, g2, 1e9, 0.0, &[]);
        let t = b.build().unwrap();
        assert!(t.route(g0, g2).is_err());
        assert!(t.route(g0, g1).is_ok());
    }
}

//! Routes between devices.
//!
//! A route is the set of links a transfer's bytes cross, with the fraction of the
//! bytes on each. The rule: take the widest paths (largest bottleneck link
//! bandwidth — a transfer never detours through PCIe when NVLink reaches), and of
//! those the fewest hops; where several such paths exist (ECMP across spines,
//! several ports of a NIC) every hop splits its bytes equally over its next hops,
//! as ECMP hashing and NIC port striping do on average. GPUs never forward.

mod aggregation;
mod search;
mod symmetry;
mod table;
mod width;

#[cfg(test)]
mod reference;

pub use aggregation::{aggregation_switch, in_network_link_streams};
pub use table::{RouteTable, RouteView};

use crate::error::TopologyError;
use crate::graph::{DeviceId, LinkId, Topology};
use rustc_hash::FxHashMap;

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

impl Topology {
    /// The route from `src` to `dst`; see the module documentation for the rule. For
    /// one-off questions only: this indexes the whole topology each call, so anything
    /// asking for many routes keeps one [`RouteTable`].
    pub fn route(&self, src: DeviceId, dst: DeviceId) -> Result<Route, TopologyError> {
        RouteTable::new(self).get(src, dst).map(RouteView::to_route)
    }

    /// Hop counts from `src` to every device, through devices that forward (any bandwidth).
    pub fn hops_from(&self, src: DeviceId) -> Vec<usize> {
        self.hops(src, false)
    }

    /// Hop counts from every device to `dst`: the paths `hops_from` counts, searched
    /// backwards (one search for all sources).
    pub fn hops_to(&self, dst: DeviceId) -> Vec<usize> {
        self.hops(dst, true)
    }

    /// Every device's hop count, `usize::MAX` where unreached: `hops_near` without a limit.
    fn hops(&self, end: DeviceId, backward: bool) -> Vec<usize> {
        let mut dist = vec![usize::MAX; self.devices.len()];
        for (d, hops) in self.hops_near(end, backward, usize::MAX) {
            dist[d] = hops;
        }
        dist
    }

    /// Hop counts from (`backward`: to) `end` of the devices within `limit` hops: a map
    /// of those reached, so a search near a few devices of a large fabric costs their
    /// neighbourhood, not the fabric (NVLS on each of 1,024 servers' NVSwitches).
    pub(crate) fn hops_near(&self, end: DeviceId, backward: bool, limit: usize) -> FxHashMap<DeviceId, usize> {
        let mut dist = FxHashMap::default();
        dist.insert(end, 0);
        let mut queue = std::collections::VecDeque::from([(end, 0usize)]);
        while let Some((u, d)) = queue.pop_front() {
            if d >= limit {
                continue;
            }
            // Every device of a path but its first forwards: searching backwards, a
            // device that does not is a first device, and the search stops there.
            if u != end && !self.devices[u].kind.forwards() {
                continue;
            }
            let links = if backward { self.in_links(u) } else { self.out_links(u) };
            for &l in links {
                let v = if backward { self.links[l].from } else { self.links[l].to };
                if let std::collections::hash_map::Entry::Vacant(e) = dist.entry(v) {
                    e.insert(d + 1);
                    queue.push_back((v, d + 1));
                }
            }
        }
        dist
    }

    /// One concrete path of the route: at every ECMP split, the lowest-numbered link.
    /// One-off, like [`Topology::route`]; [`RouteTable::primary_path`] for many.
    pub fn primary_path(&self, src: DeviceId, dst: DeviceId) -> Result<Vec<LinkId>, TopologyError> {
        RouteTable::new(self).primary_path(src, dst)
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

    /// NCCL ranks paths by type: NVLink however slow before the network (issue 11,
    /// item 1). With `Routing::Widest` a 10 GB/s NVLink is bypassed through the NICs.
    #[test]
    fn the_closest_path_type_wins_over_a_wider_detour() {
        let mut t = preset("rail:servers=2,nvlink=10GB/s").unwrap();
        let (a0, a1, b1) =
            (t.device_id("A.gpu0").unwrap(), t.device_id("A.gpu1").unwrap(), t.device_id("B.gpu1").unwrap());
        let local = t.route(a0, a1).unwrap();
        assert_eq!((local.hops, local.bottleneck_bytes_per_sec), (2, 10e9));
        assert!(local.links.iter().all(|(l, _)| t.links[*l].class == LinkClass::Nvlink));
        // Across servers only the network joins them: unchanged.
        let across = t.route(a0, b1).unwrap();
        t.routing = crate::Routing::Widest;
        assert_eq!(t.route(a0, b1).unwrap(), across);
        let detour = t.route(a0, a1).unwrap();
        assert_eq!(detour.bottleneck_bytes_per_sec, 50e9);
        assert!(detour.links.iter().any(|(l, _)| t.links[*l].class == LinkClass::Nic));
    }

    /// Validation checks every pair of ranks joined: through one shared component of the
    /// fabric when there is one, else pair by pair; both find a GPU cut off.
    #[test]
    fn all_ranks_reachable_is_found_without_every_pair() {
        let t = preset("rail:servers=64").unwrap();
        assert!(super::RouteTable::new(&t).all_reachable(&t.default_ranks).is_ok());
        let cut = t.without_links(&t.failed_links(&["s3.nic2".parse().unwrap()]).unwrap()).unwrap();
        // s3.gpu2 still reaches its server over NVLink, but nothing beyond it.
        let e = super::RouteTable::new(&cut).all_reachable(&cut.default_ranks).unwrap_err().to_string();
        assert!(e.contains("s3.gpu2"), "{e}");
        let mesh = preset("mesh:ranks=5").unwrap();
        assert!(super::RouteTable::new(&mesh).all_reachable(&mesh.default_ranks).is_ok());
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

    /// Every route between every pair of devices that can end a route (GPUs, and the
    /// switches in-network reductions aggregate at) must be exactly the reference's.
    fn assert_same_as_reference(t: &crate::Topology) {
        let mut table = super::RouteTable::new(t);
        let reference = super::reference::Reference::new(t);
        let ends: Vec<usize> = (0..t.devices.len())
            .filter(|&d| {
                t.devices[d].kind == crate::DeviceKind::Gpu
                    || (t.devices[d].kind == crate::DeviceKind::Switch && d % 3 == 0)
            })
            .collect();
        for &a in &ends {
            for &b in &ends {
                let fast = table.get(a, b).map(super::RouteView::to_route);
                let slow = reference.route(a, b);
                assert_eq!(fast, slow, "{}: {} -> {}", t.name, t.devices[a].name, t.devices[b].name);
            }
        }
    }

    #[test]
    fn the_fast_search_finds_the_reference_routes_on_every_preset() {
        for spec in [
            "hgx-h100x2",
            "a100-pcie-control",
            "a100-pcie-control:ports=1",
            "a100-pcie-control:ports=3",
            "a100-pcie-control:local=300GB/s",
            "a100-pcie-control:p2p=16GB/s,slot=64GB/s",
            "rail:servers=5,gpus=4,group=2,spines=3",
            "rail:servers=4,gpus=2,group=2,spines=2,over=2:1",
            "rail:servers=3,nvlink=40GB/s",
            "rail:servers=3,gpus=4,nvlink=5GB/s,pcie=8GB/s",
            "a100-pcie-control:local=10GB/s",
            "rail:servers=2,gpus=8,nic=100GB/s,pcie=32GB/s",
            "clos:k=4,tiers=2",
            "clos:k=4,tiers=3",
            "clos:k=8,tiers=3",
            // Spines with more down-links than a leaf has links in: the flow's links are
            // then found from the receiving side.
            "rail:servers=16,gpus=2,group=2,spines=3",
            "clos:k=6,tiers=2,over=2:1",
            "mesh:ranks=5",
        ] {
            let mut t = preset(spec).unwrap();
            assert_same_as_reference(&t);
            t.routing = crate::Routing::Widest;
            assert_same_as_reference(&t);
        }
    }

    /// Fabrics of identical servers search routes once per class of pairs (the reference
    /// test above holds the moved routes to the searched ones, link for link); the
    /// others search every pair.
    #[test]
    fn route_classes_are_found_where_servers_are_alike() {
        for (spec, classes) in [
            ("hgx-h100x2", true),
            ("a100-pcie-control", false), // shared PCIe slots (interfaces): not moved
            ("rail:servers=5,gpus=4,group=2,spines=3", true),
            ("rail:servers=4,gpus=2,group=2,spines=2,over=2:1", true),
            ("rail:servers=16,gpus=2,group=2,spines=3", true),
            ("rail:servers=1", false),
            ("mesh:ranks=5", false),
        ] {
            let t = preset(spec).unwrap();
            assert_eq!(super::RouteTable::new(&t).uses_route_classes(), classes, "{spec}");
        }
    }

    #[test]
    fn asymmetric_links_fall_back_to_the_exact_width_search() {
        // s1 -> s2 is wider than s2 -> s1: components would misjudge reachability.
        let mut b = crate::TopologyBuilder::new("one-way");
        let g0 = b.device("g0", crate::DeviceKind::Gpu, Some("a"));
        let g1 = b.device("g1", crate::DeviceKind::Gpu, Some("b"));
        let s1 = b.device("s1", crate::DeviceKind::Switch, None);
        let s2 = b.device("s2", crate::DeviceKind::Switch, None);
        let s3 = b.device("s3", crate::DeviceKind::Switch, None);
        b.duplex(g0, s1, 10e9, 0.0, &[]);
        b.duplex(g1, s2, 10e9, 0.0, &[]);
        b.duplex(s1, s3, 2e9, 0.0, &[]);
        b.duplex(s3, s2, 2e9, 0.0, &[]);
        for (from, to, bytes_per_sec) in [(s1, s2, 10e9), (s2, s1, 1e9)] {
            let class = crate::LinkClass::Fabric;
            b.add_link(
                crate::Link { from, to, bytes_per_sec, latency_secs: 0.0, class, interfaces: vec![] },
                "one way",
            );
        }
        let t = b.build().unwrap();
        assert!(matches!(
            super::width::WidthIndex::new(&super::search::Adjacency::new(&t)),
            super::width::WidthIndex::Dijkstra
        ));
        assert_eq!(t.route(g0, g1).unwrap().bottleneck_bytes_per_sec, 10e9);
        assert_eq!(t.route(g1, g0).unwrap().bottleneck_bytes_per_sec, 2e9);
        assert_same_as_reference(&t);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Random small fabrics: switches joined at random widths, GPUs hung off them
        /// (some on two switches, some joined directly), routes equal the reference's.
        #[test]
        fn the_fast_search_matches_the_reference_on_random_fabrics(
            switches in 1usize..7,
            gpus in 2usize..7,
            edges in proptest::collection::vec((0usize..7, 0usize..7, 1u8..4, 0u8..4), 0..14),
            attach in proptest::collection::vec((0usize..7, 0usize..7, 1u8..4, proptest::bool::ANY), 7),
        ) {
            let mut b = crate::TopologyBuilder::new("random");
            let s: Vec<usize> = (0..switches).map(|i| b.device(format!("s{i}"), crate::DeviceKind::Switch, None)).collect();
            let g: Vec<usize> = (0..gpus).map(|i| b.device(format!("g{i}"), crate::DeviceKind::Gpu, Some("x"))).collect();
            // Parallel links and one-way links (asymmetric fabrics) included.
            for (x, y, w, shape) in edges {
                let (x, y) = (x % switches, y % switches);
                if x == y {
                    continue;
                }
                if shape == 0 {
                    let link = crate::Link {
                        from: s[x],
                        to: s[y],
                        bytes_per_sec: f64::from(w) * 25e9,
                        latency_secs: 0.0,
                        class: crate::LinkClass::Fabric,
                        interfaces: vec![],
                    };
                    b.add_link(link, "one way");
                } else {
                    b.duplex(s[x], s[y], f64::from(w) * 25e9, 0.0, &[]);
                }
            }
            for (i, &(x, y, w, second)) in attach.iter().take(gpus).enumerate() {
                b.duplex(g[i], s[x % switches], f64::from(w) * 50e9, 0.0, &[]);
                if second && switches > 1 && x % switches != y % switches {
                    b.duplex(g[i], s[y % switches], 50e9, 0.0, &[]);
                }
                if second && i + 1 < gpus {
                    b.duplex(g[i], g[i + 1], 100e9, 0.0, &[]);
                }
            }
            let t = b.build().unwrap();
            assert_same_as_reference(&t);
        }
    }
}

//! Route classes: on a fabric of identical servers, a route's shape depends on where its
//! ends sit, not on which server they are in. Every GPU of rail i of one leaf group reaches
//! rail i of another the same way, so an all-to-all over P GPUs needs about G·P routes
//! searched (G GPUs per server), not P².
//!
//! The symmetry is found, not declared, and then proved: devices after a prefix of
//! switches come in equal blocks, one per server, with the same kinds and attributes at
//! the same offsets; each server's links are one block of links with the same shape; the
//! remaining links join switches only. Servers whose links reach the same switches form a
//! group; swapping two servers of a group maps every link onto a link, so it is an
//! automorphism of the fabric. Two groups of the same size whose switches are wired alike
//! (checked link by link) can be swapped too. A route's ends are moved by such swaps into
//! the first server of the first group, the route found there once, and its links moved
//! back. A route depends only on the labelled graph (bandwidths, kinds, who forwards), and
//! its links' order on the order in which a search meets each device's links, which the
//! swaps are checked to keep at every device they move; so the moved route is the route,
//! link for link (the tests hold it to the reference search on every preset, and on
//! fabrics that break the symmetry or the order). Anything that does not fit leaves the
//! table searching every pair, as before.

use rustc_hash::FxHashMap;

use crate::graph::{DeviceId, LinkId, Topology};

/// The swaps that bring a route's source into the first server of its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Transform {
    /// Swap this group with group 0 (applied first).
    group: Option<usize>,
    /// Then swap these two servers of one group.
    servers: Option<(usize, usize)>,
}

#[derive(Debug, Clone)]
pub(super) struct ServerSymmetry {
    /// Devices before the first server (switches).
    first: usize,
    devices_per_server: usize,
    links_per_server: usize,
    servers: usize,
    group_of: Vec<usize>,
    /// A server's place in its group.
    place: Vec<usize>,
    members: Vec<Vec<usize>>,
    /// Whether group g can be swapped with group 0, and then which switch becomes which
    /// and which switch-to-switch link becomes which.
    swap_with_first: Vec<Option<GroupSwap>>,
}

/// Swapping a group with group 0: its switches and the links between switches they end.
#[derive(Debug, Clone, Default)]
struct GroupSwap {
    switches: FxHashMap<DeviceId, DeviceId>,
    links: FxHashMap<LinkId, LinkId>,
}

/// Whether two links carry the same attributes (ends aside), with no shared interfaces
/// (a swap would have to map those too).
fn alike(t: &Topology, a: LinkId, b: LinkId) -> bool {
    let (x, y) = (&t.links[a], &t.links[b]);
    x.bytes_per_sec == y.bytes_per_sec
        && x.latency_secs == y.latency_secs
        && x.class == y.class
        && x.interfaces.is_empty()
        && y.interfaces.is_empty()
}

/// Whether two devices are interchangeable (names and servers aside).
fn same_device(t: &Topology, a: DeviceId, b: DeviceId) -> bool {
    let (x, y) = (&t.devices[a], &t.devices[b]);
    x.kind == y.kind && x.tier == y.tier && x.rail == y.rail && x.in_network_reduction == y.in_network_reduction
}

impl ServerSymmetry {
    /// The symmetry of `t`, if it has the shape described in the module documentation.
    pub(super) fn find(t: &Topology) -> Option<ServerSymmetry> {
        let first = t.devices.iter().position(|d| d.server.is_some())?;
        let name = t.devices[first].server.as_ref()?;
        let devices_per_server = t.devices[first..].iter().take_while(|d| d.server.as_ref() == Some(name)).count();
        let rest = t.devices.len() - first;
        if !rest.is_multiple_of(devices_per_server) {
            return None;
        }
        let servers = rest / devices_per_server;
        if servers < 2 {
            return None;
        }
        let server_of = |d: DeviceId| (d >= first).then(|| (d - first) / devices_per_server);
        // Devices: one block per server, alike offset by offset.
        for s in 0..servers {
            let start = first + s * devices_per_server;
            let name = t.devices[start].server.as_ref()?;
            for k in 0..devices_per_server {
                let d = start + k;
                if t.devices[d].server.as_ref() != Some(name) || !same_device(t, first + k, d) {
                    return None;
                }
            }
            if s > 0 && t.devices[start - 1].server.as_ref() == Some(name) {
                return None;
            }
        }
        // Links: one block per server at the start, alike offset by offset; each link of a
        // block touches its server (and perhaps a switch); the rest join switches only.
        let links_per_server =
            t.links.iter().take_while(|l| server_of(l.from) == Some(0) || server_of(l.to) == Some(0)).count();
        if links_per_server == 0 || t.links.len() < servers * links_per_server {
            return None;
        }
        // End of a link as seen from its server block: a device offset, or a switch.
        #[derive(PartialEq, Eq, Hash, Clone, Copy)]
        enum End {
            Local(usize),
            Switch(DeviceId),
        }
        let end = |s: usize, d: DeviceId| match server_of(d) {
            Some(x) if x == s => Some(End::Local(d - first - s * devices_per_server)),
            Some(_) => None,
            None => Some(End::Switch(d)),
        };
        let mut switches_of: Vec<Vec<DeviceId>> = Vec::with_capacity(servers);
        for s in 0..servers {
            let mut switches = Vec::new();
            for k in 0..links_per_server {
                let (l, l0) = (s * links_per_server + k, k);
                let (a, b) = (end(s, t.links[l].from)?, end(s, t.links[l].to)?);
                let (a0, b0) = (end(0, t.links[l0].from)?, end(0, t.links[l0].to)?);
                let shape = |x: End, x0: End| match (x, x0) {
                    (End::Local(i), End::Local(j)) => i == j,
                    (End::Switch(_), End::Switch(_)) => true,
                    _ => false,
                };
                if !shape(a, a0)
                    || !shape(b, b0)
                    || !alike(t, l, l0)
                    || matches!((a, b), (End::Switch(_), End::Switch(_)))
                {
                    return None;
                }
                for e in [a, b] {
                    if let End::Switch(d) = e {
                        switches.push(d);
                    }
                }
            }
            switches_of.push(switches);
        }
        let fabric_start = servers * links_per_server;
        if t.links[fabric_start..].iter().any(|l| server_of(l.from).is_some() || server_of(l.to).is_some()) {
            return None;
        }
        // Groups: servers reaching the same switches in the same places.
        let mut group_by_switches: FxHashMap<&[DeviceId], usize> = FxHashMap::default();
        let mut group_of = Vec::with_capacity(servers);
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut place = Vec::with_capacity(servers);
        for (s, switches) in switches_of.iter().enumerate() {
            let g = *group_by_switches.entry(switches).or_insert_with(|| {
                members.push(Vec::new());
                members.len() - 1
            });
            group_of.push(g);
            place.push(members[g].len());
            members[g].push(s);
        }
        // A switch a group reaches belongs to that group alone (else swapping groups
        // would have to move another group's links too).
        let mut owner: FxHashMap<DeviceId, usize> = FxHashMap::default();
        for (g, m) in members.iter().enumerate() {
            for &d in &switches_of[m[0]] {
                if *owner.entry(d).or_insert(g) != g {
                    return None;
                }
            }
        }
        let mut symmetry = ServerSymmetry {
            first,
            devices_per_server,
            links_per_server,
            servers,
            group_of,
            place,
            members,
            swap_with_first: Vec::new(),
        };
        // Switch-to-switch links by their ends, parallel ones in id order.
        let mut between: FxHashMap<(DeviceId, DeviceId), Vec<LinkId>> = FxHashMap::default();
        for (l, link) in t.links.iter().enumerate().skip(fabric_start) {
            between.entry((link.from, link.to)).or_default().push(l);
        }
        symmetry.swap_with_first =
            (0..symmetry.members.len()).map(|g| symmetry.group_swap(t, &switches_of, &between, g)).collect();
        Some(symmetry)
    }

    /// The switch bijection swapping group `g` with group 0, if the swap is an automorphism.
    fn group_swap(
        &self,
        t: &Topology,
        switches_of: &[Vec<DeviceId>],
        between: &FxHashMap<(DeviceId, DeviceId), Vec<LinkId>>,
        g: usize,
    ) -> Option<GroupSwap> {
        if g == 0 || self.members[g].len() != self.members[0].len() {
            return None;
        }
        let (mine, base) = (&switches_of[self.members[g][0]], &switches_of[self.members[0][0]]);
        let mut map: FxHashMap<DeviceId, DeviceId> = FxHashMap::default();
        for (&a, &b) in mine.iter().zip(base) {
            for (x, y) in [(a, b), (b, a)] {
                if *map.entry(x).or_insert(y) != y || !same_device(t, x, y) {
                    return None;
                }
            }
        }
        let moved = |d: DeviceId| map.get(&d).copied().unwrap_or(d);
        // Every switch-to-switch link at a moved switch lands on a link alike: the one
        // between the moved ends in the same place among the parallel links there.
        let mut links = FxHashMap::default();
        for &d in map.keys() {
            for &l in t.out_links(d).iter().chain(t.in_links(d)) {
                if l < self.servers * self.links_per_server {
                    continue;
                }
                let (from, to) = (t.links[l].from, t.links[l].to);
                let place = between.get(&(from, to))?.iter().position(|&m| m == l)?;
                let m = *between.get(&(moved(from), moved(to)))?.get(place)?;
                if !alike(t, l, m) {
                    return None;
                }
                links.insert(l, m);
            }
        }
        // And a moved switch's links keep their order (a search meets a device's links in
        // the order they are listed, so a route's links come out in the same order).
        let move_link =
            |l: LinkId| self.move_server_link(l, |s| self.across_groups(s, g)).or_else(|| links.get(&l).copied());
        for (&d, &e) in &map {
            for (mine, theirs) in [(t.out_links(d), t.out_links(e)), (t.in_links(d), t.in_links(e))] {
                if mine.len() != theirs.len() || mine.iter().zip(theirs).any(|(&l, &m)| move_link(l) != Some(m)) {
                    return None;
                }
            }
        }
        Some(GroupSwap { switches: map, links })
    }

    fn server_of(&self, d: DeviceId) -> Option<usize> {
        (d >= self.first).then(|| (d - self.first) / self.devices_per_server).filter(|&s| s < self.servers)
    }

    /// Devices of one server.
    pub(super) fn devices_per_server(&self) -> usize {
        self.devices_per_server
    }

    /// `d`'s place in server 0, if it is there (where most classes' routes start).
    pub(super) fn place_in_first_server(&self, d: DeviceId) -> Option<usize> {
        (self.server_of(d) == Some(0)).then(|| d - self.first)
    }

    /// The swaps that bring `src` into the first server of its group, and group 0 where
    /// its group can be swapped with it; `None` for a device outside every server.
    pub(super) fn transform(&self, src: DeviceId) -> Option<Transform> {
        let s = self.server_of(src)?;
        let g = self.group_of[s];
        let (group, g1) = match self.swap_with_first[g] {
            Some(_) => (Some(g), 0),
            None => (None, g),
        };
        let s1 = self.members[g1][self.place[s]];
        let first = self.members[g1][0];
        Some(Transform { group, servers: (s1 != first).then_some((s1, first)) })
    }

    /// Where swapping group `g` with group 0 takes server `s`.
    fn across_groups(&self, s: usize, g: usize) -> usize {
        match self.group_of[s] {
            h if h == g => self.members[0][self.place[s]],
            0 => self.members[g][self.place[s]],
            _ => s,
        }
    }

    /// A server's device, moved to the same place in server `to(its server)`; `None` for a switch.
    fn move_server_device(&self, d: DeviceId, to: impl Fn(usize) -> usize) -> Option<DeviceId> {
        let s = self.server_of(d)?;
        Some(d - s * self.devices_per_server + to(s) * self.devices_per_server)
    }

    /// A server's link, moved to the same place in server `to(its server)`; `None` for a
    /// link between switches.
    fn move_server_link(&self, l: LinkId, to: impl Fn(usize) -> usize) -> Option<LinkId> {
        (l < self.servers * self.links_per_server)
            .then(|| to(l / self.links_per_server) * self.links_per_server + l % self.links_per_server)
    }

    fn swap_servers(&self, d: DeviceId, pair: (usize, usize)) -> DeviceId {
        self.move_server_device(d, |s| across_servers(s, pair)).unwrap_or(d)
    }

    fn swap_groups(&self, d: DeviceId, g: usize) -> DeviceId {
        self.move_server_device(d, |s| self.across_groups(s, g))
            .unwrap_or_else(|| self.swap_with_first[g].as_ref().and_then(|m| m.switches.get(&d).copied()).unwrap_or(d))
    }

    /// Where the transform takes a device.
    pub(super) fn device(&self, x: Transform, d: DeviceId) -> DeviceId {
        let d = x.group.map_or(d, |g| self.swap_groups(d, g));
        x.servers.map_or(d, |p| self.swap_servers(d, p))
    }

    /// Where the inverse of the transform takes a link.
    pub(super) fn link_back(&self, x: Transform, l: LinkId) -> LinkId {
        let l = x.servers.and_then(|pair| self.move_server_link(l, |s| across_servers(s, pair))).unwrap_or(l);
        let Some(g) = x.group else { return l };
        self.move_server_link(l, |s| self.across_groups(s, g))
            // Links between switches move where the swap moves them; the rest stay.
            .or_else(|| self.swap_with_first[g].as_ref().and_then(|m| m.links.get(&l).copied()))
            .unwrap_or(l)
    }
}

/// Where swapping servers a and b takes server `s`.
fn across_servers(s: usize, (a, b): (usize, usize)) -> usize {
    match s {
        _ if s == a => b,
        _ if s == b => a,
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::preset;
    use crate::{DeviceKind, RouteTable};

    fn same_routes_as_the_reference(t: &Topology) {
        let mut table = RouteTable::new(t);
        let reference = super::super::reference::Reference::new(t);
        let gpus: Vec<DeviceId> = (0..t.devices.len()).filter(|&d| t.devices[d].kind == DeviceKind::Gpu).collect();
        for &a in &gpus {
            for &b in &gpus {
                let moved = table.get(a, b).map(super::super::RouteView::to_route);
                assert_eq!(moved, reference.route(a, b), "{} -> {}", a, b);
            }
        }
    }

    #[test]
    fn groups_of_alike_servers_and_swappable_groups_are_found() {
        let t = preset("rail:servers=16,gpus=2,group=2,spines=3").unwrap();
        let s = ServerSymmetry::find(&t).unwrap();
        assert_eq!(s.members.len(), 8);
        assert_eq!(s.swap_with_first.iter().filter(|m| m.is_some()).count(), 7);
        // A partly filled last group is a group of its own that no other swaps with.
        let t = preset("rail:servers=5,gpus=4,group=2,spines=3").unwrap();
        let s = ServerSymmetry::find(&t).unwrap();
        assert_eq!(s.members.iter().map(Vec::len).collect::<Vec<_>>(), vec![2, 2, 1]);
        assert_eq!(s.swap_with_first.iter().map(Option::is_some).collect::<Vec<_>>(), vec![false, true, false]);
    }

    #[test]
    fn a_fabric_that_breaks_the_symmetry_is_not_moved_across_it() {
        // One uplink of group 3 slower: group 3 no longer swaps with group 0; routes stay exact.
        let mut t = preset("rail:servers=16,gpus=2,group=2,spines=3").unwrap();
        let leaf = t.device_id("leaf3.rail1").unwrap();
        let up = t.out_links(leaf).iter().copied().find(|&l| t.devices[t.links[l].to].tier == Some(2)).unwrap();
        t.links[up].bytes_per_sec /= 2.0;
        let s = ServerSymmetry::find(&t).unwrap();
        assert_eq!(s.swap_with_first.iter().filter(|m| m.is_some()).count(), 6);
        assert!(s.swap_with_first[3].is_none());
        same_routes_as_the_reference(&t);
        // One server's NIC slower: servers are no longer alike, every pair is searched.
        let mut t = preset("rail:servers=4,gpus=2,group=2,spines=2").unwrap();
        let nic = t.device_id("C.nic1").unwrap();
        let wire =
            t.out_links(nic).iter().copied().find(|&l| t.devices[t.links[l].to].kind == DeviceKind::Switch).unwrap();
        t.links[wire].bytes_per_sec /= 2.0;
        assert!(ServerSymmetry::find(&t).is_none());
        same_routes_as_the_reference(&t);
    }

    /// Two groups whose leaves list their spine links in opposite orders: swapping the
    /// groups would list a moved route's links in another order than the search does,
    /// so the groups are not swapped.
    #[test]
    fn groups_whose_links_are_listed_in_another_order_are_not_swapped() {
        let mut b = crate::TopologyBuilder::new("probe");
        let leaves = [b.device("leaf0", DeviceKind::Switch, None), b.device("leaf1", DeviceKind::Switch, None)];
        let spines = [b.device("spine0", DeviceKind::Switch, None), b.device("spine1", DeviceKind::Switch, None)];
        for (s, name) in ["A", "B", "C", "D"].iter().enumerate() {
            let gpu = b.device(format!("{name}.gpu"), DeviceKind::Gpu, Some(name));
            let nic = b.device(format!("{name}.nic"), DeviceKind::Nic, Some(name));
            b.duplex(gpu, nic, 50e9, 0.0, &[]);
            b.duplex(nic, leaves[s / 2], 50e9, 0.0, &[]);
        }
        for (leaf, order) in [(leaves[0], [0, 1]), (leaves[1], [1, 0])] {
            for k in order {
                b.duplex(leaf, spines[k], 50e9, 0.0, &[]);
            }
        }
        let t = b.build().unwrap();
        let s = ServerSymmetry::find(&t).unwrap();
        assert_eq!(s.members.len(), 2);
        assert!(s.swap_with_first.iter().all(Option::is_none));
        same_routes_as_the_reference(&t);
    }

    #[test]
    fn moved_routes_equal_searched_ones_with_oversubscription_and_partial_groups() {
        for spec in ["rail:servers=7,gpus=2,group=3,spines=2,over=3:1", "rail:servers=6,gpus=4,group=2,spines=3"] {
            same_routes_as_the_reference(&preset(spec).unwrap());
        }
    }
}

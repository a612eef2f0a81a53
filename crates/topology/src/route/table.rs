//! Routes computed once per topology and shared: a plan costs many algorithms and
//! pipeline variants over the same pairs, and a ring asks for the same pairs every
//! round. Routes live in one flat arena of links indexed by (source, destination);
//! nothing per route is allocated.

use rustc_hash::FxHashMap;

use super::search::{Adjacency, Search};
use super::symmetry::ServerSymmetry;
use super::width::WidthIndex;
use super::Route;
use crate::error::TopologyError;
use crate::graph::{DeviceId, LinkId, Topology};

#[derive(Debug, Clone, Copy)]
struct Entry {
    start: usize,
    len: usize,
    bottleneck_bytes_per_sec: f64,
    hops: usize,
}

impl Entry {
    fn found(self) -> Found {
        Found { held: Some((self.start, self.len)), width: self.bottleneck_bytes_per_sec, hops: self.hops }
    }
}

/// Where a route just found lies: in the arena (start, length), or in the scratch buffer.
#[derive(Debug, Clone, Copy)]
struct Found {
    held: Option<(usize, usize)>,
    width: f64,
    hops: usize,
}

/// A route held by a [`RouteTable`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RouteView<'r> {
    /// Every link the route uses, with the fraction of the bytes that cross it, in hop order.
    pub links: &'r [(LinkId, f64)],
    /// The narrowest link on every chosen path.
    pub bottleneck_bytes_per_sec: f64,
    /// Hops of each chosen path.
    pub hops: usize,
}

impl RouteView<'_> {
    pub fn to_route(self) -> Route {
        Route { links: self.links.to_vec(), bottleneck_bytes_per_sec: self.bottleneck_bytes_per_sec, hops: self.hops }
    }
}

/// Routes held at most, as links: 16 Mi entries (256 MiB). Past it routes are still
/// found, but again each time they are asked for: an all-to-all over thousands of ranks
/// asks for P² routes, which must not all stay in memory.
pub const MAX_HELD_ROUTE_LINKS: usize = 1 << 24;

/// Cells of the class-route table (4 bytes each: 64 MiB); a fabric whose servers are so
/// large that the table would pass it keeps class routes in the hash index instead.
const MAX_CLASS_TABLE: usize = 1 << 24;

/// The links of one path type (`Routing::tiers`), indexed for the width and the search
/// like the whole topology's, under their own ids.
#[derive(Debug, Clone)]
struct Tier {
    width: WidthIndex,
    adjacency: Adjacency,
}

impl Tier {
    /// None when the tier has no link, or the same links as the tier before it (or as
    /// the whole topology): searching it again would find nothing new.
    fn new(t: &Topology, classes: &[crate::graph::LinkClass], previous: Option<usize>) -> Option<(Tier, usize)> {
        let count = t.links.iter().filter(|l| classes.contains(&l.class)).count();
        if count == 0 || count == t.links.len() || previous == Some(count) {
            return None;
        }
        let adjacency = Adjacency::of_links(t, |l| classes.contains(&t.links[l].class));
        Some((Tier { width: WidthIndex::new(&adjacency), adjacency }, count))
    }
}

/// Every route asked of one topology, computed on first use and kept up to
/// [`MAX_HELD_ROUTE_LINKS`].
#[derive(Debug, Clone)]
pub struct RouteTable<'a> {
    topology: &'a Topology,
    width: WidthIndex,
    adjacency: Adjacency,
    search: Search,
    index: FxHashMap<(u32, u32), Entry>,
    links: Vec<(LinkId, f64)>,
    scratch: Vec<(LinkId, f64)>,
    /// Route classes of a fabric of identical servers (`symmetry.rs`).
    symmetry: Option<ServerSymmetry>,
    /// A route of a class, moved to the asked ends.
    moved: Vec<(LinkId, f64)>,
    /// Class routes by (place in the first server, destination): an index into
    /// `class_entries`, `u32::MAX` where none is held yet. Made on the first class route.
    class_routes: Vec<u32>,
    class_entries: Vec<Entry>,
    /// The topology's parts counted (`Hardware::of` visits every GPU's server; a
    /// layout search asks for it once per costing).
    hardware: Option<crate::Hardware>,
    /// The path types tried before the whole fabric, made on the first search.
    tiers: Option<Vec<Tier>>,
}

impl<'a> RouteTable<'a> {
    /// O(links · distinct bandwidths) to index the fabric; routes come later, on demand.
    pub fn new(topology: &'a Topology) -> Self {
        let adjacency = Adjacency::new(topology);
        RouteTable {
            topology,
            width: WidthIndex::new(&adjacency),
            adjacency,
            search: Search::new(topology.devices.len()),
            index: FxHashMap::default(),
            links: Vec::new(),
            scratch: Vec::new(),
            symmetry: ServerSymmetry::find(topology),
            moved: Vec::new(),
            class_routes: Vec::new(),
            class_entries: Vec::new(),
            hardware: None,
            tiers: None,
        }
    }

    /// Whether routes are searched once per class of pairs (see `symmetry.rs`).
    pub fn uses_route_classes(&self) -> bool {
        self.symmetry.is_some()
    }

    pub fn topology(&self) -> &'a Topology {
        self.topology
    }

    /// The topology's parts counted, once per table.
    pub fn hardware(&mut self) -> crate::Hardware {
        let topology = self.topology;
        *self.hardware.get_or_insert_with(|| crate::Hardware::of(topology))
    }

    /// Routes held so far.
    pub fn len(&self) -> usize {
        self.index.len() + self.class_entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The route from `src` to `dst`; see the `route` module for the rule. On a fabric of
    /// identical servers it is the route of the pair's class, moved onto the pair.
    pub fn get(&mut self, src: DeviceId, dst: DeviceId) -> Result<RouteView<'_>, TopologyError> {
        if src == dst {
            return Ok(RouteView { links: &[], bottleneck_bytes_per_sec: f64::INFINITY, hops: 0 });
        }
        let t = self.topology;
        let no_route = || TopologyError::NoRoute { from: t.devices[src].name.clone(), to: t.devices[dst].name.clone() };
        // The pair's class: the swaps that move it, and where they move its ends.
        let class =
            self.symmetry.as_ref().and_then(|s| s.transform(src).map(|x| (x, s.device(x, src), s.device(x, dst))));
        let Some((x, class_src, class_dst)) = class else {
            let found = self.found(src, dst).ok_or_else(no_route)?;
            return Ok(RouteView {
                links: self.links_of(found),
                bottleneck_bytes_per_sec: found.width,
                hops: found.hops,
            });
        };
        let found = self.found_in_class(class_src, class_dst).ok_or_else(no_route)?;
        let held = match found.held {
            Some((start, len)) => &self.links[start..start + len],
            None => &self.scratch[..],
        };
        self.moved.clear();
        if let Some(symmetry) = &self.symmetry {
            self.moved.extend(held.iter().map(|&(l, f)| (symmetry.link_back(x, l), f)));
        }
        Ok(RouteView { links: &self.moved, bottleneck_bytes_per_sec: found.width, hops: found.hops })
    }

    /// The links of a route `found` has just returned.
    fn links_of(&self, found: Found) -> &[(LinkId, f64)] {
        match found.held {
            Some((start, len)) => &self.links[start..start + len],
            None => &self.scratch,
        }
    }

    /// The route from `src` to `dst` (distinct), held from an earlier search or searched
    /// now (and held, up to the limit; else left in `scratch`); `None` if there is none.
    fn found(&mut self, src: DeviceId, dst: DeviceId) -> Option<Found> {
        // Device ids are below the device count, which the width index bounds far below u32::MAX.
        let key = (src as u32, dst as u32);
        if let Some(&e) = self.index.get(&key) {
            return Some(e.found());
        }
        let (found, entry) = self.search(src, dst)?;
        if let Some(entry) = entry {
            self.index.insert(key, entry);
        }
        Some(found)
    }

    /// [`Self::found`] for a class's route: its source is in the first server of its class,
    /// so the route is held in a table indexed by (source's place in that server,
    /// destination) — one look-up instead of a hash probe per transfer of an all-to-all.
    fn found_in_class(&mut self, src: DeviceId, dst: DeviceId) -> Option<Found> {
        let devices = self.topology.devices.len();
        let width = self.symmetry.as_ref().map_or(0, |s| s.devices_per_server());
        let place = self.symmetry.as_ref().and_then(|s| s.place_in_first_server(src));
        let Some(place) = place.filter(|_| width.saturating_mul(devices) <= MAX_CLASS_TABLE) else {
            return self.found(src, dst);
        };
        let slot = place * devices + dst;
        if self.class_routes.is_empty() {
            self.class_routes = vec![u32::MAX; width * devices];
        }
        if let Some(&id) = self.class_routes.get(slot).filter(|&&id| id != u32::MAX) {
            return self.class_entries.get(id as usize).map(|e| e.found());
        }
        let (found, entry) = self.search(src, dst)?;
        if let (Some(entry), Some(cell)) = (entry, self.class_routes.get_mut(slot)) {
            *cell = self.class_entries.len() as u32;
            self.class_entries.push(entry);
        }
        Some(found)
    }

    /// Search the route from `src` to `dst`, and hold its links in the arena if there is
    /// room (the entry to index it by), else leave them in `scratch`.
    fn search(&mut self, src: DeviceId, dst: DeviceId) -> Option<(Found, Option<Entry>)> {
        let t = self.topology;
        let tiers = self.tiers.get_or_insert_with(|| {
            let mut tiers = Vec::new();
            let mut previous = None;
            for classes in t.routing.tiers() {
                if let Some((tier, count)) = Tier::new(t, classes, previous) {
                    tiers.push(tier);
                    previous = Some(count);
                }
            }
            tiers
        });
        // The closest path type that joins the pair, the widest paths within it.
        let (adjacency, width) = tiers
            .iter()
            .find_map(|tier| tier.width.width(&tier.adjacency, src, dst).map(|w| (&tier.adjacency, w)))
            .or_else(|| self.width.width(&self.adjacency, src, dst).map(|w| (&self.adjacency, w)))?;
        let hops = self.search.links(adjacency, src, dst, width, &mut self.scratch)?;
        if self.links.len() + self.scratch.len() > MAX_HELD_ROUTE_LINKS {
            return Some((Found { held: None, width, hops }, None));
        }
        let entry = Entry { start: self.links.len(), len: self.scratch.len(), bottleneck_bytes_per_sec: width, hops };
        self.links.extend_from_slice(&self.scratch);
        Some((entry.found(), Some(entry)))
    }

    /// Whether `dst` can be reached from `src` (the width search alone; nothing is kept).
    pub fn reachable(&self, src: DeviceId, dst: DeviceId) -> Result<(), TopologyError> {
        let t = self.topology;
        if src == dst || self.width.width(&self.adjacency, src, dst).is_some() {
            Ok(())
        } else {
            Err(TopologyError::NoRoute { from: t.devices[src].name.clone(), to: t.devices[dst].name.clone() })
        }
    }

    /// Whether every one of `ends` reaches every other: through one component of the
    /// fabric they all enter and leave when there is one (O(ends)), else pair by pair.
    pub fn all_reachable(&self, ends: &[DeviceId]) -> Result<(), TopologyError> {
        if self.width.one_component_joins(&self.adjacency, ends) {
            return Ok(());
        }
        for &a in ends {
            for &b in ends {
                self.reachable(a, b)?;
            }
        }
        Ok(())
    }

    /// One concrete path of the route: at every ECMP split, the lowest-numbered link.
    /// Used where traffic cannot be split, e.g. the tree of an in-network reduction.
    pub fn primary_path(&mut self, src: DeviceId, dst: DeviceId) -> Result<Vec<LinkId>, TopologyError> {
        let t = self.topology;
        let route = self.get(src, dst)?;
        let mut path = Vec::with_capacity(route.hops);
        let mut at = src;
        while at != dst {
            let next =
                route.links.iter().map(|&(l, _)| l).filter(|&l| t.links[l].from == at).min().ok_or_else(|| {
                    TopologyError::NoRoute { from: t.devices[src].name.clone(), to: t.devices[dst].name.clone() }
                })?;
            path.push(next);
            at = t.links[next].to;
        }
        Ok(path)
    }
}

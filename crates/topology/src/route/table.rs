//! Routes computed once per topology and shared: a plan costs many algorithms and
//! pipeline variants over the same pairs, and a ring asks for the same pairs every
//! round. Routes live in one flat arena of links indexed by (source, destination);
//! nothing per route is allocated.

use rustc_hash::FxHashMap;

use super::search::{Adjacency, Search};
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
}

impl<'a> RouteTable<'a> {
    /// O(links · distinct bandwidths) to index the fabric; routes come later, on demand.
    pub fn new(topology: &'a Topology) -> Self {
        RouteTable {
            topology,
            width: WidthIndex::new(topology),
            adjacency: Adjacency::new(topology),
            search: Search::new(topology.devices.len()),
            index: FxHashMap::default(),
            links: Vec::new(),
            scratch: Vec::new(),
        }
    }

    pub fn topology(&self) -> &'a Topology {
        self.topology
    }

    /// Routes held so far.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The route from `src` to `dst`; see the `route` module for the rule.
    pub fn get(&mut self, src: DeviceId, dst: DeviceId) -> Result<RouteView<'_>, TopologyError> {
        let t = self.topology;
        if src == dst {
            return Ok(RouteView { links: &[], bottleneck_bytes_per_sec: f64::INFINITY, hops: 0 });
        }
        // Device ids are below the device count, which the width index bounds far below u32::MAX.
        let key = (src as u32, dst as u32);
        if let Some(&entry) = self.index.get(&key) {
            return Ok(RouteView {
                links: &self.links[entry.start..entry.start + entry.len],
                bottleneck_bytes_per_sec: entry.bottleneck_bytes_per_sec,
                hops: entry.hops,
            });
        }
        let no_route = || TopologyError::NoRoute { from: t.devices[src].name.clone(), to: t.devices[dst].name.clone() };
        let width = self.width.width(t, src, dst).ok_or_else(no_route)?;
        let hops = self.search.links(&self.adjacency, src, dst, width, &mut self.scratch).ok_or_else(no_route)?;
        if self.links.len() + self.scratch.len() > MAX_HELD_ROUTE_LINKS {
            return Ok(RouteView { links: &self.scratch, bottleneck_bytes_per_sec: width, hops });
        }
        let entry = Entry { start: self.links.len(), len: self.scratch.len(), bottleneck_bytes_per_sec: width, hops };
        self.links.extend_from_slice(&self.scratch);
        self.index.insert(key, entry);
        Ok(RouteView {
            links: &self.links[entry.start..entry.start + entry.len],
            bottleneck_bytes_per_sec: width,
            hops,
        })
    }

    /// Whether `dst` can be reached from `src` (the width search alone; nothing is kept).
    pub fn reachable(&self, src: DeviceId, dst: DeviceId) -> Result<(), TopologyError> {
        let t = self.topology;
        if src == dst || self.width.width(t, src, dst).is_some() {
            Ok(())
        } else {
            Err(TopologyError::NoRoute { from: t.devices[src].name.clone(), to: t.devices[dst].name.clone() })
        }
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

//! Which resources a flow crosses, with the fraction of its rate on each.
//!
//! `Split` spreads a route's bytes over its equal-cost paths as the per-round model does
//! (every hop splits equally over its next hops) — the fluid limit of per-packet
//! spraying. `Ecmp` puts each flow on one path, chosen at every split by a hash of the
//! connection (job, ranks, channel) and a seed, as switches hashing a 5-tuple do (seed 001
//! §7.5.3): two flows can collide on one uplink while another idles.

use railyard_topology::{DeviceId, LinkId, Resource, RouteTable, Topology};
use serde::Serialize;

use crate::error::SimError;

/// How a flow's bytes use a route with several equal-cost paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Paths {
    /// Every path carries an equal share at every split (per-packet spraying, fluid).
    Split,
    /// One path per flow, picked by a seeded hash of the connection.
    Ecmp { seed: u64 },
}

impl Paths {
    pub fn describe(self) -> String {
        match self {
            Paths::Split => "split over equal-cost paths (spraying)".to_string(),
            Paths::Ecmp { seed } => format!("one ECMP path per connection (hash seed {seed})"),
        }
    }
}

/// The identity a switch hashes: the same connection always takes the same path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Connection {
    pub job: u32,
    pub from: u32,
    pub to: u32,
    pub channel: u32,
}

/// splitmix64: a fixed, well-mixed hash (the runs must not depend on std's random keys).
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Adds `fraction` of a flow's rate on `link` to `out`: the link's own resource and the
/// shared interfaces it draws from.
fn add_link(topology: &Topology, link: LinkId, fraction: f64, out: &mut Vec<(u32, f64)>) {
    let mut add = |resource: Resource| {
        let index = topology.resource_index(resource) as u32;
        match out.iter_mut().find(|(r, _)| *r == index) {
            Some((_, f)) => *f += fraction,
            None => out.push((index, fraction)),
        }
    };
    add(Resource::Link(link));
    for u in &topology.links[link].interfaces {
        add(Resource::Interface { interface: u.interface, reverse: u.reverse });
    }
}

/// How a flow's bytes are late: its last byte's latency (the slowest of the paths it
/// uses, summing each path's link latencies; the model leaves latency out and the
/// seeds' presets have none), and the slowest path's lead over the mean path. Bytes
/// sprayed at rate R arrive on faster paths ahead of the slower ones; the receiver
/// holds R × spread of them to deliver in order (seed 001 §7.5.3's reorder buffer).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Lateness {
    pub last_byte_secs: f64,
    pub spread_secs: f64,
}

/// The resources of a transfer from `src` to `dst`, written to `out` (cleared first),
/// and how late its bytes are.
pub fn flow_resources(
    routes: &mut RouteTable,
    paths: Paths,
    connection: Connection,
    src: DeviceId,
    dst: DeviceId,
    out: &mut Vec<(u32, f64)>,
) -> Result<Lateness, SimError> {
    out.clear();
    let topology = routes.topology();
    let route = routes.get(src, dst)?;
    match paths {
        Paths::Split => {
            for &(link, fraction) in route.links {
                add_link(topology, link, fraction, out);
            }
            if route.links.iter().all(|&(l, _)| topology.links[l].latency_secs == 0.0) {
                return Ok(Lateness::default());
            }
            // The slowest and the mean path through the route's links (a DAG from src
            // whose paths all have the fewest hops, so breadth-first order is
            // topological); every hop splits its bytes equally over its next hops.
            let mut slowest: Vec<(usize, f64, f64)> = vec![(dst, 0.0, 0.0)];
            let mut order: Vec<usize> = vec![src];
            let mut i = 0;
            while i < order.len() {
                let at = order[i];
                i += 1;
                for &(l, _) in route.links {
                    let to = topology.links[l].to;
                    if topology.links[l].from == at && !order.contains(&to) {
                        order.push(to);
                    }
                }
            }
            for &at in order.iter().rev() {
                if at == dst {
                    continue;
                }
                let next: Vec<(f64, f64)> = route
                    .links
                    .iter()
                    .filter(|&&(l, _)| topology.links[l].from == at)
                    .filter_map(|&(l, _)| {
                        let to = topology.links[l].to;
                        let lat = topology.links[l].latency_secs;
                        slowest.iter().find(|(d, _, _)| *d == to).map(|&(_, worst, mean)| (worst + lat, mean + lat))
                    })
                    .collect();
                let worst = next.iter().map(|n| n.0).fold(0.0f64, f64::max);
                let mean =
                    if next.is_empty() { 0.0 } else { next.iter().map(|n| n.1).sum::<f64>() / next.len() as f64 };
                slowest.push((at, worst, mean));
            }
            let (worst, mean) = slowest.iter().find(|(d, _, _)| *d == src).map_or((0.0, 0.0), |&(_, w, m)| (w, m));
            Ok(Lateness { last_byte_secs: worst, spread_secs: (worst - mean).max(0.0) })
        }
        Paths::Ecmp { seed } => {
            let path = ecmp_path(routes, seed, connection, src, dst)?;
            let mut latency = 0.0;
            for &l in &path {
                add_link(topology, l, 1.0, out);
                latency += topology.links[l].latency_secs;
            }
            // One path: bytes arrive in order.
            Ok(Lateness { last_byte_secs: latency, spread_secs: 0.0 })
        }
    }
}

/// The one path a connection hashes onto: from the source, at every split, the next
/// hop picked by a hash of the connection and the seed.
pub fn ecmp_path(
    routes: &mut RouteTable,
    seed: u64,
    connection: Connection,
    src: DeviceId,
    dst: DeviceId,
) -> Result<Vec<LinkId>, SimError> {
    let topology = routes.topology();
    let route = routes.get(src, dst)?;
    let key = mix(seed
        ^ mix(u64::from(connection.job) << 32 | u64::from(connection.channel))
        ^ mix(u64::from(connection.from) << 32 | u64::from(connection.to)));
    let mut at = src;
    let mut path = Vec::new();
    let mut hop = 0u64;
    while at != dst {
        let next: Vec<LinkId> = route.links.iter().map(|&(l, _)| l).filter(|&l| topology.links[l].from == at).collect();
        if next.is_empty() || hop > route.links.len() as u64 {
            return Err(SimError::BrokenRoute {
                from: topology.devices[src].name.clone(),
                to: topology.devices[dst].name.clone(),
            });
        }
        let pick = next[(mix(key ^ hop) % next.len() as u64) as usize];
        path.push(pick);
        at = topology.links[pick].to;
        hop += 1;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_topology::presets::preset;

    #[test]
    fn ecmp_takes_one_path_and_split_takes_them_all() {
        let t = preset("hgx-h100x2").unwrap();
        let mut routes = RouteTable::new(&t);
        let (a, b) = (t.device_id("A.gpu7").unwrap(), t.device_id("B.gpu0").unwrap());
        let c = Connection { job: 0, from: 7, to: 8, channel: 0 };
        let mut split = Vec::new();
        flow_resources(&mut routes, Paths::Split, c, a, b, &mut split).unwrap();
        let fractions: f64 = split.iter().map(|(_, f)| f).sum();
        let mut one = Vec::new();
        flow_resources(&mut routes, Paths::Ecmp { seed: 1 }, c, a, b, &mut one).unwrap();
        assert!(one.iter().all(|&(_, f)| f == 1.0));
        assert!(one.len() < split.len(), "{one:?} vs {split:?}");
        // Every resource of the one path is on the split route, and the split route's
        // fractions add to as much per hop as the one path's.
        assert!(one.iter().all(|(r, _)| split.iter().any(|(s, _)| s == r)));
        assert!((fractions - one.len() as f64).abs() < 1e-9);
        // Seeds spread connections over both spines.
        let spines: std::collections::BTreeSet<Vec<u32>> = (0..32)
            .map(|seed| {
                let mut v = Vec::new();
                flow_resources(&mut routes, Paths::Ecmp { seed }, c, a, b, &mut v).unwrap();
                v.into_iter().map(|(r, _)| r).collect()
            })
            .collect();
        assert_eq!(spines.len(), 2);
    }
}

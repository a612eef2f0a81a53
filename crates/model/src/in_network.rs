//! Where the bytes of an in-network reduction go (seed 001 §7.2.1, footnote 35): every
//! participant sends its shard up a tree to one aggregation switch and receives the
//! result once. A reduction-capable switch on the way merges the streams below it, so
//! a link carries one shard per distinct stream that reaches it; the multicast back
//! replicates at switches, so each link of the down tree carries the result once.

use std::collections::{BTreeMap, BTreeSet};

use railyard_schedule::Rank;
use railyard_topology::{DeviceId, DeviceKind, LinkId, Placement, RouteTable, Topology};
use rustc_hash::FxHashMap;

use crate::error::ModelError;

/// For every link of one in-network reduction over `devices`, how many shards cross it
/// (streams up to the aggregation switch, then one copy of the result down).
fn link_streams(routes: &mut RouteTable, devices: &[DeviceId]) -> Result<Vec<(LinkId, usize)>, ModelError> {
    let topology = routes.topology();
    let aggregator = aggregation_switch(topology, devices)?;
    let mut streams: BTreeMap<LinkId, BTreeSet<DeviceId>> = BTreeMap::new();
    let mut down: BTreeSet<LinkId> = BTreeSet::new();
    for &device in devices {
        let mut origin = device;
        for link in routes.primary_path(device, aggregator)? {
            streams.entry(link).or_default().insert(origin);
            let to = topology.links[link].to;
            if topology.devices[to].in_network_reduction {
                origin = to;
            }
        }
        down.extend(routes.primary_path(aggregator, device)?);
    }
    let mut loads: Vec<(LinkId, usize)> = streams.into_iter().map(|(l, s)| (l, s.len())).collect();
    loads.extend(down.into_iter().map(|l| (l, 1)));
    Ok(loads)
}

/// The link streams of each set of ranks an in-network step reduces over, found once:
/// the steps of every round and channel repeat the same few sets.
#[derive(Debug, Default)]
pub(crate) struct InNetworkCache {
    by_ranks: FxHashMap<Vec<Rank>, Vec<(LinkId, usize)>>,
}

impl InNetworkCache {
    pub(crate) fn get(
        &mut self,
        routes: &mut RouteTable,
        placement: &Placement,
        ranks: &[Rank],
    ) -> Result<&[(LinkId, usize)], ModelError> {
        if !self.by_ranks.contains_key(ranks) {
            let devices: Vec<DeviceId> = ranks.iter().map(|&r| placement.devices[r]).collect();
            let streams = link_streams(routes, &devices)?;
            self.by_ranks.insert(ranks.to_vec(), streams);
        }
        Ok(&self.by_ranks[ranks])
    }
}

/// The reduction-capable switch nearest to all participants (smallest largest hop
/// count; ties go to the first declared).
pub fn aggregation_switch(topology: &Topology, devices: &[DeviceId]) -> Result<DeviceId, ModelError> {
    let distances: Vec<Vec<usize>> = devices.iter().map(|&d| topology.hops_from(d)).collect();
    (0..topology.devices.len())
        .filter(|&s| topology.devices[s].kind == DeviceKind::Switch && topology.devices[s].in_network_reduction)
        .filter_map(|s| {
            let worst = distances.iter().map(|d| d[s]).max().unwrap_or(0);
            (worst != usize::MAX).then_some((worst, s))
        })
        .min()
        .map(|(_, s)| s)
        .ok_or_else(|| ModelError::NoReductionSwitch {
            devices: devices.iter().map(|&d| topology.devices[d].name.clone()).collect(),
        })
}

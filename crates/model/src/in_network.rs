//! Where the bytes of an in-network reduction go (seed 001 §7.2.1, footnote 35): every
//! participant sends its shard up a tree to one aggregation switch and receives the
//! result once. A reduction-capable switch on the way merges the streams below it, so
//! a link carries one shard per distinct stream that reaches it; the multicast back
//! replicates at switches, so each link of the down tree carries the result once.

use std::collections::{BTreeMap, BTreeSet};

use railyard_topology::{DeviceId, DeviceKind, LinkId, Topology};

use crate::error::ModelError;

/// Bytes per link of one in-network reduction of `bytes` over `devices`.
pub fn in_network_link_bytes(
    topology: &Topology,
    devices: &[DeviceId],
    bytes: f64,
) -> Result<Vec<(LinkId, f64)>, ModelError> {
    let aggregator = aggregation_switch(topology, devices)?;
    let mut streams: BTreeMap<LinkId, BTreeSet<DeviceId>> = BTreeMap::new();
    let mut down: BTreeSet<LinkId> = BTreeSet::new();
    for &device in devices {
        let mut origin = device;
        for link in topology.primary_path(device, aggregator)? {
            streams.entry(link).or_default().insert(origin);
            let to = topology.links[link].to;
            if topology.devices[to].in_network_reduction {
                origin = to;
            }
        }
        down.extend(topology.primary_path(aggregator, device)?);
    }
    let mut loads: Vec<(LinkId, f64)> = streams.into_iter().map(|(l, s)| (l, s.len() as f64 * bytes)).collect();
    loads.extend(down.into_iter().map(|l| (l, bytes)));
    Ok(loads)
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

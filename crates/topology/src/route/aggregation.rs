//! Where the bytes of an in-network reduction go (seed 001 §7.2.1, footnote 35): every
//! participant sends its shard up a tree to one aggregation switch and receives the
//! result once. A reduction-capable switch on the way merges the streams below it, so
//! a link carries one shard per distinct stream that reaches it; the multicast back
//! replicates at switches, so each link of the down tree carries the result once.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;

use crate::error::TopologyError;
use crate::graph::{DeviceId, DeviceKind, LinkId, Topology};
use crate::route::RouteTable;

/// For every link of one in-network step among `devices`, how many streams cross it:
/// one from each of `senders` up to the aggregation switch (merged where a switch on
/// the way reduces), then one copy of the result down to each of `receivers`. An
/// all-reduce sends and receives at every device; NVLS's reduce-scatter receives at one,
/// its all-gather sends from one.
pub fn in_network_link_streams(
    routes: &mut RouteTable,
    devices: &[DeviceId],
    senders: &[DeviceId],
    receivers: &[DeviceId],
) -> Result<Vec<(LinkId, usize)>, TopologyError> {
    let topology = routes.topology();
    let aggregator = aggregation_switch(topology, devices)?;
    let mut streams: BTreeMap<LinkId, BTreeSet<DeviceId>> = BTreeMap::new();
    let mut down: BTreeSet<LinkId> = BTreeSet::new();
    for &device in senders {
        let mut origin = device;
        for link in routes.primary_path(device, aggregator)? {
            streams.entry(link).or_default().insert(origin);
            let to = topology.links[link].to;
            if topology.devices[to].in_network_reduction {
                origin = to;
            }
        }
    }
    for &device in receivers {
        down.extend(routes.primary_path(aggregator, device)?);
    }
    let mut loads: Vec<(LinkId, usize)> = streams.into_iter().map(|(l, s)| (l, s.len())).collect();
    loads.extend(down.into_iter().map(|l| (l, 1)));
    Ok(loads)
}

/// Whether device `s` is a switch that reduces: a network switch with SHARP or an
/// NVSwitch with NVLS.
fn reduces(topology: &Topology, s: DeviceId) -> bool {
    let d = &topology.devices[s];
    matches!(d.kind, DeviceKind::Switch | DeviceKind::NvSwitch) && d.in_network_reduction
}

/// The reduction-capable switch nearest to all participants (smallest largest hop
/// count; ties go to the first declared).
///
/// A hop search from every participant costs participants × fabric (16,384 GPUs of one
/// rail at 131,072 GPUs: minutes). Instead a few spread participants give every switch
/// a lower bound on its largest hop count; switches are then measured exactly (one
/// backward search each) in order of that bound, until the bound of the next cannot
/// beat the best found.
pub fn aggregation_switch(topology: &Topology, devices: &[DeviceId]) -> Result<DeviceId, TopologyError> {
    // No switch reduces: nothing to search for.
    if !(0..topology.devices.len()).any(|s| reduces(topology, s)) {
        return Err(TopologyError::NoReductionSwitch);
    }
    let name = |d: Option<&DeviceId>| d.map(|&d| topology.devices[d].name.clone()).unwrap_or_default();
    let none = || TopologyError::NoReductionSwitchReaches {
        devices: devices.len(),
        first: name(devices.first()),
        last: name(devices.last()),
    };
    let n = devices.len();
    let mut samples: Vec<DeviceId> = [0, n / 3, n / 2, (2 * n) / 3, n.saturating_sub(1)]
        .into_iter()
        .filter(|&i| i < n)
        .map(|i| devices[i])
        .collect();
    samples.dedup();
    // Searched within 2, 4, 8, … hops: every switch whose largest hop count is within
    // the limit is found within it, so the first limit that finds one gives the answer
    // of the unlimited search, and participants of one server (NVLS on its NVSwitch)
    // never search the whole fabric.
    let mut limit = 2;
    loop {
        if let Some(s) = nearest_within(topology, devices, &samples, limit) {
            return Ok(s);
        }
        if limit >= topology.devices.len() {
            return Err(none());
        }
        limit = limit.saturating_mul(2);
    }
}

/// The reduction-capable switch with the smallest largest hop count (ties to the first
/// declared) among those within `limit` hops of every participant. The searches are
/// maps of what they reach, so a search inside one server costs that server, not the
/// fabric.
fn nearest_within(topology: &Topology, devices: &[DeviceId], samples: &[DeviceId], limit: usize) -> Option<DeviceId> {
    let sampled: Vec<FxHashMap<DeviceId, usize>> =
        samples.iter().map(|&d| topology.hops_near(d, false, limit)).collect();
    let bound = |s: DeviceId| sampled.iter().map(|d| d.get(&s).copied().unwrap_or(usize::MAX)).max().unwrap_or(0);
    // A switch within the limit of every sample is within it of the first; with no
    // sample every switch is a candidate.
    let switches: Vec<DeviceId> = match sampled.first() {
        Some(first) => first.keys().copied().collect(),
        None => (0..topology.devices.len()).collect(),
    };
    let mut candidates: Vec<(usize, DeviceId)> = switches
        .into_iter()
        .filter(|&s| reduces(topology, s))
        .map(|s| (bound(s), s))
        .filter(|&(b, _)| b <= limit)
        .collect();
    candidates.sort_unstable();
    let mut best: Option<(usize, DeviceId)> = None;
    for (bound, s) in candidates {
        if best.is_some_and(|b| (bound, s) > b) {
            break;
        }
        let to_s = topology.hops_near(s, true, limit);
        let worst = devices.iter().map(|d| to_s.get(d).copied().unwrap_or(usize::MAX)).max().unwrap_or(0);
        if worst <= limit && best.is_none_or(|b| (worst, s) < b) {
            best = Some((worst, s));
        }
    }
    best.map(|(_, s)| s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::preset;

    /// The pruned search picks what the definition says: the smallest largest hop count
    /// over every reduction-capable switch, ties to the first declared.
    #[test]
    fn the_aggregation_switch_is_the_brute_force_minimum() {
        for spec in ["hgx-h100x2", "rail:servers=6,gpus=4,group=2,spines=3", "rail:servers=9,gpus=2,group=4"] {
            let t = preset(spec).unwrap();
            let gpus = t.gpus();
            let sets: Vec<Vec<DeviceId>> = vec![
                gpus.clone(),
                gpus.iter().copied().step_by(2).collect(),
                gpus.iter().copied().skip(1).step_by(3).collect(),
                gpus[..2].to_vec(),
                gpus[gpus.len() - 1..].to_vec(),
            ];
            for devices in sets {
                let distances: Vec<Vec<usize>> = devices.iter().map(|&d| t.hops_from(d)).collect();
                let brute = (0..t.devices.len())
                    .filter(|&s| reduces(&t, s))
                    .filter_map(|s| {
                        let worst = distances.iter().map(|d| d[s]).max().unwrap_or(0);
                        (worst != usize::MAX).then_some((worst, s))
                    })
                    .min()
                    .map(|(_, s)| s);
                assert_eq!(aggregation_switch(&t, &devices).ok(), brute, "{spec} {devices:?}");
            }
        }
    }
}

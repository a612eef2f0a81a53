//! Which GPU each rank runs on (seed 001 §7.2.1: ranks 0–7 on server A, 8–15 on B;
//! §7.2.5: rail alignment depends only on each rank's index inside its server).

use std::str::FromStr;

use crate::error::TopologyError;
use crate::graph::{check_ranks, DeviceId, Topology};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementPolicy {
    /// Fill server by server: ranks 0..g-1 on the first server, and so on.
    Contiguous,
    /// Round-robin over servers: rank r on server r mod S.
    Interleaved,
    /// Server by server, and inside a server in rail order (rank i of every server on rail i).
    RailAligned,
    /// Explicit device names, one per rank.
    Explicit(Vec<String>),
}

impl FromStr for PlacementPolicy {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "contiguous" => Ok(PlacementPolicy::Contiguous),
            "interleaved" => Ok(PlacementPolicy::Interleaved),
            "rail-aligned" => Ok(PlacementPolicy::RailAligned),
            other => match other.strip_prefix("list:") {
                Some(list) => Ok(PlacementPolicy::Explicit(list.split(',').map(|s| s.trim().to_string()).collect())),
                None => Err(format!(
                    "unknown placement \"{other}\" (expected contiguous, interleaved, rail-aligned or list:DEV,DEV,...)"
                )),
            },
        }
    }
}

/// Rank -> GPU device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub devices: Vec<DeviceId>,
}

impl Placement {
    /// Place `ranks` ranks (all GPUs of the default order when `None`).
    pub fn new(
        topology: &Topology,
        policy: &PlacementPolicy,
        ranks: Option<usize>,
    ) -> Result<Placement, TopologyError> {
        let base = &topology.default_ranks;
        if base.is_empty() {
            return Err(TopologyError::NoGpus);
        }
        let order: Vec<DeviceId> = match policy {
            PlacementPolicy::Contiguous => base.clone(),
            PlacementPolicy::Interleaved => {
                let groups = group_by_server(topology, base.iter().map(|&d| (d, d)));
                let longest = groups.iter().map(Vec::len).max().unwrap_or(0);
                (0..longest).flat_map(|i| groups.iter().filter_map(move |g| g.get(i).copied())).collect()
            }
            PlacementPolicy::RailAligned => {
                let mut groups = group_by_server(topology, base.iter().map(|&d| (d, d)));
                for g in &mut groups {
                    // Stable: GPUs without a rail keep their order after the railed ones.
                    g.sort_by_key(|&d| topology.devices[d].rail.unwrap_or(u32::MAX));
                }
                groups.concat()
            }
            PlacementPolicy::Explicit(names) => {
                let mut devices = Vec::with_capacity(names.len());
                for (rank, name) in names.iter().enumerate() {
                    let field = format!("placement rank {rank}");
                    let id = topology
                        .device_id(name)
                        .ok_or_else(|| TopologyError::UnknownDevice { field: field.clone(), name: name.clone() })?;
                    devices.push(id);
                }
                devices
            }
        };
        let wanted = ranks.unwrap_or(order.len());
        // A list names every rank's GPU: as many as the ranks, no more and no fewer.
        if let (PlacementPolicy::Explicit(names), Some(r)) = (policy, ranks) {
            if names.len() != r {
                return Err(TopologyError::Invalid {
                    field: "list".into(),
                    message: format!("names {} GPUs for {r} ranks: one GPU per rank", names.len()),
                });
            }
        }
        if wanted > order.len() {
            return Err(TopologyError::NotEnoughGpus { wanted, available: order.len() });
        }
        let placement = Placement { devices: order[..wanted].to_vec() };
        placement.validate(topology)?;
        Ok(placement)
    }

    pub fn validate(&self, topology: &Topology) -> Result<(), TopologyError> {
        check_ranks(&topology.devices, &self.devices, "placement")
    }

    pub fn len(&self) -> usize {
        self.devices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// Ranks grouped by server, servers in order of their lowest rank, ranks ascending.
    pub fn ranks_by_server(&self, topology: &Topology) -> Vec<Vec<usize>> {
        group_by_server(topology, self.devices.iter().copied().enumerate())
    }
}

/// Items grouped by the server of their device, servers in order of first appearance.
fn group_by_server<T>(topology: &Topology, items: impl IntoIterator<Item = (T, DeviceId)>) -> Vec<Vec<T>> {
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut groups: Vec<Vec<T>> = Vec::new();
    for (item, device) in items {
        let i = *index.entry(topology.server_of(device)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(item);
    }
    groups
}

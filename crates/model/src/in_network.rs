//! The link streams of in-network reductions, found once per set of ranks (the
//! streams themselves: `railyard_topology::route::in_network_link_streams`).

use railyard_schedule::{Flow, InNetwork, Rank};
use railyard_topology::route::in_network_link_streams;
use railyard_topology::{DeviceId, LinkId, Placement, RouteTable};
use rustc_hash::FxHashMap;

use crate::error::ModelError;

/// The link streams of each in-network step's ranks and flow, found once: the steps of
/// every round and channel repeat the same few. Looked up by the step's own rank list,
/// so a hit allocates nothing (1,024 servers' NVLS steps, every pipeline chunk).
#[derive(Debug, Default)]
pub(crate) struct InNetworkCache {
    by_step: FxHashMap<Flow, FxHashMap<Box<[Rank]>, Streams>>,
}

/// The number of streams on each link an in-network step crosses.
type Streams = Vec<(LinkId, usize)>;

impl InNetworkCache {
    pub(crate) fn get(
        &mut self,
        routes: &mut RouteTable,
        placement: &Placement,
        step: &InNetwork,
    ) -> Result<&[(LinkId, usize)], ModelError> {
        let by_ranks = self.by_step.entry(step.flow).or_default();
        if !by_ranks.contains_key(step.ranks.as_slice()) {
            let device = |r: Rank| placement.devices[r];
            let devices: Vec<DeviceId> = step.ranks.iter().map(|&r| device(r)).collect();
            let senders: Vec<DeviceId> = step.senders().map(device).collect();
            let receivers: Vec<DeviceId> = step.receivers().map(device).collect();
            let streams = in_network_link_streams(routes, &devices, &senders, &receivers)?;
            by_ranks.insert(step.ranks.clone().into_boxed_slice(), streams);
        }
        Ok(&by_ranks[step.ranks.as_slice()])
    }
}

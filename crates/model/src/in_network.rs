//! The link streams of in-network reductions, found once per set of ranks (the
//! streams themselves: `railyard_topology::route::in_network_link_streams`).

use railyard_schedule::Rank;
use railyard_topology::route::in_network_link_streams;
use railyard_topology::{DeviceId, LinkId, Placement, RouteTable};
use rustc_hash::FxHashMap;

use crate::error::ModelError;

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
            let streams = in_network_link_streams(routes, &devices)?;
            self.by_ranks.insert(ranks.to_vec(), streams);
        }
        Ok(&self.by_ranks[ranks])
    }
}

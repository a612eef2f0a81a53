//! The link streams of in-network reductions, found once per set of ranks (the
//! streams themselves: `railyard_topology::route::in_network_link_streams`).

use railyard_schedule::{Flow, InNetwork, Rank};
use railyard_topology::route::in_network_link_streams;
use railyard_topology::{DeviceId, LinkId, Placement, RouteTable};
use rustc_hash::FxHashMap;

use crate::error::ModelError;

/// The link streams of each in-network step's ranks and flow, found once: the steps of
/// every round and channel repeat the same few.
#[derive(Debug, Default)]
pub(crate) struct InNetworkCache {
    by_step: FxHashMap<StepKey, Vec<(LinkId, usize)>>,
}

/// An in-network step's ranks and who sends and receives: what its streams depend on.
type StepKey = (Vec<Rank>, Flow);

impl InNetworkCache {
    pub(crate) fn get(
        &mut self,
        routes: &mut RouteTable,
        placement: &Placement,
        step: &InNetwork,
    ) -> Result<&[(LinkId, usize)], ModelError> {
        let key = (step.ranks.clone(), step.flow);
        if !self.by_step.contains_key(&key) {
            let device = |r: Rank| placement.devices[r];
            let devices: Vec<DeviceId> = step.ranks.iter().map(|&r| device(r)).collect();
            let senders: Vec<DeviceId> = step.senders().map(device).collect();
            let receivers: Vec<DeviceId> = step.receivers().map(device).collect();
            let streams = in_network_link_streams(routes, &devices, &senders, &receivers)?;
            self.by_step.insert(key.clone(), streams);
        }
        Ok(&self.by_step[&key])
    }
}

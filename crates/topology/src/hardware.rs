//! What a topology is built of, counted: the parts a cluster's cost follows (GPUs,
//! network ports, switches). A sweep compares fabrics by these against time.

use serde::Serialize;

use crate::graph::Topology;
use crate::kinds::DeviceKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Hardware {
    pub gpus: usize,
    /// Servers that hold a GPU.
    pub servers: usize,
    /// Network ports (NCCL's net devices).
    pub nics: usize,
    /// Network switches, every tier.
    pub switches: usize,
    pub nvswitches: usize,
    pub pcie_switches: usize,
}

impl Hardware {
    pub fn of(topology: &Topology) -> Hardware {
        let mut h = Hardware { servers: topology.gpu_servers(), ..Hardware::default() };
        for d in &topology.devices {
            match d.kind {
                DeviceKind::Gpu => h.gpus += 1,
                DeviceKind::Nic => h.nics += 1,
                DeviceKind::Switch => h.switches += 1,
                DeviceKind::NvSwitch => h.nvswitches += 1,
                DeviceKind::PcieSwitch => h.pcie_switches += 1,
                DeviceKind::Cpu => {}
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rail_fabric_counts_its_parts() {
        let t = crate::load("rail:servers=4").unwrap();
        let h = Hardware::of(&t);
        assert_eq!((h.gpus, h.servers, h.nics), (32, 4, 32));
        assert!(h.switches >= 8, "{h:?}");
    }
}

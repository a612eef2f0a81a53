//! Kinds of device and of link: how reports name them in words, how routes may pass
//! through them, and which rates and latencies of `achievable` apply to a link.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceKind {
    Gpu,
    /// Host CPU / PCIe root complex: forwards PCIe traffic, hosts no rank here.
    Cpu,
    PcieSwitch,
    /// One network port (what NCCL calls a net device); a multi-port card is several
    /// `Nic` devices whose PCIe links share the card's slot interface.
    Nic,
    /// Written "nvswitch" as `topo show` prints it and the file format documents it;
    /// "nv-switch" (what files were written with before) is read too.
    #[serde(rename = "nvswitch", alias = "nv-switch")]
    NvSwitch,
    /// A network switch; `tier` 1 = leaf, 2 = spine, 3 = core.
    Switch,
}

impl DeviceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Gpu => "gpu",
            DeviceKind::Cpu => "cpu",
            DeviceKind::PcieSwitch => "pcie-switch",
            DeviceKind::Nic => "nic",
            DeviceKind::NvSwitch => "nvswitch",
            DeviceKind::Switch => "switch",
        }
    }

    /// GPUs are endpoints: a route may start or end at one but never pass through it.
    pub fn forwards(self) -> bool {
        self != DeviceKind::Gpu
    }
}

/// What kind of hardware a link is; used to name bottlenecks in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkClass {
    Nvlink,
    Pcie,
    /// A NIC port's wire to its switch (either direction).
    Nic,
    /// Switch to switch.
    Fabric,
    /// A process's path to its host's shared memory (a topology `railyard calibrate`
    /// measured); never derived from device kinds, only stated.
    Memory,
    Other,
}

impl LinkClass {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkClass::Nvlink => "nvlink",
            LinkClass::Pcie => "pcie",
            LinkClass::Nic => "nic",
            LinkClass::Fabric => "fabric",
            LinkClass::Memory => "memory",
            LinkClass::Other => "other",
        }
    }

    /// A reasonable class for a link between two kinds of device.
    pub fn between(a: DeviceKind, b: DeviceKind) -> LinkClass {
        use DeviceKind::*;
        match (a, b) {
            // A NIC's wire, to a switch or cabled straight to another NIC, is network.
            (Nic, Switch) | (Switch, Nic) | (Nic, Nic) => LinkClass::Nic,
            (Switch, Switch) => LinkClass::Fabric,
            (Gpu, NvSwitch) | (NvSwitch, Gpu) | (Gpu, Gpu) | (NvSwitch, NvSwitch) => LinkClass::Nvlink,
            (Gpu | Cpu | PcieSwitch | Nic, Gpu | Cpu | PcieSwitch | Nic) => LinkClass::Pcie,
            _ => LinkClass::Other,
        }
    }
}

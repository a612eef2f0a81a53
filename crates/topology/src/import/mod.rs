//! Topologies users already have: the `nvidia-smi topo -m` matrix and NCCL's topology
//! XML (`NCCL_TOPO_DUMP_FILE`), and the export of ours back to NCCL's XML shape.
//! Link bandwidths come from `LinkDefaults`, documented and overridable.

pub mod nccl_xml;
pub mod nvidia_smi;

use serde::Serialize;

/// Bandwidths (bytes/s per direction) the importers give each link class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkDefaults {
    /// One NVLink (NVLink 3 and 4: 25 GB/s per direction; NV12 = 300 GB/s, NV18 = 450 GB/s
    /// as in seed 001 §7.1.1). NCCL's tuner uses lower effective figures (20–20.6 GB/s).
    pub nvlink_bytes_per_sec: f64,
    /// A PCIe link where the file gives no width/speed (Gen4 x16: 32 GB/s).
    pub pcie_bytes_per_sec: f64,
    /// Between CPU sockets (NCCL's ERP_QPI_BW is 40 GB/s).
    pub inter_socket_bytes_per_sec: f64,
    /// A NIC where the file gives no speed (400 Gbit/s = 50 GB/s).
    pub nic_bytes_per_sec: f64,
    /// α of the imported topology.
    pub round_startup_secs: f64,
}

impl Default for LinkDefaults {
    fn default() -> Self {
        LinkDefaults {
            nvlink_bytes_per_sec: 25e9,
            pcie_bytes_per_sec: 32e9,
            inter_socket_bytes_per_sec: 40e9,
            nic_bytes_per_sec: 50e9,
            round_startup_secs: 0.833e-6,
        }
    }
}

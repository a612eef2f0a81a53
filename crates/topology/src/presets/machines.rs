//! Real machines, every number from a public document (docs/hardware-sources.md names
//! each one and quotes it): DGX/HGX H100 and H200, DGX A100, HGX B200 and the GB200
//! NVL72 rack, as rail-optimized fabrics of their nodes (`rail.rs`) with the line rates
//! of their datasheets and the rates NCCL-class software reaches on them
//! (`crate::achievable`). The seeds' presets stay ideal; these are for predicting what
//! a real cluster measures.

use super::rail::{rail_optimized, RailParams};
use super::PresetParams;
use crate::achievable::{Achievable, NIC_FRACTION, NVLINK3_FRACTION, NVLINK4_FRACTION, NVLINK5_FRACTION};
use crate::error::TopologyError;
use crate::graph::Topology;

/// One machine: a node's GPUs, NVLink and NICs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Machine {
    pub name: &'static str,
    /// GPUs in one NVLink domain (a node; 72 for an NVL72 rack).
    pub gpus: usize,
    /// NVLink line rate per GPU and direction.
    pub nvlink_bytes_per_sec: f64,
    /// Fraction of it NCCL's copies reach (its per-link bandwidth constant).
    pub nvlink_fraction: f64,
    /// Whether the NVSwitch reduces (NVLS), and NCCL's NVLS efficiency for the generation.
    pub nvls: Option<f64>,
    /// Compute NICs per domain and line rate of each, per direction.
    pub nics: usize,
    pub nic_bytes_per_sec: f64,
    /// Host link of a GPU and its NIC (PCIe), per direction.
    pub pcie_bytes_per_sec: f64,
}

/// NCCL's NVLS efficiency per generation (`nvlsEfficiency`, src/graph/tuning.cc):
/// Hopper 0.85, Blackwell 0.74. The expected NVLS fraction scales the Hopper one
/// (`achievable::NVLS_FRACTION_HOPPER`) by their ratio.
const NVLS_HOPPER: f64 = 0.85;
const NVLS_BLACKWELL: f64 = 0.74;

pub const MACHINES: &[Machine] = &[
    // 18 NVLink4 links, 450 GB/s per direction; 4 NVSwitch with NVLink SHARP; 8 ConnectX-7
    // at 400 Gbit/s, one per GPU; PCIe Gen5 x16, 64 GB/s per direction.
    Machine {
        name: "dgx-h100",
        gpus: 8,
        nvlink_bytes_per_sec: 450e9,
        nvlink_fraction: NVLINK4_FRACTION,
        nvls: Some(NVLS_HOPPER),
        nics: 8,
        nic_bytes_per_sec: 50e9,
        pcie_bytes_per_sec: 64e9,
    },
    // The H100's fabric with 141 GB of HBM3e.
    Machine {
        name: "hgx-h200",
        gpus: 8,
        nvlink_bytes_per_sec: 450e9,
        nvlink_fraction: NVLINK4_FRACTION,
        nvls: Some(NVLS_HOPPER),
        nics: 8,
        nic_bytes_per_sec: 50e9,
        pcie_bytes_per_sec: 64e9,
    },
    // 12 NVLink3 links, 300 GB/s per direction; 6 NVSwitch, no reduction; 8 ConnectX-6
    // at 200 Gbit/s HDR; PCIe Gen4 x16, 32 GB/s per direction.
    Machine {
        name: "dgx-a100",
        gpus: 8,
        nvlink_bytes_per_sec: 300e9,
        nvlink_fraction: NVLINK3_FRACTION,
        nvls: None,
        nics: 8,
        nic_bytes_per_sec: 25e9,
        pcie_bytes_per_sec: 32e9,
    },
    // 18 NVLink5 links, 900 GB/s per direction; 2 NVSwitch with SHARP engines; 8
    // ConnectX-7 at 400 Gbit/s; PCIe Gen5.
    Machine {
        name: "hgx-b200",
        gpus: 8,
        nvlink_bytes_per_sec: 900e9,
        nvlink_fraction: NVLINK5_FRACTION,
        nvls: Some(NVLS_BLACKWELL),
        nics: 8,
        nic_bytes_per_sec: 50e9,
        pcie_bytes_per_sec: 64e9,
    },
    // 72 GPUs in one NVLink domain at 900 GB/s each per direction (9 NVLink switch
    // trays, SHARP engines); one ConnectX-7 at 400 Gbit/s per GPU.
    Machine {
        name: "gb200-nvl72",
        gpus: 72,
        nvlink_bytes_per_sec: 900e9,
        nvlink_fraction: NVLINK5_FRACTION,
        nvls: Some(NVLS_BLACKWELL),
        nics: 72,
        nic_bytes_per_sec: 50e9,
        pcie_bytes_per_sec: 64e9,
    },
];

/// The network the NICs are on, which sets the fraction of their line rate reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fabric {
    /// InfiniBand: 46-49 GB/s of a 400 Gbit/s NDR port, 24 of a 200 Gbit/s HDR one
    /// (NVIDIA/nccl-tests#267, #290, #119).
    Ib,
    /// RoCE on the same ConnectX NICs: NVIDIA quotes the same per-NIC rates
    /// (nccl-tests#267 was asked on a RoCE cluster).
    Roce,
    /// GPUDirect-TCPX(O) offload over Ethernet (Google's A3): NVIDIA quotes about 340
    /// GB/s all-reduce busbw on A3 Mega's 8 x 200 Gbit/s (docs.nvidia.com AICR GKE TCPXO
    /// guide), two nodes, where the busbw of a tree is up to twice the network's rate
    /// (nccl#209): 340 / (2 x 15/16) / 200 = 0.91.
    Tcp,
}

impl Fabric {
    fn parse(text: &str) -> Option<Fabric> {
        match text {
            "ib" => Some(Fabric::Ib),
            "roce" => Some(Fabric::Roce),
            "tcp" => Some(Fabric::Tcp),
            _ => None,
        }
    }

    fn nic_fraction(self) -> f64 {
        match self {
            Fabric::Ib | Fabric::Roce => NIC_FRACTION,
            Fabric::Tcp => 0.91,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Fabric::Ib => "InfiniBand",
            Fabric::Roce => "RoCE",
            Fabric::Tcp => "GPUDirect-TCPX(O)",
        }
    }
}

pub fn find(name: &str) -> Option<&'static Machine> {
    MACHINES.iter().find(|m| m.name == name)
}

/// `name:nodes=N,nic=BW,nics=N,fabric=ib|roce|tcp,sharp=on|off,group=N,spines=K,over=D:U`.
pub fn machine(spec: &str, m: &Machine, p: &mut PresetParams) -> Result<Topology, TopologyError> {
    for fixed in ["gpus", "servers", "nvlink"] {
        if p.values.contains_key(fixed) {
            return Err(p.bad(format!(
                "{} has {} GPUs per node on its own NVLink; set nodes=N (or use rail: to change {fixed})",
                m.name, m.gpus
            )));
        }
    }
    let fabric = match p.values.remove("fabric") {
        None => Fabric::Ib,
        Some(v) => Fabric::parse(&v).ok_or_else(|| p.bad(format!("fabric={v}: ib, roce or tcp")))?,
    };
    let sharp = match p.values.remove("sharp").as_deref() {
        None | Some("off") => false,
        Some("on") => true,
        Some(v) => return Err(p.bad(format!("sharp={v}: on or off"))),
    };
    let nodes = p.take_usize("nodes", 1)?;
    let defaults = RailParams {
        servers: nodes,
        gpus_per_server: m.gpus,
        nics_per_server: m.nics,
        nvlink_bytes_per_sec: m.nvlink_bytes_per_sec,
        nic_bytes_per_sec: m.nic_bytes_per_sec,
        pcie_bytes_per_sec: m.pcie_bytes_per_sec,
        ..RailParams::default()
    };
    let mut params = RailParams::from_params_with(p, &defaults)?;
    params.servers = nodes;
    params.gpus_per_server = m.gpus;
    params.nvlink_bytes_per_sec = m.nvlink_bytes_per_sec;
    params.nvls = m.nvls.is_some();
    params.sharp = sharp;
    let hopper = Achievable::default();
    params.achievable = Achievable {
        nvlink: m.nvlink_fraction,
        nic: fabric.nic_fraction(),
        fabric: fabric.nic_fraction(),
        nvls: m.nvls.map_or(hopper.nvls, |e| hopper.nvls * e / NVLS_HOPPER),
        sharp: 0.9 * fabric.nic_fraction(),
        source: format!(
            "{}: NCCL 2.30's NVLink bandwidth per link and NVLS efficiency for its generation, NVIDIA's expected \
             per-NIC rate on {} (docs/hardware-sources.md, crates/topology/src/achievable.rs)",
            m.name,
            fabric.as_str()
        ),
        ..hopper
    };
    let mut t = rail_optimized(spec, &params)?;
    t.description = format!("{} ({}{})", t.description, fabric.as_str(), if sharp { ", SHARP" } else { "" });
    Ok(t)
}

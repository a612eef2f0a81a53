//! Built-in clusters of the seeds, and generators. A preset is named by a spec
//! string: `NAME` or `NAME:key=value,key=value`, e.g. `a100-pcie-control:ports=3`,
//! `rail:servers=4,gpus=8`, `clos:k=8,tiers=3,over=3:1`.

mod a100_pcie;
mod clos;
mod hosts;
mod machines;
mod mesh;
mod rail;

use std::collections::BTreeMap;

pub use a100_pcie::{a100_pcie_control, A100PcieParams};
pub use clos::{clos, ClosParams};
pub use hosts::{hosts, Transport, HOST_COSTS};
pub use machines::{Machine, MACHINES};
pub use mesh::{mesh, MeshParams};
pub use rail::{rail_optimized, server_name, RailParams};

use crate::error::TopologyError;
use crate::graph::Topology;
use railyard_units::units::{parse_bytes_per_sec, parse_secs};

/// Documentation of one preset, as `railyard topo list` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresetDoc {
    pub name: &'static str,
    pub summary: &'static str,
    pub parameters: &'static str,
    pub source: &'static str,
}

pub const PRESETS: &[PresetDoc] = &[
    PresetDoc {
        name: "hgx-h100x2",
        summary: "2 servers x 8 H100 (ranks 0-7 on A, 8-15 on B); NVSwitch at 450 GB/s per GPU per direction; \
                  one 400 Gbit/s NIC (50 GB/s per direction) per GPU behind its own PCIe Gen5 switch (64 GB/s); \
                  NIC i of every server on rail leaf i; 2 spines join the rails; the leaf and spine switches \
                  reduce in the network (SHARP, as the chapter's fabric does: sharp=off to turn it off), the \
                  NVSwitches do not; per-round start-up 0.833 us",
        parameters: "same as rail, with servers=2, gpus=8",
        source: "the networks chapter's worked 2-server HGX H100 cluster (docs/sources.md)",
    },
    PresetDoc {
        name: "a100-pcie-control",
        summary: "the networks chapter's control setting: 2 servers x 4 A100 PCIe; GPU-to-GPU PCIe P2P 32 GB/s per \
                  direction through the host; one ConnectX-7 per server with N ports of 25 GB/s sharing one \
                  PCIe Gen4 x16 slot (32 GB/s per direction); per-round start-up 0.833 us",
        parameters: "ports=N (1..4, default 2); local=BW adds a direct GPU-GPU link of BW on every pair \
                     (e.g. local=300GB/s for NVLink bridges on every edge); port=BW, slot=BW, p2p=BW override the rates",
        source: "the networks chapter's PCIe control setting (docs/sources.md)",
    },
    PresetDoc {
        name: "rail",
        summary: "rail-optimized fabric: servers x gpus; GPU i of every server has NIC i on rail i; \
                  servers in groups under one leaf per rail; every leaf joins every spine; the leaf and spine \
                  switches reduce in the network (SHARP) unless sharp=off",
        parameters: "servers=S (default 2), gpus=G (8), nics=N per server (one per GPU; fewer: NIC j serves GPUs j, j+N, ... \
                     through one PCIe switch), group=N servers per leaf (32), spines=K (2), over=D:U \
                     leaf oversubscription (1:1), nvlink=BW (450GB/s), nic=BW (50GB/s), pcie=BW (64GB/s), alpha=TIME (0.833us), \
                     sharp=on|off (on)",
        source: "rail-optimized fabrics as the networks chapter describes them (docs/sources.md)",
    },
    PresetDoc {
        name: "clos",
        summary: "k-port Clos of single-GPU hosts: 2 tiers (k leaves, u spines) or 3 tiers as fat-tree pods; \
                  leaves with d down and u up ports (d:u oversubscription)",
        parameters: "k=PORTS (default 8), tiers=2|3 (2), over=D:U (1:1), endpoints=N (all), port=BW (50GB/s), alpha=TIME (0.833us)",
        source: "the networks chapter's Clos sizing (docs/sources.md)",
    },
    PresetDoc {
        name: "dgx-h100",
        summary: "nodes x 8 H100 SXM: 18 NVLink4 links, 450 GB/s per GPU per direction, through 4 NVSwitch that reduce \
                  (NVLS); 8 ConnectX-7 at 400 Gbit/s, one per GPU behind its PCIe Gen5 switch (64 GB/s); NIC i of \
                  every node on rail leaf i; expected rates from NCCL's own constants",
        parameters: "nodes=N (1), nic=BW (50GB/s), nics=N (8), fabric=ib|roce|tcp (ib), sharp=on|off (off), \
                     group=N nodes per leaf (32), spines=K (2), over=D:U (1:1), pcie=BW, alpha=TIME",
        source: "NVIDIA DGX H100 user guide, Hopper tuning guide, HGX H100 blog; NCCL src/graph/topo.h, tuning.cc; \
                 nccl-tests#212, #267, #290 (docs/hardware-sources.md)",
    },
    PresetDoc {
        name: "hgx-h200",
        summary: "nodes x 8 H200 SXM (141 GB HBM3e) on the H100's fabric: NVLink4 450 GB/s per direction, NVLS, \
                  8 x 400 Gbit/s NICs",
        parameters: "as dgx-h100",
        source: "NVIDIA H200 page, DGX BasePOD reference architecture, MLPerf system description (docs/hardware-sources.md)",
    },
    PresetDoc {
        name: "dgx-a100",
        summary: "nodes x 8 A100 SXM4: 12 NVLink3 links, 300 GB/s per direction, 6 NVSwitch without reduction; \
                  8 ConnectX-6 at 200 Gbit/s HDR behind PCIe Gen4 switches (32 GB/s)",
        parameters: "as dgx-h100 (nic default 25GB/s)",
        source: "NVIDIA DGX A100 datasheet, Ampere architecture blog; nccl-tests#149, #119 (docs/hardware-sources.md)",
    },
    PresetDoc {
        name: "hgx-b200",
        summary: "nodes x 8 B200: 18 NVLink5 links, 900 GB/s per direction, 2 NVSwitch with SHARP engines (NVLS); \
                  8 ConnectX-7 at 400 Gbit/s",
        parameters: "as dgx-h100",
        source: "NVIDIA DGX B200 user guide, NVLink page; NCCL tuning.cc (docs/hardware-sources.md)",
    },
    PresetDoc {
        name: "gb200-nvl72",
        summary: "nodes x one NVL72 rack: 72 Blackwell GPUs in one NVLink domain, 900 GB/s each per direction, NVLink \
                  switch trays with SHARP engines (NVLS); one ConnectX-7 at 400 Gbit/s per GPU, rail-aligned",
        parameters: "as dgx-h100 (nics default 72)",
        source: "NVIDIA DGX GB200 user guide, NVLink page (docs/hardware-sources.md)",
    },
    PresetDoc {
        name: "mesh",
        summary: "uniform full mesh: every pair of GPUs on a dedicated link; where the per-round model meets the α-β closed forms",
        parameters: "ranks=P (default 8), bw=BW per pair per direction (50GB/s), alpha=TIME per round (5us)",
        source: "the collectives chapter's α-β cost model (docs/sources.md)",
    },
];

/// Key-value parameters of a preset spec, consumed one by one so leftovers are reported.
#[derive(Debug)]
pub struct PresetParams {
    preset: String,
    values: BTreeMap<String, String>,
}

impl PresetParams {
    fn error(&self, message: String) -> TopologyError {
        TopologyError::BadPresetParameter { preset: self.preset.clone(), message }
    }

    pub fn take_usize(&mut self, key: &str, default: usize) -> Result<usize, TopologyError> {
        match self.values.remove(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| self.error(format!("{key}={v} is not a whole number"))),
        }
    }

    pub fn take_bytes_per_sec(&mut self, key: &str, default: f64) -> Result<f64, TopologyError> {
        match self.values.remove(key) {
            None => Ok(default),
            Some(v) => parse_bytes_per_sec(&v).map_err(|e| self.error(format!("{key}: {e}"))),
        }
    }

    pub fn take_optional_bytes_per_sec(&mut self, key: &str) -> Result<Option<f64>, TopologyError> {
        match self.values.remove(key) {
            None => Ok(None),
            Some(v) => parse_bytes_per_sec(&v).map(Some).map_err(|e| self.error(format!("{key}: {e}"))),
        }
    }

    pub fn take_secs(&mut self, key: &str, default: f64) -> Result<f64, TopologyError> {
        match self.values.remove(key) {
            None => Ok(default),
            Some(v) => parse_secs(&v).map_err(|e| self.error(format!("{key}: {e}"))),
        }
    }

    /// A ratio `D:U`, returned as (D, U).
    /// `key=on` or `key=off`.
    pub fn take_on_off(&mut self, key: &str, default: bool) -> Result<bool, TopologyError> {
        match self.values.remove(key).as_deref() {
            None => Ok(default),
            Some("on") => Ok(true),
            Some("off") => Ok(false),
            Some(v) => Err(self.error(format!("{key}={v}: on or off"))),
        }
    }

    pub fn take_ratio(&mut self, key: &str, default: (usize, usize)) -> Result<(usize, usize), TopologyError> {
        match self.values.remove(key) {
            None => Ok(default),
            Some(v) => parse_ratio(&v)
                .ok_or_else(|| self.error(format!("{key}={v} is not a ratio D:U of positive whole numbers"))),
        }
    }

    pub fn bad(&self, message: impl Into<String>) -> TopologyError {
        self.error(message.into())
    }

    fn finish(self) -> Result<(), TopologyError> {
        match self.values.keys().next() {
            None => Ok(()),
            Some(key) => Err(self.error(format!("unknown parameter \"{key}\""))),
        }
    }
}

/// Parse `D:U` into (D, U), both positive.
pub fn parse_ratio(text: &str) -> Option<(usize, usize)> {
    let (d, u) = text.split_once(':')?;
    let d: usize = d.trim().parse().ok()?;
    let u: usize = u.trim().parse().ok()?;
    (d > 0 && u > 0).then_some((d, u))
}

/// A preset spec's name and its `key=value` items, trimmed, empty ones left out
/// (`over=3:1` holds a colon: the name ends at the first one, items split on commas).
pub fn split_spec(spec: &str) -> (&str, Vec<&str>) {
    let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
    (name, rest.split(',').map(str::trim).filter(|s| !s.is_empty()).collect())
}

/// Build a preset from its spec string.
pub fn preset(spec: &str) -> Result<Topology, TopologyError> {
    let (name, items) = split_spec(spec);
    let mut params = PresetParams { preset: name.to_string(), values: BTreeMap::new() };
    for item in items {
        let (k, v) = item.split_once('=').ok_or_else(|| params.bad(format!("\"{item}\" is not key=value")))?;
        if params.values.insert(k.trim().to_string(), v.trim().to_string()).is_some() {
            return Err(params.bad(format!("\"{}\" is given twice", k.trim())));
        }
    }
    let topology = match name {
        "hgx-h100x2" => {
            if params.values.contains_key("servers") || params.values.contains_key("gpus") {
                return Err(params.bad("hgx-h100x2 is 2 servers of 8 GPUs; use rail:servers=S,gpus=G for other sizes"));
            }
            let mut p = RailParams::from_params(&mut params)?;
            p.servers = 2;
            p.gpus_per_server = 8;
            rail_optimized("hgx-h100x2", &p)
        }
        "a100-pcie-control" => a100_pcie_control(&A100PcieParams::from_params(&mut params)?),
        "rail" => {
            let p = RailParams::from_params(&mut params)?;
            rail_optimized(spec, &p)
        }
        "clos" => clos(spec, &ClosParams::from_params(&mut params)?),
        "mesh" => mesh(spec, &MeshParams::from_params(&mut params)?),
        _ => match machines::find(name) {
            Some(m) => machines::machine(spec, m, &mut params),
            None => return Err(TopologyError::UnknownPreset { name: name.to_string() }),
        },
    }?;
    params.finish()?;
    Ok(topology)
}

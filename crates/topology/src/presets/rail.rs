//! Rail-optimized fabric (seed 001 §7.2.5, footnote 36): every server's NIC i goes to
//! the leaf of rail i; a group of servers shares one leaf per rail, so same-rail traffic
//! inside a group takes one hop; cross-rail or cross-group traffic goes through spines.
//! `hgx-h100x2` is this fabric with 2 servers of 8 H100 (seed 001 §7.1.1, footnote 6).

use super::PresetParams;
use crate::error::TopologyError;
use crate::graph::{DeviceKind, Topology, TopologyBuilder, MAX_LINKS};

#[derive(Debug, Clone, PartialEq)]
pub struct RailParams {
    pub servers: usize,
    pub gpus_per_server: usize,
    /// Servers under one leaf per rail (DGX SuperPOD: 32).
    pub group: usize,
    pub spines: usize,
    /// Leaf oversubscription d:u; leaf uplink capacity = downlink capacity * u / d.
    pub oversubscription: (usize, usize),
    pub nvlink_bytes_per_sec: f64,
    pub nic_bytes_per_sec: f64,
    pub pcie_bytes_per_sec: f64,
    pub round_startup_secs: f64,
}

impl Default for RailParams {
    fn default() -> Self {
        RailParams {
            servers: 2,
            gpus_per_server: 8,
            group: 32,
            spines: 2,
            oversubscription: (1, 1),
            // seed 001 §7.1.1: NVLink 900 GB/s both directions = 450 GB/s per direction.
            nvlink_bytes_per_sec: 450e9,
            // 400 Gbit/s = 50 GB/s per direction.
            nic_bytes_per_sec: 50e9,
            // footnote 6: PCIe Gen5 x16, 64 GB/s per direction, above the NIC's 50.
            pcie_bytes_per_sec: 64e9,
            // footnote 6: 25 us / 30 rounds.
            round_startup_secs: 0.833e-6,
        }
    }
}

/// The largest rail fabric built: 262,144 GPUs, twice the 131,072 of the largest
/// clusters the seeds reason about.
pub const MAX_GPUS: usize = 1 << 18;

impl RailParams {
    pub fn from_params(p: &mut PresetParams) -> Result<Self, TopologyError> {
        let d = RailParams::default();
        let params = RailParams {
            servers: p.take_usize("servers", d.servers)?,
            gpus_per_server: p.take_usize("gpus", d.gpus_per_server)?,
            group: p.take_usize("group", d.group)?,
            spines: p.take_usize("spines", d.spines)?,
            oversubscription: p.take_ratio("over", d.oversubscription)?,
            nvlink_bytes_per_sec: p.take_bytes_per_sec("nvlink", d.nvlink_bytes_per_sec)?,
            nic_bytes_per_sec: p.take_bytes_per_sec("nic", d.nic_bytes_per_sec)?,
            pcie_bytes_per_sec: p.take_bytes_per_sec("pcie", d.pcie_bytes_per_sec)?,
            round_startup_secs: p.take_secs("alpha", d.round_startup_secs)?,
        };
        if params.servers == 0 || params.gpus_per_server == 0 || params.group == 0 || params.spines == 0 {
            return Err(p.bad("servers, gpus, group and spines must be at least 1"));
        }
        let gpus = params.servers.saturating_mul(params.gpus_per_server);
        if gpus > MAX_GPUS {
            return Err(p.bad(format!(
                "{} x {} GPUs is more than the {MAX_GPUS} a rail preset builds",
                params.servers, params.gpus_per_server
            )));
        }
        let leaves = params.servers.div_ceil(params.group) * params.gpus_per_server;
        if leaves.checked_mul(params.spines).is_none_or(|uplinks| uplinks > MAX_LINKS / 4) {
            return Err(p.bad(format!(
                "{leaves} leaves x {} spines is more than the {} leaf-spine links a topology holds",
                params.spines,
                MAX_LINKS / 4
            )));
        }
        Ok(params)
    }
}

/// Server names: A, B, C, ... like the seed, or s0, s1, ... beyond 26.
pub fn server_name(index: usize, count: usize) -> String {
    if count <= 26 {
        ((b'A' + index as u8) as char).to_string()
    } else {
        format!("s{index}")
    }
}

pub fn rail_optimized(name: &str, p: &RailParams) -> Result<Topology, TopologyError> {
    let mut b = TopologyBuilder::new(name);
    b.description(format!(
        "{} servers x {} GPUs, NVSwitch {} GB/s, one {} GB/s NIC per GPU on its rail, {} servers per leaf, {} spines, leaf {}:{}",
        p.servers,
        p.gpus_per_server,
        p.nvlink_bytes_per_sec / 1e9,
        p.nic_bytes_per_sec / 1e9,
        p.group,
        p.spines,
        p.oversubscription.0,
        p.oversubscription.1
    ));
    b.round_startup_secs(p.round_startup_secs);
    let groups = p.servers.div_ceil(p.group);
    let mut leaves = vec![Vec::with_capacity(p.gpus_per_server); groups];
    for (g, rails) in leaves.iter_mut().enumerate() {
        for r in 0..p.gpus_per_server {
            let leaf = b.device(format!("leaf{g}.rail{r}"), DeviceKind::Switch, None);
            let d = b.device_mut(leaf);
            d.tier = Some(1);
            d.rail = Some(r as u32);
            d.in_network_reduction = true;
            rails.push(leaf);
        }
    }
    let spines: Vec<_> = (0..p.spines)
        .map(|k| {
            let spine = b.device(format!("spine{k}"), DeviceKind::Switch, None);
            let d = b.device_mut(spine);
            d.tier = Some(2);
            d.in_network_reduction = true;
            spine
        })
        .collect();
    for s in 0..p.servers {
        let server = server_name(s, p.servers);
        let nvswitch = b.device(format!("{server}.nvswitch"), DeviceKind::NvSwitch, Some(&server));
        for (r, &leaf) in leaves[s / p.group].iter().enumerate() {
            let gpu = b.device(format!("{server}.gpu{r}"), DeviceKind::Gpu, Some(&server));
            b.device_mut(gpu).rail = Some(r as u32);
            let pcie = b.device(format!("{server}.pcie{r}"), DeviceKind::PcieSwitch, Some(&server));
            let nic = b.device(format!("{server}.nic{r}"), DeviceKind::Nic, Some(&server));
            b.device_mut(nic).rail = Some(r as u32);
            b.duplex(gpu, nvswitch, p.nvlink_bytes_per_sec, 0.0, &[]);
            b.duplex(gpu, pcie, p.pcie_bytes_per_sec, 0.0, &[]);
            b.duplex(pcie, nic, p.pcie_bytes_per_sec, 0.0, &[]);
            b.duplex(nic, leaf, p.nic_bytes_per_sec, 0.0, &[]);
        }
    }
    // Every leaf joins every spine with one (aggregated) link whose bandwidth is the
    // leaf's populated downlink capacity * u/d, spread evenly over the spines.
    for (g, rails) in leaves.iter().enumerate() {
        let populated = (p.servers - g * p.group).min(p.group) as f64;
        let (down, up) = p.oversubscription;
        let uplink = populated * p.nic_bytes_per_sec * up as f64 / down as f64 / p.spines as f64;
        for &leaf in rails {
            for &spine in &spines {
                b.duplex(leaf, spine, uplink, 0.0, &[]);
            }
        }
    }
    b.build()
}

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
    /// NICs per server (default: one per GPU). With fewer, NIC j serves GPUs j, j+n, ...
    /// through one PCIe switch, as when NICs have failed or were never fitted (seed 001
    /// §7.6.2: the hierarchical all-reduce left with one NIC per server).
    pub nics_per_server: usize,
    /// Servers under one leaf per rail (DGX SuperPOD: 32).
    pub group: usize,
    pub spines: usize,
    /// Leaf oversubscription d:u; leaf uplink capacity = downlink capacity * u / d.
    pub oversubscription: (usize, usize),
    pub nvlink_bytes_per_sec: f64,
    pub nic_bytes_per_sec: f64,
    pub pcie_bytes_per_sec: f64,
    pub round_startup_secs: f64,
    /// Whether each server's NVSwitch reduces (NVLS: NVLink4 and later).
    pub nvls: bool,
    /// Whether the leaf and spine switches reduce (SHARP); the seed's fabric does.
    pub sharp: bool,
    /// What NCCL-class software reaches on these links (the expected time).
    pub achievable: crate::achievable::Achievable,
}

impl Default for RailParams {
    fn default() -> Self {
        RailParams {
            servers: 2,
            gpus_per_server: 8,
            nics_per_server: 8,
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
            nvls: false,
            sharp: true,
            achievable: crate::achievable::Achievable::default(),
        }
    }
}

/// The largest rail fabric built: 262,144 GPUs, twice the 131,072 of the largest
/// clusters the seeds reason about.
pub const MAX_GPUS: usize = 1 << 18;

impl RailParams {
    pub fn from_params(p: &mut PresetParams) -> Result<Self, TopologyError> {
        Self::from_params_with(p, &RailParams::default())
    }

    /// The parameters of `p` over `d`'s values.
    pub fn from_params_with(p: &mut PresetParams, d: &RailParams) -> Result<Self, TopologyError> {
        let d = d.clone();
        let params = RailParams {
            servers: p.take_usize("servers", d.servers)?,
            gpus_per_server: p.take_usize("gpus", d.gpus_per_server)?,
            nics_per_server: 0,
            group: p.take_usize("group", d.group)?,
            spines: p.take_usize("spines", d.spines)?,
            oversubscription: p.take_ratio("over", d.oversubscription)?,
            nvlink_bytes_per_sec: p.take_bytes_per_sec("nvlink", d.nvlink_bytes_per_sec)?,
            nic_bytes_per_sec: p.take_bytes_per_sec("nic", d.nic_bytes_per_sec)?,
            pcie_bytes_per_sec: p.take_bytes_per_sec("pcie", d.pcie_bytes_per_sec)?,
            round_startup_secs: p.take_secs("alpha", d.round_startup_secs)?,
            sharp: p.take_on_off("sharp", d.sharp)?,
            ..d
        };
        let nics = if d.nics_per_server == d.gpus_per_server { params.gpus_per_server } else { d.nics_per_server };
        let params = RailParams { nics_per_server: p.take_usize("nics", nics)?, ..params };
        if params.nics_per_server == 0 || params.nics_per_server > params.gpus_per_server {
            return Err(p.bad(format!("nics must be 1..={} (one per GPU at most)", params.gpus_per_server)));
        }
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
        let leaves = params.servers.div_ceil(params.group) * params.nics_per_server;
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
        "{} servers x {} GPUs, NVSwitch {} GB/s, {} {} GB/s NIC{}, {} servers per leaf, {} spines, leaf {}:{}",
        p.servers,
        p.gpus_per_server,
        p.nvlink_bytes_per_sec / 1e9,
        if p.nics_per_server == p.gpus_per_server {
            "one".to_string()
        } else {
            format!("{} per server:", p.nics_per_server)
        },
        p.nic_bytes_per_sec / 1e9,
        if p.nics_per_server == p.gpus_per_server { " per GPU on its rail" } else { " on their rails" },
        p.group,
        p.spines,
        p.oversubscription.0,
        p.oversubscription.1
    ));
    b.round_startup_secs(p.round_startup_secs);
    b.achievable(p.achievable.clone());
    let groups = p.servers.div_ceil(p.group);
    let mut leaves = vec![Vec::with_capacity(p.nics_per_server); groups];
    for (g, rails) in leaves.iter_mut().enumerate() {
        for r in 0..p.nics_per_server {
            let leaf = b.device(format!("leaf{g}.rail{r}"), DeviceKind::Switch, None);
            let d = b.device_mut(leaf);
            d.tier = Some(1);
            d.rail = Some(r as u32);
            d.in_network_reduction = p.sharp;
            rails.push(leaf);
        }
    }
    let spines: Vec<_> = (0..p.spines)
        .map(|k| {
            let spine = b.device(format!("spine{k}"), DeviceKind::Switch, None);
            let d = b.device_mut(spine);
            d.tier = Some(2);
            d.in_network_reduction = p.sharp;
            spine
        })
        .collect();
    for s in 0..p.servers {
        let server = server_name(s, p.servers);
        let nvswitch = b.device(format!("{server}.nvswitch"), DeviceKind::NvSwitch, Some(&server));
        b.device_mut(nvswitch).in_network_reduction = p.nvls;
        // Device and link order as with one NIC per GPU: gpu, its PCIe switch, its NIC.
        let rails = &leaves[s / p.group];
        let mut pcie_of_nic = Vec::with_capacity(p.nics_per_server);
        for g in 0..p.gpus_per_server {
            let r = g % p.nics_per_server;
            let gpu = b.device(format!("{server}.gpu{g}"), DeviceKind::Gpu, Some(&server));
            b.device_mut(gpu).rail = Some(r as u32);
            b.duplex(gpu, nvswitch, p.nvlink_bytes_per_sec, 0.0, &[]);
            if g < p.nics_per_server {
                let pcie = b.device(format!("{server}.pcie{r}"), DeviceKind::PcieSwitch, Some(&server));
                let nic = b.device(format!("{server}.nic{r}"), DeviceKind::Nic, Some(&server));
                b.device_mut(nic).rail = Some(r as u32);
                b.duplex(gpu, pcie, p.pcie_bytes_per_sec, 0.0, &[]);
                b.duplex(pcie, nic, p.pcie_bytes_per_sec, 0.0, &[]);
                b.duplex(nic, rails[r], p.nic_bytes_per_sec, 0.0, &[]);
                pcie_of_nic.push(pcie);
            } else {
                b.duplex(gpu, pcie_of_nic[r], p.pcie_bytes_per_sec, 0.0, &[]);
            }
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

#[cfg(test)]
mod tests {
    use crate::graph::DeviceKind;
    use crate::presets::preset;

    #[test]
    fn fewer_nics_share_one_pcie_switch_each() {
        // seed 001 §7.6.2: every GPU's cross-server traffic through the one NIC left.
        let t = preset("hgx-h100x2:nics=1").unwrap();
        let nics = t.devices.iter().filter(|d| d.kind == DeviceKind::Nic).count();
        assert_eq!(nics, 2);
        let pcie0 = t.device_id("A.pcie0").unwrap();
        let on_pcie0 = t.out_links(pcie0).iter().filter(|&&l| t.devices[t.links[l].to].kind == DeviceKind::Gpu).count();
        assert_eq!(on_pcie0, 8);
        assert!(t.device_id("A.nic1").is_none());
        // Two NICs: GPUs 0, 2, 4, 6 on rail 0.
        let t = preset("rail:nics=2").unwrap();
        let gpu6 = t.device_id("B.gpu6").unwrap();
        assert_eq!(t.devices[gpu6].rail, Some(0));
        for bad in ["hgx-h100x2:nics=0", "hgx-h100x2:nics=9"] {
            assert!(preset(bad).unwrap_err().to_string().contains("nics"), "{bad}");
        }
    }

    #[test]
    fn one_nic_per_gpu_builds_the_same_topology_as_before() {
        // The default keeps device and link order: gpu, its PCIe switch, its NIC.
        let t = preset("hgx-h100x2").unwrap();
        let id = |n: &str| t.device_id(n).unwrap();
        assert!(id("A.gpu0") < id("A.pcie0") && id("A.pcie0") < id("A.nic0") && id("A.nic0") < id("A.gpu1"));
        assert_eq!(t, preset("hgx-h100x2:nics=8").unwrap());
    }
}

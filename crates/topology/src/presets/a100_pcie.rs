//! The seed's control setting (對照設定, seed 001 §7.2.1, footnotes 4–5, §7.2.4): two
//! servers of four A100 80GB PCIe; GPU-to-GPU PCIe Gen4 x16 P2P at 32 GB/s per
//! direction; one ConnectX-7 per server whose ports (25 GB/s each) all sit behind the
//! same PCIe Gen4 x16 slot, 32 GB/s per direction — the shared interface that makes
//! hierarchical all-reduce slower than the contiguous ring here.

use super::{server_name, PresetParams};
use crate::error::TopologyError;
use crate::graph::{DeviceKind, Interface, Topology, TopologyBuilder};

#[derive(Debug, Clone, PartialEq)]
pub struct A100PcieParams {
    /// NIC ports per server (ConnectX-7 comes with 1, 2 or 4).
    pub ports: usize,
    pub port_bytes_per_sec: f64,
    pub slot_bytes_per_sec: f64,
    pub p2p_bytes_per_sec: f64,
    /// A direct GPU-GPU link of this bandwidth on every pair inside a server
    /// (the seed's "if every edge of the 4-GPU ring had 300 GB/s").
    pub local_bytes_per_sec: Option<f64>,
    pub round_startup_secs: f64,
}

impl Default for A100PcieParams {
    fn default() -> Self {
        A100PcieParams {
            ports: 2,
            port_bytes_per_sec: 25e9,
            slot_bytes_per_sec: 32e9,
            p2p_bytes_per_sec: 32e9,
            local_bytes_per_sec: None,
            round_startup_secs: 0.833e-6,
        }
    }
}

impl A100PcieParams {
    pub fn from_params(p: &mut PresetParams) -> Result<Self, TopologyError> {
        let d = A100PcieParams::default();
        let params = A100PcieParams {
            ports: p.take_usize("ports", d.ports)?,
            port_bytes_per_sec: p.take_bytes_per_sec("port", d.port_bytes_per_sec)?,
            slot_bytes_per_sec: p.take_bytes_per_sec("slot", d.slot_bytes_per_sec)?,
            p2p_bytes_per_sec: p.take_bytes_per_sec("p2p", d.p2p_bytes_per_sec)?,
            local_bytes_per_sec: p.take_optional_bytes_per_sec("local")?,
            round_startup_secs: p.take_secs("alpha", d.round_startup_secs)?,
        };
        if !(1..=4).contains(&params.ports) {
            return Err(p.bad(format!("ports={} but a ConnectX-7 has 1 to 4 ports", params.ports)));
        }
        Ok(params)
    }
}

pub fn a100_pcie_control(p: &A100PcieParams) -> Result<Topology, TopologyError> {
    let mut b = TopologyBuilder::new("a100-pcie-control");
    b.description(format!(
        "2 servers x 4 A100 PCIe, P2P {} GB/s, ConnectX-7 with {} x {} GB/s ports sharing a {} GB/s PCIe slot{}",
        p.p2p_bytes_per_sec / 1e9,
        p.ports,
        p.port_bytes_per_sec / 1e9,
        p.slot_bytes_per_sec / 1e9,
        p.local_bytes_per_sec.map(|bw| format!(", direct GPU links {} GB/s", bw / 1e9)).unwrap_or_default()
    ));
    b.round_startup_secs(p.round_startup_secs);
    let switch = b.device("tor", DeviceKind::Switch, None);
    b.device_mut(switch).tier = Some(1);
    for s in 0..2 {
        let server = server_name(s, 2);
        let host = b.device(format!("{server}.cpu"), DeviceKind::Cpu, Some(&server));
        let gpus: Vec<_> =
            (0..4).map(|g| b.device(format!("{server}.gpu{g}"), DeviceKind::Gpu, Some(&server))).collect();
        for &gpu in &gpus {
            b.duplex(gpu, host, p.p2p_bytes_per_sec, 0.0, &[]);
        }
        if let Some(local) = p.local_bytes_per_sec {
            for (i, &a) in gpus.iter().enumerate() {
                for &c in &gpus[i + 1..] {
                    b.duplex(a, c, local, 0.0, &[]);
                }
            }
        }
        let slot_name = format!("{server}.nic.pcie-slot");
        let slot = b.add_interface(
            Interface {
                name: slot_name.clone(),
                bytes_per_sec: p.slot_bytes_per_sec,
                forward_label: "tx".into(),
                reverse_label: "rx".into(),
            },
            &format!("interface \"{slot_name}\""),
        );
        for port in 0..p.ports {
            let nic = b.device(format!("{server}.nic.p{port}"), DeviceKind::Nic, Some(&server));
            // Each port's PCIe function can take the whole slot; the slot is what they share.
            b.duplex(host, nic, p.slot_bytes_per_sec, 0.0, &[slot]);
            b.duplex(nic, switch, p.port_bytes_per_sec, 0.0, &[]);
        }
    }
    b.build()
}

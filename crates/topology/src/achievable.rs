//! What NCCL-class software reaches on a topology's hardware, beside the line rates the
//! links declare: the fraction of each link class's line rate a collective's copies
//! get, the in-switch reductions' fraction, and each protocol's latencies and payload
//! fraction. The per-round model costs a schedule twice — at line rate with the
//! topology's α (the bound: nothing is faster on this hardware) and with these (the
//! expected time).
//!
//! Every default is a public number (docs/sources.md#nccl-tuner, #achievable):
//!
//! - NVLink: NCCL counts a Hopper NVLink4 link at 20.6 GB/s against its 25 GB/s line
//!   rate (`SM90_NVLINK_BW`, src/graph/topo.h): 0.824. Ampere 20.0 of 25 (0.80),
//!   Blackwell 40.1 of 50 (0.802).
//! - PCIe: NCCL's `PCI_BW` is 12 GB/s for a Gen3 x16 link of 15.75 GB/s: 0.76.
//! - NIC and switch links: NVIDIA's NCCL engineers expect 46–49 GB/s of a 400 Gbit/s
//!   (50 GB/s) ConnectX-7 port (NVIDIA/nccl-tests#267, #290): 0.96.
//! - In-switch reduction (NVLS): about 275 GB/s of algorithm bandwidth on 8 H100 with
//!   450 GB/s of NVLink each (NVIDIA/nccl-tests#212), each GPU's link carrying the
//!   buffer and one shard of it each way (reduce-scatter by `multimem.ld_reduce`, then
//!   a multicast all-gather: 9/8 of the buffer): 275 x 9/8 / 450 = 0.6875.
//! - Network in-switch reduction (SHARP, CollNet): NCCL caps CollNet at 0.9 of the
//!   network's per-channel bandwidth (`ncclTopoTuneModel`): 0.9 × 0.96.
//! - Protocols (LL, LL128, Simple): NCCL's base latency per call and hardware latency
//!   per step (`baseLatencies`, `hwLatencies`, ring row, src/graph/tuning.cc), and the
//!   payload fraction: LL carries 4 data bytes of every 8 (0.5), LL128 120 of 128 and
//!   NCCL counts it at 0.92, Simple all of it.

use serde::{Deserialize, Serialize};

use crate::error::TopologyError;
use crate::kinds::LinkClass;

/// NCCL's three protocols: how a step's data is flagged as ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// 8-byte stores of 4 data bytes and a flag: lowest latency, half the bandwidth.
    #[serde(rename = "LL")]
    Ll,
    /// 128-byte lines of 120 data bytes and a flag.
    #[serde(rename = "LL128")]
    Ll128,
    /// Whole buffers behind a fence: full bandwidth, highest latency.
    #[serde(rename = "Simple")]
    Simple,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Ll => "LL",
            Protocol::Ll128 => "LL128",
            Protocol::Simple => "Simple",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The kind of hop that sets a round's latency: the slowest kind any of its transfers
/// crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hop {
    Nvlink,
    Pcie,
    Net,
}

impl Hop {
    pub fn of(class: LinkClass) -> Hop {
        match class {
            LinkClass::Nvlink => Hop::Nvlink,
            LinkClass::Pcie | LinkClass::Memory | LinkClass::Other => Hop::Pcie,
            LinkClass::Nic | LinkClass::Fabric => Hop::Net,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Hop::Nvlink => "nvlink",
            Hop::Pcie => "pcie",
            Hop::Net => "net",
        }
    }
}

/// Per protocol, in `Protocol` order (LL, LL128, Simple).
pub type PerProtocol = [f64; 3];

/// What NCCL-class software reaches on this hardware (see the module's sources).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Achievable {
    /// Fraction of line rate of a copy over NVLink.
    pub nvlink: f64,
    pub pcie: f64,
    /// A NIC's wire.
    pub nic: f64,
    /// Switch to switch.
    pub fabric: f64,
    /// Fraction of NVLink line rate of an in-switch reduction on an NVSwitch (NVLS).
    pub nvls: f64,
    /// Fraction of line rate of an in-network reduction on network switches (SHARP).
    pub sharp: f64,
    /// Latency of a collective call, per protocol (NCCL's base latency).
    pub call_secs: PerProtocol,
    /// Latency of a round whose slowest hop is NVLink, per protocol.
    pub nvlink_hop_secs: PerProtocol,
    pub pcie_hop_secs: PerProtocol,
    pub net_hop_secs: PerProtocol,
    /// Latency of a round of in-switch reductions on an NVSwitch (NVLS: Simple only).
    pub nvls_hop_secs: f64,
    /// Latency of a round of in-network reductions on network switches (Simple only).
    pub sharp_hop_secs: f64,
    /// Fraction of each protocol's bytes that are payload.
    pub protocol_fraction: PerProtocol,
    /// Where these numbers come from, as `topo show` prints it.
    pub source: String,
}

/// NVLink generations' fractions of line rate as NCCL counts them (src/graph/topo.h:
/// `SM80_NVLINK_BW` 20.0, `SM90_NVLINK_BW` 20.6, `SM100_NVLINK_BW` 40.1 GB/s per link,
/// against 25, 25 and 50 GB/s per link and direction).
pub const NVLINK3_FRACTION: f64 = 20.0 / 25.0;
pub const NVLINK4_FRACTION: f64 = 20.6 / 25.0;
pub const NVLINK5_FRACTION: f64 = 40.1 / 50.0;
/// A ConnectX-7 NDR port: 48 of 50 GB/s (NVIDIA/nccl-tests#267, #290).
pub const NIC_FRACTION: f64 = 48.0 / 50.0;
/// NVLS on 8 H100: algorithm bandwidth about 275 GB/s (NVIDIA/nccl-tests#212) with 9/8
/// of the buffer on each 450 GB/s link.
pub const NVLS_FRACTION_HOPPER: f64 = 275.0 * 9.0 / 8.0 / 450.0;

impl Default for Achievable {
    /// Hopper-class GPUs on NVLink4 and 400 Gbit/s InfiniBand.
    fn default() -> Self {
        let us = 1e-6;
        Achievable {
            nvlink: NVLINK4_FRACTION,
            pcie: 12.0 / 15.75,
            nic: NIC_FRACTION,
            fabric: NIC_FRACTION,
            nvls: NVLS_FRACTION_HOPPER,
            sharp: 0.9 * NIC_FRACTION,
            // baseLatencies, Ring row: LL 6.6, LL128 14.0, Simple 8.4 us.
            call_secs: [6.6 * us, 14.0 * us, 8.4 * us],
            // hwLatencies[NVLINK|PCI|NET][RING]: LL, LL128, Simple.
            nvlink_hop_secs: [0.6 * us, 1.9 * us, 3.4 * us],
            pcie_hop_secs: [1.0 * us, 2.5 * us, 5.7 * us],
            net_hop_secs: [2.7 * us, 4.0 * us, 14.0 * us],
            // hwLatencies[NVLINK][NVLS][Simple], hwLatencies[NET][CollNetDirect][Simple].
            nvls_hop_secs: 25.0 * us,
            sharp_hop_secs: 31.0 * us,
            protocol_fraction: [0.5, 0.92, 1.0],
            source: "NCCL 2.30 tuner constants and link bandwidths; NVIDIA's expected NIC and NVLS rates \
                     (docs/sources.md#achievable)"
                .into(),
        }
    }
}

impl Achievable {
    /// Rates and a per-round start-up measured on the machine itself (`railyard
    /// calibrate`): the software that runs there already reaches them, so every fraction
    /// is 1 and every round costs the measured `round_startup_secs`, whatever its hop;
    /// no call latency is added. NCCL's LL and LL128 payload shares are kept, so the
    /// expected time is the Simple protocol's, which is the bound's.
    pub fn measured(round_startup_secs: f64, source: impl Into<String>) -> Self {
        let round = [round_startup_secs; 3];
        Achievable {
            nvlink: 1.0,
            pcie: 1.0,
            nic: 1.0,
            fabric: 1.0,
            nvls: 1.0,
            sharp: 1.0,
            call_secs: [0.0; 3],
            nvlink_hop_secs: round,
            pcie_hop_secs: round,
            net_hop_secs: round,
            nvls_hop_secs: round_startup_secs,
            sharp_hop_secs: round_startup_secs,
            source: source.into(),
            ..Achievable::default()
        }
    }

    /// The fraction of line rate a copy reaches on a link of `class`.
    pub fn fraction(&self, class: LinkClass) -> f64 {
        match class {
            LinkClass::Nvlink => self.nvlink,
            LinkClass::Pcie | LinkClass::Memory | LinkClass::Other => self.pcie,
            LinkClass::Nic => self.nic,
            LinkClass::Fabric => self.fabric,
        }
    }

    /// The fraction of line rate an in-network reduction's stream reaches on a link of
    /// `class`: NVLS on NVLink, SHARP elsewhere.
    pub fn reduction_fraction(&self, class: LinkClass) -> f64 {
        match class {
            LinkClass::Nvlink => self.nvls,
            _ => self.sharp,
        }
    }

    /// A round's latency under `protocol` when its slowest hop is `hop`.
    pub fn hop_secs(&self, hop: Hop, protocol: Protocol) -> f64 {
        let row = match hop {
            Hop::Nvlink => &self.nvlink_hop_secs,
            Hop::Pcie => &self.pcie_hop_secs,
            Hop::Net => &self.net_hop_secs,
        };
        row[protocol.index()]
    }

    /// Every fraction in (0, 1] and every latency in 0..=1 s.
    pub fn validate(&self) -> Result<(), TopologyError> {
        let fractions = [
            ("nvlink", self.nvlink),
            ("pcie", self.pcie),
            ("nic", self.nic),
            ("fabric", self.fabric),
            ("nvls", self.nvls),
            ("sharp", self.sharp),
        ];
        let protocols = Protocol::ALL.iter().map(|p| (p.as_str(), self.protocol_fraction[p.index()]));
        for (name, value) in fractions.into_iter().chain(protocols) {
            if !(value > 0.0 && value <= 1.0) {
                return Err(TopologyError::BadAchievable {
                    field: name.to_string(),
                    message: format!("{value} is not a fraction in (0, 1]"),
                });
            }
        }
        let latencies = [
            ("call", &self.call_secs),
            ("nvlink_hop", &self.nvlink_hop_secs),
            ("pcie_hop", &self.pcie_hop_secs),
            ("net_hop", &self.net_hop_secs),
        ];
        let singles = [("nvls_hop", self.nvls_hop_secs), ("sharp_hop", self.sharp_hop_secs)];
        let all = latencies
            .iter()
            .flat_map(|(n, row)| row.iter().map(move |&v| (*n, v)))
            .chain(singles.iter().map(|&(n, v)| (n, v)));
        for (name, value) in all {
            if !(0.0..=1.0).contains(&value) {
                return Err(TopologyError::BadAchievable {
                    field: name.to_string(),
                    message: format!("{value} s is not a latency from 0 to 1 s"),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_nccls_numbers() {
        let a = Achievable::default();
        a.validate().unwrap();
        // 18 NVLink4 links at NCCL's 20.6 GB/s: the 370.8 GB/s NCCL's ring reaches of 450.
        assert!((a.nvlink * 450.0 - 370.8).abs() < 1e-9);
        // 8-GPU ring all-reduce latency, LL: 6.6 + 14 x 0.6 = 15.0 us (NCCL's table).
        let ll = a.call_secs[0] + 14.0 * a.hop_secs(Hop::Nvlink, Protocol::Ll);
        assert!((ll - 15.0e-6).abs() < 1e-12);
        let bad = Achievable { nic: 1.5, ..Achievable::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("nic"));
    }
}

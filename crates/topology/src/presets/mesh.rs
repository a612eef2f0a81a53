//! A uniform full mesh: P GPUs, each its own server, every pair joined by a dedicated
//! link of B per direction; α per round. On it the per-round model of a schedule reduces
//! to the α-β closed forms of seed 000 §8.1.3 — the check that the two agree.

use super::PresetParams;
use crate::error::TopologyError;
use crate::graph::{DeviceKind, Topology, TopologyBuilder};

#[derive(Debug, Clone, PartialEq)]
pub struct MeshParams {
    pub ranks: usize,
    pub bytes_per_sec: f64,
    pub round_startup_secs: f64,
}

impl MeshParams {
    pub fn from_params(p: &mut PresetParams) -> Result<Self, TopologyError> {
        let params = MeshParams {
            ranks: p.take_usize("ranks", 8)?,
            bytes_per_sec: p.take_bytes_per_sec("bw", 50e9)?,
            round_startup_secs: p.take_secs("alpha", 5e-6)?,
        };
        if params.ranks == 0 || params.ranks > 256 {
            return Err(p.bad("ranks must be 1..=256 (a full mesh has ranks² links)"));
        }
        Ok(params)
    }
}

pub fn mesh(name: &str, p: &MeshParams) -> Result<Topology, TopologyError> {
    let mut b = TopologyBuilder::new(name);
    b.description(format!("full mesh of {} GPUs, {} GB/s per pair per direction", p.ranks, p.bytes_per_sec / 1e9));
    b.round_startup_secs(p.round_startup_secs);
    let gpus: Vec<_> =
        (0..p.ranks).map(|i| b.device(format!("g{i}"), DeviceKind::Gpu, Some(&format!("g{i}")))).collect();
    for (i, &a) in gpus.iter().enumerate() {
        for &c in &gpus[i + 1..] {
            b.duplex(a, c, p.bytes_per_sec, 0.0, &[]);
        }
    }
    b.build()
}

//! The latency of one remote read, stage by stage (seed 001 §7.3.3): the sum of the
//! stages on its critical path; every path's total is a fixed part plus 2L (the wire
//! one way, twice). And when to fetch a snapshot home instead of reading it remotely:
//! T_remote = r·t_remote, T_stage = t_fetch + r·t_local, crossover r = t_fetch / (t_remote − t_local).

use railyard_units::chart::StackedBars;
use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_secs, trim_float};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    pub name: String,
    /// Category for the stacked view: software submit, PCIe, on-chip bus, NIC pipeline, wire, memory & completion.
    pub category: String,
    /// A fixed time...
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "opt_secs")]
    pub secs: Option<f64>,
    /// ...or clock cycles of the NIC pipeline...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles: Option<f64>,
    /// ...or one traversal of the wire (L).
    #[serde(default)]
    pub wire: bool,
}

fn opt_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    quantity::secs(d).map(Some)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathSpec {
    pub name: String,
    pub stages: Vec<Stage>,
    /// A simulated or measured total to compare with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "opt_secs")]
    pub measured_secs: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReuseInput {
    #[serde(deserialize_with = "quantity::bytes")]
    pub snapshot_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub network_bytes_per_sec: f64,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub local_bytes_per_sec: f64,
    /// Start-up of a remote read and of writing the fetched copy locally.
    #[serde(deserialize_with = "quantity::secs")]
    pub remote_startup_secs: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub local_startup_secs: f64,
    /// Share of the snapshot each use touches (the fetch always copies all of it).
    pub access_fractions: Vec<f64>,
    /// Use counts to total up.
    pub uses: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteReadInput {
    #[serde(deserialize_with = "quantity::non_negative")]
    pub clock_hz: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub wire_one_way_secs: f64,
    pub paths: Vec<PathSpec>,
    /// Wire delays L to sweep for the fixed + 2L lines.
    #[serde(deserialize_with = "quantity::secs_list")]
    pub wire_sweep_secs: Vec<f64>,
    pub reuse: ReuseInput,
}

fn st(name: &str, category: &str, ns: f64) -> Stage {
    Stage { name: name.into(), category: category.into(), secs: Some(ns * 1e-9), cycles: None, wire: false }
}
fn cyc(name: &str, cycles: f64) -> Stage {
    Stage { name: name.into(), category: "NIC pipeline".into(), secs: None, cycles: Some(cycles), wire: false }
}
fn wire(name: &str) -> Stage {
    Stage { name: name.into(), category: "wire".into(), secs: None, cycles: None, wire: true }
}

impl Default for RemoteReadInput {
    fn default() -> Self {
        // seed 001 §7.3.3 stage table (OpenURMA table 7 values, footnote 32).
        let (sw, pcie, chip, mem) = ("software submit", "PCIe traversal", "on-chip bus", "memory & completion");
        let pcie_nic = |n: f64, doorbell_and_descriptor: bool| {
            let mut s = vec![st("library submit", sw, 50.0), st("build descriptor", sw, 30.0)];
            if doorbell_and_descriptor {
                s.push(st("doorbell write", pcie, 150.0));
                s.push(st("NIC DMA-reads the descriptor", pcie, 500.0));
            }
            s.extend([
                cyc("NIC send pipeline", n),
                wire("wire out"),
                cyc("target NIC receive pipeline", n),
                st("target NIC DMA-reads host memory", pcie, 500.0),
                st("target DRAM row hit", mem, 30.0),
                cyc("target NIC sends the response", n),
                wire("wire back"),
                cyc("NIC receives the response", n),
                st("payload DMA write", pcie, 250.0),
                st("completion record DMA write", pcie, 250.0),
                st("completion queue poll", mem, 70.0),
                st("library poll", mem, 30.0),
                st("in-order sequence allocation", mem, 50.0),
            ]);
            s
        };
        let on_chip = |n: f64, software: bool| {
            let mut s = Vec::new();
            if software {
                s.push(st("library submit", sw, 50.0));
                s.push(st("build descriptor", sw, 30.0));
            }
            s.extend([
                st("on-chip bus submit", chip, 30.0),
                cyc("NIC send pipeline", n),
                wire("wire out"),
                cyc("target NIC receive pipeline", n),
                st("target on-chip bus access", chip, 30.0),
                st("target DRAM row hit", mem, 30.0),
                cyc("target NIC sends the response", n),
                wire("wire back"),
                cyc("NIC receives the response", n),
                st("on-chip bus completion", chip, 30.0),
            ]);
            if software {
                s.push(st("completion queue poll", mem, 5.0));
                s.push(st("library poll", mem, 30.0));
            }
            s
        };
        RemoteReadInput {
            clock_hz: 322e6,
            wire_one_way_secs: 100e-9,
            paths: vec![
                PathSpec { name: "PCIe NIC".into(), stages: pcie_nic(9.0, true), measured_secs: Some(2236e-9) },
                PathSpec { name: "UB async read".into(), stages: on_chip(25.0, true), measured_secs: Some(757e-9) },
                PathSpec { name: "UB load".into(), stages: on_chip(8.0, false), measured_secs: Some(500e-9) },
                PathSpec {
                    name: "PCIe NIC, descriptors built on the NIC processor".into(),
                    stages: pcie_nic(9.0, false),
                    measured_secs: None,
                },
            ],
            wire_sweep_secs: vec![50e-9, 100e-9, 200e-9, 300e-9, 400e-9, 500e-9],
            reuse: ReuseInput {
                // footnote 16: 144 MiB BF16 KV of 1024 tokens; 50 GB/s NIC; HBM 3350 GB/s.
                snapshot_bytes: 144.0 * 1048576.0,
                network_bytes_per_sec: 50e9,
                local_bytes_per_sec: 3350e9,
                remote_startup_secs: 5e-6,
                local_startup_secs: 1e-6,
                access_fractions: vec![1.0, 0.1],
                uses: vec![1, 4],
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageTime {
    pub name: String,
    pub category: String,
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathResult {
    pub name: String,
    pub stages: Vec<StageTime>,
    pub total_secs: f64,
    /// total − 2L
    pub fixed_secs: f64,
    /// (category, secs), in first-appearance order.
    pub by_category: Vec<(String, f64)>,
    pub measured_secs: Option<f64>,
    pub measured_minus_model_secs: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReuseResult {
    pub access_fraction: f64,
    pub remote_read_secs: f64,
    pub fetch_secs: f64,
    pub local_read_secs: f64,
    /// r where both plans cost the same.
    pub crossover_uses: f64,
    /// The first whole number of uses at which fetching wins.
    pub fetch_wins_from_use: u64,
    /// (uses, remote total, fetch total)
    pub totals: Vec<(u32, f64, f64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemoteReadOutput {
    pub paths: Vec<PathResult>,
    /// (L, total of each path)
    pub wire_sweep: Vec<(f64, Vec<f64>)>,
    pub reuse: Vec<ReuseResult>,
}

pub fn remote_read(input: &RemoteReadInput) -> Result<RemoteReadOutput, NetModelError> {
    let l = input.wire_one_way_secs;
    let mut paths = Vec::new();
    for (p, path) in input.paths.iter().enumerate() {
        let mut stages = Vec::new();
        let mut wires = 0.0;
        for (s, stage) in path.stages.iter().enumerate() {
            let field = format!("paths[{p}].stages[{s}]");
            let secs = match (stage.secs, stage.cycles, stage.wire) {
                (Some(t), None, false) => t,
                (None, Some(c), false) => {
                    positive("clock_hz", input.clock_hz)?;
                    c / input.clock_hz
                }
                (None, None, true) => {
                    wires += 1.0;
                    l
                }
                _ => {
                    return Err(NetModelError::BadInput {
                        field,
                        message: "give exactly one of secs, cycles or wire = true".into(),
                    })
                }
            };
            stages.push(StageTime { name: stage.name.clone(), category: stage.category.clone(), secs });
        }
        let total: f64 = stages.iter().map(|s| s.secs).sum();
        let mut by_category: Vec<(String, f64)> = Vec::new();
        for s in &stages {
            match by_category.iter_mut().find(|(c, _)| *c == s.category) {
                Some((_, t)) => *t += s.secs,
                None => by_category.push((s.category.clone(), s.secs)),
            }
        }
        paths.push(PathResult {
            name: path.name.clone(),
            stages,
            total_secs: total,
            fixed_secs: total - wires * l,
            by_category,
            measured_secs: path.measured_secs,
            measured_minus_model_secs: path.measured_secs.map(|m| m - total),
        });
    }
    let wire_sweep = input
        .wire_sweep_secs
        .iter()
        .map(|&w| {
            (
                w,
                paths
                    .iter()
                    .map(|p| p.fixed_secs + (p.total_secs - p.fixed_secs) / l.max(f64::MIN_POSITIVE) * w)
                    .collect(),
            )
        })
        .collect();
    let r = &input.reuse;
    positive("reuse.network_bytes_per_sec", r.network_bytes_per_sec)?;
    positive("reuse.local_bytes_per_sec", r.local_bytes_per_sec)?;
    let remote_full = r.remote_startup_secs + r.snapshot_bytes / r.network_bytes_per_sec;
    let local_full = r.local_startup_secs + r.snapshot_bytes / r.local_bytes_per_sec;
    // Fetch = remote read of the whole snapshot + writing it locally (with its own start-up).
    let fetch = remote_full + r.remote_startup_secs + r.snapshot_bytes / r.local_bytes_per_sec;
    let mut reuse = Vec::new();
    for (i, &f) in r.access_fractions.iter().enumerate() {
        if !(f > 0.0 && f <= 1.0) {
            return Err(NetModelError::BadInput {
                field: format!("reuse.access_fractions[{i}]"),
                message: "must be in (0, 1]".into(),
            });
        }
        // footnote 16: a partial access scales the per-use cost; the fetch still copies everything.
        let (remote, local) = (remote_full * f, local_full * f);
        let crossover = if remote > local { fetch / (remote - local) } else { f64::INFINITY };
        reuse.push(ReuseResult {
            access_fraction: f,
            remote_read_secs: remote,
            fetch_secs: fetch,
            local_read_secs: local,
            crossover_uses: crossover,
            fetch_wins_from_use: if crossover.is_finite() { crossover.floor() as u64 + 1 } else { 0 },
            totals: r.uses.iter().map(|&u| (u, u as f64 * remote, fetch + u as f64 * local)).collect(),
        });
    }
    Ok(RemoteReadOutput { paths, wire_sweep, reuse })
}

impl RemoteReadOutput {
    pub fn markdown(&self, input: &RemoteReadInput) -> String {
        let mut out = format!(
            "# One 64 B remote read, stage by stage\n\nWire one way L = {}; NIC pipeline cycles at {} MHz.\n\n",
            format_secs(input.wire_one_way_secs),
            trim_float(input.clock_hz / 1e6, 4)
        );
        let mut t = Table::new(["path", "total (model)", "fixed (total − 2L)", "measured", "measured − model"]);
        for p in &self.paths {
            t.row([
                p.name.clone(),
                format!("{:.0} ns", p.total_secs * 1e9),
                format!("{:.0} ns", p.fixed_secs * 1e9),
                p.measured_secs.map_or("-".into(), |m| format!("{:.0} ns", m * 1e9)),
                p.measured_minus_model_secs.map_or("-".into(), |d| format!("{:.0} ns", d * 1e9)),
            ]);
        }
        out.push_str(&t.render());
        out.push_str("\nBy category (ns):\n\n");
        let mut cats: Vec<String> = Vec::new();
        for p in &self.paths {
            for (c, _) in &p.by_category {
                if !cats.contains(c) {
                    cats.push(c.clone());
                }
            }
        }
        let mut c = Table::new(std::iter::once("path".to_string()).chain(cats.iter().cloned()));
        for p in &self.paths {
            c.row(std::iter::once(p.name.clone()).chain(cats.iter().map(|cat| {
                p.by_category.iter().find(|(x, _)| x == cat).map_or("-".into(), |(_, s)| format!("{:.0}", s * 1e9))
            })));
        }
        out.push_str(&c.render());
        out.push_str("\nFetch home or read remotely (T_remote = r·t_remote, T_fetch = t_fetch + r·t_local):\n\n");
        let mut r = Table::new([
            "access",
            "remote read",
            "fetch",
            "local read",
            "crossover r",
            "fetch wins from use",
            "totals (uses: remote / fetch)",
        ]);
        for x in &self.reuse {
            let totals: Vec<String> =
                x.totals.iter().map(|(u, a, b)| format!("{u}: {} / {}", format_secs(*a), format_secs(*b))).collect();
            r.row([
                format!(
                    "{}% of {}",
                    trim_float(x.access_fraction * 100.0, 3),
                    format_bytes(input.reuse.snapshot_bytes)
                ),
                format_secs(x.remote_read_secs),
                format_secs(x.fetch_secs),
                format_secs(x.local_read_secs),
                trim_float(x.crossover_uses, 3),
                x.fetch_wins_from_use.to_string(),
                totals.join("; "),
            ]);
        }
        out.push_str(&r.render());
        out
    }
}

/// The model's chart (`railyard model remote-read --svg`).
pub fn chart(o: &RemoteReadOutput, _: &RemoteReadInput) -> String {
    let mut names: Vec<String> = Vec::new();
    for p in &o.paths {
        for (c, _) in &p.by_category {
            if !names.contains(c) {
                names.push(c.clone());
            }
        }
    }
    StackedBars {
        title: "One 64 B remote read: critical-path stages by category".into(),
        y_label: "latency (ns)".into(),
        categories: o.paths.iter().map(|p| p.name.clone()).collect(),
        segments: names
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    o.paths
                        .iter()
                        .map(|p| p.by_category.iter().find(|(c, _)| c == n).map_or(0.0, |(_, s)| s * 1e9))
                        .collect(),
                )
            })
            .collect(),
    }
    .svg()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_7_3_3() {
        let o = remote_read(&RemoteReadInput::default()).unwrap();
        let ns: Vec<f64> = o.paths.iter().map(|p| (p.total_secs * 1e9).round()).collect();
        assert_eq!(ns, vec![2222.0, 746.0, 419.0, 1572.0]);
        let fixed: Vec<f64> = o.paths.iter().map(|p| (p.fixed_secs * 1e9).round()).collect();
        assert_eq!(&fixed[..3], &[2022.0, 546.0, 219.0]);
        let pcie = o.paths[0].by_category.iter().find(|(c, _)| c == "PCIe traversal").unwrap().1;
        assert!((pcie * 1e9 - 1650.0).abs() < 1e-6);
        let reuse = &o.reuse[0];
        assert!((reuse.remote_read_secs * 1e3 - 3.025).abs() < 0.001);
        assert!((reuse.fetch_secs * 1e3 - 3.075).abs() < 0.001);
        assert!((reuse.local_read_secs * 1e3 - 0.046).abs() < 0.0005);
        assert!((reuse.crossover_uses - 1.03).abs() < 0.005);
        assert_eq!(reuse.fetch_wins_from_use, 2);
        let partial = &o.reuse[1];
        assert!((partial.crossover_uses - 10.3).abs() < 0.05);
        assert_eq!(partial.fetch_wins_from_use, 11);
    }
}

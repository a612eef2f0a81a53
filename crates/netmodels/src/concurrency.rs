//! Concurrency and throughput (seed 001 §7.3.4): keeping a path of bandwidth B busy
//! while each request holds its slot for T needs N ≥ ⌈BT/m⌉ requests in flight; and
//! B_eff ≤ min(B_path, N·m/T, m/δ) — the path, the slots, or the issue rate binds.

use railyard_units::chart::{LineChart, Mark, Series};
use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyInput {
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub path_bytes_per_sec: f64,
    /// m: payload per request.
    #[serde(deserialize_with = "quantity::bytes")]
    pub request_bytes: f64,
    /// T: from allocating a slot to releasing it.
    #[serde(deserialize_with = "quantity::secs")]
    pub slot_secs: f64,
    /// δ: shortest interval between two issued requests (0: no issue limit).
    #[serde(deserialize_with = "quantity::secs")]
    pub issue_interval_secs: f64,
    /// Slot counts to evaluate.
    pub slots: Vec<u64>,
    /// Request sizes for the sweep over sizes (at the largest slot count).
    #[serde(deserialize_with = "quantity::bytes_list")]
    pub sweep_request_bytes: Vec<f64>,
}

impl Default for ConcurrencyInput {
    fn default() -> Self {
        // seed 001 例題 7.3: 256 B requests, 2 µs slots, 50 GB/s, δ = 18.6 ns.
        ConcurrencyInput {
            path_bytes_per_sec: 50e9,
            request_bytes: 256.0,
            slot_secs: 2e-6,
            // 6 cycles per request at 322 MHz (RoCE RC in the OpenURMA toolchain): 18.63 ns.
            issue_interval_secs: 6.0 / 322e6,
            slots: vec![1, 16, 64, 128, 256, 391, 512],
            sweep_request_bytes: vec![64.0, 256.0, 1024.0, 4096.0],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlotCase {
    pub slots: u64,
    /// N·m/T
    pub slot_bound_bytes_per_sec: f64,
    /// min(B_path, N·m/T): the curve without the issue limit.
    pub without_issue_limit_bytes_per_sec: f64,
    pub effective_bytes_per_sec: f64,
    /// "path", "slots" or "issue rate"
    pub binding: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeCase {
    pub request_bytes: f64,
    pub slots_needed: u64,
    /// m/δ
    pub issue_bound_bytes_per_sec: f64,
    /// The longest δ that still reaches the path bandwidth: m/B.
    pub issue_interval_for_path_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConcurrencyOutput {
    /// B·T: bytes in flight to keep the path busy.
    pub bandwidth_delay_bytes: f64,
    /// ⌈BT/m⌉
    pub slots_needed: u64,
    /// m/δ
    pub issue_bound_bytes_per_sec: f64,
    pub cases: Vec<SlotCase>,
    pub sizes: Vec<SizeCase>,
}

fn bound(path: f64, slots: f64, issue: f64) -> (f64, &'static str) {
    let mut best = (path, "path");
    if slots < best.0 {
        best = (slots, "slots");
    }
    if issue < best.0 {
        best = (issue, "issue rate");
    }
    best
}

pub fn concurrency(input: &ConcurrencyInput) -> Result<ConcurrencyOutput, NetModelError> {
    positive("path_bytes_per_sec", input.path_bytes_per_sec)?;
    positive("request_bytes", input.request_bytes)?;
    positive("slot_secs", input.slot_secs)?;
    let issue = |m: f64| if input.issue_interval_secs > 0.0 { m / input.issue_interval_secs } else { f64::INFINITY };
    let bdp = input.path_bytes_per_sec * input.slot_secs;
    let needed = |m: f64| (bdp / m - 1e-9).ceil() as u64;
    let cases = input
        .slots
        .iter()
        .map(|&n| {
            let slot_bound = n as f64 * input.request_bytes / input.slot_secs;
            let (eff, binding) = bound(input.path_bytes_per_sec, slot_bound, issue(input.request_bytes));
            SlotCase {
                slots: n,
                slot_bound_bytes_per_sec: slot_bound,
                without_issue_limit_bytes_per_sec: slot_bound.min(input.path_bytes_per_sec),
                effective_bytes_per_sec: eff,
                binding,
            }
        })
        .collect();
    let mut sizes = Vec::new();
    for (i, &m) in input.sweep_request_bytes.iter().enumerate() {
        positive(&format!("sweep_request_bytes[{i}]"), m)?;
        sizes.push(SizeCase {
            request_bytes: m,
            slots_needed: needed(m),
            issue_bound_bytes_per_sec: issue(m),
            issue_interval_for_path_secs: m / input.path_bytes_per_sec,
        });
    }
    Ok(ConcurrencyOutput {
        bandwidth_delay_bytes: bdp,
        slots_needed: needed(input.request_bytes),
        issue_bound_bytes_per_sec: issue(input.request_bytes),
        cases,
        sizes,
    })
}

impl ConcurrencyOutput {
    pub fn markdown(&self, input: &ConcurrencyInput) -> String {
        let mut out = format!(
            "# Requests in flight\n\nB·T = {} bytes in flight; N ≥ ⌈BT/m⌉ = **{}** slots of {} each. \
             Issue limit m/δ = {}.\n\nB_eff = min(B_path, N·m/T, m/δ):\n\n",
            self.bandwidth_delay_bytes,
            self.slots_needed,
            format_bytes(input.request_bytes),
            format_bytes_per_sec(self.issue_bound_bytes_per_sec)
        );
        let mut t = Table::new(["slots", "N·m/T", "without issue limit", "B_eff", "binding"]);
        for c in &self.cases {
            t.row([
                c.slots.to_string(),
                format_bytes_per_sec(c.slot_bound_bytes_per_sec),
                format_bytes_per_sec(c.without_issue_limit_bytes_per_sec),
                format_bytes_per_sec(c.effective_bytes_per_sec),
                c.binding.to_string(),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
        let mut s = Table::new(["request size", "slots needed", "m/δ", "δ that reaches the path"]);
        for c in &self.sizes {
            s.row([
                format_bytes(c.request_bytes),
                c.slots_needed.to_string(),
                format_bytes_per_sec(c.issue_bound_bytes_per_sec),
                format_secs(c.issue_interval_for_path_secs),
            ]);
        }
        out.push_str(&s.render());
        out
    }
}

/// The model's chart (`railyard model concurrency --svg`).
pub fn chart(o: &ConcurrencyOutput, i: &ConcurrencyInput) -> String {
    let max_slots = i.slots.iter().copied().max().unwrap_or(1).max(o.slots_needed + o.slots_needed / 4);
    let grid: Vec<u64> = (1..=60).map(|k| (k * max_slots).div_ceil(60)).collect();
    let sweep = |with_issue: bool| -> Vec<(f64, f64)> {
        grid.iter()
            .map(|&n| {
                let slot = n as f64 * i.request_bytes / i.slot_secs;
                let mut b = slot.min(i.path_bytes_per_sec);
                if with_issue {
                    b = b.min(o.issue_bound_bytes_per_sec);
                }
                (n as f64, b / 1e9)
            })
            .collect()
    };
    LineChart {
        title: format!(
            "Effective bandwidth vs request slots ({} B requests, T = {} us)",
            i.request_bytes,
            i.slot_secs * 1e6
        ),
        x_label: "slots in flight N".into(),
        y_label: "effective bandwidth (GB/s)".into(),
        log_x: false,
        series: vec![
            Series { name: "path and slots: min(B, Nm/T)".into(), points: sweep(false) },
            Series { name: "with issue rate: min(B, Nm/T, m/δ)".into(), points: sweep(true) },
        ],
        marks: vec![Mark {
            x: o.slots_needed as f64,
            y: i.path_bytes_per_sec / 1e9,
            label: format!("N = ⌈BT/m⌉ = {}", o.slots_needed),
        }],
    }
    .svg()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_example_7_3() {
        let o = concurrency(&ConcurrencyInput::default()).unwrap();
        assert_eq!(o.slots_needed, 391);
        let c128 = o.cases.iter().find(|c| c.slots == 128).unwrap();
        assert!((c128.slot_bound_bytes_per_sec / 1e9 - 16.384).abs() < 1e-9); // 16.4 GB/s
        assert!((c128.effective_bytes_per_sec / 1e9 - 13.74).abs() < 0.01); // 13.7 GB/s, issue-bound
        assert_eq!(c128.binding, "issue rate");
        let c1 = o.cases.iter().find(|c| c.slots == 1).unwrap();
        assert!((c1.effective_bytes_per_sec / 1e9 - 0.128).abs() < 1e-9);
        let k4 = o.sizes.iter().find(|s| s.request_bytes == 4096.0).unwrap();
        assert_eq!(k4.slots_needed, 25);
        assert!((k4.issue_interval_for_path_secs * 1e9 - 81.92).abs() < 1e-6); // ≤ 82 ns
        assert!((k4.issue_bound_bytes_per_sec / 1e9 - 219.8).abs() < 0.1); // ≈ 220 GB/s
    }
}

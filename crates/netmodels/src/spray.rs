//! Packet spraying (seed 001 §7.5.3, footnote 38): one message's packets round-robin
//! over paths of different delays. Completion = per-path serialisation + the slowest
//! path's delay; against one path, spraying saves serialisation and pays the delay
//! spread, so it stops paying when the slowest delay reaches single-path time minus
//! per-path serialisation; the receiver buffers what arrives ahead of a gap.

use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use crate::multipath::packet_count;
use crate::packets::{deliver, round_robin, Path};
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs, trim_float};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SprayInput {
    #[serde(deserialize_with = "quantity::bytes")]
    pub message_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub packet_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub path_bytes_per_sec: f64,
    /// One delay per path.
    #[serde(deserialize_with = "quantity::secs_list")]
    pub path_delays_secs: Vec<f64>,
}

impl Default for SprayInput {
    fn default() -> Self {
        // seed 001 §7.5.3: 8 MiB (1024 BF16 hidden vectors) in 4 KiB packets over eight
        // 50 GB/s paths of 1..8 µs.
        SprayInput {
            message_bytes: 8.0 * 1048576.0,
            packet_bytes: 4096.0,
            path_bytes_per_sec: 50e9,
            path_delays_secs: (1..=8).map(|us| us as f64 * 1e-6).collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SprayOutput {
    pub packets: usize,
    pub per_path_serialisation_secs: f64,
    pub completion_secs: f64,
    /// All packets on the fastest path.
    pub single_path_secs: f64,
    /// The slowest path delay at which spraying is no faster than one path.
    pub break_even_slowest_delay_secs: f64,
    pub peak_reorder_packets: usize,
    pub peak_reorder_bytes: f64,
}

pub fn spray(input: &SprayInput) -> Result<SprayOutput, NetModelError> {
    positive("path_bytes_per_sec", input.path_bytes_per_sec)?;
    if input.path_delays_secs.is_empty() {
        return Err(NetModelError::BadInput {
            field: "path_delays_secs".into(),
            message: "needs at least one path".into(),
        });
    }
    let n = packet_count(input.message_bytes, input.packet_bytes)?;
    let paths: Vec<Path> = input
        .path_delays_secs
        .iter()
        .map(|&d| Path { bytes_per_sec: input.path_bytes_per_sec, delay_secs: d })
        .collect();
    let sprayed = deliver(input.message_bytes, input.packet_bytes, &paths, &round_robin(n, paths.len()), &[]);
    let fastest = input.path_delays_secs.iter().copied().fold(f64::INFINITY, f64::min);
    let single = input.message_bytes / input.path_bytes_per_sec + fastest;
    let per_path_packets = n.div_ceil(paths.len());
    let per_path = (per_path_packets as f64 * input.packet_bytes).min(input.message_bytes) / input.path_bytes_per_sec;
    Ok(SprayOutput {
        packets: n,
        per_path_serialisation_secs: per_path,
        completion_secs: sprayed.completion_secs,
        single_path_secs: single,
        break_even_slowest_delay_secs: single - per_path,
        peak_reorder_packets: sprayed.peak_reorder_packets,
        peak_reorder_bytes: sprayed.peak_reorder_bytes,
    })
}

impl SprayOutput {
    pub fn markdown(&self, input: &SprayInput) -> String {
        let mut out = format!(
            "# Packet spraying\n\n{} as {} packets over {} paths of {}.\n\n",
            format_bytes(input.message_bytes),
            self.packets,
            input.path_delays_secs.len(),
            format_bytes_per_sec(input.path_bytes_per_sec)
        );
        let mut t = Table::new(["quantity", "value"]);
        t.row(["serialisation per path".to_string(), format_secs(self.per_path_serialisation_secs)]);
        t.row(["sprayed, all delivered".to_string(), format_secs(self.completion_secs)]);
        t.row(["one path".to_string(), format_secs(self.single_path_secs)]);
        t.row([
            "spraying stops paying at a slowest delay of".to_string(),
            format_secs(self.break_even_slowest_delay_secs),
        ]);
        t.row([
            "peak reorder buffer".to_string(),
            format!("{} packets, {} MB", self.peak_reorder_packets, trim_float(self.peak_reorder_bytes / 1e6, 3)),
        ]);
        out.push_str(&t.render());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_7_5_3_spray() {
        let o = spray(&SprayInput::default()).unwrap();
        assert_eq!(o.packets, 2048);
        assert!((o.per_path_serialisation_secs * 1e6 - 20.97).abs() < 0.01);
        assert!((o.completion_secs * 1e6 - 28.97).abs() < 0.01);
        assert!((o.single_path_secs * 1e6 - 168.77).abs() < 0.01);
        assert!((o.break_even_slowest_delay_secs * 1e6 - 147.8).abs() < 0.05);
        assert_eq!(o.peak_reorder_packets, 339);
        assert!((o.peak_reorder_bytes / 1e6 - 1.39).abs() < 0.005);
    }
}

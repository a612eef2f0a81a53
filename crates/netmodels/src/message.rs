//! One message and a pipeline (seed 001 §7.2.2): T = α + M/B; start-up equals transfer
//! at M = αB; p equal stages and m independent micro-batches of τ each take
//! (m + p − 1)τ with utilisation m/(m + p − 1).

use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_secs, trim_float};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageInput {
    #[serde(deserialize_with = "quantity::secs")]
    pub alpha_secs: f64,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub bandwidth_bytes_per_sec: f64,
    /// Message sizes to cost.
    #[serde(deserialize_with = "quantity::bytes_list")]
    pub message_bytes: Vec<f64>,
    pub pipeline_stages: u32,
    pub micro_batches: u32,
    #[serde(deserialize_with = "quantity::secs")]
    pub stage_secs: f64,
    /// Utilisation to reach: the micro-batches needed are printed.
    #[serde(deserialize_with = "quantity::non_negative")]
    pub target_utilisation: f64,
}

impl Default for MessageInput {
    fn default() -> Self {
        // seed 001 §7.2.2: 5 µs start-up, 50 GB/s NIC; 64 MiB prefill, 8 KiB decode;
        // 4 stages of 1 ms, 8 micro-batches, 90% target.
        MessageInput {
            alpha_secs: 5e-6,
            bandwidth_bytes_per_sec: 50e9,
            message_bytes: vec![64.0 * 1048576.0, 8192.0],
            pipeline_stages: 4,
            micro_batches: 8,
            stage_secs: 1e-3,
            target_utilisation: 0.9,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageCost {
    pub bytes: f64,
    pub total_secs: f64,
    pub transfer_secs: f64,
    /// α / T
    pub startup_fraction: f64,
    /// "bandwidth" when M > αB, else "start-up"
    pub dominated_by: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageOutput {
    pub messages: Vec<MessageCost>,
    /// αB: the size at which start-up equals transfer time.
    pub crossover_bytes: f64,
    pub pipeline_secs: f64,
    pub pipeline_utilisation: f64,
    pub micro_batches_for_target: u64,
}

pub fn message(input: &MessageInput) -> Result<MessageOutput, NetModelError> {
    positive("bandwidth_bytes_per_sec", input.bandwidth_bytes_per_sec)?;
    if input.pipeline_stages == 0 {
        return Err(NetModelError::BadInput { field: "pipeline_stages".into(), message: "must be at least 1".into() });
    }
    if !(0.0..1.0).contains(&input.target_utilisation) {
        return Err(NetModelError::BadInput {
            field: "target_utilisation".into(),
            message: "must be in [0, 1)".into(),
        });
    }
    let crossover_bytes = input.alpha_secs * input.bandwidth_bytes_per_sec;
    let messages = input
        .message_bytes
        .iter()
        .map(|&bytes| {
            let transfer_secs = bytes / input.bandwidth_bytes_per_sec;
            let total_secs = input.alpha_secs + transfer_secs;
            MessageCost {
                bytes,
                total_secs,
                transfer_secs,
                startup_fraction: if total_secs > 0.0 { input.alpha_secs / total_secs } else { 0.0 },
                dominated_by: if bytes > crossover_bytes { "bandwidth" } else { "start-up" },
            }
        })
        .collect();
    let (p, m) = (input.pipeline_stages as f64, input.micro_batches as f64);
    // m/(m+p−1) ≥ U  <=>  m ≥ U(p−1)/(1−U)
    let u = input.target_utilisation;
    let needed = (u * (p - 1.0) / (1.0 - u) - 1e-9).ceil().max(0.0) as u64;
    Ok(MessageOutput {
        messages,
        crossover_bytes,
        pipeline_secs: (m + p - 1.0) * input.stage_secs,
        pipeline_utilisation: if m + p - 1.0 > 0.0 { m / (m + p - 1.0) } else { 0.0 },
        micro_batches_for_target: needed,
    })
}

impl MessageOutput {
    pub fn markdown(&self, input: &MessageInput) -> String {
        let mut out = String::from("# One message and a pipeline\n\nT = α + M/B\n\n");
        let mut t = Table::new(["message", "time", "transfer", "start-up share", "limited by"]);
        for m in &self.messages {
            t.row([
                format_bytes(m.bytes),
                format_secs(m.total_secs),
                format_secs(m.transfer_secs),
                format!("{}%", trim_float(m.startup_fraction * 100.0, 3)),
                m.dominated_by.to_string(),
            ]);
        }
        out.push_str(&t.render());
        out.push_str(&format!(
            "\nStart-up equals transfer at M = αB = {} bytes ({}): above it raise bandwidth, below it send fewer messages.\n\n",
            trim_float(self.crossover_bytes, 6),
            format_bytes(self.crossover_bytes)
        ));
        out.push_str(&format!(
            "Pipeline of {} stages x {} micro-batches of {}: (m+p−1)τ = {}, utilisation m/(m+p−1) = {}%; \
             {}% needs at least {} micro-batches.\n",
            input.pipeline_stages,
            input.micro_batches,
            format_secs(input.stage_secs),
            format_secs(self.pipeline_secs),
            trim_float(self.pipeline_utilisation * 100.0, 3),
            trim_float(input.target_utilisation * 100.0, 3),
            self.micro_batches_for_target
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_7_2_2() {
        let o = message(&MessageInput::default()).unwrap();
        assert!((o.messages[0].total_secs * 1e3 - 1.347).abs() < 0.001); // ≈ 1.3 ms
        assert!((o.messages[1].total_secs * 1e6 - 5.164).abs() < 0.001); // ≈ 5.2 µs
        assert!((o.messages[1].startup_fraction - 0.968).abs() < 0.001); // ≈ 97%
        assert!((o.crossover_bytes - 250_000.0).abs() < 1e-6); // ≈ 244 KiB
        assert!((o.pipeline_secs - 11e-3).abs() < 1e-12);
        assert!((o.pipeline_utilisation - 8.0 / 11.0).abs() < 1e-12); // ≈ 73%
        assert_eq!(o.micro_batches_for_target, 27);
    }
}

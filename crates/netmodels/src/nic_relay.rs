//! Borrowing neighbour NICs through NVLink (seed 001 §7.2.4): the direct NIC and the
//! relay paths run in parallel, but a relay path's bytes cross NVLink and then the
//! borrowed NICs in series, so B_eff = min(B_D, direct + min(local, Σ relayed));
//! and small messages hit the NIC's issue rate before its bandwidth: the crossover
//! message size is B·δ.

use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicRelayInput {
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub direct_bytes_per_sec: f64,
    /// Bandwidth of each borrowed neighbour NIC.
    #[serde(deserialize_with = "quantity::bytes_per_sec_list")]
    pub relay_nics_bytes_per_sec: Vec<f64>,
    /// NVLink to the neighbour GPUs (what is left of it for relaying).
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub local_bytes_per_sec: f64,
    /// Downstream limits B_D (network and receiver) to evaluate.
    #[serde(deserialize_with = "quantity::bytes_per_sec_list")]
    pub downstream_bytes_per_sec: Vec<f64>,
    #[serde(deserialize_with = "quantity::bytes")]
    pub payload_bytes: f64,
    /// δ: the shortest interval between two requests a NIC issues.
    #[serde(deserialize_with = "quantity::secs")]
    pub issue_interval_secs: f64,
    /// Message sizes to compare with the issue-rate crossover.
    #[serde(deserialize_with = "quantity::bytes_list")]
    pub message_bytes: Vec<f64>,
}

impl Default for NicRelayInput {
    fn default() -> Self {
        // seed 001 §7.2.4 and footnote 13: direct 50 GB/s, two 50 GB/s neighbours over
        // 450 GB/s NVLink, 1.125 GiB payload; δ = 18.6 ns (RoCE RC); MoE hidden 7168 in FP8 / BF16.
        NicRelayInput {
            direct_bytes_per_sec: 50e9,
            relay_nics_bytes_per_sec: vec![50e9, 50e9],
            local_bytes_per_sec: 450e9,
            downstream_bytes_per_sec: vec![50e9, 100e9, 150e9, 200e9],
            payload_bytes: 1.125 * 1073741824.0,
            // 6 cycles per request at 322 MHz (RoCE RC in the OpenURMA toolchain): 18.63 ns.
            issue_interval_secs: 6.0 / 322e6,
            message_bytes: vec![7168.0, 14336.0],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelayCase {
    pub downstream_bytes_per_sec: f64,
    pub effective_bytes_per_sec: f64,
    pub payload_secs: f64,
    /// "downstream", "direct + relay" (the senders' side)
    pub limited_by: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageRate {
    pub bytes: f64,
    /// m/δ
    pub issue_bound_bytes_per_sec: f64,
    pub limited_by: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NicRelayOutput {
    /// direct + min(local, Σ relayed)
    pub sender_side_bytes_per_sec: f64,
    pub relay_bytes_per_sec: f64,
    pub cases: Vec<RelayCase>,
    /// 1/δ
    pub requests_per_sec: f64,
    /// B·δ: below it the issue rate binds before the bandwidth.
    pub crossover_bytes: f64,
    pub messages: Vec<MessageRate>,
}

pub fn nic_relay(input: &NicRelayInput) -> Result<NicRelayOutput, NetModelError> {
    positive("direct_bytes_per_sec", input.direct_bytes_per_sec)?;
    positive("issue_interval_secs", input.issue_interval_secs)?;
    let relayed: f64 = input.relay_nics_bytes_per_sec.iter().sum();
    let relay = input.local_bytes_per_sec.min(relayed);
    let sender = input.direct_bytes_per_sec + relay;
    let mut cases = Vec::new();
    for (i, &d) in input.downstream_bytes_per_sec.iter().enumerate() {
        positive(&format!("downstream_bytes_per_sec[{i}]"), d)?;
        let eff = d.min(sender);
        cases.push(RelayCase {
            downstream_bytes_per_sec: d,
            effective_bytes_per_sec: eff,
            payload_secs: input.payload_bytes / eff,
            limited_by: if d <= sender { "downstream" } else { "direct + relay" },
        });
    }
    let crossover = input.direct_bytes_per_sec * input.issue_interval_secs;
    let messages = input
        .message_bytes
        .iter()
        .map(|&m| MessageRate {
            bytes: m,
            issue_bound_bytes_per_sec: m / input.issue_interval_secs,
            limited_by: if m < crossover { "issue rate" } else { "bandwidth" },
        })
        .collect();
    Ok(NicRelayOutput {
        sender_side_bytes_per_sec: sender,
        relay_bytes_per_sec: relay,
        cases,
        requests_per_sec: 1.0 / input.issue_interval_secs,
        crossover_bytes: crossover,
        messages,
    })
}

impl NicRelayOutput {
    pub fn markdown(&self, input: &NicRelayInput) -> String {
        let mut out = format!(
            "# Borrowing neighbour NICs\n\nB_eff = min(B_D, direct + min(local, relayed)) = min(B_D, {} + min({}, {})) = min(B_D, {}).\n\n",
            format_bytes_per_sec(input.direct_bytes_per_sec),
            format_bytes_per_sec(input.local_bytes_per_sec),
            format_bytes_per_sec(input.relay_nics_bytes_per_sec.iter().sum()),
            format_bytes_per_sec(self.sender_side_bytes_per_sec)
        );
        let mut t = Table::new([
            "downstream B_D",
            "B_eff",
            &format!("time for {}", format_bytes(input.payload_bytes)),
            "limited by",
        ]);
        for c in &self.cases {
            t.row([
                format_bytes_per_sec(c.downstream_bytes_per_sec),
                format_bytes_per_sec(c.effective_bytes_per_sec),
                format_secs(c.payload_secs),
                c.limited_by.to_string(),
            ]);
        }
        out.push_str(&t.render());
        out.push_str(&format!(
            "\nIssue rate: 1/δ = {:.1} M requests/s; messages below B·δ = {:.0} B hit the issue rate before the bandwidth.\n\n",
            self.requests_per_sec / 1e6,
            self.crossover_bytes
        ));
        let mut m = Table::new(["message", "m/δ", "limited by"]);
        for r in &self.messages {
            m.row([format_bytes(r.bytes), format_bytes_per_sec(r.issue_bound_bytes_per_sec), r.limited_by.to_string()]);
        }
        out.push_str(&m.render());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_7_2_4() {
        let o = nic_relay(&NicRelayInput::default()).unwrap();
        assert_eq!(o.sender_side_bytes_per_sec, 150e9);
        let ms: Vec<f64> = o.cases.iter().map(|c| (c.payload_secs * 1e4).round() / 10.0).collect();
        assert_eq!(ms, vec![24.2, 12.1, 8.1, 8.1]);
        assert!((o.requests_per_sec / 1e6 - 53.7).abs() < 0.05);
        assert!((o.crossover_bytes - 931.7).abs() < 0.1); // footnote 13: ≈ 931 B
        assert!(o.messages.iter().all(|m| m.limited_by == "bandwidth"));
    }
}

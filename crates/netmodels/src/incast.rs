//! Incast (seed 001 §7.5.2, footnote 37): N−1 senders at B each into one egress of B:
//! the queue grows at (N−2)·B; the free buffer lasts Q_free/((N−2)B); PFC's one-hop
//! feedback (cable round trip at 5 ns/m plus one MTU serialised — on the upstream
//! sender's link, at the sender's rate: it is that packet which is in flight when the
//! pause arrives) needs headroom for
//! the excess meanwhile; end-to-end feedback over an RTT lets in excess·RTT; without
//! PFC, nothing drops only while (N−2)·B·RTT ≤ Q_free.

use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs, trim_float};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncastInput {
    /// Group sizes N (N − 1 senders).
    pub group_sizes: Vec<u64>,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub sender_bytes_per_sec: f64,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub egress_bytes_per_sec: f64,
    /// Free buffers to evaluate.
    #[serde(deserialize_with = "quantity::bytes_list")]
    pub free_buffer_bytes: Vec<f64>,
    #[serde(deserialize_with = "quantity::non_negative")]
    pub cable_meters: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub secs_per_meter: f64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub mtu_bytes: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub end_to_end_rtt_secs: f64,
}

impl Default for IncastInput {
    fn default() -> Self {
        // seed 001 §7.5.2: N = 8, 16, 64 at 50 GB/s into 50 GB/s; 1 MiB (and 4 MiB) free;
        // 30 m cable at 5 ns/m, 1500 B MTU; 20 µs end-to-end round trip.
        IncastInput {
            group_sizes: vec![8, 16, 64],
            sender_bytes_per_sec: 50e9,
            egress_bytes_per_sec: 50e9,
            free_buffer_bytes: vec![1048576.0, 4.0 * 1048576.0],
            cable_meters: 30.0,
            secs_per_meter: 5e-9,
            mtu_bytes: 1500.0,
            end_to_end_rtt_secs: 20e-6,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IncastRow {
    pub group_size: u64,
    pub senders: u64,
    pub arrival_bytes_per_sec: f64,
    pub excess_bytes_per_sec: f64,
    /// One per free buffer: Q_free / excess.
    pub tolerable_feedback_secs: Vec<f64>,
    /// excess x PFC one-hop delay
    pub pfc_headroom_bytes: f64,
    /// excess x end-to-end RTT
    pub end_to_end_excess_bytes: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IncastOutput {
    /// 2 x cable propagation + one MTU serialised at the sender's rate
    pub pfc_one_hop_secs: f64,
    pub rows: Vec<IncastRow>,
    /// Per free buffer: the largest N that drops nothing with end-to-end feedback alone.
    pub largest_group_without_pfc: Vec<u64>,
}

pub fn incast(input: &IncastInput) -> Result<IncastOutput, NetModelError> {
    positive("sender_bytes_per_sec", input.sender_bytes_per_sec)?;
    positive("egress_bytes_per_sec", input.egress_bytes_per_sec)?;
    // The packet in flight when the pause lands is on the sender's link (not the egress).
    let hop = 2.0 * input.cable_meters * input.secs_per_meter + input.mtu_bytes / input.sender_bytes_per_sec;
    let rows = input
        .group_sizes
        .iter()
        .map(|&n| {
            let senders = n.saturating_sub(1);
            let arrival = senders as f64 * input.sender_bytes_per_sec;
            let excess = (arrival - input.egress_bytes_per_sec).max(0.0);
            IncastRow {
                group_size: n,
                senders,
                arrival_bytes_per_sec: arrival,
                excess_bytes_per_sec: excess,
                tolerable_feedback_secs: input
                    .free_buffer_bytes
                    .iter()
                    .map(|&q| if excess > 0.0 { q / excess } else { f64::INFINITY })
                    .collect(),
                pfc_headroom_bytes: excess * hop,
                end_to_end_excess_bytes: excess * input.end_to_end_rtt_secs,
            }
        })
        .collect();
    // (N−1)·B_s − B_e ≤ Q/RTT  <=>  N ≤ 1 + (Q/RTT + B_e)/B_s
    let largest = input
        .free_buffer_bytes
        .iter()
        .map(|&q| {
            let limit = if input.end_to_end_rtt_secs > 0.0 { q / input.end_to_end_rtt_secs } else { f64::INFINITY };
            (1.0 + (limit + input.egress_bytes_per_sec) / input.sender_bytes_per_sec + 1e-12)
                .floor()
                .min(u64::MAX as f64) as u64
        })
        .collect();
    Ok(IncastOutput { pfc_one_hop_secs: hop, rows, largest_group_without_pfc: largest })
}

impl IncastOutput {
    pub fn markdown(&self, input: &IncastInput) -> String {
        let mut out = format!(
            "# Incast\n\nN − 1 senders at {} into a {} egress. PFC's one-hop feedback: 2 x {} m x {} + {} B serialised at the senders' rate = {}.\n\n",
            format_bytes_per_sec(input.sender_bytes_per_sec),
            format_bytes_per_sec(input.egress_bytes_per_sec),
            trim_float(input.cable_meters, 4),
            format_secs(input.secs_per_meter),
            input.mtu_bytes,
            format_secs(self.pfc_one_hop_secs)
        );
        let mut headers = vec!["N".to_string(), "senders".into(), "arrival".into(), "excess".into()];
        headers.extend(input.free_buffer_bytes.iter().map(|q| format!("tolerable delay, {} free", format_bytes(*q))));
        headers.extend([
            "PFC headroom".to_string(),
            format!("in flight over a {} RTT", format_secs(input.end_to_end_rtt_secs)),
        ]);
        let mut t = Table::new(headers);
        for r in &self.rows {
            let mut cells = vec![
                r.group_size.to_string(),
                r.senders.to_string(),
                format_bytes_per_sec(r.arrival_bytes_per_sec),
                format_bytes_per_sec(r.excess_bytes_per_sec),
            ];
            cells.extend(r.tolerable_feedback_secs.iter().map(|&s| format_secs(s)));
            cells.push(format!("{} KB", trim_float(r.pfc_headroom_bytes / 1e3, 3)));
            cells.push(format!(
                "{} MB ({})",
                trim_float(r.end_to_end_excess_bytes / 1e6, 3),
                format_bytes(r.end_to_end_excess_bytes)
            ));
            t.row(cells);
        }
        out.push_str(&t.render());
        let largest: Vec<String> = input
            .free_buffer_bytes
            .iter()
            .zip(&self.largest_group_without_pfc)
            .map(|(q, n)| format!("N ≤ {n} with {}", format_bytes(*q)))
            .collect();
        out.push_str(&format!("\nWithout PFC (end-to-end feedback only) nothing drops for {}.\n", largest.join(", ")));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_7_5_2_incast() {
        let o = incast(&IncastInput::default()).unwrap();
        assert!((o.pfc_one_hop_secs * 1e6 - 0.33).abs() < 1e-9);
        let delays: Vec<f64> = o.rows.iter().map(|r| (r.tolerable_feedback_secs[0] * 1e8).round() / 100.0).collect();
        assert_eq!(delays, vec![3.5, 1.5, 0.34]);
        let delays4: Vec<f64> = o.rows.iter().map(|r| (r.tolerable_feedback_secs[1] * 1e8).round() / 100.0).collect();
        assert_eq!(delays4, vec![13.98, 5.99, 1.35]);
        let headroom: Vec<f64> = o.rows.iter().map(|r| (r.pfc_headroom_bytes / 1e3).round()).collect();
        assert_eq!(headroom, vec![99.0, 231.0, 1023.0]); // 99 KB, 231 KB, 1.02 MB
        let e2e: Vec<f64> =
            o.rows.iter().map(|r| (r.end_to_end_excess_bytes / 1048576.0 * 10.0).round() / 10.0).collect();
        assert_eq!(e2e, vec![5.7, 13.4, 59.1]);
        assert_eq!(o.largest_group_without_pfc, vec![3, 6]);
    }

    /// With a 100 GB/s egress fed by 50 GB/s senders, the MTU in flight serialises at
    /// the senders' 50 GB/s (30 ns), not the egress's 100 GB/s (15 ns).
    #[test]
    fn the_mtu_term_is_at_the_senders_rate() {
        let input = IncastInput { egress_bytes_per_sec: 100e9, group_sizes: vec![8], ..IncastInput::default() };
        let o = incast(&input).unwrap();
        assert!((o.pfc_one_hop_secs - (300e-9 + 1500.0 / 50e9)).abs() < 1e-15, "{}", o.pfc_one_hop_secs);
        // 7 senders x 50 − 100 = 250 GB/s of excess for 0.33 us: 82.5 KB.
        assert!((o.rows[0].pfc_headroom_bytes - 250e9 * 0.33e-6).abs() < 1.0, "{}", o.rows[0].pfc_headroom_bytes);
    }
}

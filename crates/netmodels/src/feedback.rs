//! Feedback delay against buffer (seed 001 §7.5.2): with arrival λ above egress B the
//! free buffer lasts Q_free/(λ − B); feedback that takes T_f drops (λ − B)·T_f − Q_free
//! when it comes later than that, so T_f ≤ Q_free/(λ − B); after slowing to λ' < B the
//! backlog drains at B − λ'.

use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs, trim_float};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackInput {
    #[serde(deserialize_with = "quantity::bytes")]
    pub buffer_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub occupied_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub arrival_bytes_per_sec: f64,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub egress_bytes_per_sec: f64,
    /// Delays from the queue starting to grow to the senders slowing down.
    #[serde(deserialize_with = "quantity::secs_list")]
    pub feedback_delays_secs: Vec<f64>,
    /// Rates the senders slow to.
    #[serde(deserialize_with = "quantity::bytes_per_sec_list")]
    pub slowed_bytes_per_sec: Vec<f64>,
}

impl Default for FeedbackInput {
    fn default() -> Self {
        // seed 001 §7.5.2: 100 GB/s into 50 GB/s, 512 KiB buffer half full; feedback after
        // 20 µs (and 50 µs); senders slow to 50, 45 or 40 GB/s.
        FeedbackInput {
            buffer_bytes: 524288.0,
            occupied_bytes: 262144.0,
            arrival_bytes_per_sec: 100e9,
            egress_bytes_per_sec: 50e9,
            feedback_delays_secs: vec![20e-6, 50e-6],
            slowed_bytes_per_sec: vec![50e9, 45e9, 40e9],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DelayCase {
    pub feedback_secs: f64,
    /// Excess that arrives before the senders slow down.
    pub excess_bytes: f64,
    pub dropped_bytes: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrainCase {
    pub slowed_bytes_per_sec: f64,
    /// Time to empty a full buffer after slowing; infinite when the rate is not below egress.
    pub drain_secs: f64,
    /// With the first feedback delay: when the queue is back to zero, from the start.
    pub empty_at_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FeedbackOutput {
    pub free_bytes: f64,
    pub excess_bytes_per_sec: f64,
    /// Q_free/(λ − B): when the buffer fills, which is also the longest tolerable feedback delay.
    pub fill_secs: f64,
    pub tolerable_feedback_secs: f64,
    pub delays: Vec<DelayCase>,
    pub drains: Vec<DrainCase>,
}

pub fn feedback(input: &FeedbackInput) -> Result<FeedbackOutput, NetModelError> {
    positive("egress_bytes_per_sec", input.egress_bytes_per_sec)?;
    if input.occupied_bytes > input.buffer_bytes {
        return Err(NetModelError::BadInput { field: "occupied_bytes".into(), message: "exceeds buffer_bytes".into() });
    }
    let free = input.buffer_bytes - input.occupied_bytes;
    let excess = input.arrival_bytes_per_sec - input.egress_bytes_per_sec;
    if excess <= 0.0 {
        return Err(NetModelError::BadInput {
            field: "arrival_bytes_per_sec".into(),
            message: "must exceed egress_bytes_per_sec for the queue to grow".into(),
        });
    }
    let fill = free / excess;
    let delays: Vec<DelayCase> = input
        .feedback_delays_secs
        .iter()
        .map(|&t| DelayCase { feedback_secs: t, excess_bytes: excess * t, dropped_bytes: (excess * t - free).max(0.0) })
        .collect();
    let first_delay = input.feedback_delays_secs.first().copied().unwrap_or(fill);
    let backlog_at_feedback = (input.occupied_bytes + excess * first_delay).min(input.buffer_bytes);
    let drains = input
        .slowed_bytes_per_sec
        .iter()
        .map(|&r| {
            let net = input.egress_bytes_per_sec - r;
            let drain = if net > 0.0 { input.buffer_bytes / net } else { f64::INFINITY };
            DrainCase {
                slowed_bytes_per_sec: r,
                drain_secs: drain,
                empty_at_secs: if net > 0.0 { first_delay + backlog_at_feedback / net } else { f64::INFINITY },
            }
        })
        .collect();
    Ok(FeedbackOutput {
        free_bytes: free,
        excess_bytes_per_sec: excess,
        fill_secs: fill,
        tolerable_feedback_secs: fill,
        delays,
        drains,
    })
}

impl FeedbackOutput {
    pub fn markdown(&self, input: &FeedbackInput) -> String {
        let mut out = format!(
            "# Feedback delay and buffer\n\n{} arrives into {}: the {} left fills in {} — the longest feedback delay \
             that drops nothing (T_f ≤ Q_free/(λ − B)).\n\n",
            format_bytes_per_sec(input.arrival_bytes_per_sec),
            format_bytes_per_sec(input.egress_bytes_per_sec),
            format_bytes(self.free_bytes),
            format_secs(self.fill_secs)
        );
        let mut t = Table::new(["feedback after", "excess meanwhile", "dropped"]);
        for d in &self.delays {
            t.row([
                format_secs(d.feedback_secs),
                format!("{} KB", trim_float(d.excess_bytes / 1e3, 4)),
                format!("{} KB", trim_float(d.dropped_bytes / 1e3, 4)),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
        let mut d = Table::new(["slow to", "drain a full buffer", "queue empty at (from the start)"]);
        for c in &self.drains {
            let f = |x: f64| if x.is_finite() { format_secs(x) } else { "never: arrival = egress or more".into() };
            d.row([format_bytes_per_sec(c.slowed_bytes_per_sec), f(c.drain_secs), f(c.empty_at_secs)]);
        }
        out.push_str(&d.render());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_7_5_2_feedback() {
        let o = feedback(&FeedbackInput::default()).unwrap();
        assert!((o.fill_secs * 1e6 - 5.24).abs() < 0.01);
        assert!((o.delays[0].excess_bytes - 1e6).abs() < 1e-3);
        assert!((o.delays[0].dropped_bytes / 1e3 - 737.856).abs() < 1e-6); // ≈ 738 KB
        assert!((o.delays[1].excess_bytes - 2.5e6).abs() < 1e-3);
        assert!(o.drains[0].drain_secs.is_infinite());
        assert!((o.drains[2].drain_secs * 1e6 - 52.43).abs() < 0.01);
        assert!((o.drains[2].empty_at_secs * 1e6 - 72.43).abs() < 0.01);
    }
}

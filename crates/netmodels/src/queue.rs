//! Periodic demand into a shared egress (seed 001 §7.5.1), as a fluid: dQ/dt = λ(t) − B
//! while the queue is non-empty. Demands are on/off with a period and a phase offset;
//! the backlog is piecewise linear, computed exactly between the instants where a
//! demand turns on or off or the queue empties.

use railyard_units::chart::{LineChart, Mark, Series};
use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::{format_bytes_per_sec, format_secs, trim_float};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Demand {
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub rate_bytes_per_sec: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub period_secs: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub on_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// One phase offset per demand.
    #[serde(deserialize_with = "quantity::secs_list")]
    pub offsets_secs: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueInput {
    pub demands: Vec<Demand>,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub egress_bytes_per_sec: f64,
    pub scenarios: Vec<Scenario>,
    /// Simulated time (default in the seed: one 100 ms period).
    #[serde(deserialize_with = "quantity::secs")]
    pub horizon_secs: f64,
    /// A buffer to size the tolerable overlap against.
    #[serde(deserialize_with = "quantity::bytes")]
    pub buffer_bytes: f64,
}

impl Default for QueueInput {
    fn default() -> Self {
        // seed 001 例題 7.5: two jobs, 20 ms of 50 GB/s every 100 ms, into one 50 GB/s uplink;
        // overlaps of 20, 5 and 0 ms; a 512 KiB buffer.
        let job = Demand { rate_bytes_per_sec: 50e9, period_secs: 0.1, on_secs: 0.02 };
        QueueInput {
            demands: vec![job.clone(), job],
            egress_bytes_per_sec: 50e9,
            scenarios: vec![
                Scenario { name: "peaks aligned (20 ms overlap)".into(), offsets_secs: vec![0.0, 0.0] },
                Scenario { name: "5 ms overlap".into(), offsets_secs: vec![0.0, 0.015] },
                Scenario { name: "peaks staggered by 20 ms".into(), offsets_secs: vec![0.0, 0.02] },
            ],
            horizon_secs: 0.1,
            buffer_bytes: 524288.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioResult {
    pub name: String,
    /// (time, backlog bytes) at every breakpoint: piecewise linear in between.
    pub backlog: Vec<(f64, f64)>,
    pub peak_bytes: f64,
    pub peak_at_secs: f64,
    /// From the peak until the queue is empty again.
    pub drain_secs: f64,
    pub arrived_bytes: f64,
    pub sent_bytes: f64,
    pub final_backlog_bytes: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueOutput {
    pub mean_arrival_bytes_per_sec: f64,
    pub mean_utilisation: f64,
    /// Peak arrival minus egress when every demand is on.
    pub peak_excess_bytes_per_sec: f64,
    /// buffer / peak excess: the overlap a buffer absorbs from an empty queue.
    pub tolerable_overlap_secs: f64,
    pub scenarios: Vec<ScenarioResult>,
}

fn arrival_rate(demands: &[Demand], offsets: &[f64], t: f64) -> f64 {
    demands
        .iter()
        .zip(offsets)
        .filter(|(d, &o)| {
            let phase = (t - o).rem_euclid(d.period_secs);
            phase < d.on_secs - 1e-15
        })
        .map(|(d, _)| d.rate_bytes_per_sec)
        .sum()
}

fn simulate(input: &QueueInput, s: &Scenario) -> ScenarioResult {
    // Breakpoints: every on/off edge of every demand within the horizon.
    let mut edges = vec![0.0, input.horizon_secs];
    for (d, &o) in input.demands.iter().zip(&s.offsets_secs) {
        let first = ((0.0 - o) / d.period_secs).floor() as i64 - 1;
        let mut k = first;
        loop {
            let on = o + k as f64 * d.period_secs;
            if on > input.horizon_secs {
                break;
            }
            for e in [on, on + d.on_secs] {
                if e > 0.0 && e < input.horizon_secs {
                    edges.push(e);
                }
            }
            k += 1;
        }
    }
    edges.sort_by(f64::total_cmp);
    edges.dedup_by(|a, b| (*a - *b).abs() < 1e-15);
    let b = input.egress_bytes_per_sec;
    let (mut q, mut arrived, mut sent) = (0.0f64, 0.0f64, 0.0f64);
    let mut backlog = vec![(0.0, 0.0)];
    let (mut peak, mut peak_at) = (0.0f64, 0.0f64);
    let mut empty_after_peak: Option<f64> = Some(0.0);
    for w in edges.windows(2) {
        let (t0, t1) = (w[0], w[1]);
        let lambda = arrival_rate(&input.demands, &s.offsets_secs, (t0 + t1) / 2.0);
        arrived += lambda * (t1 - t0);
        let net = lambda - b;
        if net >= 0.0 || q + net * (t1 - t0) > 0.0 {
            let out = if q > 0.0 || net >= 0.0 { b } else { lambda };
            sent += out.min(b) * (t1 - t0);
            q += net * (t1 - t0);
            q = q.max(0.0);
            backlog.push((t1, q));
            if q > peak + 1e-6 {
                peak = q;
                peak_at = t1;
                empty_after_peak = None;
            }
        } else {
            // The queue empties inside the interval.
            let t_empty = t0 + q / -net;
            sent += q + lambda * (t1 - t0);
            if q > 0.0 {
                backlog.push((t_empty, 0.0));
                if empty_after_peak.is_none() {
                    empty_after_peak = Some(t_empty);
                }
            }
            q = 0.0;
            backlog.push((t1, 0.0));
        }
    }
    backlog.dedup_by(|a, b| (a.0 - b.0).abs() < 1e-15 && (a.1 - b.1).abs() < 1e-6);
    ScenarioResult {
        name: s.name.clone(),
        backlog,
        peak_bytes: peak,
        peak_at_secs: peak_at,
        drain_secs: if peak > 0.0 { empty_after_peak.map_or(f64::INFINITY, |e| e - peak_at) } else { 0.0 },
        arrived_bytes: arrived,
        sent_bytes: sent,
        final_backlog_bytes: q,
    }
}

pub fn queue(input: &QueueInput) -> Result<QueueOutput, NetModelError> {
    positive("egress_bytes_per_sec", input.egress_bytes_per_sec)?;
    positive("horizon_secs", input.horizon_secs)?;
    for (i, d) in input.demands.iter().enumerate() {
        positive(&format!("demands[{i}].period_secs"), d.period_secs)?;
        if d.on_secs > d.period_secs {
            return Err(NetModelError::BadInput {
                field: format!("demands[{i}].on_secs"),
                message: "is longer than the period".into(),
            });
        }
        if input.horizon_secs / d.period_secs > 1e5 {
            return Err(NetModelError::BadInput {
                field: "horizon_secs".into(),
                message: "covers more than 100000 periods".into(),
            });
        }
    }
    for (i, s) in input.scenarios.iter().enumerate() {
        if s.offsets_secs.len() != input.demands.len() {
            return Err(NetModelError::BadInput {
                field: format!("scenarios[{i}].offsets_secs"),
                message: format!("needs one offset per demand ({})", input.demands.len()),
            });
        }
    }
    let mean: f64 = input.demands.iter().map(|d| d.rate_bytes_per_sec * d.on_secs / d.period_secs).sum();
    let peak_excess = input.demands.iter().map(|d| d.rate_bytes_per_sec).sum::<f64>() - input.egress_bytes_per_sec;
    Ok(QueueOutput {
        mean_arrival_bytes_per_sec: mean,
        mean_utilisation: mean / input.egress_bytes_per_sec,
        peak_excess_bytes_per_sec: peak_excess,
        tolerable_overlap_secs: if peak_excess > 0.0 { input.buffer_bytes / peak_excess } else { f64::INFINITY },
        scenarios: input.scenarios.iter().map(|s| simulate(input, s)).collect(),
    })
}

impl QueueOutput {
    pub fn markdown(&self, input: &QueueInput) -> String {
        let mut out = format!(
            "# Periodic demand into a shared egress\n\nMean arrival {} = {}% of the {} egress, yet:\n\n",
            format_bytes_per_sec(self.mean_arrival_bytes_per_sec),
            trim_float(self.mean_utilisation * 100.0, 3),
            format_bytes_per_sec(input.egress_bytes_per_sec)
        );
        let mut t = Table::new(["scenario", "peak backlog", "at", "drain after the peak"]);
        for s in &self.scenarios {
            t.row([
                s.name.clone(),
                format!("{} MB", trim_float(s.peak_bytes / 1e6, 4)),
                format_secs(s.peak_at_secs),
                if s.drain_secs.is_finite() { format_secs(s.drain_secs) } else { "not within the horizon".into() },
            ]);
        }
        out.push_str(&t.render());
        out.push_str(&format!(
            "\nWith every demand on, the backlog grows at {}; a {} buffer absorbs {} of overlap from an empty queue.\n",
            format_bytes_per_sec(self.peak_excess_bytes_per_sec),
            railyard_units::units::format_bytes(input.buffer_bytes),
            format_secs(self.tolerable_overlap_secs)
        ));
        out
    }
}

/// The model's chart (`railyard model queue --svg`).
pub fn chart(o: &QueueOutput, i: &QueueInput) -> String {
    LineChart {
        title: format!("Backlog at a {} GB/s egress", i.egress_bytes_per_sec / 1e9),
        x_label: "time (ms)".into(),
        y_label: "backlog (MB)".into(),
        log_x: false,
        series: o
            .scenarios
            .iter()
            .map(|s| Series {
                name: s.name.clone(),
                points: s.backlog.iter().map(|&(t, q)| (t * 1e3, q / 1e6)).collect(),
            })
            .collect(),
        marks: o
            .scenarios
            .iter()
            .filter(|s| s.peak_bytes > 0.0)
            .map(|s| Mark {
                x: s.peak_at_secs * 1e3,
                y: s.peak_bytes / 1e6,
                label: format!("peak {:.0} MB", s.peak_bytes / 1e6),
            })
            .collect(),
    }
    .svg()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_example_7_5() {
        let o = queue(&QueueInput::default()).unwrap();
        assert!((o.mean_utilisation - 0.4).abs() < 1e-12);
        let peaks: Vec<f64> = o.scenarios.iter().map(|s| (s.peak_bytes / 1e6).round()).collect();
        assert_eq!(peaks, vec![1000.0, 250.0, 0.0]);
        assert!((o.scenarios[0].drain_secs - 0.02).abs() < 1e-12);
        assert!((o.tolerable_overlap_secs * 1e6 - 10.49).abs() < 0.01);
        for s in &o.scenarios {
            assert!((s.arrived_bytes - s.sent_bytes - s.final_backlog_bytes).abs() < 1.0, "{s:?}");
        }
    }
}

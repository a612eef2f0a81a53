//! Request slots, completion processing and backpressure (seed 001 §7.4.4), event by
//! event: a request takes a slot when submitted (at most one per submit interval),
//! completes a fixed latency later, and frees its slot only when software processes
//! its completion — a poll every period handles at most a batch, oldest first. The
//! sustained rate is bounded by batch/period, whatever the slot count.

use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotsInput {
    pub requests: usize,
    #[serde(deserialize_with = "quantity::bytes")]
    pub request_bytes: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub submit_interval_secs: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub completion_latency_secs: f64,
    /// Slot counts to compare.
    pub slots: Vec<usize>,
    #[serde(deserialize_with = "quantity::secs")]
    pub poll_period_secs: f64,
    pub completions_per_poll: usize,
    /// Bandwidth the sustained rate is compared with.
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub target_bytes_per_sec: f64,
}

impl Default for SlotsInput {
    fn default() -> Self {
        // seed 001 §7.4.4: 16 x 8 KiB, one submit per µs, 5 µs to complete, 16 or 8 slots,
        // 4 completions processed every 20 µs; compared with a 50 GB/s NIC.
        SlotsInput {
            requests: 16,
            request_bytes: 8192.0,
            submit_interval_secs: 1e-6,
            completion_latency_secs: 5e-6,
            slots: vec![16, 8],
            poll_period_secs: 20e-6,
            completions_per_poll: 4,
            target_bytes_per_sec: 50e9,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestTimes {
    pub submit_secs: f64,
    pub complete_secs: f64,
    pub release_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlotsRun {
    pub slots: usize,
    pub requests: Vec<RequestTimes>,
    pub last_submit_secs: f64,
    pub transfers_done_secs: f64,
    pub all_released_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlotsOutput {
    pub runs: Vec<SlotsRun>,
    /// completions_per_poll / poll_period
    pub sustained_requests_per_sec: f64,
    pub sustained_bytes_per_sec: f64,
    /// Completions per second needed to carry the target bandwidth.
    pub needed_requests_per_sec: f64,
    pub needed_secs_per_completion: f64,
}

fn run(input: &SlotsInput, slots: usize) -> SlotsRun {
    let n = input.requests;
    let mut times: Vec<RequestTimes> = Vec::with_capacity(n);
    let mut poll_of: Vec<u64> = Vec::with_capacity(n);
    let mut released_at_poll: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    for i in 0..n {
        let mut t = if i == 0 { 0.0 } else { times[i - 1].submit_secs + input.submit_interval_secs };
        // Slots free in release order, which is request order: request i needs request i − slots released.
        if i >= slots {
            t = t.max(times[i - slots].release_secs);
        }
        let complete = t + input.completion_latency_secs;
        let mut k = ((complete / input.poll_period_secs) - 1e-9).ceil().max(1.0) as u64;
        if let Some(&prev) = poll_of.last() {
            k = k.max(prev);
        }
        while released_at_poll.get(&k).copied().unwrap_or(0) >= input.completions_per_poll {
            k += 1;
        }
        *released_at_poll.entry(k).or_insert(0) += 1;
        poll_of.push(k);
        times.push(RequestTimes {
            submit_secs: t,
            complete_secs: complete,
            release_secs: k as f64 * input.poll_period_secs,
        });
    }
    let max = |f: fn(&RequestTimes) -> f64| times.iter().map(f).fold(0.0, f64::max);
    SlotsRun {
        slots,
        last_submit_secs: max(|r| r.submit_secs),
        transfers_done_secs: max(|r| r.complete_secs),
        all_released_secs: max(|r| r.release_secs),
        requests: times,
    }
}

pub fn slots(input: &SlotsInput) -> Result<SlotsOutput, NetModelError> {
    positive("poll_period_secs", input.poll_period_secs)?;
    positive("request_bytes", input.request_bytes)?;
    if input.completions_per_poll == 0 {
        return Err(NetModelError::BadInput {
            field: "completions_per_poll".into(),
            message: "must be at least 1".into(),
        });
    }
    if input.requests > 1_000_000 {
        return Err(NetModelError::BadInput {
            field: "requests".into(),
            message: "at most 1000000 requests are simulated".into(),
        });
    }
    let mut runs = Vec::new();
    for (i, &s) in input.slots.iter().enumerate() {
        if s == 0 {
            return Err(NetModelError::BadInput { field: format!("slots[{i}]"), message: "must be at least 1".into() });
        }
        runs.push(run(input, s));
    }
    let rate = input.completions_per_poll as f64 / input.poll_period_secs;
    let needed = input.target_bytes_per_sec / input.request_bytes;
    Ok(SlotsOutput {
        runs,
        sustained_requests_per_sec: rate,
        sustained_bytes_per_sec: rate * input.request_bytes,
        needed_requests_per_sec: needed,
        needed_secs_per_completion: 1.0 / needed,
    })
}

impl SlotsOutput {
    pub fn markdown(&self, input: &SlotsInput) -> String {
        let mut out = format!(
            "# Request slots and completion processing\n\n{} requests of {}, one submit per {}, complete {} later; \
             {} completions processed every {}.\n\n",
            input.requests,
            format_bytes(input.request_bytes),
            format_secs(input.submit_interval_secs),
            format_secs(input.completion_latency_secs),
            input.completions_per_poll,
            format_secs(input.poll_period_secs)
        );
        let mut t = Table::new(["slots", "last submit", "transfers done", "all slots released"]);
        for r in &self.runs {
            t.row([
                r.slots.to_string(),
                format_secs(r.last_submit_secs),
                format_secs(r.transfers_done_secs),
                format_secs(r.all_released_secs),
            ]);
        }
        out.push_str(&t.render());
        out.push_str(&format!(
            "\nSustained: completion processing handles {:.0} requests/s = {}; carrying {} needs {:.3} M/s, one per {}. \
             More slots absorb a burst; only faster completion processing or larger requests raise the sustained rate.\n",
            self.sustained_requests_per_sec,
            format_bytes_per_sec(self.sustained_bytes_per_sec),
            format_bytes_per_sec(input.target_bytes_per_sec),
            self.needed_requests_per_sec / 1e6,
            format_secs(self.needed_secs_per_completion)
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_7_4_4() {
        let o = slots(&SlotsInput::default()).unwrap();
        let us = |x: f64| (x * 1e6 * 1e3).round() / 1e3;
        let (a, b) = (&o.runs[0], &o.runs[1]);
        assert_eq!((us(a.last_submit_secs), us(a.transfers_done_secs), us(a.all_released_secs)), (15.0, 20.0, 80.0));
        assert_eq!((us(b.transfers_done_secs), us(b.all_released_secs)), (48.0, 80.0));
        assert_eq!(us(b.requests[8].submit_secs), 20.0);
        assert!((o.sustained_bytes_per_sec / 1e9 - 1.64).abs() < 0.01);
        assert!((o.needed_requests_per_sec / 1e6 - 6.1).abs() < 0.05);
        assert!((o.needed_secs_per_completion * 1e6 - 0.164).abs() < 0.001);
    }
}

//! The expected time of a schedule: the per-round model at the rates NCCL-class
//! software reaches (`railyard_topology::Achievable`) instead of line rate, with each
//! protocol's latencies instead of the topology's α, under the protocol that makes it
//! fastest — as NCCL's tuner takes the fastest (algorithm, protocol) pair
//! (`ncclTopoGetAlgoTime`, docs/sources.md#nccl-tuner):
//!
//!   T_expected(p) = call(p) + Σ_r ( hop_r(p) + max_e V(r,e) / (B(e) · f(e)) / payload(p) )
//!
//! where f(e) is the fraction of line rate of e's link class (or of an in-switch
//! reduction's streams on it), hop_r the latency of round r's slowest hop (NVLink, PCIe
//! or the network; an in-switch reduction's own), and payload(p) the protocol's share
//! of payload. In-switch reductions run Simple only, as NCCL's NVLS and CollNet do.

use railyard_topology::{Achievable, Hop, Protocol};
use serde::Serialize;

/// The expected time and the protocol it assumes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Expected {
    pub secs: f64,
    pub protocol: Protocol,
}

/// What one round contributes: its slowest transfer time at achievable rates, the
/// slowest hop its transfers cross, and the kind of in-switch reduction it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RoundRates {
    pub transfer_secs: f64,
    pub hop: Option<Hop>,
    pub reduction: Option<Reduction>,
}

/// Where an in-network reduction happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reduction {
    /// Inside an NVSwitch (NVLS).
    NvSwitch,
    /// In network switches (SHARP).
    Network,
}

/// The running sums of every protocol over a schedule's rounds: latencies and payload
/// times apart, since a pipeline pays the first only along one chunk's path.
#[derive(Debug, Clone)]
pub(crate) struct ExpectedSums {
    latency_secs: [f64; 3],
    transfer_secs: [f64; 3],
    allowed: [bool; 3],
    /// The in-switch reductions' own latency, paid once per call (NCCL's NVLS latency
    /// replaces its base latency; `ncclTopoTuneModel`).
    reduction_secs: f64,
}

impl ExpectedSums {
    pub fn new() -> Self {
        ExpectedSums { latency_secs: [0.0; 3], transfer_secs: [0.0; 3], allowed: [true; 3], reduction_secs: 0.0 }
    }

    /// Add `round`, standing for `times` rounds.
    pub fn add(&mut self, achievable: &Achievable, round: &RoundRates, times: u64) {
        let times = times as f64;
        for p in Protocol::ALL {
            let i = p.index();
            let latency = round.hop.map_or(0.0, |h| achievable.hop_secs(h, p));
            if let Some(kind) = round.reduction {
                if p != Protocol::Simple {
                    self.allowed[i] = false;
                }
                let own = match kind {
                    Reduction::NvSwitch => achievable.nvls_hop_secs,
                    Reduction::Network => achievable.sharp_hop_secs,
                };
                self.reduction_secs = self.reduction_secs.max(own);
            }
            self.latency_secs[i] += times * latency;
            self.transfer_secs[i] += times * round.transfer_secs / achievable.protocol_fraction[i];
        }
    }

    /// These sums with every protocol's latencies `k` times theirs (rounds the schedule
    /// stands for beyond those it holds, at the held rounds' average).
    pub fn latencies_scaled(mut self, k: f64) -> Self {
        for l in &mut self.latency_secs {
            *l *= k;
        }
        self
    }

    /// These sums with only `protocol` allowed (a schedule that names its protocol).
    pub fn only(&self, protocol: Protocol) -> Self {
        let mut sums = self.clone();
        for p in Protocol::ALL {
            sums.allowed[p.index()] &= p == protocol;
        }
        sums
    }

    /// Each allowed protocol's total as (what does not grow with the bytes: the call's
    /// latency and the rounds' latencies; what does: the payload's time), in `Protocol`
    /// order; `finish` takes the fastest of them with its host costs added.
    ///
    /// Of a pipeline, the rounds' latencies count as far as one chunk goes (`path_rounds`
    /// of `rounds`; 0: all): NCCL's chunks follow each other through a step without a
    /// barrier, and its model charges a step's latency once (`ncclTopoTuneModel`).
    ///
    /// The first part is never under `startups_secs`, the start-ups the bound charges (α
    /// × rounds): the bound is the seeds' model, which pays α on every round, and a time
    /// at achievable rates under it would contradict it. It binds where a pipeline is cut
    /// finer than NCCL's chunks (forced chunk counts: NCCL's model has no cost per chunk)
    /// and where α is above a protocol's hop latency (LL on NVLink, 0.6 µs, against the
    /// presets' 0.833 µs, over a 72-GPU ring). As the payload's time at achievable rates
    /// is never under its time at line rate, no expected time is then under the bound,
    /// at any size the schedule is scaled to.
    pub fn parts(
        &self,
        achievable: &Achievable,
        rounds: usize,
        path_rounds: usize,
        startups_secs: f64,
    ) -> [Option<(f64, f64)>; 3] {
        let path = match (rounds, path_rounds) {
            (0, _) | (_, 0) => 1.0,
            (r, d) => d.min(r) as f64 / r as f64,
        };
        Protocol::ALL.map(|p| {
            let i = p.index();
            let call = achievable.call_secs[i].max(self.reduction_secs);
            self.allowed[i].then(|| ((call + path * self.latency_secs[i]).max(startups_secs), self.transfer_secs[i]))
        })
    }

    /// The fastest allowed protocol's total (`parts`), with `extra_secs` (host costs)
    /// added.
    pub fn finish(
        &self,
        achievable: &Achievable,
        extra_secs: f64,
        rounds: usize,
        path_rounds: usize,
        startups_secs: f64,
    ) -> Expected {
        Protocol::ALL
            .iter()
            .zip(self.parts(achievable, rounds, path_rounds, startups_secs))
            .filter_map(|(&protocol, part)| {
                part.map(|(fixed, bytes)| Expected { secs: fixed + bytes + extra_secs, protocol })
            })
            .min_by(|a, b| a.secs.total_cmp(&b.secs))
            .unwrap_or(Expected { secs: f64::INFINITY, protocol: Protocol::Simple })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NCCL's 8-GPU ring all-reduce latencies (14 NVLink steps): LL 15.0 us, LL128 40.6,
    /// Simple 56.0 — the tuner's table, from the same constants.
    #[test]
    fn an_empty_ring_costs_nccls_latencies() {
        let a = Achievable::default();
        let mut sums = ExpectedSums::new();
        let round = RoundRates { transfer_secs: 0.0, hop: Some(Hop::Nvlink), reduction: None };
        sums.add(&a, &round, 14);
        let e = sums.finish(&a, 0.0, 14, 0, 0.0);
        assert_eq!(e.protocol, Protocol::Ll);
        assert!((e.secs - 15.0e-6).abs() < 1e-12, "{}", e.secs);
        // Large transfers take Simple (full payload).
        let mut sums = ExpectedSums::new();
        sums.add(&a, &RoundRates { transfer_secs: 1e-3, hop: Some(Hop::Nvlink), reduction: None }, 14);
        assert_eq!(sums.finish(&a, 0.0, 14, 0, 0.0).protocol, Protocol::Simple);
        // An in-switch reduction runs Simple only, at NVLS's latency.
        let mut sums = ExpectedSums::new();
        sums.add(
            &a,
            &RoundRates { transfer_secs: 0.0, hop: Some(Hop::Nvlink), reduction: Some(Reduction::NvSwitch) },
            1,
        );
        let e = sums.finish(&a, 0.0, 14, 0, 0.0);
        assert_eq!(e.protocol, Protocol::Simple);
        assert!((e.secs - (25.0e-6 + 3.4e-6)).abs() < 1e-12, "{}", e.secs);
    }
}

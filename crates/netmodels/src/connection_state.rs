//! Connection state (seed 001 §7.4.2): L endpoints talking to P targets. Private
//! transport state per relation: S_private = Le + LP(r+t); shared per target:
//! S_shared = Le + LPr + Pt; K isolated groups: S(K) = Le + LPr + KPt. With record
//! sizes from an implementation: per-pair QPs 512NM + 32N vs endpoints + channels
//! 52N + 56M, and the endpoint count at which each overflows an on-NIC cache.

use serde::{Deserialize, Serialize};

use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_secs, trim_float};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionStateInput {
    pub endpoints: u64,
    pub targets: u64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub endpoint_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub relation_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub transport_bytes: f64,
    /// Capacity for the isolation groups question.
    #[serde(deserialize_with = "quantity::bytes")]
    pub capacity_bytes: f64,
    /// Per-pair QP context, per-endpoint extra of the per-pair design, per-endpoint and
    /// per-channel bytes of the shared design (512 / 32 / 52 / 56 in the seed).
    #[serde(deserialize_with = "quantity::bytes")]
    pub qp_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub qp_endpoint_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub jetty_endpoint_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub channel_bytes: f64,
    /// On-NIC context cache.
    #[serde(deserialize_with = "quantity::bytes")]
    pub cache_bytes: f64,
    /// Latency added per operation after overflow: PCIe NIC, on-chip controller.
    #[serde(deserialize_with = "quantity::secs")]
    pub pcie_miss_secs: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub on_chip_miss_secs: f64,
    /// N = M endpoint counts to tabulate.
    pub sweep_endpoints: Vec<u64>,
}

impl Default for ConnectionStateInput {
    fn default() -> Self {
        // seed 001 §7.4.2: 64 endpoints x 128 targets, 256 / 64 / 1024 B; 1 MiB capacity;
        // OpenURMA record sizes; 256 KiB cache; +1000 ns (PCIe) and +200 ns (on-chip) per miss.
        ConnectionStateInput {
            endpoints: 64,
            targets: 128,
            endpoint_bytes: 256.0,
            relation_bytes: 64.0,
            transport_bytes: 1024.0,
            capacity_bytes: 1048576.0,
            qp_bytes: 512.0,
            qp_endpoint_bytes: 32.0,
            jetty_endpoint_bytes: 52.0,
            channel_bytes: 56.0,
            cache_bytes: 262144.0,
            pcie_miss_secs: 1000e-9,
            on_chip_miss_secs: 200e-9,
            sweep_endpoints: vec![1, 16, 23, 64, 256, 1024, 2428, 4096],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    pub endpoints: u64,
    pub per_pair_bytes: f64,
    pub shared_bytes: f64,
    pub ratio: f64,
    pub per_pair_extra_latency_secs: f64,
    pub shared_extra_latency_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnectionStateOutput {
    pub relations: u64,
    pub private_bytes: f64,
    pub shared_bytes: f64,
    /// Le + LPr
    pub fixed_bytes: f64,
    /// Pt
    pub per_group_bytes: f64,
    /// Largest K with S(K) within capacity.
    pub groups_that_fit: u64,
    /// (K, S(K)) for K = 1..=8
    pub groups: Vec<(u64, f64)>,
    /// Smallest N (= M) at which each design exceeds the cache.
    pub per_pair_overflow_endpoints: u64,
    pub shared_overflow_endpoints: u64,
    pub sweep: Vec<SweepRow>,
}

fn first_over(cache: f64, f: impl Fn(f64) -> f64) -> u64 {
    // f grows with n: double, then bisect.
    let (mut lo, mut hi) = (0u64, 1u64);
    while f(hi as f64) <= cache {
        lo = hi;
        hi *= 2;
        if hi > 1 << 40 {
            return u64::MAX;
        }
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if f(mid as f64) > cache {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

pub fn connection_state(input: &ConnectionStateInput) -> Result<ConnectionStateOutput, NetModelError> {
    let (l, p) = (input.endpoints as f64, input.targets as f64);
    let (e, r, t) = (input.endpoint_bytes, input.relation_bytes, input.transport_bytes);
    let fixed = l * e + l * p * r;
    let per_group = p * t;
    let groups_that_fit = if per_group > 0.0 && input.capacity_bytes >= fixed {
        ((input.capacity_bytes - fixed) / per_group).floor() as u64
    } else {
        0
    };
    let pair = |n: f64| input.qp_bytes * n * n + input.qp_endpoint_bytes * n;
    let shared = |n: f64| input.jetty_endpoint_bytes * n + input.channel_bytes * n;
    if input.qp_bytes + input.qp_endpoint_bytes <= 0.0 || input.jetty_endpoint_bytes + input.channel_bytes <= 0.0 {
        return Err(NetModelError::BadInput { field: "record sizes".into(), message: "must not all be zero".into() });
    }
    let per_pair_overflow = first_over(input.cache_bytes, pair);
    let shared_overflow = first_over(input.cache_bytes, shared);
    let sweep = input
        .sweep_endpoints
        .iter()
        .map(|&n| {
            let x = n as f64;
            SweepRow {
                endpoints: n,
                per_pair_bytes: pair(x),
                shared_bytes: shared(x),
                ratio: pair(x) / shared(x),
                per_pair_extra_latency_secs: if n >= per_pair_overflow { input.pcie_miss_secs } else { 0.0 },
                shared_extra_latency_secs: if n >= shared_overflow { input.on_chip_miss_secs } else { 0.0 },
            }
        })
        .collect();
    Ok(ConnectionStateOutput {
        relations: input.endpoints * input.targets,
        private_bytes: l * e + l * p * (r + t),
        shared_bytes: l * e + l * p * r + p * t,
        fixed_bytes: fixed,
        per_group_bytes: per_group,
        groups_that_fit,
        groups: (1..=8).map(|k| (k, fixed + k as f64 * per_group)).collect(),
        per_pair_overflow_endpoints: per_pair_overflow,
        shared_overflow_endpoints: shared_overflow,
        sweep,
    })
}

impl ConnectionStateOutput {
    pub fn markdown(&self, input: &ConnectionStateInput) -> String {
        let mut out = format!(
            "# Connection state\n\n{} endpoints x {} targets = {} relations.\n\n",
            input.endpoints, input.targets, self.relations
        );
        let mut t = Table::new(["organisation", "state", "formula"]);
        t.row(["private transport per relation".to_string(), format_bytes(self.private_bytes), "Le + LP(r+t)".into()]);
        t.row(["shared transport per target".to_string(), format_bytes(self.shared_bytes), "Le + LPr + Pt".into()]);
        out.push_str(&t.render());
        out.push_str(&format!(
            "\nIsolation groups: S(K) = {} + K x {}; {} fits **{}** groups (4 need {}, 8 need {}).\n\n",
            format_bytes(self.fixed_bytes),
            format_bytes(self.per_group_bytes),
            format_bytes(input.capacity_bytes),
            self.groups_that_fit,
            format_bytes(self.groups[3].1),
            format_bytes(self.groups[7].1)
        ));
        out.push_str(&format!(
            "Per-pair QPs ({}N² + {}N) overflow a {} cache at N ≥ **{}** (+{} per operation); endpoints + channels \
             ({}N + {}M) at N ≥ **{}** (+{}).\n\n",
            input.qp_bytes,
            input.qp_endpoint_bytes,
            format_bytes(input.cache_bytes),
            self.per_pair_overflow_endpoints,
            format_secs(input.pcie_miss_secs),
            input.jetty_endpoint_bytes,
            input.channel_bytes,
            self.shared_overflow_endpoints,
            format_secs(input.on_chip_miss_secs)
        ));
        let mut s = Table::new(["N = M", "per-pair", "endpoints + channels", "ratio", "extra latency (pair / shared)"]);
        for r in &self.sweep {
            s.row([
                r.endpoints.to_string(),
                format_bytes(r.per_pair_bytes),
                format_bytes(r.shared_bytes),
                trim_float(r.ratio, 4),
                format!(
                    "{} / {}",
                    format_secs(r.per_pair_extra_latency_secs),
                    format_secs(r.shared_extra_latency_secs)
                ),
            ]);
        }
        out.push_str(&s.render());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_7_4_2() {
        let o = connection_state(&ConnectionStateInput::default()).unwrap();
        assert!((o.private_bytes / 1048576.0 - 8.52).abs() < 0.005);
        assert!((o.shared_bytes / 1048576.0 - 0.64).abs() < 0.005);
        assert_eq!(o.fixed_bytes, 528.0 * 1024.0);
        assert_eq!(o.groups_that_fit, 3);
        assert_eq!(o.groups[3].1, 1040.0 * 1024.0);
        assert_eq!((o.per_pair_overflow_endpoints, o.shared_overflow_endpoints), (23, 2428));
        let n1024 = o.sweep.iter().find(|r| r.endpoints == 1024).unwrap();
        assert!((n1024.ratio - 4855.0).abs() < 1.0);
        assert_eq!(n1024.shared_bytes, 108.0 * 1024.0); // 108 KiB
    }
}

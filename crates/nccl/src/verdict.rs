//! Is a measured nccl-tests curve normal on a given topology? For every size: what
//! NCCL's own tuner expects there (its pick and predicted time, `tuner.rs`, on the
//! shape `shape.rs` derives), and railyard's per-round model of the same algorithm —
//! payload and start-up only, so no real run can beat it. The verdict per size:
//! - **faster than the model allows** — measured below railyard's bound: the topology
//!   given is slower than the machine measured (wrong bandwidths, or fewer links);
//! - **as expected** — within `SLOW_RATIO` of NCCL's own prediction;
//! - **slow** — more than that above it.

use serde::Serialize;

use railyard_model::plan::{plan, PlanRequest};
use railyard_topology::{Placement, Topology};

use crate::error::NcclError;
use crate::nccl_tests::TestsOutput;
use crate::shape::Shape;
use crate::tuner::{self, Algo, Coll, Proto};

/// Measured over NCCL's prediction above which a size is slow.
pub const SLOW_RATIO: f64 = 1.25;
/// Measured under railyard's bound below which the topology must be wrong (the bound
/// leaves out nothing a run could save, so only rounding is allowed).
pub const BOUND_RATIO: f64 = 0.97;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    AsExpected,
    Slow,
    FasterThanTheModelAllows,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::AsExpected => "as expected",
            Verdict::Slow => "slow",
            Verdict::FasterThanTheModelAllows => "faster than the model allows: the topology is wrong",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeVerdict {
    pub bytes: u64,
    /// The better of the out-of-place and in-place times.
    pub measured_us: f64,
    pub measured_busbw_gb_per_s: f64,
    pub nccl_algo: Algo,
    pub nccl_proto: Proto,
    pub nccl_channels: usize,
    pub nccl_expected_us: f64,
    pub nccl_expected_busbw_gb_per_s: f64,
    /// The railyard algorithm costed, and its time.
    pub railyard_algorithm: String,
    pub railyard_bound_us: f64,
    /// measured / NCCL's expected.
    pub ratio: f64,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub sizes: Vec<SizeVerdict>,
    /// The first size from which every larger size is no longer as expected, after one
    /// that was: where the measured curve leaves the model's.
    pub leaves_model_at_bytes: Option<u64>,
    pub notes: Vec<String>,
}

pub fn analyze(
    output: &TestsOutput,
    topology: &Topology,
    placement: &Placement,
    shape: &Shape,
) -> Result<Analysis, NcclError> {
    let bad = |message: String| NcclError::BadInput { field: "collective".into(), message };
    let railyard_collective =
        output.kind.railyard().ok_or_else(|| bad(format!("{} has no railyard model", output.kind.binary())))?;
    let coll = Coll::from_railyard(railyard_collective);
    let table = match coll {
        Some(c) => Some(tuner::table(&shape.input, c)?),
        None => None,
    };
    let mut notes = Vec::new();
    if coll.is_none() {
        notes.push(format!(
            "NCCL's tuner does not model {} (it runs point-to-point); expected times are railyard's bound",
            output.kind.binary()
        ));
    }
    let mut sizes = Vec::with_capacity(output.rows.len());
    for row in &output.rows {
        let best = if row.out_of_place.time_us.value <= row.in_place.time_us.value {
            &row.out_of_place
        } else {
            &row.in_place
        };
        let elem_bytes = if row.count > 0 && row.bytes % row.count == 0 { row.bytes / row.count } else { 1 };
        let elem_bytes = match output.kind {
            // all-gather and reduce-scatter count per rank; the size is the whole buffer.
            crate::nccl_tests::TestKind::AllGather
            | crate::nccl_tests::TestKind::ReduceScatter
            | crate::nccl_tests::TestKind::AllToAll => elem_bytes / (output.ranks.max(1) as u64),
            _ => elem_bytes,
        }
        .max(1);
        let choice = table.as_ref().and_then(|t| tuner::choose(&shape.input, t, row.bytes));
        let algorithm = choice
            .as_ref()
            .and_then(|c| c.algo.railyard_algorithm())
            .filter(|a| a.supports(railyard_collective))
            .unwrap_or(if railyard_collective == railyard_schedule::Collective::AllToAll {
                railyard_schedule::Algorithm::Pairwise
            } else {
                railyard_schedule::Algorithm::Ring
            });
        let request = PlanRequest {
            collective: railyard_collective,
            bytes: row.bytes - row.bytes % elem_bytes,
            elem_bytes,
            algorithms: vec![algorithm],
            order: None,
            groups: None,
            root: 0,
            channels: 1,
            pipeline_chunks: None,
            strict: false,
        };
        let costed = plan(topology, placement, &request).map_err(|e| bad(e.to_string()))?;
        // An algorithm the topology cannot run (in-network without reducing switches) falls back to the ring.
        let (algorithm_name, bound_secs) = match costed.algorithms.first() {
            Some(b) => (b.name.clone(), b.total_secs),
            None => {
                let ring = PlanRequest { algorithms: vec![railyard_schedule::Algorithm::Ring], ..request };
                let p = plan(topology, placement, &ring).map_err(|e| bad(e.to_string()))?;
                let b = p.algorithms.first().ok_or_else(|| bad("no algorithm can run here".into()))?;
                (b.name.clone(), b.total_secs)
            }
        };
        let bound_us = bound_secs * 1e6;
        let (algo, proto, channels, expected_us) = match &choice {
            Some(c) => (c.algo, c.proto, c.channels, c.time_us),
            None => (Algo::Ring, Proto::Simple, shape.input.channels, bound_us),
        };
        let factor = output.kind.bus_factor(output.ranks.max(2));
        let measured = best.time_us.value;
        let ratio = measured / expected_us;
        let verdict = if measured < bound_us * BOUND_RATIO {
            Verdict::FasterThanTheModelAllows
        } else if ratio <= SLOW_RATIO {
            Verdict::AsExpected
        } else {
            Verdict::Slow
        };
        sizes.push(SizeVerdict {
            bytes: row.bytes,
            measured_us: measured,
            measured_busbw_gb_per_s: best.busbw_recomputed,
            nccl_algo: algo,
            nccl_proto: proto,
            nccl_channels: channels,
            nccl_expected_us: expected_us,
            nccl_expected_busbw_gb_per_s: row.bytes as f64 / (expected_us * 1e3) * factor,
            railyard_algorithm: algorithm_name,
            railyard_bound_us: bound_us,
            ratio,
            verdict,
        });
    }
    let leaves_model_at_bytes = (1..sizes.len())
        .find(|&i| {
            sizes[..i].iter().any(|s| s.verdict == Verdict::AsExpected)
                && sizes[i..].iter().all(|s| s.verdict != Verdict::AsExpected)
        })
        .map(|i| sizes[i].bytes);
    Ok(Analysis { sizes, leaves_model_at_bytes, notes })
}

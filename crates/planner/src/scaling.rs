//! More GPUs against a fixed cross-server transfer (seed 001 §7.1.2, example 7.1):
//! compute shrinks as 20/x, the cut's transfer does not; sequential takes the sum,
//! full overlap the larger, and the crossover is where the two are equal.

use railyard_units::quantity;
use serde::{Deserialize, Serialize};

use crate::comm::{CommInput, CommTime, Coster};
use crate::error::{positive, secs, within, PlannerError};

pub const MAX_MULTIPLES: usize = 1024;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingInput {
    /// Compute time at today's card count.
    #[serde(deserialize_with = "quantity::secs")]
    pub compute_secs: f64,
    pub comm: CommInput,
    /// Card multiples x to tabulate.
    pub multiples: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingRow {
    pub multiple: f64,
    pub compute_secs: f64,
    pub sequential_secs: f64,
    pub overlapped_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingReport {
    /// Compute at today's card count (x = 1).
    pub compute_secs: f64,
    pub comm: CommTime,
    pub rows: Vec<ScalingRow>,
    /// x where compute equals communication: beyond it full overlap stops gaining.
    pub crossover_multiple: f64,
}

pub fn row(compute_secs: f64, comm_secs: f64, multiple: f64) -> ScalingRow {
    let c = compute_secs / multiple;
    ScalingRow { multiple, compute_secs: c, sequential_secs: c + comm_secs, overlapped_secs: c.max(comm_secs) }
}

pub fn evaluate(input: &ScalingInput, coster: &Coster) -> Result<ScalingReport, PlannerError> {
    positive("scaling.compute_secs", input.compute_secs)?;
    secs("scaling.compute_secs", input.compute_secs)?;
    if input.multiples.is_empty() || input.multiples.len() > MAX_MULTIPLES {
        return Err(PlannerError::bad("scaling.multiples", format!("give 1..={MAX_MULTIPLES} multiples")));
    }
    let comm = coster.time(&input.comm, "scaling.comm")?;
    positive("scaling.comm", comm.secs)?;
    let mut rows = Vec::with_capacity(input.multiples.len());
    for (i, &x) in input.multiples.iter().enumerate() {
        within(&format!("scaling.multiples[{i}]"), x, 1e-6, 1e6)?;
        rows.push(row(input.compute_secs, comm.secs, x));
    }
    Ok(ScalingReport {
        compute_secs: input.compute_secs,
        crossover_multiple: input.compute_secs / comm.secs,
        comm,
        rows,
    })
}

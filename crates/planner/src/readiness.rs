//! Readiness skew (seed 001 §7.6.1): a collective starts when its last rank is ready,
//! so what a rank measures as "communication" includes waiting for the others. The
//! what-ifs act on different nodes of the dependency graph: a faster exchange moves
//! the end, earlier readiness moves the start.

use railyard_units::quantity;
use serde::{Deserialize, Serialize};

use crate::comm::{CommInput, CommTime, Coster};
use crate::error::{secs, PlannerError};

/// The most ranks whose ready times a scenario may list.
pub const MAX_RANKS: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadinessInput {
    /// Per rank, when its data is ready.
    #[serde(deserialize_with = "quantity::secs_list")]
    pub ready_secs: Vec<f64>,
    /// The exchange once all are ready.
    pub comm: CommInput,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadinessCase {
    pub name: String,
    pub start_secs: f64,
    pub finish_secs: f64,
    /// Summed over ranks: time in the call before the exchange could start.
    pub waiting_secs_total: f64,
    /// Summed over ranks: time from each rank's ready to the finish ("measured communication").
    pub measured_secs_total: f64,
    /// waiting / measured.
    pub waiting_share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadinessReport {
    pub comm: CommTime,
    pub last_ready_rank: usize,
    /// As given, the exchange halved, and every rank ready at the earliest time.
    pub cases: Vec<ReadinessCase>,
}

fn case(name: &str, ready: &[f64], exchange: f64) -> ReadinessCase {
    let start = ready.iter().copied().fold(0.0, f64::max);
    let finish = start + exchange;
    let waiting: f64 = ready.iter().map(|r| start - r).sum();
    let measured: f64 = ready.iter().map(|r| finish - r).sum();
    ReadinessCase {
        name: name.into(),
        start_secs: start,
        finish_secs: finish,
        waiting_secs_total: waiting,
        measured_secs_total: measured,
        waiting_share: if measured > 0.0 { waiting / measured } else { 0.0 },
    }
}

pub fn evaluate(input: &ReadinessInput, coster: &Coster) -> Result<ReadinessReport, PlannerError> {
    if input.ready_secs.is_empty() || input.ready_secs.len() > MAX_RANKS {
        return Err(PlannerError::bad("readiness.ready_secs", format!("give 1..={MAX_RANKS} ready times")));
    }
    for (i, &r) in input.ready_secs.iter().enumerate() {
        secs(&format!("readiness.ready_secs[{i}]"), r)?;
    }
    if let Some(topo) = &input.comm.topo {
        let t = coster.load(topo, "readiness.comm")?;
        if t.default_ranks.len() != input.ready_secs.len() {
            return Err(PlannerError::bad(
                "readiness.ready_secs",
                format!("lists {} ranks, {topo} has {}", input.ready_secs.len(), t.default_ranks.len()),
            ));
        }
    }
    let comm = coster.time(&input.comm, "readiness.comm")?;
    let ready = &input.ready_secs;
    let earliest = ready.iter().copied().fold(f64::INFINITY, f64::min);
    let last_ready_rank = (0..ready.len()).fold(0, |best, r| if ready[r] > ready[best] { r } else { best });
    let cases = vec![
        case("as given", ready, comm.secs),
        case("exchange halved", ready, comm.secs / 2.0),
        case("all ready at the earliest", &vec![earliest; ready.len()], comm.secs),
    ];
    Ok(ReadinessReport { comm, last_ready_rank, cases })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_four_ranks() {
        // seed 001 §7.6.1: ready at 0, 0, 0, 2 ms, exchange 0.4 ms.
        let input = ReadinessInput {
            ready_secs: vec![0.0, 0.0, 0.0, 2e-3],
            comm: CommInput { secs: Some(0.4e-3), ..CommInput::default() },
        };
        let r = evaluate(&input, &Coster::new(crate::Engine::Model)).unwrap();
        let f: Vec<f64> = r.cases.iter().map(|c| (c.finish_secs * 1e4).round() / 10.0).collect();
        assert_eq!(f, vec![2.4, 2.2, 0.4]);
        assert_eq!(r.last_ready_rank, 3);
        // 3 ranks wait 2 ms of the 3 x 2.4 + 0.4 ms they measure.
        assert!((r.cases[0].waiting_share - 6.0 / 7.6).abs() < 1e-12);
    }
}

//! A training step as compute, communication and update (seed 001 §7.6.2, example
//! 7.6): the communication starts when its data is ready, runs beside the compute still
//! left, and the update waits for both:
//! T_step = max(T_compute, t_ready + T_comm) + T_update. With t_ready = T_compute this
//! is the sequential step; every timeline of figures 7-54…7-59 is this one formula
//! with its own communication and ready time.

use railyard_netmodels::quantity;
use serde::{Deserialize, Serialize};

use crate::comm::{CommInput, CommTime, Engine};
use crate::error::{positive, PlannerError};

/// The most timelines one step section may hold.
pub const MAX_TIMELINES: usize = 64;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepInput {
    #[serde(deserialize_with = "quantity::secs")]
    pub compute_secs: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub update_secs: f64,
    /// The communication every timeline starts from.
    #[serde(default)]
    pub comm: CommInput,
    pub timeline: Vec<TimelineInput>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineInput {
    pub name: String,
    /// When the communication's data is ready (default: when compute ends, i.e. sequential).
    #[serde(default, deserialize_with = "quantity::optional_secs")]
    pub ready_secs: Option<f64>,
    /// Laid over the section's `comm`.
    #[serde(default)]
    pub comm: CommInput,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timeline {
    pub name: String,
    pub comm: CommTime,
    pub compute_secs: f64,
    pub ready_secs: f64,
    pub comm_end_secs: f64,
    pub update_start_secs: f64,
    pub step_secs: f64,
    /// Communication not hidden behind compute.
    pub exposed_comm_secs: f64,
    /// The latest ready time at which this communication still ends with the compute.
    pub latest_hidden_ready_secs: f64,
    /// Against the first timeline: how much faster the communication and the step are
    /// (S = (Tc+Tn)/(Tc+Tn/s) when both are sequential).
    pub comm_speedup: f64,
    pub step_speedup: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    pub compute_secs: f64,
    pub update_secs: f64,
    pub timelines: Vec<Timeline>,
}

/// T_step = max(T_compute, t_ready + T_comm) + T_update (seed 001 §7.6.2).
pub fn step_secs(compute_secs: f64, ready_secs: f64, comm_secs: f64, update_secs: f64) -> f64 {
    compute_secs.max(ready_secs + comm_secs) + update_secs
}

/// Amdahl (seed 001 §7.6.2): S = (Tc + Tn) / (Tc + Tn / s).
pub fn amdahl(unaffected_secs: f64, comm_secs: f64, comm_speedup: f64) -> f64 {
    (unaffected_secs + comm_secs) / (unaffected_secs + comm_secs / comm_speedup)
}

pub fn evaluate(input: &StepInput, engine: Engine) -> Result<StepReport, PlannerError> {
    positive("step.compute_secs", input.compute_secs)?;
    if input.timeline.is_empty() || input.timeline.len() > MAX_TIMELINES {
        return Err(PlannerError::bad("step.timeline", format!("give 1..={MAX_TIMELINES} timelines")));
    }
    let mut timelines: Vec<Timeline> = Vec::with_capacity(input.timeline.len());
    for (i, t) in input.timeline.iter().enumerate() {
        let field = format!("step.timeline[{i}]");
        let ready = t.ready_secs.unwrap_or(input.compute_secs);
        if ready > input.compute_secs {
            return Err(PlannerError::bad(
                format!("{field}.ready_secs"),
                format!("is after the compute ends ({} s > {} s)", ready, input.compute_secs),
            ));
        }
        let comm = t.comm.over(&input.comm).time(&format!("{field}.comm"), engine)?;
        let comm_end = ready + comm.secs;
        let update_start = input.compute_secs.max(comm_end);
        let step = step_secs(input.compute_secs, ready, comm.secs, input.update_secs);
        let (comm_speedup, step_speedup) = match timelines.first() {
            Some(first) => (first.comm.secs / comm.secs, first.step_secs / step),
            None => (1.0, 1.0),
        };
        timelines.push(Timeline {
            name: t.name.clone(),
            compute_secs: input.compute_secs,
            ready_secs: ready,
            comm_end_secs: comm_end,
            update_start_secs: update_start,
            step_secs: step,
            exposed_comm_secs: update_start - input.compute_secs,
            latest_hidden_ready_secs: input.compute_secs - comm.secs,
            comm,
            comm_speedup,
            step_speedup,
        });
    }
    Ok(StepReport { compute_secs: input.compute_secs, update_secs: input.update_secs, timelines })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amdahl_of_the_seed() {
        // seed 001 §7.6.2: 7.6 -> 1.3 ms of communication beside 22 ms: the step gains ~21%.
        let s = amdahl(22.0, 7.575, 7.575 / 1.3);
        assert!((1.0 - 1.0 / s - 0.212).abs() < 0.002, "{s}");
        assert_eq!(step_secs(20.0, 17.0, 1.3, 2.0), 22.0);
        assert!((step_secs(20.0, 17.0, 7.6, 2.0) - 26.6).abs() < 1e-12);
    }

    #[test]
    fn a_ready_time_after_the_compute_is_refused() {
        let input = StepInput {
            compute_secs: 0.02,
            update_secs: 0.002,
            comm: CommInput { secs: Some(1e-3), ..CommInput::default() },
            timeline: vec![TimelineInput { name: "x".into(), ready_secs: Some(0.03), comm: CommInput::default() }],
        };
        assert!(evaluate(&input, Engine::Model).unwrap_err().to_string().contains("step.timeline[0].ready_secs"));
    }
}

//! A training step as compute, communication and update (seed 001 §7.6.2, example
//! 7.6): the communication starts when its data is ready, runs beside the compute still
//! left, and the update waits for both:
//! T_step = max(T_compute, t_ready + T_comm) + T_update. With t_ready = T_compute this
//! is the sequential step; every timeline of figures 7-54…7-59 is this one formula
//! with its own communication and ready time.

use railyard_units::quantity;
use serde::{Deserialize, Serialize};

use crate::comm::{CommInput, CommTime, Coster};
use crate::error::{positive, secs, PlannerError};

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
    /// The latest ready time at which this communication still ends with the compute
    /// (`None`: longer than the compute, it cannot be hidden).
    pub latest_hidden_ready_secs: Option<f64>,
    /// Against the first timeline: how much faster the communication and the step are.
    pub comm_speedup: f64,
    pub step_speedup: f64,
    /// What Amdahl's S = (Tc+Tn)/(Tc+Tn/s) predicts for the step from the first
    /// timeline's arrangement, Tc its compute and update: equal to `step_speedup` when both
    /// run sequentially, below it where overlap also helped.
    pub amdahl_speedup: f64,
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

pub fn evaluate(input: &StepInput, coster: &Coster) -> Result<StepReport, PlannerError> {
    positive("step.compute_secs", input.compute_secs)?;
    secs("step.compute_secs", input.compute_secs)?;
    secs("step.update_secs", input.update_secs)?;
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
        let comm = coster.time(&t.comm.over(&input.comm), &format!("{field}.comm"))?;
        if comm.secs <= 0.0 || !comm.secs.is_finite() {
            return Err(PlannerError::bad(
                format!("{field}.comm"),
                format!("takes {} s; a step needs a communication that takes time", comm.secs),
            ));
        }
        let comm_end = ready + comm.secs;
        let update_start = input.compute_secs.max(comm_end);
        let step = step_secs(input.compute_secs, ready, comm.secs, input.update_secs);
        let (comm_speedup, step_speedup, amdahl_speedup) = match timelines.first() {
            Some(first) => {
                let s = first.comm.secs / comm.secs;
                let unaffected = first.step_secs - first.exposed_comm_secs;
                (s, first.step_secs / step, amdahl(unaffected, first.exposed_comm_secs, s))
            }
            None => (1.0, 1.0, 1.0),
        };
        timelines.push(Timeline {
            name: t.name.clone(),
            compute_secs: input.compute_secs,
            ready_secs: ready,
            comm_end_secs: comm_end,
            update_start_secs: update_start,
            step_secs: step,
            exposed_comm_secs: update_start - input.compute_secs,
            latest_hidden_ready_secs: (comm.secs <= input.compute_secs).then_some(input.compute_secs - comm.secs),
            comm,
            comm_speedup,
            step_speedup,
            amdahl_speedup,
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

    proptest::proptest! {
        #[test]
        fn a_step_lies_between_full_overlap_and_sequential(
            compute in 1e-6f64..10.0, ready_share in 0.0f64..=1.0, comm in 1e-9f64..10.0, update in 0.0f64..1.0,
        ) {
            let ready = compute * ready_share;
            let t = step_secs(compute, ready, comm, update);
            proptest::prop_assert!(t >= compute.max(comm) + update - 1e-12);
            proptest::prop_assert!(t <= compute + comm + update + 1e-12);
            // Starting the communication earlier never lengthens the step.
            proptest::prop_assert!(step_secs(compute, ready * 0.5, comm, update) <= t);
        }
    }

    #[test]
    fn a_ready_time_after_the_compute_is_refused() {
        let input = StepInput {
            compute_secs: 0.02,
            update_secs: 0.002,
            comm: CommInput { secs: Some(1e-3), ..CommInput::default() },
            timeline: vec![TimelineInput { name: "x".into(), ready_secs: Some(0.03), comm: CommInput::default() }],
        };
        assert!(evaluate(&input, &Coster::new(crate::Engine::Model))
            .unwrap_err()
            .to_string()
            .contains("step.timeline[0].ready_secs"));
    }
}

//! railyard's training-step and cluster planner (seed 001 §7.1, §7.6; seed 000 §8.6–§8.7):
//! from a model and a cluster to step time, throughput and the best layout.
//!
//! A scenario (TOML) holds any of the sections below; each is evaluated on its own and
//! the report says where every communication time came from (given, the cut bound, or
//! a schedule costed by the per-round model or run by the simulator). With no scenario
//! the CLI runs the bundled one, which reproduces the chapter's worked examples.
//!
//! Data flow of the workspace: `topology -> schedule -> {model, sim} -> planner -> cli`.

#![forbid(unsafe_code)]

pub mod bucketing;
pub mod comm;
pub mod error;
pub mod job;
pub mod latency;
pub mod memory;
pub mod moe;
pub mod readiness;
pub mod report;
pub mod scaling;
pub mod solve;
pub mod step;
pub mod supernode;
pub mod workload;

use serde::{Deserialize, Serialize};

pub use comm::{CommInput, CommTime, Coster, Engine};
pub use error::PlannerError;

/// The chapter's worked examples (`plan-training --examples`).
pub const BUNDLED_SCENARIO: &str = include_str!("../scenarios/chapter7.toml");

/// The scenario `plan-training` runs when given none: a stated example job.
pub const EXAMPLE_JOB: &str = include_str!("../scenarios/example-job.toml");

/// The largest scenario file read (1 MiB).
pub const MAX_SCENARIO_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub title: Option<String>,
    pub memory: Option<memory::MemoryInput>,
    pub scaling: Option<scaling::ScalingInput>,
    pub step: Option<step::StepInput>,
    pub readiness: Option<readiness::ReadinessInput>,
    pub latency: Option<latency::LatencyInput>,
    pub tail: Option<latency::TailInput>,
    pub migration: Option<latency::MigrationInput>,
    pub supernode: Option<supernode::SupernodeInput>,
    pub moe: Option<moe::MoeInput>,
    pub bucketing: Option<bucketing::BucketingInput>,
    pub job: Option<job::JobInput>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub title: String,
    pub engine: Engine,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Vec<memory::MemoryRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling: Option<scaling::ScalingReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<step::StepReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness: Option<readiness::ReadinessReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<latency::LatencyReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<Vec<latency::TailRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<Vec<latency::MigrationRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supernode: Option<supernode::SupernodeReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moe: Option<moe::MoeReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucketing: Option<bucketing::BucketingReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<job::JobReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solved: Option<solve::Solved>,
}

impl Scenario {
    /// Read a scenario, naming the field of the first problem.
    pub fn parse(text: &str) -> Result<Scenario, PlannerError> {
        if text.len() > MAX_SCENARIO_BYTES {
            return Err(PlannerError::Scenario(format!(
                "larger than the {MAX_SCENARIO_BYTES} bytes a scenario may be"
            )));
        }
        let de = toml::Deserializer::new(text);
        let scenario: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let message = inner.message().trim().to_string();
            let line = inner.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let at = line.map_or(String::new(), |l| format!(" (line {l})"));
            match path.as_str() {
                "." | "" => PlannerError::Scenario(format!("line {}: {message}", line.unwrap_or(1))),
                _ => PlannerError::Scenario(format!("{path}{at}: {message}")),
            }
        })?;
        let sections = [
            scenario.memory.is_some(),
            scenario.scaling.is_some(),
            scenario.step.is_some(),
            scenario.readiness.is_some(),
            scenario.latency.is_some(),
            scenario.tail.is_some(),
            scenario.migration.is_some(),
            scenario.supernode.is_some(),
            scenario.moe.is_some(),
            scenario.bucketing.is_some(),
            scenario.job.is_some(),
        ];
        if !sections.contains(&true) {
            return Err(PlannerError::Scenario(
                "no section to plan: give at least one of [job], [memory], [scaling], [step], [readiness], [latency], [tail], \
                 [migration], [supernode], [moe], [bucketing]"
                    .into(),
            ));
        }
        Ok(scenario)
    }

    /// Topology files named relative to the scenario file are found next to it.
    pub fn resolve_paths(&mut self, dir: &std::path::Path) {
        let fix = |c: &mut CommInput| {
            if let Some(t) = &c.topo {
                let p = std::path::Path::new(t);
                if p.is_relative() && dir.join(p).is_file() {
                    c.topo = Some(dir.join(p).to_string_lossy().into_owned());
                }
            }
        };
        if let Some(s) = &mut self.scaling {
            fix(&mut s.comm);
        }
        if let Some(s) = &mut self.step {
            fix(&mut s.comm);
            s.timeline.iter_mut().for_each(|t| fix(&mut t.comm));
        }
        if let Some(s) = &mut self.readiness {
            fix(&mut s.comm);
        }
        if let Some(s) = &mut self.latency {
            fix(&mut s.comm);
        }
        if let Some(c) = self.moe.as_mut().and_then(|m| m.comm.as_mut()) {
            fix(c);
        }
        if let Some(s) = &mut self.bucketing {
            fix(&mut s.comm);
        }
        if let Some(j) = &mut self.job {
            let p = std::path::Path::new(&j.topo);
            if p.is_relative() && dir.join(p).is_file() {
                j.topo = dir.join(p).to_string_lossy().into_owned();
            }
        }
    }

    /// Evaluate every section (and with `solve`, answer the crossover and optimum questions).
    pub fn run(&self, engine: Engine, solve: bool) -> Result<Report, PlannerError> {
        let coster = Coster::new(engine);
        let mut report = Report {
            title: self.title.clone().unwrap_or_else(|| "training plan".into()),
            engine,
            memory: self.memory.as_ref().map(memory::evaluate).transpose()?,
            scaling: self.scaling.as_ref().map(|s| scaling::evaluate(s, &coster)).transpose()?,
            step: self.step.as_ref().map(|s| step::evaluate(s, &coster)).transpose()?,
            readiness: self.readiness.as_ref().map(|s| readiness::evaluate(s, &coster)).transpose()?,
            latency: self.latency.as_ref().map(|s| latency::evaluate(s, &coster)).transpose()?,
            tail: self.tail.as_ref().map(latency::tail).transpose()?,
            migration: self.migration.as_ref().map(latency::migration).transpose()?,
            supernode: self.supernode.as_ref().map(supernode::evaluate).transpose()?,
            moe: self.moe.as_ref().map(|s| moe::evaluate(s, &coster)).transpose()?,
            bucketing: self.bucketing.as_ref().map(|s| bucketing::evaluate(s, &coster)).transpose()?,
            job: match &self.job {
                Some(j) => Some(job::evaluate_with(j, &*coster.load(&j.topo, "job")?, true, engine)?),
                None => None,
            },
            solved: None,
        };
        if solve {
            report.solved = Some(solve::solve(&report, self, &coster)?);
        }
        Ok(report)
    }
}

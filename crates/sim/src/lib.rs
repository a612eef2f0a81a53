//! railyard's flow-level simulator (seed 001 §7.5–§7.6, seed 000 §8.5.5–§8.5.8): the
//! transfers of one or more schedules as flows over a topology's resources (link
//! directions and shared interfaces — NVLink, PCIe and NIC ports included), sharing
//! them max-min fairly, each started when its ranks are ready (`job.rs`) and at the
//! topology's per-step start-up α.
//!
//! Where the per-round model (`railyard-model`) charges each round its slowest
//! resource behind a barrier, the simulator lets rounds overlap where the schedule
//! allows and jobs contend. With `Dependencies::Barriers` and one job it reproduces
//! the model; the difference without barriers is what overlap buys.
//!
//! Data flow of the workspace: `topology -> schedule -> {model, sim, runtime} -> cli`.

#![forbid(unsafe_code)]

pub mod component;
pub mod engine;
pub mod error;
pub mod fairness;
pub mod fluid;
pub mod job;
pub mod job_spec;
pub mod jobs_file;
pub mod membership;
pub mod paths;
pub mod queues;
pub mod report;
pub mod time;
pub mod trace;

pub use engine::{
    simulate, simulate_with_progress, Progress, SimOptions, MAX_HELD_ITEMS, MAX_JOBS, MAX_ROUND_TRANSFERS,
    MAX_SIMULATED_TRANSFERS, MAX_STARTED_TRANSFERS,
};
pub use error::SimError;
pub use job::Dependencies;
pub use job_spec::JobSpec;
pub use jobs_file::{job_runs, parse_jobs, read_jobs_file, JobsFileError, PlannedJob};
pub use paths::Paths;
pub use queues::QueueReport;
pub use report::{
    CriticalResource, CriticalStep, JobReport, PhaseReport, ResourceSeries, ResourceUse, RoundReport, SimReport,
};
pub use time::Picos;

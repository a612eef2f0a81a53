//! What is simulated: jobs, each a schedule on placed ranks with its start, readiness,
//! compute and the jobs it waits for.

use railyard_schedule::CompactSchedule;
use railyard_topology::Placement;

/// One job: a schedule on placed ranks, started at an offset.
#[derive(Debug)]
pub struct JobSpec<'s> {
    pub name: String,
    pub schedule: &'s CompactSchedule,
    pub placement: Placement,
    pub start_secs: f64,
    /// When each rank is ready, after `start_secs` (empty: all at once).
    pub ready_secs: Vec<f64>,
    /// Jobs (indices into the list simulated) this one waits for: it starts
    /// `start_secs` after the last of them finishes (a step's DAG of compute and
    /// collectives). Empty: it starts at `start_secs`.
    pub after: Vec<usize>,
    /// Compute before the job communicates: its ranks are ready this long after its start.
    pub compute_secs: f64,
}

impl<'s> JobSpec<'s> {
    /// A job that starts at `start_secs` with every rank ready at once.
    pub fn new(name: impl Into<String>, schedule: &'s CompactSchedule, placement: Placement, start_secs: f64) -> Self {
        JobSpec {
            name: name.into(),
            schedule,
            placement,
            start_secs,
            ready_secs: Vec::new(),
            after: Vec::new(),
            compute_secs: 0.0,
        }
    }
}

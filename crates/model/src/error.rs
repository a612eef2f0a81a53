use railyard_schedule::{Collective, ScheduleError};
use railyard_topology::TopologyError;
use thiserror::Error;

/// What can be wrong with a request or a costing. Errors name the request's fields
/// (`size`, `ranks`, `algorithms`, `order`, `groups`), never a front end's flags: the CLI
/// and Python say which of their options those are.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ModelError {
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// The request's placement (policy and ranks) does not fit the topology.
    #[error("placement: {0}")]
    Placement(TopologyError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("the schedule has {schedule} ranks but the placement has {placement}")]
    RankMismatch { schedule: usize, placement: usize },
    #[error("{bytes} bytes is not a whole number of {elem_bytes}-byte elements")]
    SizeNotMultiple { bytes: u64, elem_bytes: u64 },
    #[error(
        "costing this schedule would make up to {transfers} transfers round by round, more than the limit of \
         {limit} (a round that repeats its predecessor is costed once: an all-to-all's never do, a ring's do when \
         the size splits evenly over ranks x channels)"
    )]
    TooManyTransfers { transfers: u128, limit: u64 },
    #[error("one round of this schedule has up to {transfers} transfers, more than the limit of {limit} made at once")]
    RoundTooLarge { transfers: usize, limit: usize },
    #[error("{field}: {message}")]
    BadInput { field: String, message: String },
    /// Every algorithm asked for was skipped.
    #[error("no algorithm can run here:\n  {}", skipped.iter().map(|(a, why)| format!("{a}: {why}")).collect::<Vec<_>>().join("\n  "))]
    NothingRuns { skipped: Vec<(String, String)> },
    #[error("MSCCL algorithm {file}: {message}")]
    MscclUnreadable { file: String, message: String },
    #[error("{} is less than one element per chunk of the program ({chunks} chunks)", railyard_units::units::format_bytes(*bytes as f64))]
    MscclTooSmall { bytes: u64, chunks: u64 },
    #[error(
        "{}: MSCCL runs this program from {} to {} (its minBytes and maxBytes)",
        railyard_units::units::format_bytes(*bytes as f64),
        railyard_units::units::format_bytes(*min_bytes as f64),
        if *max_bytes == u64::MAX { "any size".to_string() } else { railyard_units::units::format_bytes(*max_bytes as f64) }
    )]
    MscclOutOfRange { bytes: u64, min_bytes: u64, max_bytes: u64 },
    #[error("{file}: {problem}")]
    Msccl { file: String, problem: MscclProblem },
    /// The algorithm needs hardware the topology does not have.
    #[error("needs {needs}, which {topology} does not have")]
    NeedsHardware { needs: &'static str, topology: String },
}

impl ModelError {
    /// Whether the schedule is refused for its size (transfers over a limit), not
    /// because it does not apply here.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            ModelError::TooManyTransfers { .. }
                | ModelError::RoundTooLarge { .. }
                | ModelError::Schedule(railyard_schedule::ScheduleError::TooLarge { .. })
        )
    }
}

/// Why an MSCCL program does not fit a request.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MscclProblem {
    #[error("an MSCCL {} program, not {}", program.as_str(), asked.as_str())]
    Collective { program: Collective, asked: Collective },
    #[error("written for {gpus} GPUs, the plan has {ranks} ranks")]
    Ranks { gpus: usize, ranks: usize },
    #[error("its root is rank {program}, the plan's is {asked}")]
    Root { program: usize, asked: usize },
    #[error("the checker refuses it: {problem}")]
    Refused { problem: String },
}

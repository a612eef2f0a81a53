use railyard_schedule::ScheduleError;
use railyard_topology::TopologyError;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum ModelError {
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("the schedule has {schedule} ranks but the placement has {placement}")]
    RankMismatch { schedule: usize, placement: usize },
    #[error("{bytes} bytes is not a whole number of {elem_bytes}-byte elements (--size must be a multiple of the --dtype size)")]
    SizeNotMultiple { bytes: u64, elem_bytes: u64 },
    #[error(
        "costing this schedule would make up to {transfers} transfers round by round, more than the limit of \
         {limit} (a round that repeats its predecessor is costed once: an all-to-all's never do, a ring's do when \
         the size splits evenly over ranks x channels); use fewer ranks (--ranks), another algorithm (--algo), \
         or for a ring a --size that splits evenly"
    )]
    TooManyTransfers { transfers: u128, limit: u64 },
    #[error(
        "one round of this schedule has up to {transfers} transfers, more than the limit of {limit} made at \
         once; use fewer ranks (--ranks) or another algorithm (--algo)"
    )]
    RoundTooLarge { transfers: usize, limit: usize },
    #[error("{field}: {message}")]
    BadInput { field: String, message: String },
}

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
    #[error(
        "no switch of this topology can reduce in the network (in_network_reduction = true) and reach {devices:?}"
    )]
    NoReductionSwitch { devices: Vec<String> },
    #[error("{bytes} bytes is not a whole number of {elem_bytes}-byte elements")]
    SizeNotMultiple { bytes: u64, elem_bytes: u64 },
    #[error(
        "costing this schedule would make more than {limit} transfers round by round (a huge ring whose blocks \
         are uneven repeats no round); use a size that splits evenly over the ranks and channels, or fewer ranks"
    )]
    TooManyTransfers { limit: u64 },
    #[error("{field}: {message}")]
    BadInput { field: String, message: String },
}

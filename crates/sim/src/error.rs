use railyard_topology::TopologyError;
use railyard_units::units::{format_number, format_secs};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum SimError {
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error("job {job}: the schedule has {schedule} ranks but the placement has {placement}")]
    RankMismatch { job: String, schedule: usize, placement: usize },
    #[error("the route from \"{from}\" to \"{to}\" does not reach its end")]
    BrokenRoute { from: String, to: String },
    #[error("no jobs to simulate")]
    NoJobs,
    #[error("{jobs} jobs is more than the limit of {limit}")]
    TooManyJobs { jobs: usize, limit: usize },
    #[error(
        "job {job}: simulating this schedule would start up to {transfers} transfers one by one, more than the \
         limit of {limit} (runs of rounds that repeat their predecessor in step are simulated once); use fewer \
         ranks, another algorithm, or a size that splits evenly over ranks x channels"
    )]
    TooManyTransfers { job: String, transfers: u128, limit: u64 },
    #[error("job {job}: one round has up to {transfers} transfers, more than the limit of {limit} made at once")]
    RoundTooLarge { job: String, transfers: usize, limit: usize },
    #[error(
        "job {job}: {rounds} rounds are held at once between the slowest and the fastest rank (a rank with no \
         part in a round passes it at once), more than the limit of {limit} items; use --barriers, which holds \
         one round"
    )]
    WindowTooLarge { job: String, rounds: usize, limit: usize },
    #[error("job {job}: start time {} s is not a finite number of seconds >= 0", format_number(*secs))]
    BadStart { job: String, secs: f64 },
    #[error("job {job}: compute time {} s is not a time the simulator holds (0 to 1.8e7 s)", format_number(*secs))]
    BadCompute { job: String, secs: f64 },
    #[error("job {job}: {given} ready times for {ranks} ranks (give one per rank, or none)")]
    ReadyCount { job: String, given: usize, ranks: usize },
    #[error("job {job}: ready time {} s is not a time the simulator holds (0 to 1.8e7 s)", format_number(*secs))]
    BadReady { job: String, secs: f64 },
    #[error("job {job}: waits for job {after}, but there are {jobs} jobs (and a job cannot wait for itself)")]
    BadAfter { job: String, after: usize, jobs: usize },
    #[error("job {job} waits for itself through `after` (a cycle)")]
    CycleInAfter { job: String },
    #[error("no resource is named \"{name}\" (names as in the report, e.g. \"A.nic0 -> leaf0.rail0\")")]
    UnknownResource { name: String },
    #[error("{count} resources to watch, more than the limit of {limit}")]
    TooManyWatched { count: usize, limit: usize },
    #[error("fluid model: {field} = {} is out of its range (dt: 0.1 ns to 1 ms; horizon: up to 10 s; cut: (0, 1]; xoff: up to the buffer, xon below it)", format_number(*value))]
    BadFluidOption { field: &'static str, value: f64 },
    #[error(
        "the fluid model stopped at {} simulated: {work} flow-hop-steps, more than the limit of \
         {limit}; use a larger step (--dt), smaller sizes or fewer flows (it is meant for incasts and a few jobs)",
        format_secs(*reached_secs)
    )]
    FluidTooLarge { work: u128, limit: u128, reached_secs: f64 },
    #[error("job {job} did not finish (this is a bug in the simulator; please report the input)")]
    Unfinished { job: String },
    #[error("simulated time passed its range (about 213 days)")]
    TimeOverflow,
}

//! railyard's job supervisor: start N local ranks with the variables launchers set and
//! manage the job as torchrun does. `railyard launch`, `railyard perf --np`, `railyard
//! calibrate` and the Python package (`railyard.launch`) all run jobs through it.
//!
//! - `job`: start the ranks, watch them, stop the job on the first failure, say how it ended.
//! - `watch`: sleep until a rank ends (pidfds) or a deadline passes.
//! - `signals`: signals to the launcher passed on to the ranks; the job signalled as a whole.
//! - `leftovers`: processes the ranks leave behind come back here and are stopped.
//! - `relay`: each rank's output passed on in whole lines.

pub mod error;
pub mod job;
mod leftovers;
mod relay;
mod signals;
mod watch;

pub use error::LaunchError;

/// How long ranks get between SIGTERM and SIGKILL (and leftovers, and output relays,
/// between the job's end and the next step).
pub(crate) const GRACE: std::time::Duration = std::time::Duration::from_secs(1);
pub use job::{run_job, Job, Outcome, Output, MAX_RANKS};

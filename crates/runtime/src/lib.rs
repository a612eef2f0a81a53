//! railyard's runtime: communicators that execute the schedule crate's schedules across
//! processes (and hosts) over shared memory and TCP, with real data. The same generators the model costs
//! are what runs here, so a prediction and a measurement describe the same plan.
//!
//! Data flow: `bootstrap` (rendezvous) → `link` (per peer: shared-memory rings `shm` with
//! single-copy pulls `cma`, or TCP sockets, chosen on `interface`) → `prepared` (this rank's
//! part of a schedule as checked byte spans, worked out once) → `comm` (its rounds as
//! frames, `frame`) → `progress` (moves them without blocking) → `reduce`.
//! Local copies go through `copy`. `config` reads every variable once; `env` reads the launcher's; `tuner` picks algorithms
//! by the model; `slip` holds a streaming receiver back behind its producer; `handle` runs calls asynchronously.

pub mod affinity;
mod agreement;
pub mod bootstrap;
pub mod cma;
pub mod comm;
pub mod config;
pub mod copy;
pub mod element;
pub mod env;
pub mod error;
pub mod frame;
pub mod handle;
pub mod interface;
pub mod lane_io;
pub mod link;
pub mod memory;
pub mod prepared;
pub mod progress;
pub mod recorder;
pub mod reduce;
pub mod share;
pub mod shm;
pub mod slip;
pub mod stuck;
pub mod tuner;

pub use bootstrap::{loopback_rendezvous_addr, UniqueId};
pub use comm::{default_algorithm, Communicator};
pub use config::Config;
pub use element::Element;
pub use env::{from_env, Launch};
pub use error::CommError;
pub use handle::{AsyncCommunicator, Handle};
pub use reduce::RedOp;

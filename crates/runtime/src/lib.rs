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

mod affinity;
mod agreement;
mod bootstrap;
mod cma;
mod comm;
mod config;
mod copy;
mod element;
mod env;
mod error;
mod frame;
mod handle;
mod interface;
mod lane_io;
mod link;
mod memory;
mod prepared;
mod progress;
pub mod recorder;
mod reduce;
pub mod share;
mod shm;
mod slip;
mod stuck;
pub mod tuner;

pub use bootstrap::{loopback_rendezvous_addr, rendezvous_addr, UniqueId};
pub use comm::{default_algorithm, Communicator};
pub use config::{Config, MAX_PIPELINE_CHUNKS, MAX_SOCKETS_PER_PEER, MAX_TRACE_CALLS};
pub use copy::STREAM_MIN_BYTES;
pub use element::Element;
pub use env::{from_env, Launch};
pub use error::CommError;
pub use handle::{AsyncCommunicator, Handle};
pub use memory::HugePageBuffer;
pub use reduce::RedOp;

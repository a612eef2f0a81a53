//! railyard's runtime: communicators that execute the schedule crate's schedules across
//! processes (and hosts) over shared memory and TCP, with real data. The same generators the model costs
//! are what runs here, so a prediction and a measurement describe the same plan.
//!
//! Status: TCP transport, rendezvous with a shared secret, every collective and
//! algorithm of the schedule crate (but in-network), all dtypes and ops, timeouts and a
//! sticky first error. Ranks on one host talk through shared-memory rings (`shm.rs`), others over TCP.

pub mod affinity;
pub mod bootstrap;
pub mod comm;
pub mod element;
pub mod env;
pub mod error;
pub mod frame;
pub mod handle;
pub mod reduce;
pub mod shm;
pub mod tuner;

pub use bootstrap::UniqueId;
pub use comm::{default_algorithm, Communicator, Config};
pub use element::Element;
pub use env::{from_env, Launch};
pub use error::CommError;
pub use handle::{AsyncCommunicator, Handle};
pub use reduce::RedOp;

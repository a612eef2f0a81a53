//! The chapter's stand-alone network models (seed 001 §7.1–§7.5), one module each, each a
//! pure function of an input struct whose `Default` is the chapter's worked example:
//!
//! - [`clos`]: Clos sizing, bisection and job cuts (seed 001 §7.1.2).
//! - `message`, `ep_dispatch`, `nic_relay`, `concurrency`, `remote_read`,
//!   `connection_state`, `dag`, `slots`, `queue`, `feedback`, `incast`, `multipath`,
//!   `ecmp`, `spray`, `deadlock`: §7.2–§7.5.
//! - [`report`]: the tables they (and the CLI) print as markdown or JSON.
//!
//! Costing a schedule on a topology is the `railyard-model` crate.

#![forbid(unsafe_code)]

pub mod clos;
pub mod concurrency;
pub mod connection_state;
pub mod dag;
pub mod deadlock;
pub mod ecmp;
pub mod ep_dispatch;
pub mod error;
pub mod feedback;
pub mod incast;
pub mod message;
pub mod multipath;
pub mod nic_relay;
pub mod packets;
pub mod queue;
pub mod registry;
pub mod remote_read;
pub mod slots;
pub mod spray;

pub use error::NetModelError;

//! railyard's analytical models. Every model is a pure function of explicit inputs.
//!
//! - [`per_round`]: the per-round resource model of a schedule on a topology (seed 001 §7.2.1).
//! - [`clos`]: Clos sizing, bisection and job cuts (seed 001 §7.1.2).
//! - [`plan`]: generate and cost several algorithms for one collective.
//! - the network models of seed 001 §7.2–§7.5, one module each (`message`, `ep_dispatch`,
//!   `nic_relay`, `concurrency`, `remote_read`, `connection_state`, `dag`, `slots`, `queue`,
//!   `feedback`, `incast`, `multipath`, `ecmp`, `spray`, `deadlock`), each a pure function
//!   of an input struct whose `Default` is the chapter's worked example.

pub mod clos;
pub mod closed_form;
pub mod concurrency;
pub mod connection_state;
pub mod dag;
pub mod deadlock;
pub mod ecmp;
pub mod ep_dispatch;
pub mod error;
pub mod feedback;
pub mod in_network;
pub mod incast;
pub mod message;
pub mod multipath;
pub mod nic_relay;
pub mod packets;
pub mod per_round;
pub mod plan;
pub mod quantity;
pub mod queue;
pub mod remote_read;
pub mod report;
pub mod ring_search;
pub mod selection;
mod server_pairs;
pub mod slots;
pub mod spray;

pub use error::ModelError;
pub use per_round::{cost, cost_with, Breakdown, HostCost, ResourceLoad, RoundCost, StageCost};
pub use plan::{plan, Plan, PlanRequest};

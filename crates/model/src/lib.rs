//! railyard's analytical models. Every model is a pure function of explicit inputs.
//!
//! - [`per_round`]: the per-round resource model of a schedule on a topology (seed 001 §7.2.1).
//! - [`clos`]: Clos sizing, bisection and job cuts (seed 001 §7.1.2).
//! - [`plan`]: generate and cost several algorithms for one collective.

pub mod clos;
pub mod error;
pub mod in_network;
pub mod per_round;
pub mod plan;

pub use error::ModelError;
pub use per_round::{cost, Breakdown, ResourceLoad, RoundCost, StageCost};
pub use plan::{plan, Plan, PlanRequest};

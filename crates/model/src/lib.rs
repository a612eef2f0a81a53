//! railyard's cost model of schedules on topologies. Every model is a pure function of
//! explicit inputs. (The chapter's stand-alone network models — Clos sizing, queues,
//! ECMP, incast and the rest — are the `railyard-netmodels` crate.)
//!
//! - [`per_round`]: the per-round resource model of a schedule on a topology (seed 001 §7.2.1):
//!   the bound at line rate, and [`expected`] at the rates NCCL-class software reaches.
//! - [`request`]: one collective request and its one resolver, for every front end.
//! - [`plan`]: cost a request's algorithms and take the fastest.
//! - [`selection`]: the fastest algorithm, explained, and NCCL's rule of thumb beside it.
//! - [`sweep`]: the fastest per size over a range of sizes, and where it changes.
//! - [`closed_form`]: the α-β closed forms the per-round model must reproduce (seed 000 §8.1.3).
//! - [`ring_search`]: the best ring order over a topology's GPUs.

#![forbid(unsafe_code)]

pub mod algorithm_ref;
pub mod closed_form;
pub mod error;
pub mod expected;
pub mod in_network;
pub mod nccl_family;
pub mod per_round;
pub mod plan;
pub mod request;
pub mod ring_search;
pub mod selection;
mod server_pairs;
pub mod sweep;

pub use error::{ModelError, MscclProblem};
pub use per_round::{cost, cost_with, Breakdown, ExpectedLimit, HostCost, ResourceLoad, RoundCost, StageCost};
pub use plan::{plan, plan_on, plan_with_routes, Plan};
pub use request::{
    gen_options, resolve, resolve_on, AlgorithmRef, AlgorithmSpec, ChunkPolicy, CollectiveRequest, Resolved, Variant,
};
pub use selection::fastest;

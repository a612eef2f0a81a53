//! railyard's schedules: a collective algorithm as an explicit, inspectable plan of
//! which rank sends which chunk to which rank, in which round, with which reduction.
//! The same schedule is costed by the model, simulated, and executed by the runtime;
//! the symbolic checker (`check`) proves it implements its collective.

#![forbid(unsafe_code)]

pub mod algorithm;
pub mod bruck;
pub mod builder;
pub mod chain;
pub mod check;
pub mod collective;
pub mod compact;
pub mod deadlock;
pub mod direct;
pub mod dtype;
pub mod error;
pub mod forward;
pub mod generate;
pub mod hierarchical;
pub mod in_place;
pub mod ir;
pub mod limits;
pub mod msccl;
pub mod msccl_races;
pub mod partition;
pub mod pat;
pub mod rail_ring;
pub mod recursive_doubling;
pub mod rhd;
pub mod ring;
pub mod step_graph;
pub mod tree;
pub mod waits;

pub use algorithm::Algorithm;
pub use builder::{merge_parallel, ScheduleBuilder};
pub use check::{check, check_in_order, CheckReport};
pub use collective::{Collective, CollectiveSpec, Contributors, InPlace, InPlaceLayout, Rank};
pub use compact::{CompactSchedule, HostWork, ParallelRounds, RoundSource};
pub use deadlock::{check_deadlock, DeadlockReport, Fifo, Programs};
pub use dtype::Dtype;
pub use error::{CheckError, ScheduleError};
pub use generate::{generate, generate_compact, GenOptions};
pub use hierarchical::{InterStage, IntraStage};
pub use in_place::in_place_hazard;
pub use ir::{Buffer, Flow, InNetwork, LocalOp, Op, Phase, Region, Round, Schedule, Step, Transfer};
pub use step_graph::{dependencies, StepGraph, StepId};

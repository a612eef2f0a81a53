//! NCCL's artifacts in railyard's terms: the output of nccl-tests (`nccl_tests.rs`),
//! NCCL's own tuner — its latency and bandwidth tables and the choice it makes from
//! them (`tuner.rs`, `tuner_constants.rs`) — and the expectations railyard's model puts
//! beside measured curves (`verdict.rs`).

#![forbid(unsafe_code)]

pub mod calibration;
pub mod error;
pub mod flight_recorder;
pub mod log;
pub mod log_report;
pub mod nccl_tests;
pub mod shape;
pub mod tuner;
pub mod tuner_constants;
pub mod validation;
pub mod verdict;

pub use error::NcclError;

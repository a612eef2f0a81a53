//! Generating a schedule: an algorithm and its options, checked against the limits
//! before anything sized by the request is made, then built by the algorithm's generator
//! (compact, or expanded transfer by transfer).

use crate::algorithm::Algorithm;
use crate::bruck::bruck;
use crate::chain::chain;
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::CompactSchedule;
use crate::direct::{direct, pairwise};
use crate::error::ScheduleError;
use crate::hierarchical::{hierarchical, hierarchical_all_reduce, InterStage, IntraStage};
use crate::ir::Schedule;
use crate::limits::Form;
use crate::pat::pat;
use crate::rail_ring::rail_ring;
use crate::recursive_doubling::recursive_doubling;
use crate::rhd::rhd;
use crate::ring::{interleaved_order, ring};
use crate::tree::tree;

/// Everything a generator may need besides the collective.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GenOptions {
    /// Ranks of each server, for the algorithms that use them (default: one server).
    pub groups: Vec<Vec<Rank>>,
    /// Ring / chain order (default: rank order).
    pub order: Option<Vec<Rank>>,
    /// Parallel rings, each carrying 1/k of every chunk (default 1).
    pub channels: usize,
    /// Pipelined chunks for chain and trees, and for the hierarchical all-reduces (default 1).
    pub pipeline_chunks: usize,
    /// How a hierarchical all-reduce crosses servers (default: a ring).
    pub inter_stage: InterStage,
}

/// Generate the schedule of `algorithm` for `spec`, transfer by transfer (for the
/// checker, the step graph and people; the model and the runtime read the compact form).
pub fn generate(
    algorithm: Algorithm,
    spec: &CollectiveSpec,
    options: &GenOptions,
    elem_bytes: u64,
) -> Result<Schedule, ScheduleError> {
    check_request(algorithm, spec, options, Form::Expanded)?;
    Ok(build(algorithm, spec, options, elem_bytes)?.expand())
}

/// Generate the compact schedule of `algorithm` for `spec` (see `compact.rs`).
pub fn generate_compact(
    algorithm: Algorithm,
    spec: &CollectiveSpec,
    options: &GenOptions,
    elem_bytes: u64,
) -> Result<CompactSchedule, ScheduleError> {
    check_request(algorithm, spec, options, Form::Compact)?;
    build(algorithm, spec, options, elem_bytes)
}

/// Run the generator (the request has passed `check_request`).
fn build(
    algorithm: Algorithm,
    spec: &CollectiveSpec,
    options: &GenOptions,
    elem_bytes: u64,
) -> Result<CompactSchedule, ScheduleError> {
    let name = algorithm.as_str();
    let (channels, chunks) = (options.channels.max(1), options.pipeline_chunks.max(1));
    let default_order: Vec<Rank> = (0..spec.ranks).collect();
    let order = options.order.as_deref().unwrap_or(&default_order);
    let one_server = vec![default_order.clone()];
    let groups = if options.groups.is_empty() { &one_server } else { &options.groups };
    let mut schedule = match algorithm {
        Algorithm::Ring => ring(spec, order, channels, elem_bytes, name),
        Algorithm::InterleavedRing => ring(spec, &interleaved_order(groups), channels, elem_bytes, name),
        Algorithm::RailRing => rail_ring(spec, groups, channels, elem_bytes, name),
        Algorithm::Chain => chain(spec, order, chunks, elem_bytes, name),
        Algorithm::Tree => tree(spec, false, chunks, elem_bytes, name),
        Algorithm::DoubleTree => tree(spec, true, chunks, elem_bytes, name),
        Algorithm::Rhd => rhd(spec, elem_bytes, name),
        Algorithm::RecursiveDoubling => recursive_doubling(spec, elem_bytes, name),
        Algorithm::Bruck => bruck(spec, elem_bytes, name),
        Algorithm::Pat => pat(spec, elem_bytes, name),
        Algorithm::Pairwise => pairwise(spec, elem_bytes, name),
        Algorithm::Direct => direct(spec, elem_bytes, name),
        Algorithm::Hierarchical if spec.collective == Collective::AllReduce => {
            hierarchical_all_reduce(spec, groups, IntraStage::Ring, options.inter_stage, chunks, elem_bytes, name)
        }
        Algorithm::Hierarchical => hierarchical(spec, groups, elem_bytes, name),
        Algorithm::InNetwork => {
            hierarchical_all_reduce(spec, groups, IntraStage::Ring, InterStage::InNetwork, chunks, elem_bytes, name)
        }
        Algorithm::InNetworkChain => {
            hierarchical_all_reduce(spec, groups, IntraStage::Chain, InterStage::InNetwork, chunks, elem_bytes, name)
        }
        Algorithm::Nvls => {
            hierarchical_all_reduce(spec, groups, IntraStage::Nvls, options.inter_stage, chunks, elem_bytes, name)
        }
        Algorithm::NvlsTree => {
            hierarchical_all_reduce(spec, groups, IntraStage::Nvls, InterStage::Tree, chunks, elem_bytes, name)
        }
    }?;
    schedule.forward_first_round = true;
    schedule.pipeline_chunks = if algorithm.takes_chunks(spec.collective) { chunks } else { 1 };
    // A chain's or tree's chunks enter one round after another: one passes all rounds but
    // the last chunks − 1. (The hierarchical ones set their own.)
    if schedule.pipeline_chunks > 1 && schedule.path_rounds == 0 {
        schedule.path_rounds = schedule.rounds().saturating_sub(chunks - 1).max(1);
    }
    Ok(schedule)
}

/// The spec is valid, the algorithm implements the collective, and the limits for the
/// form asked pass — before anything sized by the request is allocated.
fn check_request(
    algorithm: Algorithm,
    spec: &CollectiveSpec,
    options: &GenOptions,
    form: Form,
) -> Result<(), ScheduleError> {
    spec.validate().map_err(|message| ScheduleError::BadSpec { message })?;
    if !algorithm.supports(spec.collective) {
        return Err(ScheduleError::unsupported(algorithm, spec.collective));
    }
    let (channels, chunks) = (options.channels.max(1), options.pipeline_chunks.max(1));
    crate::limits::check_limits(algorithm, spec, channels, chunks, &options.groups, form)
}

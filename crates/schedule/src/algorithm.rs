//! The catalogue of algorithms: one name per generator, so the model, the simulator,
//! the runtime and the CLI all ask for schedules the same way.

use std::fmt;
use std::str::FromStr;

use crate::collective::{CollectiveSpec, Rank};
use crate::error::ScheduleError;
use crate::hierarchical::{hierarchical_all_reduce, InterStage};
use crate::ir::Schedule;
use crate::ring::{interleaved_order, ring};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Ring in rank order (or a given order): the seed's contiguous ring.
    Ring,
    /// Ring alternating servers: 0, 8, 1, 9, ... (seed 001 §7.2.1).
    InterleavedRing,
    /// Intra-server reduce-scatter, inter-server ring all-reduce per shard, intra-server all-gather.
    Hierarchical,
    /// Hierarchical with the inter-server stage done by the switches (SHARP / NVLS).
    InNetwork,
}

impl Algorithm {
    pub const ALL: [Algorithm; 4] =
        [Algorithm::Ring, Algorithm::InterleavedRing, Algorithm::Hierarchical, Algorithm::InNetwork];

    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::InterleavedRing => "interleaved-ring",
            Algorithm::Hierarchical => "hierarchical",
            Algorithm::InNetwork => "in-network",
        }
    }

    /// Whether the algorithm needs the ranks grouped by server.
    pub fn uses_groups(self) -> bool {
        !matches!(self, Algorithm::Ring)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Algorithm {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Algorithm::ALL.into_iter().find(|a| a.as_str() == text).ok_or_else(|| {
            let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.as_str()).collect();
            format!("unknown algorithm \"{text}\" (expected one of {})", names.join(", "))
        })
    }
}

/// Generate the schedule of `algorithm` for `spec`. `groups` are the ranks of each
/// server (for the algorithms that use them); `order` overrides the ring order.
pub fn generate(
    algorithm: Algorithm,
    spec: CollectiveSpec,
    groups: &[Vec<Rank>],
    order: Option<&[Rank]>,
    elem_bytes: u64,
) -> Result<Schedule, ScheduleError> {
    if spec.ranks == 0 {
        return Err(ScheduleError::NoRanks);
    }
    let name = algorithm.as_str();
    match algorithm {
        Algorithm::Ring => {
            let default: Vec<Rank> = (0..spec.ranks).collect();
            ring(spec, order.unwrap_or(&default), elem_bytes, name)
        }
        Algorithm::InterleavedRing => ring(spec, &interleaved_order(groups), elem_bytes, name),
        Algorithm::Hierarchical => hierarchical_all_reduce(spec, groups, InterStage::Ring, elem_bytes, name),
        Algorithm::InNetwork => hierarchical_all_reduce(spec, groups, InterStage::InNetwork, elem_bytes, name),
    }
}

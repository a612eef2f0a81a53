//! What a collective promises: its buffers and its postcondition.

use std::ops::Range;
use std::str::FromStr;

use serde::Serialize;

use crate::partition::partition;

pub type Rank = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Collective {
    /// Every rank ends with the reduction of every rank's input (seed 000 §8.1.1).
    AllReduce,
    /// Rank r ends with chunk r of the reduction of all inputs.
    ReduceScatter,
    /// Rank r contributes chunk r; every rank ends with all chunks.
    AllGather,
}

impl Collective {
    pub fn as_str(self) -> &'static str {
        match self {
            Collective::AllReduce => "allreduce",
            Collective::ReduceScatter => "reducescatter",
            Collective::AllGather => "allgather",
        }
    }

    /// Whether the collective combines contributions (and so needs a reduction op).
    pub fn reduces(self) -> bool {
        matches!(self, Collective::AllReduce | Collective::ReduceScatter)
    }
}

impl FromStr for Collective {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().replace(['_', '-'], "").as_str() {
            "allreduce" => Ok(Collective::AllReduce),
            "reducescatter" => Ok(Collective::ReduceScatter),
            "allgather" => Ok(Collective::AllGather),
            _ => Err(format!("unknown collective \"{text}\" (expected allreduce, reducescatter, allgather)")),
        }
    }
}

/// A collective over `ranks` ranks on `count` elements. `count` is the size of the large
/// buffer, as nccl-tests counts it: all-reduce's vector, all-gather's output,
/// reduce-scatter's input. Chunks of a count that the ranks do not divide differ by at
/// most one element (`partition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CollectiveSpec {
    pub collective: Collective,
    pub ranks: usize,
    pub count: u64,
}

impl CollectiveSpec {
    pub fn new(collective: Collective, ranks: usize, count: u64) -> Self {
        CollectiveSpec { collective, ranks, count }
    }

    /// The elements rank `r` owns in the partition of `count` (all-gather input,
    /// reduce-scatter output).
    pub fn chunk(&self, rank: Rank) -> Range<u64> {
        partition(self.count, self.ranks)[rank].clone()
    }

    pub fn input_len(&self, rank: Rank) -> u64 {
        match self.collective {
            Collective::AllReduce | Collective::ReduceScatter => self.count,
            Collective::AllGather => range_len(&self.chunk(rank)),
        }
    }

    pub fn output_len(&self, rank: Rank) -> u64 {
        match self.collective {
            Collective::AllReduce | Collective::AllGather => self.count,
            Collective::ReduceScatter => range_len(&self.chunk(rank)),
        }
    }

    /// In-place aliasing: where rank `r`'s input lives inside its output (all-reduce:
    /// the same buffer; all-gather: the rank's own chunk of the output), or where the
    /// output lives inside the input (reduce-scatter). Offsets in elements.
    pub fn in_place_offset(&self, rank: Rank) -> InPlace {
        match self.collective {
            Collective::AllReduce => InPlace::InputIsOutputAt(0),
            Collective::AllGather => InPlace::InputIsOutputAt(self.chunk(rank).start),
            Collective::ReduceScatter => InPlace::OutputIsInputAt(self.chunk(rank).start),
        }
    }
}

/// How the input and output buffers of one rank overlap when the caller runs in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum InPlace {
    InputIsOutputAt(u64),
    OutputIsInputAt(u64),
}

pub fn range_len(r: &Range<u64>) -> u64 {
    r.end - r.start
}

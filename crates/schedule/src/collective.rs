//! What a collective promises: its buffers and its postcondition (seed 000 §8.1.2,
//! table 8-1).

use std::ops::Range;
use std::str::FromStr;

use serde::Serialize;

use crate::partition::partition;

pub type Rank = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Collective {
    /// Every rank ends with the reduction of every rank's input.
    AllReduce,
    /// Rank r ends with chunk r of the reduction of all inputs.
    ReduceScatter,
    /// Rank r contributes chunk r; every rank ends with all chunks.
    AllGather,
    /// Every rank ends with the root's input.
    Broadcast,
    /// The root ends with the reduction of every rank's input.
    Reduce,
    /// The root ends with every rank's chunk, in rank order.
    Gather,
    /// Rank r ends with chunk r of the root's input.
    Scatter,
    /// Rank i sends chunk j of its input to rank j (chunks of the balanced partition).
    AllToAll,
    /// Rank i sends `counts[i][j]` elements to rank j.
    AllToAllv,
    /// Every rank learns that every rank arrived (one token each).
    Barrier,
    /// Point to point: `root` sends its input to `peer`.
    SendRecv,
}

impl Collective {
    pub const ALL: [Collective; 11] = [
        Collective::AllReduce,
        Collective::ReduceScatter,
        Collective::AllGather,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::Gather,
        Collective::Scatter,
        Collective::AllToAll,
        Collective::AllToAllv,
        Collective::Barrier,
        Collective::SendRecv,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Collective::AllReduce => "allreduce",
            Collective::ReduceScatter => "reducescatter",
            Collective::AllGather => "allgather",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::Gather => "gather",
            Collective::Scatter => "scatter",
            Collective::AllToAll => "alltoall",
            Collective::AllToAllv => "alltoallv",
            Collective::Barrier => "barrier",
            Collective::SendRecv => "sendrecv",
        }
    }

    /// Whether the collective combines contributions (and so needs a reduction op).
    pub fn reduces(self) -> bool {
        matches!(self, Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce)
    }

    /// Whether the collective has a root rank.
    pub fn rooted(self) -> bool {
        matches!(
            self,
            Collective::Broadcast
                | Collective::Reduce
                | Collective::Gather
                | Collective::Scatter
                | Collective::SendRecv
        )
    }

    /// nccl-tests' bus-bandwidth factor (seed 000 §8.8.1): busbw = algbw x factor.
    pub fn bus_bandwidth_factor(self, ranks: usize) -> f64 {
        let p = ranks as f64;
        match self {
            Collective::AllReduce => 2.0 * (p - 1.0) / p,
            Collective::ReduceScatter | Collective::AllGather | Collective::AllToAll | Collective::AllToAllv => {
                (p - 1.0) / p
            }
            _ => 1.0,
        }
    }
}

impl FromStr for Collective {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let key = text.to_ascii_lowercase().replace(['_', '-'], "");
        Collective::ALL.into_iter().find(|c| c.as_str() == key).ok_or_else(|| {
            let names: Vec<&str> = Collective::ALL.iter().map(|c| c.as_str()).collect();
            format!("unknown collective \"{text}\" (expected one of {})", names.join(", "))
        })
    }
}

/// A collective over `ranks` ranks on `count` elements. `count` is the size of the large
/// buffer, as nccl-tests counts it: all-reduce's, broadcast's and reduce's vector,
/// all-gather's and gather's output, reduce-scatter's and scatter's input, each rank's
/// all-to-all input. Chunks of a count the ranks do not divide differ by at most one
/// element (`partition`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct CollectiveSpec {
    pub collective: Collective,
    pub ranks: usize,
    pub count: u64,
    /// Root of broadcast, reduce, gather, scatter; the sender of send/recv.
    pub root: Rank,
    /// The receiver of send/recv.
    pub peer: Rank,
    /// All-to-allv: elements from rank i to rank j.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<Vec<Vec<u64>>>,
}

/// Who must have contributed to an output element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contributors {
    All,
    One(Rank),
}

impl CollectiveSpec {
    pub fn new(collective: Collective, ranks: usize, count: u64) -> Self {
        CollectiveSpec { collective, ranks, count, root: 0, peer: ranks.saturating_sub(1), counts: None }
    }

    pub fn with_root(mut self, root: Rank) -> Self {
        self.root = root;
        self
    }

    pub fn with_peer(mut self, peer: Rank) -> Self {
        self.peer = peer;
        self
    }

    pub fn with_counts(mut self, counts: Vec<Vec<u64>>) -> Self {
        self.count = counts.iter().map(|row| row.iter().sum::<u64>()).max().unwrap_or(0);
        self.counts = Some(counts);
        self
    }

    /// Check root, peer and the all-to-allv matrix against the rank count.
    pub fn validate(&self) -> Result<(), String> {
        if self.ranks == 0 {
            return Err("a collective needs at least one rank".into());
        }
        if self.collective.rooted() && self.root >= self.ranks {
            return Err(format!("root {} is not a rank (0..{})", self.root, self.ranks));
        }
        if self.collective == Collective::SendRecv && self.peer >= self.ranks {
            return Err(format!("peer {} is not a rank (0..{})", self.peer, self.ranks));
        }
        if self.collective == Collective::AllToAllv {
            let Some(c) = &self.counts else { return Err("alltoallv needs a counts matrix".into()) };
            if c.len() != self.ranks || c.iter().any(|row| row.len() != self.ranks) {
                return Err(format!("alltoallv counts must be {0} x {0}", self.ranks));
            }
        }
        Ok(())
    }

    pub fn parts(&self) -> Vec<Range<u64>> {
        partition(self.count, self.ranks)
    }

    /// The elements rank `r` owns in the partition of `count`.
    pub fn chunk(&self, rank: Rank) -> Range<u64> {
        self.parts()[rank].clone()
    }

    /// Elements rank i sends to rank j in an all-to-all(v): `counts[i][j]`, or for
    /// all-to-all the size of chunk j of the balanced partition.
    pub fn pair_count(&self, i: Rank, j: Rank) -> u64 {
        match &self.counts {
            Some(c) => c[i][j],
            None => {
                let p = self.ranks as u64;
                self.count / p + u64::from((j as u64) < self.count % p)
            }
        }
    }

    /// Where, in rank i's input, the block for rank j starts.
    pub fn send_offset(&self, i: Rank, j: Rank) -> u64 {
        match &self.counts {
            Some(_) => (0..j).map(|k| self.pair_count(i, k)).sum(),
            // Blocks of the balanced partition: the first count % P hold one more.
            None => {
                let p = self.ranks as u64;
                j as u64 * (self.count / p) + (j as u64).min(self.count % p)
            }
        }
    }

    /// Where, in rank j's output, the block from rank i starts.
    pub fn recv_offset(&self, i: Rank, j: Rank) -> u64 {
        match &self.counts {
            Some(_) => (0..i).map(|k| self.pair_count(k, j)).sum(),
            // Every sender's block for rank j has the same length.
            None => i as u64 * self.pair_count(i, j),
        }
    }

    pub fn input_len(&self, rank: Rank) -> u64 {
        let is_root = rank == self.root;
        match self.collective {
            Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce => self.count,
            Collective::AllGather | Collective::Gather => range_len(&self.chunk(rank)),
            Collective::Broadcast | Collective::Scatter | Collective::SendRecv => {
                if is_root {
                    self.count
                } else {
                    0
                }
            }
            Collective::AllToAll | Collective::AllToAllv => (0..self.ranks).map(|j| self.pair_count(rank, j)).sum(),
            Collective::Barrier => 1,
        }
    }

    pub fn output_len(&self, rank: Rank) -> u64 {
        let is_root = rank == self.root;
        match self.collective {
            Collective::AllReduce | Collective::AllGather | Collective::Broadcast => self.count,
            Collective::ReduceScatter | Collective::Scatter => range_len(&self.chunk(rank)),
            Collective::Reduce | Collective::Gather => {
                if is_root {
                    self.count
                } else {
                    0
                }
            }
            Collective::AllToAll | Collective::AllToAllv => (0..self.ranks).map(|i| self.pair_count(i, rank)).sum(),
            Collective::Barrier => self.ranks as u64,
            Collective::SendRecv => {
                if rank == self.peer {
                    self.count
                } else {
                    0
                }
            }
        }
    }

    /// What every output element of rank `r` must hold: the input element index and
    /// who contributed (for the symbolic checker and for the runtime's verification).
    pub fn expected_output(&self, r: Rank) -> Vec<(u64, Contributors)> {
        let parts = self.parts();
        let len = self.output_len(r);
        match self.collective {
            Collective::AllReduce | Collective::Reduce => (0..len).map(|i| (i, Contributors::All)).collect(),
            Collective::ReduceScatter => (0..len).map(|i| (parts[r].start + i, Contributors::All)).collect(),
            Collective::Gather if r != self.root => Vec::new(),
            Collective::AllGather | Collective::Gather => parts
                .iter()
                .enumerate()
                .flat_map(|(q, c)| (0..range_len(c)).map(move |t| (t, Contributors::One(q))))
                .collect(),
            Collective::Broadcast | Collective::SendRecv => {
                (0..len).map(|i| (i, Contributors::One(self.root))).collect()
            }
            Collective::Scatter => (0..len).map(|i| (parts[r].start + i, Contributors::One(self.root))).collect(),
            Collective::AllToAll | Collective::AllToAllv => (0..self.ranks)
                .flat_map(|q| {
                    let from = self.send_offset(q, r);
                    (0..self.pair_count(q, r)).map(move |t| (from + t, Contributors::One(q)))
                })
                .collect(),
            Collective::Barrier => (0..self.ranks).map(|q| (0, Contributors::One(q))).collect(),
        }
    }

    /// In-place aliasing: where rank `r`'s input lives inside its output (all-reduce:
    /// the same buffer; all-gather and gather: the rank's own chunk of the output), or
    /// where the output lives inside the input (reduce-scatter, scatter).
    pub fn in_place_offset(&self, rank: Rank) -> InPlace {
        match self.collective {
            Collective::AllReduce | Collective::Broadcast | Collective::Reduce => InPlace::InputIsOutputAt(0),
            Collective::AllGather | Collective::Gather => InPlace::InputIsOutputAt(self.chunk(rank).start),
            Collective::ReduceScatter | Collective::Scatter => InPlace::OutputIsInputAt(self.chunk(rank).start),
            Collective::AllToAll | Collective::AllToAllv | Collective::Barrier | Collective::SendRecv => {
                InPlace::Separate
            }
        }
    }

    /// Rank `rank`'s one in-place buffer, in elements: where its input and its output
    /// start in it, and its length. Collectives without an in-place form put both at 0
    /// (the caller's buffer is input and output; a runtime works on a copy of the input).
    pub fn in_place_layout(&self, rank: Rank) -> InPlaceLayout {
        let (input, output) = (self.input_len(rank), self.output_len(rank));
        let (input_at, output_at) = match self.in_place_offset(rank) {
            InPlace::InputIsOutputAt(at) => (at, 0),
            InPlace::OutputIsInputAt(at) => (0, at),
            InPlace::Separate => (0, 0),
        };
        InPlaceLayout { input_at, output_at, len: (input_at + input).max(output_at + output) }
    }
}

/// Offsets and length, in elements, of a rank's in-place buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlaceLayout {
    pub input_at: u64,
    pub output_at: u64,
    pub len: u64,
}

/// How the input and output buffers of one rank overlap when the caller runs in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum InPlace {
    InputIsOutputAt(u64),
    OutputIsInputAt(u64),
    /// The collective has no in-place form.
    Separate,
}

pub fn range_len(r: &Range<u64>) -> u64 {
    r.end - r.start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_layouts() {
        let layout = |c, rank, root| CollectiveSpec::new(c, 3, 7).with_root(root).in_place_layout(rank);
        let l = |input_at, output_at, len| InPlaceLayout { input_at, output_at, len };
        // 7 over 3 ranks: chunks [0,3) [3,5) [5,7).
        assert_eq!(layout(Collective::AllGather, 1, 0), l(3, 0, 7));
        assert_eq!(layout(Collective::ReduceScatter, 2, 0), l(0, 5, 7));
        assert_eq!(layout(Collective::AllReduce, 0, 0), l(0, 0, 7));
        // A reduce's non-root has input only; a broadcast's non-root output only.
        assert_eq!(layout(Collective::Reduce, 1, 0), l(0, 0, 7));
        assert_eq!(layout(Collective::Broadcast, 1, 0), l(0, 0, 7));
        assert_eq!(layout(Collective::AllToAll, 2, 0), l(0, 0, 7));
    }
}

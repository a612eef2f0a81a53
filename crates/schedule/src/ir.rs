//! The schedule IR: the contract between the model, the simulator, the runtime, the
//! symbolic checker and people.
//!
//! This is the expanded form, every transfer held; generators build the compact form
//! (`compact.rs`: a ring's rounds made on demand from its orders and blocks), which
//! expands to it and gives each rank its own part of it.
//!
//! A schedule is a prologue of local copies, a sequence of rounds, and an epilogue.
//! A round holds transfers (one rank sends a region of one of its buffers to a region
//! of another rank's buffer, copying or reducing into it) and in-network steps (ranks
//! send a region to a switch, the switch reduces, the result is multicast back).
//!
//! Regions are in elements of the schedule's element size, so a transfer never splits
//! an element; bytes = elements x `elem_bytes`.
//!
//! Semantics of a round (what the checker enforces and the runtime may rely on):
//! every transfer reads the state from before the round; no element is written by a
//! copy and by anything else in the same round; no element is read by one step and
//! written by another in the same round (so the steps of a round may run in any order
//! or concurrently); several reductions into one element in one round are allowed.
//! A transfer may be cut into pieces (pipelined) without changing its meaning, because
//! it reads and writes disjoint elements of what the round touches. A round's local steps
//! run after its transfers and in-network steps have landed, in order.
//!
//! Every transfer travels on a channel (one ring of a multi-channel ring; 0 otherwise);
//! transfers with the same (from, to, channel) are delivered in step order — round, then
//! place in the round — which a transport keeps by carrying a channel on one ordered
//! stream (the runtime carries all of a peer pair's channels on one).

use serde::Serialize;

use crate::collective::{CollectiveSpec, Rank};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Buffer {
    Input,
    Output,
    Scratch,
}

impl Buffer {
    pub fn as_str(self) -> &'static str {
        match self {
            Buffer::Input => "input",
            Buffer::Output => "output",
            Buffer::Scratch => "scratch",
        }
    }
}

/// `len` elements of one buffer from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Region {
    pub buffer: Buffer,
    pub offset: u64,
    pub len: u64,
}

impl Region {
    pub fn new(buffer: Buffer, range: std::ops::Range<u64>) -> Self {
        Region { buffer, offset: range.start, len: range.end - range.start }
    }

    pub fn end(&self) -> u64 {
        self.offset + self.len
    }

    /// Whether the two regions share an element (of the same buffer).
    pub fn overlaps(&self, other: &Region) -> bool {
        self.buffer == other.buffer && self.offset < other.end() && other.offset < self.end()
    }

    /// Whether `inner` lies wholly inside this region (of the same buffer).
    pub fn contains(&self, inner: &Region) -> bool {
        self.buffer == inner.buffer && self.offset <= inner.offset && inner.end() <= self.end()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// destination := source
    Copy,
    /// destination := destination (+) source, with the collective's reduction operator
    Reduce,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transfer {
    pub from: Rank,
    pub to: Rank,
    /// Region of `from`'s buffers that is sent.
    pub read: Region,
    /// Region of `to`'s buffers that receives it (same length).
    pub write: Region,
    pub op: Op,
    /// Which shard this transfer belongs to, for words like "all-reduce of shard 5".
    pub shard: Option<u32>,
    /// The channel it travels on (a ring of a multi-channel ring algorithm). Transfers
    /// with the same (from, to, channel) are delivered in the order of their steps
    /// (round, then place in the round): a transport may multiplex channels over one
    /// connection or give each its own, but never reorders within a channel.
    pub channel: u32,
}

/// An in-network reduction: every rank in `ranks` sends its `read` region to the
/// fabric, a switch reduces them, and every rank receives the result into `write`
/// (SHARP / NVLS style; seed 001 §7.2.1 "第四種方案：在網歸約") — or, by its `flow`,
/// only one rank receives it, or one rank's region is copied to all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InNetwork {
    pub ranks: Vec<Rank>,
    pub read: Region,
    pub write: Region,
    pub shard: Option<u32>,
    #[serde(skip_serializing_if = "Flow::is_all")]
    pub flow: Flow,
}

/// Who sends into an in-network step and who receives its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flow {
    /// Every rank sends, every rank receives the reduction (an all-reduce).
    #[default]
    All,
    /// Every rank sends, one receives the reduction: NVLS's reduce-scatter, where the
    /// owner of a shard reads it reduced from every GPU's memory (`multimem.ld_reduce`).
    ReduceTo(Rank),
    /// One rank sends, every rank receives a copy: NVLS's all-gather, a multicast store
    /// (`multimem.st`).
    MulticastFrom(Rank),
}

impl Flow {
    pub fn is_all(&self) -> bool {
        *self == Flow::All
    }
}

impl InNetwork {
    /// Whether `rank` sends its `read` region into the step.
    pub fn sends(&self, rank: Rank) -> bool {
        match self.flow {
            Flow::All | Flow::ReduceTo(_) => self.ranks.contains(&rank),
            Flow::MulticastFrom(r) => r == rank,
        }
    }

    /// Whether `rank` receives the result into its `write` region.
    pub fn receives(&self, rank: Rank) -> bool {
        match self.flow {
            Flow::All | Flow::MulticastFrom(_) => self.ranks.contains(&rank),
            Flow::ReduceTo(r) => r == rank,
        }
    }

    /// The ranks that send, in `ranks` order.
    pub fn senders(&self) -> impl Iterator<Item = Rank> + '_ {
        self.ranks.iter().copied().filter(|&r| self.sends(r))
    }

    /// The ranks that receive, in `ranks` order.
    pub fn receivers(&self) -> impl Iterator<Item = Rank> + '_ {
        self.ranks.iter().copied().filter(|&r| self.receives(r))
    }
}

/// A copy or reduction inside one rank (no network): in the prologue, after a round
/// (`Round::local`), or in the epilogue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocalOp {
    pub rank: Rank,
    pub read: Region,
    pub write: Region,
    pub op: Op,
}

/// What happens in one round, before it is placed in a phase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    pub transfers: Vec<Transfer>,
    pub in_network: Vec<InNetwork>,
    /// Local copies and reductions once the round's transfers have landed.
    pub local: Vec<LocalOp>,
}

impl Step {
    /// What of a round concerns `rank`: the transfers it sends or receives, the in-network
    /// steps it joins, its own local steps, in their order.
    pub fn part_of(transfers: &[Transfer], in_network: &[InNetwork], local: &[LocalOp], rank: Rank) -> Step {
        Step {
            transfers: transfers.iter().filter(|t| t.from == rank || t.to == rank).cloned().collect(),
            in_network: in_network.iter().filter(|n| n.ranks.contains(&rank)).cloned().collect(),
            local: local.iter().filter(|l| l.rank == rank).cloned().collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.transfers.is_empty() && self.in_network.is_empty() && self.local.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Round {
    pub phase: usize,
    /// 1-based step inside the phase.
    pub step: usize,
    pub transfers: Vec<Transfer>,
    pub in_network: Vec<InNetwork>,
    /// Local copies and reductions each rank does after the round's transfers and
    /// in-network steps have landed, before the next round: steps of their own, so a
    /// sum received into scratch is added in once instead of being received into every
    /// copy a later round needs (recursive doubling sends R·M, not R(R+1)/2·M). They may
    /// read what the round wrote; the next round sees what they wrote.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub local: Vec<LocalOp>,
}

/// A named stage of an algorithm, e.g. "intra-server reduce-scatter".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Phase {
    pub name: String,
    pub rounds: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Schedule {
    pub spec: CollectiveSpec,
    pub algorithm: String,
    pub elem_bytes: u64,
    /// Scratch elements each rank needs.
    pub scratch_len: Vec<u64>,
    pub phases: Vec<Phase>,
    pub prologue: Vec<LocalOp>,
    pub rounds: Vec<Round>,
    pub epilogue: Vec<LocalOp>,
}

impl Schedule {
    /// The round in words: "reduce-scatter step 3 of 15".
    pub fn round_label(&self, round: usize) -> String {
        let r = &self.rounds[round];
        let phase = &self.phases[r.phase];
        format!("{} step {} of {}", phase.name, r.step, phase.rounds)
    }

    /// A transfer in words, for traces and error messages.
    pub fn transfer_label(&self, round: usize, t: &Transfer) -> String {
        let shard = t.shard.map(|s| format!(" of shard {s}")).unwrap_or_default();
        format!("{}{shard}: rank {} -> rank {}", self.round_label(round), t.from, t.to)
    }

    /// `rank`'s part (see [`CompactSchedule::for_rank`]), filtered from this one.
    pub fn for_rank(&self, rank: Rank) -> Schedule {
        let mine = |l: &&LocalOp| l.rank == rank;
        Schedule {
            spec: self.spec.clone(),
            algorithm: self.algorithm.clone(),
            elem_bytes: self.elem_bytes,
            scratch_len: self.scratch_len.clone(),
            phases: self.phases.clone(),
            prologue: self.prologue.iter().filter(mine).cloned().collect(),
            rounds: self
                .rounds
                .iter()
                .map(|r| {
                    let part = Step::part_of(&r.transfers, &r.in_network, &r.local, rank);
                    Round {
                        phase: r.phase,
                        step: r.step,
                        transfers: part.transfers,
                        in_network: part.in_network,
                        local: part.local,
                    }
                })
                .collect(),
            epilogue: self.epilogue.iter().filter(mine).cloned().collect(),
        }
    }

    pub fn buffer_len(&self, rank: Rank, buffer: Buffer) -> u64 {
        match buffer {
            Buffer::Input => self.spec.input_len(rank),
            Buffer::Output => self.spec.output_len(rank),
            Buffer::Scratch => self.scratch_len.get(rank).copied().unwrap_or(0),
        }
    }

    /// Elements sent over the network by all ranks (in-network steps count once per
    /// participant, for the send to the switch).
    pub fn elements_sent(&self) -> u64 {
        self.rounds
            .iter()
            .map(|r| {
                r.transfers.iter().map(|t| t.read.len).sum::<u64>()
                    + r.in_network.iter().map(|s| s.read.len * s.ranks.len() as u64).sum::<u64>()
            })
            .sum()
    }

    /// Every local operation: prologue, those between rounds, epilogue.
    pub fn local_ops(&self) -> impl Iterator<Item = &LocalOp> {
        self.prologue.iter().chain(self.rounds.iter().flat_map(|r| &r.local)).chain(&self.epilogue)
    }
}

#[cfg(test)]
mod tests {
    use crate::{generate, Algorithm, Collective, CollectiveSpec, GenOptions};

    /// A ring's part for one rank is made from the compact form without anyone else's
    /// transfers: a sender and a receiver per round (the whole-schedule agreement of
    /// parts is `tests/expansion.rs`).
    #[test]
    fn a_rings_part_is_linear_in_the_ranks() {
        let spec = CollectiveSpec::new(Collective::AllReduce, 64, 1 << 12);
        let ring = crate::generate_compact(Algorithm::Ring, &spec, &GenOptions::default(), 4).unwrap();
        let part = ring.for_rank(7);
        let held: usize = part.rounds.iter().map(|r| r.transfers.len()).sum();
        assert_eq!(held, 4 * 63, "a sender and a receiver per round, not 64 of each");
        assert_eq!(part.rounds.len(), 2 * 63);
        assert!(part.rounds.iter().flat_map(|r| &r.transfers).all(|t| t.from == 7 || t.to == 7));
    }

    /// Each ring of a multi-channel ring travels on its own channel: every rank sends to
    /// exactly one successor per channel, and channel c's successors are the ring of
    /// `channel_order(order, c)`.
    #[test]
    fn ring_channels_are_labelled() {
        let spec = CollectiveSpec::new(Collective::AllReduce, 6, 6 * 4 * 3);
        let options = GenOptions { channels: 4, ..GenOptions::default() };
        let s = generate(Algorithm::Ring, &spec, &options, 4).unwrap();
        let order: Vec<usize> = (0..6).collect();
        for c in 0..4u32 {
            let ring = crate::ring::channel_order(&order, c as usize);
            for t in s.rounds.iter().flat_map(|r| &r.transfers).filter(|t| t.channel == c) {
                let at = ring.iter().position(|&r| r == t.from).unwrap();
                assert_eq!(t.to, ring[(at + 1) % 6], "channel {c}");
            }
            assert_eq!(s.rounds[0].transfers.iter().filter(|t| t.channel == c).count(), 6);
        }
        assert!(s.rounds.iter().flat_map(|r| &r.transfers).all(|t| t.channel < 4));
    }
}

//! Direct algorithms: every rank sends straight to its destinations — one round for
//! broadcast, reduce, gather, scatter, send/recv, all-gather, reduce-scatter, barrier
//! and all-to-all. (No direct all-reduce: the per-round model charges one start-up per
//! round, not per message, and would flatter an algorithm whose every rank sends P − 1
//! messages at once; rings, trees and RHD are what the seeds compare.)
//! Pairwise all-to-all (seed 000 §8.1.3) spreads the same blocks over P−1 rounds: at
//! round k rank i sends to i+k, so each rank has one block in flight per round.

use std::ops::Range;

use crate::builder::ScheduleBuilder;
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::{CompactSchedule, RoundSource};
use crate::error::ScheduleError;
use crate::ir::{Buffer, Op, Region, Step, Transfer};
use crate::ring::copy;

fn t(from: Rank, to: Rank, read: Region, write: Region, op: Op) -> Transfer {
    Transfer { from, to, read, write, op, shard: None, channel: 0 }
}

fn range(start: u64, len: u64) -> Range<u64> {
    start..start + len
}

fn one(transfers: Vec<Transfer>) -> Vec<Step> {
    vec![Step { transfers, in_network: Vec::new(), local: Vec::new() }]
}

pub fn direct(spec: &CollectiveSpec, elem_bytes: u64, algorithm: &str) -> Result<CompactSchedule, ScheduleError> {
    let n = spec.ranks;
    let root = spec.root;
    let all = 0..spec.count;
    let parts = spec.parts();
    let input = |r: Range<u64>| Region::new(Buffer::Input, r);
    let output = |r: Range<u64>| Region::new(Buffer::Output, r);
    let own = |r: Rank| 0..parts[r].end - parts[r].start;
    let others = |r: Rank| (0..n).filter(move |&q| q != r);
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    let name = format!("direct {}", spec.collective.as_str());
    match spec.collective {
        Collective::AllReduce => return Err(ScheduleError::unsupported(algorithm, Collective::AllReduce)),
        Collective::Broadcast => {
            b.prologue(copy(root, input(all.clone()), output(all.clone())));
            b.phase(
                name,
                one(others(root).map(|q| t(root, q, output(all.clone()), output(all.clone()), Op::Copy)).collect()),
            );
        }
        Collective::Reduce => {
            b.prologue(copy(root, input(all.clone()), output(all.clone())));
            b.phase(
                name,
                one(others(root).map(|q| t(q, root, input(all.clone()), output(all.clone()), Op::Reduce)).collect()),
            );
        }
        Collective::Gather => {
            b.prologue(copy(root, input(own(root)), output(parts[root].clone())));
            b.phase(
                name,
                one(others(root).map(|q| t(q, root, input(own(q)), output(parts[q].clone()), Op::Copy)).collect()),
            );
        }
        Collective::Scatter => {
            b.prologue(copy(root, input(parts[root].clone()), output(own(root))));
            b.phase(
                name,
                one(others(root).map(|q| t(root, q, input(parts[q].clone()), output(own(q)), Op::Copy)).collect()),
            );
        }
        Collective::SendRecv => {
            if root == spec.peer {
                b.prologue(copy(root, input(all.clone()), output(all)));
            } else {
                b.phase(name, one(vec![t(root, spec.peer, input(all.clone()), output(all), Op::Copy)]));
            }
        }
        Collective::AllGather | Collective::Barrier => {
            let out: Vec<Range<u64>> = if spec.collective == Collective::Barrier {
                (0..n as u64).map(|q| q..q + 1).collect()
            } else {
                parts.clone()
            };
            for (r, block) in out.iter().enumerate() {
                b.prologue(copy(r, input(0..block.end - block.start), output(block.clone())));
            }
            let transfers = (0..n)
                .flat_map(|r| others(r).map(move |q| (r, q)))
                .map(|(r, q)| t(r, q, output(out[r].clone()), output(out[r].clone()), Op::Copy));
            b.phase(name, one(transfers.collect()));
        }
        Collective::ReduceScatter => {
            for (r, part) in parts.iter().enumerate() {
                b.prologue(copy(r, input(part.clone()), output(own(r))));
            }
            let transfers = (0..n)
                .flat_map(|r| others(r).map(move |q| (r, q)))
                .map(|(r, q)| t(r, q, input(parts[q].clone()), output(own(q)), Op::Reduce));
            b.phase(name, one(transfers.collect()));
        }
        Collective::AllToAll | Collective::AllToAllv => {
            for (s, d, send, recv) in blocks(spec) {
                if s == d {
                    b.prologue(copy(s, send, recv));
                }
            }
            let transfers =
                blocks(spec).into_iter().filter(|b| b.0 != b.1).map(|(s, d, send, recv)| t(s, d, send, recv, Op::Copy));
            b.phase(name, one(transfers.collect()));
        }
    }
    Ok(b.build_compact())
}

/// Every all-to-all block: (source, destination, region in the source's input, region in the destination's output).
fn blocks(spec: &CollectiveSpec) -> Vec<(Rank, Rank, Region, Region)> {
    let n = spec.ranks;
    let all = AllToAllBlocks::new(spec);
    (0..n)
        .flat_map(|s| (0..n).map(move |d| (s, d)))
        .map(|(s, d)| {
            let (send, recv) = all.block(s, d);
            (s, d, send, recv)
        })
        .collect()
}

/// Where every all-to-all(v) block lies: source s's block for destination d is read from
/// s's input and lands in d's output. An all-to-all's offsets are closed forms; an
/// all-to-allv's are prefix sums of its counts, taken once here (as many as its counts)
/// instead of summed again per block.
#[derive(Debug)]
pub struct AllToAllBlocks {
    spec: CollectiveSpec,
    /// All-to-allv only: (send, receive) offsets of every block, row-major by source.
    offsets: Option<(Vec<u64>, Vec<u64>)>,
}

impl AllToAllBlocks {
    pub fn new(spec: &CollectiveSpec) -> Self {
        let n = spec.ranks;
        let offsets = spec.counts.as_ref().map(|_| {
            let (mut send, mut recv) = (vec![0u64; n * n], vec![0u64; n * n]);
            for s in 0..n {
                for d in 1..n {
                    send[s * n + d] = send[s * n + d - 1] + spec.pair_count(s, d - 1);
                }
            }
            for d in 0..n {
                for s in 1..n {
                    recv[s * n + d] = recv[(s - 1) * n + d] + spec.pair_count(s - 1, d);
                }
            }
            (send, recv)
        });
        AllToAllBlocks { spec: spec.clone(), offsets }
    }

    /// Source `s`'s block for destination `d`: where it is read and where it lands.
    pub fn block(&self, s: Rank, d: Rank) -> (Region, Region) {
        let n = self.spec.ranks;
        let len = self.spec.pair_count(s, d);
        let (send, recv) = match &self.offsets {
            Some((send, recv)) => (send[s * n + d], recv[s * n + d]),
            None => (self.spec.send_offset(s, d), self.spec.recv_offset(s, d)),
        };
        (Region::new(Buffer::Input, range(send, len)), Region::new(Buffer::Output, range(recv, len)))
    }

    /// Offsets held (for limits).
    fn held(&self) -> usize {
        self.offsets.as_ref().map_or(0, |(s, r)| s.len() + r.len())
    }
}

/// Pairwise-exchange all-to-all(v): P − 1 rounds, rank i sends to i + k at round k.
pub fn pairwise(spec: &CollectiveSpec, elem_bytes: u64, algorithm: &str) -> Result<CompactSchedule, ScheduleError> {
    if !matches!(spec.collective, Collective::AllToAll | Collective::AllToAllv) {
        return Err(ScheduleError::unsupported(algorithm, spec.collective));
    }
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    let rounds = PairwiseRounds::new(spec);
    for s in 0..spec.ranks {
        let (send, recv) = rounds.blocks.block(s, s);
        b.prologue(copy(s, send, recv));
    }
    b.rounds("pairwise all-to-all", rounds);
    Ok(b.build_compact())
}

/// The rounds of a pairwise exchange, made on demand: O(P) held for an all-to-all (an
/// all-to-allv's P² block offsets, as its counts).
#[derive(Debug)]
struct PairwiseRounds {
    blocks: AllToAllBlocks,
    /// The shifts k (rank i sends to i + k) whose round moves something.
    shifts: Vec<usize>,
}

impl PairwiseRounds {
    fn new(spec: &CollectiveSpec) -> Self {
        let n = spec.ranks;
        let shifts = (1..n)
            .filter(|&k| match spec.counts {
                Some(_) => (0..n).any(|s| spec.pair_count(s, (s + k) % n) > 0),
                // Rank k − 1 sends rank 0 its block, never empty when anything is sent
                // (rank 0 gets the largest share of the balanced partition).
                None => spec.count > 0,
            })
            .collect();
        PairwiseRounds { blocks: AllToAllBlocks::new(spec), shifts }
    }

    fn send(&self, s: Rank, k: usize, out: &mut Vec<Transfer>) {
        let d = (s + k) % self.blocks.spec.ranks;
        let (send, recv) = self.blocks.block(s, d);
        if send.len > 0 {
            out.push(t(s, d, send, recv, Op::Copy));
        }
    }
}

impl RoundSource for PairwiseRounds {
    fn rounds(&self) -> usize {
        self.shifts.len()
    }

    fn step(&self, round: usize, rank: Option<Rank>) -> Step {
        let (n, k) = (self.blocks.spec.ranks, self.shifts[round]);
        let mut transfers = Vec::new();
        match rank {
            None => (0..n).for_each(|s| self.send(s, k, &mut transfers)),
            // The rank sends to rank + k and receives from rank − k, in sender order.
            Some(rank) => {
                let from = (rank + n - k) % n;
                for s in [rank.min(from), rank.max(from)] {
                    self.send(s, k, &mut transfers);
                }
            }
        }
        Step { transfers, in_network: Vec::new(), local: Vec::new() }
    }

    fn transfers_per_round(&self) -> usize {
        self.blocks.spec.ranks
    }

    fn held(&self) -> usize {
        self.shifts.len() + self.blocks.held()
    }
}

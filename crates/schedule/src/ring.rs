//! Ring algorithms over any rank order (seed 000 §8.2.1; seed 001 §7.2.1: the contiguous
//! ring 0..15 and the interleaved ring 0,8,1,9,...). A ring of p ranks does a
//! reduce-scatter in p−1 steps and an all-gather in p−1 steps; in each step every rank
//! sends one chunk to the next rank, so each rank sends 2(p−1)/p · M for an all-reduce.
//! With k channels, k rings (over rotated / reversed orders, so they use different
//! links) each carry 1/k of every chunk, in the same rounds.

use std::ops::Range;
use std::sync::Arc;

use crate::builder::ScheduleBuilder;
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::RoundSource;
use crate::error::ScheduleError;
use crate::ir::{Buffer, LocalOp, Op, Region, Step, Transfer};
use crate::partition::{partition, partition_range};
use crate::CompactSchedule;

/// A block: the element ranges one position of a ring owns (usually one range).
pub type Block = Vec<Range<u64>>;

/// What a ring stage does with its blocks: a reduce-scatter (`Op::Reduce`: round k,
/// position i sends the block of position i−k−1 to position i+1, which reduces it in, so
/// position i ends with the full reduction of its block) or an all-gather (`Op::Copy`:
/// position i forwards the block of position i−k, so every position ends with all of
/// them), on one buffer, with the labels its transfers carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingStage {
    pub op: Op,
    pub buffer: Buffer,
    pub channel: u32,
    pub shard: Option<u32>,
}

impl RingStage {
    pub fn new(op: Op, buffer: Buffer) -> Self {
        RingStage { op, buffer, channel: 0, shard: None }
    }

    pub fn on_channel(self, channel: u32) -> Self {
        RingStage { channel, ..self }
    }

    pub fn of_shard(self, shard: u32) -> Self {
        RingStage { shard: Some(shard), ..self }
    }

    /// How many positions behind its own a position's first send is.
    fn lag(self) -> usize {
        match self.op {
            Op::Reduce => 1,
            Op::Copy => 0,
        }
    }
}

/// One ring of a ring stage (see [`RingStage`]).
#[derive(Debug)]
struct RingLane {
    order: Vec<Rank>,
    /// (rank, position), sorted by rank: a rank's place without a per-rank table.
    positions: Vec<(Rank, usize)>,
    /// Shared between lanes that move the same blocks (the servers of a hierarchical stage).
    blocks: Arc<[Block]>,
    stage: RingStage,
    /// Every block has the same lengths, so every round moves the same traffic.
    even: bool,
    /// Positions whose block carries something, ascending: a round is made from these, so
    /// a small message over many ranks costs its few transfers, not a pass over every slot.
    carrying: Arc<[usize]>,
    /// Non-empty ranges over all blocks: every round sends each block once, so this many
    /// transfers.
    ranges: usize,
    /// Where each position's own block starts in the output, when round 0 sends it from
    /// the input instead (an all-gather's own chunk is its input; `add_from_input`).
    own_from_input: Option<Arc<[u64]>>,
}

impl RingLane {
    fn rounds(&self) -> usize {
        self.order.len() - 1
    }

    /// The transfers of slot i (position i to position i+1) in round k.
    fn slot(&self, k: usize, i: usize, out: &mut Vec<Transfer>) {
        let p = self.order.len();
        self.send(k, i, (i + 2 * p - k - self.stage.lag()) % p, out);
    }

    /// Every transfer of round k, in slot order: block b goes out on slot b + k + lag.
    fn round(&self, k: usize, out: &mut Vec<Transfer>) {
        let p = self.order.len();
        let shift = k + self.stage.lag();
        // Blocks from p − shift on wrap around to the lowest slots.
        let wrap = self.carrying.partition_point(|&b| b < p - shift);
        for &b in self.carrying[wrap..].iter().chain(&self.carrying[..wrap]) {
            self.send(k, (b + shift) % p, b, out);
        }
    }

    /// Slot i sending block b in round k.
    fn send(&self, k: usize, i: usize, b: usize, out: &mut Vec<Transfer>) {
        let p = self.order.len();
        // Round 0 of a copy ring sends each position's own block (b == i).
        let input_base = self.own_from_input.as_ref().filter(|_| k == 0 && b == i).map(|bases| bases[i]);
        for range in self.blocks[b].iter().filter(|r| r.end > r.start) {
            let region = Region::new(self.stage.buffer, range.clone());
            let read = match input_base {
                Some(base) => Region::new(Buffer::Input, range.start - base..range.end - base),
                None => region,
            };
            out.push(Transfer {
                from: self.order[i],
                to: self.order[(i + 1) % p],
                read,
                write: region,
                op: self.stage.op,
                shard: self.stage.shard,
                channel: self.stage.channel,
            });
        }
    }
}

/// The rounds of ring stages run side by side (channels, servers, shards), made on demand:
/// O(positions) held however many rounds. Step k of the whole is step k of each ring, in
/// the order the rings were added.
#[derive(Debug, Default)]
pub struct RingRounds {
    lanes: Vec<RingLane>,
    /// What the last blocks added came to: lanes that share blocks (every server of a
    /// hierarchical stage) look at them once.
    last_blocks: Option<BlockFacts>,
}

/// What a ring's blocks come to, for every lane that moves them.
#[derive(Debug, Clone)]
struct BlockFacts {
    blocks: Arc<[Block]>,
    even: bool,
    carrying: Arc<[usize]>,
    ranges: usize,
}

impl RingRounds {
    /// Add a ring over `order` moving `blocks` (one per position); a ring with fewer
    /// than two positions or nothing to move adds nothing.
    pub fn add(&mut self, order: &[Rank], blocks: Arc<[Block]>, stage: RingStage) -> &mut Self {
        self.add_lane(order, blocks, stage, None)
    }

    /// Add a copy ring whose round 0 sends each position's own block from its input,
    /// where `bases[i]` is the output offset that position i's input is copied to (by the
    /// schedule's prologue). The send then does not wait for that copy.
    pub fn add_from_input(
        &mut self,
        order: &[Rank],
        blocks: Arc<[Block]>,
        stage: RingStage,
        bases: Arc<[u64]>,
    ) -> &mut Self {
        debug_assert!(stage.op == Op::Copy && bases.len() == order.len());
        debug_assert!(
            blocks.iter().zip(bases.iter()).all(|(b, &base)| b.iter().all(|r| r.end <= r.start || r.start >= base)),
            "a block starts before its position's input"
        );
        self.add_lane(order, blocks, stage, Some(bases))
    }

    fn add_lane(
        &mut self,
        order: &[Rank],
        blocks: Arc<[Block]>,
        stage: RingStage,
        own_from_input: Option<Arc<[u64]>>,
    ) -> &mut Self {
        debug_assert_eq!(order.len(), blocks.len());
        let lengths = |b: &Block| b.iter().map(|r| r.end - r.start).filter(|&n| n > 0).collect::<Vec<_>>();
        let facts = match &self.last_blocks {
            Some(facts) if Arc::ptr_eq(&facts.blocks, &blocks) => facts.clone(),
            _ => {
                let first = blocks.first().map(lengths).unwrap_or_default();
                let facts = BlockFacts {
                    even: blocks.iter().all(|b| lengths(b) == first),
                    carrying: (0..blocks.len()).filter(|&b| !lengths(&blocks[b]).is_empty()).collect(),
                    ranges: blocks.iter().map(|b| lengths(b).len()).sum(),
                    blocks: blocks.clone(),
                };
                self.last_blocks = Some(facts.clone());
                facts
            }
        };
        let BlockFacts { even, carrying, ranges, .. } = facts;
        if order.len() < 2 || carrying.is_empty() {
            return self;
        }
        let mut positions: Vec<(Rank, usize)> = order.iter().enumerate().map(|(i, &r)| (r, i)).collect();
        positions.sort_unstable();
        self.lanes.push(RingLane {
            order: order.to_vec(),
            positions,
            even,
            carrying,
            ranges,
            blocks,
            stage,
            own_from_input,
        });
        self
    }
}

impl RoundSource for RingRounds {
    fn rounds(&self) -> usize {
        self.lanes.iter().map(RingLane::rounds).max().unwrap_or(0)
    }

    fn step(&self, k: usize, rank: Option<Rank>) -> Step {
        let mut transfers = Vec::new();
        for lane in self.lanes.iter().filter(|l| k < l.rounds()) {
            let p = lane.order.len();
            match rank {
                None => lane.round(k, &mut transfers),
                Some(rank) => {
                    let Ok(at) = lane.positions.binary_search_by_key(&rank, |&(r, _)| r) else { continue };
                    // The rank receives on slot i−1 and sends on slot i, in slot order.
                    let (sends, receives) = (lane.positions[at].1, (lane.positions[at].1 + p - 1) % p);
                    for i in [sends.min(receives), sends.max(receives)] {
                        lane.slot(k, i, &mut transfers);
                    }
                }
            }
        }
        Step { transfers, in_network: Vec::new(), local: Vec::new() }
    }

    fn repeats_previous(&self, k: usize) -> bool {
        // Every lane runs in both rounds and moves blocks of equal lengths.
        k > 0 && self.lanes.iter().all(|l| l.even && k < l.rounds())
    }

    fn transfers_per_round(&self) -> usize {
        self.lanes.iter().map(|l| l.ranges).sum()
    }

    /// Orders, positions and carrying positions (blocks are shared between lanes and not
    /// counted).
    fn held(&self) -> usize {
        self.lanes
            .iter()
            .map(|l| 2 * l.order.len() + l.carrying.len() + l.own_from_input.as_ref().map_or(0, |b| b.len()))
            .sum()
    }
}

/// One range per position.
pub fn single_blocks(ranges: Vec<Range<u64>>) -> Arc<[Block]> {
    ranges.into_iter().map(|r| vec![r]).collect()
}

/// Check that `order` lists every rank of `ranks` exactly once.
pub fn check_order(order: &[Rank], ranks: usize) -> Result<(), ScheduleError> {
    if order.len() != ranks {
        return Err(ScheduleError::BadOrder {
            message: format!("the order lists {} ranks, the collective has {ranks}", order.len()),
        });
    }
    let mut seen = vec![false; ranks];
    for &r in order {
        if r >= ranks {
            return Err(ScheduleError::BadOrder { message: format!("rank {r} is out of range 0..{ranks}") });
        }
        if std::mem::replace(&mut seen[r], true) {
            return Err(ScheduleError::BadOrder { message: format!("rank {r} appears twice") });
        }
    }
    Ok(())
}

pub fn copy(rank: Rank, read: Region, write: Region) -> LocalOp {
    LocalOp { rank, read, write, op: Op::Copy }
}

/// Reduce-scatter works on a scratch copy of the whole input; afterwards each rank copies
/// its own chunk to its output.
pub fn reduce_scatter_buffers(b: &mut ScheduleBuilder, count: u64, parts: &[Range<u64>]) {
    for (r, part) in parts.iter().enumerate() {
        b.scratch(r, count);
        b.prologue(copy(r, Region::new(Buffer::Input, 0..count), Region::new(Buffer::Scratch, 0..count)));
        b.epilogue(copy(
            r,
            Region::new(Buffer::Scratch, part.clone()),
            Region::new(Buffer::Output, 0..part.end - part.start),
        ));
    }
}

/// All-gather starts with each rank's input in its own chunk of the output.
pub fn all_gather_buffers(b: &mut ScheduleBuilder, parts: &[Range<u64>]) {
    for (r, part) in parts.iter().enumerate() {
        b.prologue(copy(
            r,
            Region::new(Buffer::Input, 0..part.end - part.start),
            Region::new(Buffer::Output, part.clone()),
        ));
    }
}

/// The ring of channel `c`: the base order for channel 0, then alternately reversed and
/// rotated so that channels use different links.
pub fn channel_order(order: &[Rank], c: usize) -> Vec<Rank> {
    let p = order.len().max(1);
    let mut o: Vec<Rank> = order.to_vec();
    o.rotate_left((c / 2) % p);
    if c % 2 == 1 {
        o.reverse();
    }
    o
}

/// A ring schedule of `spec` over the ring `order` (positions -> ranks), `channels` rings.
pub fn ring(
    spec: &CollectiveSpec,
    order: &[Rank],
    channels: usize,
    elem_bytes: u64,
    algorithm: &str,
) -> Result<CompactSchedule, ScheduleError> {
    check_order(order, spec.ranks)?;
    let orders: Vec<Vec<Rank>> = (0..channels.max(1)).map(|c| channel_order(order, c)).collect();
    ring_orders(spec, &orders, elem_bytes, algorithm)
}

/// A ring schedule of `spec` with one ring per channel, channel c over `orders[c]`
/// (each a permutation of the ranks, checked by the caller): channel c carries the c-th
/// share of every rank's data.
pub fn ring_orders(
    spec: &CollectiveSpec,
    orders: &[Vec<Rank>],
    elem_bytes: u64,
    algorithm: &str,
) -> Result<CompactSchedule, ScheduleError> {
    let channels = orders.len().max(1);
    let p = spec.ranks;
    let parts = partition(spec.count, p);
    // Channel c's share of each rank's chunk, as blocks per position of its ring.
    let blocks_of = |c: usize| -> Arc<[Block]> {
        orders[c].iter().map(|&r| vec![partition_range(parts[r].clone(), channels)[c].clone()]).collect()
    };
    // One ring per channel, each on its own channel.
    let rings = |stage: RingStage, blocks: &dyn Fn(usize) -> Arc<[Block]>| {
        let mut rounds = RingRounds::default();
        for (c, order) in orders.iter().enumerate() {
            rounds.add(order, blocks(c), stage.on_channel(c as u32));
        }
        rounds
    };
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    match spec.collective {
        Collective::AllReduce => {
            for r in 0..p {
                b.prologue(copy(
                    r,
                    Region::new(Buffer::Input, 0..spec.count),
                    Region::new(Buffer::Output, 0..spec.count),
                ));
            }
            // Channel c all-reduces its share of the vector, cut into p blocks.
            let shares = partition(spec.count, channels);
            let blocks = |c: usize| single_blocks(partition_range(shares[c].clone(), p));
            b.rounds("reduce-scatter", rings(RingStage::new(Op::Reduce, Buffer::Output), &blocks));
            b.rounds("all-gather", rings(RingStage::new(Op::Copy, Buffer::Output), &blocks));
        }
        Collective::ReduceScatter => {
            reduce_scatter_buffers(&mut b, spec.count, &parts);
            b.rounds("reduce-scatter", rings(RingStage::new(Op::Reduce, Buffer::Scratch), &blocks_of));
        }
        Collective::AllGather => {
            all_gather_buffers(&mut b, &parts);
            // Round 0 sends each rank's own chunk from its input, which the prologue's copy
            // only duplicates: the send need not wait for that copy (a small all-gather's
            // frame leaves first).
            let mut rounds = RingRounds::default();
            for (c, order) in orders.iter().enumerate() {
                let bases: Arc<[u64]> = order.iter().map(|&r| parts[r].start).collect();
                let stage = RingStage::new(Op::Copy, Buffer::Output).on_channel(c as u32);
                rounds.add_from_input(order, blocks_of(c), stage, bases);
            }
            b.rounds("all-gather", rounds);
        }
        other => return Err(ScheduleError::unsupported(algorithm, other)),
    }
    Ok(b.build_compact())
}

/// The interleaved ring order over server groups: the first rank of every group,
/// then the second of every group, ... (seed 001 §7.2.1: 0, 8, 1, 9, ..., 7, 15).
pub fn interleaved_order(groups: &[Vec<Rank>]) -> Vec<Rank> {
    let longest = groups.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest).flat_map(|i| groups.iter().filter_map(move |g| g.get(i).copied())).collect()
}

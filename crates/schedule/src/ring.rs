//! Ring algorithms over any rank order (seed 000 §8.2.1; seed 001 §7.2.1: the contiguous
//! ring 0..15 and the interleaved ring 0,8,1,9,...). A ring of p ranks does a
//! reduce-scatter in p−1 steps and an all-gather in p−1 steps; in each step every rank
//! sends one chunk to the next rank, so each rank sends 2(p−1)/p · M for an all-reduce.
//! With k channels, k rings (over rotated / reversed orders, so they use different
//! links) each carry 1/k of every chunk, in the same rounds.

use std::ops::Range;

use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::error::ScheduleError;
use crate::ir::{merge_parallel, with_channel, Buffer, LocalOp, Op, Region, Schedule, ScheduleBuilder, Step, Transfer};
use crate::partition::{partition, partition_range};

/// A block: the element ranges one position of a ring owns (usually one range).
pub type Block = Vec<Range<u64>>;

/// Reduce-scatter steps on one buffer: afterwards position i of `order` holds the full
/// reduction of `blocks[i]`. Step k: position i sends the block of position i−k−1 to
/// position i+1, which reduces it into its own copy.
pub fn reduce_scatter_steps(order: &[Rank], blocks: &[Block], buffer: Buffer) -> Vec<Step> {
    ring_steps(order, blocks, buffer, Op::Reduce, 1)
}

/// All-gather steps on one buffer: position i starts with `blocks[i]` and every
/// position ends with all of them. Step k: position i forwards the block of position i−k.
pub fn all_gather_steps(order: &[Rank], blocks: &[Block], buffer: Buffer) -> Vec<Step> {
    ring_steps(order, blocks, buffer, Op::Copy, 0)
}

fn ring_steps(order: &[Rank], blocks: &[Block], buffer: Buffer, op: Op, lag: usize) -> Vec<Step> {
    let p = order.len();
    debug_assert_eq!(p, blocks.len());
    (0..p.saturating_sub(1))
        .map(|k| Step {
            transfers: (0..p)
                .flat_map(|i| {
                    let block = &blocks[(i + 2 * p - k - lag) % p];
                    block.iter().map(move |range| {
                        let region = Region::new(buffer, range.clone());
                        Transfer {
                            from: order[i],
                            to: order[(i + 1) % p],
                            read: region,
                            write: region,
                            op,
                            shard: None,
                            channel: 0,
                        }
                    })
                })
                .collect(),
            in_network: Vec::new(),
            local: Vec::new(),
        })
        .collect()
}

/// One range per position.
pub fn single_blocks(ranges: Vec<Range<u64>>) -> Vec<Block> {
    ranges.into_iter().map(|r| vec![r]).collect()
}

/// All-reduce steps (reduce-scatter then all-gather) of `range` on one buffer.
pub fn all_reduce_steps(order: &[Rank], range: Range<u64>, buffer: Buffer) -> (Vec<Step>, Vec<Step>) {
    let blocks = single_blocks(partition_range(range, order.len()));
    (reduce_scatter_steps(order, &blocks, buffer), all_gather_steps(order, &blocks, buffer))
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
) -> Result<Schedule, ScheduleError> {
    check_order(order, spec.ranks)?;
    let channels = channels.max(1);
    let p = spec.ranks;
    let parts = partition(spec.count, p);
    let orders: Vec<Vec<Rank>> = (0..channels).map(|c| channel_order(order, c)).collect();
    // Channel c's share of each rank's chunk, as blocks per position of its ring.
    let blocks_of = |c: usize| -> Vec<Block> {
        orders[c].iter().map(|&r| vec![partition_range(parts[r].clone(), channels)[c].clone()]).collect()
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
            let (rs, ag): (Vec<_>, Vec<_>) = partition(spec.count, channels)
                .into_iter()
                .enumerate()
                .map(|(c, range)| {
                    let (rs, ag) = all_reduce_steps(&orders[c], range, Buffer::Output);
                    (with_channel(rs, c as u32), with_channel(ag, c as u32))
                })
                .unzip();
            b.phase("reduce-scatter", merge_parallel(rs)).phase("all-gather", merge_parallel(ag));
        }
        Collective::ReduceScatter => {
            reduce_scatter_buffers(&mut b, spec.count, &parts);
            let steps =
                (0..channels).map(|c| reduce_scatter_steps(&orders[c], &blocks_of(c), Buffer::Scratch)).enumerate();
            let steps = steps.map(|(c, s)| with_channel(s, c as u32)).collect();
            b.phase("reduce-scatter", merge_parallel(steps));
        }
        Collective::AllGather => {
            all_gather_buffers(&mut b, &parts);
            let steps = (0..channels)
                .map(|c| with_channel(all_gather_steps(&orders[c], &blocks_of(c), Buffer::Output), c as u32))
                .collect();
            b.phase("all-gather", merge_parallel(steps));
        }
        other => {
            return Err(ScheduleError::Unsupported { algorithm: algorithm.to_string(), collective: other.as_str() })
        }
    }
    Ok(b.build())
}

/// The interleaved ring order over server groups: the first rank of every group,
/// then the second of every group, ... (seed 001 §7.2.1: 0, 8, 1, 9, ..., 7, 15).
pub fn interleaved_order(groups: &[Vec<Rank>]) -> Vec<Rank> {
    let longest = groups.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest).flat_map(|i| groups.iter().filter_map(move |g| g.get(i).copied())).collect()
}

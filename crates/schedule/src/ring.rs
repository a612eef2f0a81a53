//! Ring algorithms over any rank order (seed 000 §8.2; seed 001 §7.2.1: the contiguous
//! ring 0..15 and the interleaved ring 0,8,1,9,...). A ring of p ranks does a
//! reduce-scatter in p−1 steps and an all-gather in p−1 steps; in each step every rank
//! sends one chunk to the next rank, so each rank sends 2(p−1)/p · M for an all-reduce.

use std::ops::Range;

use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::error::ScheduleError;
use crate::ir::{Buffer, LocalOp, Op, Region, Schedule, ScheduleBuilder, Step, Transfer};
use crate::partition::{partition, partition_range};

/// Reduce-scatter steps on one buffer: afterwards position i of `order` holds the full
/// reduction of `chunks[i]`. Step k: position i sends the chunk of position i−k−1 to
/// position i+1, which reduces it into its own copy.
pub fn reduce_scatter_steps(order: &[Rank], chunks: &[Range<u64>], buffer: Buffer) -> Vec<Step> {
    ring_steps(order, chunks, buffer, Op::Reduce, 1)
}

/// All-gather steps on one buffer: position i starts with `chunks[i]` and every
/// position ends with all of them. Step k: position i forwards the chunk of position i−k.
pub fn all_gather_steps(order: &[Rank], chunks: &[Range<u64>], buffer: Buffer) -> Vec<Step> {
    ring_steps(order, chunks, buffer, Op::Copy, 0)
}

fn ring_steps(order: &[Rank], chunks: &[Range<u64>], buffer: Buffer, op: Op, lag: usize) -> Vec<Step> {
    let p = order.len();
    debug_assert_eq!(p, chunks.len());
    (0..p.saturating_sub(1))
        .map(|k| Step {
            transfers: (0..p)
                .map(|i| {
                    let chunk = &chunks[(i + 2 * p - k - lag) % p];
                    let region = Region::new(buffer, chunk.clone());
                    Transfer { from: order[i], to: order[(i + 1) % p], read: region, write: region, op, shard: None }
                })
                .collect(),
            in_network: Vec::new(),
        })
        .collect()
}

/// All-reduce steps (reduce-scatter then all-gather) of `range` on one buffer.
pub fn all_reduce_steps(order: &[Rank], range: Range<u64>, buffer: Buffer) -> (Vec<Step>, Vec<Step>) {
    let chunks = partition_range(range, order.len());
    (reduce_scatter_steps(order, &chunks, buffer), all_gather_steps(order, &chunks, buffer))
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

fn copy(rank: Rank, read: Region, write: Region) -> LocalOp {
    LocalOp { rank, read, write, op: Op::Copy }
}

/// A ring schedule of `spec` over the ring `order` (positions -> ranks).
pub fn ring(spec: CollectiveSpec, order: &[Rank], elem_bytes: u64, algorithm: &str) -> Result<Schedule, ScheduleError> {
    check_order(order, spec.ranks)?;
    let p = spec.ranks;
    let mut b = ScheduleBuilder::new(spec, algorithm, elem_bytes);
    match spec.collective {
        Collective::AllReduce => {
            for r in 0..p {
                b.prologue(copy(
                    r,
                    Region::new(Buffer::Input, 0..spec.count),
                    Region::new(Buffer::Output, 0..spec.count),
                ));
            }
            let (rs, ag) = all_reduce_steps(order, 0..spec.count, Buffer::Output);
            b.phase("reduce-scatter", rs).phase("all-gather", ag);
        }
        Collective::ReduceScatter => {
            // Position i must end with the chunk of the rank standing there.
            let parts = partition(spec.count, p);
            let chunks: Vec<_> = order.iter().map(|&r| parts[r].clone()).collect();
            for (r, part) in parts.iter().enumerate() {
                b.scratch(r, spec.count);
                b.prologue(copy(
                    r,
                    Region::new(Buffer::Input, 0..spec.count),
                    Region::new(Buffer::Scratch, 0..spec.count),
                ));
                b.epilogue(copy(
                    r,
                    Region::new(Buffer::Scratch, part.clone()),
                    Region::new(Buffer::Output, 0..part.end - part.start),
                ));
            }
            b.phase("reduce-scatter", reduce_scatter_steps(order, &chunks, Buffer::Scratch));
        }
        Collective::AllGather => {
            let parts = partition(spec.count, p);
            let chunks: Vec<_> = order.iter().map(|&r| parts[r].clone()).collect();
            for (r, part) in parts.iter().enumerate() {
                b.prologue(copy(
                    r,
                    Region::new(Buffer::Input, 0..part.end - part.start),
                    Region::new(Buffer::Output, part.clone()),
                ));
            }
            b.phase("all-gather", all_gather_steps(order, &chunks, Buffer::Output));
        }
    }
    Ok(b.build())
}

/// The interleaved ring order over equal server groups: the first rank of every group,
/// then the second of every group, ... (seed 001 §7.2.1: 0, 8, 1, 9, ..., 7, 15).
pub fn interleaved_order(groups: &[Vec<Rank>]) -> Vec<Rank> {
    let longest = groups.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest).flat_map(|i| groups.iter().filter_map(move |g| g.get(i).copied())).collect()
}

//! Pipelined chain (seed 000 §8.2; NCCL's ring broadcast/reduce): the message is cut
//! into C chunks that flow down a chain of ranks starting (broadcast) or ending
//! (reduce) at the root; position i handles chunk c at step c + i, so a chain of p
//! ranks takes p − 1 + C − 1 steps of M/C each.

use crate::builder::ScheduleBuilder;
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::CompactSchedule;
use crate::error::ScheduleError;
use crate::ir::{Buffer, Op, Region, Step, Transfer};
use crate::partition::partition;
use crate::ring::{check_order, copy};

/// Steps that move `chunks` down `chain` (position 0 first): position i sends chunk
/// c = k − i to position i + 1 at step k. `read`/`write` give the buffer on each side.
pub fn chain_steps(
    chain: &[Rank],
    chunks: &[std::ops::Range<u64>],
    op: Op,
    buffer_of: impl Fn(usize) -> Buffer,
) -> Vec<Step> {
    let p = chain.len();
    let c = chunks.len();
    if p < 2 || c == 0 {
        return Vec::new();
    }
    (0..p - 1 + c - 1)
        .map(|k| Step {
            transfers: (0..p - 1)
                .filter(|&i| k >= i && k - i < c)
                .map(|i| {
                    let chunk = chunks[k - i].clone();
                    Transfer {
                        from: chain[i],
                        to: chain[i + 1],
                        read: Region::new(buffer_of(i), chunk.clone()),
                        write: Region::new(buffer_of(i + 1), chunk),
                        op,
                        shard: None,
                        channel: 0,
                    }
                })
                .collect(),
            in_network: Vec::new(),
            local: Vec::new(),
        })
        .collect()
}

/// The chain order: `order` rotated so the root comes first.
pub fn rooted(order: &[Rank], root: Rank) -> Vec<Rank> {
    let mut o = order.to_vec();
    if let Some(at) = o.iter().position(|&r| r == root) {
        o.rotate_left(at);
    }
    o
}

pub fn chain(
    spec: &CollectiveSpec,
    order: &[Rank],
    chunks: usize,
    elem_bytes: u64,
    algorithm: &str,
) -> Result<CompactSchedule, ScheduleError> {
    check_order(order, spec.ranks)?;
    let pieces = partition(spec.count, chunks.max(1));
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    let all = 0..spec.count;
    let chain = rooted(order, spec.root);
    match spec.collective {
        Collective::Broadcast => {
            b.prologue(copy(spec.root, Region::new(Buffer::Input, all.clone()), Region::new(Buffer::Output, all)));
            b.phase("chain broadcast", chain_steps(&chain, &pieces, Op::Copy, |_| Buffer::Output));
        }
        Collective::Reduce => {
            // Reversed: the far end first, the root last; partial sums travel in scratch.
            let chain: Vec<Rank> = chain.iter().rev().copied().collect();
            let last = chain.len() - 1;
            for (i, &r) in chain.iter().enumerate() {
                let target = if i == last { Buffer::Output } else { Buffer::Scratch };
                if target == Buffer::Scratch {
                    b.scratch(r, spec.count);
                }
                b.prologue(copy(r, Region::new(Buffer::Input, all.clone()), Region::new(target, all.clone())));
            }
            b.phase(
                "chain reduce",
                chain_steps(&chain, &pieces, Op::Reduce, |i| if i == last { Buffer::Output } else { Buffer::Scratch }),
            );
        }
        other => return Err(ScheduleError::unsupported(algorithm, other)),
    }
    Ok(b.build_compact())
}

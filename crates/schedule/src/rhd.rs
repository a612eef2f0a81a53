//! Recursive halving-doubling (seed 000 §8.2.3) with Rabenseifner's handling of rank
//! counts that are not powers of two (§8.2.4): with p the largest power of two ≤ P,
//! ranks p..P first fold their vectors into ranks 0..P−p, the p ranks run recursive
//! halving (a reduce-scatter: at step s partners v and v XOR p/2^(s+1) exchange half
//! of what they still hold) and recursive doubling (an all-gather, in reverse), and the
//! folded ranks get the result back. 2·log2 p rounds (+2 when folding); each rank sends
//! 2(p−1)/p·M in the halving-doubling part.

use std::ops::Range;

use crate::builder::ScheduleBuilder;
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::CompactSchedule;
use crate::error::ScheduleError;
use crate::ir::{Buffer, Op, Region, Step, Transfer};
use crate::partition::partition;
use crate::ring::{all_gather_buffers, copy, reduce_scatter_buffers};

fn span(chunks: &[Range<u64>], lo: usize, hi: usize) -> Range<u64> {
    chunks[lo].start..chunks[hi - 1].end
}

/// Recursive halving among virtual ranks 0..p (`real[v]` is the rank), on `buffer`:
/// afterwards virtual rank v holds the reduction of `chunks[v]`. Returns the steps.
pub fn halving_steps(real: &[Rank], chunks: &[Range<u64>], buffer: Buffer) -> Vec<Step> {
    let p = real.len();
    let mut ranges: Vec<(usize, usize)> = vec![(0, p); p];
    let mut steps = Vec::new();
    let mut d = p / 2;
    while d >= 1 {
        let mut step = Step::default();
        let mut next = ranges.clone();
        for v in 0..p {
            let (lo, hi) = ranges[v];
            let mid = (lo + hi) / 2;
            let (keep, give) = if v & d == 0 { ((lo, mid), (mid, hi)) } else { ((mid, hi), (lo, mid)) };
            let region = Region::new(buffer, span(chunks, give.0, give.1));
            step.transfers.push(Transfer {
                from: real[v],
                to: real[v ^ d],
                read: region,
                write: region,
                op: Op::Reduce,
                shard: None,
                channel: 0,
            });
            next[v] = keep;
        }
        ranges = next;
        steps.push(step);
        d /= 2;
    }
    steps
}

/// Recursive doubling: the reverse of `halving_steps`, copying instead of reducing.
pub fn doubling_steps(real: &[Rank], chunks: &[Range<u64>], buffer: Buffer) -> Vec<Step> {
    let p = real.len();
    let mut ranges: Vec<(usize, usize)> = (0..p).map(|v| (v, v + 1)).collect();
    let mut steps = Vec::new();
    let mut d = 1;
    while d < p {
        let mut step = Step::default();
        let mut next = ranges.clone();
        for v in 0..p {
            let (lo, hi) = ranges[v];
            let region = Region::new(buffer, span(chunks, lo, hi));
            step.transfers.push(Transfer {
                from: real[v],
                to: real[v ^ d],
                read: region,
                write: region,
                op: Op::Copy,
                shard: None,
                channel: 0,
            });
            let (plo, phi) = ranges[v ^ d];
            next[v] = (lo.min(plo), hi.max(phi));
        }
        ranges = next;
        steps.push(step);
        d *= 2;
    }
    steps
}

pub fn rhd(spec: &CollectiveSpec, elem_bytes: u64, algorithm: &str) -> Result<CompactSchedule, ScheduleError> {
    let n = spec.ranks;
    let p = if n == 0 { 0 } else { 1usize << (usize::BITS - 1 - n.leading_zeros()) };
    let extra = n - p;
    let all = 0..spec.count;
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    let real: Vec<Rank> = (0..p).collect();
    match spec.collective {
        Collective::AllReduce => {
            for r in 0..n {
                b.prologue(copy(r, Region::new(Buffer::Input, all.clone()), Region::new(Buffer::Output, all.clone())));
            }
            let whole = Region::new(Buffer::Output, all.clone());
            let fold = |from: Rank, to: Rank, op| Transfer {
                from,
                to,
                read: whole,
                write: whole,
                op,
                shard: None,
                channel: 0,
            };
            b.phase(
                "fold extra ranks in",
                vec![Step {
                    transfers: (0..extra).map(|i| fold(p + i, i, Op::Reduce)).collect(),
                    in_network: vec![],
                    local: vec![],
                }],
            );
            let chunks = partition(spec.count, p);
            b.phase("recursive halving", halving_steps(&real, &chunks, Buffer::Output));
            b.phase("recursive doubling", doubling_steps(&real, &chunks, Buffer::Output));
            b.phase(
                "unfold to extra ranks",
                vec![Step {
                    transfers: (0..extra).map(|i| fold(i, p + i, Op::Copy)).collect(),
                    in_network: vec![],
                    local: vec![],
                }],
            );
        }
        Collective::ReduceScatter | Collective::AllGather if extra == 0 => {
            let parts = spec.parts();
            if spec.collective == Collective::ReduceScatter {
                reduce_scatter_buffers(&mut b, spec.count, &parts);
                b.phase("recursive halving", halving_steps(&real, &parts, Buffer::Scratch));
            } else {
                all_gather_buffers(&mut b, &parts);
                b.phase("recursive doubling", doubling_steps(&real, &parts, Buffer::Output));
            }
        }
        Collective::ReduceScatter | Collective::AllGather => {
            return Err(ScheduleError::unsupported(
                format!("{algorithm} (for {n} ranks, not a power of two; use ring or bruck)"),
                spec.collective,
            ))
        }
        other => return Err(ScheduleError::unsupported(algorithm, other)),
    }
    Ok(b.build_compact())
}

//! PAT, NCCL's all-gather and reduce-scatter for one GPU per node (NCCL 2.23, "Parallel
//! Aggregated Trees"; its tuner enables it at one rank per node and costs it at
//! log2(nodes) network steps: docs/sources.md#nccl-tuner). Every rank's block travels
//! down its own binomial tree, and the trees' sends of one step go as one message, so
//! ⌈log2 P⌉ rounds for any P. Aggregated in full (NCCL aggregates as far as its buffer
//! allows) this is Bruck's exchange (seed 000 §8.1.3):
//!
//! - all-gather: at round k rank r sends the blocks of ranks r .. r+cnt−1 (mod P),
//!   cnt = min(2^k, P − 2^k), to rank r − 2^k, into their final places; one message,
//!   two where the blocks wrap past the last rank;
//! - reduce-scatter: the same trees backwards — at round k, from the last, rank r − 2^k
//!   sends its partial sums of those blocks to r, which adds them to its own. A rank's
//!   partial of a block leaves only after every rank below it in that block's tree has
//!   added in (a later all-gather round is an earlier reduce-scatter round), and the
//!   blocks a rank sends and receives in one round never overlap (cnt ≤ 2^k and
//!   2^k + cnt ≤ P).
//!
//! Each rank sends P − 1 blocks in all, as a ring does, in ⌈log2 P⌉ messages instead of
//! P − 1; transfers grow as P log P.

use std::ops::Range;

use crate::builder::ScheduleBuilder;
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::CompactSchedule;
use crate::error::ScheduleError;
use crate::ir::{Buffer, Op, Region, Step, Transfer};
use crate::ring::{all_gather_buffers, reduce_scatter_buffers};

fn rounds(p: usize) -> usize {
    (usize::BITS - (p.max(1) - 1).leading_zeros()) as usize
}

/// The blocks `first .. first+count` (mod the block count) of `parts` as at most two
/// contiguous ranges of `buffer`.
fn blocks(parts: &[Range<u64>], first: usize, count: usize, buffer: Buffer) -> Vec<Region> {
    let p = parts.len();
    let last = first + count - 1;
    if last < p {
        vec![Region::new(buffer, parts[first].start..parts[last].end)]
    } else {
        vec![
            Region::new(buffer, parts[first].start..parts[p - 1].end),
            Region::new(buffer, parts[0].start..parts[last - p].end),
        ]
    }
}

/// Round `k` of the exchange: every rank r's blocks r .. r+cnt−1 between r and r − 2^k,
/// sent by r (all-gather, `Op::Copy`) or by r − 2^k (reduce-scatter, `Op::Reduce`).
fn round(parts: &[Range<u64>], k: usize, buffer: Buffer, op: Op) -> Step {
    let p = parts.len();
    let dist = 1usize << k;
    let cnt = dist.min(p - dist);
    let transfers = (0..p)
        .flat_map(|r: Rank| {
            let peer = (r + p - dist) % p;
            let (from, to) = if op == Op::Copy { (r, peer) } else { (peer, r) };
            blocks(parts, r, cnt, buffer).into_iter().map(move |region| Transfer {
                from,
                to,
                read: region,
                write: region,
                op,
                shard: None,
                channel: 0,
            })
        })
        .collect();
    Step { transfers, in_network: Vec::new(), local: Vec::new() }
}

pub fn pat(spec: &CollectiveSpec, elem_bytes: u64, algorithm: &str) -> Result<CompactSchedule, ScheduleError> {
    let p = spec.ranks;
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    let parts = spec.parts();
    match spec.collective {
        Collective::AllGather => {
            all_gather_buffers(&mut b, &parts);
            b.phase("pat all-gather", (0..rounds(p)).map(|k| round(&parts, k, Buffer::Output, Op::Copy)).collect());
        }
        Collective::ReduceScatter => {
            reduce_scatter_buffers(&mut b, spec.count, &parts);
            b.phase(
                "pat reduce-scatter",
                (0..rounds(p)).rev().map(|k| round(&parts, k, Buffer::Scratch, Op::Reduce)).collect(),
            );
        }
        other => return Err(ScheduleError::unsupported(algorithm, other)),
    }
    let mut schedule = b.build_compact();
    // NCCL runs PAT under Simple only (its tuner models no other protocol for it).
    schedule.protocol = Some("Simple".into());
    Ok(schedule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::check;

    /// ⌈log2 P⌉ rounds, P − 1 blocks sent by every rank, at most two messages a rank
    /// and round; proved correct at every P to 33, both collectives.
    #[test]
    fn log_rounds_ring_volume_and_correct() {
        for p in 2..=33usize {
            for collective in [Collective::AllGather, Collective::ReduceScatter] {
                let spec = CollectiveSpec::new(collective, p, 3 * p as u64);
                let s = pat(&spec, 4, "pat").unwrap().expand();
                assert_eq!(s.rounds.len(), rounds(p), "P={p}");
                assert_eq!(rounds(p), (p as f64).log2().ceil() as usize);
                let transfers = |r: &crate::ir::Round| r.transfers.clone();
                let sent: u64 = s.rounds.iter().flat_map(transfers).filter(|t| t.from == 0).map(|t| t.read.len).sum();
                assert_eq!(sent, 3 * (p as u64 - 1), "{collective:?} P={p}");
                for r in &s.rounds {
                    assert!(r.transfers.len() <= 2 * p, "{collective:?} P={p}");
                }
                check(&s).unwrap_or_else(|e| panic!("{collective:?} P={p}: {e}"));
            }
        }
    }
}

//! Bruck's algorithms (seed 000 §8.1.3, §8.2.4): ⌈log2 P⌉ rounds for any P.
//!
//! All-gather (and barrier, an all-gather of one token each): at round k rank r sends
//! the blocks it holds — those of ranks r .. r+cnt−1, cnt = min(2^k, P − 2^k) — to rank
//! r − 2^k. Blocks are written straight to their final place, so no rotation is needed.
//!
//! All-to-all: the block from s for d starts at position (d − s) mod P on rank s; at
//! round k every block whose position has bit k set moves 2^k ranks on, so after all
//! rounds it sits on d. Blocks land in a fresh scratch area per round (the sender may
//! be sending from the same position in the same round).

use std::ops::Range;

use crate::builder::ScheduleBuilder;
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::CompactSchedule;
use crate::error::ScheduleError;
use crate::ir::{Buffer, Op, Region, Step, Transfer};
use crate::ring::copy;

fn rounds(p: usize) -> usize {
    let mut k = 0;
    while (1usize << k) < p {
        k += 1;
    }
    k
}

/// Bruck all-gather of blocks `out[q]` (rank q's block, in every rank's output).
pub fn allgather_steps(out: &[Range<u64>]) -> Vec<Step> {
    let p = out.len();
    (0..rounds(p))
        .map(|k| {
            let dist = 1usize << k;
            let cnt = dist.min(p - dist);
            Step {
                transfers: (0..p)
                    .flat_map(|r| {
                        (0..cnt).map(move |t| {
                            let q = (r + t) % p;
                            let region = Region::new(Buffer::Output, out[q].clone());
                            Transfer {
                                from: r,
                                to: (r + p - dist) % p,
                                read: region,
                                write: region,
                                op: Op::Copy,
                                shard: None,
                                channel: 0,
                            }
                        })
                    })
                    .collect(),
                in_network: Vec::new(),
                local: Vec::new(),
            }
        })
        .collect()
}

pub fn bruck(spec: &CollectiveSpec, elem_bytes: u64, algorithm: &str) -> Result<CompactSchedule, ScheduleError> {
    let p = spec.ranks;
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    match spec.collective {
        Collective::AllGather | Collective::Barrier => {
            let out: Vec<Range<u64>> = if spec.collective == Collective::Barrier {
                (0..p as u64).map(|q| q..q + 1).collect()
            } else {
                spec.parts()
            };
            for (r, block) in out.iter().enumerate() {
                b.prologue(copy(
                    r,
                    Region::new(Buffer::Input, 0..block.end - block.start),
                    Region::new(Buffer::Output, block.clone()),
                ));
            }
            b.phase(
                if spec.collective == Collective::Barrier { "dissemination barrier" } else { "bruck all-gather" },
                allgather_steps(&out),
            );
        }
        Collective::AllToAll | Collective::AllToAllv => {
            let slot =
                (0..p).flat_map(|s| (0..p).map(move |d| (s, d))).map(|(s, d)| spec.pair_count(s, d)).max().unwrap_or(0);
            let k_max = rounds(p);
            // loc[r][pos]: where the block at position pos of rank r lives, and whose it is.
            let mut loc: Vec<Vec<(Region, Rank, Rank)>> = (0..p)
                .map(|s| {
                    (0..p)
                        .map(|pos| {
                            let d = (s + pos) % p;
                            let n = spec.pair_count(s, d);
                            let off = spec.send_offset(s, d);
                            (Region::new(Buffer::Input, off..off + n), s, d)
                        })
                        .collect()
                })
                .collect();
            let mut steps = Vec::new();
            for k in 0..k_max {
                let dist = 1usize << k;
                let mut step = Step::default();
                let mut next = loc.clone();
                for (r, held) in loc.iter().enumerate() {
                    for pos in (1..p).filter(|pos| pos & dist != 0) {
                        let (region, s, d) = held[pos];
                        let to = (r + dist) % p;
                        let at = ((k + 1) * p + pos) as u64 * slot;
                        let landing = Region::new(Buffer::Scratch, at..at + region.len);
                        step.transfers.push(Transfer {
                            from: r,
                            to,
                            read: region,
                            write: landing,
                            op: Op::Copy,
                            shard: None,
                            channel: 0,
                        });
                        next[to][pos] = (landing, s, d);
                    }
                }
                loc = next;
                steps.push(step);
            }
            for (r, held) in loc.iter().enumerate() {
                b.scratch(r, ((k_max + 1) * p) as u64 * slot);
                for &(region, s, d) in held {
                    debug_assert_eq!(d, r);
                    let off = spec.recv_offset(s, d);
                    b.epilogue(copy(r, region, Region::new(Buffer::Output, off..off + region.len)));
                }
            }
            b.phase("bruck all-to-all", steps);
        }
        other => return Err(ScheduleError::unsupported(algorithm, other)),
    }
    Ok(b.build_compact())
}

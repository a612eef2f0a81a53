//! Direct algorithms: every rank sends straight to its destinations — one round for
//! broadcast, reduce, gather, scatter, send/recv, all-gather, reduce-scatter, barrier
//! and all-to-all. (No direct all-reduce: the per-round model charges one start-up per
//! round, not per message, and would flatter an algorithm whose every rank sends P − 1
//! messages at once; rings, trees and RHD are what the seeds compare.)
//! Pairwise all-to-all (seed 000 §8.1.3) spreads the same blocks over P−1 rounds: at
//! round k rank i sends to i+k, so each rank has one block in flight per round.

use std::ops::Range;

use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::error::ScheduleError;
use crate::ir::{Buffer, Op, Region, Schedule, ScheduleBuilder, Step, Transfer};
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

pub fn direct(spec: &CollectiveSpec, elem_bytes: u64, algorithm: &str) -> Result<Schedule, ScheduleError> {
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
        Collective::AllReduce => {
            return Err(ScheduleError::Unsupported { algorithm: algorithm.to_string(), collective: "allreduce" })
        }
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
    Ok(b.build())
}

/// Every all-to-all block: (source, destination, region in the source's input, region in the destination's output).
fn blocks(spec: &CollectiveSpec) -> Vec<(Rank, Rank, Region, Region)> {
    let n = spec.ranks;
    (0..n)
        .flat_map(|s| (0..n).map(move |d| (s, d)))
        .map(|(s, d)| {
            let len = spec.pair_count(s, d);
            (
                s,
                d,
                Region::new(Buffer::Input, range(spec.send_offset(s, d), len)),
                Region::new(Buffer::Output, range(spec.recv_offset(s, d), len)),
            )
        })
        .collect()
}

/// Pairwise-exchange all-to-all(v): P − 1 rounds, rank i sends to i + k at round k.
pub fn pairwise(spec: &CollectiveSpec, elem_bytes: u64, algorithm: &str) -> Result<Schedule, ScheduleError> {
    if !matches!(spec.collective, Collective::AllToAll | Collective::AllToAllv) {
        return Err(ScheduleError::Unsupported {
            algorithm: algorithm.to_string(),
            collective: spec.collective.as_str(),
        });
    }
    let n = spec.ranks;
    let all = blocks(spec);
    let block = |s: Rank, d: Rank| all[s * n + d];
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    for s in 0..n {
        let (_, _, send, recv) = block(s, s);
        b.prologue(copy(s, send, recv));
    }
    let steps = (1..n)
        .map(|k| Step {
            transfers: (0..n)
                .map(|s| {
                    let (_, d, send, recv) = block(s, (s + k) % n);
                    t(s, d, send, recv, Op::Copy)
                })
                .collect(),
            in_network: Vec::new(),
            local: Vec::new(),
        })
        .collect();
    b.phase("pairwise all-to-all", steps);
    Ok(b.build())
}

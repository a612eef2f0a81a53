//! Dependencies finer than "the previous round" (PRODUCT.md: the simulator and a
//! pipelined runtime start a step as soon as what it needs is done, not at a barrier).
//!
//! Step B depends on an earlier step A when
//! - B reads elements A wrote (B sends data A delivered, or B reduces into it), or
//! - B writes elements A wrote (the order of the two writes matters), or
//! - B writes elements A reads (A must have sent them before B overwrites them).
//!
//! Rounds stay the barriered view the seeds' model uses; these edges are the minimum
//! order any faster execution must keep. Prologue and epilogue are outside: every step
//! follows the prologue and precedes the epilogue.

use std::collections::BTreeSet;

use crate::collective::Rank;
use crate::ir::{Buffer, Op, Region, Schedule};

/// A step of a schedule: round index and position in the round (transfers first, then
/// in-network steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StepId {
    pub round: usize,
    pub index: usize,
}

/// A stretch of one buffer with the same history.
#[derive(Debug, Clone)]
struct Segment {
    start: u64,
    end: u64,
    writer: Option<StepId>,
    readers: Vec<StepId>,
}

/// Per (rank, buffer): sorted, non-overlapping segments covering what was touched.
#[derive(Debug, Default)]
struct History {
    buffers: std::collections::HashMap<(Rank, Buffer), Vec<Segment>>,
}

impl History {
    /// Split segments so that `start` and `end` are boundaries; return the segments
    /// inside [start, end), creating an untouched segment for gaps.
    fn carve(&mut self, rank: Rank, buffer: Buffer, start: u64, end: u64) -> &mut [Segment] {
        let segs = self.buffers.entry((rank, buffer)).or_default();
        let mut out: Vec<Segment> = Vec::with_capacity(segs.len() + 3);
        let mut cursor = start;
        for s in segs.drain(..) {
            if s.end <= start || s.start >= end {
                out.push(s);
                continue;
            }
            if s.start < start {
                out.push(Segment { start: s.start, end: start, ..s.clone() });
            }
            let (a, b) = (s.start.max(start), s.end.min(end));
            if a > cursor {
                out.push(Segment { start: cursor, end: a, writer: None, readers: Vec::new() });
            }
            out.push(Segment { start: a, end: b, ..s.clone() });
            cursor = b;
            if s.end > end {
                out.push(Segment { start: end, end: s.end, ..s });
            }
        }
        if cursor < end {
            out.push(Segment { start: cursor, end, writer: None, readers: Vec::new() });
        }
        out.sort_by_key(|s| s.start);
        *segs = out;
        let first = segs.partition_point(|s| s.end <= start);
        let last = segs.partition_point(|s| s.start < end);
        &mut segs[first..last]
    }

    fn read(&mut self, rank: Rank, region: &Region, step: StepId, deps: &mut BTreeSet<StepId>) {
        if region.len == 0 {
            return;
        }
        for s in self.carve(rank, region.buffer, region.offset, region.end()) {
            deps.extend(s.writer);
            s.readers.push(step);
        }
    }

    fn write(&mut self, rank: Rank, region: &Region, step: StepId, deps: &mut BTreeSet<StepId>) {
        if region.len == 0 {
            return;
        }
        for s in self.carve(rank, region.buffer, region.offset, region.end()) {
            deps.extend(s.writer);
            deps.extend(s.readers.iter().copied().filter(|&r| r != step));
            s.writer = Some(step);
            s.readers.clear();
        }
    }
}

/// For every step, the earlier steps it must wait for (sorted, no duplicates).
pub fn dependencies(schedule: &Schedule) -> Vec<Vec<(StepId, Vec<StepId>)>> {
    let mut history = History::default();
    let mut result = Vec::with_capacity(schedule.rounds.len());
    for (r, round) in schedule.rounds.iter().enumerate() {
        // Everything in a round reads the state from before the round, so all reads
        // of the round are recorded before its writes.
        let steps = round.transfers.len() + round.in_network.len();
        let mut deps: Vec<BTreeSet<StepId>> = vec![BTreeSet::new(); steps];
        for (i, t) in round.transfers.iter().enumerate() {
            let id = StepId { round: r, index: i };
            history.read(t.from, &t.read, id, &mut deps[i]);
            if t.op == Op::Reduce {
                history.read(t.to, &t.write, id, &mut deps[i]);
            }
        }
        for (n, s) in round.in_network.iter().enumerate() {
            let id = StepId { round: r, index: round.transfers.len() + n };
            for &rank in &s.ranks {
                history.read(rank, &s.read, id, &mut deps[round.transfers.len() + n]);
            }
        }
        for (i, t) in round.transfers.iter().enumerate() {
            history.write(t.to, &t.write, StepId { round: r, index: i }, &mut deps[i]);
        }
        for (n, s) in round.in_network.iter().enumerate() {
            let index = round.transfers.len() + n;
            for &rank in &s.ranks {
                history.write(rank, &s.write, StepId { round: r, index }, &mut deps[index]);
            }
        }
        result.push(
            deps.into_iter()
                .enumerate()
                .map(|(i, d)| {
                    let id = StepId { round: r, index: i };
                    (id, d.into_iter().filter(|&x| x != id).collect())
                })
                .collect(),
        );
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{generate, Algorithm, Collective, CollectiveSpec, GenOptions};

    #[test]
    fn ring_steps_wait_for_the_chunk_they_forward() {
        let s = generate(Algorithm::Ring, &CollectiveSpec::new(Collective::AllReduce, 4, 8), &GenOptions::default(), 4)
            .unwrap();
        let deps = dependencies(&s);
        // Round 0 depends on nothing (the prologue is implicit).
        assert!(deps[0].iter().all(|(_, d)| d.is_empty()));
        // Round 1, rank 1 forwards (and reduces into rank 2) the chunk rank 0 reduced into
        // rank 1 in round 0: it depends on round 0's transfer 0 -> 1.
        let (id, d) = &deps[1][1];
        assert_eq!(s.rounds[1].transfers[id.index].from, 1);
        assert!(d.contains(&StepId { round: 0, index: 0 }), "{d:?}");
        // Never on a later round or itself.
        for round in &deps {
            for (id, d) in round {
                assert!(d.iter().all(|x| x.round < id.round), "{id:?} {d:?}");
            }
        }
    }

    #[test]
    fn hierarchical_inter_stage_waits_only_on_its_own_shard() {
        let groups = vec![vec![0, 1], vec![2, 3]];
        let options = GenOptions { groups, ..GenOptions::default() };
        let s =
            generate(Algorithm::Hierarchical, &CollectiveSpec::new(Collective::AllReduce, 4, 8), &options, 4).unwrap();
        let deps = dependencies(&s);
        // Round 1 is the first inter-server round; its transfer of shard j depends only
        // on the intra-server round that delivered shard j to the sender.
        for (id, d) in &deps[1] {
            let t = &s.rounds[1].transfers[id.index];
            assert!(!d.is_empty());
            for dep in d {
                let prev = &s.rounds[dep.round].transfers[dep.index];
                assert!(prev.to == t.from || prev.to == t.to, "{t:?} waits on unrelated {prev:?}");
            }
        }
    }
}

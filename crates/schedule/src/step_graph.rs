//! The step graph: dependencies finer than "the previous round" (the simulator and a
//! pipelined runtime start a step as soon as what it needs is done, not at a barrier;
//! seed 001 §7.4.1's dependency graphs).
//!
//! Steps are numbered in one flat table, round by round (a round's transfers, then its
//! in-network steps, then its local steps); `StepId` gives a step's round and place.
//! Step B depends on an earlier step A when
//! - B reads elements A wrote (B sends data A delivered, or B reduces into it), or
//! - B writes elements A wrote (the order of the two writes matters), or
//! - B writes elements A read (A must have sent them before B overwrites them).
//!
//! A round's transfers and in-network steps never depend on each other: they read the
//! state from before the round, and the checker allows two of them to touch one element
//! only when both reduce into it — reductions that commute, in either order. A round's
//! local steps come after them, one by one. So every edge points to a smaller step
//! number and the graph is acyclic by construction; an element last written by several
//! reductions of one round has all of them as its writers.
//!
//! Per (rank, buffer) an interval map of segments (who wrote them last, who read them
//! since) answers each access in O(log segments + segments touched): the graph of a
//! schedule of S steps is built in about O(S log S) and stored as offsets into one flat
//! edge list. Prologue and epilogue are outside: every step follows the prologue and
//! precedes the epilogue.

use std::collections::BTreeMap;

use crate::ir::{Op, Region, Schedule};

/// A step of a schedule: round index and position in the round (transfers first, then
/// in-network steps, then local steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StepId {
    pub round: usize,
    pub index: usize,
}

/// Every step's dependencies, as offsets into one flat list of step numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepGraph {
    /// `round_start[r]`: number of the first step of round r (one extra entry at the end).
    round_start: Vec<usize>,
    /// `offsets[s]..offsets[s + 1]` indexes `edges` for step s.
    offsets: Vec<usize>,
    /// Steps each step waits for, sorted, no duplicates.
    edges: Vec<u32>,
}

impl StepGraph {
    /// Steps in the schedule.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dependency edges in all.
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    /// The steps `step` waits for.
    pub fn deps(&self, step: usize) -> &[u32] {
        &self.edges[self.offsets[step]..self.offsets[step + 1]]
    }

    /// Round and place of a step number.
    pub fn id(&self, step: usize) -> StepId {
        let round = self.round_start.partition_point(|&s| s <= step) - 1;
        StepId { round, index: step - self.round_start[round] }
    }

    /// Step number of a round and place.
    pub fn step(&self, id: StepId) -> usize {
        self.round_start[id.round] + id.index
    }

    /// A topological order chosen by `seed`: each next step is drawn among those whose
    /// dependencies are all done, so different seeds interleave rounds differently.
    /// `None` if the graph had a cycle (it cannot; the property test asserts it).
    pub fn random_topological_order(&self, seed: u64) -> Option<Vec<usize>> {
        let n = self.len();
        let mut waiting: Vec<usize> = (0..n).map(|s| self.deps(s).len()).collect();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        for s in 0..n {
            for &d in self.deps(s) {
                dependents[d as usize].push(s);
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|&s| waiting[s] == 0).collect();
        let mut order = Vec::with_capacity(n);
        let mut state = seed | 1;
        while !ready.is_empty() {
            // xorshift64: a reproducible pick, no dependency for a shuffle.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let pick = (state % ready.len() as u64) as usize;
            let s = ready.swap_remove(pick);
            order.push(s);
            for &t in &dependents[s] {
                waiting[t] -= 1;
                if waiting[t] == 0 {
                    ready.push(t);
                }
            }
        }
        (order.len() == n).then_some(order)
    }
}

/// A stretch of one buffer with the same history.
#[derive(Debug, Clone, Default)]
struct Segment {
    end: u64,
    /// Group of the last write (a round's transfers, or one local step), and the steps
    /// of that group that wrote (several reductions into one element in one round are
    /// all writers).
    written_in: Option<usize>,
    writers: Vec<u32>,
    /// Steps that read the segment since its last write.
    readers: Vec<u32>,
}

/// Per (rank, buffer): non-overlapping segments keyed by their first element.
struct History {
    maps: Vec<BTreeMap<u64, Segment>>,
}

impl History {
    fn map(&mut self, rank: usize, region: &Region) -> &mut BTreeMap<u64, Segment> {
        &mut self.maps[rank * 3 + region.buffer as usize]
    }

    /// Segments overlapping `region` (read-only), without splitting.
    fn each(&self, rank: usize, region: &Region, mut f: impl FnMut(&Segment)) {
        let map = &self.maps[rank * 3 + region.buffer as usize];
        if let Some((_, s)) = map.range(..region.offset).next_back() {
            if s.end > region.offset {
                f(s);
            }
        }
        for (_, s) in map.range(region.offset..region.end()) {
            f(s);
        }
    }

    /// Make `region`'s ends segment boundaries and fill its gaps; then visit its segments.
    fn carve(&mut self, rank: usize, region: &Region, mut f: impl FnMut(&mut Segment)) {
        let (start, end) = (region.offset, region.end());
        let map = self.map(rank, region);
        for at in [start, end] {
            let split = map.range_mut(..at).next_back().filter(|(_, s)| s.end > at).map(|(_, s)| {
                let right = Segment { end: s.end, ..s.clone() };
                s.end = at;
                right
            });
            if let Some(right) = split {
                map.insert(at, right);
            }
        }
        let mut gaps = Vec::new();
        let mut cursor = start;
        for (&k, s) in map.range(start..end) {
            if k > cursor {
                gaps.push((cursor, k));
            }
            cursor = s.end;
        }
        if cursor < end {
            gaps.push((cursor, end));
        }
        for (a, b) in gaps {
            map.insert(a, Segment { end: b, ..Segment::default() });
        }
        for (_, s) in map.range_mut(start..end) {
            f(s);
        }
    }
}

/// One access of a step: (step, rank, region, reads, writes).
type Access = (u32, usize, Region, bool, bool);

/// The step graph of `schedule`; see the module documentation.
pub fn dependencies(schedule: &Schedule) -> StepGraph {
    let mut graph = Builder {
        history: History { maps: vec![BTreeMap::new(); schedule.spec.ranks * 3] },
        ranks: schedule.spec.ranks,
        offsets: vec![0],
        edges: Vec::new(),
        waits: Vec::new(),
        group: 0,
    };
    let mut round_start = Vec::with_capacity(schedule.rounds.len() + 1);
    let mut step = 0usize;
    let mut accesses: Vec<Access> = Vec::new();
    for round in &schedule.rounds {
        round_start.push(step);
        // The round's transfers and in-network steps: one group, all reading the state
        // from before the round.
        accesses.clear();
        for (i, t) in round.transfers.iter().enumerate() {
            let s = (step + i) as u32;
            accesses.push((s, t.from, t.read, true, false));
            accesses.push((s, t.to, t.write, t.op == Op::Reduce, true));
        }
        for (n, net) in round.in_network.iter().enumerate() {
            let s = (step + round.transfers.len() + n) as u32;
            for rank in net.senders() {
                accesses.push((s, rank, net.read, true, false));
            }
            for rank in net.receivers() {
                accesses.push((s, rank, net.write, false, true));
            }
        }
        let concurrent = round.transfers.len() + round.in_network.len();
        graph.group(step, concurrent, &accesses);
        step += concurrent;
        // Then its local steps, one after another: each sees what came before it.
        for l in &round.local {
            let s = step as u32;
            let local = [(s, l.rank, l.read, true, false), (s, l.rank, l.write, l.op == Op::Reduce, true)];
            graph.group(step, 1, &local);
            step += 1;
        }
    }
    round_start.push(step);
    StepGraph { round_start, offsets: graph.offsets, edges: graph.edges }
}

struct Builder {
    history: History,
    ranks: usize,
    offsets: Vec<usize>,
    edges: Vec<u32>,
    waits: Vec<u32>,
    /// Number of the current group of steps that run together.
    group: usize,
}

impl Builder {
    /// Steps `first..first + steps` run together: each depends on the state before them
    /// (`accesses` are grouped by step, in order); then their reads, then their writes
    /// become the state.
    fn group(&mut self, first: usize, steps: usize, accesses: &[Access]) {
        let ranks = self.ranks;
        let mut a = 0;
        for s in first..first + steps {
            self.waits.clear();
            while a < accesses.len() && accesses[a].0 as usize == s {
                let (_, rank, region, reads, writes) = accesses[a];
                if region.len > 0 && rank < ranks {
                    let waits = &mut self.waits;
                    self.history.each(rank, &region, |seg| {
                        if reads || writes {
                            waits.extend(&seg.writers);
                        }
                        if writes {
                            waits.extend(&seg.readers);
                        }
                    });
                }
                a += 1;
            }
            self.waits.sort_unstable();
            self.waits.dedup();
            self.edges.extend(&self.waits);
            self.offsets.push(self.edges.len());
        }
        for &(s, rank, region, reads, writes) in accesses {
            if reads && !writes && region.len > 0 && rank < ranks {
                self.history.carve(rank, &region, |seg| seg.readers.push(s));
            }
        }
        let group = self.group;
        for &(s, rank, region, _, writes) in accesses {
            if writes && region.len > 0 && rank < ranks {
                self.history.carve(rank, &region, |seg| {
                    if seg.written_in != Some(group) {
                        seg.written_in = Some(group);
                        seg.writers.clear();
                    }
                    seg.writers.push(s);
                    seg.readers.clear();
                });
            }
        }
        self.group += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{generate, Algorithm, Collective, CollectiveSpec, GenOptions};

    #[test]
    fn ring_steps_wait_for_the_chunk_they_forward() {
        let s = generate(Algorithm::Ring, &CollectiveSpec::new(Collective::AllReduce, 4, 8), &GenOptions::default(), 4)
            .unwrap();
        let g = dependencies(&s);
        // Round 0 depends on nothing (the prologue is implicit).
        assert!((0..s.rounds[0].transfers.len()).all(|i| g.deps(g.step(StepId { round: 0, index: 0 }) + i).is_empty()));
        // Round 1, rank 1 forwards (and reduces into rank 2) the chunk rank 0 reduced into
        // rank 1 in round 0: it depends on round 0's transfer 0 -> 1.
        let one = StepId { round: 1, index: 1 };
        assert_eq!(s.rounds[1].transfers[1].from, 1);
        let d: Vec<StepId> = g.deps(g.step(one)).iter().map(|&x| g.id(x as usize)).collect();
        assert!(d.contains(&StepId { round: 0, index: 0 }), "{d:?}");
        // Never on the same or a later round.
        for step in 0..g.len() {
            assert!(g.deps(step).iter().all(|&x| g.id(x as usize).round < g.id(step).round));
        }
    }

    #[test]
    fn hierarchical_inter_stage_waits_only_on_its_own_shard() {
        let groups = vec![vec![0, 1], vec![2, 3]];
        let options = GenOptions { groups, ..GenOptions::default() };
        let s =
            generate(Algorithm::Hierarchical, &CollectiveSpec::new(Collective::AllReduce, 4, 8), &options, 4).unwrap();
        let g = dependencies(&s);
        // Round 1 is the first inter-server round; its transfer of shard j depends only
        // on the intra-server round that delivered shard j to the sender.
        for (i, t) in s.rounds[1].transfers.iter().enumerate() {
            let d = g.deps(g.step(StepId { round: 1, index: i }));
            assert!(!d.is_empty());
            for &dep in d {
                let id = g.id(dep as usize);
                let prev = &s.rounds[id.round].transfers[id.index];
                assert!(prev.to == t.from || prev.to == t.to, "{t:?} waits on unrelated {prev:?}");
            }
        }
    }

    #[test]
    fn several_reductions_into_one_element_in_a_round_are_all_its_writers() {
        // Direct reduce: every rank reduces into the root in one round; the graph has
        // no edge inside the round (the old one had a cycle there).
        let spec = CollectiveSpec::new(Collective::Reduce, 5, 3).with_root(2);
        let s = generate(Algorithm::Direct, &spec, &GenOptions::default(), 4).unwrap();
        let g = dependencies(&s);
        assert!(g.random_topological_order(7).is_some());
        for step in 0..g.len() {
            assert!(g.deps(step).iter().all(|&x| g.id(x as usize).round < g.id(step).round));
        }
    }

    #[test]
    fn an_overwrite_waits_for_the_earlier_read_and_write() {
        use crate::builder::ScheduleBuilder;
        use crate::ir::{Buffer, Step, Transfer};
        let out = |a: u64| Region::new(Buffer::Output, a..a + 2);
        let send = |from, to, read, write, op| Transfer { from, to, read, write, op, shard: None, channel: 0 };
        let spec = CollectiveSpec::new(Collective::AllGather, 3, 2);
        let mut b = ScheduleBuilder::new(spec, "hand-made", 4);
        // Round 0: rank 0 sends its output[0..2] to rank 1, and rank 1 reduces into rank 2.
        // Round 1: rank 2 overwrites rank 0's output[0..2] (after the read: WAR) and
        // rank 0 reduces into rank 2's output[1..3] (after the reduction: WAW on [1..2]).
        b.phase(
            "first",
            vec![Step {
                transfers: vec![send(0, 1, out(0), out(0), Op::Copy), send(1, 2, out(0), out(0), Op::Reduce)],
                in_network: vec![],
                local: Vec::new(),
            }],
        );
        b.phase(
            "second",
            vec![Step {
                transfers: vec![send(2, 0, out(4), out(0), Op::Copy), send(0, 2, out(1), out(1), Op::Reduce)],
                in_network: vec![],
                local: Vec::new(),
            }],
        );
        let g = dependencies(&b.build());
        assert_eq!(g.deps(2), &[0], "the overwrite of rank 0's output waits for round 0's send of it");
        // Reading what another step only read needs no order; writing after a reduction does.
        assert_eq!(g.deps(3), &[1], "rank 2's [1..3] is written after round 0's reduction into [0..2]");
    }
}

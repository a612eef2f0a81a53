//! The symbolic checker: runs a schedule on contribution sets instead of numbers and
//! proves the collective's postcondition.
//!
//! Element i of rank r's input starts as the value {index i, contributors {r}}. A copy
//! moves values; a reduction joins two values of the same index whose contributor sets
//! are disjoint (joining overlapping sets would count a rank twice; joining different
//! indices would mix elements). Reading an element nothing has written is an error.
//! After the epilogue every output element must hold exactly the value the collective
//! promises, and every input must be unchanged (out-of-place calls must not clobber it).
//! Then `deadlock.rs` proves the schedule finishes with no message buffered in a channel.

use fixedbitset::FixedBitSet;

use crate::collective::{Contributors, Rank};
use crate::deadlock::{check_deadlock, Fifo, Programs};
use crate::error::CheckError;
use crate::ir::{Buffer, InNetwork, LocalOp, Op, Region, Schedule};
use crate::step_graph::{StepGraph, StepId};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Value {
    index: u64,
    contributors: FixedBitSet,
}

/// What the checker saw, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckReport {
    pub rounds: usize,
    pub transfers: usize,
    pub elements_sent: u64,
}

struct State {
    ranks: usize,
    /// [rank][buffer] -> elements
    buffers: Vec<[Vec<Option<Value>>; 3]>,
}

fn slot(buffer: Buffer) -> usize {
    match buffer {
        Buffer::Input => 0,
        Buffer::Output => 1,
        Buffer::Scratch => 2,
    }
}

fn fail(at: impl Into<String>, message: impl Into<String>) -> CheckError {
    CheckError { at: at.into(), message: message.into() }
}

impl State {
    fn new(schedule: &Schedule) -> Self {
        let ranks = schedule.spec.ranks;
        let buffers = (0..ranks)
            .map(|r| {
                let input = (0..schedule.buffer_len(r, Buffer::Input))
                    .map(|i| {
                        let mut contributors = FixedBitSet::with_capacity(ranks);
                        contributors.insert(r);
                        Some(Value { index: i, contributors })
                    })
                    .collect();
                [
                    input,
                    vec![None; schedule.buffer_len(r, Buffer::Output) as usize],
                    vec![None; schedule.buffer_len(r, Buffer::Scratch) as usize],
                ]
            })
            .collect();
        State { ranks, buffers }
    }

    fn check_region(&self, at: &str, rank: Rank, region: &Region) -> Result<(), CheckError> {
        if rank >= self.ranks {
            return Err(fail(at, format!("rank {rank} does not exist (the collective has {} ranks)", self.ranks)));
        }
        let len = self.buffers[rank][slot(region.buffer)].len() as u64;
        if region.end() > len {
            return Err(fail(
                at,
                format!(
                    "elements {}..{} are outside rank {rank}'s {} buffer of {len} elements",
                    region.offset,
                    region.end(),
                    region.buffer.as_str()
                ),
            ));
        }
        Ok(())
    }

    fn read(&self, at: &str, rank: Rank, region: &Region) -> Result<Vec<Value>, CheckError> {
        self.check_region(at, rank, region)?;
        let elems = &self.buffers[rank][slot(region.buffer)][region.offset as usize..region.end() as usize];
        elems
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.clone().ok_or_else(|| {
                    fail(
                        at,
                        format!(
                            "reads element {} of rank {rank}'s {} buffer before anything wrote it",
                            region.offset + i as u64,
                            region.buffer.as_str()
                        ),
                    )
                })
            })
            .collect()
    }

    fn write(&mut self, at: &str, rank: Rank, region: &Region, values: Vec<Value>, op: Op) -> Result<(), CheckError> {
        self.check_region(at, rank, region)?;
        let elems = &mut self.buffers[rank][slot(region.buffer)][region.offset as usize..region.end() as usize];
        for (i, (dst, value)) in elems.iter_mut().zip(values).enumerate() {
            let element = region.offset + i as u64;
            *dst = Some(match (op, dst.take()) {
                (Op::Copy, _) => value,
                (Op::Reduce, None) => {
                    return Err(fail(
                        at,
                        format!(
                            "reduces into element {element} of rank {rank}'s {} buffer, which holds nothing yet",
                            region.buffer.as_str()
                        ),
                    ))
                }
                (Op::Reduce, Some(old)) => join(at, old, value, rank, region.buffer, element)?,
            });
        }
        Ok(())
    }

    /// What an in-network step delivers: the join of every sender's region (each rank
    /// once; a multicast's one sender's region as it is).
    fn in_network(&self, at: &str, step: &InNetwork) -> Result<Vec<Value>, CheckError> {
        let mut seen = FixedBitSet::with_capacity(self.ranks);
        for &r in &step.ranks {
            if r < self.ranks && seen.put(r) {
                return Err(fail(at, format!("rank {r} takes part twice")));
            }
        }
        let named = match step.flow {
            crate::ir::Flow::All => None,
            crate::ir::Flow::ReduceTo(r) | crate::ir::Flow::MulticastFrom(r) => Some(r),
        };
        if let Some(r) = named.filter(|r| !step.ranks.contains(r)) {
            return Err(fail(at, format!("names rank {r}, which does not take part")));
        }
        let mut result: Option<Vec<Value>> = None;
        for r in step.senders() {
            let values = self.read(at, r, &step.read)?;
            result = Some(match result {
                None => values,
                Some(acc) => acc
                    .into_iter()
                    .zip(values)
                    .enumerate()
                    .map(|(i, (a, v))| join(at, a, v, r, step.read.buffer, step.read.offset + i as u64))
                    .collect::<Result<_, _>>()?,
            });
        }
        result.ok_or_else(|| fail(at, "has no ranks"))
    }

    fn local(&mut self, at: &str, op: &LocalOp) -> Result<(), CheckError> {
        same_len(at, &op.read, &op.write)?;
        let values = self.read(at, op.rank, &op.read)?;
        self.write(at, op.rank, &op.write, values, op.op)
    }
}

fn join(at: &str, a: Value, b: Value, rank: Rank, buffer: Buffer, element: u64) -> Result<Value, CheckError> {
    if a.index != b.index {
        return Err(fail(
            at,
            format!(
                "reduces element {} into element {} (rank {rank}'s {} buffer, position {element}): different elements mixed",
                b.index,
                a.index,
                buffer.as_str()
            ),
        ));
    }
    if let Some(twice) = a.contributors.intersection(&b.contributors).next() {
        return Err(fail(
            at,
            format!(
                "counts rank {twice}'s contribution twice at element {element} of rank {rank}'s {} buffer",
                buffer.as_str()
            ),
        ));
    }
    let mut contributors = a.contributors;
    contributors.union_with(&b.contributors);
    Ok(Value { index: a.index, contributors })
}

fn same_len(at: &str, read: &Region, write: &Region) -> Result<(), CheckError> {
    if read.len != write.len {
        return Err(fail(at, format!("reads {} elements but writes {}", read.len, write.len)));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Copy,
    Reduce,
}

/// One access of a round: (rank, buffer, start, end, kind, which step made it).
type Span = (Rank, Buffer, u64, u64, Access, usize);

/// Within a round, no element may be written by a copy and by anything else, nor read
/// by one step and written by another.
fn check_races(at: &str, mut spans: Vec<Span>) -> Result<(), CheckError> {
    spans.retain(|s| s.2 < s.3);
    spans.sort_by_key(|s| (s.0, s.1, s.2));
    let mut active: Vec<Span> = Vec::new();
    for s in spans {
        active.retain(|a| a.0 == s.0 && a.1 == s.1 && a.3 > s.2);
        for a in &active {
            let conflict =
                a.5 != s.5 && !matches!((a.4, s.4), (Access::Read, Access::Read) | (Access::Reduce, Access::Reduce));
            if conflict {
                return Err(fail(
                    at,
                    format!(
                        "two steps touch elements {}..{} of rank {}'s {} buffer in the same round ({:?} and {:?}); \
                         the round's steps must be independent",
                        s.2.max(a.2),
                        s.3.min(a.3),
                        s.0,
                        s.1.as_str(),
                        a.4,
                        s.4
                    ),
                ));
            }
        }
        active.push(s);
    }
    Ok(())
}

/// Prove `schedule` implements its collective.
pub fn check(schedule: &Schedule) -> Result<CheckReport, CheckError> {
    let mut state = State::new(schedule);
    for op in &schedule.prologue {
        state.local("prologue", op)?;
    }
    let mut transfers = 0;
    for (index, round) in schedule.rounds.iter().enumerate() {
        let round_at = schedule.round_label(index);
        let mut spans = Vec::new();
        let mut writes = Vec::new();
        for (i, t) in round.transfers.iter().enumerate() {
            let at = schedule.transfer_label(index, t);
            same_len(&at, &t.read, &t.write)?;
            let values = state.read(&at, t.from, &t.read)?;
            state.check_region(&at, t.to, &t.write)?;
            spans.push((t.from, t.read.buffer, t.read.offset, t.read.end(), Access::Read, i));
            let kind = if t.op == Op::Copy { Access::Copy } else { Access::Reduce };
            spans.push((t.to, t.write.buffer, t.write.offset, t.write.end(), kind, i));
            writes.push((at, t.to, t.write, values, t.op));
        }
        for (n, step) in round.in_network.iter().enumerate() {
            let owner = round.transfers.len() + n;
            let at = format!("{round_at}: in-network reduction of ranks {:?}", step.ranks);
            same_len(&at, &step.read, &step.write)?;
            let result = state.in_network(&at, step)?;
            for r in step.senders() {
                spans.push((r, step.read.buffer, step.read.offset, step.read.end(), Access::Read, owner));
            }
            for r in step.receivers() {
                spans.push((r, step.write.buffer, step.write.offset, step.write.end(), Access::Copy, owner));
                writes.push((at.clone(), r, step.write, result.clone(), Op::Copy));
            }
        }
        check_races(&round_at, spans)?;
        for (at, rank, region, values, op) in writes {
            state.write(&at, rank, &region, values, op)?;
        }
        for op in &round.local {
            state.local(&format!("{round_at}: local step of rank {}", op.rank), op)?;
        }
        transfers += round.transfers.len();
    }
    for op in &schedule.epilogue {
        state.local("epilogue", op)?;
    }
    check_postcondition(schedule, &state)?;
    // And that it cannot deadlock, even with no buffering, whether a rank posts a round's
    // transfers together (the runtime) or one at a time in step order, over the runtime's
    // one ordered stream per peer pair (which orders more than the IR's per channel).
    check_deadlock(schedule, &Programs::rounds(schedule), 0, Fifo::PeerPair)?;
    check_deadlock(schedule, &Programs::one_by_one(schedule), 0, Fifo::PeerPair)?;
    Ok(CheckReport { rounds: schedule.rounds.len(), transfers, elements_sent: schedule.elements_sent() })
}

/// Prove `schedule` implements its collective when its steps run one at a time in
/// `order` (step numbers of `graph`, e.g. a random topological order) instead of round
/// by round: each step reads and writes at once, so this holds exactly when the step
/// graph orders everything that must be ordered. It assumes `check` passed (which
/// refuses a read and a write of one element in one round); `graph` must be the
/// schedule's own (`dependencies`).
pub fn check_in_order(schedule: &Schedule, graph: &StepGraph, order: &[usize]) -> Result<CheckReport, CheckError> {
    let steps: usize = schedule.rounds.iter().map(|r| r.transfers.len() + r.in_network.len() + r.local.len()).sum();
    if graph.len() != steps {
        return Err(fail("order", format!("the step graph has {} steps, the schedule {steps}", graph.len())));
    }
    if order.len() != graph.len() {
        return Err(fail("order", format!("lists {} steps of {}", order.len(), graph.len())));
    }
    let mut state = State::new(schedule);
    for op in &schedule.prologue {
        state.local("prologue", op)?;
    }
    let mut done = vec![false; graph.len()];
    for &step in order {
        let Some(StepId { round, index }) = (step < graph.len()).then(|| graph.id(step)) else {
            return Err(fail("order", format!("step {step} does not exist")));
        };
        if done[step] {
            return Err(fail("order", format!("step {step} is listed twice")));
        }
        if let Some(&d) = graph.deps(step).iter().find(|&&d| !done[d as usize]) {
            return Err(fail("order", format!("step {step} runs before step {d} it depends on")));
        }
        // A round's steps are its transfers, then its in-network steps, then its local steps.
        let r = &schedule.rounds[round];
        let (transfers, networks) = (r.transfers.len(), r.in_network.len());
        if index < transfers {
            let t = &r.transfers[index];
            let at = schedule.transfer_label(round, t);
            same_len(&at, &t.read, &t.write)?;
            let values = state.read(&at, t.from, &t.read)?;
            state.write(&at, t.to, &t.write, values, t.op)?;
        } else if index < transfers + networks {
            let net = &r.in_network[index - transfers];
            let at = format!("{}: in-network reduction of ranks {:?}", schedule.round_label(round), net.ranks);
            same_len(&at, &net.read, &net.write)?;
            let result = state.in_network(&at, net)?;
            for rank in net.receivers() {
                state.write(&at, rank, &net.write, result.clone(), Op::Copy)?;
            }
        } else {
            let Some(op) = r.local.get(index - transfers - networks) else {
                return Err(fail("order", format!("step {step} is not in round {round}: not this schedule's graph")));
            };
            state.local(&format!("{}: local step of rank {}", schedule.round_label(round), op.rank), op)?;
        }
        done[step] = true;
    }
    for op in &schedule.epilogue {
        state.local("epilogue", op)?;
    }
    check_postcondition(schedule, &state)?;
    let transfers = schedule.rounds.iter().map(|r| r.transfers.len()).sum();
    Ok(CheckReport { rounds: schedule.rounds.len(), transfers, elements_sent: schedule.elements_sent() })
}

fn check_postcondition(schedule: &Schedule, state: &State) -> Result<(), CheckError> {
    let spec = &schedule.spec;
    let mut everyone = FixedBitSet::with_capacity(spec.ranks);
    everyone.insert_range(..);
    for r in 0..spec.ranks {
        // Inputs are untouched.
        for (i, v) in state.buffers[r][slot(Buffer::Input)].iter().enumerate() {
            let intact = v.as_ref().is_some_and(|v| {
                v.index == i as u64 && v.contributors.count_ones(..) == 1 && v.contributors.contains(r)
            });
            if !intact {
                return Err(fail("postcondition", format!("rank {r}'s input element {i} was overwritten")));
            }
        }
        let output = &state.buffers[r][slot(Buffer::Output)];
        let expected = spec.expected_output(r);
        if expected.len() != output.len() {
            return Err(fail(
                "postcondition",
                format!("rank {r}'s output has {} elements, the collective defines {}", output.len(), expected.len()),
            ));
        }
        for (i, ((index, who), v)) in expected.into_iter().zip(output).enumerate() {
            let contributors = match who {
                Contributors::All => everyone.clone(),
                Contributors::One(q) => {
                    let mut one = FixedBitSet::with_capacity(spec.ranks);
                    one.insert(q);
                    one
                }
            };
            let expected = Value { index, contributors };
            if v.as_ref() != Some(&expected) {
                return Err(fail(
                    "postcondition",
                    format!(
                        "rank {r}'s output element {i} should be {} but is {}",
                        describe(Some(&expected), spec.ranks),
                        describe(v.as_ref(), spec.ranks)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn describe(v: Option<&Value>, ranks: usize) -> String {
    match v {
        None => "never written".into(),
        Some(v) => {
            let n = v.contributors.count_ones(..);
            let who = if n == ranks && ranks > 1 {
                "all ranks".to_string()
            } else {
                let list: Vec<String> = v.contributors.ones().map(|r| r.to_string()).collect();
                format!("rank(s) {}", list.join(","))
            };
            format!("element {} from {who}", v.index)
        }
    }
}

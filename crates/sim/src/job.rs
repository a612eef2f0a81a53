//! One job's progress through its schedule: which round each rank is in, which
//! transfers may start, and when a run of repeated rounds can be skipped. No flows and
//! no clock here: the engine tells a job what finished and when, and carries out the
//! [`Action`]s the job asks for.
//!
//! Two rules decide when a transfer of round k starts (after the topology's per-step
//! start-up α):
//! - `Barriers`: when every rank has finished round k − 1 (the per-round model's rule,
//!   seed 001 §7.2.1); a round with nothing to move still takes α, as in the model.
//! - `RankOrder`: when each rank it joins has finished its own part of round k − 1 — a
//!   rank runs its rounds in order, as the runtime and NCCL's channels do. It is the
//!   step graph coarsened to (rank, round): every step a transfer depends on (data it
//!   sends delivered, a buffer it overwrites read) is an earlier round's step of one of
//!   its ranks, so this never starts a transfer early; it may start one later than the
//!   finest graph would.
//!
//! Rounds are made from the compact schedule when the first rank reaches them and
//! dropped when the last rank leaves, so a job holds the rounds between its slowest
//! and fastest rank (a ring: one or two), never the whole schedule.

use std::collections::VecDeque;

use railyard_schedule::{CompactSchedule, Rank, Step};
use serde::Serialize;

use crate::time::Picos;

/// When a round's transfers may start; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dependencies {
    Barriers,
    RankOrder,
}

impl Dependencies {
    /// The rule in words.
    pub fn describe(self) -> &'static str {
        match self {
            Dependencies::Barriers => "round barriers",
            Dependencies::RankOrder => "rank order",
        }
    }
}

/// A transfer or an in-network reduction of a made round.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Op {
    pub bytes: f64,
    pub channel: u32,
    pub kind: OpKind,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OpKind {
    Transfer { from: Rank, to: Rank },
    InNetwork { ranks: Vec<Rank>, senders: Vec<Rank>, receivers: Vec<Rank> },
}

impl Op {
    fn ranks(&self) -> impl Iterator<Item = Rank> + '_ {
        let (pair, group): (Option<[Rank; 2]>, &[Rank]) = match &self.kind {
            OpKind::Transfer { from, to } if from == to => (None, std::slice::from_ref(from)),
            OpKind::Transfer { from, to } => (Some([*from, *to]), &[]),
            OpKind::InNetwork { ranks, .. } => (None, ranks),
        };
        pair.into_iter().flatten().chain(group.iter().copied())
    }
}

/// A round made from the schedule, with who has reached and left it.
#[derive(Debug)]
struct MadeRound {
    ops: Vec<Op>,
    /// (rank, op) for every rank an op joins, sorted: O(ops), not O(ranks), per round,
    /// so a long chain's many small rounds can be held at once.
    by_rank: Vec<(u32, u32)>,
    /// Ranks of each op that have not reached the round yet.
    waiting: Vec<u32>,
    entered: usize,
    left: usize,
    first_entry: Picos,
    last_entry: Picos,
    last_leave: Picos,
}

/// What a job asks the engine to do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Start op `op` of round `round` at `at`.
    Start { round: usize, op: u32, at: Picos },
    /// Every rank enters `round` at `at` (a barrier released, or a skipped run ended).
    EnterAll { round: usize, at: Picos },
    /// One rank enters round 0 at `at` (when it is ready).
    Ready { rank: Rank, at: Picos },
}

/// When a round ran: the first rank's entry to the last rank's exit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RoundSpan {
    pub start: Picos,
    pub end: Picos,
    /// Not simulated flow by flow: a repeat of the round before, which ran in step.
    pub reused: bool,
}

#[derive(Debug)]
pub(crate) struct Job<'s> {
    pub schedule: &'s CompactSchedule,
    pub dependencies: Dependencies,
    pub alpha: Picos,
    /// Host work added after the last round, as the per-round model adds it (the busiest
    /// rank's local copies and reductions and per-message overhead, on topologies that
    /// declare host costs; none on the seeds' clusters).
    pub host: Picos,
    /// Whether runs of repeated rounds may be skipped (only a job alone on the network).
    pub reuse: bool,
    ranks: usize,
    /// Global index of the first round of each phase, and the total at the end.
    phase_start: Vec<usize>,
    window: VecDeque<MadeRound>,
    window_first: usize,
    /// Round each rank is in, and how many of its ops there are unfinished.
    rank_round: Vec<usize>,
    pending: Vec<u32>,
    /// Barriers: ranks done with the current round.
    at_barrier: usize,
    ranks_done: usize,
    pub spans: Vec<Option<RoundSpan>>,
    pub finished: Option<Picos>,
    pub reused_rounds: usize,
    /// The largest number of rounds held at once.
    pub window_peak: usize,
    /// Items the window holds (every op's place by rank, and one per round), against
    /// `window_limit`.
    held_items: usize,
    /// Whether the job has started (its first `EnterAll` of round 0 came).
    pub started: bool,
    /// When it started (its `start_secs`, after the jobs it waits for where it waits).
    pub started_at: Picos,
    /// Critical path (engine records, u32::MAX for none): per rank, the op whose end let
    /// it enter the round it is in; the op that completed the last barrier; the op whose
    /// end finished the job.
    cause: Vec<u32>,
    barrier_cause: u32,
    pub finish_cause: u32,
    /// The round last dropped from the window, kept to compare the next one with.
    previous: Option<(usize, MadeRound)>,
    /// Rounds every rank has entered since the engine last looked.
    pub all_in: Vec<usize>,
    /// When each rank entered the round it is in.
    rank_entry: Vec<Picos>,
    window_limit: usize,
}

impl<'s> Job<'s> {
    pub fn new(
        schedule: &'s CompactSchedule,
        dependencies: Dependencies,
        alpha: Picos,
        reuse: bool,
        window_limit: usize,
    ) -> Self {
        let mut phase_start = vec![0];
        for p in &schedule.phases {
            phase_start.push(phase_start.last().copied().unwrap_or(0) + p.rounds.rounds());
        }
        let rounds = *phase_start.last().unwrap_or(&0);
        let ranks = schedule.spec.ranks;
        Job {
            schedule,
            dependencies,
            alpha,
            host: Picos::ZERO,
            reuse,
            ranks,
            phase_start,
            window: VecDeque::new(),
            window_first: 0,
            rank_round: vec![0; ranks],
            pending: vec![0; ranks],
            at_barrier: 0,
            ranks_done: 0,
            spans: vec![None; rounds],
            finished: None,
            reused_rounds: 0,
            window_peak: 0,
            held_items: 0,
            started: false,
            started_at: Picos::ZERO,
            cause: vec![u32::MAX; ranks],
            barrier_cause: u32::MAX,
            finish_cause: u32::MAX,
            previous: None,
            all_in: Vec::new(),
            rank_entry: vec![Picos::ZERO; ranks],
            window_limit,
        }
    }

    pub fn rounds(&self) -> usize {
        self.spans.len()
    }

    /// What op `op` of `round` waited for last: the record that let the latest of its
    /// ranks into the round.
    pub fn start_cause(&self, round: usize, op: u32) -> u32 {
        let Some(o) = self.op(round, op) else { return u32::MAX };
        o.ranks().max_by_key(|&r| (self.rank_entry[r], std::cmp::Reverse(r))).map_or(u32::MAX, |r| self.cause[r])
    }

    /// Rounds every rank has left (all of them once the job is done).
    pub fn rounds_done(&self) -> usize {
        if self.finished.is_some() {
            self.rounds()
        } else {
            self.window_first.min(self.rounds())
        }
    }

    /// Phase and round-in-phase of a global round.
    pub fn locate(&self, round: usize) -> (usize, usize) {
        let phase = self.phase_start.partition_point(|&s| s <= round) - 1;
        (phase, round - self.phase_start[phase])
    }

    pub fn round_label(&self, round: usize) -> String {
        let (p, k) = self.locate(round);
        self.schedule.round_label(p, k)
    }

    /// Op `op` of `round`, if the round is still held (a start for a round skipped
    /// since it was asked for finds none).
    pub fn op(&self, round: usize, op: u32) -> Option<&Op> {
        let i = round.checked_sub(self.window_first)?;
        self.window.get(i)?.ops.get(op as usize)
    }

    fn made(&mut self, round: usize) -> Result<&mut MadeRound, usize> {
        while self.window_first + self.window.len() <= round {
            let next = self.window_first + self.window.len();
            let made = self.make(next);
            if self.held_items + made.by_rank.len() + 1 > self.window_limit {
                return Err(self.window.len() + 1);
            }
            self.held_items += made.by_rank.len() + 1;
            self.window.push_back(made);
            self.window_peak = self.window_peak.max(self.window.len());
        }
        let i = round - self.window_first;
        Ok(&mut self.window[i])
    }

    fn make(&self, round: usize) -> MadeRound {
        let (p, k) = self.locate(round);
        let step = self.schedule.whole_round(p, k, round == 0);
        made_round(&step, self.schedule.elem_bytes)
    }

    /// Start the job at `at`, each rank `ready[rank]` later (all at `at` when `ready` is
    /// empty): rank order lets each rank enter round 0 when it is ready; barriers start
    /// round 0 when the last one is (seed 001 §7.6.1: the exchange starts at the latest
    /// readiness).
    pub fn start(&mut self, at: Picos, ready: &[Picos], actions: &mut Vec<Action>) -> Result<(), usize> {
        if ready.is_empty() || ready.iter().all(|&r| r == Picos::ZERO) {
            return self.enter_all(0, at, actions);
        }
        match self.dependencies {
            Dependencies::Barriers => {
                let last = ready.iter().copied().max().unwrap_or(Picos::ZERO);
                actions.push(Action::EnterAll { round: 0, at: at.saturating_add(last) });
            }
            Dependencies::RankOrder => {
                for (rank, &r) in ready.iter().enumerate() {
                    actions.push(Action::Ready { rank, at: at.saturating_add(r) });
                }
            }
        }
        Ok(())
    }

    /// Rank order: `rank` is ready and enters round 0.
    pub fn ready(&mut self, rank: Rank, at: Picos, actions: &mut Vec<Action>) -> Result<(), usize> {
        self.enter(rank, 0, at, actions)
    }

    /// Every rank enters `round` at `at`.
    pub fn enter_all(&mut self, round: usize, at: Picos, actions: &mut Vec<Action>) -> Result<(), usize> {
        match self.dependencies {
            Dependencies::Barriers => self.barrier_enter(round, at, actions),
            Dependencies::RankOrder => {
                for rank in 0..self.ranks {
                    // A skipped run jumps every rank; the round they left is done.
                    self.rank_round[rank] = round;
                    self.enter(rank, round, at, actions)?;
                }
                Ok(())
            }
        }
    }

    fn barrier_enter(&mut self, round: usize, at: Picos, actions: &mut Vec<Action>) -> Result<(), usize> {
        self.drop_before(round);
        self.cause.fill(self.barrier_cause);
        if round == self.rounds() {
            self.finished = Some(at.saturating_add(self.host));
            self.finish_cause = self.barrier_cause;
            return Ok(());
        }
        let alpha = self.alpha;
        let ranks = self.ranks;
        let mr = self.made(round)?;
        mr.entered = ranks;
        mr.first_entry = at;
        mr.last_entry = at;
        let ops = mr.ops.len();
        let mut counts = vec![0u32; ranks];
        for &(r, _) in &mr.by_rank {
            counts[r as usize] += 1;
        }
        self.spans[round] = Some(RoundSpan { start: at, end: at, reused: false });
        self.all_in.push(round);
        for op in 0..ops as u32 {
            actions.push(Action::Start { round, op, at: at.saturating_add(alpha) });
        }
        self.at_barrier = counts.iter().filter(|&&c| c == 0).count();
        self.pending.copy_from_slice(&counts);
        for r in &mut self.rank_round {
            *r = round;
        }
        self.rank_entry.fill(at);
        if self.at_barrier == ranks {
            // Nothing moves, yet the round pays its start-up (the model's α per round).
            actions.push(Action::EnterAll { round: round + 1, at: at.saturating_add(alpha) });
            if let Some(s) = &mut self.spans[round] {
                s.end = at.saturating_add(alpha);
            }
        }
        Ok(())
    }

    /// Rank-order: `rank` enters `round` at `at`, and passes through rounds it has no
    /// part in.
    fn enter(&mut self, rank: Rank, mut round: usize, at: Picos, actions: &mut Vec<Action>) -> Result<(), usize> {
        loop {
            self.rank_round[rank] = round;
            if round == self.rounds() {
                self.ranks_done += 1;
                if self.ranks_done == self.ranks {
                    self.finished = Some(at.saturating_add(self.host));
                    self.finish_cause = self.cause[rank];
                }
                return Ok(());
            }
            let alpha = self.alpha;
            let ranks = self.ranks;
            self.rank_entry[rank] = at;
            let mr = self.made(round)?;
            if mr.entered == 0 {
                mr.first_entry = at;
            }
            mr.entered += 1;
            mr.last_entry = at;
            let lo = mr.by_rank.partition_point(|&(r, _)| (r as usize) < rank);
            let hi = lo + mr.by_rank[lo..].partition_point(|&(r, _)| r as usize == rank);
            for i in lo..hi {
                let op = mr.by_rank[i].1;
                let w = &mut mr.waiting[op as usize];
                *w -= 1;
                if *w == 0 {
                    actions.push(Action::Start { round, op, at: at.saturating_add(alpha) });
                }
            }
            let all_in = mr.entered == ranks;
            let first_entry = mr.first_entry;
            self.pending[rank] = (hi - lo) as u32;
            let span = self.spans[round].get_or_insert(RoundSpan { start: first_entry, end: at, reused: false });
            span.end = span.end.max(at);
            if all_in {
                self.all_in.push(round);
            }
            if hi > lo {
                return Ok(());
            }
            self.leave(round, at);
            round += 1;
        }
    }

    fn leave(&mut self, round: usize, at: Picos) {
        if let Some(i) = round.checked_sub(self.window_first) {
            if let Some(mr) = self.window.get_mut(i) {
                mr.left += 1;
                mr.last_leave = mr.last_leave.max(at);
            }
        }
        if let Some(s) = &mut self.spans[round] {
            s.end = s.end.max(at);
        }
        while self.window.front().is_some_and(|f| f.left == self.ranks) {
            self.pop_front();
        }
    }

    fn pop_front(&mut self) {
        if let Some(front) = self.window.pop_front() {
            self.held_items -= front.by_rank.len() + 1;
            self.previous = Some((self.window_first, front));
            self.window_first += 1;
        }
    }

    /// Whether round `round` moves the traffic of the round before: its source says so,
    /// or both are held and equal (transfers only).
    pub fn repeats(&self, round: usize) -> bool {
        let (p, k) = self.locate(round);
        if k == 0 {
            return false;
        }
        if self.schedule.phases[p].rounds.repeats_previous(k) {
            return true;
        }
        let held = |r: usize| r.checked_sub(self.window_first).and_then(|i| self.window.get(i)).map(|m| &m.ops);
        let prev = match (held(round - 1), &self.previous) {
            (Some(ops), _) => Some(ops),
            (None, Some((i, m))) if *i + 1 == round => Some(&m.ops),
            _ => None,
        };
        match (prev, held(round)) {
            (Some(a), Some(b)) => a.iter().all(|o| matches!(o.kind, OpKind::Transfer { .. })) && a == b,
            _ => false,
        }
    }

    /// The first round after `round` that does not repeat its predecessor (by its source's
    /// word, without making it).
    pub fn run_end(&self, round: usize) -> usize {
        let (p, k) = self.locate(round);
        let source = &self.schedule.phases[p].rounds;
        let mut end = k + 1;
        while end < source.rounds() && source.repeats_previous(end) {
            end += 1;
        }
        self.phase_start[p] + end
    }

    /// The last round held (the fastest rank's).
    pub fn last_held(&self) -> usize {
        (self.window_first + self.window.len()).saturating_sub(1)
    }

    pub fn held_ops(&self, round: usize) -> Option<&[Op]> {
        let i = round.checked_sub(self.window_first)?;
        self.window.get(i).map(|m| m.ops.as_slice())
    }

    /// The ranks' state relative to round `k` and time `t`, appended to `out`: where each
    /// rank is and since when, and what it still waits for.
    pub fn rank_signature(&self, k: usize, t: Picos, out: &mut Vec<u64>) {
        for r in 0..self.ranks {
            out.push(self.rank_round[r].wrapping_sub(k) as u64);
            out.push(self.rank_entry[r].0.wrapping_sub(t.0));
            out.push(u64::from(self.pending[r]));
        }
        out.push(self.at_barrier as u64);
    }

    /// Move everything `rounds` rounds and `by` time on: the state found periodic repeats
    /// itself over the skipped rounds, which take the span of round `k − 1` shifted, each
    /// `period` later than the one before.
    pub fn shift(&mut self, k: usize, rounds: usize, period: Picos, by: Picos) {
        let last = self.last_held();
        for j in (k..=last).rev() {
            self.spans[j + rounds] = self.spans[j].map(|s| RoundSpan {
                start: s.start.saturating_add(by),
                end: s.end.saturating_add(by),
                reused: false,
            });
        }
        let base = self.spans[k - 1];
        for j in k..k + rounds {
            let lag = Picos(period.0 * (j - k + 1) as u64);
            self.spans[j] = base.map(|s| RoundSpan {
                start: s.start.saturating_add(lag),
                end: s.end.saturating_add(lag),
                reused: true,
            });
        }
        self.reused_rounds += rounds;
        self.window_first += rounds;
        for m in &mut self.window {
            m.first_entry = m.first_entry.saturating_add(by);
            m.last_entry = m.last_entry.saturating_add(by);
            m.last_leave = m.last_leave.saturating_add(by);
        }
        self.previous = None;
        for r in 0..self.ranks {
            self.rank_round[r] += rounds;
            self.rank_entry[r] = self.rank_entry[r].saturating_add(by);
        }
    }

    fn drop_before(&mut self, round: usize) {
        while self.window_first < round && !self.window.is_empty() {
            self.pop_front();
        }
        if self.window.is_empty() {
            self.window_first = self.window_first.max(round);
        }
    }

    /// Op `op` of `round` finished at `at`: its ranks move on when it was their last.
    /// `record` is the engine's record of the op (for the critical path; u32::MAX if none).
    pub fn op_finished(
        &mut self,
        round: usize,
        op: u32,
        at: Picos,
        record: u32,
        actions: &mut Vec<Action>,
    ) -> Result<(), usize> {
        let Some(o) = self.op(round, op) else { return Ok(()) };
        let ranks: Vec<Rank> = o.ranks().collect();
        for rank in ranks {
            self.pending[rank] -= 1;
            if self.pending[rank] != 0 {
                continue;
            }
            self.cause[rank] = record;
            match self.dependencies {
                Dependencies::Barriers => {
                    self.barrier_cause = record;
                    self.at_barrier += 1;
                    if let Some(s) = &mut self.spans[round] {
                        s.end = s.end.max(at);
                    }
                    if self.at_barrier == self.ranks {
                        self.barrier_enter(round + 1, at, actions)?;
                    }
                }
                Dependencies::RankOrder => {
                    self.leave(round, at);
                    self.enter(rank, round + 1, at, actions)?;
                }
            }
        }
        Ok(())
    }
}

/// Index a round's transfers and in-network steps by rank.
fn made_round(step: &Step, elem_bytes: u64) -> MadeRound {
    let elem = elem_bytes as f64;
    let mut ops: Vec<Op> = step
        .transfers
        .iter()
        .map(|t| Op {
            bytes: t.read.len as f64 * elem,
            channel: t.channel,
            kind: OpKind::Transfer { from: t.from, to: t.to },
        })
        .collect();
    ops.extend(step.in_network.iter().map(|s| Op {
        bytes: s.read.len as f64 * elem,
        channel: 0,
        kind: OpKind::InNetwork {
            ranks: s.ranks.clone(),
            senders: s.senders().collect(),
            receivers: s.receivers().collect(),
        },
    }));
    let mut waiting = Vec::with_capacity(ops.len());
    let mut by_rank: Vec<(u32, u32)> = Vec::with_capacity(ops.len() * 2);
    for (i, o) in ops.iter().enumerate() {
        let mut n = 0;
        for r in o.ranks() {
            by_rank.push((r as u32, i as u32));
            n += 1;
        }
        waiting.push(n);
    }
    by_rank.sort_unstable();
    MadeRound {
        ops,
        by_rank,
        waiting,
        entered: 0,
        left: 0,
        first_entry: Picos::ZERO,
        last_entry: Picos::ZERO,
        last_leave: Picos::ZERO,
    }
}

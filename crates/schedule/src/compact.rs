//! The compact schedule: what the generators build and what the model and the runtime
//! read. Each phase holds its rounds as a [`RoundSource`] — a plain list of steps, or a
//! rule that makes round k on demand (a ring stage from its orders and blocks) — so a
//! ring over P ranks is held in O(P), not as its 2P(P−1) transfers. A source also says
//! which rounds move exactly the traffic of the round before (a ring's rounds do when
//! its blocks are equal), so the model costs such a run once.
//!
//! [`CompactSchedule::expand`] gives the transfer-by-transfer [`Schedule`] the checker,
//! the step graph and people read; [`CompactSchedule::for_rank`] gives one rank's part
//! without making any other rank's transfers (what the runtime holds). Both mean the
//! same as the IR documents in `ir.rs`.

use std::borrow::Cow;
use std::fmt;

use crate::collective::{CollectiveSpec, Rank};
use crate::forward::forward_reads;
use crate::ir::{LocalOp, Op, Phase, Round, Schedule, Step};

/// The rounds of one phase. Round numbers passed in are below `rounds()` (callers
/// iterate `0..rounds()`).
pub trait RoundSource: fmt::Debug + Send + Sync {
    /// How many rounds; every one carries something.
    fn rounds(&self) -> usize;
    /// Round `k` (0-based): everything in it, or with `Some(rank)` only the transfers
    /// `rank` sends or receives, the in-network steps it joins and its own local steps
    /// (in the same relative order as in the whole round).
    fn step(&self, k: usize, rank: Option<Rank>) -> Step;
    /// Whether round `k` moves exactly the traffic of round k − 1 (see [`same_traffic`]):
    /// only the regions differ. Never for round 0; `false` is always a safe answer.
    fn repeats_previous(&self, _k: usize) -> bool {
        false
    }
    /// An upper bound on the transfers of any one round, so a reader can bound the work
    /// of making every round before it starts.
    fn transfers_per_round(&self) -> usize;
    /// Items held in memory (transfers, ranks of in-network steps, local steps, or
    /// positions and blocks of a rule), for limits and benchmarks.
    fn held(&self) -> usize;
    /// Round `k` as held, where the source holds it (so a reader need not copy it).
    fn held_step(&self, _k: usize) -> Option<&Step> {
        None
    }
}

/// Whether two rounds move the same traffic: the same (from, to, length, op, channel,
/// shard) transfers in the same order, and no in-network or local steps in either. Two
/// such rounds cost the same on any topology and weigh the same on every host.
pub fn same_traffic(a: &Step, b: &Step) -> bool {
    let plain = |s: &Step| s.in_network.is_empty() && s.local.is_empty();
    plain(a)
        && plain(b)
        && a.transfers.len() == b.transfers.len()
        && a.transfers.iter().zip(&b.transfers).all(|(x, y)| {
            (x.from, x.to, x.read.len, x.op, x.channel, x.shard) == (y.from, y.to, y.read.len, y.op, y.channel, y.shard)
        })
}

/// Rounds held as a list of steps.
#[derive(Debug, Clone, Default)]
pub struct ListedRounds(pub Vec<Step>);

impl ListedRounds {
    /// `steps` without zero-length transfers and then without empty steps (a source
    /// carries neither).
    pub fn of(steps: Vec<Step>) -> Self {
        ListedRounds(
            steps
                .into_iter()
                .map(|mut s| {
                    s.transfers.retain(|t| t.read.len > 0);
                    s.in_network.retain(|n| n.read.len > 0);
                    s.local.retain(|l| l.read.len > 0);
                    s
                })
                .filter(|s| !s.is_empty())
                .collect(),
        )
    }
}

impl RoundSource for Box<dyn RoundSource> {
    fn rounds(&self) -> usize {
        (**self).rounds()
    }
    fn step(&self, k: usize, rank: Option<Rank>) -> Step {
        (**self).step(k, rank)
    }
    fn repeats_previous(&self, k: usize) -> bool {
        (**self).repeats_previous(k)
    }
    fn transfers_per_round(&self) -> usize {
        (**self).transfers_per_round()
    }
    fn held(&self) -> usize {
        (**self).held()
    }
    fn held_step(&self, k: usize) -> Option<&Step> {
        (**self).held_step(k)
    }
}

impl RoundSource for ListedRounds {
    fn rounds(&self) -> usize {
        self.0.len()
    }

    fn step(&self, k: usize, rank: Option<Rank>) -> Step {
        let step = &self.0[k];
        match rank {
            None => step.clone(),
            Some(rank) => Step::part_of(&step.transfers, &step.in_network, &step.local, rank),
        }
    }

    fn transfers_per_round(&self) -> usize {
        self.0.iter().map(|s| s.transfers.len()).max().unwrap_or(0)
    }

    fn held_step(&self, k: usize) -> Option<&Step> {
        self.0.get(k)
    }

    fn held(&self) -> usize {
        self.0
            .iter()
            .map(|s| s.transfers.len() + s.in_network.iter().map(|n| n.ranks.len()).sum::<usize>() + s.local.len())
            .sum()
    }
}

/// Sources run one after the other in one phase (a ring all-reduce's reduce-scatter
/// rounds, then its all-gather rounds).
#[derive(Debug, Default)]
pub struct SequenceRounds(pub Vec<Box<dyn RoundSource>>);

impl SequenceRounds {
    /// The part holding round `k`, and `k` inside it (none past the last round).
    fn locate(&self, mut k: usize) -> Option<(&dyn RoundSource, usize)> {
        for part in &self.0 {
            if k < part.rounds() {
                return Some((part.as_ref(), k));
            }
            k -= part.rounds();
        }
        None
    }
}

impl RoundSource for SequenceRounds {
    fn rounds(&self) -> usize {
        self.0.iter().map(|p| p.rounds()).sum()
    }

    fn step(&self, k: usize, rank: Option<Rank>) -> Step {
        self.locate(k).map(|(part, k)| part.step(k, rank)).unwrap_or_default()
    }

    fn repeats_previous(&self, k: usize) -> bool {
        self.locate(k).is_some_and(|(part, k)| k > 0 && part.repeats_previous(k))
    }

    fn transfers_per_round(&self) -> usize {
        self.0.iter().map(|p| p.transfers_per_round()).max().unwrap_or(0)
    }

    fn held(&self) -> usize {
        self.0.iter().map(|p| p.held()).sum()
    }
}

/// Sources that run side by side: round k is round k − start of every source whose
/// rounds cover k, in the order listed (a pipeline slot: one chunk's intra-server stage
/// beside the previous chunk's inter-server stage).
#[derive(Debug)]
pub struct ParallelRounds(pub Vec<(usize, Box<dyn RoundSource>)>);

impl ParallelRounds {
    fn active(&self, k: usize) -> impl Iterator<Item = (usize, &dyn RoundSource)> + '_ {
        self.0
            .iter()
            .filter(move |(start, s)| k >= *start && k < start + s.rounds())
            .map(move |(start, s)| (k - start, &**s))
    }
}

impl RoundSource for ParallelRounds {
    fn rounds(&self) -> usize {
        self.0.iter().map(|(start, s)| start + s.rounds()).max().unwrap_or(0)
    }

    fn step(&self, k: usize, rank: Option<Rank>) -> Step {
        let mut out = Step::default();
        for (kk, s) in self.active(k) {
            let part = s.step(kk, rank);
            out.transfers.extend(part.transfers);
            out.in_network.extend(part.in_network);
            out.local.extend(part.local);
        }
        out
    }

    /// When the same sources are active in both rounds and each repeats itself.
    fn repeats_previous(&self, k: usize) -> bool {
        k > 0
            && self.0.iter().all(|(start, s)| {
                let covers = |r: usize| r >= *start && r < start + s.rounds();
                match (covers(k - 1), covers(k)) {
                    (false, false) => true,
                    (true, true) => s.repeats_previous(k - start),
                    _ => false,
                }
            })
    }

    fn transfers_per_round(&self) -> usize {
        self.0.iter().map(|(_, s)| s.transfers_per_round()).sum()
    }

    fn held(&self) -> usize {
        self.0.iter().map(|(_, s)| s.held()).sum()
    }
}

/// A named stage and its rounds.
#[derive(Debug)]
pub struct CompactPhase {
    pub name: String,
    pub rounds: Box<dyn RoundSource>,
}

/// A schedule whose rounds are held by their phases' sources; see the module documentation.
#[derive(Debug)]
pub struct CompactSchedule {
    pub spec: CollectiveSpec,
    pub algorithm: String,
    pub elem_bytes: u64,
    /// Scratch elements each rank needs.
    pub scratch_len: Vec<u64>,
    pub phases: Vec<CompactPhase>,
    pub prologue: Vec<LocalOp>,
    pub epilogue: Vec<LocalOp>,
    /// Whether round 0's sends of bytes the prologue copied out of the input read the
    /// input instead (`forward.rs`; every generated schedule does).
    pub forward_first_round: bool,
    /// The pipelined chunks it was cut into (1: not pipelined).
    pub pipeline_chunks: usize,
    /// The rounds one chunk passes through (a pipeline's depth), where it is cut into
    /// chunks; 0: every round (what NCCL's latency model charges once per step).
    pub path_rounds: usize,
    /// The one protocol it runs under (`LL`, `LL128`, `Simple`), where it says so (an
    /// MSCCL program's `proto`); else whichever is fastest.
    pub protocol: Option<String>,
    /// Rounds it stands for beyond those it holds, moving no bytes of their own: an
    /// MSCCL loop's passes past those built (the built ones carry all the bytes, in
    /// larger pieces). Their start-ups and latencies are charged as the held rounds'
    /// average.
    pub unheld_rounds: usize,
}

/// Work a schedule puts on the busiest host, beside its link time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostWork {
    /// Elements the busiest rank copies locally (prologue, between rounds, epilogue).
    pub copied_elements_max: u64,
    /// Elements the busiest rank reduces (received with `Op::Reduce`, or by a local op).
    pub reduced_elements_max: u64,
    /// Transfers the busiest rank sends or receives.
    pub messages_max: u64,
}

impl CompactSchedule {
    pub fn rounds(&self) -> usize {
        self.phases.iter().map(|p| p.rounds.rounds()).sum()
    }

    /// Phases with their round counts, as in the expanded schedule.
    pub fn phase_list(&self) -> Vec<Phase> {
        self.phases.iter().map(|p| Phase { name: p.name.clone(), rounds: p.rounds.rounds() }).collect()
    }

    /// Round `k` of phase `phase` made by its source (whole, or `rank`'s part), its reads
    /// forwarded if it is the schedule's round 0 (`first`).
    fn made_step(&self, phase: usize, k: usize, rank: Option<Rank>, first: bool) -> Step {
        let mut s = self.phases[phase].rounds.step(k, rank);
        if first && self.forward_first_round {
            forward_reads(&self.prologue, &mut s.transfers);
        }
        s
    }

    /// Round `k` of phase `phase`, whole: borrowed where its source holds it (the model
    /// reads every round once; copying a listed one would only churn memory).
    pub fn whole_round(&self, phase: usize, k: usize, first: bool) -> Cow<'_, Step> {
        match self.phases[phase].rounds.held_step(k) {
            Some(step) if !(first && self.forward_first_round) => Cow::Borrowed(step),
            _ => Cow::Owned(self.made_step(phase, k, None, first)),
        }
    }

    /// Every round in order, each made when it is reached.
    pub fn iter_rounds(&self, rank: Option<Rank>) -> impl Iterator<Item = Round> + '_ {
        let mut first = true;
        self.phases.iter().enumerate().flat_map(move |(p, phase)| (0..phase.rounds.rounds()).map(move |k| (p, k))).map(
            move |(p, k)| {
                let s = self.made_step(p, k, rank, first);
                first = false;
                Round { phase: p, step: k + 1, transfers: s.transfers, in_network: s.in_network, local: s.local }
            },
        )
    }

    /// The round in words: "reduce-scatter step 3 of 15".
    pub fn round_label(&self, phase: usize, k: usize) -> String {
        let p = &self.phases[phase];
        format!("{} step {} of {}", p.name, k + 1, p.rounds.rounds())
    }

    /// The transfer-by-transfer schedule.
    pub fn expand(&self) -> Schedule {
        self.made(None)
    }

    /// `rank`'s part: the same rounds (so round numbers and labels agree on every rank),
    /// each holding only the transfers `rank` sends or receives, the in-network steps it
    /// joins and its own local steps. Made round by round from the sources, so a ring's
    /// part costs O(P) to make and to hold.
    pub fn for_rank(&self, rank: Rank) -> Schedule {
        self.made(Some(rank))
    }

    fn made(&self, rank: Option<Rank>) -> Schedule {
        let mine = |l: &&LocalOp| rank.is_none_or(|r| l.rank == r);
        Schedule {
            spec: self.spec.clone(),
            algorithm: self.algorithm.clone(),
            elem_bytes: self.elem_bytes,
            scratch_len: self.scratch_len.clone(),
            phases: self.phase_list(),
            prologue: self.prologue.iter().filter(mine).cloned().collect(),
            rounds: self.iter_rounds(rank).collect(),
            epilogue: self.epilogue.iter().filter(mine).cloned().collect(),
        }
    }

    /// An upper bound on the transfers made by making every round that does not repeat
    /// its predecessor (what costing the schedule makes), found without making any.
    pub fn made_transfers_bound(&self) -> u128 {
        self.phases
            .iter()
            .map(|p| {
                let r = &p.rounds;
                let made = (0..r.rounds()).filter(|&k| k == 0 || !r.repeats_previous(k)).count();
                made as u128 * r.transfers_per_round() as u128
            })
            .sum()
    }

    /// An upper bound on the transfers of every round made, repeated rounds included
    /// (what a simulation that reuses no round starts).
    pub fn all_transfers_bound(&self) -> u128 {
        self.phases.iter().map(|p| p.rounds.rounds() as u128 * p.rounds.transfers_per_round() as u128).sum()
    }

    /// An upper bound on the transfers of the largest round (what making it allocates).
    pub fn largest_round_transfers(&self) -> usize {
        self.phases.iter().map(|p| p.rounds.transfers_per_round()).max().unwrap_or(0)
    }

    /// Items held: prologue, epilogue and what every phase's source holds.
    pub fn held(&self) -> usize {
        self.prologue.len() + self.epilogue.len() + self.phases.iter().map(|p| p.rounds.held()).sum::<usize>()
    }

    /// The busiest rank's local copies, reductions and messages. A run of rounds that
    /// repeat their predecessor's traffic is counted from its first round, times its length.
    pub fn host_work(&self) -> HostWork {
        let p = self.spec.ranks;
        let (mut copied, mut reduced, mut messages) = (vec![0u64; p], vec![0u64; p], vec![0u64; p]);
        let local = |l: &LocalOp, copied: &mut [u64], reduced: &mut [u64]| {
            let per_rank = if l.op == Op::Copy { copied } else { reduced };
            if let Some(n) = per_rank.get_mut(l.rank) {
                *n += l.write.len;
            }
        };
        for l in self.prologue.iter().chain(&self.epilogue) {
            local(l, &mut copied, &mut reduced);
        }
        // The last made round's transfers (from, to, op, elements), and how many rounds
        // they stand for.
        let mut last: Vec<(Rank, Rank, Op, u64)> = Vec::new();
        let mut times = 0u64;
        let flush = |last: &[(Rank, Rank, Op, u64)], times: u64, reduced: &mut [u64], messages: &mut [u64]| {
            for &(from, to, op, len) in last {
                for r in [from, to] {
                    if let Some(n) = messages.get_mut(r) {
                        *n += times;
                    }
                }
                if op == Op::Reduce {
                    if let Some(n) = reduced.get_mut(to) {
                        *n += len * times;
                    }
                }
            }
        };
        for (ph, phase) in self.phases.iter().enumerate() {
            for k in 0..phase.rounds.rounds() {
                if k > 0 && phase.rounds.repeats_previous(k) && times > 0 {
                    times += 1;
                    continue;
                }
                flush(&last, times, &mut reduced, &mut messages);
                let round = self.whole_round(ph, k, false);
                for l in &round.local {
                    local(l, &mut copied, &mut reduced);
                }
                last.clear();
                last.extend(round.transfers.iter().map(|t| (t.from, t.to, t.op, t.write.len)));
                times = 1;
            }
        }
        flush(&last, times, &mut reduced, &mut messages);
        let max = |v: Vec<u64>| v.into_iter().max().unwrap_or(0);
        HostWork { copied_elements_max: max(copied), reduced_elements_max: max(reduced), messages_max: max(messages) }
    }
}

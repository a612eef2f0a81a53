//! Assembling a schedule: phases of listed rounds or of round sources, prologue and
//! epilogue, scratch; what every generator builds with.

use crate::collective::{CollectiveSpec, Rank};
use crate::compact::{CompactPhase, CompactSchedule, ListedRounds, RoundSource};
use crate::ir::{LocalOp, Schedule, Step};

/// Assembles a schedule phase by phase; steps that carry nothing are dropped so that
/// zero-length chunks (sizes smaller than the rank count) cost no rounds.
#[derive(Debug)]
pub struct ScheduleBuilder {
    schedule: CompactSchedule,
}

impl ScheduleBuilder {
    pub fn new(spec: CollectiveSpec, algorithm: impl Into<String>, elem_bytes: u64) -> Self {
        ScheduleBuilder {
            schedule: CompactSchedule {
                scratch_len: vec![0; spec.ranks],
                spec,
                algorithm: algorithm.into(),
                elem_bytes,
                phases: Vec::new(),
                prologue: Vec::new(),
                epilogue: Vec::new(),
                forward_first_round: false,
                pipeline_chunks: 1,
                path_rounds: 0,
                protocol: None,
                unheld_rounds: 0,
            },
        }
    }

    pub fn scratch(&mut self, rank: Rank, len: u64) -> &mut Self {
        self.schedule.scratch_len[rank] = self.schedule.scratch_len[rank].max(len);
        self
    }

    pub fn prologue(&mut self, op: LocalOp) -> &mut Self {
        if op.read.len > 0 {
            self.schedule.prologue.push(op);
        }
        self
    }

    pub fn epilogue(&mut self, op: LocalOp) -> &mut Self {
        if op.read.len > 0 {
            self.schedule.epilogue.push(op);
        }
        self
    }

    /// Append a phase of listed rounds. Zero-length transfers and then empty steps are dropped.
    pub fn phase(&mut self, name: impl Into<String>, steps: Vec<Step>) -> &mut Self {
        self.rounds(name, ListedRounds::of(steps))
    }

    /// Append a phase whose rounds a source makes (it carries no empty rounds or
    /// zero-length transfers); a source without rounds adds no phase.
    pub fn rounds(&mut self, name: impl Into<String>, source: impl RoundSource + 'static) -> &mut Self {
        if source.rounds() > 0 {
            self.schedule.phases.push(CompactPhase { name: name.into(), rounds: Box::new(source) });
        }
        self
    }

    pub fn build_compact(self) -> CompactSchedule {
        self.schedule
    }

    /// The schedule transfer by transfer.
    pub fn build(self) -> Schedule {
        self.schedule.expand()
    }
}

/// Run several step lists side by side: step k of the result is step k of each.
pub fn merge_parallel(lists: Vec<Vec<Step>>) -> Vec<Step> {
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    let mut merged = vec![Step::default(); longest];
    for list in lists {
        for (k, step) in list.into_iter().enumerate() {
            merged[k].transfers.extend(step.transfers);
            merged[k].in_network.extend(step.in_network);
            merged[k].local.extend(step.local);
        }
    }
    merged
}

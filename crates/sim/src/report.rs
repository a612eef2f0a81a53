//! What a run reports: per job its finish and the time of each phase and round; per
//! resource the bytes it carried and its mean utilisation.

use serde::Serialize;

use crate::job::{Dependencies, Job};
use crate::job_spec::JobSpec;
use crate::paths::Paths;
use crate::trace::Trace;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundReport {
    pub index: usize,
    pub label: String,
    pub start_secs: f64,
    pub end_secs: f64,
    pub secs: f64,
    /// Not simulated flow by flow: a repeat of the round before, which ran in step.
    pub reused: bool,
    /// The resource that set the rate of the round's last transfer to end.
    pub ended_by: Option<String>,
}

/// A resource the finish hangs on: the rounds whose last transfer it held back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriticalResource {
    pub resource: String,
    pub kind: String,
    pub rounds: usize,
    /// Time of those rounds.
    pub secs: f64,
}

/// One transfer of the critical path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriticalStep {
    pub round: String,
    /// Ranks of a transfer (absent for an in-network step).
    pub from: Option<usize>,
    pub to: Option<usize>,
    pub start_secs: f64,
    pub end_secs: f64,
    /// The resource that set its rate last.
    pub resource: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseReport {
    pub name: String,
    pub rounds: usize,
    pub start_secs: f64,
    pub end_secs: f64,
    /// end − start (phases overlap when ranks are in different phases at once).
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobReport {
    pub name: String,
    pub algorithm: String,
    pub collective: String,
    pub bytes: u64,
    pub ranks: usize,
    /// When it started: its start time, after the jobs it waits for where it waits.
    pub start_secs: f64,
    pub finish_secs: f64,
    /// finish − start
    pub secs: f64,
    pub rounds: usize,
    /// Rounds not simulated flow by flow (repeats of a round that ran in step).
    pub reused_rounds: usize,
    /// Most rounds held at once (between the slowest and the fastest rank).
    pub rounds_held_peak: usize,
    pub phases: Vec<PhaseReport>,
    /// Resources that held back the last transfer of rounds, by the time of those rounds.
    pub critical: Vec<CriticalResource>,
    /// The chain of transfers the finish hangs on, first to last: each waited last for
    /// the one before (kept for runs of up to `MAX_HISTORY` transfers; absent past it).
    pub critical_path: Option<Vec<CriticalStep>>,
    pub per_round: Vec<RoundReport>,
}

impl JobReport {
    pub(crate) fn new(spec: &JobSpec<'_>, state: &Job<'_>, ended_by: &[Option<(String, String)>]) -> Self {
        let s = spec.schedule;
        let start = state.started_at.secs();
        let finish = state.finished.map_or(f64::NAN, |p| p.secs());
        let per_round: Vec<RoundReport> = state
            .spans
            .iter()
            .enumerate()
            .map(|(index, span)| {
                let (a, b, reused) =
                    span.map_or((f64::NAN, f64::NAN, false), |s| (s.start.secs(), s.end.secs(), s.reused));
                RoundReport {
                    index,
                    label: state.round_label(index),
                    start_secs: a,
                    end_secs: b,
                    secs: b - a,
                    reused,
                    ended_by: ended_by.get(index).cloned().flatten().map(|(n, _)| n),
                }
            })
            .collect();
        let mut by_resource: std::collections::BTreeMap<&str, CriticalResource> = std::collections::BTreeMap::new();
        for (r, e) in per_round.iter().zip(ended_by) {
            let Some((resource, kind)) = e else { continue };
            let c = by_resource.entry(resource.as_str()).or_insert_with(|| CriticalResource {
                resource: resource.clone(),
                kind: kind.clone(),
                rounds: 0,
                secs: 0.0,
            });
            c.rounds += 1;
            c.secs += r.secs;
        }
        let mut critical: Vec<CriticalResource> = by_resource.into_values().collect();
        critical.sort_by(|a, b| b.secs.total_cmp(&a.secs).then_with(|| a.resource.cmp(&b.resource)));
        critical.truncate(16);
        let mut phases = Vec::new();
        let mut first = 0;
        for p in &s.phases {
            let n = p.rounds.rounds();
            let rounds = &per_round[first..first + n];
            let start_secs = rounds.iter().map(|r| r.start_secs).fold(f64::INFINITY, f64::min);
            let end_secs = rounds.iter().map(|r| r.end_secs).fold(f64::NEG_INFINITY, f64::max);
            phases.push(PhaseReport {
                name: p.name.clone(),
                rounds: n,
                start_secs,
                end_secs,
                secs: end_secs - start_secs,
            });
            first += n;
        }
        JobReport {
            name: spec.name.clone(),
            algorithm: s.algorithm.clone(),
            collective: s.spec.collective.as_str().to_string(),
            bytes: s.spec.count.saturating_mul(s.elem_bytes),
            ranks: s.spec.ranks,
            start_secs: start,
            finish_secs: finish,
            secs: finish - start,
            rounds: state.rounds(),
            reused_rounds: state.reused_rounds,
            rounds_held_peak: state.window_peak,
            phases,
            critical,
            critical_path: None,
            per_round,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceUse {
    pub resource: String,
    pub kind: String,
    pub bytes: f64,
    pub bytes_per_sec: f64,
    /// bytes / (bytes_per_sec × makespan)
    pub utilisation: f64,
}

/// One resource's utilisation over time: (seconds, fraction of its bandwidth) from
/// each point until the next.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceSeries {
    pub resource: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Serialize)]
pub struct SimReport {
    pub topology: String,
    pub dependencies: Dependencies,
    pub paths: Paths,
    /// When the last job finished.
    pub makespan_secs: f64,
    pub jobs: Vec<JobReport>,
    /// Events handled, flows started, rate recomputations.
    pub events: u64,
    pub flows: u64,
    pub rate_updates: u64,
    /// Flow rates computed over all rate updates (only the flows connected to a change
    /// are recomputed).
    pub rated_flows: u64,
    /// Resources that carried bytes, highest utilisation first.
    pub resources: Vec<ResourceUse>,
    /// Watched resources' utilisation (0–1) from each time on (`SimOptions::watch`);
    /// flat across repeated rounds that were skipped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub utilisation_over_time: Vec<ResourceSeries>,
    /// The largest reorder buffer one receiver needed for one flow split over paths of
    /// different latency (seed 001 §7.5.3): rate × (slowest − mean path latency).
    pub reorder_peak_bytes: f64,
    /// Switch ports that queued, largest peak first (with `SimOptions::queues`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<crate::queues::QueueReport>,
    pub trace_events: usize,
    pub trace_dropped: u64,
    #[serde(skip)]
    pub trace: Trace,
}

//! A Chrome / Perfetto trace of a run (the JSON "trace event" format): one process per
//! job, one thread (track) per rank showing the transfers it sends, and a track of the
//! job's rounds. Held up to a limit of events; what is past the limit is counted as
//! dropped and said in the report, never silently cut.

use serde::Serialize;

use crate::time::Picos;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceEvent {
    pub job: u32,
    /// Rank whose track shows it (the sender; an in-network step's first rank), or
    /// u32::MAX for the job's round track.
    pub track: u32,
    pub round: usize,
    pub start: Picos,
    pub end: Picos,
    pub bytes: f64,
}

impl TraceEvent {
    pub fn flow(job: u32, track: u32, round: usize, start: Picos, end: Picos, bytes: f64) -> Self {
        TraceEvent { job, track, round, start, end, bytes }
    }
}

#[derive(Debug, Default)]
pub struct Trace {
    limit: usize,
    events: Vec<TraceEvent>,
    dropped: u64,
}

/// The track number of a job's rounds (after every rank's).
const ROUND_TRACK: u32 = u32::MAX;

#[derive(Serialize)]
struct ChromeEvent<'a> {
    name: &'a str,
    ph: &'static str,
    pid: u32,
    tid: u64,
    ts: f64,
    dur: f64,
    args: serde_json::Value,
}

impl Trace {
    pub fn new(limit: usize) -> Self {
        Trace { limit, events: Vec::new(), dropped: 0 }
    }

    pub fn wants(&self) -> bool {
        self.limit > 0
    }

    pub fn push(&mut self, event: TraceEvent) {
        if self.events.len() < self.limit {
            self.events.push(event);
        } else {
            self.dropped += 1;
        }
    }

    /// A round of a job, on the job's round track.
    pub fn round(&mut self, job: u32, round: usize, start: Picos, end: Picos) {
        if self.wants() {
            self.push(TraceEvent { job, track: ROUND_TRACK, round, start, end, bytes: 0.0 });
        }
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The trace as Chrome trace-event JSON. `job_names[j]` names process j and
    /// `round_label(j, r)` names round r of job j.
    pub fn to_json(&self, job_names: &[String], round_label: &dyn Fn(u32, usize) -> String) -> String {
        let micros = |p: Picos| p.0 as f64 / 1e6;
        let mut out: Vec<serde_json::Value> = Vec::with_capacity(self.events.len() + job_names.len());
        for (j, name) in job_names.iter().enumerate() {
            out.push(serde_json::json!({"name": "process_name", "ph": "M", "pid": j, "args": {"name": name}}));
            out.push(serde_json::json!({"name": "thread_name", "ph": "M", "pid": j, "tid": u64::from(ROUND_TRACK),
                "args": {"name": "rounds"}}));
        }
        for e in &self.events {
            let label = round_label(e.job, e.round);
            let (name, args) = if e.track == ROUND_TRACK {
                (label.as_str(), serde_json::json!({"round": e.round}))
            } else {
                ("transfer", serde_json::json!({"round": label, "bytes": e.bytes}))
            };
            let ev = ChromeEvent {
                name,
                ph: "X",
                pid: e.job,
                tid: u64::from(e.track),
                ts: micros(e.start),
                dur: micros(e.end.saturating_sub(e.start)),
                args,
            };
            out.push(serde_json::to_value(ev).unwrap_or(serde_json::Value::Null));
        }
        let doc = serde_json::json!({"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {"dropped_events": self.dropped}});
        doc.to_string()
    }
}

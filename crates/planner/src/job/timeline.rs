//! One step of a layout as a timeline: what the busiest stage does one after another
//! (compute, the communication it waits for inside the pipeline's slots, the bubble, the
//! data-parallel communication left exposed, the optimizer) and, on a second track, the
//! communication hidden behind its compute, ending where the compute it hides behind
//! ends. The SVG chart and the Perfetto trace of `plan-training` draw these spans.

use serde::Serialize;

use super::step::{CommPhase, Step};

/// What a span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpanKind {
    Compute,
    ExposedCommunication,
    PipelineBubble,
    Optimizer,
    HiddenCommunication,
}

impl SpanKind {
    pub const ALL: [SpanKind; 5] = [
        SpanKind::Compute,
        SpanKind::ExposedCommunication,
        SpanKind::PipelineBubble,
        SpanKind::Optimizer,
        SpanKind::HiddenCommunication,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SpanKind::Compute => "compute",
            SpanKind::ExposedCommunication => "exposed communication",
            SpanKind::PipelineBubble => "pipeline bubble",
            SpanKind::Optimizer => "optimizer",
            SpanKind::HiddenCommunication => "hidden communication",
        }
    }
}

/// One span of the step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Span {
    /// 0: the busiest stage's critical path; 1: communication hidden behind compute.
    pub track: usize,
    pub kind: SpanKind,
    pub name: String,
    pub start_secs: f64,
    pub end_secs: f64,
}

/// The tracks' names, by `Span::track`.
pub const TRACKS: [&str; 2] = ["busiest stage", "hidden behind compute"];

pub fn spans(st: &Step) -> Vec<Span> {
    let exposed =
        |phase: CommPhase| -> f64 { st.comms.iter().filter(|c| c.phase == phase).map(|c| c.exposed_secs).sum() };
    let (in_slot, dp) = (exposed(CommPhase::PerMicroBatch), exposed(CommPhase::DataParallel));
    let mut out = Vec::new();
    let mut t = 0.0;
    for (name, secs, kind) in [
        ("compute", st.compute_secs, SpanKind::Compute),
        ("communication waited for inside the slots", in_slot, SpanKind::ExposedCommunication),
        ("pipeline bubble", st.bubble_secs, SpanKind::PipelineBubble),
        ("data-parallel communication exposed", dp, SpanKind::ExposedCommunication),
        ("optimizer", st.optimizer_secs, SpanKind::Optimizer),
    ] {
        if secs > 0.0 {
            out.push(Span { track: 0, kind, name: name.into(), start_secs: t, end_secs: t + secs });
            t += secs;
        }
    }
    // Hidden communication ends where the compute it hides behind ends, one line after
    // another backwards from there.
    let mut end = st.compute_secs + in_slot + st.bubble_secs;
    for c in &st.comms {
        let hidden = (c.secs * c.calls - c.exposed_secs).max(0.0);
        if hidden > 0.0 {
            out.push(Span {
                track: 1,
                kind: SpanKind::HiddenCommunication,
                name: c.name.clone(),
                start_secs: end - hidden,
                end_secs: end,
            });
            end -= hidden;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{evaluate, JobInput};
    use super::*;

    /// The critical path's spans follow each other without gaps and end at the step's
    /// end; hidden spans lie inside the step.
    #[test]
    fn the_critical_path_is_the_step() {
        let topology = railyard_topology::load("dgx-h100:nodes=4").unwrap();
        let input: JobInput = toml::from_str(
            "model = \"llama3-8b\"\ntopo = \"dgx-h100:nodes=4\"\nglobal_batch = 64\nlayout = { tp = 2, pp = 2, dp = 8 }\n",
        )
        .unwrap();
        let report = evaluate(&input, &topology).unwrap();
        let step = report.ranked[0].step.as_ref().unwrap();
        let spans = spans(step);
        let path: Vec<&Span> = spans.iter().filter(|s| s.track == 0).collect();
        assert_eq!(path[0].start_secs, 0.0);
        for w in path.windows(2) {
            assert_eq!(w[0].end_secs, w[1].start_secs);
        }
        let end = path.last().unwrap().end_secs;
        assert!((end - step.step_secs).abs() <= 1e-9 * step.step_secs, "{end} vs {}", step.step_secs);
        assert!(spans.iter().filter(|s| s.track == 1).all(|s| s.start_secs >= -1e-12 && s.end_secs <= end));
        assert!(spans.iter().any(|s| s.kind == SpanKind::HiddenCommunication));
    }
}

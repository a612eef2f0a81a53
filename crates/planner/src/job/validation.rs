//! Training jobs whose throughput someone published, planned with their published layout
//! and compared (`railyard validate-training`, docs/validation.md): the error of each
//! case, and the median and worst.

use serde::{Deserialize, Serialize};

use railyard_units::stats::median_of_sorted;
use railyard_units::Table;

use super::{evaluate_with, JobInput};
use crate::error::PlannerError;

/// The most cases one file may hold.
pub const MAX_CASES: usize = 1000;

/// What a source reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Model FLOPs (no recomputation) per second per GPU, in TFLOP/s: what MFU counts.
    ModelTflopsPerGpu,
    /// Executed FLOPs (recomputation included) per GPU, in TFLOP/s: Megatron-LM's
    /// Eq. 3 counting.
    HardwareTflopsPerGpu,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub source: String,
    pub metric: Metric,
    pub published: f64,
    pub job: JobInput,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CasesFile {
    case: Vec<Case>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    pub name: String,
    pub layout: String,
    pub gpus: u64,
    pub metric: Metric,
    pub published: f64,
    pub predicted: f64,
    /// predicted / published − 1.
    pub error: f64,
    /// railyard's memory per GPU for the layout, as a share of the GPU's.
    pub memory_share: f64,
    /// The phase the prediction loses most time to, besides compute.
    pub largest_overhead: String,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub cases: usize,
    pub median_abs_error: f64,
    pub worst_abs_error: f64,
    pub worst_case: String,
}

pub fn parse_cases(text: &str) -> Result<Vec<Case>, PlannerError> {
    let file: CasesFile = toml::from_str(text).map_err(|e| PlannerError::Scenario(e.to_string()))?;
    if file.case.is_empty() || file.case.len() > MAX_CASES {
        return Err(PlannerError::Scenario(format!("give 1..={MAX_CASES} cases (got {})", file.case.len())));
    }
    Ok(file.case)
}

/// Plan `case` on `topology` (its `job.topo`) and compare.
pub fn evaluate_case(case: &Case, topology: &railyard_topology::Topology) -> Result<CaseResult, PlannerError> {
    // The run ran: its layout is timed even where railyard's memory model says it would
    // not fit (the table shows that model's figure beside).
    let job = JobInput { show: super::MAX_SHOWN, ..case.job.clone() };
    let report = evaluate_with(&job, topology, false, crate::Engine::Model)?;
    // Of the unstated knobs' choices, the fastest: the runs were tuned and ran, so
    // railyard's memory model (shown beside) does not choose for them.
    let Some(best) = report.ranked.first() else {
        return Err(PlannerError::bad("job.layout", "the published layout does not fit in memory here"));
    };
    let Some(step) = &best.step else {
        return Err(PlannerError::bad("job.layout", "no step was timed"));
    };
    let predicted = match case.metric {
        Metric::ModelTflopsPerGpu => step.model_tflops_per_gpu,
        Metric::HardwareTflopsPerGpu => step.hardware_tflops_per_gpu,
    };
    let mut overheads = vec![("pipeline bubble".to_string(), step.bubble_secs)];
    overheads.extend(step.comms.iter().map(|c| (c.name.clone(), c.exposed_secs)));
    let (what, secs) = overheads.into_iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap_or(("none".into(), 0.0));
    let largest_overhead = if secs > 0.0 {
        format!("{what} ({:.1}% of the step)", secs / step.step_secs * 100.0)
    } else {
        "none".to_string()
    };
    Ok(CaseResult {
        name: case.name.clone(),
        layout: best.layout.to_string(),
        gpus: report.gpus,
        metric: case.metric,
        published: case.published,
        predicted,
        error: predicted / case.published - 1.0,
        memory_share: best.memory.total_bytes / best.memory.capacity_bytes,
        largest_overhead,
        source: case.source.clone(),
    })
}

pub fn summarize(results: &[CaseResult]) -> Summary {
    let mut errors: Vec<f64> = results.iter().map(|r| r.error.abs()).collect();
    errors.sort_by(f64::total_cmp);
    let median = median_of_sorted(&errors);
    let worst = results.iter().max_by(|a, b| a.error.abs().total_cmp(&b.error.abs()));
    Summary {
        cases: results.len(),
        median_abs_error: median,
        worst_abs_error: worst.map_or(0.0, |w| w.error.abs()),
        worst_case: worst.map_or(String::new(), |w| w.name.clone()),
    }
}

/// The table and the summary in Markdown.
pub fn markdown(results: &[CaseResult], summary: &Summary) -> String {
    let mut t = Table::new([
        "case",
        "layout",
        "reported",
        "published",
        "railyard",
        "error",
        "largest overhead",
        "memory (railyard)",
    ]);
    for r in results {
        t.row([
            r.name.clone(),
            r.layout.clone(),
            match r.metric {
                Metric::ModelTflopsPerGpu => "model TFLOP/s per GPU".to_string(),
                Metric::HardwareTflopsPerGpu => "executed TFLOP/s per GPU".to_string(),
            },
            format!("{:.1}", r.published),
            format!("{:.1}", r.predicted),
            format!("{:+.1}%", r.error * 100.0),
            r.largest_overhead.clone(),
            format!("{:.0}%", r.memory_share * 100.0),
        ]);
    }
    let mut s = t.render();
    s += &format!(
        "\n{} cases: median |error| {:.1}%, worst {:.1}% ({}).\n",
        summary.cases,
        summary.median_abs_error * 100.0,
        summary.worst_abs_error * 100.0,
        summary.worst_case
    );
    let mut sources: Vec<&str> = results.iter().map(|r| r.source.as_str()).collect();
    sources.dedup();
    s += "\nSources:\n\n";
    for src in sources {
        s += &format!("- {src}\n");
    }
    s
}

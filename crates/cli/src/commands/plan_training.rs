//! `railyard plan-training`: a training step from a model and a cluster — memory,
//! step time with overlap, readiness, latency vs bandwidth, the super-node study, MoE
//! and bucketing (seed 001 §7.1, §7.6; seed 000 §8.6–§8.7). With no scenario it runs
//! a stated example job; `--examples` runs the chapter's worked examples.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use railyard_planner::{Engine, Report, Scenario, BUNDLED_SCENARIO, EXAMPLE_JOB, MAX_SCENARIO_BYTES};

use crate::args::Format;
use railyard_units::chart::{stack, Bar, Gantt, LineChart, Series};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EngineArg {
    /// The per-round resource model
    Model,
    /// The flow-level simulator
    Sim,
}

const SCENARIO_HELP: &str = r#"A scenario is a TOML file with any of these sections (each optional, at least one):
  [job]        your training job: model (a preset: gpt3-175b, llama3-8b, llama3-70b,
               llama3-405b, mixtral-8x7b, deepseek-v3; or a [job.model] table), topo (a
               machine preset such as dgx-h100:nodes=128), global_batch, precision,
               zero, recompute ("selective" by default, "full" or "none"), attention
               ("fused", or "unfused": the default when recompute = "none"), layout = "search" or
               { tp, cp, pp, dp, ep, vpp, micro_batch }; tp_overlap, ep_overlap (share
               of that communication hidden), compute_efficiency, target_tokens_per_sec
               (with --solve: the fewest nodes and slowest NIC that reach it) -> memory
               per GPU, step time, layouts ranked
  [memory]     training state / inference weights -> cards and servers (seed 001 §7.1.1)
  [scaling]    compute shrinking with more cards against a fixed cut (example 7.1)
  [step]       compute, communication, update: [[step.timeline]] entries, each a ready
               time and a communication (example 7.6, figures 7-54..7-59)
  [readiness]  per-rank ready times before an exchange (§7.6.1)
  [latency]    a collective's time over sizes, with bandwidth and start-up what-ifs (§7.6.3)
  [tail]       mean and p99 of a set of communications with late and recovery events
  [migration]  state-migration transfer times
  [supernode]  N cards in super-nodes of S: hierarchical vs flat-ring gradient, TP, step,
               tokens/s, TP candidates, checkpoint/recovery overhead (§7.6.4)
  [moe]        expert capacity, dropped tokens, flat vs hierarchical all-to-all (seed 000 §8.7)
  [bucketing]  DDP gradient buckets against the backward pass, overlap ratio (seed 000 §8.6.7)

A communication is one of:
  { secs = "0.4ms" }                                     given outright
  { cut_bytes = "360MiB", cut_bytes_per_sec = "50GB/s" }  the cut bound V/B (§7.1.2)
  { topo = "hgx-h100x2", algo = "ring", size_bytes = "192MiB", collective = "allreduce",
    elem_bytes = 4, in_flight = { slots = 128, request_bytes = "256B", slot_secs = "2us" } }
                                                         a schedule, timed by --engine
`topo` is a preset (`railyard topo list`) or a topology file, found next to the scenario
when relative; `collective` defaults to allreduce and `elem_bytes` to 4. A timeline's
communication is laid over [step]'s `comm`, field by field, within one kind.
Sizes take B, KiB, MiB, GB; bandwidths GB/s or Gbit/s; times ns, us, ms, s, min, h.
With no scenario, an example job runs (`--print-scenario` prints it as a starting
point); `--examples` runs the chapter's worked examples (`--examples --print-scenario`
prints them)."#;

#[derive(Debug, Args)]
#[command(after_long_help = SCENARIO_HELP)]
pub struct PlanTrainingArgs {
    /// Scenario file (TOML); default: the bundled example job
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Run the chapter's worked examples (seed 001 §7.1, §7.6) instead of the example job
    #[arg(long, conflicts_with = "scenario")]
    pub examples: bool,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
    /// How schedules are timed: the per-round model or the flow-level simulator
    #[arg(long, value_enum, default_value = "model")]
    pub engine: EngineArg,
    /// Also answer the crossover and optimum questions, and say which input each step
    /// answer is most sensitive to (the change for a 10% better input). For a [job]: its
    /// best layout at half, twice and four times the nodes and at half and twice the NIC
    /// rate, and with target_tokens_per_sec the fewest nodes and slowest NIC reaching it
    #[arg(long)]
    pub solve: bool,
    /// Write the charts (step timelines, the scaling curve, tokens/s over super-node size) as SVG
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Write the [job]'s step (the fastest layout's) as a Perfetto / Chrome trace (JSON):
    /// the busiest stage's phases on one track, the communication hidden behind compute
    /// on another; open it at ui.perfetto.dev
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Print the bundled scenario (the example job, or with --examples the chapter's) and exit
    #[arg(long, conflicts_with_all = ["scenario", "format", "engine", "solve", "svg", "trace"])]
    pub print_scenario: bool,
}

fn read_scenario(path: &PathBuf) -> Result<String> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_SCENARIO_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() > MAX_SCENARIO_BYTES {
        anyhow::bail!("{}: larger than the {MAX_SCENARIO_BYTES} bytes a scenario may be", path.display());
    }
    String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{}: not UTF-8 text", path.display()))
}

pub fn run(args: &PlanTrainingArgs) -> Result<String> {
    let bundled = if args.examples { BUNDLED_SCENARIO } else { EXAMPLE_JOB };
    if args.print_scenario {
        return Ok(bundled.to_string());
    }
    let (text, name) = match &args.scenario {
        Some(path) => (read_scenario(path)?, path.display().to_string()),
        None if args.examples => (bundled.to_string(), "the chapter's examples".to_string()),
        None => (bundled.to_string(), "the example job".to_string()),
    };
    let mut scenario = Scenario::parse(&text).with_context(|| format!("in {name}"))?;
    if let Some(dir) = args.scenario.as_ref().and_then(|p| p.parent()) {
        scenario.resolve_paths(dir);
    }
    let engine = match args.engine {
        EngineArg::Model => Engine::Model,
        EngineArg::Sim => Engine::Sim,
    };
    let report = scenario.run(engine, args.solve).with_context(|| format!("in {name}"))?;
    if let Some(path) = &args.svg {
        let charts = charts(&report);
        if charts.is_empty() {
            anyhow::bail!("--svg: this scenario has no [job], [step], [scaling] or [supernode] section to draw");
        }
        std::fs::write(path, stack(&charts)).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.trace {
        let trace = report.job.as_ref().and_then(job_trace).ok_or_else(|| {
            anyhow::anyhow!(
                "--trace: this scenario has no [job] whose step to trace (the chapter's sections draw with --svg)"
            )
        })?;
        std::fs::write(path, trace).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(match args.format {
        Format::Md => report.markdown(),
        Format::Json => serde_json::to_string_pretty(&report)? + "\n",
    })
}

/// The fastest layout's step on one GPU of its busiest stage, phase after phase: compute
/// (with the communication inside each micro-batch's slot that it waits for), the
/// pipeline bubble, the data-parallel communication left exposed, the optimizer; and
/// below, the communication hidden behind compute.
fn job_chart(job: &railyard_planner::job::JobReport) -> Option<String> {
    use railyard_planner::job::timeline::{spans, SpanKind, TRACKS};
    let best = job.ranked.first()?;
    let st = best.step.as_ref()?;
    let ms = 1e3;
    let bars = spans(st)
        .into_iter()
        .map(|s| Bar {
            row: s.track,
            start: s.start_secs * ms,
            end: s.end_secs * ms,
            class: SpanKind::ALL.iter().position(|k| *k == s.kind).unwrap_or(0),
            title: format!("{}: {:.2} ms", s.name, (s.end_secs - s.start_secs) * ms),
        })
        .collect();
    Some(
        Gantt {
            title: format!("One training step of {} on {} ({})", job.model.name, job.topo, best.layout),
            x_label: "time since the step began (ms)".into(),
            rows: vec![format!("{}: {:.0} ms", TRACKS[0], st.step_secs * ms), TRACKS[1].into()],
            bars,
            classes: SpanKind::ALL.iter().map(|k| k.as_str().to_string()).collect(),
        }
        .svg(),
    )
}

/// The same spans as a Chrome / Perfetto trace: one process (the job), a thread per
/// track, a complete ("X") event per span, times in microseconds.
fn job_trace(job: &railyard_planner::job::JobReport) -> Option<String> {
    use railyard_planner::job::timeline::{spans, TRACKS};
    let best = job.ranked.first()?;
    let st = best.step.as_ref()?;
    let mut events = vec![serde_json::json!({
        "name": "process_name", "ph": "M", "pid": 1, "tid": 0,
        "args": { "name": format!("{} on {} ({}), one step", job.model.name, job.topo, best.layout) }
    })];
    for (tid, name) in TRACKS.iter().enumerate() {
        events.push(
            serde_json::json!({ "name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": { "name": name } }),
        );
    }
    for s in spans(st) {
        events.push(serde_json::json!({
            "name": s.name, "cat": s.kind.as_str(), "ph": "X", "pid": 1, "tid": s.track,
            "ts": s.start_secs * 1e6, "dur": (s.end_secs - s.start_secs) * 1e6,
        }));
    }
    serde_json::to_string_pretty(&serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" })).ok()
}

fn charts(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(chart) = report.job.as_ref().and_then(job_chart) {
        out.push(chart);
    }
    if let Some(step) = &report.step {
        let mut bars = Vec::new();
        // Two lanes per timeline: compute and update, then the communication beside them.
        for (i, t) in step.timelines.iter().enumerate() {
            let ms = 1e3;
            let (lane, comm_lane) = (2 * i, 2 * i + 1);
            bars.push(Bar {
                row: lane,
                start: 0.0,
                end: t.compute_secs * ms,
                class: 0,
                title: format!("compute {} ms", t.compute_secs * ms),
            });
            bars.push(Bar {
                row: lane,
                start: t.update_start_secs * ms,
                end: t.step_secs * ms,
                class: 2,
                title: format!("update; step {:.2} ms", t.step_secs * ms),
            });
            bars.push(Bar {
                row: comm_lane,
                start: t.ready_secs * ms,
                end: t.comm_end_secs * ms,
                class: 1,
                title: format!("communication {:.3} ms", t.comm.secs * ms),
            });
            // The ready mark: a sliver of 0.4% of the step at the ready time.
            let w = t.step_secs * ms * 0.004;
            bars.push(Bar {
                row: comm_lane,
                start: t.ready_secs * ms - w,
                end: t.ready_secs * ms + w,
                class: 3,
                title: "data ready".into(),
            });
        }
        out.push(
            Gantt {
                title: "Training step timelines (seed 001 figures 7-54 to 7-59)".into(),
                x_label: "time since the step began (ms)".into(),
                rows: step
                    .timelines
                    .iter()
                    .flat_map(|t| [format!("{}: {:.1} ms", t.name, t.step_secs * 1e3), String::new()])
                    .collect(),
                bars,
                classes: vec!["compute".into(), "communication".into(), "update".into(), "data ready".into()],
            }
            .svg(),
        );
    }
    if let Some(s) = &report.scaling {
        let top = s.rows.iter().map(|r| r.multiple).fold(s.crossover_multiple * 2.0, f64::max);
        let xs: Vec<f64> = (0..=60).map(|i| 1.0 + (top - 1.0) * i as f64 / 60.0).collect();
        let comp = s.compute_secs;
        let curve = |f: fn(&railyard_planner::scaling::ScalingRow) -> f64| {
            xs.iter().map(|&x| (x, f(&railyard_planner::scaling::row(comp, s.comm.secs, x)) * 1e3)).collect()
        };
        out.push(
            LineChart {
                title: "More cards against a fixed cut (seed 001 figure 7-2)".into(),
                x_label: "card multiple x".into(),
                y_label: "step (ms)".into(),
                log_x: false,
                series: vec![
                    Series { name: "sequential".into(), points: curve(|r| r.sequential_secs) },
                    Series { name: "overlapped".into(), points: curve(|r| r.overlapped_secs) },
                ],
                marks: vec![railyard_units::chart::Mark {
                    x: s.crossover_multiple,
                    y: s.comm.secs * 1e3,
                    label: format!("x = {:.2}", s.crossover_multiple),
                }],
            }
            .svg(),
        );
    }
    if let Some(sn) = &report.supernode {
        out.push(
            LineChart {
                title: "Tokens/s over super-node size (seed 001 figure 7-62)".into(),
                x_label: "GPUs per super-node S".into(),
                y_label: "tokens/s (10^4)".into(),
                log_x: false,
                series: sn
                    .networks
                    .iter()
                    .map(|n| Series {
                        name: n.name.clone(),
                        points: n.rows.iter().map(|p| (p.supernode_gpus as f64, p.tokens_per_sec / 1e4)).collect(),
                    })
                    .collect(),
                marks: Vec::new(),
            }
            .svg(),
        );
    }
    out
}

//! `railyard sim`: run collectives through the flow-level simulator and put the result
//! beside the per-round model's.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use railyard_model::{cost, resolve, CollectiveRequest};
use railyard_schedule::{Collective, CompactSchedule};
use railyard_sim::fluid::{simulate_fluid, FlowControl, FluidOptions};
use railyard_sim::{simulate, simulate_with_progress, Dependencies, JobSpec, Paths, SimOptions, SimReport};
use railyard_topology::failure::Failure;
use railyard_topology::{Placement, Topology};
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs};
use serde::Serialize;

use crate::args::{model_error, parse_size, Format, RequestArgs};
use crate::progress::ProgressLine;
use railyard_units::chart::{Bar, Gantt, LineChart, Series};
use railyard_units::Table;

/// Trace events kept at most (each transfer and each round is one).
const MAX_TRACE_EVENTS: usize = 2_000_000;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard sim                                    # plan's default all-reduce, every algorithm\n  \
    railyard sim --algo hierarchical --trace out.json   # open out.json in https://ui.perfetto.dev\n  \
    railyard sim --topo rail:servers=128 --size 1GiB --algo ring,hierarchical\n  \
    railyard sim --topo hgx-h100x2 --algo ring --ecmp 7\n\n\
How transfers start: by default a rank starts round k's transfers once it and the ranks it\n\
exchanges with have finished their part of round k-1 (rank order; rounds overlap where ranks\n\
are ready at different times; it is not always faster: early starters can take bandwidth\n\
from the transfers the finish waits for). --barriers waits for every rank, as the per-round\n\
model does; with routes split over their paths (the default) the simulator then equals the\n\
model. Both rules, and the model, are shown unless --no-compare.\n\n\
Links are shared max-min fairly among the flows crossing them; a route with several\n\
equal-cost paths splits its bytes over them (the model's rule, per-packet spraying) unless\n\
--ecmp SEED puts each connection on one hashed path.\n\n\
Limits: 32 Mi transfers started one by one (a run of repeated rounds is simulated once when\n\
its state repeats exactly; --every-round simulates each, which can take minutes); 4 Mi\n\
transfers in one round; 16 Mi items held between the slowest and the fastest rank; 2 Mi\n\
trace events (the rest are counted as dropped).")]
pub struct SimArgs {
    #[command(flatten)]
    pub request: RequestArgs,
    /// Start every round when all ranks have finished the one before (the model's rule)
    #[arg(long)]
    pub barriers: bool,
    /// One ECMP path per connection, hashed with this seed (default: split over all paths)
    #[arg(long, value_name = "SEED", conflicts_with = "spray")]
    pub ecmp: Option<u64>,
    /// Split every route's bytes over its equal-cost paths (the default; per-packet spraying)
    #[arg(long)]
    pub spray: bool,
    /// Follow switch queues: senders push at their host-side rate, and what a switch port
    /// cannot forward yet waits in its buffer (seed 001 §7.5.1); prints each port's peak
    /// backlog and when it drained. Simulates every round flow by flow.
    #[arg(long)]
    pub queues: bool,
    /// Each switch port's egress buffer (e.g. 512KiB): with --queues, names the ports whose
    /// backlog would not fit; with --flow-control, what fills before drops or pauses
    #[arg(long, value_parser = parse_size)]
    pub buffer: Option<u64>,
    /// Run the time-stepped fluid model instead (seed 001 §7.5.2): senders push at their
    /// line rate, full buffers drop (`drop`) or pause their upstream links (`pause`, PFC,
    /// which spreads); with --ecn, senders cut their rate a feedback delay after a mark.
    /// For incasts and a few jobs (rounds behind barriers, one path per flow)
    #[arg(long, value_enum)]
    pub flow_control: Option<FlowControlArg>,
    /// Fluid model: PFC pause threshold, bytes held per ingress link (default: half the buffer)
    #[arg(long, value_parser = parse_size, requires = "flow_control")]
    pub xoff: Option<u64>,
    /// Fluid model: mark flows in a port queue longer than this (ECN); enables rate control
    #[arg(long, value_parser = parse_size, requires = "flow_control")]
    pub ecn: Option<u64>,
    /// Fluid model: from a mark to the sender's rate cut
    #[arg(long, default_value = "20us", value_parser = parse_time, requires = "ecn")]
    pub feedback: f64,
    /// Fluid model: the sender's rate after a cut, as a fraction of its rate
    #[arg(long, default_value_t = 0.5, requires = "ecn")]
    pub cut: f64,
    /// Fluid model: rate regained per microsecond without marks (e.g. 1GB/s)
    #[arg(long, default_value = "0B/s", value_parser = crate::args::parse_bandwidth_or_zero, requires = "ecn")]
    pub increase: f64,
    /// Fluid model: time step
    #[arg(long, default_value = "10ns", value_parser = parse_time, requires = "flow_control")]
    pub dt: f64,
    /// Fluid model: stop here if flows remain (they are reported unfinished)
    #[arg(long, default_value = "100ms", value_parser = parse_time, requires = "flow_control")]
    pub horizon: f64,
    /// Take out a failed device (every link to and from it, e.g. A.nic3) or cable
    /// (`A->B`, both directions); repeatable. Traffic is routed around it where another
    /// path exists; where none does, the job stalls and the error names the two ends
    #[arg(long, value_name = "DEVICE|A->B")]
    pub fail: Vec<Failure>,
    /// Only the simulation asked for: no model and no run under the other start rule
    #[arg(long)]
    pub no_compare: bool,
    /// Simulate every round flow by flow, even repeats of a round that ran in step
    #[arg(long)]
    pub every_round: bool,
    /// Write a Chrome/Perfetto trace (JSON) of the run (the first algorithm's) to this file
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Each rank's readiness, comma-separated times (e.g. 0,0,0,2ms): rank order lets a
    /// rank start when it is ready; barriers start when the last one is (seed 001 §7.6.1)
    #[arg(long, value_name = "TIMES", value_parser = parse_times)]
    pub ready: Option<Times>,
    /// Several jobs sharing the network, from a TOML file ([[job]] entries with collective,
    /// size, algorithm, placement, skip, ranks, start, period, count, ready; see
    /// crates/sim/src/jobs_file.rs); each job says its own collective, size, algorithm and
    /// placement, so those flags are refused beside it
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "collective", "size", "dtype", "algo", "root", "channels", "pipeline_chunks",
        "inter_stage", "placement", "ranks", "order", "groups", "ready",
    ])]
    pub jobs: Option<PathBuf>,
    /// Draw the run of the first algorithm (or the jobs) to this SVG file: a Gantt chart
    /// of its rounds (or jobs' phases) over time and the utilisation of the six busiest
    /// resources over time (a second run that records them)
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Print every round instead of the phases
    #[arg(long)]
    pub all_rounds: bool,
    /// Output format
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

#[derive(Debug, Serialize)]
struct Run {
    algorithm: String,
    /// Chunks the schedule was cut into (algorithms that pipeline).
    pipeline_chunks: Option<usize>,
    /// Parallel rings (1 for algorithms that have none).
    channels: usize,
    /// The per-round model's time (absent with --no-compare).
    model_secs: Option<f64>,
    /// The other start rule's time (absent with --no-compare).
    other_secs: Option<f64>,
    /// Why the model or the other rule has no time, where it could not run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    /// Wall-clock seconds the simulation took (not part of the simulated result).
    wall_secs: f64,
    report: SimReport,
}

#[derive(Debug, Serialize)]
struct Output {
    topology: String,
    routing: &'static str,
    collective: Collective,
    bytes: u64,
    ranks: usize,
    dependencies: Dependencies,
    other: Dependencies,
    runs: Vec<Run>,
    skipped: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FlowControlArg {
    /// A full buffer drops what does not fit; the sender sends it again
    Drop,
    /// A switch pauses an ingress link past --xoff bytes held from it (PFC)
    Pause,
}

fn parse_time(text: &str) -> Result<f64, String> {
    railyard_units::units::parse_secs(text).map_err(|e| e.to_string())
}

/// Per-rank times (a newtype, so clap takes the list as one value).
#[derive(Debug, Clone, PartialEq)]
pub struct Times(pub Vec<f64>);

fn parse_times(text: &str) -> Result<Times, String> {
    let list: Result<Vec<f64>, String> =
        text.split(',').map(|t| railyard_units::units::parse_secs(t.trim()).map_err(|e| e.to_string())).collect();
    let list = list?;
    if list.len() > railyard_schedule::limits::MAX_RANKS {
        return Err(format!(
            "{} times, more than the {} ranks allowed",
            list.len(),
            railyard_schedule::limits::MAX_RANKS
        ));
    }
    Ok(Times(list))
}

pub fn run(args: &SimArgs) -> Result<String> {
    let mut topology = args.request.topology.load()?;
    if !args.fail.is_empty() {
        let links = topology.failed_links(&args.fail)?;
        topology = topology.without_links(&links)?;
    }
    if args.buffer.is_some() && !args.queues && args.flow_control.is_none() {
        bail!("--buffer sizes the switch buffers of --queues or --flow-control; add one of them");
    }
    if args.flow_control.is_some() {
        return run_fluid(args, &topology);
    }
    if let Some(path) = &args.jobs {
        return run_jobs(args, &topology, path);
    }
    let request = args.request.request()?;
    let resolved = resolve(&topology, &request).map_err(model_error)?;
    for path in [&args.trace, &args.svg].into_iter().flatten() {
        // Found unwritable now, not after the simulation.
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let strict = request.strict;
    let placement = resolved.placement;
    // Said once, not once per algorithm.
    if let Some(ready) = args.ready.as_ref().map(|t| t.0.len()).filter(|&n| n != placement.len()) {
        bail!("--ready: {ready} times for {} ranks (give one per rank)", placement.len());
    }
    let dependencies = if args.barriers { Dependencies::Barriers } else { Dependencies::RankOrder };
    let other = if args.barriers { Dependencies::RankOrder } else { Dependencies::Barriers };
    let mut runs = Vec::new();
    let mut skipped: Vec<(String, String)> = resolved.skipped.into_iter().map(|s| (s.name, s.reason)).collect();
    for variant in resolved.variants {
        let (algorithm, schedule) = (variant.algorithm.to_string(), variant.schedule);
        let (pipeline_chunks, channels) = (variant.pipeline_chunks, variant.channels);
        let trace = (runs.is_empty() && args.trace.is_some()).then_some(MAX_TRACE_EVENTS);
        let sim_options = sim_options(args, dependencies, trace);
        let started = Instant::now();
        let ready = args.ready.as_ref().map_or_else(Vec::new, |t| t.0.clone());
        let report = match simulate_one(
            &topology,
            &schedule,
            &placement,
            &sim_options,
            &algorithm,
            &ready,
            args.format == Format::Md,
        ) {
            Ok(r) => r,
            Err(e) if !strict => {
                skipped.push((algorithm.to_string(), format!("{e:#}")));
                continue;
            }
            Err(e) => return Err(e),
        };
        let wall_secs = started.elapsed().as_secs_f64();
        let mut notes = Vec::new();
        let (model_secs, other_secs) = if args.no_compare {
            (None, None)
        } else {
            let model = cost(&schedule, &topology, &placement)
                .map(|b| b.total_secs)
                .map_err(|e| notes.push(format!("model: {e}")))
                .ok();
            let other_options =
                SimOptions { dependencies: other, trace_events: None, queues: false, ..sim_options.clone() };
            let other_run = simulate_one(
                &topology,
                &schedule,
                &placement,
                &other_options,
                &algorithm,
                &ready,
                args.format == Format::Md,
            )
            .map(|r| r.jobs[0].secs)
            .map_err(|e| notes.push(format!("{}: {e:#}", other.describe())))
            .ok();
            (model, other_run)
        };
        if let (Some(path), true) = (&args.svg, runs.is_empty()) {
            let watch = busiest(&report, 6);
            let watched = simulate_one(
                &topology,
                &schedule,
                &placement,
                &SimOptions { watch, trace_events: None, ..sim_options.clone() },
                &algorithm,
                &ready,
                false,
            )?;
            let gantt = rounds_gantt(&report, &format!("{algorithm}: rounds over time"));
            let svg = railyard_units::chart::stack(&[gantt, utilisation_chart(&watched)]);
            std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
        }
        if let (Some(path), true) = (&args.trace, runs.is_empty()) {
            // Labels from the report: made once per round, not walked per event.
            let label = |_: u32, r: usize| report.jobs[0].per_round[r].label.clone();
            let json = report.trace.to_json(&[algorithm.to_string()], &label);
            std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
        }
        runs.push(Run {
            algorithm: algorithm.to_string(),
            pipeline_chunks,
            channels,
            model_secs,
            other_secs,
            notes,
            wall_secs,
            report,
        });
    }
    if runs.is_empty() {
        bail!(
            "no algorithm could run: {}",
            skipped.iter().map(|(a, e)| format!("{a}: {e}")).collect::<Vec<_>>().join("; ")
        );
    }
    let output = Output {
        topology: topology.name.clone(),
        routing: topology.routing.as_str(),
        collective: request.collective,
        bytes: request.bytes,
        ranks: placement.len(),
        dependencies,
        other,
        runs,
        skipped,
    };
    match args.format {
        Format::Json => Ok(serde_json::to_string_pretty(&output)? + "\n"),
        Format::Md => Ok(markdown(&output, &topology, args)),
    }
}

/// How routes are used: one hashed path per connection (--ecmp), or split.
fn paths_of(args: &SimArgs) -> Paths {
    match args.ecmp {
        Some(seed) => Paths::Ecmp { seed },
        None => Paths::Split,
    }
}

/// The event engine's options from the command line.
fn sim_options(args: &SimArgs, dependencies: Dependencies, trace_events: Option<usize>) -> SimOptions {
    SimOptions {
        dependencies,
        paths: paths_of(args),
        reuse_repeated_rounds: !args.every_round,
        trace_events,
        queues: args.queues,
        buffer_bytes: args.buffer.map(|b| b as f64),
        watch: Vec::new(),
        critical_path: true,
        global_rates: false,
    }
}

fn simulate_one(
    topology: &Topology,
    schedule: &CompactSchedule,
    placement: &Placement,
    options: &SimOptions,
    algorithm: &str,
    ready: &[f64],
    show_progress: bool,
) -> Result<SimReport> {
    let job = JobSpec {
        name: algorithm.to_string(),
        schedule,
        placement: placement.clone(),
        start_secs: 0.0,
        ready_secs: ready.to_vec(),
        after: Vec::new(),
        compute_secs: 0.0,
    };
    let mut line = ProgressLine::new(format!("simulating {algorithm}"), show_progress);
    simulate_with_progress(topology, &[job], options, &mut |p| line.update(p))
        .map_err(|e| stalled(e, topology))
        .with_context(|| format!("simulating {algorithm}"))
}

/// The answer first: the fastest simulated algorithm, and where the simulator and the
/// per-round model part (sharing, collisions, late ranks or failures the model does not
/// see) or that they do not.
fn sim_headline(out: &Output) -> String {
    let secs = |r: &Run| r.report.jobs[0].secs;
    let Some(fastest) = out.runs.iter().min_by(|a, b| secs(a).total_cmp(&secs(b))) else { return String::new() };
    let name = |r: &Run| railyard_model::algorithm_ref::shaped_name(&r.algorithm, r.pipeline_chunks, r.channels);
    let mut s = format!("Fastest simulated: **{}** ({}). ", name(fastest), format_secs(secs(fastest)));
    // Apart: more than 1% from the model's time.
    let apart: Vec<String> = out
        .runs
        .iter()
        .filter_map(|r| {
            let m = r.model_secs.filter(|&m| m > 0.0)?;
            let ratio = secs(r) / m;
            ((ratio - 1.0).abs() > 0.01).then(|| format!("{} {:.2}x", name(r), ratio))
        })
        .collect();
    if apart.is_empty() {
        s += "The simulator agrees with the per-round model on every algorithm: nothing here shares a link \
              beyond what the model counts. It tells you more with other jobs (--jobs), hashed paths (--ecmp), \
              late ranks (--ready) or failed links (--fail).\n\n";
    } else {
        s += &format!(
            "The simulator parts from the per-round model (sim / model) on {}: flows sharing links, \
             collisions or waits the model does not count; the busiest resource of each says where.\n\n",
            apart.join(", ")
        );
    }
    s
}

fn markdown(out: &Output, topology: &Topology, args: &SimArgs) -> String {
    let mut s = format!(
        "# Simulated {} of {} over {} ranks on {}\n\n",
        out.collective.as_str(),
        format_bytes(out.bytes as f64),
        out.ranks,
        out.topology
    );
    s += &sim_headline(out);
    s += &format!(
        "Transfers start by {}; links shared max-min fairly; paths: {}; routes by {}; per-step start-up α = {}.\n\n",
        out.dependencies.describe(),
        out.runs[0].report.paths.describe(),
        crate::args::routing_words(topology.routing.as_str()),
        format_secs(topology.round_startup_secs)
    );
    let mut table = Table::new([
        "algorithm".to_string(),
        format!("sim ({})", out.dependencies.describe()),
        format!("sim ({})", out.other.describe()),
        "model".to_string(),
        "sim / model".to_string(),
        "busiest resource".to_string(),
        "flows".to_string(),
        "reused rounds".to_string(),
        "wall".to_string(),
    ]);
    for r in &out.runs {
        let job = &r.report.jobs[0];
        let busiest = r.report.resources.first().map_or("-".to_string(), |u| {
            format!("{} ({:.0}% of {})", u.resource, u.utilisation * 100.0, format_bytes_per_sec(u.bytes_per_sec))
        });
        table.row([
            railyard_model::algorithm_ref::shaped_name(&r.algorithm, r.pipeline_chunks, r.channels),
            format_secs(job.secs),
            r.other_secs.map_or("-".into(), format_secs),
            r.model_secs.map_or("-".into(), format_secs),
            r.model_secs.filter(|&m| m > 0.0).map_or("-".into(), |m| format!("{:.3}", job.secs / m)),
            busiest,
            r.report.flows.to_string(),
            format!("{} of {}", job.reused_rounds, job.rounds),
            format!("{:.2} s", r.wall_secs),
        ]);
    }
    s += &table.render();
    if let Some(fastest) = out.runs.iter().min_by(|a, b| a.report.jobs[0].secs.total_cmp(&b.report.jobs[0].secs)) {
        let job = &fastest.report.jobs[0];
        s += &format!("\n## {} (fastest simulated)\n\n", fastest.algorithm);
        if args.all_rounds {
            let mut t = Table::new(["round", "start", "end", "time", "ended by", "reused"]);
            for r in &job.per_round {
                t.row([
                    r.label.clone(),
                    format_secs(r.start_secs),
                    format_secs(r.end_secs),
                    format_secs(r.secs),
                    r.ended_by.clone().unwrap_or_default(),
                    if r.reused { "yes".into() } else { String::new() },
                ]);
            }
            s += &t.render();
        } else {
            let mut t = Table::new(["phase", "rounds", "start", "end", "time"]);
            for p in &job.phases {
                t.row([
                    p.name.clone(),
                    p.rounds.to_string(),
                    format_secs(p.start_secs),
                    format_secs(p.end_secs),
                    format_secs(p.secs),
                ]);
            }
            s += &t.render();
        }
        if !job.critical.is_empty() {
            s += "\nWhat the finish hangs on (the resource that set the rate of each round's last transfer):\n\n";
            let mut t = Table::new(["resource", "kind", "rounds", "time of those rounds"]);
            for c in job.critical.iter().take(6) {
                t.row([c.resource.clone(), c.kind.clone(), c.rounds.to_string(), format_secs(c.secs)]);
            }
            s += &t.render();
        }
        if let Some(path) = job.critical_path.as_ref().filter(|p| !p.is_empty()) {
            s += &format!(
                "\nCritical path: {} transfers, each the last thing the next one waited for (first and last six):\n\n",
                path.len()
            );
            let mut t = Table::new(["round", "transfer", "start", "end", "held back by"]);
            let shown: Vec<&railyard_sim::CriticalStep> = if path.len() <= 12 {
                path.iter().collect()
            } else {
                path[..6].iter().chain(&path[path.len() - 6..]).collect()
            };
            for (i, c) in shown.iter().enumerate() {
                if i == 6 && path.len() > 12 {
                    t.row(["...".to_string(), String::new(), String::new(), String::new(), String::new()]);
                }
                let transfer = match (c.from, c.to) {
                    (Some(a), Some(b)) => format!("{a} -> {b}"),
                    _ => "in-network".into(),
                };
                t.row([
                    c.round.clone(),
                    transfer,
                    format_secs(c.start_secs),
                    format_secs(c.end_secs),
                    c.resource.clone().unwrap_or_default(),
                ]);
            }
            s += &t.render();
        }
        s += &resources_table(&fastest.report);
        if fastest.report.reorder_peak_bytes > 0.0 {
            s += &format!(
                "\nA receiver held up to {} out of order (a flow split over paths of different latency).\n",
                format_bytes(fastest.report.reorder_peak_bytes)
            );
        }
        if args.queues {
            s += &queue_table(&fastest.report);
        }
    }
    for (a, e) in &out.skipped {
        s += &format!("\nskipped {a}: {e}\n");
    }
    for r in &out.runs {
        for n in &r.notes {
            s += &format!("\n{}: no {n}\n", r.algorithm);
        }
    }
    if let (Some(path), Some(first)) = (&args.trace, out.runs.first()) {
        s += &format!(
            "\nTrace of {} written to {} ({} events{}); open it in https://ui.perfetto.dev.\n",
            first.algorithm,
            path.display(),
            first.report.trace_events,
            if first.report.trace_dropped > 0 {
                format!(", {} more dropped past the limit of {MAX_TRACE_EVENTS}", first.report.trace_dropped)
            } else {
                String::new()
            }
        );
    }
    s
}

#[derive(Debug, Serialize)]
struct JobRun {
    name: String,
    algorithm: String,
    collective: String,
    bytes: u64,
    ranks: usize,
    start_secs: f64,
    finish_secs: f64,
    secs: f64,
    /// The same job alone on the network (its first run).
    alone_secs: f64,
    /// secs / alone_secs
    slowdown: f64,
}

#[derive(Debug, Serialize)]
struct JobsOutput {
    topology: String,
    dependencies: Dependencies,
    makespan_secs: f64,
    jobs: Vec<JobRun>,
    wall_secs: f64,
    report: SimReport,
}

/// `--jobs FILE`: every run of every job together, each beside itself alone.
fn run_jobs(args: &SimArgs, topology: &Topology, path: &std::path::Path) -> Result<String> {
    let text = railyard_sim::read_jobs_file(path)?;
    let planned = railyard_sim::parse_jobs(&text, topology).with_context(|| path.display().to_string())?;
    let dependencies = if args.barriers { Dependencies::Barriers } else { Dependencies::RankOrder };
    let paths = paths_of(args);
    let options = sim_options(args, dependencies, args.trace.is_some().then_some(MAX_TRACE_EVENTS));
    let (specs, of_spec) = railyard_sim::job_runs(&planned);
    let mut alone = Vec::with_capacity(planned.len());
    for p in &planned {
        let job = JobSpec {
            ready_secs: p.ready_secs.clone(),
            compute_secs: p.compute_secs,
            ..JobSpec::new(p.name.clone(), &p.schedule, p.placement.clone(), 0.0)
        };
        let r = simulate(topology, &[job], &SimOptions { trace_events: None, queues: false, ..options.clone() })
            .map_err(|e| stalled(e, topology))
            .with_context(|| format!("simulating {} alone", p.name))?;
        alone.push(r.jobs[0].secs);
    }
    let started = Instant::now();
    let mut line = ProgressLine::new("simulating the jobs", args.format == Format::Md);
    let report = simulate_with_progress(topology, &specs, &options, &mut |p| line.update(p))
        .map_err(|e| stalled(e, topology))
        .context("simulating the jobs together")?;
    drop(line);
    let wall_secs = started.elapsed().as_secs_f64();
    if let Some(path) = &args.svg {
        let watch = busiest(&report, 6);
        let watched = simulate(topology, &specs, &SimOptions { watch, trace_events: None, ..options.clone() })
            .map_err(|e| stalled(e, topology))?;
        let svg = railyard_units::chart::stack(&[jobs_gantt(&report), utilisation_chart(&watched)]);
        std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.trace {
        let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        let label = |j: u32, r: usize| report.jobs[j as usize].per_round[r].label.clone();
        std::fs::write(path, report.trace.to_json(&names, &label))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let jobs: Vec<JobRun> = report
        .jobs
        .iter()
        .zip(&of_spec)
        .map(|(j, &p)| JobRun {
            name: j.name.clone(),
            algorithm: j.algorithm.clone(),
            collective: j.collective.clone(),
            bytes: j.bytes,
            ranks: j.ranks,
            start_secs: j.start_secs,
            finish_secs: j.finish_secs,
            secs: j.secs,
            alone_secs: alone[p],
            // A job that takes no time alone (a compute task of none) is not slowed.
            slowdown: if alone[p] > 0.0 { j.secs / alone[p] } else { 1.0 },
        })
        .collect();
    let out = JobsOutput {
        topology: topology.name.clone(),
        dependencies,
        makespan_secs: report.makespan_secs,
        jobs,
        wall_secs,
        report,
    };
    if args.format == Format::Json {
        return Ok(serde_json::to_string_pretty(&out)? + "\n");
    }
    let mut s = format!(
        "# {} jobs sharing {}\n\nTransfers start by {}; links shared max-min fairly; paths: {}. All done at {}.\n\n",
        out.jobs.len(),
        out.topology,
        dependencies.describe(),
        paths.describe(),
        format_secs(out.makespan_secs)
    );
    let mut t = Table::new(["job", "collective", "algorithm", "ranks", "start", "finish", "time", "alone", "slowdown"]);
    for j in &out.jobs {
        t.row([
            j.name.clone(),
            format!("{} of {}", j.collective, format_bytes(j.bytes as f64)),
            j.algorithm.clone(),
            j.ranks.to_string(),
            format_secs(j.start_secs),
            format_secs(j.finish_secs),
            format_secs(j.secs),
            format_secs(j.alone_secs),
            format!("{:.2}x", j.slowdown),
        ]);
    }
    s += &t.render();
    s += &resources_table(&out.report);
    if args.queues {
        s += &queue_table(&out.report);
    }
    Ok(s)
}

/// `--flow-control`: the jobs file's jobs, or the collective of every algorithm asked,
/// through the fluid model.
fn run_fluid(args: &SimArgs, topology: &Topology) -> Result<String> {
    for (given, name) in [
        (args.svg.is_some(), "--svg"),
        (args.trace.is_some(), "--trace"),
        (args.ready.is_some(), "--ready"),
        (args.queues, "--queues (the fluid model reports its queues)"),
        (args.every_round, "--every-round"),
        (args.barriers, "--barriers (the fluid model runs rounds behind barriers)"),
        (args.all_rounds, "--all-rounds"),
        (args.xoff.is_some() && args.flow_control == Some(FlowControlArg::Drop), "--xoff (pauses only)"),
    ] {
        if given {
            bail!("{name} does not apply to --flow-control");
        }
    }
    let buffer = args.buffer.unwrap_or(1 << 20) as f64;
    let xoff = args.xoff.map_or(buffer / 2.0, |x| x as f64);
    let options = FluidOptions {
        dt_secs: args.dt,
        flow_control: match args.flow_control {
            Some(FlowControlArg::Drop) => FlowControl::Drop,
            _ => FlowControl::Pause,
        },
        buffer_bytes: buffer,
        xoff_bytes: xoff,
        xon_bytes: xoff / 2.0,
        mark_bytes: args.ecn.map(|b| b as f64),
        feedback_secs: args.feedback,
        cut: args.cut,
        increase_bytes_per_sec: args.increase,
        initial_queue_bytes: 0.0,
        paths: paths_of(args),
        horizon_secs: args.horizon,
    };
    // Said once for the run, not once per algorithm.
    railyard_sim::fluid::check(&options)?;
    // The jobs: from the file, or one per algorithm asked.
    let planned;
    let mut skipped: Vec<String> = Vec::new();
    let mut schedules = Vec::new();
    let mut specs: Vec<JobSpec<'_>> = Vec::new();
    if let Some(path) = &args.jobs {
        let text = railyard_sim::read_jobs_file(path)?;
        planned = railyard_sim::parse_jobs(&text, topology).with_context(|| path.display().to_string())?;
        if let Some(p) =
            planned.iter().find(|p| !p.after.is_empty() || p.compute_secs > 0.0 || !p.ready_secs.is_empty())
        {
            bail!(
                "job {}: the fluid model (--flow-control) starts jobs at their start times; after, compute and \
                 ready are the event engine's (drop --flow-control)",
                p.name
            );
        }
        specs = railyard_sim::job_runs(&planned).0;
    } else {
        // An algorithm that cannot run here is skipped, named or not.
        let request = CollectiveRequest { strict: false, ..args.request.request()? };
        let resolved = resolve(topology, &request).map_err(model_error)?;
        skipped.extend(resolved.skipped.into_iter().map(|s| format!("{}: {}", s.name, s.reason)));
        for v in resolved.variants {
            schedules.push((v.algorithm.to_string(), v.schedule, resolved.placement.clone()));
        }
        if schedules.is_empty() {
            bail!("no algorithm could run: {}", skipped.join("; "));
        }
    }
    let mut reports = Vec::new();
    if specs.is_empty() {
        for (algorithm, s, placement) in &schedules {
            let job = JobSpec::new(algorithm.to_string(), s, placement.clone(), 0.0);
            match simulate_fluid(topology, &[job], &options) {
                Ok(r) => reports.push(r),
                Err(e) => skipped.push(format!("{algorithm}: {:#}", stalled(e, topology))),
            }
        }
        if reports.is_empty() {
            bail!("no algorithm could run: {}", skipped.join("; "));
        }
    } else {
        reports.push(simulate_fluid(topology, &specs, &options).map_err(|e| stalled(e, topology))?);
    }
    if args.format == Format::Json {
        return Ok(serde_json::to_string_pretty(&reports)? + "\n");
    }
    let coarse = if options.dt_secs > 100e-9 {
        format!(
            "Note: a step of {} delays every hop by up to a step; times below a few steps are not resolved.\n\n",
            format_secs(options.dt_secs)
        )
    } else {
        String::new()
    };
    let mut s = format!(
        "# Flow control on {}: {} buffers of {} per switch port, time step {}\n\n",
        topology.name,
        match options.flow_control {
            FlowControl::Drop => "dropping",
            FlowControl::Pause => "pausing (PFC)",
        },
        format_bytes(buffer),
        format_secs(options.dt_secs)
    );
    s += &coarse;
    if let Some(mark) = options.mark_bytes {
        s += &format!(
            "Rate control: marks past {}, a cut to {} of the rate {} later, then +{} per microsecond.\n\n",
            format_bytes(mark),
            options.cut,
            format_secs(options.feedback_secs),
            format_bytes_per_sec(options.increase_bytes_per_sec)
        );
    }
    for r in &reports {
        let mut t = Table::new(["job", "finished at", "flows", "unfinished", "dropped (resent)"]);
        for j in &r.jobs {
            let flows: Vec<_> = r.flows.iter().filter(|f| f.job == j.name).collect();
            t.row([
                j.name.clone(),
                j.finish_secs.map_or("not by the horizon".into(), format_secs),
                flows.len().to_string(),
                flows.iter().filter(|f| f.finish_secs.is_none()).count().to_string(),
                format_bytes(flows.iter().map(|f| f.dropped_bytes).sum()),
            ]);
        }
        s += &t.render();
        let mut t = Table::new([
            "port",
            "peak queue",
            "at",
            "full at",
            "empty again at",
            "dropped",
            "longest pause by its switch",
        ]);
        for p in r.ports.iter().take(8) {
            t.row([
                p.resource.clone(),
                format_bytes(p.peak_bytes),
                format_secs(p.peak_secs),
                p.full_secs.map_or("-".into(), format_secs),
                p.empty_secs.map_or("-".into(), format_secs),
                format_bytes(p.dropped_bytes),
                format_secs(p.paused_secs),
            ]);
        }
        if !r.ports.is_empty() {
            s += "\n";
            s += &t.render();
        }
        s += "\n";
    }
    for k in &skipped {
        s += &format!("skipped {k}\n");
    }
    Ok(s)
}

/// The `n` resources of highest utilisation.
fn busiest(report: &SimReport, n: usize) -> Vec<String> {
    report.resources.iter().take(n).map(|r| r.resource.clone()).collect()
}

/// Bars past this many are drawn per phase instead of per round.
const MAX_BARS: usize = 4000;

/// The first job's rounds, one row per phase (per phase when there are too many rounds).
fn rounds_gantt(report: &SimReport, title: &str) -> String {
    let job = &report.jobs[0];
    let rows: Vec<String> = job.phases.iter().map(|p| p.name.clone()).collect();
    let mut bars = Vec::new();
    if job.per_round.len() <= MAX_BARS {
        let mut first = 0;
        for (row, p) in job.phases.iter().enumerate() {
            for r in &job.per_round[first..first + p.rounds] {
                bars.push(Bar {
                    row,
                    start: r.start_secs * 1e3,
                    end: r.end_secs * 1e3,
                    class: usize::from(r.reused) + 2 * (r.index % 2),
                    title: format!("{}: {} ({})", r.label, format_secs(r.secs), r.ended_by.as_deref().unwrap_or("-")),
                });
            }
            first += p.rounds;
        }
    } else {
        for (row, p) in job.phases.iter().enumerate() {
            bars.push(Bar {
                row,
                start: p.start_secs * 1e3,
                end: p.end_secs * 1e3,
                class: 0,
                title: format!("{}: {} rounds, {}", p.name, p.rounds, format_secs(p.secs)),
            });
        }
    }
    Gantt {
        title: title.to_string(),
        x_label: "simulated time (ms)".into(),
        rows,
        bars,
        classes: vec![
            "round (simulated flow by flow)".into(),
            "round (a repeat, skipped)".into(),
            "next round".into(),
            "next round (skipped)".into(),
        ],
    }
    .svg()
}

/// Every job of a run as a row, its phases as bars.
fn jobs_gantt(report: &SimReport) -> String {
    let rows: Vec<String> = report.jobs.iter().map(|j| j.name.clone()).collect();
    let mut bars = Vec::new();
    for (row, j) in report.jobs.iter().enumerate() {
        for (i, p) in j.phases.iter().enumerate() {
            bars.push(Bar {
                row,
                start: p.start_secs * 1e3,
                end: p.end_secs * 1e3,
                class: i,
                title: format!("{}: {}, {}", j.name, p.name, format_secs(p.secs)),
            });
        }
        if j.phases.is_empty() {
            bars.push(Bar {
                row,
                start: j.start_secs * 1e3,
                end: j.finish_secs * 1e3,
                class: 7,
                title: format!("{}: {}", j.name, format_secs(j.secs)),
            });
        }
    }
    Gantt {
        title: "jobs over time".into(),
        x_label: "simulated time (ms)".into(),
        rows,
        bars,
        classes: vec!["first phase".into(), "second phase".into(), "third phase".into()],
    }
    .svg()
}

/// The watched resources' utilisation over time, as steps.
fn utilisation_chart(report: &SimReport) -> String {
    let end = report.makespan_secs * 1e3;
    let series = report
        .utilisation_over_time
        .iter()
        .map(|s| {
            let mut points = Vec::with_capacity(2 * s.points.len() + 1);
            for (i, &(t, u)) in s.points.iter().enumerate() {
                let t = t * 1e3;
                if i > 0 {
                    points.push((t, s.points[i - 1].1 * 100.0));
                }
                points.push((t, u * 100.0));
            }
            if let Some(&(_, u)) = s.points.last() {
                points.push((end, u * 100.0));
            }
            Series { name: s.resource.clone(), points }
        })
        .collect();
    LineChart {
        title: "utilisation of the busiest resources (flat across skipped repeats)".into(),
        x_label: "simulated time (ms)".into(),
        y_label: "utilisation (%)".into(),
        log_x: false,
        series,
        marks: Vec::new(),
    }
    .svg()
}

/// A route that does not exist on a topology with failed links means the job stalls.
fn stalled(e: railyard_sim::SimError, topology: &Topology) -> anyhow::Error {
    match e {
        railyard_sim::SimError::Topology(railyard_topology::TopologyError::NoRoute { from, to })
            if topology.name.contains("(failed:") =>
        {
            anyhow::anyhow!("the job stalls: with the failed links nothing connects \"{from}\" to \"{to}\"")
        }
        other => other.into(),
    }
}

/// The eight busiest resources of a run.
fn resources_table(report: &SimReport) -> String {
    let mut t = Table::new(["resource", "kind", "bytes", "bandwidth", "utilisation"]);
    for u in report.resources.iter().take(8) {
        t.row([
            u.resource.clone(),
            u.kind.clone(),
            format_bytes(u.bytes),
            format_bytes_per_sec(u.bytes_per_sec),
            format!("{:.1}%", u.utilisation * 100.0),
        ]);
    }
    "\nBusiest resources (bytes carried over bandwidth x simulated time):\n\n".to_string() + &t.render()
}

/// The switch ports that queued (with --queues), largest peak first.
fn queue_table(report: &SimReport) -> String {
    if report.queues.is_empty() {
        return "\nNo switch queue formed: no port was sent more than it forwarded.\n".into();
    }
    let mut s = "\nSwitch queues (sent and not yet forwarded; buffers as large as the backlog):\n\n".to_string();
    let mut t = Table::new(["port", "peak backlog", "at", "drained at", "past the buffer"]);
    for q in report.queues.iter().take(8) {
        t.row([
            q.resource.clone(),
            format_bytes(q.peak_bytes),
            format_secs(q.peak_secs),
            q.drained_secs.map_or("-".into(), format_secs),
            q.over_buffer_bytes.map_or("-".into(), format_bytes),
        ]);
    }
    s += &t.render();
    s
}

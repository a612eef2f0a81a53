//! `railyard sim`: run collectives through the flow-level simulator and put the result
//! beside the per-round model's.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use railyard_model::cost;
use railyard_schedule::{generate_compact, Algorithm, Collective, CollectiveSpec, CompactSchedule, Dtype, GenOptions};
use railyard_sim::{simulate, Dependencies, JobSpec, Paths, SimOptions, SimReport};
use railyard_topology::units::{format_bytes, format_bytes_per_sec, format_secs};
use railyard_topology::{Placement, PlacementPolicy, Topology};
use serde::Serialize;

use crate::args::{parse_channels, parse_pipeline_chunks, parse_size, Format};
use crate::commands::plan::algorithms;
use railyard_netmodels::report::Table;

/// Trace events kept at most (each transfer and each round is one).
const MAX_TRACE_EVENTS: usize = 2_000_000;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard sim                                    # seed 001 example 7.2's all-reduce, every algorithm\n  \
    railyard sim --algo hierarchical --trace out.json   # open out.json in https://ui.perfetto.dev\n  \
    railyard sim --topo rail:servers=128 --size 1GiB --algo ring,hierarchical\n  \
    railyard sim --topo hgx-h100x2 --algo ring --ecmp 7\n\n\
How transfers start: by default a rank starts round k's transfers once it and the ranks it\n\
exchanges with have finished their part of round k-1 (rank order; rounds overlap where ranks\n\
are ready at different times). --barriers waits for every rank, as the per-round model does;\n\
then the simulator equals the model. Both, and the model, are shown unless --no-compare.\n\n\
Links are shared max-min fairly among the flows crossing them; a route with several\n\
equal-cost paths splits its bytes over them (the model's rule, per-packet spraying) unless\n\
--ecmp SEED puts each connection on one hashed path.\n\n\
Limits: 128 Mi transfers started one by one (runs of repeated rounds that run in step are\n\
simulated once); 16 Mi transfers in one round; 4,096 rounds held between the slowest and the\n\
fastest rank; 2 Mi trace events (the rest are counted as dropped).")]
pub struct SimArgs {
    /// Topology: a preset (`railyard topo list`), optionally with parameters, or a TOML/JSON file
    #[arg(long, default_value = "hgx-h100x2")]
    pub topo: String,
    /// Collective: allreduce, reducescatter, allgather, broadcast, reduce, gather, scatter, alltoall, barrier, sendrecv
    #[arg(long, default_value = "allreduce")]
    pub collective: Collective,
    /// Message size (binary units: 192MiB, 8KiB; the large buffer, as nccl-tests counts it)
    #[arg(long, default_value = "192MiB", value_parser = parse_size, allow_hyphen_values = true)]
    pub size: u64,
    /// Element type: f32, f64, f16, bf16, i32, i64, u8
    #[arg(long, default_value = "f32")]
    pub dtype: Dtype,
    /// Algorithms, comma-separated, or `all` (every algorithm that implements the collective)
    #[arg(long, default_value = "all")]
    pub algo: String,
    /// Root rank of rooted collectives
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// Parallel rings (channels) for the ring algorithms (1-64)
    #[arg(long, default_value_t = 1, value_parser = parse_channels)]
    pub channels: usize,
    /// Pipelined chunks for chain and trees (1-4096)
    #[arg(long, default_value_t = 4, value_parser = parse_pipeline_chunks)]
    pub pipeline_chunks: usize,
    /// Rank placement: contiguous, interleaved, rail-aligned, or list:DEV,DEV,...
    #[arg(long, default_value = "contiguous")]
    pub placement: PlacementPolicy,
    /// Number of ranks (default: every GPU of the topology)
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Start every round when all ranks have finished the one before (the model's rule)
    #[arg(long)]
    pub barriers: bool,
    /// One ECMP path per connection, hashed with this seed (default: split over all paths)
    #[arg(long, value_name = "SEED", conflicts_with = "spray")]
    pub ecmp: Option<u64>,
    /// Split every route's bytes over its equal-cost paths (the default; per-packet spraying)
    #[arg(long)]
    pub spray: bool,
    /// Only the simulation asked for: no model and no run under the other start rule
    #[arg(long)]
    pub no_compare: bool,
    /// Simulate every round flow by flow, even repeats of a round that ran in step
    #[arg(long)]
    pub every_round: bool,
    /// Write a Chrome/Perfetto trace (JSON) of the run of the first algorithm to this file
    #[arg(long)]
    pub trace: Option<PathBuf>,
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
    /// The per-round model's time (absent with --no-compare).
    model_secs: Option<f64>,
    /// The other start rule's time (absent with --no-compare).
    other_secs: Option<f64>,
    /// Wall-clock seconds the simulation took (not part of the simulated result).
    wall_secs: f64,
    report: SimReport,
}

#[derive(Debug, Serialize)]
struct Output {
    topology: String,
    collective: Collective,
    bytes: u64,
    ranks: usize,
    dependencies: Dependencies,
    other: Dependencies,
    runs: Vec<Run>,
    skipped: Vec<(String, String)>,
}

pub fn run(args: &SimArgs) -> Result<String> {
    let topology = railyard_topology::load(&args.topo).with_context(|| format!("topology {}", args.topo))?;
    let placement = Placement::new(&topology, &args.placement, args.ranks).context("placement")?;
    let (list, strict) = algorithms(&args.algo, args.collective)?;
    let elem_bytes = args.dtype.size_bytes();
    if !args.size.is_multiple_of(elem_bytes) {
        bail!("--size {} is not a whole number of {}-byte elements (--dtype)", args.size, elem_bytes);
    }
    let spec = CollectiveSpec::new(args.collective, placement.len(), args.size / elem_bytes).with_root(args.root);
    let dependencies = if args.barriers { Dependencies::Barriers } else { Dependencies::RankOrder };
    let other = if args.barriers { Dependencies::RankOrder } else { Dependencies::Barriers };
    let paths = match args.ecmp {
        Some(seed) => Paths::Ecmp { seed },
        None => Paths::Split,
    };
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    let groups = placement.ranks_by_server(&topology);
    for (i, &algorithm) in list.iter().enumerate() {
        if list[..i].contains(&algorithm) {
            continue;
        }
        let options = GenOptions {
            groups: groups.clone(),
            order: None,
            channels: if algorithm.uses_channels() { args.channels } else { 1 },
            pipeline_chunks: if algorithm.pipelined() { args.pipeline_chunks } else { 1 },
        };
        let schedule = match generate_compact(algorithm, &spec, &options, elem_bytes) {
            Ok(s) => s,
            Err(e) if !strict => {
                skipped.push((algorithm.to_string(), e.to_string()));
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("algorithm {algorithm}")),
        };
        let trace = (runs.is_empty() && args.trace.is_some()).then_some(MAX_TRACE_EVENTS);
        let sim_options =
            SimOptions { dependencies, paths, reuse_repeated_rounds: !args.every_round, trace_events: trace };
        let started = Instant::now();
        let report = match simulate_one(&topology, &schedule, &placement, &sim_options, algorithm) {
            Ok(r) => r,
            Err(e) if !strict => {
                skipped.push((algorithm.to_string(), format!("{e:#}")));
                continue;
            }
            Err(e) => return Err(e),
        };
        let wall_secs = started.elapsed().as_secs_f64();
        let (model_secs, other_secs) = if args.no_compare {
            (None, None)
        } else {
            let model = cost(&schedule, &topology, &placement).map(|b| b.total_secs).ok();
            let other_options = SimOptions { dependencies: other, trace_events: None, ..sim_options.clone() };
            let other_run = simulate_one(&topology, &schedule, &placement, &other_options, algorithm)?;
            (model, Some(other_run.jobs[0].secs))
        };
        if let (Some(path), true) = (&args.trace, runs.is_empty()) {
            let label = |_: u32, r: usize| round_label(&schedule, r);
            let json = report.trace.to_json(&[algorithm.to_string()], &label);
            std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
        }
        runs.push(Run { algorithm: algorithm.to_string(), model_secs, other_secs, wall_secs, report });
    }
    if runs.is_empty() {
        bail!(
            "no algorithm could run: {}",
            skipped.iter().map(|(a, e)| format!("{a}: {e}")).collect::<Vec<_>>().join("; ")
        );
    }
    let output = Output {
        topology: topology.name.clone(),
        collective: args.collective,
        bytes: args.size,
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

fn simulate_one(
    topology: &Topology,
    schedule: &CompactSchedule,
    placement: &Placement,
    options: &SimOptions,
    algorithm: Algorithm,
) -> Result<SimReport> {
    let job = JobSpec { name: algorithm.to_string(), schedule, placement: placement.clone(), start_secs: 0.0 };
    simulate(topology, &[job], options).with_context(|| format!("simulating {algorithm}"))
}

fn round_label(schedule: &CompactSchedule, round: usize) -> String {
    let mut left = round;
    for (p, phase) in schedule.phases.iter().enumerate() {
        let n = phase.rounds.rounds();
        if left < n {
            return schedule.round_label(p, left);
        }
        left -= n;
    }
    format!("round {round}")
}

fn rule(d: Dependencies) -> &'static str {
    match d {
        Dependencies::Barriers => "round barriers",
        Dependencies::RankOrder => "rank order",
    }
}

fn markdown(out: &Output, topology: &Topology, args: &SimArgs) -> String {
    let mut s = format!(
        "# Simulated {} of {} over {} ranks on {}\n\n",
        out.collective.as_str(),
        format_bytes(out.bytes as f64),
        out.ranks,
        out.topology
    );
    s += &format!(
        "Transfers start by {}; links shared max-min fairly; paths: {}; per-step start-up α = {}.\n\n",
        rule(out.dependencies),
        out.runs[0].report.paths.describe(),
        format_secs(topology.round_startup_secs)
    );
    let mut table = Table::new([
        "algorithm".to_string(),
        format!("sim ({})", rule(out.dependencies)),
        format!("sim ({})", rule(out.other)),
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
            r.algorithm.clone(),
            format_secs(job.secs),
            r.other_secs.map_or("-".into(), format_secs),
            r.model_secs.map_or("-".into(), format_secs),
            r.model_secs.map_or("-".into(), |m| format!("{:.3}", job.secs / m)),
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
            let mut t = Table::new(["round", "start", "end", "time", "reused"]);
            for r in &job.per_round {
                t.row([
                    r.label.clone(),
                    format_secs(r.start_secs),
                    format_secs(r.end_secs),
                    format_secs(r.secs),
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
        s += "\nBusiest resources (bytes carried over bandwidth x simulated time):\n\n";
        let mut t = Table::new(["resource", "kind", "bytes", "bandwidth", "utilisation"]);
        for u in fastest.report.resources.iter().take(8) {
            t.row([
                u.resource.clone(),
                u.kind.clone(),
                format_bytes(u.bytes),
                format_bytes_per_sec(u.bytes_per_sec),
                format!("{:.1}%", u.utilisation * 100.0),
            ]);
        }
        s += &t.render();
    }
    for (a, e) in &out.skipped {
        s += &format!("\nskipped {a}: {e}\n");
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

//! `railyard`: how long will this collective take on this cluster, why, and what
//! should change. Every number printed comes with its breakdown.
//!
//! The command line as a library: `main.rs` runs [`main`]; the Python package runs a
//! sweep's points through [`sweep_point`], so a point gives the same record whichever
//! executor ran it.

mod args;
mod commands;
mod progress;
mod ranks;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "railyard",
    version,
    about = "Plan, cost and explain collective communication on GPU clusters",
    long_about = "Plan, cost and explain collective communication on GPU clusters.\n\n\
                  A collective algorithm is a schedule (which rank sends which chunk to which rank, \
                  in which round); railyard costs schedules on a topology with the per-round resource \
                  model T = sum over rounds of (alpha + max over resources of bytes/bandwidth).\n\n\
                  Bandwidths are decimal (1 GB/s = 1e9 B/s), sizes binary (1 MiB = 2^20 B)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare collective algorithms on a topology (default: a 192 MiB all-reduce on 2 x HGX H100)
    Plan(commands::plan::PlanArgs),
    /// List, show, validate, import (nvidia-smi, NCCL XML) and export topologies
    #[command(subcommand)]
    Topo(commands::topo::TopoCommand),
    /// Analytical network models
    #[command(subcommand)]
    Model(commands::model::ModelCommand),
    /// A training step from a model and a cluster: memory, step time with overlap, the
    /// super-node study, MoE and bucketing (default: an example job; --examples: the chapter's worked examples)
    PlanTraining(commands::plan_training::PlanTrainingArgs),
    /// Simulate collectives flow by flow on a shared network, beside the per-round model
    Sim(commands::sim::SimArgs),
    /// NCCL's own choice for a collective (its tuner's tables and times), beside railyard's
    ExplainNccl(commands::nccl::ExplainArgs),
    /// Read what NCCL users already have: nccl-tests output, NCCL INFO logs
    #[command(subcommand)]
    Analyze(commands::nccl::AnalyzeCommand),
    /// railyard's expected busbw against published nccl-tests runs (corpus/validation.toml):
    /// the error per case and size, its median and worst, beside NCCL's own tuner's
    Validate(commands::validate::ValidateArgs),
    /// Predicted training throughput against published runs (corpus/training.toml)
    ValidateTraining(commands::validate_training::ValidateTrainingArgs),
    /// Schedules themselves: show an algorithm's rounds, prove it, import and export MSCCL XML
    #[command(subcommand)]
    Schedule(commands::schedule::ScheduleCommand),
    /// Run collectives for real and report like nccl-tests (time, algbw, busbw, #wrong)
    ///
    /// Each size is timed out of place (separate input and output) and in place (one
    /// buffer holding both, laid out as the collective's in-place form: the input is the
    /// rank's chunk of an all-gather's output, a reduce-scatter's output is the rank's chunk
    /// of its input; all-to-all has no in-place form and runs on a copy). `-c 1` checks
    /// both halves' results element by element. Environment: RAILYARD_ALGO, RAILYARD_SHM,
    /// RAILYARD_CMA, RAILYARD_SLIP, RAILYARD_SOCKETS_PER_PEER, RAILYARD_SOCKET_IFNAME,
    /// RAILYARD_DEBUG=INFO (docs/runtime.md).
    Perf(commands::perf::PerfArgs),
    /// Start N local ranks of a program with launcher variables set
    Launch(commands::launch::LaunchArgs),
    /// Measure each transport's α and bandwidth and write a topology file of this cluster
    Calibrate(commands::calibrate::CalibrateArgs),
    /// Read every rank's flight-recorder dump (RAILYARD_DUMP_DIR) and say which rank is
    /// behind, the first call where ranks disagree, and the step the job waits on
    ///
    /// Ranks write `railyard-trace-rankN.json` to RAILYARD_DUMP_DIR on their first error,
    /// on SIGUSR1 (seen at the next call, or while a call waits) and when the program asks.
    /// RAILYARD_TRACE_BUFFER sets how many calls each keeps (default 64).
    Triage(commands::triage::TriageArgs),
    /// Many plan, sim or plan-training requests over a grid: on every core, as shards
    /// (a Slurm job array), resumable; merge shards, report and chart the results
    Sweep(commands::sweep::SweepArgs),
}

/// Run a command line (without the program name) in this process: its output, as
/// `main` would print it. A sweep runs its points so.
pub(crate) fn run_args(args: &[String]) -> anyhow::Result<String> {
    dispatch(parse_args(args)?)
}

/// A command line (without the program name) parsed as `main` parses its own.
pub(crate) fn parse_args(args: &[String]) -> anyhow::Result<Command> {
    let cli = Cli::try_parse_from(std::iter::once("railyard".to_string()).chain(args.iter().cloned()))
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_end()))?;
    Ok(cli.command)
}

/// The `railyard` program: parse the command line, run it, print its output or error.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = dispatch(cli.command);
    print_result(result)
}

fn dispatch(command: Command) -> anyhow::Result<String> {
    match command {
        Command::Plan(args) => commands::plan::run(&args),
        Command::Topo(cmd) => commands::topo::run(&cmd),
        Command::Model(cmd) => commands::model::run(&cmd),
        Command::PlanTraining(args) => commands::plan_training::run(&args),
        Command::Sim(args) => commands::sim::run(&args),
        Command::ExplainNccl(args) => commands::nccl::explain(&args),
        Command::Analyze(cmd) => commands::nccl::analyze(&cmd),
        Command::Validate(args) => commands::validate::run(&args),
        Command::ValidateTraining(args) => commands::validate_training::run(&args),
        Command::Schedule(cmd) => commands::schedule::run(&cmd),
        Command::Perf(args) => commands::perf::run(&args),
        Command::Launch(args) => commands::launch::run(&args),
        // With nccl-tests outputs nothing runs: the fit is of what was measured.
        Command::Calibrate(args) if !args.nccl_tests.is_empty() => commands::calibrate_nccl::run(&args),
        Command::Calibrate(args) => commands::calibrate::run(&args),
        Command::Triage(args) => commands::triage::run(&args),
        Command::Sweep(args) => commands::sweep::run(&args),
    }
}

/// The subcommands `run_report` runs: the ones that read and compute, never those that
/// start processes or measure this machine (their `--svg` and `--trace` write where asked).
const REPORTS: [&str; 3] = ["sim", "analyze", "explain-nccl"];

/// A reporting subcommand's command line (without the program name), run in this
/// process: its output as `main` prints it. What Python's `railyard.sim`,
/// `analyze_nccl_tests`, `analyze_nccl_log` and `explain_nccl` call, so they print
/// what the CLI prints.
pub fn run_report(args: &[String]) -> anyhow::Result<String> {
    match args.first() {
        Some(first) if REPORTS.contains(&first.as_str()) => run_args(args),
        other => anyhow::bail!(
            "{}: not one of the reports run in-process ({})",
            other.map_or("nothing", String::as_str),
            REPORTS.join(", ")
        ),
    }
}

/// One point of the sweep whose grid file is `grid_text` (read from `grid_dir`, where a
/// plan-training scenario's relative paths start): its record, one JSON line, as the
/// local executor writes it.
pub fn sweep_point(grid_text: &str, grid_dir: &std::path::Path, point: u64) -> anyhow::Result<String> {
    commands::sweep::point_record(grid_text, grid_dir, point)
}

fn print_result(result: anyhow::Result<String>) -> ExitCode {
    match result {
        Ok(mut text) => {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            // A reader that stops early (`| head`) closes the pipe: stop quietly like
            // other Unix tools, rather than panic as `print!` does.
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: cannot write the output: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

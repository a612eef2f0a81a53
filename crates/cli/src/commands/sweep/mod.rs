//! `railyard sweep`: many requests of one command over a grid (`grid.rs`), run on this
//! machine's cores or as shards (a Slurm job array, or any scheduler), each point's
//! record appended as it finishes (`store.rs`) so a killed sweep resumes where it
//! stopped; `merge` joins shards' files and `report` charts them (`report.rs`).

mod grid;
mod report;
mod store;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};

use grid::{Grid, SweptCommand};
use store::Record;

/// The largest grid file read.
const MAX_GRID_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Executor {
    /// This machine's cores
    Local,
    /// Write an sbatch script whose array tasks each run one shard
    Slurm,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ResultFormat {
    Jsonl,
    Csv,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_help = GRID_HELP)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub action: Option<SweepAction>,
    /// The grid file (TOML)
    pub grid: Option<PathBuf>,
    /// The results file (JSONL, one record per point); default: the grid's name with .jsonl
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip the points already in --out (after a kill, a lost node, a failed shard)
    #[arg(long)]
    pub resume: bool,
    /// Run only shard I of N (points whose number is I mod N), e.g. 0/4
    #[arg(long, value_parser = parse_shard)]
    pub shard: Option<(u64, u64)>,
    /// Points run at once (default: every core)
    #[arg(long)]
    pub jobs: Option<usize>,
    /// List the points and stop
    #[arg(long)]
    pub print_points: bool,
    #[arg(long, value_enum, default_value = "local")]
    pub executor: Executor,
    /// Shards of a Slurm job array
    #[arg(long, default_value_t = 4)]
    pub shards: u64,
    /// Also write the results as CSV (--out with .csv appended)
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: ResultFormat,
}

#[derive(Debug, Subcommand)]
pub enum SweepAction {
    /// Join shards' result files into one (each point once)
    Merge {
        /// The shards' files
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long)]
        out: PathBuf,
    },
    /// The best points, and each axis charted (--svg)
    Report {
        /// A results file
        results: PathBuf,
        /// Write a line chart per axis as SVG
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Rows of the best-points table
        #[arg(long, default_value_t = 10)]
        top: usize,
    },
}

const GRID_HELP: &str = "A grid file:\n  \
    command = \"plan\"                      # plan, sim or plan-training\n  \
    [base]                                # options every point shares\n  \
    collective = \"allreduce\"\n  \
    algo = \"all\"\n  \
    [axes]                                # each a list or a geometric range\n  \
    topo = [\"rail:servers=8\", \"clos:k=8\"]\n  \
    size = { from = \"1MiB\", to = \"1GiB\", factor = 4 }\n\n\
For plan and sim, [base] and the axes are the command's flags by name. For plan-training,\n\
[base] is the scenario and an axis is a dotted path into it (\"job.global_batch\").\n\
Each point's record (its inputs, the command's JSON output with arrays of more than 64\n\
items left out, or its error; wall time) is appended to --out as it finishes; --resume\n\
skips the points already there (points in flight at a kill run again). Points are\n\
numbered over the axes sorted by name, the last fastest.";

fn parse_shard(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("{text:?}: give I/N with 0 <= I < N, e.g. 0/4");
    let (i, n) = text.split_once('/').ok_or_else(bad)?;
    let (i, n): (u64, u64) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
    if n == 0 || i >= n || n > grid::MAX_POINTS {
        return Err(bad());
    }
    Ok((i, n))
}

pub fn run(args: &SweepArgs) -> Result<String> {
    match &args.action {
        Some(SweepAction::Merge { files, out }) => {
            let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
            let all = store::merge(&paths)?;
            if out.exists() {
                bail!("{} exists; merge writes a new file", out.display());
            }
            let mut w = store::Writer::append(out)?;
            for r in all.values() {
                w.write(r)?;
            }
            Ok(format!("{} points from {} files into {}\n", all.len(), files.len(), out.display()))
        }
        Some(SweepAction::Report { results, svg, top }) => report::report(results, svg.as_deref(), *top),
        None => sweep(args),
    }
}

fn sweep(args: &SweepArgs) -> Result<String> {
    let Some(path) = &args.grid else { bail!("give a grid file (railyard sweep GRID.toml; --help shows one)") };
    let text = railyard_topology::file::read_text(path, MAX_GRID_BYTES)?;
    let grid = Grid::parse(&text).with_context(|| format!("{}", path.display()))?;
    let hash = store::grid_hash(&text);
    let total = grid.points();
    let (shard, shards) = args.shard.unwrap_or((0, 1));
    let mine: Vec<u64> = (0..total).filter(|p| p % shards == shard).collect();
    if args.print_points {
        let mut out = String::new();
        for &p in &mine {
            let point = grid.point(p);
            let desc: Vec<String> = point.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out += &format!("{p}\t{}\n", desc.join(" "));
        }
        return Ok(out);
    }
    let out_path = args.out.clone().unwrap_or_else(|| path.with_extension("jsonl"));
    if out_path == *path {
        bail!("--out {} is the grid file itself; give another", out_path.display());
    }
    if args.executor == Executor::Slurm {
        if args.shard.is_some() || args.format != ResultFormat::Jsonl || args.resume {
            bail!("--executor slurm writes the job array's script: --shard, --resume and --format belong to its tasks");
        }
        return slurm(path, &out_path, args.shards, total);
    }
    if args.jobs == Some(0) {
        bail!("--jobs 0: at least one point at a time");
    }
    // A mis-set grid fails at its first point, before any work (an unknown flag, a value
    // the command refuses to parse).
    grid.check_point(0)?;
    let done = if args.resume {
        store::read(&out_path, true)?
    } else if out_path.exists() {
        bail!("{} exists: --resume to go on with it, or give another --out", out_path.display());
    } else {
        BTreeMap::new()
    };
    for r in done.values() {
        if r.grid != hash || r.point >= total || Grid::inputs_json(&grid.point(r.point)) != r.inputs {
            bail!(
                "{}: point {} was recorded from another grid (or another version of it); resume with that grid, or give another --out",
                out_path.display(),
                r.point
            );
        }
    }
    let recorded_here = mine.iter().filter(|p| done.contains_key(p)).count();
    let todo: Vec<u64> = mine.iter().copied().filter(|p| !done.contains_key(p)).collect();
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).clamp(1, 256);
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut writer = store::Writer::append(&out_path)?;
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let (tx, rx) = mpsc::channel::<Record>();
    let show_progress = std::io::stderr().is_terminal();
    let (mut finished, mut failed) = (0u64, 0u64);
    std::thread::scope(|s| -> Result<()> {
        for _ in 0..jobs.min(todo.len().max(1)) {
            let tx = tx.clone();
            let (grid, todo, next, dir, hash) = (&grid, &todo, &next, &dir, &hash);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&p) = todo.get(i) else { break };
                if tx.send(run_point(grid, p, dir, hash)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut last = Instant::now();
        for record in rx {
            failed += u64::from(record.error.is_some());
            finished += 1;
            writer.write(&record)?;
            if show_progress && (last.elapsed().as_secs_f64() > 0.5 || finished as usize == todo.len()) {
                last = Instant::now();
                let rate = finished as f64 / started.elapsed().as_secs_f64().max(1e-9);
                let left = (todo.len() as u64 - finished) as f64 / rate.max(1e-9);
                eprint!("\r{finished}/{} points, {failed} failed, {rate:.1}/s, {left:.0} s left   ", todo.len());
            }
        }
        Ok(())
    })?;
    if show_progress {
        eprintln!();
    }
    let secs = started.elapsed().as_secs_f64();
    let mut summary = format!(
        "{finished} points run ({failed} failed) of {} in this {}, {recorded_here} recorded before; {:.1} s, {:.1} points/s; results in {}\n",
        mine.len(),
        if shards > 1 { format!("shard {shard}/{shards}") } else { "grid".to_string() },
        secs,
        finished as f64 / secs.max(1e-9),
        out_path.display()
    );
    if args.format == ResultFormat::Csv {
        let mut csv_path = out_path.clone().into_os_string();
        csv_path.push(".csv");
        let csv_path = PathBuf::from(csv_path);
        let records = store::read(&out_path, false)?;
        std::fs::write(&csv_path, store::csv(&records, report::metric))
            .with_context(|| format!("cannot write {}", csv_path.display()))?;
        summary += &format!("CSV in {}\n", csv_path.display());
    }
    Ok(summary)
}

/// Run point `p` in this process; its record (the error recorded, not raised; a panic
/// recorded as the point's error, so it is not run again on every resume).
fn run_point(grid: &Grid, p: u64, dir: &Path, hash: &str) -> Record {
    let point = grid.point(p);
    let started = Instant::now();
    let run = || -> Result<String> {
        match grid.command {
            SweptCommand::Plan | SweptCommand::Sim => grid.args(&point).and_then(|args| crate::run_args(&args)),
            SweptCommand::PlanTraining => grid.scenario(&point).and_then(|text| {
                let mut scenario = railyard_planner::Scenario::parse(&text)?;
                scenario.resolve_paths(dir);
                let report = scenario.run(railyard_planner::Engine::Model, false)?;
                Ok(serde_json::to_string(&report)?)
            }),
        }
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(anyhow::anyhow!("railyard panicked on this point (a bug; please report it): {what}"))
    });
    let (output, error) = match result.and_then(|text| Ok(serde_json::from_str::<serde_json::Value>(&text)?)) {
        Ok(mut v) => {
            strip_wall(&mut v);
            store::summarize(&mut v);
            (v, None)
        }
        Err(e) => (serde_json::Value::Null, Some(format!("{e:#}"))),
    };
    Record {
        point: p,
        grid: hash.to_string(),
        inputs: Grid::inputs_json(&point),
        output,
        error,
        wall_secs: started.elapsed().as_secs_f64(),
    }
}

/// Wall-clock fields out of a command's output: a record is the same whichever machine
/// or executor ran it (its own `wall_secs` says how long it took).
fn strip_wall(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove("wall_secs");
            m.values_mut().for_each(strip_wall);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_wall),
        _ => {}
    }
}

/// An sbatch script whose array tasks run one shard each, then how to merge them.
/// `text` quoted for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

fn slurm(grid: &Path, out: &Path, shards: u64, total: u64) -> Result<String> {
    if shards == 0 || shards > total.max(1) {
        bail!("--shards {shards}: give 1..={} (the grid's points)", total.max(1));
    }
    let script = out.with_extension("sbatch");
    let stem = out.with_extension("");
    let text = format!(
        "#!/bin/bash\n#SBATCH --job-name=railyard-sweep\n#SBATCH --array=0-{last}\n#SBATCH --cpus-per-task=2\n\
         # Each task runs one shard of {grid} ({total} points); rerun a task and it resumes.\n\
         set -euo pipefail\n\
         railyard sweep {grid} --shard ${{SLURM_ARRAY_TASK_ID}}/{shards} --out {stem}.shard${{SLURM_ARRAY_TASK_ID}}.jsonl --resume\n",
        last = shards - 1,
        grid = shell_quote(&grid.display().to_string()),
        stem = shell_quote(&stem.display().to_string()),
    );
    std::fs::write(&script, text).with_context(|| format!("cannot write {}", script.display()))?;
    Ok(format!(
        "wrote {}: sbatch it; when its {shards} tasks are done:\n  railyard sweep merge {}.shard*.jsonl --out {}\n",
        script.display(),
        shell_quote(&stem.display().to_string()),
        shell_quote(&out.display().to_string())
    ))
}

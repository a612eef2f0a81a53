//! `railyard sweep`: many requests of one command over a grid (`grid.rs`), run on this
//! machine's cores or as shards (a Slurm job array, or any scheduler), each point's
//! record appended as it finishes (`store.rs`) so a killed sweep resumes where it
//! stopped; `merge` joins shards' files and `report` charts them (`report.rs`).

mod filter;
mod grid;
mod ray;
mod report;
mod store;
mod table;

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
    /// A Ray cluster (--address; without it a local one): each point a Ray task calling
    /// railyard's Python package (pip install ./python, with ray), records streamed back
    Ray,
    /// Write an sbatch script whose array tasks each run one shard
    Slurm,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ResultFormat {
    /// Only the JSONL records
    Jsonl,
    /// Also a CSV table: a row per point, a column per input and per output field
    Csv,
    /// Also a Parquet table (the same columns, typed)
    Parquet,
}

impl ResultFormat {
    fn extension(self) -> &'static str {
        match self {
            ResultFormat::Jsonl => "jsonl",
            ResultFormat::Csv => "csv",
            ResultFormat::Parquet => "parquet",
        }
    }
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
    /// Run only shard I of N: every N-th point the filters keep, from the I-th (e.g. 0/4)
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
    /// The Ray cluster's address (ray://host:10001, which needs ray[client], or host:6379
    /// from inside it); without it, --executor ray starts a local Ray with --jobs workers.
    /// A cluster that does not answer within 60 s is an error
    #[arg(long)]
    pub address: Option<String>,
    /// The Python that has railyard's package and ray (default: $RAILYARD_PYTHON, else python3)
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Also write the results as a table (--out with .csv or .parquet appended): a row per
    /// point in point order; columns point, the inputs, metric, wall_secs, error, then every
    /// scalar of the command's output by its path (output.algorithms.0.expected_secs)
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
    /// The results as a table for analysis tools (CSV or Parquet)
    Export {
        /// A results file
        results: PathBuf,
        #[arg(long, value_enum)]
        format: ResultFormat,
        /// The table file (default: the results file with .csv or .parquet appended)
        #[arg(long)]
        out: Option<PathBuf>,
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
        /// The heatmap's two axes, columns then rows (default: the two with the most values)
        #[arg(long, value_parser = parse_axis_pair)]
        heatmap: Option<(String, String)>,
        /// Price per part for the Pareto front, e.g. nics=1500,switches=30000,gpus=25000
        /// (parts: gpus, servers, nics, switches, nvswitches, pcie_switches; default: one
        /// per NIC and per switch)
        #[arg(long, value_parser = parse_prices)]
        price: Option<Prices>,
    },
}

const GRID_HELP: &str = "A grid file:\n  \
    command = \"plan\"                      # plan, sim or plan-training\n  \
    where = \"size <= 64MiB or collective == allreduce\"   # optional; a list: all must hold\n  \
    zip = [[\"topo\", \"channels\"]]          # optional: axes that advance together\n  \
    [base]                                # options every point shares\n  \
    collective = \"allreduce\"\n  \
    algo = \"all\"\n  \
    [axes]                                # each a list or a geometric range\n  \
    topo = [\"rail:servers=8\", \"clos:k=8\"]\n  \
    channels = [1, 4]\n  \
    size = { from = \"1MiB\", to = \"1GiB\", factor = 4 }\n\n\
For plan and sim, [base] and the axes are the command's flags by name. For plan-training,\n\
[base] is the scenario and an axis is a dotted path into it (\"job.global_batch\").\n\
An axis may instead fill a {placeholder} in [base]'s strings: with\n\
topo = \"dgx-h100:nodes={nodes}\" in [base], the axis nodes = [4, 16] sets the preset's nodes.\n\
A where condition compares an axis with a value (==, !=, <, <=, >, >=; sizes, rates and\n\
times with units), `contains` text, or `in [a, b]`; join with and, or, not, ( ).\n\
Before any work, every value of every axis is built into a request and every topology\n\
is built: a bad value or a topology past its limits fails the grid, naming the point.\n\
Each point's record (its inputs, the command's JSON output with arrays of more than 64\n\
items left out, or its error; wall time) is appended to --out as it finishes; --resume\n\
skips the points already there (points in flight at a kill run again). Points are\n\
numbered over the axes sorted by name (a zipped group at its first axis), the last\n\
fastest; filtered points keep their numbers.\n\n\
Executors: local (every core), ray (each point a Ray task of the Python package, records\n\
streamed back: pip install ./python ray), slurm (an sbatch --array script of --shard\n\
tasks; `railyard sweep merge` joins them). The records are the same whichever ran them.\n\
The guide: docs/sweep.md.";

fn parse_axis_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once(',') {
        Some((x, y)) if !x.trim().is_empty() && !y.trim().is_empty() && !y.contains(',') => {
            Ok((x.trim().to_string(), y.trim().to_string()))
        }
        _ => Err(format!("{text:?}: give two axes, X,Y (e.g. size,topo)")),
    }
}

/// `--price`'s list, one value to clap.
#[derive(Debug, Clone)]
pub struct Prices(Vec<(String, f64)>);

fn parse_prices(text: &str) -> Result<Prices, String> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for item in text.split(',') {
        let (part, price) = item.split_once('=').ok_or_else(|| format!("{item:?}: give PART=PRICE, e.g. nics=1500"))?;
        let part = part.trim();
        if !report::PRICED_PARTS.contains(&part) {
            return Err(format!("{part:?}: not a part (parts: {})", report::PRICED_PARTS.join(", ")));
        }
        let price: f64 = price.trim().parse().map_err(|_| format!("{item:?}: the price is not a number"))?;
        if !price.is_finite() || price < 0.0 {
            return Err(format!("{item:?}: a price is a finite number of at least 0"));
        }
        if out.iter().any(|(p, _)| p == part) {
            return Err(format!("{part}: priced twice"));
        }
        out.push((part.to_string(), price));
    }
    Ok(Prices(out))
}

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
            if all.is_empty() {
                bail!("no records in {} files", files.len());
            }
            if out.exists() {
                bail!("{} exists; merge writes a new file", out.display());
            }
            let mut w = store::Writer::append(out)?;
            for r in all.values() {
                w.write(r)?;
            }
            Ok(format!("{} points from {} files into {}\n", all.len(), files.len(), out.display()))
        }
        Some(SweepAction::Export { results, format, out }) => export(results, *format, out.as_deref()),
        Some(SweepAction::Report { results, svg, top, heatmap, price }) => report::report(
            results,
            &report::Options {
                svg: svg.as_deref(),
                top: *top,
                heatmap: heatmap.clone(),
                prices: price.clone().map(|p| p.0).unwrap_or_default(),
            },
        ),
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
    // Shards take every N-th selected point, so filters leave them balanced.
    let selected = grid.selected()?;
    if selected.is_empty() {
        bail!("{}: the grid's where keeps none of its {total} points", path.display());
    }
    let mine: Vec<u64> =
        selected.iter().enumerate().filter(|(i, _)| *i as u64 % shards == shard).map(|(_, &p)| p).collect();
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
        return slurm(path, &out_path, args.shards, selected.len() as u64);
    }
    if args.executor != Executor::Ray && (args.address.is_some() || args.python.is_some()) {
        bail!("--address and --python are for --executor ray");
    }
    if args.jobs == Some(0) {
        bail!("--jobs 0: at least one point at a time");
    }
    // A mis-set grid fails before any work (an unknown flag, a value the command
    // refuses to parse, a topology past its limits).
    grid.check_values(&selected)?;
    let done = if args.resume {
        store::read(&out_path, true)?
    } else if out_path.exists() {
        bail!("{} exists: --resume to go on with it, or give another --out", out_path.display());
    } else {
        BTreeMap::new()
    };
    for r in done.values() {
        if r.grid != hash
            || r.point >= total
            || selected.binary_search(&r.point).is_err()
            || Grid::inputs_json(&grid.point(r.point)) != r.inputs
        {
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
    let mut ray = None;
    std::thread::scope(|s| -> Result<()> {
        if args.executor == Executor::Ray {
            ray = Some(ray::start(
                s,
                &ray::Options {
                    grid: path,
                    address: args.address.as_deref(),
                    python: args.python.as_deref(),
                    workers: jobs,
                },
                &todo,
                hash.clone(),
                tx,
            )?);
        } else {
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
        }
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
    if let Some(ray) = ray {
        ray.finish(finished, todo.len() as u64)?;
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
    if args.format != ResultFormat::Jsonl {
        let mut table = out_path.clone().into_os_string();
        table.push(format!(".{}", args.format.extension()));
        summary += &export(&out_path, args.format, Some(Path::new(&table)))?;
    }
    Ok(summary)
}

/// The records of `results` written as a CSV or Parquet table (`out`, or the results
/// file with the format's extension appended).
fn export(results: &Path, format: ResultFormat, out: Option<&Path>) -> Result<String> {
    let out = match out {
        Some(p) => p.to_path_buf(),
        None => {
            let mut p = results.to_path_buf().into_os_string();
            p.push(format!(".{}", format.extension()));
            PathBuf::from(p)
        }
    };
    if !results.is_file() {
        bail!("{}: no such results file", results.display());
    }
    // The same file by another name (./x, a link) would be emptied before it is read.
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y || same_inode(&x, &y),
        _ => false,
    };
    if out == results || same(&out, results) {
        bail!("--out {} is the results file itself; give another", out.display());
    }
    // Written beside, then renamed over `out`: a failure leaves no half table.
    let mut name = std::ffi::OsString::from(".");
    name.push(out.file_name().unwrap_or_default());
    name.push(format!(".tmp-{}", std::process::id()));
    let tmp = out.with_file_name(name);
    let rows = match format {
        ResultFormat::Csv => table::write_csv(results, &tmp, &report::metric),
        ResultFormat::Parquet => table::write_parquet(results, &tmp, &report::metric),
        ResultFormat::Jsonl => Err(anyhow::anyhow!("--format jsonl: the results file is already JSONL")),
    };
    let rows = rows.and_then(|rows| {
        std::fs::rename(&tmp, &out).with_context(|| format!("cannot write {}", out.display()))?;
        Ok(rows)
    });
    if rows.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(format!("{} points as {} in {}\n", rows?, format.extension(), out.display()))
}

/// Two paths naming one file (a hard link).
fn same_inode(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Point `point` of the grid `grid_text` run in this process: its record as one JSON
/// line (what the Ray executor's tasks return).
pub fn point_record(grid_text: &str, grid_dir: &Path, point: u64) -> Result<String> {
    let grid = Grid::parse(grid_text)?;
    if point >= grid.points() {
        bail!("point {point}: the grid has {} points", grid.points());
    }
    if !grid.is_selected(point)? {
        bail!("point {point}: left out by the grid's where");
    }
    let record = run_point(&grid, point, grid_dir, &store::grid_hash(grid_text));
    Ok(String::from_utf8(store::line(&record)?)?)
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

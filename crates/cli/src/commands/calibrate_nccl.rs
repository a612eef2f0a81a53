//! `railyard calibrate --nccl-tests`: fit a topology's achievable rates and start-up to
//! a user's nccl-tests outputs (`railyard_nccl::calibration`), write the topology with
//! them, and print each size's error before and after.

use std::path::Path;

use anyhow::{bail, Context, Result};
use railyard_nccl::calibration::{self, Calibration, Run};
use railyard_nccl::nccl_tests;
use railyard_nccl::validation::{Case, CaseResult, Point, LARGE_BYTES, SMALL_BYTES};
use railyard_topology::file::{write, FileFormat};
use railyard_topology::{Placement, PlacementPolicy, Topology};
use railyard_units::units::format_bytes;
use railyard_units::Table;
use serde::Serialize;

use super::calibrate::CalibrateArgs;
use crate::args::Format;

/// `spec` with as many nodes as `ranks` needs, where its machines hold fewer GPUs and
/// it is a preset (a file is taken as it is; too few GPUs is then the placement's error).
fn topology_for(spec: &str, base: &Topology, ranks: usize) -> Result<(String, Topology)> {
    let gpus = base.default_ranks.len();
    let is_file = Path::new(spec).extension().is_some_and(|e| e == "toml" || e == "json");
    if ranks <= gpus || is_file {
        return Ok((spec.to_string(), base.clone()));
    }
    let placement = Placement::new(base, &PlacementPolicy::Contiguous, None)?;
    let per_node = placement.ranks_by_server(base).first().map_or(1, Vec::len).max(1);
    let nodes = ranks.div_ceil(per_node);
    let (name, mut kept) = calibration::without_nodes(spec);
    let nodes_param = format!("nodes={nodes}");
    kept.insert(0, &nodes_param);
    let spec = format!("{name}:{}", kept.join(","));
    let topology = railyard_topology::load(&spec)
        .with_context(|| format!("{ranks} ranks need {nodes} nodes of {per_node} GPUs: {spec}"))?;
    Ok((spec, topology))
}

/// What the runs set of NCCL's environment: NCCL_ALGO and NCCL_PROTO.
struct RunEnv<'a> {
    nccl_algo: Option<&'a str>,
    nccl_proto: Option<&'a str>,
}

fn runs(files: &[std::path::PathBuf], spec: &str, base: &Topology, env: &RunEnv<'_>) -> Result<Vec<Run>> {
    files
        .iter()
        .map(|path| {
            let at = || path.display().to_string();
            let text = railyard_topology::file::read_text(path, nccl_tests::MAX_INPUT_BYTES).with_context(at)?;
            let output = nccl_tests::parse(&text, None, None).with_context(at)?;
            calibration::check_run(&path.display().to_string(), &output)?;
            let (topology_spec, topology) = topology_for(spec, base, output.ranks).with_context(at)?;
            let case = Case {
                file: path.display().to_string(),
                topology: topology_spec,
                ranks: None,
                placement: None,
                nccl_algo: env.nccl_algo.map(str::to_string),
                nccl_proto: env.nccl_proto.map(str::to_string),
                independent: true,
                why: String::new(),
            };
            Ok(Run { case, output, topology })
        })
        .collect()
}

#[derive(Serialize)]
struct Report<'a> {
    topology: &'a str,
    output: String,
    calibration: &'a Calibration,
    /// The --check files at the defaults and at the fitted rates.
    check_before: Vec<CaseResult>,
    check_after: Vec<CaseResult>,
}

pub fn run(args: &CalibrateArgs) -> Result<String> {
    let Some(spec) = args.topo.as_deref() else {
        bail!(
            "--nccl-tests needs --topo: the machines the runs were on (a preset such as dgx-h100, or a topology file)"
        )
    };
    // Every limit and path before anything is read.
    let files = args.nccl_tests.len() + args.check.len();
    if files > calibration::MAX_FILES {
        bail!("{files} files (--nccl-tests and --check together); at most {}", calibration::MAX_FILES);
    }
    let mut seen = std::collections::HashSet::new();
    for path in args.nccl_tests.iter().chain(&args.check) {
        let key = std::fs::canonicalize(path).with_context(|| path.display().to_string())?;
        if !seen.insert(key) {
            bail!("{} is given twice: its rows would count twice", path.display());
        }
    }
    let format = match args.output.extension().and_then(|e| e.to_str()) {
        Some("toml") => FileFormat::Toml,
        Some("json") => FileFormat::Json,
        _ => bail!("-o {}: the topology is written as .toml or .json", args.output.display()),
    };
    if let Ok(out) = std::fs::canonicalize(&args.output) {
        if seen.contains(&out) {
            bail!("-o {} is one of the nccl-tests files: it would be overwritten", args.output.display());
        }
    }
    let base = railyard_topology::load(spec).context("--topo")?;
    let env = RunEnv { nccl_algo: args.nccl_algo.as_deref(), nccl_proto: args.nccl_proto.as_deref() };
    let fitted_runs = runs(&args.nccl_tests, spec, &base, &env)?;
    let check_runs = runs(&args.check, spec, &base, &env)?;
    let calibration = calibration::calibrate(&fitted_runs, &base.achievable)?;
    let check_before = calibration::evaluate_with(&check_runs, &base.achievable)?;
    let check_after = calibration::evaluate_with(&check_runs, &calibration.achievable)?;
    let mut topology = base.clone();
    topology.achievable = calibration.achievable.clone();
    std::fs::write(&args.output, write(&topology, format)?)
        .with_context(|| format!("writing {}", args.output.display()))?;
    let report = Report {
        topology: spec,
        output: args.output.display().to_string(),
        calibration: &calibration,
        check_before,
        check_after,
    };
    match args.format {
        Format::Json => Ok(serde_json::to_string_pretty(&report)? + "\n"),
        Format::Md => Ok(markdown(&report)),
    }
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

fn spread(results: &[CaseResult], large: bool) -> String {
    calibration::errors_of(results, large)
        .map_or("-".into(), |e| format!("{:.1}% / {:.1}% ({} sizes)", e.median * 100.0, e.worst * 100.0, e.points))
}

fn summary_rows(t: &mut Table, label: &str, before: &[CaseResult], after: &[CaseResult]) {
    t.row([
        format!("{label}, at least {}", format_bytes(LARGE_BYTES as f64)),
        spread(before, true),
        spread(after, true),
    ]);
    t.row([
        format!("{label}, at most {}", format_bytes(SMALL_BYTES as f64)),
        spread(before, false),
        spread(after, false),
    ]);
}

fn rows_table(out: &mut String, before: &[CaseResult], after: &[CaseResult]) {
    for (b, a) in before.iter().zip(after) {
        out.push_str(&format!("\n### {} ({}, {} ranks, on {})\n\n", b.case.file, b.test, b.ranks, b.case.topology));
        let mut t = Table::new(["size", "measured", "default", "error", "calibrated", "error", "limited by"]);
        for (p, q) in b.points.iter().zip(&a.points) {
            let gb = |p: &Point| format!("{:.1}", p.expected);
            t.row([
                format_bytes(p.bytes as f64),
                format!("{:.1}", p.measured),
                gb(p),
                pct(p.error()),
                gb(q),
                pct(q.error()),
                q.limited_by.unwrap_or("-").to_string(),
            ]);
        }
        out.push_str(&t.render());
    }
}

fn markdown(r: &Report) -> String {
    let c = r.calibration;
    let mut out = format!(
        "# Calibration of {} from {} nccl-tests output(s)\n\nWritten: {} (its [achievable] table holds the fitted numbers; `railyard plan --topo {}` uses them).\n\n",
        r.topology,
        c.before.len(),
        r.output,
        r.output
    );
    let mut t = Table::new(["achievable", "default", "fitted", "rows that set it"]);
    for f in &c.fitted {
        let show = |v: f64| if f.field.starts_with("call") { format!("{:.1} us", v * 1e6) } else { format!("{v:.3}") };
        t.row([f.field.to_string(), show(f.default), show(f.fitted), f.rows.to_string()]);
    }
    out.push_str(&t.render());
    out.push_str(
        "\nFractions are of line rate; no row was limited by a fraction not listed, which keeps its default. \
         The start-up moves every protocol's per-call latency by the same amount.\n\n",
    );
    let mut s =
        Table::new(["busbw error (expected / measured − 1)", "default: median / worst", "calibrated: median / worst"]);
    summary_rows(&mut s, "fitted files", &c.before, &c.after);
    if !r.check_before.is_empty() {
        summary_rows(&mut s, "--check files", &r.check_before, &r.check_after);
    }
    out.push_str(&s.render());
    for note in &c.notes {
        out.push_str(&format!("\nNote: {note}.\n"));
    }
    out.push_str(
        "\n## Fitted files\n\nbusbw in GB/s; `limited by` is the achievable rate that sets the calibrated time.\n",
    );
    rows_table(&mut out, &c.before, &c.after);
    if !r.check_before.is_empty() {
        out.push_str("\n## Predicted with the fitted numbers (--check, not fitted)\n");
        rows_table(&mut out, &r.check_before, &r.check_after);
    }
    out
}

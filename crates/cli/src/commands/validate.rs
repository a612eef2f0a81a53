//! `railyard validate`: railyard's expected busbw against published nccl-tests runs
//! (`railyard_nccl::validation`; the cases in `corpus/validation.toml`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use railyard_nccl::calibration::{self, CrossCheck, Run};
use railyard_nccl::nccl_tests;
use railyard_nccl::validation::{self, CaseResult, Errors, Summary, LARGE_BYTES, SMALL_BYTES};
use railyard_units::units::format_bytes;
use railyard_units::Table;
use serde::Serialize;

use crate::args::Format;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard validate                                   # every case of corpus/validation.toml\n  \
    railyard validate --cases my-runs.toml --format json\n\n\
A cases file lists [[case]] tables: file (an nccl-tests output, relative to the cases\n\
file), topology (a preset or topology file for its machines), and optionally ranks,\n\
placement, nccl_algo and nccl_proto (NCCL_ALGO and NCCL_PROTO as the run set them),\n\
independent = false (a run one of railyard's constants came from: shown, not counted)\n\
and why. Per size: the measured busbw, railyard's expected busbw (the algorithm NCCL's\n\
tuner picks, as a schedule at the rates NCCL-class software reaches), its bound (at line\n\
rate), NCCL's tuner estimate, and the errors; then the median and worst over sizes of\n\
at least 64 MiB and at most 1 MiB.\n\n\
--leave-one-out calibrates on each counted case alone (as `railyard calibrate\n\
--nccl-tests` would) and predicts the other cases of its machine class (the same\n\
topology but for the node count) with the fitted numbers, beside the defaults.")]
pub struct ValidateArgs {
    /// The cases file
    #[arg(long, default_value = "corpus/validation.toml")]
    pub cases: PathBuf,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
    /// Calibrate on each case alone and predict the others of its machine class
    #[arg(long)]
    pub leave_one_out: bool,
}

/// The largest cases file read.
const MAX_CASES_BYTES: u64 = 1 << 20;

/// A cases file (`validate`'s or `validate-training`'s), bounded; its default path is
/// the repository's, so a miss says where to run from.
pub(crate) fn read_cases(path: &Path) -> Result<String> {
    railyard_topology::file::read_text(path, MAX_CASES_BYTES)
        .map_err(|e| anyhow::anyhow!("{e}: run from the repository's root, or give the cases file with --cases"))
}

pub fn run(args: &ValidateArgs) -> Result<String> {
    let text = read_cases(&args.cases)?;
    let cases = validation::parse_cases(&text).with_context(|| format!("{}", args.cases.display()))?;
    let root = args.cases.parent().unwrap_or(Path::new("."));
    let mut runs = Vec::with_capacity(cases.len());
    for case in &cases {
        let at = || format!("case {}", case.file);
        let path = root.join(&case.file);
        let output_text = railyard_topology::file::read_text(&path, nccl_tests::MAX_INPUT_BYTES).with_context(at)?;
        let output = nccl_tests::parse(&output_text, None, None).with_context(at)?;
        let topology = railyard_topology::load(&case.topology).with_context(at)?;
        runs.push(Run { case: case.clone(), output, topology });
    }
    if args.leave_one_out {
        runs.retain(|r| r.case.independent);
        let checks = calibration::leave_one_out(&runs)?;
        return match args.format {
            Format::Json => Ok(serde_json::to_string_pretty(&checks)? + "\n"),
            Format::Md => Ok(cross_checks(&checks)),
        };
    }
    let mut results = Vec::with_capacity(runs.len());
    for run in &runs {
        let at = || format!("case {}", run.case.file);
        results.push(validation::evaluate(&run.case, &run.output, &run.topology).with_context(at)?);
    }
    let summary = validation::summarize(&results);
    match args.format {
        Format::Json => {
            #[derive(Serialize)]
            struct Out<'a> {
                cases: &'a [CaseResult],
                summary: &'a Summary,
            }
            Ok(serde_json::to_string_pretty(&Out { cases: &results, summary: &summary })? + "\n")
        }
        Format::Md => Ok(markdown(&results, &summary)),
    }
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

fn errors_cell(e: Option<Errors>) -> String {
    e.map_or("-".into(), |e| format!("{:.1}% / {:.1}% ({} sizes)", e.median * 100.0, e.worst * 100.0, e.points))
}

fn markdown(results: &[CaseResult], summary: &Summary) -> String {
    let mut out = String::from("## Summary\n\n");
    let mut t =
        Table::new(["sizes", "railyard expected: median / worst |error|", "NCCL's tuner: median / worst |error|"]);
    t.row([
        format!("at least {}", format_bytes(LARGE_BYTES as f64)),
        errors_cell(summary.large),
        errors_cell(summary.nccl_large),
    ]);
    t.row([
        format!("at most {}", format_bytes(SMALL_BYTES as f64)),
        errors_cell(summary.small),
        errors_cell(summary.nccl_small),
    ]);
    out.push_str(&t.render());
    let counted = results.iter().filter(|r| r.case.independent).count();
    let others = match results.len() - counted {
        0 => String::new(),
        1 => "; the other sets one of railyard's constants".to_string(),
        _ => "; the others set one of railyard's constants".to_string(),
    };
    out.push_str(&format!(
        "\nCases: {} ({counted} counted{others}). Sizes measured faster than railyard's bound: {}.\n",
        results.len(),
        if summary.beats_bound.is_empty() {
            "none".to_string()
        } else {
            summary
                .beats_bound
                .iter()
                .map(|(f, b)| format!("{f} at {}", format_bytes(*b as f64)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    out.push_str("\n## Cases\n\nbusbw in GB/s; error = predicted / measured − 1.\n");
    for r in results {
        out.push_str(&format!(
            "\n### {} ({}, {} ranks{})\n\n{} on `{}`{}.\n\n",
            r.case.file,
            r.test,
            r.ranks,
            if r.case.independent { "" } else { "; not counted" },
            r.case.why,
            r.case.topology,
            r.case.nccl_algo.as_ref().map_or(String::new(), |a| format!(", NCCL_ALGO={a}"))
        ));
        let mut t = Table::new(["size", "measured", "railyard expects", "error", "bound", "NCCL's tuner", "error"]);
        for p in &r.points {
            t.row([
                format_bytes(p.bytes as f64),
                format!("{:.1}", p.measured),
                format!("{:.1} ({}, {})", p.expected, p.algorithm, p.protocol),
                pct(p.error()),
                format!("{:.1}", p.bound),
                p.nccl.map_or("-".into(), |n| format!("{n:.1}")),
                p.nccl_error().map_or("-".into(), pct),
            ]);
        }
        out.push_str(&t.render());
    }
    out
}

/// The leave-one-out table, and the median over every prediction of the medians.
fn cross_checks(checks: &[CrossCheck]) -> String {
    let mut out = String::from(
        "## Leave-one-out: calibrated on one run, the machine class's other runs predicted\n\n\
         busbw error median / worst over the other runs' sizes, at NCCL's defaults and with the numbers fitted \
         to the one run (`railyard calibrate --nccl-tests`).\n\n",
    );
    let mut t = Table::new([
        "machine class",
        "fitted on",
        "runs predicted",
        "≥ 64 MiB: default",
        "≥ 64 MiB: fitted",
        "≤ 1 MiB: default",
        "≤ 1 MiB: fitted",
    ]);
    for c in checks {
        t.row([
            c.class.clone(),
            c.fitted_on.rsplit('/').next().unwrap_or(&c.fitted_on).to_string(),
            c.predicted.to_string(),
            errors_cell(c.default_large),
            c.refused.as_ref().map_or_else(|| errors_cell(c.fitted_large), |_| "refused".into()),
            errors_cell(c.default_small),
            c.refused.as_ref().map_or_else(|| errors_cell(c.fitted_small), |_| "refused".into()),
        ]);
    }
    out.push_str(&t.render());
    for c in checks.iter().filter(|c| c.refused.is_some()) {
        out.push_str(&format!("\nRefused, fitted on {}: {}.\n", c.fitted_on, c.refused.as_deref().unwrap_or("-")));
    }
    let median_of = |pick: fn(&CrossCheck) -> Option<Errors>| {
        let medians = checks.iter().filter_map(|c| pick(c).map(|e| e.median)).collect();
        railyard_units::stats::median(medians).map_or("-".to_string(), |m| format!("{:.1}%", m * 100.0))
    };
    out.push_str(&format!(
        "\nMedian of the per-calibration medians: at least 64 MiB {} at the defaults, {} fitted; at most 1 MiB {} at \
         the defaults, {} fitted ({} calibrations).\n",
        median_of(|c| c.default_large),
        median_of(|c| c.fitted_large),
        median_of(|c| c.default_small),
        median_of(|c| c.fitted_small),
        checks.len()
    ));
    out
}

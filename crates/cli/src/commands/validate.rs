//! `railyard validate`: railyard's expected busbw against published nccl-tests runs
//! (`railyard_nccl::validation`; the cases in `corpus/validation.toml`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
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
placement, nccl_algo (NCCL_ALGO as the run set it), independent = false (a run one of\n\
railyard's constants came from: shown, not counted) and why. Per size: the measured\n\
busbw, railyard's expected busbw (NCCL's algorithms as schedules at the rates\n\
NCCL-class software reaches), its bound (at line rate), NCCL's tuner estimate, and the\n\
errors; then the median and worst over sizes of at least 64 MiB and at most 1 MiB.")]
pub struct ValidateArgs {
    /// The cases file
    #[arg(long, default_value = "corpus/validation.toml")]
    pub cases: PathBuf,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

/// The largest cases file read.
const MAX_CASES_BYTES: u64 = 1 << 20;

pub fn run(args: &ValidateArgs) -> Result<String> {
    let text = railyard_topology::file::read_text(&args.cases, MAX_CASES_BYTES)?;
    let cases = validation::parse_cases(&text).with_context(|| format!("{}", args.cases.display()))?;
    let root = args.cases.parent().unwrap_or(Path::new("."));
    let mut results = Vec::with_capacity(cases.len());
    for case in &cases {
        let at = || format!("case {}", case.file);
        let path = root.join(&case.file);
        let output_text = railyard_topology::file::read_text(&path, nccl_tests::MAX_INPUT_BYTES).with_context(at)?;
        let output = nccl_tests::parse(&output_text, None, None).with_context(at)?;
        let topology = railyard_topology::load(&case.topology).with_context(at)?;
        results.push(validation::evaluate(case, &output, &topology).with_context(at)?);
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
    out.push_str(&format!(
        "\nCases: {} ({} counted; the others set one of railyard's constants). Sizes measured faster than \
         railyard's bound: {}.\n",
        results.len(),
        results.iter().filter(|r| r.case.independent).count(),
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

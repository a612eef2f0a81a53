//! `railyard validate-training`: railyard's predicted training throughput against
//! published runs (`railyard_planner::job::validation`; the cases in
//! `corpus/training.toml`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use railyard_planner::job::validation::{self, CaseResult, Summary};
use serde::Serialize;

use crate::args::Format;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard validate-training                          # every case of corpus/training.toml\n  \
    railyard validate-training --cases my-runs.toml --format json\n\n\
A cases file lists [[case]] tables: name, source, metric (model_tflops_per_gpu or\n\
hardware_tflops_per_gpu, as the source counts), published, and [case.job], a job as\n\
plan-training's [job] takes it with the published layout. Each job is planned on its\n\
topology and the predicted throughput compared: the error per case, the median and worst.")]
pub struct ValidateTrainingArgs {
    /// The cases file
    #[arg(long, default_value = "corpus/training.toml")]
    pub cases: PathBuf,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

pub fn run(args: &ValidateTrainingArgs) -> Result<String> {
    let text = super::validate::read_cases(&args.cases)?;
    let cases = validation::parse_cases(&text).with_context(|| format!("{}", args.cases.display()))?;
    let mut results = Vec::with_capacity(cases.len());
    for case in &cases {
        let at = || format!("case {}", case.name);
        let topology = railyard_topology::load(&case.job.topo).with_context(at)?;
        results.push(validation::evaluate_case(case, &topology).with_context(at)?);
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
        Format::Md => Ok(validation::markdown(&results, &summary)),
    }
}

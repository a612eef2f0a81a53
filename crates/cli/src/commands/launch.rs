//! `railyard launch -n N -- PROG ARGS`: N local ranks of a program, started and managed
//! by railyard's job supervisor (`railyard_launch`: launcher variables, the first failure
//! stops the job, signals passed on, leftovers stopped, output in whole lines).

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use railyard_launch::{run_job, Job, Output, MAX_RANKS};

use crate::ranks::{exit_with, report_leftovers};

#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// Ranks to start
    #[arg(short = 'n', long = "np")]
    pub np: usize,
    /// Stop the job (exit code 124) if it runs longer than this many seconds
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Start every line of the ranks' standard output with `[rank N] ` too (standard
    /// error's lines always are); either way each line comes out whole
    #[arg(long)]
    pub prefix: bool,
    /// The program and its arguments (after --)
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub fn run(args: &LaunchArgs) -> Result<String> {
    if args.np == 0 || args.np > MAX_RANKS {
        bail!("-n must be 1..={MAX_RANKS}");
    }
    let timeout = match args.timeout {
        Some(t) if !(t > 0.0 && t <= 1e7) => bail!("--timeout must be 0..=1e7 seconds (got {t})"),
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
    let (program, rest) = args.command.split_first().context("nothing to launch")?;
    let job = Job {
        timeout,
        stdout: Output::Lines { prefix: args.prefix },
        ..Job::new(args.np, std::ffi::OsStr::new(program), rest)
    };
    let outcome = run_job(&job)?;
    report_leftovers(outcome.leftovers.as_deref());
    match outcome.failure {
        Some((reason, code)) => exit_with(&reason.replace("the timeout of", "--timeout"), code),
        None => Ok(String::new()),
    }
}

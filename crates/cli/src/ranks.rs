//! Jobs this program runs as its own ranks (`perf --np`, `calibrate --np`): N copies of
//! this binary under railyard's job supervisor, rank 0's output ours; and the launcher's
//! edge, where a job's failure becomes this process's exit code.

use std::io::Write;

use anyhow::{Context, Result};

/// Say why the job stopped and exit with its code (the CLI's edge: the code is the rank's).
pub fn exit_with(reason: &str, code: i32) -> ! {
    let _ = std::io::stdout().flush();
    eprintln!("error: {reason}");
    std::process::exit(code)
}

/// Say what the ranks left behind, if anything.
pub fn report_leftovers(leftovers: Option<&str>) {
    if let Some(text) = leftovers {
        eprintln!("railyard: {text}");
    }
}

/// The command line without `--np N` / `--np=N`.
pub fn strip_np(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
        } else if a == "--np" {
            skip = true;
        } else if !a.starts_with("--np=") {
            out.push(a);
        }
    }
    out
}

/// Start `np` copies of this program as ranks of one job; rank 0's output is ours. The
/// job is managed as `railyard launch` manages one: the first rank to fail stops the
/// others and its exit code is ours; signals reach every rank; ranks die with us.
pub fn spawn_ranks(np: usize, args: &[String]) -> Result<String> {
    let exe = std::env::current_exe().context("cannot find this program to start ranks")?;
    // Ranks that fit the cores are pinned, as Open MPI binds them (unless the caller chose).
    let pin = std::env::var("RAILYARD_PIN").unwrap_or_else(|_| "1".into());
    let job = railyard_launch::Job {
        env: vec![("RAILYARD_PIN".into(), pin)],
        stdout: railyard_launch::Output::CaptureRank0,
        ..railyard_launch::Job::new(np, exe.as_os_str(), args)
    };
    let outcome = railyard_launch::run_job(&job)?;
    report_leftovers(outcome.leftovers.as_deref());
    if let Some((reason, code)) = outcome.failure {
        print!("{}", outcome.rank0_stdout);
        exit_with(&reason, code);
    }
    Ok(outcome.rank0_stdout)
}

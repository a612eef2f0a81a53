//! `railyard launch -n N -- PROG ARGS`: start N local ranks with the variables launchers
//! set (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and railyard's own
//! (RAILYARD_ID with a fresh secret, RAILYARD_RANK, RAILYARD_WORLD_SIZE).

use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use clap::Args;
use railyard_runtime::UniqueId;

#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// Ranks to start
    #[arg(short = 'n', long = "np")]
    pub np: usize,
    /// The program and its arguments (after --)
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub fn run(args: &LaunchArgs) -> Result<String> {
    if args.np == 0 || args.np > 256 {
        bail!("-n must be 1..=256");
    }
    let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let id = UniqueId::new(addr)?;
    let (program, rest) = args.command.split_first().context("nothing to launch")?;
    let mut children = Vec::new();
    for rank in 0..args.np {
        let child = Command::new(program)
            .args(rest)
            .env("RANK", rank.to_string())
            .env("WORLD_SIZE", args.np.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("MASTER_ADDR", addr.ip().to_string())
            .env("MASTER_PORT", addr.port().saturating_sub(1).to_string())
            .env("RAILYARD_ID", id.to_string())
            .env("RAILYARD_RANK", rank.to_string())
            .env("RAILYARD_WORLD_SIZE", args.np.to_string())
            .env("RAILYARD_LOCAL_RANK", rank.to_string())
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {program} as rank {rank}"))?;
        children.push(child);
    }
    let mut failed = Vec::new();
    for (rank, mut c) in children.into_iter().enumerate() {
        if !c.wait()?.success() {
            failed.push(rank);
        }
    }
    if failed.is_empty() {
        Ok(String::new())
    } else {
        bail!("ranks {failed:?} exited with an error")
    }
}

//! `railyard calibrate`: measure α and bandwidth of each transport the job uses and write
//! a topology file describing the cluster as it is, so `railyard plan` predicts what
//! `railyard perf` measures. Rank 0 ping-pongs with every other rank (point to point, the
//! rest idle) at a small and two large sizes: α = the small size's one-way time,
//! bandwidth = (large₂ − large₁) / (t₂ − t₁), each time the median of timed round trips. Pairs on one host measure shared memory,
//! pairs across hosts TCP.
//!
//! The topology: per host a hub standing for shared memory (each rank's link to it at the
//! shared-memory bandwidth) and one NIC at the network bandwidth, all NICs on one switch.
//! The per-round start-up α is the slowest transport's (the model has one α per round).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use railyard_runtime::{from_env, Communicator, Config, RedOp};
use railyard_topology::file::{write, FileFormat};
use railyard_topology::presets::{hosts, Transport, HOST_COSTS};
use serde::Serialize;

#[derive(Debug, Args, Clone)]
#[command(after_help = "Examples:\n  \
    railyard calibrate --np 4                                   # this machine's transports\n  \
    railyard calibrate --nccl-tests my-1node.txt --topo dgx-h100 -o my-h100.toml\n  \
    railyard calibrate --nccl-tests a.txt b.txt --topo dgx-h100 --check my-4node.txt\n\n\
With --nccl-tests, no ranks run: the achievable rates of --topo's link classes (the\n\
share of line rate NCCL-class software reaches on NVLink, PCIe, NICs, NVLS, SHARP) and\n\
the per-call start-up are fitted to your nccl-tests outputs, and the topology is written\n\
with them in its [achievable] table: --topo as given, so dgx-h100:nodes=16 writes the\n\
16-node machine. Each file runs on --topo with as many nodes as its rank count needs (a\n\
machine preset's nodes=N); --check files are predicted with the fitted numbers, not\n\
fitted. Sizes of at least 64 MiB fit the rates (each by the link class that limits it),\n\
sizes from 4 KiB to 64 KiB the start-up; every size's error is printed before and after.\n\
Runs of all_reduce, all_gather, reduce_scatter, broadcast and reduce, up to 1,024 ranks\n\
and 64 files; a rate that fits at line rate (the topology undercounts the hardware) or\n\
near zero (a broken run) is refused.")]
pub struct CalibrateArgs {
    /// nccl-tests outputs to fit the topology's achievable rates to (no ranks run)
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub nccl_tests: Vec<std::path::PathBuf>,
    /// With --nccl-tests: the machines they ran on (a machine preset, e.g. dgx-h100, or a topology file)
    #[arg(long, requires = "nccl_tests")]
    pub topo: Option<String>,
    /// With --nccl-tests: more nccl-tests outputs, predicted with the fitted rates but not fitted to
    #[arg(long, num_args = 1.., value_name = "FILE", requires = "nccl_tests")]
    pub check: Vec<std::path::PathBuf>,
    /// With --nccl-tests: NCCL_ALGO as the runs set it (e.g. Ring), so only those algorithms are weighed
    #[arg(long, requires = "nccl_tests")]
    pub nccl_algo: Option<String>,
    /// With --nccl-tests: NCCL_PROTO as the runs set it (e.g. LL128, ^LL), so only those protocols are weighed
    #[arg(long, requires = "nccl_tests")]
    pub nccl_proto: Option<String>,
    /// With --nccl-tests: md (tables) or json
    #[arg(long, value_enum, default_value = "md", requires = "nccl_tests")]
    pub format: crate::args::Format,
    /// Start this many local ranks as processes (else run under a launcher)
    #[arg(long)]
    pub np: Option<usize>,
    /// Write the measured topology here (.toml or .json)
    #[arg(short, long, default_value = "calibrated.toml")]
    pub output: std::path::PathBuf,
    /// Round trips per size
    #[arg(short = 'n', long, default_value_t = 20)]
    pub iters: u32,
}

#[derive(Debug, Clone, Copy, Serialize)]
struct Link {
    alpha_secs: f64,
    bytes_per_sec: f64,
}

/// Round trips before timing: the first ones find the peer asleep in its wait or the
/// connection cold (one 9 ms first round trip made a 20-sample mean α 450 µs).
const WARMUP_ROUND_TRIPS: u32 = 3;

/// One-way time of `bytes` between rank 0 and `peer`: the median of `iters` timed round
/// trips (halved), after a warm-up; the median, not the mean, so one descheduled round
/// trip on a shared machine does not set α.
fn ping_pong(comm: &mut Communicator, peer: usize, bytes: usize, iters: u32) -> Result<f64> {
    let mut buf = vec![0u8; bytes];
    let me = comm.rank();
    let mut times = Vec::with_capacity(iters as usize);
    for i in 0..WARMUP_ROUND_TRIPS + iters.max(1) {
        let t0 = Instant::now();
        if me == 0 {
            comm.send(&buf, peer)?;
            comm.recv(&mut buf, peer)?;
        } else {
            comm.recv(&mut buf, 0)?;
            comm.send(&buf, 0)?;
        }
        if i >= WARMUP_ROUND_TRIPS {
            times.push(t0.elapsed().as_secs_f64() / 2.0);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn rank_body(args: &CalibrateArgs, comm: &mut Communicator) -> Result<Option<String>> {
    let (me, size) = (comm.rank(), comm.size());
    let (small, big1, big2) = (8usize, 1usize << 20, 4usize << 20);
    // (peer, transport, link) measured by rank 0.
    let mut measured: Vec<(usize, &'static str, Link)> = Vec::new();
    for peer in 1..size {
        if me == 0 || me == peer {
            let a = ping_pong(comm, peer, small, args.iters)?;
            let t1 = ping_pong(comm, peer, big1, args.iters.div_ceil(4))?;
            let t2 = ping_pong(comm, peer, big2, args.iters.div_ceil(4))?;
            let bw = if t2 > t1 { (big2 - big1) as f64 / (t2 - t1) } else { big2 as f64 / t2 };
            if me == 0 {
                measured.push((peer, comm.transports()[peer], Link { alpha_secs: a, bytes_per_sec: bw }));
            }
        }
    }
    comm.barrier()?;
    let mut done = [0.0f64];
    comm.all_reduce_in_place(&mut done, RedOp::Sum)?;
    if me != 0 {
        return Ok(None);
    }
    let pick = |kind: &str| -> Option<Link> {
        let ls: Vec<Link> = measured.iter().filter(|m| m.1 == kind).map(|m| m.2).collect();
        (!ls.is_empty()).then(|| Link {
            alpha_secs: ls.iter().map(|l| l.alpha_secs).sum::<f64>() / ls.len() as f64,
            bytes_per_sec: ls.iter().map(|l| l.bytes_per_sec).sum::<f64>() / ls.len() as f64,
        })
    };
    let (shm, tcp) = (pick("shm"), pick("tcp"));
    let groups = comm.groups().to_vec();
    let alpha = [shm, tcp].iter().flatten().map(|l| l.alpha_secs).fold(0.0, f64::max);
    let description = format!(
        "measured by railyard calibrate: {} hosts, {size} ranks; shared memory {}, network {}",
        groups.len(),
        shm.map_or("-".into(), |l| format!("{:.3} us, {:.3} GB/s", l.alpha_secs * 1e6, l.bytes_per_sec / 1e9)),
        tcp.map_or("-".into(), |l| format!("{:.3} us, {:.3} GB/s", l.alpha_secs * 1e6, l.bytes_per_sec / 1e9)),
    );
    let as_transport = |l: Link| Transport { alpha_secs: l.alpha_secs, bytes_per_sec: l.bytes_per_sec };
    // A host with one rank has no shared-memory measurement: its hub is then never the bottleneck.
    let shm_t = shm.map_or(Transport { alpha_secs: 0.0, bytes_per_sec: 1e12 }, as_transport);
    let topology = hosts("calibrated", &groups, shm_t, tcp.map(as_transport), HOST_COSTS, description)?;
    let format = if args.output.extension().is_some_and(|e| e == "json") { FileFormat::Json } else { FileFormat::Toml };
    std::fs::write(&args.output, write(&topology, format)?)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    let mut out = format!("# railyard calibrate: {size} ranks on {} host(s)\n\n| peer of rank 0 | transport | α (one way) | bandwidth |\n|---|---|---|---|\n", groups.len());
    for (peer, kind, l) in &measured {
        out.push_str(&format!(
            "| {peer} | {kind} | {:.2} us | {:.3} GB/s |\n",
            l.alpha_secs * 1e6,
            l.bytes_per_sec / 1e9
        ));
    }
    out.push_str(&format!(
        "\nWrote {} (α per round {:.2} us). Try: railyard plan --topo {} --size 4MiB\n",
        args.output.display(),
        alpha * 1e6,
        args.output.display()
    ));
    Ok(Some(out))
}

pub fn run(args: &CalibrateArgs) -> Result<String> {
    let config = Config::from_env()?;
    if let Some(launch) = from_env()? {
        let mut comm = Communicator::init(&launch.id, launch.rank, launch.size, config)?;
        return Ok(rank_body(args, &mut comm)?.unwrap_or_default());
    }
    match args.np {
        Some(np) if (2..=64).contains(&np) => {
            crate::ranks::spawn_ranks(np, &crate::ranks::strip_np(std::env::args().skip(1).collect()))
        }
        _ => bail!("calibrate needs at least two ranks: --np N (2..=64) or a launcher"),
    }
}

//! `railyard schedule import --msccl FILE`: an MSCCL XML algorithm as a railyard
//! schedule, proved by the symbolic checker and costed on a topology beside railyard's own;
//! `export` writes one of railyard's as MSCCL XML; `show` and `check` live in
//! `schedule_show.rs`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use railyard_model::request::{msccl_count, AlgorithmSpec};
use railyard_model::{gen_options, plan_on, CollectiveRequest};
use railyard_schedule::{msccl, Collective};
use railyard_topology::{Placement, PlacementPolicy};
use railyard_units::units::{format_bytes, format_secs};
use railyard_units::Table;
use serde::Serialize;

use crate::args::{model_error, parse_size, Format, TopologyArgs};

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Read an MSCCL XML algorithm: check it, cost it on a topology beside railyard's algorithms
    Import(ImportArgs),
    /// Write one of railyard's algorithms as an MSCCL XML algorithm (one chunk per element)
    Export(ExportArgs),
    /// Print an algorithm's schedule: round by round, who sends which chunk to whom, copied
    /// or reduced (--svg draws it; --format json is the schedule itself)
    Show(super::schedule_show::ShowArgs),
    /// Prove an algorithm correct and deadlock-free at each rank count asked
    Check(super::schedule_show::CheckArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard schedule export --msccl --algo ring --ranks 8 -o ring8.xml\n  \
    railyard schedule export --msccl --algo rhd --ranks 16 --chunks-per-rank 2\n\n\
Each rank gets a thread block per peer, direction and channel (send `s`; receive `r`, or\n\
`rrc` where the transfer reduces) and one for local copies and reductions; steps that wait\n\
on other blocks get `nop` steps naming them. `schedule import --msccl` reads it back.")]
pub struct ExportArgs {
    /// Write MSCCL XML (the only format written)
    #[arg(long)]
    pub msccl: bool,
    #[command(flatten)]
    pub schedule: super::schedule_show::ScheduleArgs,
    /// Write to this file instead of standard output
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard schedule import --msccl samples/msccl/allreduce_ring_8gpu.xml\n  \
    railyard schedule import --msccl algo.xml --topo a100-pcie-control --size 64MiB --format json\n  \
    railyard plan --ranks 8 --algo ring,samples/msccl/allreduce_ring_8gpu.xml   # in plan's table\n\n\
The checker proves the program on one element per chunk (it follows every element);\n\
the model costs it at --size, rounded down to a whole number of chunks.")]
pub struct ImportArgs {
    /// The MSCCL XML algorithm (msccl-tools' output)
    #[arg(long)]
    pub msccl: PathBuf,
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Size of the large buffer to cost it at
    #[arg(long, default_value = "192MiB", value_parser = parse_size)]
    pub size: u64,
    /// The collective a coll="custom" program implements (msccl-tools' solver writes its
    /// broadcasts and reduces so): allreduce, allgather, reducescatter, alltoall,
    /// broadcast, reduce. Other programs say their own.
    #[arg(long)]
    pub collective: Option<Collective>,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

fn read(path: &Path) -> Result<String> {
    Ok(railyard_topology::file::read_text(path, msccl::MAX_XML_BYTES as u64)?)
}

#[derive(Serialize)]
struct Report<'a> {
    name: &'a str,
    collective: &'static str,
    gpus: usize,
    /// A broadcast's or reduce's root (the file's, else the GPU its steps show).
    #[serde(skip_serializing_if = "Option::is_none")]
    root: Option<usize>,
    chunks: u64,
    in_place: bool,
    protocol: &'a str,
    channels: usize,
    steps: usize,
    topology: &'a str,
    /// The program costed beside railyard's algorithms, or why it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    costed: Option<Costed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_costed: Option<String>,
}

#[derive(Serialize)]
struct Costed {
    rounds: usize,
    /// Passes of MSCCL's loop over the buffer (each moving `pass_bytes` of every chunk).
    passes: usize,
    pass_bytes: u64,
    bytes: u64,
    secs: f64,
    bottleneck: Option<String>,
    railyard: Vec<(String, f64)>,
}

fn export(a: &ExportArgs) -> Result<String> {
    if !a.msccl {
        bail!("say the format: --msccl (MSCCL XML is the only one written)");
    }
    if !(2..=1024).contains(&a.schedule.ranks) || !(1..=64).contains(&a.schedule.chunks_per_rank) {
        bail!("--ranks 2 to 1024 and --chunks-per-rank 1 to 64");
    }
    let spec = railyard_schedule::CollectiveSpec::new(
        a.schedule.collective,
        a.schedule.ranks,
        a.schedule.ranks as u64 * a.schedule.chunks_per_rank,
    );
    // Checked before the schedule is made and expanded, which the bound keeps small.
    if spec.ranks as u64 * spec.count > msccl::MAX_EXPORT_RANK_ELEMENTS {
        bail!(
            "{} ranks x {} chunks: export follows at most {} chunk copies; fewer ranks or chunks per rank",
            spec.ranks,
            spec.count,
            msccl::MAX_EXPORT_RANK_ELEMENTS
        );
    }
    let schedule = railyard_schedule::generate_compact(
        a.schedule.algo,
        &spec,
        &gen_options(a.schedule.algo, 1, 1, None, vec![], Default::default()),
        4,
    )?
    .expand();
    let xml = msccl::export(&schedule)?;
    match &a.output {
        Some(path) => {
            std::fs::write(path, &xml).with_context(|| format!("cannot write {}", path.display()))?;
            Ok(format!(
                "wrote {} ({} over {} ranks, {} chunks)\n",
                path.display(),
                a.schedule.algo,
                a.schedule.ranks,
                spec.count
            ))
        }
        None => Ok(xml),
    }
}

pub fn run(cmd: &ScheduleCommand) -> Result<String> {
    let a = match cmd {
        ScheduleCommand::Import(a) => a,
        ScheduleCommand::Export(a) => return export(a),
        ScheduleCommand::Show(a) => return super::schedule_show::show(a),
        ScheduleCommand::Check(a) => return super::schedule_show::check(a),
    };
    let topology = a.topology.load()?;
    let text = read(&a.msccl)?;
    let file = a.msccl.display().to_string();
    // Read and proved here for what it says of itself (its ranks place it); costed by plan
    // beside railyard's algorithms, on one-byte elements so --size is rounded only to
    // whole chunks.
    let (info, problem) = super::schedule_show::read_msccl(&file, &text, a.size, a.collective)?;
    if let Some(p) = &problem {
        bail!("{file}: the symbolic checker refuses it, so it is not costed: {p}");
    }
    // What the program is and that it is correct does not depend on the machines; its
    // cost does, and a topology too small for it is said, not an error.
    let costed = match Placement::new(&topology, &PlacementPolicy::Contiguous, Some(info.gpus)) {
        Err(e) => Err(format!(
            "{e}; give --topo with at least {} GPUs (e.g. rail:servers={})",
            info.gpus,
            info.gpus.div_ceil(8)
        )),
        Ok(placement) => {
            let bytes = msccl_count(info.chunks, a.size, 1).map_err(model_error)?;
            let mut request = CollectiveRequest::all(info.collective, bytes, 1);
            request.root = info.root;
            request.algorithms.push(AlgorithmSpec::Msccl { file, text: text.into() });
            let planned = plan_on(&topology, &placement, &request).map_err(model_error)?;
            let (programs, ours): (Vec<_>, Vec<_>) =
                planned.algorithms.iter().partition(|b| b.algorithm.builtin().is_none());
            let program = programs.first().context("plan returned no cost of the program")?;
            Ok(Costed {
                rounds: program.rounds,
                passes: program.pipeline_chunks.unwrap_or(1),
                pass_bytes: railyard_schedule::msccl::pass_bytes(&info.protocol),
                bytes,
                secs: program.total_secs,
                bottleneck: program.bottleneck.as_ref().map(|x| x.resource.clone()),
                railyard: ours
                    .iter()
                    .map(|x| {
                        (
                            railyard_model::algorithm_ref::shaped_name(&x.name, x.pipeline_chunks, x.channels),
                            x.total_secs,
                        )
                    })
                    .collect(),
            })
        }
    };
    let report = Report {
        name: &info.name,
        collective: info.collective.as_str(),
        gpus: info.gpus,
        root: info.collective.rooted().then_some(info.root),
        chunks: info.chunks,
        in_place: info.in_place,
        protocol: &info.protocol,
        channels: info.channels,
        steps: info.steps,
        topology: &topology.name,
        not_costed: costed.as_ref().err().cloned(),
        costed: costed.ok(),
    };
    match a.format {
        Format::Json => Ok(serde_json::to_string_pretty(&report)? + "\n"),
        Format::Md => {
            let mut out = format!(
                "# MSCCL {} ({}): {} over {} GPUs\n\n",
                report.name,
                a.msccl.display(),
                report.collective,
                report.gpus
            );
            if let Some(root) = report.root {
                out.push_str(&format!("Root: GPU {root}.\n"));
            }
            out.push_str(&format!(
                "{} chunks, {} channels, {} steps, {}, protocol {}.\n\n",
                report.chunks,
                report.channels,
                report.steps,
                if report.in_place { "in place" } else { "out of place" },
                report.protocol,
            ));
            out.push_str(
                "Symbolic checker: **correct** (every output element holds what the collective promises, and no two \
                 steps that nothing orders touch one chunk).\n\n",
            );
            match (&report.costed, &report.not_costed) {
                (None, why) => out.push_str(&format!("Not costed: {}.\n", why.as_deref().unwrap_or("-"))),
                (Some(c), _) => {
                    let passes = match c.passes {
                        1 => String::new(),
                        n => format!(
                            ", in {n} passes of MSCCL's loop over the buffer ({} of each chunk per pass under {}; \
                             a thread block starts a pass when it has ended the one before)",
                            format_bytes(c.pass_bytes as f64),
                            report.protocol
                        ),
                    };
                    out.push_str(&format!(
                        "{} rounds as a railyard schedule{passes}. On {} at {} (per-round model):\n\n",
                        c.rounds,
                        report.topology,
                        format_bytes(c.bytes as f64)
                    ));
                    let mut t = Table::new(["schedule", "time", "vs the MSCCL program"]);
                    t.row([format!("msccl:{}", report.name), format_secs(c.secs), "1.00x".into()]);
                    for (name, secs) in &c.railyard {
                        t.row([name.clone(), format_secs(*secs), format!("{:.2}x", secs / c.secs)]);
                    }
                    out.push_str(&t.render());
                    if let Some(bn) = &c.bottleneck {
                        out.push_str(&format!("\nThe MSCCL program's bottleneck: `{bn}`.\n"));
                    }
                }
            }
            Ok(out)
        }
    }
}

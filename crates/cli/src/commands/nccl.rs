//! `railyard explain-nccl` and `railyard analyze nccl-tests`: NCCL's own choice and
//! expectations (its tuner), beside railyard's model, on a topology.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use railyard_nccl::nccl_tests::{self, TestKind, TestsOutput};
use railyard_nccl::shape::{self, Overrides, Shape};
use railyard_nccl::tuner::{self, Arch, Coll};
use railyard_nccl::verdict::{self, Analysis, Verdict};
use railyard_schedule::Collective;
use railyard_topology::{Placement, PlacementPolicy, Topology};
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs};
use railyard_units::Table;
use serde::Serialize;

use crate::args::{parse_size, Format, TopologyArgs};

/// What NCCL's graph search would have found; each derived from the topology unless given.
#[derive(Debug, Clone, Args)]
pub struct TunerShapeArgs {
    /// GPU generation for NCCL's per-channel caps: volta, ampere, hopper, blackwell
    #[arg(long)]
    pub arch: Option<Arch>,
    /// NCCL's channels (a log's `N coll channels`; also NVLS's; default: 16 inside a node,
    /// and across nodes what its search finds through the NICs, NVLS keeping 16)
    #[arg(long)]
    pub channels: Option<usize>,
    /// Per-channel GB/s inside a node (a log's `Pattern ..., bw INTRA/INTER`)
    #[arg(long, allow_hyphen_values = true)]
    pub bw_intra: Option<f64>,
    /// Per-channel GB/s across nodes
    #[arg(long, allow_hyphen_values = true)]
    pub bw_inter: Option<f64>,
    /// NVLink SHARP (NVLS): on or off (default: on where GPUs sit on an NVSwitch, Hopper or newer)
    #[arg(long)]
    pub nvls: Option<OnOff>,
    /// CollNet enabled (NCCL_COLLNET_ENABLE=1)
    #[arg(long)]
    pub collnet: bool,
    /// NCCL_ALGO as NCCL reads it (e.g. `Ring,Tree`, `^NVLS`, `allreduce:tree;ring`)
    #[arg(long)]
    pub nccl_algo: Option<String>,
    /// NCCL_PROTO as NCCL reads it (e.g. `^LL128`, `Simple`)
    #[arg(long)]
    pub nccl_proto: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

impl TunerShapeArgs {
    fn shape(&self, t: &Topology, p: &Placement, collective: Collective) -> Result<Shape> {
        Ok(shape::shape(t, p, &self.overrides(collective)?)?)
    }

    /// The settings given, NCCL_ALGO and NCCL_PROTO read for `collective`.
    fn overrides(&self, collective: Collective) -> Result<Overrides> {
        let name = shape::nccl_function_name(collective);
        Ok(Overrides {
            arch: self.arch,
            channels: self.channels,
            bw_intra_gb_per_s: self.bw_intra,
            bw_inter_gb_per_s: self.bw_inter,
            nvls: self.nvls.map(|x| x == OnOff::On),
            collnet: self.collnet,
            algos: self.nccl_algo.as_deref().map(|s| shape::parse_algo_env(s, name)).transpose()?,
            protos: self.nccl_proto.as_deref().map(|s| shape::parse_proto_env(s, name)).transpose()?,
        })
    }
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard explain-nccl                                        # 192 MiB all-reduce on 2 x HGX H100\n  \
    railyard explain-nccl --size 64KiB --nccl-algo '^NVLS'\n  \
    railyard explain-nccl --topo rail:servers=4 --sweep 8B:4GiB\n  \
    railyard explain-nccl --channels 24 --bw-intra 20 --bw-inter 20   # from a log's Pattern line\n\n\
NCCL's tuner (src/graph/tuning.cc, NCCL 2.30.7): for each algorithm x protocol a latency\n\
and a bandwidth from its constant tables and the channels and per-channel bandwidth its\n\
graph search found; time = latency + bytes / bandwidth; the smallest wins. The channels\n\
and bandwidths are derived from the topology unless given (see the inputs printed).")]
pub struct ExplainArgs {
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// allreduce, allgather, reducescatter, broadcast, reduce
    #[arg(long, default_value = "allreduce")]
    pub collective: Collective,
    /// NCCL's nBytes: the whole buffer (n x per-rank for all-gather and reduce-scatter)
    #[arg(long, default_value = "192MiB", value_parser = parse_size)]
    pub size: u64,
    /// Ranks (default: every GPU of the topology)
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Where the ranks sit: contiguous (default), interleaved (round-robin over the
    /// servers: `--ranks 2 --placement interleaved` is one GPU on each of two), rail-aligned,
    /// or list:DEV,DEV,...
    #[arg(long, default_value = "contiguous")]
    pub placement: PlacementPolicy,
    /// Sizes FROM:TO, doubling: NCCL's pick per size and where it changes
    #[arg(long)]
    pub sweep: Option<String>,
    #[command(flatten)]
    pub shape: TunerShapeArgs,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum AnalyzeCommand {
    /// Read nccl-tests output: recompute algbw/busbw, and with --topo put NCCL's expected
    /// time and railyard's bound beside every size, with a verdict
    NcclTests(AnalyzeTestsArgs),
    /// Decode an NCCL_DEBUG=INFO log: ranks, hosts, rings, trees, transports, graph and
    /// tuning lines; the rings and trees as checked, costed railyard schedules
    NcclLog(AnalyzeLogArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard analyze nccl-log samples/nccl-log/hgx-2x8.log\n  \
    railyard analyze nccl-log run.log --topo cluster.toml --size 1GiB --format json\n\n\
Without --topo the cluster is taken as rail-optimized servers of the log's nodes and\n\
local ranks (`rail:servers=N,gpus=L`); give the topology `topo import` made of the same\n\
machines for real numbers.")]
pub struct AnalyzeLogArgs {
    /// The log (NCCL_DEBUG=INFO, any NCCL_DEBUG_SUBSYS; several ranks' lines may interleave)
    pub file: PathBuf,
    /// Topology to cost the rings and trees on
    #[arg(long)]
    pub topo: Option<String>,
    /// All-reduce size to cost them with
    #[arg(long, default_value = "192MiB", value_parser = parse_size)]
    pub size: u64,
    /// GPU generation for NCCL's tuner when checking the log's tuning lines
    #[arg(long, default_value = "hopper")]
    pub arch: Arch,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard analyze nccl-tests samples/nccl-tests/seed-000-8.8.txt --collective allreduce\n  \
    railyard analyze nccl-tests run.txt --topo rail:servers=2 --format json\n\n\
Verdicts against railyard's expected time (NCCL's algorithms as schedules, at the rates\n\
NCCL-class software reaches on the topology's links; `--nccl-algo` names those the run was\n\
told to use): `as expected` within 1.25x; `slow` above; `faster than expected` below;\n\
`faster than the model allows` below railyard's bound (every algorithm at line rate): the\n\
topology given is slower than the machine measured. NCCL's own tuner estimate is shown\n\
beside them.")]
pub struct AnalyzeTestsArgs {
    /// nccl-tests standard output (any *_perf binary). A file of several tests one
    /// after another is read as several: each analyzed in turn (JSON: {"tests": [...]})
    pub file: PathBuf,
    /// The test, where the output has no `# Collective test starting` line:
    /// allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv (in a
    /// file of several tests, for every one of them)
    #[arg(long)]
    pub collective: Option<String>,
    /// Ranks, where the output has no `#  Rank` lines (else inferred from size / count or busbw/algbw; in a
    /// file of several tests, for every one of them)
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Topology to compare with (a preset, or a file `topo import` made of the same machines)
    #[arg(long)]
    pub topo: Option<String>,
    /// Where the ranks sit on the topology's GPUs: contiguous, interleaved (round-robin over
    /// its servers), rail-aligned, or list:DEV,DEV,... (default: as the output's rank lines
    /// place them, host by host, else contiguous)
    #[arg(long)]
    pub placement: Option<PlacementPolicy>,
    #[command(flatten)]
    pub shape: TunerShapeArgs,
    /// Draw measured, NCCL-expected and railyard-bound busbw per size
    #[arg(long)]
    pub svg: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

/// Where the output's rank lines put ranks (host h's i-th device on server h's i-th GPU),
/// else the first GPUs in order.
fn placement_from_ranks(t: &Topology, o: &TestsOutput, ranks: usize) -> Result<Placement> {
    if o.hosts.len() < 2 || o.devices.len() != ranks {
        return placement(t, Some(ranks));
    }
    let all = placement(t, None)?;
    let servers = all.ranks_by_server(t);
    let mut devices = Vec::with_capacity(ranks);
    let mut per_host: Vec<usize> = vec![0; o.hosts.len()];
    let mut by_rank: Vec<&railyard_nccl::nccl_tests::RankDevice> = o.devices.iter().collect();
    by_rank.sort_by_key(|d| d.rank);
    let host_index: std::collections::HashMap<&str, usize> =
        o.hosts.iter().enumerate().map(|(i, h)| (h.as_str(), i)).collect();
    for d in by_rank {
        let h = host_index.get(d.host.as_str()).copied().unwrap_or(0);
        let i = per_host[h];
        per_host[h] += 1;
        let server = servers.get(h).with_context(|| {
            format!("the output's ranks are on {} hosts; the topology has {} servers", o.hosts.len(), servers.len())
        })?;
        let rank = *server
            .get(i)
            .with_context(|| format!("host {} has more ranks than the topology's server {h} has GPUs", d.host))?;
        devices.push(all.devices[rank]);
    }
    Ok(Placement { devices })
}

fn placement(t: &Topology, ranks: Option<usize>) -> Result<Placement> {
    Placement::new(t, &PlacementPolicy::Contiguous, ranks).context("placement")
}

pub fn explain(args: &ExplainArgs) -> Result<String> {
    let topology = args.topology.load()?;
    let placement = Placement::new(&topology, &args.placement, args.ranks).context("placement")?;
    let coll = Coll::from_railyard(args.collective).with_context(|| {
        format!(
            "NCCL's tuner models allreduce, allgather, reducescatter, broadcast and reduce, not {}",
            args.collective.as_str()
        )
    })?;
    let shape = args.shape.shape(&topology, &placement, args.collective)?;
    let table = tuner::table(&shape.input, coll)?;
    if let Some(range) = &args.sweep {
        let (from, to) = range.split_once(':').context("--sweep takes FROM:TO, e.g. 8B:4GiB")?;
        let (from, to) = (parse_size(from).map_err(anyhow::Error::msg)?, parse_size(to).map_err(anyhow::Error::msg)?);
        if from == 0 || from > to {
            bail!("--sweep: FROM must be at least 1 B and at most TO");
        }
        let mut rows = Vec::new();
        let mut size = from;
        while size <= to && rows.len() < 64 {
            let c = tuner::choose(&shape.input, &table, size).context("NCCL_ALGO/NCCL_PROTO leave no algorithm")?;
            rows.push(c);
            size = match size.checked_mul(2) {
                Some(s) => s,
                None => break,
            };
        }
        return match args.format {
            Format::Json => {
                Ok(serde_json::to_string_pretty(&serde_json::json!({ "shape": shape, "sweep": rows }))? + "\n")
            }
            Format::Md => {
                let mut out = format!(
                    "# NCCL's choice per size: {} over {} ranks on {}\n\n",
                    args.collective.as_str(),
                    shape.input.ranks,
                    topology.name
                );
                out.push_str(&shape_markdown(&shape));
                let mut t = Table::new(["size", "NCCL picks", "channels", "predicted", "algbw"]);
                let mut changes = Vec::new();
                for (i, c) in rows.iter().enumerate() {
                    if i > 0 && (rows[i - 1].algo, rows[i - 1].proto) != (c.algo, c.proto) {
                        changes.push(format!(
                            "{}/{} → {}/{} at {}",
                            rows[i - 1].algo.as_str(),
                            rows[i - 1].proto.as_str(),
                            c.algo.as_str(),
                            c.proto.as_str(),
                            format_bytes(c.bytes as f64)
                        ));
                    }
                    t.row([
                        format_bytes(c.bytes as f64),
                        format!("{}/{}", c.algo.as_str(), c.proto.as_str()),
                        c.channels.to_string(),
                        format_secs(c.time_us * 1e-6),
                        format_bytes_per_sec(c.bytes as f64 / (c.time_us * 1e-6)),
                    ]);
                }
                out.push_str(&t.render());
                out.push_str(&format!(
                    "\nNCCL's choice changes: {}.\n",
                    if changes.is_empty() { "never in this range".to_string() } else { changes.join("; ") }
                ));
                Ok(out)
            }
        };
    }
    let choice = tuner::choose(&shape.input, &table, args.size).context("NCCL_ALGO/NCCL_PROTO leave no algorithm")?;
    // railyard's own choice on the same topology and size.
    // One-byte elements: the size as asked, not rounded to a dtype (2 B stays 2 B).
    let request = railyard_model::CollectiveRequest::all(args.collective, args.size, 1);
    let ours = match railyard_model::plan_on(&topology, &placement, &request) {
        Err(railyard_model::ModelError::NothingRuns { .. }) => None,
        p => Some(p.map_err(crate::args::model_error)?),
    };
    let fastest = ours.as_ref().and_then(railyard_model::Plan::fastest);
    let same_family = choice
        .algo
        .railyard_algorithm()
        .and_then(|a| ours.iter().flat_map(|p| &p.algorithms).find(|b| b.name == a.as_str()));
    #[derive(Serialize)]
    struct Out<'a> {
        shape: &'a Shape,
        table: &'a tuner::Table,
        nccl: &'a tuner::Choice,
        railyard_choice: Option<(&'a str, f64)>,
        railyard_time_of_nccl_algorithm: Option<(&'a str, f64)>,
    }
    let out = Out {
        shape: &shape,
        table: &table,
        nccl: &choice,
        railyard_choice: fastest.map(|b| (b.name.as_str(), b.total_secs)),
        railyard_time_of_nccl_algorithm: same_family.map(|b| (b.name.as_str(), b.total_secs)),
    };
    match args.format {
        Format::Json => Ok(serde_json::to_string_pretty(&out)? + "\n"),
        Format::Md => {
            let mut md = format!(
                "# NCCL's choice: {} of {} over {} ranks on {}\n\n",
                args.collective.as_str(),
                format_bytes(args.size as f64),
                shape.input.ranks,
                topology.name
            );
            md.push_str(&shape_markdown(&shape));
            md.push_str("NCCL's tuning table (latency / algorithm bandwidth, as NCCL_DEBUG_SUBSYS=TUNING prints it; `-` not considered):\n\n");
            let mut t = Table::new(["algorithm", "LL", "LL128", "Simple"]);
            for a in tuner::ALGOS {
                let cell = |p| {
                    table.cells.iter().find(|c| c.algo == a && c.proto == p).map_or("-".to_string(), |c| {
                        if c.enabled {
                            format!("{:.1} us / {:.1} GB/s", c.latency_us, c.algbw_gb_per_s)
                        } else {
                            "-".into()
                        }
                    })
                };
                t.row([
                    a.as_str().to_string(),
                    cell(tuner::Proto::Ll),
                    cell(tuner::Proto::Ll128),
                    cell(tuner::Proto::Simple),
                ]);
            }
            md.push_str(&t.render());
            md.push_str(&format!(
                "\nCandidates for {} (time = latency + bytes / bandwidth):\n\n",
                format_bytes(args.size as f64)
            ));
            let mut cands = choice.candidates.clone();
            cands.sort_by(|a, b| a.time_us.total_cmp(&b.time_us));
            let mut t = Table::new(["algorithm/protocol", "latency", "bandwidth", "time"]);
            for c in &cands {
                t.row([
                    format!("{}/{}", c.algo.as_str(), c.proto.as_str()),
                    format_secs(c.latency_us * 1e-6),
                    format!("{:.2} GB/s", c.algbw_gb_per_s),
                    format_secs(c.time_us * 1e-6),
                ]);
            }
            md.push_str(&t.render());
            md.push_str(&format!(
                "\nNCCL picks **{}/{}** on {} channels × {} threads: {} predicted.\n",
                choice.algo.as_str(),
                choice.proto.as_str(),
                choice.channels,
                choice.threads,
                format_secs(choice.time_us * 1e-6)
            ));
            if let Some(b) = fastest {
                md.push_str(&format!(
                    "railyard's model (payload and start-up, per round) picks **{}**: {}",
                    b.name,
                    format_secs(b.total_secs)
                ));
                match same_family {
                    Some(s) => md.push_str(&format!("; its {} takes {}.\n", s.name, format_secs(s.total_secs))),
                    None => md.push_str(".\n"),
                }
            }
            Ok(md)
        }
    }
}

fn shape_markdown(s: &Shape) -> String {
    let i = &s.input;
    let plural = |n: usize, word: &str| if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") };
    let mut out = format!(
        "Inputs: {} on {}, {:?}, {} of {} GB/s inside a node and {} GB/s across, \
         intra-node path {}, NVLS {}, CollNet {}.\n\n",
        plural(i.ranks, "rank"),
        plural(i.nodes, "node"),
        i.arch,
        plural(i.channels, "channel"),
        i.bw_intra_gb_per_s,
        i.bw_inter_gb_per_s,
        if i.intra_nvlink { "NVLink" } else { "PCI" },
        if i.nvls_channels > 0 { "on" } else { "off" },
        if i.collnet { "on" } else { "off" }
    );
    for (k, v) in &s.notes {
        out.push_str(&format!("- {k}: {v}\n"));
    }
    out.push('\n');
    out
}

fn test_kind(name: &str) -> Result<TestKind> {
    TestKind::from_binary(name).with_context(|| {
        format!("--collective {name}: allreduce, allgather, reducescatter, broadcast, reduce, alltoall or sendrecv")
    })
}

pub fn analyze(cmd: &AnalyzeCommand) -> Result<String> {
    let args = match cmd {
        AnalyzeCommand::NcclTests(args) => args,
        AnalyzeCommand::NcclLog(args) => return analyze_log(args),
    };
    let text = railyard_topology::file::read_text(&args.file, nccl_tests::MAX_INPUT_BYTES)?;
    let kind = args.collective.as_deref().map(test_kind).transpose()?;
    let tests = nccl_tests::parse_all(&text, kind, args.ranks).with_context(|| format!("{}", args.file.display()))?;
    let outputs = &tests.read;
    let several = outputs.len() + tests.failed.len() > 1;
    // Loaded once for every test of the file.
    let topology = args.topo.as_ref().map(|t| TopologyArgs { topo: t.clone(), routing: None }.load()).transpose()?;
    let mut analyses = Vec::with_capacity(outputs.len());
    for (i, output) in outputs.iter().enumerate() {
        let analysis = match &topology {
            None => None,
            Some(topology) => {
                let ranks = output.ranks.max(2);
                let placement = match &args.placement {
                    Some(policy) => Placement::new(topology, policy, Some(ranks)).context("placement")?,
                    None => placement_from_ranks(topology, output, ranks)?,
                };
                let collective = output.kind.railyard().unwrap_or(Collective::AllReduce);
                // The settings' own errors stand alone; the hint below is for the placement.
                let overrides = args.shape.overrides(collective)?;
                let shape = shape::shape(topology, &placement, &overrides).with_context(|| {
                    let inferred = if args.ranks.is_some() || output.devices.len() == ranks {
                        String::new()
                    } else {
                        "; the rank count is inferred from the table: --ranks gives it".to_string()
                    };
                    let how = match &args.placement {
                        Some(PlacementPolicy::Interleaved) => "--placement list:DEV,... says where each sits",
                        _ => "--placement says where they sit (interleaved spreads them over its servers)",
                    };
                    format!("{ranks} ranks on {}: {how}{inferred}", topology.name)
                })?;
                let mut analysis = verdict::analyze(output, topology, &placement, &shape)?;
                let overrides_lines = args.placement.is_some()
                    && !output.devices.is_empty()
                    && placement_from_ranks(topology, output, ranks).ok().as_ref() != Some(&placement);
                if overrides_lines {
                    analysis.notes.push(format!(
                        "ranks placed as --placement says, not as the output's rank lines place them (on {} host(s))",
                        output.hosts.len()
                    ));
                }
                Some((analysis, shape, topology.name.clone()))
            }
        };
        if let Some(path) = &args.svg {
            // The first test's chart at the path given, the n-th's beside it (`-n`).
            let path = match i {
                0 => path.clone(),
                _ => {
                    let stem = path.file_stem().map_or_else(|| "chart".into(), |s| s.to_string_lossy().into_owned());
                    path.with_file_name(format!("{stem}-{}.svg", i + 1))
                }
            };
            std::fs::write(&path, tests_chart(output, analysis.as_ref().map(|a| &a.0)))
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        analyses.push(analysis);
    }
    match args.format {
        Format::Json => {
            #[derive(Serialize)]
            struct Out<'a> {
                output: &'a TestsOutput,
                analysis: Option<&'a Analysis>,
                shape: Option<&'a Shape>,
            }
            #[derive(Serialize)]
            struct Several<'a> {
                tests: Vec<Out<'a>>,
                /// Tests that did not read: (number from 1, first line, why).
                failed: &'a [(usize, usize, String)],
            }
            let mut outs: Vec<Out> = outputs
                .iter()
                .zip(&analyses)
                .map(|(output, a)| Out { output, analysis: a.as_ref().map(|a| &a.0), shape: a.as_ref().map(|a| &a.1) })
                .collect();
            // One test: its object; several (a file of concatenated tests): `{"tests": [...]}`.
            let text = match several {
                false => serde_json::to_string_pretty(&outs.remove(0))?,
                true => serde_json::to_string_pretty(&Several { tests: outs, failed: &tests.failed })?,
            };
            Ok(text + "\n")
        }
        Format::Md => {
            let mut markdown = Vec::new();
            if several {
                let names: Vec<&str> = outputs.iter().map(|o| o.kind.binary()).collect();
                let mut head = format!(
                    "{} holds {} tests, one after another: {}",
                    args.file.display(),
                    outputs.len() + tests.failed.len(),
                    names.join(", ")
                );
                for (n, line, why) in &tests.failed {
                    head.push_str(&format!("; test {n} (from line {line}) does not read: {why}"));
                }
                markdown.push(head + ".\n");
            }
            for (output, a) in outputs.iter().zip(&analyses) {
                markdown.push(tests_markdown(output, a.as_ref().map(|(a, s, n)| (a, s, n.as_str()))));
            }
            Ok(markdown.join("\n"))
        }
    }
}

/// The answer first: the largest size's verdict against the topology, with the count of
/// each verdict over all sizes (the table under "Against" gives every size).
fn verdict_headline(a: &Analysis, name: &str) -> String {
    let Some(last) = a.sizes.last() else { return String::new() };
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for s in &a.sizes {
        match counts.iter_mut().find(|(v, _)| *v == s.verdict.as_str()) {
            Some((_, n)) => *n += 1,
            None => counts.push((s.verdict.as_str(), 1)),
        }
    }
    let counts: Vec<String> = counts.iter().map(|(v, n)| format!("{n} {v}")).collect();
    if last.verdict == Verdict::NotJudged {
        return format!(
            "**not judged** on {name} at {}: no algorithm railyard models runs here (the notes below say why). \
             Over all {} sizes: {}.\n\n",
            format_bytes(last.bytes as f64),
            a.sizes.len(),
            counts.join(", ")
        );
    }
    format!(
        "**{}** on {name} at {}: {:.2} GB/s busbw measured where railyard expects {:.2} GB/s ({:.2} of it). \
         Over all {} sizes: {}.\n\n",
        last.verdict.as_str(),
        format_bytes(last.bytes as f64),
        last.measured_busbw_gb_per_s,
        last.railyard_expected_busbw_gb_per_s,
        last.measured_busbw_gb_per_s / last.railyard_expected_busbw_gb_per_s,
        a.sizes.len(),
        counts.join(", ")
    )
}

fn tests_markdown(o: &TestsOutput, analysis: Option<(&Analysis, &Shape, &str)>) -> String {
    let mut out = format!("# nccl-tests {}: {} sizes over {} ranks\n\n", o.kind.binary(), o.rows.len(), o.ranks);
    if let Some((a, _, name)) = analysis {
        out.push_str(&verdict_headline(a, name));
    }
    out.push_str(&format!(
        "Test: {}; ranks: {}{}. busbw = algbw × {:.4} (nccl-tests' factor for {}).\n\n",
        o.kind_from,
        o.ranks_from,
        if o.hosts.is_empty() {
            String::new()
        } else {
            format!(" on {} host(s): {}", o.hosts.len(), some_names(&o.hosts))
        },
        o.kind.bus_factor(o.ranks.max(2)),
        o.kind.binary()
    ));
    let mut t =
        Table::new(["size", "time (out / in)", "algbw printed", "busbw printed", "busbw from the time", "agrees"]);
    let mut disagreeing = 0;
    for r in &o.rows {
        let agrees = r.out_of_place.consistent && r.in_place.consistent;
        if !agrees {
            disagreeing += 1;
        }
        t.row([
            format_bytes(r.bytes as f64),
            format!("{} / {} us", r.out_of_place.time_us.value, r.in_place.time_us.value),
            format!("{} / {}", r.out_of_place.algbw_gb_per_s.value, r.in_place.algbw_gb_per_s.value),
            format!("{} / {}", r.out_of_place.busbw_gb_per_s.value, r.in_place.busbw_gb_per_s.value),
            format!("{:.2} / {:.2}", r.out_of_place.busbw_recomputed, r.in_place.busbw_recomputed),
            if agrees { "yes".into() } else { format!("**no** (line {})", r.line) },
        ]);
    }
    out.push_str(&t.render());
    out.push_str(&format!(
        "\n{disagreeing} of {} rows print an algbw or busbw their own time does not give (beyond the printed digits).\n",
        o.rows.len()
    ));
    for r in o.rows.iter().filter(|r| r.count_agrees == Some(false)) {
        out.push_str(&format!(
            "Line {}: a count of {} {} is not the size of {} B{}: the row's size or count was changed.\n",
            r.line,
            r.count,
            r.dtype,
            r.bytes,
            if matches!(o.kind, TestKind::AllGather | TestKind::ReduceScatter | TestKind::AllToAll) {
                format!(" (per rank, over {} ranks)", o.ranks)
            } else {
                String::new()
            }
        ));
    }
    if let Some(avg) = o.avg_busbw_printed {
        out.push_str(&format!("Footer's average busbw {avg}; the rows' mean {:.4}.\n", o.avg_busbw_of_rows));
    }
    if o.unread_count > 0 {
        out.push_str(&format!("{} line(s) neither header nor row were skipped.\n", o.unread_count));
    }
    if let Some((a, shape, name)) = analysis {
        out.push_str(&format!("\n## Against {name}\n\n"));
        out.push_str(&shape_markdown(shape));
        let mut t = Table::new([
            "size",
            "measured",
            "busbw",
            "railyard expects",
            "busbw expected",
            "railyard bound",
            "NCCL's tuner",
            "measured / expected",
            "verdict",
        ]);
        for s in &a.sizes {
            t.row([
                format_bytes(s.bytes as f64),
                format_secs(s.measured_us * 1e-6),
                format!("{:.2} GB/s", s.measured_busbw_gb_per_s),
                format!(
                    "{} ({}, {})",
                    format_secs(s.railyard_expected_us * 1e-6),
                    s.railyard_expected_algorithm,
                    s.railyard_protocol
                ),
                format!("{:.2} GB/s", s.railyard_expected_busbw_gb_per_s),
                s.railyard_bound_us
                    .map_or("-".to_string(), |b| format!("{} ({})", format_secs(b * 1e-6), s.railyard_algorithm)),
                // NCCL's tuner models no time for some tests (sendrecv): none is shown.
                if s.nccl_expected_us.is_finite() {
                    format!(
                        "{} ({}/{}, {} ch)",
                        format_secs(s.nccl_expected_us * 1e-6),
                        s.nccl_algo.as_str(),
                        s.nccl_proto.as_str(),
                        s.nccl_channels
                    )
                } else {
                    "-".to_string()
                },
                format!("{:.2}", s.ratio),
                s.verdict.as_str().to_string(),
            ]);
        }
        out.push_str(&t.render());
        match a.leaves_model_at_bytes {
            Some(b) => out.push_str(&format!(
                "\nThe measured curve leaves the model's at {}: from there on no size is as expected.\n",
                format_bytes(b as f64)
            )),
            None => out.push_str("\nThe measured curve does not leave the model's for good in this range.\n"),
        }
        for n in &a.notes {
            out.push_str(&format!("{n}.\n"));
        }
    }
    out
}

fn tests_chart(o: &TestsOutput, a: Option<&Analysis>) -> String {
    let measured: Vec<(f64, f64)> = o
        .rows
        .iter()
        .map(|r| (r.bytes as f64, r.out_of_place.busbw_recomputed.max(r.in_place.busbw_recomputed)))
        .collect();
    let mut series = vec![railyard_units::chart::Series { name: "measured busbw".into(), points: measured }];
    if let Some(a) = a {
        series.push(railyard_units::chart::Series {
            name: "NCCL expects".into(),
            points: a.sizes.iter().map(|s| (s.bytes as f64, s.nccl_expected_busbw_gb_per_s)).collect(),
        });
    }
    railyard_units::chart::LineChart {
        title: format!("{} busbw (GB/s) per size", o.kind.binary()),
        x_label: "size (B, log)".into(),
        y_label: "busbw (GB/s)".into(),
        log_x: true,
        series,
        marks: Vec::new(),
    }
    .svg()
}

fn analyze_log(args: &AnalyzeLogArgs) -> Result<String> {
    use railyard_nccl::log::{self, NcclLog};
    use railyard_nccl::log_report::{self, LogReport};
    let text = railyard_topology::file::read_text(&args.file, log::MAX_LOG_BYTES)?;
    let parsed = log::parse(&text);
    #[derive(Serialize)]
    struct Out<'a> {
        log: &'a NcclLog,
        topology: Option<&'a str>,
        topology_derived: bool,
        /// What the costs below do not stand for (a derived topology that is not the machine).
        warnings: Vec<String>,
        report: Option<&'a LogReport>,
    }
    let Some(ranks) = parsed.ranks else {
        if let Some((line, why)) = parsed.problems.first() {
            anyhow::bail!("{}: line {line}: {why}", args.file.display());
        }
        let nothing_of_nccl = parsed.version.is_none()
            && parsed.hosts.is_empty()
            && parsed.unknown_info_lines == 0
            && parsed.env.is_empty()
            && parsed.patterns.is_empty()
            && parsed.tuned.is_empty();
        if nothing_of_nccl {
            anyhow::bail!(
                "{}: no NCCL INFO line among {} lines; is it an NCCL_DEBUG=INFO log?",
                args.file.display(),
                parsed.lines
            );
        }
        // An excerpt that names no rank: what it holds, and that nothing can be costed.
        const NOTHING: &str = "No line names a rank (no `comm … nRanks`, ring, tree or connection line): no rings or \
                               trees to cost.\n";
        return match args.format {
            Format::Json => Ok(serde_json::to_string_pretty(&Out {
                log: &parsed,
                topology: None,
                topology_derived: false,
                warnings: vec![NOTHING.trim_end().to_string()],
                report: None,
            })? + "\n"),
            Format::Md => Ok(log_head(&parsed) + "\n" + NOTHING),
        };
    };
    let (spec, derived) = match &args.topo {
        Some(t) => (t.clone(), false),
        None => {
            // Enough GPUs per server for every rank, however the nodes were counted.
            let nodes = parsed.nodes.unwrap_or(1).clamp(1, ranks);
            let local = parsed.local_ranks.unwrap_or(ranks.div_ceil(nodes)).max(1);
            (format!("rail:servers={nodes},gpus={local}"), true)
        }
    };
    let topology = TopologyArgs { topo: spec.clone(), routing: None }.load()?;
    let placement = placement(&topology, Some(ranks))?;
    let shape = log_report::shape_from_log(&parsed, args.arch);
    let report = log_report::report(&parsed, &topology, &placement, args.size - args.size % 4, shape.as_ref())?;
    let warnings: Vec<String> = parsed
        .pcie_inside_nodes()
        .filter(|_| derived)
        .map(|why| {
            format!(
                "The derived topology puts each node's GPUs on an NVSwitch, but {why}: the times are NVLink's, not \
                 this machine's. Give --topo a file of the machine (`railyard topo import --nvidia-smi`)."
            )
        })
        .into_iter()
        .collect();
    match args.format {
        Format::Json => Ok(serde_json::to_string_pretty(&Out {
            log: &parsed,
            topology: Some(&spec),
            topology_derived: derived,
            warnings,
            report: Some(&report),
        })? + "\n"),
        Format::Md => Ok(log_markdown(&parsed, &report, &spec, derived, &warnings)),
    }
}

/// Up to 8 names, then how many more: a job's hosts are listed, not a thousand of them.
fn some_names<S: AsRef<str>>(names: &[S]) -> String {
    const SHOWN: usize = 8;
    let shown: Vec<&str> = names.iter().take(SHOWN).map(AsRef::as_ref).collect();
    match names.len().saturating_sub(SHOWN) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

fn checked_words(checked: Option<bool>) -> String {
    match checked {
        Some(true) => "correct".into(),
        Some(false) => "**wrong**".into(),
        None => "not checked (over 64 ranks)".into(),
    }
}

/// What the log says of itself: ranks, nodes, hosts, graph, environment, transports.
fn log_head(log: &railyard_nccl::log::NcclLog) -> String {
    let mut out = format!(
        "# NCCL log: {} ranks on {} node(s){}\n\n",
        log.ranks.map_or("?".to_string(), |n| n.to_string()),
        log.nodes.map_or("?".to_string(), |n| n.to_string()),
        log.version.as_ref().map_or(String::new(), |v| format!(", NCCL {v}"))
    );
    let mut hosts: Vec<&str> = log.rank_info.iter().map(|i| i.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    // What an excerpt lacks, and what was inferred in its place.
    if let Some(from) = &log.ranks_inferred_from {
        out.push_str(&format!("Ranks: {} at least, from {from}.\n", log.ranks.unwrap_or(0)));
    }
    match &log.nodes_from {
        Some(from) if from != "nNodes" => {
            let n = log.nodes.map_or("?".to_string(), |n| n.to_string());
            match from.starts_with("a guess") {
                true => out.push_str(&format!("Nodes: {n}, {from}.\n")),
                false => out.push_str(&format!("Nodes: {n}, from {from}.\n")),
            }
        }
        None => out.push_str("Nodes: the log does not say (no nNodes, no host names); taken as 1.\n"),
        _ => {}
    }
    let introduced = match log.rank_info.len() {
        0 => "no rank introduced itself (no `comm` line with a host)".to_string(),
        1 => format!("1 rank introduced itself, on {}", some_names(&hosts)),
        n => format!("{n} ranks introduced themselves on {} host(s) ({})", hosts.len(), some_names(&hosts)),
    };
    out.push_str(&format!(
        "{} lines: {introduced}; {} NCCL INFO lines not used here, {} other lines{}.\n\n",
        log.lines,
        log.unknown_info_lines,
        log.other_lines,
        if log.unreadable.is_empty() {
            String::new()
        } else {
            format!(", {} known-looking lines that did not read (lines {:?})", log.unreadable.len(), log.unreadable)
        }
    ));
    for p in &log.patterns {
        out.push_str(&format!(
            "Graph search: pattern {} ({}), {} channels of {} / {} GB/s (inside / across nodes), path types {}/{}.\n",
            p.pattern,
            match p.pattern {
                4 => "ring",
                3 => "tree",
                2 => "split tree",
                1 => "balanced tree",
                5 => "NVLS",
                6 => "CollNet direct",
                _ => "?",
            },
            p.channels,
            p.bw_intra_gb_per_s,
            p.bw_inter_gb_per_s,
            p.type_intra,
            p.type_inter
        ));
    }
    for (k, v) in &log.env {
        out.push_str(&format!("{k}={v} (set by the environment).\n"));
    }
    let transports = log.transports();
    if !transports.is_empty() {
        let t: Vec<String> = transports.iter().map(|(k, n)| format!("{k} {n}")).collect();
        out.push_str(&format!("Connections by transport: {}.\n", t.join(", ")));
    }
    out
}

fn log_markdown(
    log: &railyard_nccl::log::NcclLog,
    r: &railyard_nccl::log_report::LogReport,
    topo: &str,
    derived: bool,
    warnings: &[String],
) -> String {
    let mut out = log_head(log);
    if !out.ends_with("\n\n") {
        out.push('\n');
    }
    out.push_str(&format!(
        "## Rings and trees as railyard schedules: an all-reduce of {} on {}{}\n\n",
        format_bytes(r.bytes as f64),
        topo,
        if derived { " (derived from the log's nodes and local ranks; --topo to give yours)" } else { "" }
    ));
    for w in warnings {
        out.push_str(&format!("**{w}**\n\n"));
    }
    let mut t = Table::new(["schedule", "channels", "checker", "model time", "bottleneck"]);
    for ring in &r.rings {
        let shown: Vec<String> = ring.order.iter().take(16).map(|x| x.to_string()).collect();
        t.row([
            format!("ring {}{}", shown.join(" "), if ring.order.len() > 16 { " …" } else { "" }),
            ring.channels.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
            checked_words(ring.checked),
            format_secs(ring.secs),
            ring.bottleneck.clone().unwrap_or_default(),
        ]);
    }
    if let Some(all) = &r.rings_together {
        t.row([
            format!("{} rings together, data split over them", all.channels.len()),
            all.channels.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
            checked_words(all.checked),
            format_secs(all.secs),
            all.bottleneck.clone().unwrap_or_default(),
        ]);
    }
    if let Some(tr) = &r.trees {
        t.row([
            format!("{} tree(s), data split over them", tr.trees),
            tr.channels.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
            checked_words(tr.checked),
            format_secs(tr.secs),
            String::new(),
        ]);
    }
    if let Some(best) = &r.best_ring {
        t.row([
            "best ring railyard finds".to_string(),
            "-".into(),
            checked_words(best.checked),
            format_secs(best.secs),
            best.bottleneck.clone().unwrap_or_default(),
        ]);
    }
    out.push_str(&t.render());
    if let (Some(best), Some(worst)) = (&r.best_ring, r.rings.iter().max_by(|a, b| a.secs.total_cmp(&b.secs))) {
        if best.secs < worst.secs * (1.0 - 1e-9) {
            out.push_str(&format!(
                "\nA better ring order ({}) saves {} ({:.1}%) over the slowest logged ring.\n",
                best.order.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" "),
                format_secs(worst.secs - best.secs),
                (1.0 - best.secs / worst.secs) * 100.0
            ));
        } else {
            out.push_str("\nNo ring order is faster on this topology than the logged rings.\n");
        }
    }
    for p in &r.tree_problems {
        out.push_str(&format!("Trees: {p}.\n"));
    }
    for p in &r.ring_problems {
        out.push_str(&format!("Rings: {p}.\n"));
    }
    if r.best_ring.is_none() && !r.rings.is_empty() {
        out.push_str(&format!(
            "The ring search runs up to {} ranks; this log has more.\n",
            railyard_nccl::log_report::RING_SEARCH_MAX_RANKS
        ));
    }
    if !r.choices.is_empty() {
        out.push_str("\n## NCCL's choices in the log, and NCCL's tuner on the log's own graph\n\n");
        let mut t = Table::new(["call", "size", "logged", "tuner from the log's graph", "same"]);
        for c in &r.choices {
            t.row([
                c.collective.clone(),
                format_bytes(c.bytes as f64),
                c.logged.clone(),
                c.reproduced.clone().unwrap_or_else(|| "-".into()),
                if c.same { "yes".into() } else { "no".into() },
            ]);
        }
        out.push_str(&t.render());
    }
    out
}

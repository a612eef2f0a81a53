//! `railyard plan`: compare algorithms for one collective on one placed topology.

use anyhow::{bail, Context, Result};
use clap::Args;
use railyard_model::selection::{choose, in_network_available, sweep, sweep_sizes, Choice, PlanWithChoice, Sweep};
use railyard_model::{plan, Breakdown, Plan, PlanRequest, RoundCost};
use railyard_schedule::{Algorithm, Collective, Dtype};
use railyard_topology::{Placement, PlacementPolicy};
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs};

use crate::args::{
    parse_channels, parse_groups, parse_order, parse_pipeline_chunks, parse_size, Format, Groups, RankList,
};
use railyard_units::Table;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard plan                                   # seed 001 example 7.2: 192 MiB all-reduce, 16 ranks, 2 x HGX H100\n  \
    railyard plan --topo a100-pcie-control --algo ring,hierarchical\n  \
    railyard plan --topo a100-pcie-control:local=300GB/s --format json\n  \
    railyard plan --algo ring --order 0,8,1,9,2,10,3,11,4,12,5,13,6,14,7,15\n  \
    railyard plan --algo hierarchical --groups 0-7/9-15,8   # pair rank i with i+9 (seed §7.2.5)\n\n\
Limits (each refusal names its numbers and the option to change): 262,144 ranks; 64 channels;\n\
4,096 pipeline chunks; schedules holding 32 Mi items (listed transfers, or a ring's positions);\n\
costing at most 128 Mi transfers made round by round (repeated rounds are costed once) and\n\
16 Mi in one round.")]
pub struct PlanArgs {
    #[command(flatten)]
    pub topology: crate::args::TopologyArgs,
    /// Collective: allreduce, reducescatter, allgather, broadcast, reduce, gather, scatter, alltoall, barrier, sendrecv
    #[arg(long, default_value = "allreduce")]
    pub collective: Collective,
    /// Message size (binary units: 192MiB, 8KiB; the large buffer, as nccl-tests counts it)
    #[arg(long, default_value = "192MiB", value_parser = parse_size, allow_hyphen_values = true)]
    pub size: u64,
    /// Element type: f32, f64, f16, bf16, i32, i64, u8
    #[arg(long, default_value = "f32")]
    pub dtype: Dtype,
    /// Algorithms, comma-separated, or `all` (every algorithm that implements the collective):
    /// ring, interleaved-ring, chain, tree, double-tree, rhd, recursive-doubling, bruck, pairwise, direct,
    /// hierarchical, in-network
    #[arg(long, default_value = "all")]
    pub algo: String,
    /// Root rank of broadcast, reduce, gather, scatter (and the sender of sendrecv)
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// Parallel rings (channels) for the ring algorithms, each carrying 1/k of every chunk (1-64)
    #[arg(long, default_value_t = 1, value_parser = parse_channels)]
    pub channels: usize,
    /// Pipelined chunks for chain and trees, 1-4096 (default: try 1, 2, 4, ... 128 and keep the fastest)
    #[arg(long, value_parser = parse_pipeline_chunks)]
    pub pipeline_chunks: Option<usize>,
    /// Rank placement: contiguous, interleaved, rail-aligned, or list:DEV,DEV,...
    #[arg(long, default_value = "contiguous")]
    pub placement: PlacementPolicy,
    /// Number of ranks (default: every GPU of the topology)
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Rank order for `ring` and `chain`, e.g. 0,8,1,9 or 0-7,15-8
    #[arg(long, value_parser = parse_order)]
    pub order: Option<RankList>,
    /// Server groups for the hierarchical algorithms, `/`-separated (default: by server).
    /// Rank j of every group holds shard j, so the order inside groups sets the pairing.
    #[arg(long, value_parser = parse_groups)]
    pub groups: Option<Groups>,
    /// Print every round instead of grouping equal consecutive rounds
    #[arg(long)]
    pub all_rounds: bool,
    /// Sweep sizes FROM:TO (e.g. 8B:16GiB) multiplying by --sweep-factor: time, algbw and
    /// busbw per algorithm, the fastest per size, and the crossover sizes
    #[arg(long, value_name = "FROM:TO")]
    pub sweep: Option<String>,
    /// Factor between swept sizes
    #[arg(long, default_value_t = 2)]
    pub sweep_factor: u64,
    /// With --sweep: draw time vs size per algorithm to this SVG file
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

pub(crate) fn algorithms(text: &str, collective: Collective) -> Result<(Vec<Algorithm>, bool)> {
    Algorithm::parse_list(text, collective).map_err(|e| anyhow::anyhow!("--algo: {e}"))
}

pub fn run(args: &PlanArgs) -> Result<String> {
    let topology = args.topology.load()?;
    let placement = Placement::new(&topology, &args.placement, args.ranks).context("placement")?;
    // MSCCL XML files in --algo are costed beside the built-in algorithms.
    let (files, names): (Vec<&str>, Vec<&str>) = args.algo.split(',').map(str::trim).partition(|a| a.ends_with(".xml"));
    let (algorithms, strict) = if names.is_empty() && !files.is_empty() {
        (Vec::new(), true)
    } else {
        algorithms(&names.join(","), args.collective)?
    };
    let request = PlanRequest {
        collective: args.collective,
        bytes: args.size,
        elem_bytes: args.dtype.size_bytes(),
        algorithms,
        order: args.order.as_ref().map(|o| o.0.clone()),
        groups: args.groups.as_ref().map(|g| g.0.clone()),
        root: args.root,
        channels: args.channels,
        pipeline_chunks: args.pipeline_chunks,
        strict,
    };
    let in_network = in_network_available(&topology, &request);
    if args.sweep.is_some() && !files.is_empty() {
        bail!("--sweep compares the built-in algorithms; cost an MSCCL file at one --size");
    }
    if let Some(range) = &args.sweep {
        let (from, to) = range.split_once(':').context("--sweep takes FROM:TO, e.g. 8B:16GiB")?;
        let sizes = sweep_sizes(
            parse_size(from).map_err(anyhow::Error::msg)?,
            parse_size(to).map_err(anyhow::Error::msg)?,
            args.sweep_factor,
            request.elem_bytes,
        )?;
        let result = sweep(&topology, &placement, &request, &sizes, in_network)?;
        if let Some(path) = &args.svg {
            std::fs::write(path, sweep_chart(&result)).with_context(|| format!("cannot write {}", path.display()))?;
        }
        return match args.format {
            Format::Json => Ok(serde_json::to_string_pretty(&result)? + "\n"),
            Format::Md => Ok(sweep_markdown(&result)),
        };
    }
    if args.svg.is_some() {
        bail!("--svg draws the --sweep curves; add --sweep FROM:TO");
    }
    let mut result = if request.algorithms.is_empty() {
        railyard_model::plan::Plan {
            topology: topology.name.clone(),
            collective: args.collective,
            bytes: args.size,
            elem_bytes: request.elem_bytes,
            ranks: placement.len(),
            round_startup_secs: topology.round_startup_secs,
            routing: topology.routing.as_str(),
            algorithms: Vec::new(),
            skipped: Vec::new(),
            fastest: None,
        }
    } else {
        plan(&topology, &placement, &request)?
    };
    for file in files {
        let b = crate::commands::schedule::cost_msccl(
            std::path::Path::new(file),
            args.collective,
            args.size,
            request.elem_bytes,
            &topology,
            &placement,
        )?;
        result.algorithms.push(b);
    }
    result.fastest = railyard_model::selection::fastest(&result).map(|b| b.name.clone());
    if result.algorithms.is_empty() {
        let reasons: Vec<String> = result.skipped.iter().map(|s| format!("{}: {}", s.name, s.reason)).collect();
        bail!("no algorithm can run here:\n  {}", reasons.join("\n  "));
    }
    let choice = choose(&result, in_network);
    match args.format {
        Format::Json => {
            Ok(serde_json::to_string_pretty(&PlanWithChoice { plan: &result, choice: choice.as_ref() })? + "\n")
        }
        Format::Md => Ok(markdown(&result, choice.as_ref(), args.all_rounds)),
    }
}

fn choice_markdown(c: &Choice) -> String {
    let runner = match (&c.runner_up, c.runner_up_secs, c.margin) {
        (Some(r), Some(_), Some(m)) if m <= railyard_model::selection::TIE => format!(", tied with {r}"),
        (Some(r), Some(t), Some(m)) => format!(", ahead of {r} ({}) by {:.1}%", format_secs(t), m * 100.0),
        _ => String::new(),
    };
    format!(
        "\nChosen: **{}** ({}){runner}. NCCL's rule of thumb (seed 000 §8.3.4) picks {} with protocol {} ({}) — {}.\n",
        c.algorithm,
        format_secs(c.secs),
        c.nccl.algorithm,
        c.nccl.protocol,
        c.nccl.reason,
        if c.agrees_with_nccl {
            "the same family"
        } else if c.nccl_family_compared {
            "**we disagree**: the model predicts the choice above is faster here"
        } else {
            "not among the algorithms compared (--algo), so not weighed here"
        }
    )
}

fn sweep_markdown(s: &Sweep) -> String {
    let mut out = format!("# {} sweep over {} ranks on {}\n\n", s.collective.as_str(), s.ranks, s.topology);
    let mut headers = vec!["size".to_string(), "fastest".into(), "NCCL rule".into()];
    headers.extend(s.series.iter().map(|x| x.algorithm.clone()));
    let mut t = Table::new(headers);
    for (i, row) in s.rows.iter().enumerate() {
        let mut cells = vec![
            format_bytes(row.bytes as f64),
            row.fastest.clone(),
            format!(
                "{} / {}{}",
                row.nccl.algorithm,
                row.nccl.protocol,
                if row.agrees_with_nccl {
                    ""
                } else if row.nccl_family_compared {
                    " (differs)"
                } else {
                    " (not compared)"
                }
            ),
        ];
        cells.extend(s.series.iter().map(|x| {
            x.points.get(i).filter(|p| p.bytes == row.bytes).map_or("-".into(), |p| {
                format!("{} ({})", format_secs(p.secs), format_bytes_per_sec(p.busbw_bytes_per_sec))
            })
        }));
        t.row(cells);
    }
    out.push_str("Each cell: time (bus bandwidth).\n\n");
    out.push_str(&t.render());
    out.push_str("\nCrossovers:\n\n");
    if s.crossovers.is_empty() {
        out.push_str("- none: one algorithm is fastest at every size\n");
    }
    for c in &s.crossovers {
        out.push_str(&format!("- at {}: {} takes over from {}\n", format_bytes(c.bytes as f64), c.to, c.from));
    }
    out
}

fn sweep_chart(s: &Sweep) -> String {
    use crate::chart::{LineChart, Mark, Series};
    LineChart {
        title: format!("{} over {} ranks on {}: time per algorithm", s.collective.as_str(), s.ranks, s.topology),
        x_label: "message size (bytes, log scale)".into(),
        y_label: "time, log10(ns)".into(),
        log_x: true,
        series: s
            .series
            .iter()
            .map(|x| Series {
                name: x.algorithm.clone(),
                points: x.points.iter().map(|p| (p.bytes as f64, p.secs.log10() + 9.0)).collect(),
            })
            .collect(),
        marks: s
            .crossovers
            .iter()
            .map(|c| {
                let y = s
                    .series
                    .iter()
                    .find(|x| x.algorithm == c.to)
                    .and_then(|x| x.points.iter().find(|p| p.bytes == c.bytes))
                    .map_or(0.0, |p| p.secs.log10() + 9.0);
                Mark { x: c.bytes as f64, y, label: format!("{} → {}", c.from, c.to) }
            })
            .collect(),
    }
    .svg()
}

/// The algorithm's name with the options that shaped it: "tree (8 chunks)", "ring (2 channels)".
fn label(b: &Breakdown) -> String {
    match (b.pipeline_chunks, b.channels) {
        (Some(c), _) if c > 1 => format!("{} ({c} chunks)", b.name),
        (_, k) if k > 1 => format!("{} ({k} channels)", b.name),
        _ => b.name.clone(),
    }
}

fn bottleneck_cell(b: &Breakdown) -> String {
    b.bottleneck
        .as_ref()
        .map(|x| format!("{} `{}` ({} of {} rounds)", x.kind, x.resource, x.rounds, b.rounds))
        .unwrap_or_else(|| "-".into())
}

fn markdown(p: &Plan, choice: Option<&Choice>, all_rounds: bool) -> String {
    let mut out = format!(
        "# {} of {} over {} ranks on {}\n\n",
        p.collective.as_str(),
        format_bytes(p.bytes as f64),
        p.ranks,
        p.topology
    );
    let host = p.algorithms.iter().any(|b| b.host.is_some());
    out.push_str(&format!(
        "Per-round resource model (seed 001 §7.2.1): T = Σ_rounds (α + max_e V(r,e)/B(e)){}, α = {} per round; \
         payload transfer and start-up only{}; routes by {}.\n\n",
        if host { " + host" } else { "" },
        format_secs(p.round_startup_secs),
        if host {
            ", plus the hosts' local copies, reductions and per-message overhead (no contention or latency)"
        } else {
            " (no contention, latency or reduction compute)"
        },
        crate::args::routing_words(p.routing)
    ));
    // Hosts that count local copies and per-message overhead get a column of their own.
    let mut headers = vec!["algorithm", "time", "rounds", "α total"];
    if host {
        headers.push("host");
    }
    headers.extend(["cross-server", "sent total", "spine bytes", "NICs idle", "bottleneck"]);
    let mut t = Table::new(headers);
    for b in &p.algorithms {
        let mut cells = vec![label(b), format_secs(b.total_secs), b.rounds.to_string(), format_secs(b.alpha_secs)];
        if host {
            cells.push(b.host.as_ref().map_or("-".into(), |h| format_secs(h.secs)));
        }
        cells.extend([
            format_bytes(b.cross_server_bytes),
            format_bytes(b.bytes_sent_total),
            format_bytes(b.spine_bytes),
            format!("{} of {}", b.nics_idle, b.nics_total),
            bottleneck_cell(b),
        ]);
        t.row(cells);
    }
    out.push_str(&t.render());
    if host {
        out.push_str(
            "
`host`: what the topology's hosts add to the link time — the busiest rank's local copies and \
             reductions at the host's memory bandwidth, and its messages at a fixed overhead each; \
             the runtime's tuner chooses on this same total.\n",
        );
    }
    if let Some(fastest) = p.algorithms.iter().min_by(|a, b| a.total_secs.total_cmp(&b.total_secs)) {
        let slowest = p.algorithms.iter().max_by(|a, b| a.total_secs.total_cmp(&b.total_secs)).unwrap_or(fastest);
        out.push_str(&format!("\nFastest: **{}** ({})", fastest.name, format_secs(fastest.total_secs)));
        if slowest.name != fastest.name {
            out.push_str(&format!(", {:.2}x faster than {}", slowest.total_secs / fastest.total_secs, slowest.name));
        }
        out.push_str(".\nNICs idle counts NICs with nothing to send; `sent total` counts every rank's sends, in-network sends once per rank.\n");
    }
    if let Some(c) = choice {
        out.push_str(&choice_markdown(c));
    }
    for s in &p.skipped {
        out.push_str(&format!("\nSkipped {}: {}\n", s.name, s.reason));
    }
    for b in &p.algorithms {
        out.push_str(&breakdown_markdown(b, all_rounds));
    }
    out
}

fn breakdown_markdown(b: &Breakdown, all_rounds: bool) -> String {
    let mut out = format!("\n## {}: {}\n\n", label(b), format_secs(b.total_secs));
    out.push_str(&format!(
        "{} rounds: {} of start-up (α) + {} of transfer (the slowest resource of each round).\n\n",
        b.rounds,
        format_secs(b.alpha_secs),
        format_secs(b.transfer_secs)
    ));
    if let Some(h) = &b.host {
        out.push_str(&format!(
            "Host: {} ({} elements copied or reduced locally by the busiest rank: {}; {} messages: {}).\n\n",
            format_secs(h.secs),
            h.local_elements,
            format_secs(h.local_secs),
            h.messages,
            format_secs(h.message_secs)
        ));
    }
    let mut stages = Table::new(["stage", "rounds", "time", "sent"]);
    for s in &b.stages {
        stages.row([s.name.clone(), s.rounds.to_string(), format_secs(s.secs), format_bytes(s.bytes_sent)]);
    }
    out.push_str(&stages.render());
    out.push('\n');
    let mut rounds = Table::new(["rounds", "each", "transfer", "bottleneck", "bytes on it", "its bandwidth", "tied"]);
    for group in group_rounds(&b.per_round, all_rounds) {
        let first = group[0];
        let last = group[group.len() - 1];
        let label = if group.len() == 1 {
            first.label.clone()
        } else {
            // "reduce-scatter step 1 of 15" .. "step 15 of 15" -> "reduce-scatter steps 1-15 of 15"
            let step = |r: &RoundCost| {
                r.label.rsplit(" step ").next().unwrap_or("").split(" of ").next().unwrap_or("").to_string()
            };
            let total = first.label.rsplit(" of ").next().unwrap_or("");
            format!("{} steps {}-{} of {}", first.phase, step(first), step(last), total)
        };
        let (name, bytes, bw) = match &first.bottleneck {
            Some(x) => {
                (format!("{} `{}`", x.kind, x.resource), format_bytes(x.bytes), format_bytes_per_sec(x.bytes_per_sec))
            }
            None => ("-".into(), "-".into(), "-".into()),
        };
        let tied = if first.tied_resources == 0 { "-".to_string() } else { format!("{} more", first.tied_resources) };
        rounds.row([label, format_secs(first.secs), format_secs(first.transfer_secs), name, bytes, bw, tied]);
    }
    out.push_str(&rounds.render());
    out.push_str("\nBusiest resources:\n\n");
    let mut res = Table::new(["resource", "kind", "bytes", "bandwidth", "busy"]);
    for r in b.resources.iter().take(8) {
        res.row([
            format!("`{}`", r.resource),
            r.kind.clone(),
            format_bytes(r.bytes),
            format_bytes_per_sec(r.bytes_per_sec),
            format_secs(r.secs),
        ]);
    }
    out.push_str(&res.render());
    out
}

/// Consecutive rounds of one phase with the same time and bottleneck resource.
fn group_rounds(rounds: &[RoundCost], all: bool) -> Vec<Vec<&RoundCost>> {
    let mut groups: Vec<Vec<&RoundCost>> = Vec::new();
    for r in rounds {
        let same = |g: &Vec<&RoundCost>| {
            let p = g[g.len() - 1];
            !all && p.phase == r.phase
                && (p.secs - r.secs).abs() <= 1e-12 * p.secs.max(1e-30)
                && p.bottleneck.as_ref().map(|x| &x.resource) == r.bottleneck.as_ref().map(|x| &x.resource)
        };
        match groups.last_mut() {
            Some(g) if same(g) => g.push(r),
            _ => groups.push(vec![r]),
        }
    }
    groups
}

//! `railyard plan`: compare algorithms for one collective on one placed topology.

use anyhow::{bail, Context, Result};
use clap::Args;
use railyard_model::selection::Choice;
use railyard_model::sweep::{sweep, sweep_sizes, Sweep};
use railyard_model::{plan, Breakdown, Plan, RoundCost};
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs};
use railyard_units::Table;

use crate::args::{model_error, parse_size, Format, RequestArgs};

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard plan                                   # a 192 MiB all-reduce, 16 ranks, 2 x HGX H100\n  \
    railyard plan --topo a100-pcie-control --algo ring,hierarchical\n  \
    railyard plan --topo a100-pcie-control:local=300GB/s --format json\n  \
    railyard plan --algo ring --order 0,8,1,9,2,10,3,11,4,12,5,13,6,14,7,15\n  \
    railyard plan --algo hierarchical --groups 0-7/9-15,8   # pair rank i with i+9\n\n\
Limits (each refusal names its numbers and the option to change): 262,144 ranks; 64 channels;\n\
4,096 pipeline chunks; schedules holding 32 Mi items (listed transfers, or a ring's positions);\n\
costing at most 128 Mi transfers made round by round (repeated rounds are costed once) and\n\
16 Mi in one round.")]
pub struct PlanArgs {
    #[command(flatten)]
    pub request: RequestArgs,
    /// Print every round instead of grouping equal consecutive rounds
    #[arg(long)]
    pub all_rounds: bool,
    /// Sweep sizes FROM:TO (e.g. 8B:16GiB) multiplying by --sweep-factor: time, algbw and
    /// busbw per algorithm, the fastest per size, and the crossover sizes
    #[arg(long, value_name = "FROM:TO")]
    pub sweep: Option<String>,
    /// Factor between swept sizes: a whole number, at least 2
    #[arg(long, default_value_t = 2, value_parser = parse_sweep_factor)]
    pub sweep_factor: u64,
    /// With --sweep: draw time vs size per algorithm to this SVG file
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

pub fn run(args: &PlanArgs) -> Result<String> {
    let topology = args.request.topology.load()?;
    let request = args.request.request()?;
    if let Some(range) = &args.sweep {
        let (from, to) = range.split_once(':').context("--sweep takes FROM:TO, e.g. 8B:16GiB")?;
        let sizes = sweep_sizes(
            parse_size(from).map_err(anyhow::Error::msg)?,
            parse_size(to).map_err(anyhow::Error::msg)?,
            args.sweep_factor,
            request.elem_bytes,
        )
        .map_err(model_error)?;
        let result = sweep(&topology, &request, &sizes).map_err(model_error)?;
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
    let result = plan(&topology, &request).map_err(model_error)?;
    match args.format {
        Format::Json => Ok(serde_json::to_string_pretty(&result)? + "\n"),
        Format::Md => Ok(markdown(&result, args.all_rounds)),
    }
}

fn choice_markdown(c: &Choice) -> String {
    let runner = match (&c.runner_up, c.runner_up_secs, c.margin) {
        (Some(r), Some(_), Some(m)) if m <= railyard_model::selection::TIE => format!(", tied with {r}"),
        (Some(r), Some(t), Some(m)) => format!(", ahead of {r} ({}) by {:.1}%", format_secs(t), m * 100.0),
        _ => String::new(),
    };
    format!(
        "\nChosen: **{}** ({}){runner}. NCCL's rule of thumb picks {} with protocol {} ({}) — {}.\n",
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
    for row in &s.rows {
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
            // A series may start late (an MSCCL program from its minBytes or first chunk).
            x.points.iter().find(|p| p.bytes == row.bytes).map_or("-".into(), |p| {
                format!("{} ({})", format_secs(p.secs), format_bytes_per_sec(p.busbw_bytes_per_sec))
            })
        }));
        t.row(cells);
    }
    out.push_str(
        "Each cell: time (bus bandwidth); `-`: not run at that size (an MSCCL program below one element per chunk \
         or outside its minBytes..maxBytes, or a schedule over a size limit).\n\n",
    );
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
    use railyard_units::chart::{LineChart, Mark, Series};
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

/// The achievable rates in a few words: "NVLink 82%, PCIe 76%, NIC 96%, NVLS 61% of line rate".
fn achievable_words(a: &railyard_topology::Achievable) -> String {
    format!(
        "NVLink {:.0}%, PCIe {:.0}%, NIC {:.0}%, switch links {:.0}%, NVLS {:.0}%, SHARP {:.0}% of line rate; `topo show` \
         says where they come from",
        a.nvlink * 100.0,
        a.pcie * 100.0,
        a.nic * 100.0,
        a.fabric * 100.0,
        a.nvls * 100.0,
        a.sharp * 100.0
    )
}

/// The algorithm's name with the options that shaped it: "tree (8 chunks)".
fn label(b: &Breakdown) -> String {
    railyard_model::algorithm_ref::shaped_name(&b.name, b.pipeline_chunks, b.channels)
}

fn bottleneck_cell(b: &Breakdown) -> String {
    b.bottleneck
        .as_ref()
        .map(|x| format!("{} `{}` ({} of {} rounds)", x.kind, x.resource, x.rounds, b.rounds))
        .unwrap_or_else(|| "-".into())
}

fn markdown(p: &Plan, all_rounds: bool) -> String {
    let mut out = format!(
        "# {} of {} over {} ranks on {}\n\n",
        p.collective.as_str(),
        format_bytes(p.bytes as f64),
        p.ranks,
        p.topology
    );
    let host = p.algorithms.iter().any(|b| b.host.is_some());
    out.push_str(&format!(
        "Model: the per-round resource model (docs/plan.md): T = Σ_rounds (α + max_e V(r,e)/B(e)){}, α = {} per round; \
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
    let mut headers = vec!["algorithm", "bound", "expected", "rounds", "α total"];
    if host {
        headers.push("host");
    }
    headers.extend(["cross-server", "sent total", "spine bytes", "NICs idle", "bottleneck"]);
    let mut t = Table::new(headers);
    for b in &p.algorithms {
        let mut cells = vec![
            label(b),
            format_secs(b.total_secs),
            format!("{} ({})", format_secs(b.expected_secs), b.protocol.as_str()),
            b.rounds.to_string(),
            format_secs(b.alpha_secs),
        ];
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
    out.push_str(&format!(
        "\n`bound`: the model at line rate (nothing is faster on this hardware). `expected`: the same \
         rounds at the rates NCCL-class software reaches ({}), with the protocol whose latencies make \
         it fastest.\n",
        achievable_words(&p.achievable)
    ));
    if host {
        out.push_str(
            "
`host`: what the topology's hosts add to the link time — the busiest rank's local copies and \
             reductions at the host's memory bandwidth, and its messages at a fixed overhead each; \
             the runtime's tuner chooses on this same total.\n",
        );
    }
    if let Some(fastest) = p.fastest() {
        out.push_str(&format!("\nFastest: **{}** ({})", label(fastest), format_secs(fastest.total_secs)));
        // Beside the runner-up: the choice a user weighs, not the worst one.
        let runner_up = p
            .algorithms
            .iter()
            .filter(|b| !std::ptr::eq(*b, fastest))
            .min_by(|a, b| a.total_secs.total_cmp(&b.total_secs));
        match runner_up {
            _ if fastest.total_secs <= 0.0 => out.push_str(&format!(
                ": nothing moves ({}), so every algorithm takes 0 s",
                if p.ranks < 2 { "one rank" } else { "0 bytes" }
            )),
            Some(r) => out.push_str(&format!(
                ", {:.2}x faster than the runner-up, {} ({})",
                r.total_secs / fastest.total_secs,
                label(r),
                format_secs(r.total_secs)
            )),
            None => {}
        }
        out.push_str(".\nNICs idle counts NICs with nothing to send; `sent total` counts every rank's sends, in-network sends once per rank.\n");
    }
    if let Some(c) = &p.choice {
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
            format!("{} steps {}-{} of {}", first.phase, first.step, last.step, first.steps)
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

/// `--sweep-factor`: sizes are whole bytes, so the factor is a whole number from 2.
fn parse_sweep_factor(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(f) if f >= 2 => Ok(f),
        _ => Err(format!("\"{text}\" is not a whole number of at least 2 (sizes are whole bytes: 2 doubles them)")),
    }
}

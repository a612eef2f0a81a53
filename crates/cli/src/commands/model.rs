//! `railyard model NAME`: the analytical models of the seeds. Each model's defaults are
//! the chapter's worked example, so `railyard model NAME` alone prints the book's table
//! with what limits the result; `--inputs FILE` replaces every input (a JSON scenario;
//! `scenarios/NAME.json` are the defaults written out), `--set key=value` changes one.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use railyard_netmodels::clos::{clos_cut, leaf_ports, leaf_ports_explicit, ClosCut, ClosInput};
use railyard_netmodels::{
    concurrency, connection_state, dag, deadlock, ecmp, ep_dispatch, feedback, incast, message, multipath, nic_relay,
    queue, remote_read, slots, spray,
};
use railyard_units::units::format_bytes_per_sec;
use railyard_units::Table;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::args::{parse_bandwidth, parse_ratio, Format};
use crate::chart::{LineChart, Mark, Series, StackedBars};

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Size a k-port Clos fabric: endpoints, switches, bisection, a job's cut (seed 001 §7.1.2)
    ClosCut(ClosCutArgs),
    /// T = α + M/B, the αB crossover, pipeline time and utilisation (§7.2.2)
    Message(ScenarioArgs),
    /// Expert-parallel dispatch/combine traffic matrix: per sender, NIC, shared interface, cut (§7.2.3)
    EpDispatch(ScenarioArgs),
    /// Borrowing neighbour NICs through NVLink; issue-rate crossover (§7.2.4)
    NicRelay(ScenarioArgs),
    /// Requests in flight: N ≥ ⌈BT/m⌉ and B_eff = min(B, Nm/T, m/δ) (§7.3.4; --svg: B_eff vs slots)
    Concurrency(ScenarioArgs),
    /// One remote read stage by stage; fetch-vs-remote-read reuse crossover (§7.3.3; --svg: stacked stages)
    RemoteRead(ScenarioArgs),
    /// Connection state: private vs shared transport, isolation groups, cache overflow (§7.4.2)
    ConnectionState(ScenarioArgs),
    /// Dependency graphs: finish times, critical path, slack, ordering policies, stale read (§7.4.1, §7.4.3, §7.6.1)
    Dag(ScenarioArgs),
    /// Request slots and completion processing, event by event (§7.4.4)
    Slots(ScenarioArgs),
    /// Periodic on/off demands into a shared egress: backlog over time (§7.5.1; --svg: backlog)
    Queue(ScenarioArgs),
    /// Feedback delay vs buffer: fill time, drops, drain (§7.5.2)
    Feedback(ScenarioArgs),
    /// Incast: tolerable feedback delay, PFC headroom, end-to-end bytes in flight (§7.5.2)
    Incast(ScenarioArgs),
    /// Packets over several paths: in-order delivery, reorder buffer, selective repeat vs go-back-N (§7.5.3)
    Multipath(ScenarioArgs),
    /// ECMP hash collisions: exact distribution of the busiest uplink's load (§7.5.3; --svg: distributions)
    Ecmp(ScenarioArgs),
    /// Packet spraying over paths of different delays (§7.5.3)
    Spray(ScenarioArgs),
    /// Wait-for graphs: cycles found and printed (§7.5.4)
    Deadlock(ScenarioArgs),
}

#[derive(Debug, Args)]
pub struct ScenarioArgs {
    /// A JSON scenario with every input of the model (see --print-inputs, or scenarios/NAME.json)
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Change one input: KEY=VALUE, KEY a dotted path (e.g. slots=[128] or reuse.snapshot_bytes="64 MiB");
    /// VALUE is JSON, or else taken as a string (so units work: path_bytes_per_sec=50GB/s)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print the inputs that would be used, as JSON, and stop
    #[arg(long)]
    pub print_inputs: bool,
    /// Draw the model's chart to this SVG file (concurrency, remote-read, queue, ecmp)
    #[arg(long)]
    pub svg: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard model clos-cut                                   # k=64, 2 tiers, 1:1, 1024-card job\n  \
    railyard model clos-cut --oversubscription 3:1 --format json\n  \
    railyard model clos-cut --tiers 3
  \
    railyard model clos-cut --oversubscription 2:1            # 42 down, 21 up, 1 idle
  \
    railyard model clos-cut --down 40 --up 20                 # explicit, 4 idle")]
pub struct ClosCutArgs {
    /// Ports per switch (QM9700: 64)
    #[arg(long, default_value_t = 64)]
    pub ports: usize,
    /// 2 (leaf-spine) or 3 (fat-tree pods)
    #[arg(long, default_value_t = 2)]
    pub tiers: u8,
    /// Leaf ports down:up, e.g. 3:1 (48 down, 16 up at k=64). A ratio that does not
    /// divide the ports takes the largest whole split and says which ports stay idle
    /// (2:1 at k=64: 42 down, 21 up, 1 idle)
    #[arg(long, default_value = "1:1", value_parser = parse_ratio, conflicts_with_all = ["down", "up"])]
    pub oversubscription: (usize, usize),
    /// Explicit leaf ports down to endpoints (with --up); the rest of --ports stay idle
    #[arg(long, requires = "up")]
    pub down: Option<usize>,
    /// Explicit leaf ports up to the next tier (with --down)
    #[arg(long, requires = "down")]
    pub up: Option<usize>,
    /// Cards of one job that fills whole leaves; its cut is those leaves' uplinks
    #[arg(long, default_value_t = 1024)]
    pub job_cards: usize,
    /// Per-port bandwidth per direction (NDR 400 Gbit/s = 50 GB/s)
    #[arg(long, default_value = "50GB/s", value_parser = parse_bandwidth, allow_hyphen_values = true)]
    pub port_bandwidth: f64,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

/// Apply `KEY=VALUE` to a JSON object (dotted keys descend into objects, numbers index arrays).
fn apply_set(value: &mut serde_json::Value, assignment: &str) -> Result<()> {
    let (key, raw) = assignment.split_once('=').with_context(|| format!("--set {assignment}: expected KEY=VALUE"))?;
    let new: serde_json::Value =
        serde_json::from_str(raw).unwrap_or_else(|_| serde_json::Value::String(raw.to_string()));
    let mut at = value;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        at = match at {
            serde_json::Value::Object(map) => {
                if !map.contains_key(*part) {
                    let known: Vec<&String> = map.keys().collect();
                    bail!("--set {key}: no input \"{part}\" here (inputs: {known:?})");
                }
                map.get_mut(*part).with_context(|| format!("--set {key}"))?
            }
            serde_json::Value::Array(items) => {
                let index: usize = part.parse().with_context(|| format!("--set {key}: \"{part}\" is not an index"))?;
                let len = items.len();
                items
                    .get_mut(index)
                    .with_context(|| format!("--set {key}: index {index} is past the end ({len} items)"))?
            }
            _ => bail!("--set {key}: \"{part}\" goes inside a value that has no fields"),
        };
        if last {
            *at = new.clone();
            return Ok(());
        }
    }
    Ok(())
}

fn inputs<I: DeserializeOwned + Serialize + Default>(args: &ScenarioArgs) -> Result<I> {
    let parse_err = |e: serde_path_to_error::Error<serde_json::Error>| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        anyhow::anyhow!("input {}: {}", if path == "." { "(top level)".into() } else { format!("`{path}`") }, inner)
    };
    if args.set.is_empty() {
        if let Some(path) = &args.inputs {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            let mut de = serde_json::Deserializer::from_str(&text);
            return serde_path_to_error::deserialize(&mut de)
                .map_err(parse_err)
                .with_context(|| format!("scenario {}", path.display()));
        }
        return Ok(I::default());
    }
    let mut value = match &args.inputs {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("scenario {}", path.display()))?
        }
        None => serde_json::to_value(I::default())?,
    };
    for s in &args.set {
        apply_set(&mut value, s)?;
    }
    serde_path_to_error::deserialize(value).map_err(parse_err)
}

/// Draws a model's chart from its output and input.
type Chart<'a, O, I> = &'a dyn Fn(&O, &I) -> String;

/// Run one scenario model: inputs, the pure function, then JSON or Markdown (and a chart).
fn scenario<I, O>(
    args: &ScenarioArgs,
    model: impl Fn(&I) -> Result<O, railyard_netmodels::NetModelError>,
    markdown: impl Fn(&O, &I) -> String,
    chart: Option<Chart<O, I>>,
) -> Result<String>
where
    I: DeserializeOwned + Serialize + Default,
    O: Serialize,
{
    let input: I = inputs(args)?;
    if args.print_inputs {
        return Ok(serde_json::to_string_pretty(&input)? + "\n");
    }
    let output = model(&input)?;
    if let Some(path) = &args.svg {
        let draw =
            chart.context("this model has no chart; --svg works with concurrency, remote-read, queue and ecmp")?;
        std::fs::write(path, draw(&output, &input)).with_context(|| format!("cannot write {}", path.display()))?;
    }
    match args.format {
        Format::Json => Ok(serde_json::to_string_pretty(&output)? + "\n"),
        Format::Md => Ok(markdown(&output, &input)),
    }
}

fn concurrency_chart(o: &concurrency::ConcurrencyOutput, i: &concurrency::ConcurrencyInput) -> String {
    let max_slots = i.slots.iter().copied().max().unwrap_or(1).max(o.slots_needed + o.slots_needed / 4);
    let grid: Vec<u64> = (1..=60).map(|k| (k * max_slots).div_ceil(60)).collect();
    let sweep = |with_issue: bool| -> Vec<(f64, f64)> {
        grid.iter()
            .map(|&n| {
                let slot = n as f64 * i.request_bytes / i.slot_secs;
                let mut b = slot.min(i.path_bytes_per_sec);
                if with_issue {
                    b = b.min(o.issue_bound_bytes_per_sec);
                }
                (n as f64, b / 1e9)
            })
            .collect()
    };
    LineChart {
        title: format!(
            "Effective bandwidth vs request slots ({} B requests, T = {} us)",
            i.request_bytes,
            i.slot_secs * 1e6
        ),
        x_label: "slots in flight N".into(),
        y_label: "effective bandwidth (GB/s)".into(),
        log_x: false,
        series: vec![
            Series { name: "path and slots: min(B, Nm/T)".into(), points: sweep(false) },
            Series { name: "with issue rate: min(B, Nm/T, m/δ)".into(), points: sweep(true) },
        ],
        marks: vec![Mark {
            x: o.slots_needed as f64,
            y: i.path_bytes_per_sec / 1e9,
            label: format!("N = ⌈BT/m⌉ = {}", o.slots_needed),
        }],
    }
    .svg()
}

fn remote_read_chart(o: &remote_read::RemoteReadOutput, _: &remote_read::RemoteReadInput) -> String {
    let mut names: Vec<String> = Vec::new();
    for p in &o.paths {
        for (c, _) in &p.by_category {
            if !names.contains(c) {
                names.push(c.clone());
            }
        }
    }
    StackedBars {
        title: "One 64 B remote read: critical-path stages by category".into(),
        y_label: "latency (ns)".into(),
        categories: o.paths.iter().map(|p| p.name.clone()).collect(),
        segments: names
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    o.paths
                        .iter()
                        .map(|p| p.by_category.iter().find(|(c, _)| c == n).map_or(0.0, |(_, s)| s * 1e9))
                        .collect(),
                )
            })
            .collect(),
    }
    .svg()
}

fn queue_chart(o: &queue::QueueOutput, i: &queue::QueueInput) -> String {
    LineChart {
        title: format!("Backlog at a {} GB/s egress", i.egress_bytes_per_sec / 1e9),
        x_label: "time (ms)".into(),
        y_label: "backlog (MB)".into(),
        log_x: false,
        series: o
            .scenarios
            .iter()
            .map(|s| Series {
                name: s.name.clone(),
                points: s.backlog.iter().map(|&(t, q)| (t * 1e3, q / 1e6)).collect(),
            })
            .collect(),
        marks: o
            .scenarios
            .iter()
            .filter(|s| s.peak_bytes > 0.0)
            .map(|s| Mark {
                x: s.peak_at_secs * 1e3,
                y: s.peak_bytes / 1e6,
                label: format!("peak {:.0} MB", s.peak_bytes / 1e6),
            })
            .collect(),
    }
    .svg()
}

fn ecmp_chart(o: &ecmp::EcmpOutput, _: &ecmp::EcmpInput) -> String {
    LineChart {
        title: "Busiest uplink's load: exact distribution per (flows, uplinks)".into(),
        x_label: "flows on the busiest uplink L_max".into(),
        y_label: "probability".into(),
        log_x: false,
        series: o
            .cases
            .iter()
            .map(|c| Series {
                name: format!("n={} m={} (E={:.2})", c.flows, c.uplinks, c.expected_max),
                points: c
                    .distribution
                    .iter()
                    .enumerate()
                    .filter(|(k, p)| **p > 1e-6 || *k as u32 <= c.percentile_max)
                    .map(|(k, &p)| (k as f64, p))
                    .collect(),
            })
            .collect(),
        marks: o
            .cases
            .iter()
            .map(|c| Mark { x: c.expected_max, y: 0.0, label: format!("E={:.2}", c.expected_max) })
            .collect(),
    }
    .svg()
}

pub fn run(cmd: &ModelCommand) -> Result<String> {
    match cmd {
        ModelCommand::ClosCut(a) => {
            let split = match (a.down, a.up) {
                (Some(down), Some(up)) => leaf_ports_explicit(a.ports, down, up)?,
                _ => leaf_ports(a.ports, a.oversubscription)?,
            };
            let cut = clos_cut(&ClosInput {
                ports: a.ports,
                tiers: a.tiers,
                down: split.down,
                up: split.up,
                port_bytes_per_sec: a.port_bandwidth,
                job_cards: Some(a.job_cards),
            })?;
            match a.format {
                Format::Json => Ok(serde_json::to_string_pretty(&cut)? + "\n"),
                Format::Md => Ok(clos_markdown(&cut)),
            }
        }
        ModelCommand::Message(a) => scenario(a, message::message, |o, i| o.markdown(i), None),
        ModelCommand::EpDispatch(a) => scenario(a, ep_dispatch::ep_dispatch, |o, _| o.markdown(), None),
        ModelCommand::NicRelay(a) => scenario(a, nic_relay::nic_relay, |o, i| o.markdown(i), None),
        ModelCommand::Concurrency(a) => {
            scenario(a, concurrency::concurrency, |o, i| o.markdown(i), Some(&concurrency_chart))
        }
        ModelCommand::RemoteRead(a) => {
            scenario(a, remote_read::remote_read, |o, i| o.markdown(i), Some(&remote_read_chart))
        }
        ModelCommand::ConnectionState(a) => scenario(a, connection_state::connection_state, |o, i| o.markdown(i), None),
        ModelCommand::Dag(a) => scenario(a, dag::dag, |o, _| o.markdown(), None),
        ModelCommand::Slots(a) => scenario(a, slots::slots, |o, i| o.markdown(i), None),
        ModelCommand::Queue(a) => scenario(a, queue::queue, |o, i| o.markdown(i), Some(&queue_chart)),
        ModelCommand::Feedback(a) => scenario(a, feedback::feedback, |o, i| o.markdown(i), None),
        ModelCommand::Incast(a) => scenario(a, incast::incast, |o, i| o.markdown(i), None),
        ModelCommand::Multipath(a) => scenario(a, multipath::multipath, |o, i| o.markdown(i), None),
        ModelCommand::Ecmp(a) => scenario(a, ecmp::ecmp, |o, i| o.markdown(i), Some(&ecmp_chart)),
        ModelCommand::Spray(a) => scenario(a, spray::spray, |o, i| o.markdown(i), None),
        ModelCommand::Deadlock(a) => scenario(a, deadlock::deadlock, |o, _| o.markdown(), None),
    }
}

fn clos_markdown(c: &ClosCut) -> String {
    let mut out = format!(
        "# {}-tier Clos of {}-port switches, leaves {} down / {} up ({}:1){}\n\n",
        c.tiers,
        c.ports,
        c.leaf_down,
        c.leaf_up,
        railyard_units::units::trim_float(c.oversubscription, 4),
        match c.leaf_idle {
            0 => String::new(),
            1 => ", 1 port idle".to_string(),
            n => format!(", {n} ports idle"),
        }
    );
    let mut t = Table::new(["quantity", "value", "how"]);
    let middle = if c.tiers == 2 { "spines" } else { "aggregation switches" };
    t.row([
        "endpoints".to_string(),
        c.endpoints.to_string(),
        if c.tiers == 2 { "k·d".into() } else { "k·(k/2)·d".to_string() },
    ]);
    t.row([
        "switches".to_string(),
        c.switches.to_string(),
        format!("{} leaves + {} {middle} + {} cores", c.leaves, c.spines, c.cores),
    ]);
    t.row([
        "bisection bandwidth".to_string(),
        format_bytes_per_sec(c.bisection_bytes_per_sec),
        format!("half of {} top-tier links", c.top_links),
    ]);
    t.row([
        "non-blocking bisection, same endpoints".to_string(),
        format_bytes_per_sec(c.nonblocking_bisection_bytes_per_sec),
        "endpoints/2 x port".to_string(),
    ]);
    t.row([
        "per endpoint across the bisection".to_string(),
        format_bytes_per_sec(c.per_endpoint_bisection_bytes_per_sec),
        "bisection / (endpoints/2)".to_string(),
    ]);
    if let Some(j) = &c.job {
        t.row([
            format!("job of {} cards: leaves", j.cards),
            j.leaves.to_string(),
            "⌈cards/d⌉ whole leaves".to_string(),
        ]);
        t.row([
            "job cut".to_string(),
            format_bytes_per_sec(j.job_cut_bytes_per_sec),
            format!("{} uplinks x port", j.cut_links),
        ]);
        t.row(["per card".to_string(), format_bytes_per_sec(j.per_card_bytes_per_sec), "cut / cards".to_string()]);
    }
    out.push_str(&t.render());
    out.push_str(
        "\nSeed 001 §7.1.2: the cut's bandwidth bounds any transfer across it, T ≥ V/B. With oversubscription r, \
         the uplinks stop being the bottleneck only when at most 1/r of a NIC's bytes leave its leaf.\n",
    );
    out
}

//! `railyard model NAME`: the analytical models of the seeds. Each model's defaults are
//! the chapter's worked example, so `railyard model NAME` alone prints the book's table
//! with what limits the result; `--inputs FILE` replaces every input (a JSON scenario;
//! `scenarios/NAME.json` are the defaults written out), `--set key=value` changes one.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{ArgMatches, Args, Command, FromArgMatches, Subcommand};
use railyard_netmodels::clos::{clos_cut, leaf_ports, leaf_ports_explicit, ClosCut, ClosInput};
use railyard_netmodels::registry::{self, Inputs, Model, MODELS};
use railyard_netmodels::NetModelError;
use railyard_units::units::format_bytes_per_sec;
use railyard_units::Table;

use crate::args::{parse_bandwidth, parse_ratio, Format};

/// `railyard model`: clos-cut, and a subcommand per scenario model of the netmodels
/// registry (its name and summary come from there).
#[derive(Debug)]
pub enum ModelCommand {
    /// Size a k-port Clos fabric: endpoints, switches, bisection, a job's cut (seed 001 §7.1.2)
    ClosCut(ClosCutArgs),
    Scenario(&'static Model, ScenarioArgs),
}

const CLOS_CUT_ABOUT: &str = "Size a k-port Clos fabric: endpoints, switches, bisection, a job's cut";

impl FromArgMatches for ModelCommand {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        match matches.subcommand() {
            Some(("clos-cut", sub)) => Ok(ModelCommand::ClosCut(ClosCutArgs::from_arg_matches(sub)?)),
            Some((name, sub)) => match registry::find(name) {
                Ok(model) => Ok(ModelCommand::Scenario(model, ScenarioArgs::from_arg_matches(sub)?)),
                Err(e) => Err(clap::Error::raw(clap::error::ErrorKind::InvalidSubcommand, e.to_string())),
            },
            None => Err(clap::Error::raw(clap::error::ErrorKind::MissingSubcommand, "a model is required")),
        }
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Subcommand for ModelCommand {
    fn augment_subcommands(cmd: Command) -> Command {
        let cmd = cmd.subcommand(ClosCutArgs::augment_args(Command::new("clos-cut").about(CLOS_CUT_ABOUT)));
        MODELS
            .iter()
            .fold(cmd, |cmd, m| cmd.subcommand(ScenarioArgs::augment_args(Command::new(m.name).about(m.about))))
    }

    fn augment_subcommands_for_update(cmd: Command) -> Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        name == "clos-cut" || registry::find(name).is_ok()
    }
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

/// Run one scenario model: its inputs (the file or the defaults, then every --set), then
/// JSON or Markdown (and its chart).
fn scenario(model: &Model, args: &ScenarioArgs) -> Result<String> {
    let mut changes = Vec::with_capacity(args.set.len());
    for assignment in &args.set {
        let (key, raw) =
            assignment.split_once('=').with_context(|| format!("--set {assignment}: expected KEY=VALUE"))?;
        // JSON, or else a string (so units work: path_bytes_per_sec=50GB/s).
        let value = serde_json::from_str(raw).unwrap_or_else(|_| serde_json::Value::String(raw.to_string()));
        changes.push((key.to_string(), value));
    }
    let text = match &args.inputs {
        Some(path) => Some(std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?),
        None => None,
    };
    let inputs = Inputs { scenario: text.as_deref(), changes: &changes };
    let in_words = |e: NetModelError| match (&e, &args.inputs) {
        (NetModelError::Set { .. }, _) => anyhow::anyhow!("--set {e}"),
        (NetModelError::Input { .. } | NetModelError::Scenario { .. }, Some(path))
            if changes.is_empty() || matches!(e, NetModelError::Scenario { .. }) =>
        {
            anyhow::anyhow!("scenario {}: {e}", path.display())
        }
        _ => anyhow::Error::new(e),
    };
    if args.print_inputs {
        return Ok(model.inputs(&inputs).map_err(in_words)? + "\n");
    }
    if args.svg.is_some() && !model.has_chart {
        let drawn: Vec<&str> = MODELS.iter().filter(|m| m.has_chart).map(|m| m.name).collect();
        let (last, rest) = drawn.split_last().map_or(("", &[][..]), |(l, r)| (*l, r));
        bail!("this model has no chart; --svg works with {} and {last}", rest.join(", "));
    }
    let run = model.evaluate(&inputs, args.svg.is_some()).map_err(in_words)?;
    if let (Some(path), Some(svg)) = (&args.svg, &run.chart_svg) {
        std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    }
    match args.format {
        Format::Json => Ok(run.output_json + "\n"),
        Format::Md => Ok(run.markdown),
    }
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
        ModelCommand::Scenario(model, args) => scenario(model, args),
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
        "\nThe cut's bandwidth bounds any transfer across it, T ≥ V/B. With oversubscription r, \
         the uplinks stop being the bottleneck only when at most 1/r of a NIC's bytes leave its leaf.\n",
    );
    out
}

//! `railyard model NAME`: the analytical models of the seeds, each with the chapter's
//! example as its defaults.

use anyhow::Result;
use clap::{Args, Subcommand};
use railyard_model::clos::{clos_cut, leaf_ports, ClosCut, ClosInput};
use railyard_topology::units::format_bytes_per_sec;

use crate::args::{parse_bandwidth, parse_ratio, Format};
use railyard_model::report::Table;

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Size a k-port Clos fabric: endpoints, switches, bisection, a job's cut (seed 001 §7.1.2)
    ClosCut(ClosCutArgs),
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard model clos-cut                                   # k=64, 2 tiers, 1:1, 1024-card job\n  \
    railyard model clos-cut --oversubscription 3:1 --format json\n  \
    railyard model clos-cut --tiers 3")]
pub struct ClosCutArgs {
    /// Ports per switch (QM9700: 64)
    #[arg(long, default_value_t = 64)]
    pub ports: usize,
    /// 2 (leaf-spine) or 3 (fat-tree pods)
    #[arg(long, default_value_t = 2)]
    pub tiers: u8,
    /// Leaf ports down:up, e.g. 3:1 (48 down, 16 up at k=64)
    #[arg(long, default_value = "1:1", value_parser = parse_ratio)]
    pub oversubscription: (usize, usize),
    /// Cards of one job that fills whole leaves; its cut is those leaves' uplinks
    #[arg(long, default_value_t = 1024)]
    pub job_cards: usize,
    /// Per-port bandwidth per direction (NDR 400 Gbit/s = 50 GB/s)
    #[arg(long, default_value = "50GB/s", value_parser = parse_bandwidth, allow_hyphen_values = true)]
    pub port_bandwidth: f64,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

pub fn run(cmd: &ModelCommand) -> Result<String> {
    match cmd {
        ModelCommand::ClosCut(a) => {
            let (down, up) = leaf_ports(a.ports, a.oversubscription)?;
            let cut = clos_cut(&ClosInput {
                ports: a.ports,
                tiers: a.tiers,
                down,
                up,
                port_bytes_per_sec: a.port_bandwidth,
                job_cards: Some(a.job_cards),
            })?;
            match a.format {
                Format::Json => Ok(serde_json::to_string_pretty(&cut)? + "\n"),
                Format::Md => Ok(clos_markdown(&cut)),
            }
        }
    }
}

fn clos_markdown(c: &ClosCut) -> String {
    let mut out = format!(
        "# {}-tier Clos of {}-port switches, leaves {} down / {} up ({}:1)\n\n",
        c.tiers,
        c.ports,
        c.leaf_down,
        c.leaf_up,
        railyard_topology::units::trim_float(c.oversubscription, 4)
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

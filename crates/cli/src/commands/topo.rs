//! `railyard topo`: list the presets, show a topology, validate a topology file.

use anyhow::{Context, Result};
use clap::Subcommand;
use railyard_topology::presets::PRESETS;
use railyard_topology::units::{format_bytes_per_sec, format_secs};
use railyard_topology::{DeviceKind, Topology};
use serde::Serialize;

use crate::args::Format;
use railyard_model::report::Table;

#[derive(Debug, Subcommand)]
pub enum TopoCommand {
    /// List the built-in presets and generators, with their parameters and sources
    List {
        #[arg(long, value_enum, default_value = "md")]
        format: Format,
    },
    /// Show a preset or topology file: devices, links, shared interfaces, default ranks
    Show {
        /// Preset spec (e.g. `hgx-h100x2`, `a100-pcie-control:ports=3`) or a TOML/JSON file
        topology: String,
        #[arg(long, value_enum, default_value = "md")]
        format: Format,
    },
    /// Check a topology file; prints a summary, or the first problem with the field it is in
    Validate {
        /// TOML or JSON topology file (see `railyard topo show` for the shape)
        file: String,
        #[arg(long, value_enum, default_value = "md")]
        format: Format,
    },
}

#[derive(Serialize)]
struct PresetView {
    name: &'static str,
    summary: &'static str,
    parameters: &'static str,
    source: &'static str,
}

#[derive(Serialize)]
struct DeviceView<'a> {
    name: &'a str,
    kind: &'static str,
    server: Option<&'a str>,
    tier: Option<u8>,
    rail: Option<u32>,
    in_network_reduction: bool,
}

#[derive(Serialize)]
struct LinkView {
    from: String,
    to: String,
    class: &'static str,
    bytes_per_sec: f64,
    latency_secs: f64,
    interfaces: Vec<String>,
}

#[derive(Serialize)]
struct InterfaceView<'a> {
    name: &'a str,
    bytes_per_sec: f64,
}

#[derive(Serialize)]
struct TopologyView<'a> {
    name: &'a str,
    description: &'a str,
    round_startup_secs: f64,
    gpus: usize,
    servers: usize,
    devices: Vec<DeviceView<'a>>,
    links: Vec<LinkView>,
    interfaces: Vec<InterfaceView<'a>>,
    ranks: Vec<&'a str>,
}

fn view(t: &Topology) -> TopologyView<'_> {
    let mut servers: Vec<&str> = t.default_ranks.iter().map(|&d| t.server_of(d)).collect();
    servers.dedup();
    TopologyView {
        name: &t.name,
        description: &t.description,
        round_startup_secs: t.round_startup_secs,
        gpus: t.gpus().len(),
        servers: servers.len(),
        devices: t
            .devices
            .iter()
            .map(|d| DeviceView {
                name: &d.name,
                kind: d.kind.as_str(),
                server: d.server.as_deref(),
                tier: d.tier,
                rail: d.rail,
                in_network_reduction: d.in_network_reduction,
            })
            .collect(),
        links: t
            .links
            .iter()
            .map(|l| LinkView {
                from: t.devices[l.from].name.clone(),
                to: t.devices[l.to].name.clone(),
                class: l.class.as_str(),
                bytes_per_sec: l.bytes_per_sec,
                latency_secs: l.latency_secs,
                interfaces: l
                    .interfaces
                    .iter()
                    .map(|u| {
                        t.resource_name(railyard_topology::Resource::Interface {
                            interface: u.interface,
                            reverse: u.reverse,
                        })
                    })
                    .collect(),
            })
            .collect(),
        interfaces: t
            .interfaces
            .iter()
            .map(|i| InterfaceView { name: &i.name, bytes_per_sec: i.bytes_per_sec })
            .collect(),
        ranks: t.default_ranks.iter().map(|&d| t.devices[d].name.as_str()).collect(),
    }
}

fn summary_markdown(t: &Topology) -> String {
    let v = view(t);
    let mut out = format!("# {}\n\n{}\n\n", v.name, v.description);
    out.push_str(&format!(
        "{} GPUs on {} servers; {} devices, {} directed links, {} shared interfaces; α = {} per round.\n\n",
        v.gpus,
        v.servers,
        v.devices.len(),
        v.links.len(),
        v.interfaces.len(),
        format_secs(v.round_startup_secs)
    ));
    let mut kinds = Table::new(["device kind", "count"]);
    for kind in [
        DeviceKind::Gpu,
        DeviceKind::Cpu,
        DeviceKind::PcieSwitch,
        DeviceKind::Nic,
        DeviceKind::NvSwitch,
        DeviceKind::Switch,
    ] {
        let n = t.devices.iter().filter(|d| d.kind == kind).count();
        if n > 0 {
            kinds.row([kind.as_str().to_string(), n.to_string()]);
        }
    }
    out.push_str(&kinds.render());
    // Links of one class and bandwidth, collapsed.
    let mut classes: Vec<(&'static str, f64, usize)> = Vec::new();
    for l in &v.links {
        match classes.iter_mut().find(|c| c.0 == l.class && c.1 == l.bytes_per_sec) {
            Some(c) => c.2 += 1,
            None => classes.push((l.class, l.bytes_per_sec, 1)),
        }
    }
    out.push('\n');
    let mut links = Table::new(["link class", "bandwidth per direction", "directed links"]);
    for (class, bw, n) in classes {
        links.row([class.to_string(), format_bytes_per_sec(bw), n.to_string()]);
    }
    out.push_str(&links.render());
    if !v.interfaces.is_empty() {
        out.push('\n');
        let mut ifs = Table::new(["shared interface", "bandwidth per direction", "links using it"]);
        for (i, iface) in t.interfaces.iter().enumerate() {
            let users = t.links.iter().filter(|l| l.interfaces.iter().any(|u| u.interface == i)).count();
            ifs.row([iface.name.clone(), format_bytes_per_sec(iface.bytes_per_sec), users.to_string()]);
        }
        out.push_str(&ifs.render());
    }
    let shown: Vec<&str> = v.ranks.iter().take(16).copied().collect();
    out.push_str(&format!(
        "\nDefault rank order: {}{}\n",
        shown.join(", "),
        if v.ranks.len() > 16 { format!(", ... ({} ranks)", v.ranks.len()) } else { String::new() }
    ));
    out
}

pub fn run(cmd: &TopoCommand) -> Result<String> {
    match cmd {
        TopoCommand::List { format } => {
            let presets: Vec<PresetView> = PRESETS
                .iter()
                .map(|p| PresetView { name: p.name, summary: p.summary, parameters: p.parameters, source: p.source })
                .collect();
            match format {
                Format::Json => Ok(serde_json::to_string_pretty(&presets)? + "\n"),
                Format::Md => {
                    let mut out = String::from(
                        "# Topology presets\n\nUse as `--topo NAME` or `--topo NAME:key=value,...`; \
                                                a path to a TOML/JSON file works wherever a preset does.\n",
                    );
                    for p in presets {
                        out.push_str(&format!(
                            "\n## {}\n\n{}\n\nParameters: {}\n\nSource: {}\n",
                            p.name, p.summary, p.parameters, p.source
                        ));
                    }
                    Ok(out)
                }
            }
        }
        TopoCommand::Show { topology, format } => {
            let t = railyard_topology::load(topology).with_context(|| format!("topology {topology}"))?;
            match format {
                Format::Json => Ok(serde_json::to_string_pretty(&view(&t))? + "\n"),
                Format::Md => Ok(summary_markdown(&t)),
            }
        }
        TopoCommand::Validate { file, format } => {
            let t = railyard_topology::file::load(std::path::Path::new(file))
                .with_context(|| format!("{file} is not a valid topology"))?;
            // Every rank must reach every other rank.
            for &a in &t.default_ranks {
                for &b in &t.default_ranks {
                    t.route(a, b).with_context(|| format!("{file} is not a valid topology"))?;
                }
            }
            match format {
                Format::Json => Ok(serde_json::to_string_pretty(&serde_json::json!({
                    "valid": true,
                    "name": t.name,
                    "devices": t.devices.len(),
                    "links": t.links.len(),
                    "interfaces": t.interfaces.len(),
                    "ranks": t.default_ranks.len(),
                }))? + "\n"),
                Format::Md => Ok(format!("{file}: valid\n\n{}", summary_markdown(&t))),
            }
        }
    }
}

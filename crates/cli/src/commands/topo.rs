//! `railyard topo`: list the presets, show a topology, validate a topology file.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use railyard_model::ring_search::best_ring;
use railyard_topology::file;
use railyard_topology::import::{nccl_xml, nvidia_smi, LinkDefaults};
use railyard_topology::presets::PRESETS;
use railyard_topology::{DeviceKind, Topology};
use railyard_topology::{Placement, PlacementPolicy};
use railyard_units::units::{format_bytes_per_sec, format_secs};
use serde::Serialize;

use crate::args::{parse_bandwidth, Format};
use railyard_units::Table;

#[derive(Debug, Subcommand)]
pub enum TopoCommand {
    /// List the built-in presets and generators, with their parameters and sources
    List {
        #[arg(long, value_enum, default_value = "md")]
        format: Format,
    },
    /// Show a preset or topology file: devices, links, shared interfaces, default ranks.
    /// `--format json` writes it in the topology file format, which loads again
    Show {
        /// Preset spec (e.g. `hgx-h100x2`, `a100-pcie-control:ports=3`) or a TOML/JSON file
        topology: String,
        #[arg(long, value_enum, default_value = "md")]
        format: Format,
    },
    /// Import `nvidia-smi topo -m` output or an NCCL topology XML dump (NCCL_TOPO_DUMP_FILE)
    Import(ImportArgs),
    /// Write a topology as NCCL topology XML (the shape NCCL_TOPO_FILE reads) or as a
    /// railyard topology file (TOML or JSON, which loads again as the same topology)
    #[command(after_help = "Examples:\n  \
        railyard topo export hgx-h100x2 -o topo.xml                # NCCL XML\n  \
        railyard topo export rail:servers=64 -o fabric.toml        # a file to edit and load with --topo\n  \
        railyard topo export hgx-h100x2 --format json")]
    Export {
        /// Preset spec or TOML/JSON file
        topology: String,
        /// Write to this file instead of standard output; its extension (.xml, .toml,
        /// .json) sets the format unless --format does
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// nccl-xml (the default on standard output), toml or json
        #[arg(long, value_enum)]
        format: Option<ExportFormat>,
    },
    /// Check a topology file; prints a summary, or the first problem with the field it is in
    Validate {
        /// TOML or JSON topology file (see `railyard topo show` for the shape)
        file: String,
        #[arg(long, value_enum, default_value = "md")]
        format: Format,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    NcclXml,
    Toml,
    Json,
}

impl ExportFormat {
    fn extension(self) -> &'static str {
        match self {
            ExportFormat::NcclXml => "xml",
            ExportFormat::Toml => "toml",
            ExportFormat::Json => "json",
        }
    }

    /// The format `-o PATH` and `--format` ask for; a clash between them is refused
    /// (`-o x.json` once wrote XML into x.json).
    fn choose(output: Option<&std::path::Path>, asked: Option<ExportFormat>) -> Result<ExportFormat> {
        let name = |f: ExportFormat| match f {
            ExportFormat::NcclXml => "nccl-xml",
            ExportFormat::Toml => "toml",
            ExportFormat::Json => "json",
        };
        // `.json` alone is a file name without an extension to Path; read the suffix itself.
        let suffix = output
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit_once('.').map(|(_, e)| e.to_string()));
        let by_extension = match (output, suffix) {
            (None, _) => None,
            (Some(_), Some(e)) => Some(
                [ExportFormat::NcclXml, ExportFormat::Toml, ExportFormat::Json]
                    .into_iter()
                    .find(|f| e.eq_ignore_ascii_case(f.extension()))
                    .with_context(|| format!("-o: unknown extension .{e}; use .xml, .toml or .json, or --format"))?,
            ),
            (Some(p), None) if asked.is_none() => {
                bail!(
                    "-o {}: no extension to say the format; end it in .xml, .toml or .json, or give --format",
                    p.display()
                )
            }
            (Some(_), None) => None,
        };
        match (asked, by_extension) {
            (Some(a), Some(b)) if a != b => {
                bail!("--format {} but -o ends in .{}; make them agree", name(a), b.extension())
            }
            (Some(f), _) | (None, Some(f)) => Ok(f),
            (None, None) => Ok(ExportFormat::NcclXml),
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    nvidia-smi topo -m > topo.txt && railyard topo import --nvidia-smi topo.txt --ring\n  \
    railyard topo import --nvidia-smi topo.txt --servers 2 -o cluster.toml && railyard plan --topo cluster.toml\n  \
    railyard topo import --nccl-xml nccl_topo.xml --format json")]
pub struct ImportArgs {
    /// A file holding `nvidia-smi topo -m` output
    #[arg(long, conflicts_with = "nccl_xml", required_unless_present = "nccl_xml")]
    pub nvidia_smi: Option<PathBuf>,
    /// An NCCL topology XML file (NCCL_TOPO_DUMP_FILE)
    #[arg(long)]
    pub nccl_xml: Option<PathBuf>,
    /// nvidia-smi: repeat the machine this many times, NICs wired to one fabric switch
    #[arg(long, default_value_t = 1)]
    pub servers: usize,
    /// Bandwidth of one NVLink per direction (NV12 = 12 of these)
    #[arg(long, default_value = "25GB/s", value_parser = parse_bandwidth)]
    pub nvlink_bw: f64,
    /// PCIe link bandwidth where the input gives none
    #[arg(long, default_value = "32GB/s", value_parser = parse_bandwidth)]
    pub pcie_bw: f64,
    /// Between CPU sockets (SYS)
    #[arg(long, default_value = "40GB/s", value_parser = parse_bandwidth)]
    pub socket_bw: f64,
    /// NIC bandwidth where the input gives none
    #[arg(long, default_value = "50GB/s", value_parser = parse_bandwidth)]
    pub nic_bw: f64,
    /// Per-round start-up α of the imported topology
    #[arg(long, default_value = "0.833us")]
    pub alpha: String,
    /// Write the imported topology in railyard's format (.toml or .json)
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Also search the ring order with the widest bottleneck over all its GPUs
    #[arg(long)]
    pub ring: bool,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

#[derive(Serialize)]
struct PresetView {
    name: &'static str,
    summary: &'static str,
    parameters: &'static str,
    source: &'static str,
}

fn summary_markdown(t: &Topology) -> String {
    let mut out = format!("# {}\n\n{}\n\n", t.name, t.description);
    out.push_str(&format!(
        "{} GPUs on {} servers; {} devices, {} directed links, {} shared interfaces; α = {} per round; routes by {}.\n\n",
        t.gpus().len(),
        t.gpu_servers(),
        t.devices.len(),
        t.links.len(),
        t.interfaces.len(),
        format_secs(t.round_startup_secs),
        crate::args::routing_words(t.routing.as_str())
    ));
    // Which switches reduce in the network: what the in-network and NVLS algorithms need.
    let count = |kind: DeviceKind, reducing: bool| {
        t.devices.iter().filter(|d| d.kind == kind && (!reducing || d.in_network_reduction)).count()
    };
    let plural = |n: usize, one: &str, many: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {many}") };
    let mut parts = Vec::new();
    for (kind, one, many, what) in [
        (DeviceKind::NvSwitch, "NVSwitch device", "NVSwitch devices", "NVLS"),
        (DeviceKind::Switch, "network switch", "network switches", "SHARP"),
    ] {
        let (all, reducing) = (count(kind, false), count(kind, true));
        match (all, reducing) {
            (0, _) => {}
            (_, 0) => parts.push(format!("no {many} reduce (no {what})")),
            (a, r) if a == r => {
                parts.push(format!("{} reduce{} ({what})", plural(r, one, many), if r == 1 { "s" } else { "" }))
            }
            (a, r) => {
                parts.push(format!("{r} of {} reduce{} ({what})", plural(a, one, many), if r == 1 { "s" } else { "" }))
            }
        }
    }
    let reduces = count(DeviceKind::NvSwitch, true) + count(DeviceKind::Switch, true) > 0;
    out.push_str(&if reduces {
        format!("In the network: {}.\n\n", parts.join("; "))
    } else {
        "Nothing reduces in the network: the in-network and NVLS algorithms do not run here.\n\n".into()
    });
    if let Some(h) = t.host.counted().then_some(&t.host) {
        out.push_str(&format!(
            "Host costs: local copies and reductions at {}, {} per message.\n\n",
            h.local_bytes_per_sec.map_or("- (not counted)".into(), railyard_units::units::format_bytes_per_sec),
            format_secs(h.message_secs)
        ));
    }
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
    for l in &t.links {
        match classes.iter_mut().find(|c| c.0 == l.class.as_str() && c.1 == l.bytes_per_sec) {
            Some(c) => c.2 += 1,
            None => classes.push((l.class.as_str(), l.bytes_per_sec, 1)),
        }
    }
    out.push('\n');
    let mut links = Table::new(["link class", "bandwidth per direction", "directed links"]);
    for (class, bw, n) in classes {
        links.row([class.to_string(), format_bytes_per_sec(bw), n.to_string()]);
    }
    out.push_str(&links.render());
    if !t.interfaces.is_empty() {
        out.push('\n');
        let mut ifs = Table::new(["shared interface", "bandwidth per direction", "links using it"]);
        for (i, iface) in t.interfaces.iter().enumerate() {
            let users = t.links.iter().filter(|l| l.interfaces.iter().any(|u| u.interface == i)).count();
            ifs.row([iface.name.clone(), format_bytes_per_sec(iface.bytes_per_sec), users.to_string()]);
        }
        out.push_str(&ifs.render());
    }
    out.push_str(&achievable_markdown(&t.achievable));
    let shown: Vec<&str> = t.default_ranks.iter().take(16).map(|&d| t.devices[d].name.as_str()).collect();
    out.push_str(&format!(
        "\nDefault rank order: {}{}\n",
        shown.join(", "),
        if t.default_ranks.len() > 16 { format!(", ... ({} ranks)", t.default_ranks.len()) } else { String::new() }
    ));
    out
}

/// What the expected times assume on this topology (`plan`'s `expected` column).
fn achievable_markdown(a: &railyard_topology::Achievable) -> String {
    use railyard_topology::{Hop, Protocol};
    let pct = |f: f64| format!("{:.1}%", f * 100.0);
    let mut out =
        format!("\nAchievable rates (the expected times; the bound uses line rates and α): {}.\n\n", a.source);
    let mut fractions = Table::new(["of line rate", "fraction"]);
    for (name, f) in [
        ("copies over NVLink", a.nvlink),
        ("copies over PCIe and shared interfaces", a.pcie),
        ("a NIC's wire", a.nic),
        ("switch-to-switch links", a.fabric),
        ("in-switch reduction on an NVSwitch (NVLS)", a.nvls),
        ("in-network reduction on network switches (SHARP)", a.sharp),
    ] {
        fractions.row([name.to_string(), pct(f)]);
    }
    out.push_str(&fractions.render());
    out.push('\n');
    let mut protocols =
        Table::new(["protocol", "payload", "per call", "per NVLink round", "per PCIe round", "per network round"]);
    for p in Protocol::ALL {
        protocols.row([
            p.as_str().to_string(),
            pct(a.protocol_fraction[p.index()]),
            format_secs(a.call_secs[p.index()]),
            format_secs(a.hop_secs(Hop::Nvlink, p)),
            format_secs(a.hop_secs(Hop::Pcie, p)),
            format_secs(a.hop_secs(Hop::Net, p)),
        ]);
    }
    out.push_str(&protocols.render());
    out.push_str(&format!(
        "\nA round of in-switch reductions takes {} on an NVSwitch, {} on network switches (Simple only).\n",
        format_secs(a.nvls_hop_secs),
        format_secs(a.sharp_hop_secs)
    ));
    out
}

fn import(a: &ImportArgs) -> Result<String> {
    let defaults = LinkDefaults {
        nvlink_bytes_per_sec: a.nvlink_bw,
        pcie_bytes_per_sec: a.pcie_bw,
        inter_socket_bytes_per_sec: a.socket_bw,
        nic_bytes_per_sec: a.nic_bw,
        round_startup_secs: railyard_units::units::parse_secs(&a.alpha).map_err(|e| anyhow::anyhow!("--alpha: {e}"))?,
    };
    let (path, t) = match (&a.nvidia_smi, &a.nccl_xml) {
        (Some(p), None) => {
            let text = railyard_topology::file::read_text(p, IMPORT_BYTES)?;
            let name = p.file_stem().and_then(|s| s.to_str()).unwrap_or("nvidia-smi");
            (p, nvidia_smi::import(&text, name, a.servers, &defaults)?)
        }
        (None, Some(p)) => {
            if a.servers != 1 {
                bail!("--servers is for --nvidia-smi; an NCCL XML names its hosts itself");
            }
            let text = railyard_topology::file::read_text(p, IMPORT_BYTES)?;
            let name = p.file_stem().and_then(|s| s.to_str()).unwrap_or("nccl-xml");
            (p, nccl_xml::import(&text, name, &defaults)?)
        }
        _ => bail!("give exactly one of --nvidia-smi FILE or --nccl-xml FILE"),
    };
    if let Some(out) = &a.output {
        let format = if out.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            railyard_topology::file::FileFormat::Json
        } else {
            railyard_topology::file::FileFormat::Toml
        };
        std::fs::write(out, railyard_topology::file::write(&t, format)?)
            .with_context(|| format!("cannot write {}", out.display()))?;
    }
    let ring = if a.ring {
        let placement = Placement::new(&t, &PlacementPolicy::Contiguous, None)?;
        Some(best_ring(&t, &placement, false)?)
    } else {
        None
    };
    match a.format {
        Format::Json => {
            // The topology in the file format, which loads again.
            let topology: serde_json::Value = serde_json::from_str(&file::write(&t, file::FileFormat::Json)?)?;
            Ok(serde_json::to_string_pretty(&serde_json::json!({ "topology": topology, "ring": ring }))? + "\n")
        }
        Format::Md => {
            let mut out = format!("Imported {}.\n\n{}", path.display(), summary_markdown(&t));
            if let Some(r) = ring {
                let names: Vec<&str> = r.order.iter().map(|&i| t.devices[t.default_ranks[i]].name.as_str()).collect();
                out.push_str(&format!(
                    "\nBest ring ({}): {} → back; every edge sustains {} (bottleneck `{}`).\n",
                    match (r.exhaustive, r.stopped_early) {
                        (true, _) => "exhaustive search".to_string(),
                        (false, false) => "heuristic".to_string(),
                        (false, true) => format!(
                            "heuristic, stopped after {} orders scored, its limit: a good ring, maybe not the best",
                            r.orders_evaluated
                        ),
                    },
                    names.join(" → "),
                    format_bytes_per_sec(r.ring_bytes_per_sec),
                    r.bottleneck
                ));
                out.push_str(&format!(
                    "Channel set: {} ring(s){}, {} in total.\n",
                    r.channels.len(),
                    if r.channels.len() > 1 {
                        " (the ring and its reverse, on the other direction of each link)"
                    } else {
                        ""
                    },
                    format_bytes_per_sec(r.channels_bytes_per_sec)
                ));
            }
            Ok(out)
        }
    }
}

pub fn run(cmd: &TopoCommand) -> Result<String> {
    match cmd {
        TopoCommand::Import(a) => import(a),
        TopoCommand::Export { topology, output, format } => {
            let format = ExportFormat::choose(output.as_deref(), *format)?;
            let t = railyard_topology::load(topology).with_context(|| format!("topology {topology}"))?;
            let text = match format {
                ExportFormat::NcclXml => nccl_xml::export(&t, &LinkDefaults::default()),
                ExportFormat::Toml => file::write(&t, file::FileFormat::Toml)?,
                ExportFormat::Json => file::write(&t, file::FileFormat::Json)?,
            };
            match output {
                Some(path) => {
                    std::fs::write(path, &text).with_context(|| format!("cannot write {}", path.display()))?;
                    Ok(format!("wrote {} ({} GPUs, {})\n", path.display(), t.gpus().len(), format.extension()))
                }
                None => Ok(text),
            }
        }
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
                Format::Json => Ok(file::write(&t, file::FileFormat::Json)?),
                Format::Md => Ok(summary_markdown(&t)),
            }
        }
        TopoCommand::Validate { file, format } => {
            let t = railyard_topology::file::load(std::path::Path::new(file))
                .with_context(|| format!("{file} is not a valid topology"))?;
            // Every rank must reach every other rank (no route is kept).
            let routes = railyard_topology::RouteTable::new(&t);
            routes.all_reachable(&t.default_ranks).with_context(|| format!("{file} is not a valid topology"))?;
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

/// The largest `nvidia-smi` or NCCL XML file imported (a machine's is a few KiB).
const IMPORT_BYTES: u64 = 16 << 20;

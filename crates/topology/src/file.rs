//! The topology file format, in TOML or JSON. Quantities take units
//! (`bandwidth = "450 GB/s"`, `latency = "1us"`) or plain numbers in bytes/s and seconds.
//!
//! ```toml
//! name = "two-box"
//! round_startup = "0.833us"
//!
//! [[device]]
//! name = "A.gpu0"
//! kind = "gpu"          # gpu | cpu | pcie-switch | nic | nvswitch | switch
//! server = "A"
//!
//! [[interface]]         # a resource several links share, e.g. a NIC's PCIe slot
//! name = "A.nic.slot"
//! bandwidth = "32 GB/s" # per direction
//!
//! [[link]]
//! from = "A.cpu"
//! to = "A.nic.p0"
//! bandwidth = "32 GB/s" # per direction
//! duplex = true         # default: also the link back, using the interfaces in reverse
//! interfaces = ["A.nic.slot"]
//!
//! ranks = ["A.gpu0", "A.gpu1"]   # optional default rank order (GPUs only)
//! ```

use std::path::Path;

use serde::Deserialize;

use crate::error::TopologyError;
use crate::graph::{Device, DeviceKind, Interface, InterfaceUse, Link, LinkClass, Topology, TopologyBuilder};
use crate::units::{parse_bytes_per_sec, parse_secs};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    name: Option<String>,
    description: Option<String>,
    round_startup: Option<Quantity>,
    #[serde(default, rename = "device", alias = "devices")]
    devices: Vec<DeviceEntry>,
    #[serde(default, rename = "interface", alias = "interfaces")]
    interfaces: Vec<InterfaceEntry>,
    #[serde(default, rename = "link", alias = "links")]
    links: Vec<LinkEntry>,
    ranks: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceEntry {
    name: String,
    kind: DeviceKind,
    server: Option<String>,
    tier: Option<u8>,
    rail: Option<u32>,
    #[serde(default)]
    in_network_reduction: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InterfaceEntry {
    name: String,
    bandwidth: Quantity,
    forward_label: Option<String>,
    reverse_label: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkEntry {
    from: String,
    to: String,
    bandwidth: Quantity,
    latency: Option<Quantity>,
    duplex: Option<bool>,
    class: Option<LinkClass>,
    #[serde(default)]
    interfaces: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Quantity {
    Number(f64),
    Text(String),
}

impl Quantity {
    fn bytes_per_sec(&self, field: &str) -> Result<f64, TopologyError> {
        match self {
            // Checked for sign and finiteness by the builder, which names the field.
            Quantity::Number(v) => Ok(*v),
            Quantity::Text(t) => {
                parse_bytes_per_sec(t).map_err(|source| TopologyError::Unit { field: field.to_string(), source })
            }
        }
    }

    fn secs(&self, field: &str) -> Result<f64, TopologyError> {
        match self {
            Quantity::Number(v) => Ok(*v),
            Quantity::Text(t) => {
                parse_secs(t).map_err(|source| TopologyError::Unit { field: field.to_string(), source })
            }
        }
    }
}

/// Which syntax a topology file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Toml,
    Json,
}

/// Read a topology file; the format comes from the extension (`.json`, else TOML).
pub fn load(path: &Path) -> Result<Topology, TopologyError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TopologyError::Io { path: path.display().to_string(), message: e.to_string() })?;
    let format = match path.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("json") => FileFormat::Json,
        _ => FileFormat::Toml,
    };
    let default_name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("topology");
    parse(&text, format, default_name)
}

/// Parse a topology from text.
pub fn parse(text: &str, format: FileFormat, default_name: &str) -> Result<Topology, TopologyError> {
    let file: TopologyFile = match format {
        FileFormat::Toml => toml::from_str(text)
            .map_err(|e| TopologyError::Parse { format: "TOML", message: e.to_string().trim_end().to_string() })?,
        FileFormat::Json => {
            serde_json::from_str(text).map_err(|e| TopologyError::Parse { format: "JSON", message: e.to_string() })?
        }
    };
    build(file, default_name)
}

fn build(file: TopologyFile, default_name: &str) -> Result<Topology, TopologyError> {
    let mut b = TopologyBuilder::new(file.name.unwrap_or_else(|| default_name.to_string()));
    if let Some(d) = file.description {
        b.description(d);
    }
    if let Some(alpha) = &file.round_startup {
        b.round_startup_secs(alpha.secs("round_startup")?);
    }
    for (i, d) in file.devices.into_iter().enumerate() {
        let field = format!("device[{i}] \"{}\"", d.name);
        b.add_device(
            Device {
                name: d.name,
                kind: d.kind,
                server: d.server,
                tier: d.tier,
                rail: d.rail,
                in_network_reduction: d.in_network_reduction,
            },
            &field,
        );
    }
    for (i, iface) in file.interfaces.into_iter().enumerate() {
        let field = format!("interface[{i}] \"{}\"", iface.name);
        let bytes_per_sec = iface.bandwidth.bytes_per_sec(&format!("{field}.bandwidth"))?;
        b.add_interface(
            Interface {
                name: iface.name,
                bytes_per_sec,
                forward_label: iface.forward_label.unwrap_or_else(|| "forward".into()),
                reverse_label: iface.reverse_label.unwrap_or_else(|| "reverse".into()),
            },
            &format!("{field}.bandwidth"),
        );
    }
    for (i, l) in file.links.into_iter().enumerate() {
        let field = format!("link[{i}] ({} -> {})", l.from, l.to);
        let from = b
            .device_by_name(&l.from)
            .ok_or_else(|| TopologyError::UnknownDevice { field: format!("link[{i}].from"), name: l.from.clone() })?;
        let to = b
            .device_by_name(&l.to)
            .ok_or_else(|| TopologyError::UnknownDevice { field: format!("link[{i}].to"), name: l.to.clone() })?;
        let bytes_per_sec = l.bandwidth.bytes_per_sec(&format!("{field}.bandwidth"))?;
        let latency_secs = match &l.latency {
            Some(q) => q.secs(&format!("{field}.latency"))?,
            None => 0.0,
        };
        let mut uses = Vec::with_capacity(l.interfaces.len());
        for (j, name) in l.interfaces.iter().enumerate() {
            let interface = b.interface_by_name(name).ok_or_else(|| TopologyError::UnknownInterface {
                field: format!("link[{i}].interfaces[{j}]"),
                name: name.clone(),
            })?;
            uses.push(interface);
        }
        let class = l.class.unwrap_or_else(|| LinkClass::between(b.kind_of(from), b.kind_of(to)));
        let make = |from, to, reverse| Link {
            from,
            to,
            bytes_per_sec,
            latency_secs,
            class,
            interfaces: uses.iter().map(|&interface| InterfaceUse { interface, reverse }).collect(),
        };
        b.add_link(make(from, to, false), &format!("{field}.bandwidth"));
        if l.duplex.unwrap_or(true) {
            b.add_link(make(to, from, true), &format!("{field}.bandwidth"));
        }
    }
    if let Some(ranks) = file.ranks {
        let mut ids = Vec::with_capacity(ranks.len());
        for (i, name) in ranks.iter().enumerate() {
            ids.push(
                b.device_by_name(name)
                    .ok_or_else(|| TopologyError::UnknownDevice { field: format!("ranks[{i}]"), name: name.clone() })?,
            );
        }
        b.default_ranks(ids);
    }
    b.build()
}

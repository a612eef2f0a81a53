//! The topology file format, in TOML or JSON. Quantities take units
//! (`bandwidth = "450 GB/s"`, `latency = "1us"`) or plain numbers in bytes/s and seconds.
//!
//! ```toml
//! name = "two-box"
//! round_startup = "0.833us"
//! gpus = 2              # optional summary counts (written by `topo show`/`export`);
//! servers = 2           # when present they are checked against the devices
//! routing = "widest"    # optional: "path-type" (default: NVLink, then PCIe, then the
//!                       # network, widest within the first that joins) or "widest"
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
//!
//! [host]                # optional: what a host adds beyond link time (see `HostCosts`)
//! local_copy = "10 GB/s"  # memory bandwidth of local copies and reductions
//! message = "0.5us"       # overhead per message of the busiest rank
//!
//! [achievable]          # optional: what NCCL-class software reaches (the expected time;
//!                       # see `achievable::Achievable`); any field left out keeps its default
//! nvlink = 0.824        # fraction of line rate of copies over NVLink; also pcie, nic, fabric
//! nvls = 0.61           # of an NVSwitch's in-switch reduction; sharp: of the network's
//! call = { LL = "6.6us", LL128 = "14us", Simple = "8.4us" }   # latency per call
//! nvlink_hop = { LL = "0.6us", LL128 = "1.9us", Simple = "3.4us" }  # per round; also
//!                       # pcie_hop, net_hop; nvls_hop and sharp_hop are one time (Simple)
//! protocol_fraction = { LL = 0.5, LL128 = 0.92, Simple = 1.0 }
//! source = "calibrated on our nccl-tests runs of 2026-12-01"
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::achievable::Achievable;
use crate::error::TopologyError;
use crate::graph::{
    Device, DeviceKind, HostCosts, Interface, InterfaceUse, Link, LinkClass, Routing, Topology, TopologyBuilder,
};
use railyard_units::units::{parse_bytes_per_sec, parse_secs};

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    name: Option<String>,
    description: Option<String>,
    round_startup: Option<Quantity>,
    /// Summary counts `write` adds for a reader; when present they must match.
    #[serde(skip_serializing_if = "Option::is_none")]
    gpus: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    servers: Option<usize>,
    /// "path-type" (the default) or "widest".
    #[serde(skip_serializing_if = "Option::is_none")]
    routing: Option<Routing>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ranks: Option<Vec<String>>,
    #[serde(default, rename = "device", alias = "devices")]
    devices: Vec<DeviceEntry>,
    #[serde(default, rename = "interface", alias = "interfaces")]
    interfaces: Vec<InterfaceEntry>,
    #[serde(default, rename = "link", alias = "links")]
    links: Vec<LinkEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<HostEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    achievable: Option<AchievableEntry>,
}

/// `[achievable]`: each field optional, over the defaults.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct AchievableEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    nvlink: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pcie: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nic: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fabric: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nvls: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sharp: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    call: Option<ProtocolTimes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nvlink_hop: Option<ProtocolTimes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pcie_hop: Option<ProtocolTimes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    net_hop: Option<ProtocolTimes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nvls_hop: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sharp_hop: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    protocol_fraction: Option<ProtocolFractions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ProtocolTimes {
    #[serde(rename = "LL")]
    ll: Quantity,
    #[serde(rename = "LL128")]
    ll128: Quantity,
    #[serde(rename = "Simple")]
    simple: Quantity,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ProtocolFractions {
    #[serde(rename = "LL")]
    ll: f64,
    #[serde(rename = "LL128")]
    ll128: f64,
    #[serde(rename = "Simple")]
    simple: f64,
}

impl AchievableEntry {
    fn apply(&self, mut a: Achievable) -> Result<Achievable, TopologyError> {
        for (value, slot) in [
            (self.nvlink, &mut a.nvlink),
            (self.pcie, &mut a.pcie),
            (self.nic, &mut a.nic),
            (self.fabric, &mut a.fabric),
            (self.nvls, &mut a.nvls),
            (self.sharp, &mut a.sharp),
        ] {
            if let Some(v) = value {
                *slot = v;
            }
        }
        let times = |t: &ProtocolTimes, field: &str| -> Result<[f64; 3], TopologyError> {
            let field = format!("achievable.{field}");
            Ok([t.ll.secs(&field)?, t.ll128.secs(&field)?, t.simple.secs(&field)?])
        };
        for (entry, slot, field) in [
            (&self.call, &mut a.call_secs, "call"),
            (&self.nvlink_hop, &mut a.nvlink_hop_secs, "nvlink_hop"),
            (&self.pcie_hop, &mut a.pcie_hop_secs, "pcie_hop"),
            (&self.net_hop, &mut a.net_hop_secs, "net_hop"),
        ] {
            if let Some(t) = entry {
                *slot = times(t, field)?;
            }
        }
        if let Some(q) = &self.nvls_hop {
            a.nvls_hop_secs = q.secs("achievable.nvls_hop")?;
        }
        if let Some(q) = &self.sharp_hop {
            a.sharp_hop_secs = q.secs("achievable.sharp_hop")?;
        }
        if let Some(f) = &self.protocol_fraction {
            a.protocol_fraction = [f.ll, f.ll128, f.simple];
        }
        if let Some(source) = &self.source {
            a.source = source.clone();
        }
        Ok(a)
    }

    /// What `a` changes from the defaults (nothing: no section).
    fn of(a: &Achievable) -> Option<AchievableEntry> {
        let d = Achievable::default();
        if *a == d {
            return None;
        }
        let f = |v: f64, dv: f64| (v != dv).then_some(v);
        let t = |v: &[f64; 3], dv: &[f64; 3]| {
            (v != dv).then(|| ProtocolTimes {
                ll: Quantity::Number(v[0]),
                ll128: Quantity::Number(v[1]),
                simple: Quantity::Number(v[2]),
            })
        };
        Some(AchievableEntry {
            nvlink: f(a.nvlink, d.nvlink),
            pcie: f(a.pcie, d.pcie),
            nic: f(a.nic, d.nic),
            fabric: f(a.fabric, d.fabric),
            nvls: f(a.nvls, d.nvls),
            sharp: f(a.sharp, d.sharp),
            call: t(&a.call_secs, &d.call_secs),
            nvlink_hop: t(&a.nvlink_hop_secs, &d.nvlink_hop_secs),
            pcie_hop: t(&a.pcie_hop_secs, &d.pcie_hop_secs),
            net_hop: t(&a.net_hop_secs, &d.net_hop_secs),
            nvls_hop: f(a.nvls_hop_secs, d.nvls_hop_secs).map(Quantity::Number),
            sharp_hop: f(a.sharp_hop_secs, d.sharp_hop_secs).map(Quantity::Number),
            protocol_fraction: (a.protocol_fraction != d.protocol_fraction).then(|| ProtocolFractions {
                ll: a.protocol_fraction[0],
                ll128: a.protocol_fraction[1],
                simple: a.protocol_fraction[2],
            }),
            source: (a.source != d.source).then(|| a.source.clone()),
        })
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct HostEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    local_copy: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<Quantity>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct DeviceEntry {
    name: String,
    kind: DeviceKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tier: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rail: Option<u32>,
    #[serde(default)]
    in_network_reduction: bool,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct InterfaceEntry {
    name: String,
    bandwidth: Quantity,
    forward_label: Option<String>,
    reverse_label: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct LinkEntry {
    from: String,
    to: String,
    bandwidth: Quantity,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency: Option<Quantity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duplex: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<LinkClass>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    interfaces: Vec<String>,
}

#[derive(Debug, Deserialize, Serialize)]
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
                parse_bytes_per_sec(t).map_err(|problem| TopologyError::Unit { field: field.to_string(), problem })
            }
        }
    }

    fn secs(&self, field: &str) -> Result<f64, TopologyError> {
        match self {
            Quantity::Number(v) => Ok(*v),
            Quantity::Text(t) => {
                parse_secs(t).map_err(|problem| TopologyError::Unit { field: field.to_string(), problem })
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

/// The largest topology file read: 512 MiB (a 131,072-GPU fabric written out is about
/// 250 MB of JSON).
pub const MAX_FILE_BYTES: u64 = 512 << 20;

/// Read at most `limit` bytes of text from `path`: a device or an endless stream named
/// by mistake (`/dev/urandom`) is refused after the limit, not read without end.
pub fn read_text(path: &Path, limit: u64) -> Result<String, TopologyError> {
    use std::io::Read;
    let io = |message: String| TopologyError::Io { path: path.display().to_string(), message };
    let file = std::fs::File::open(path).map_err(|e| io(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(|e| io(e.to_string()))?;
    if bytes.len() as u64 > limit {
        return Err(io(format!("more than {limit} bytes; not a file this reads")));
    }
    String::from_utf8(bytes).map_err(|e| io(format!("not UTF-8 text ({e})")))
}

/// Read a topology file; the format comes from the extension (`.json`, else TOML).
pub fn load(path: &Path) -> Result<Topology, TopologyError> {
    let text = read_text(path, MAX_FILE_BYTES)?;
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
    let (gpus, servers) = (file.gpus, file.servers);
    let t = build_graph(file, default_name)?;
    for (field, said, counted) in [("gpus", gpus, t.gpus().len()), ("servers", servers, t.gpu_servers())] {
        if let Some(said) = said.filter(|&n| n != counted) {
            return Err(TopologyError::Invalid {
                field: field.to_string(),
                message: format!("{said}, but its devices hold {counted} (the count is checked, not set)"),
            });
        }
    }
    Ok(t)
}

fn build_graph(file: TopologyFile, default_name: &str) -> Result<Topology, TopologyError> {
    let mut b = TopologyBuilder::new(file.name.unwrap_or_else(|| default_name.to_string()));
    if let Some(d) = file.description {
        b.description(d);
    }
    if let Some(routing) = file.routing {
        b.routing(routing);
    }
    if let Some(alpha) = &file.round_startup {
        b.round_startup_secs(alpha.secs("round_startup")?);
    }
    if let Some(host) = &file.host {
        b.host_costs(HostCosts {
            local_bytes_per_sec: host.local_copy.as_ref().map(|q| q.bytes_per_sec("host.local_copy")).transpose()?,
            message_secs: host.message.as_ref().map_or(Ok(0.0), |q| q.secs("host.message"))?,
        });
    }
    if let Some(entry) = &file.achievable {
        b.achievable(entry.apply(Achievable::default())?);
    }
    for (i, d) in file.devices.into_iter().enumerate() {
        let field = format!("device[{i}] \"{}\"", d.name.escape_debug());
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
        let field = format!("interface[{i}] \"{}\"", iface.name.escape_debug());
        let bytes_per_sec = iface.bandwidth.bytes_per_sec(&format!("{field}.bandwidth"))?;
        b.add_interface(
            Interface {
                name: iface.name,
                bytes_per_sec,
                forward_label: iface.forward_label.unwrap_or_else(|| "forward".into()),
                reverse_label: iface.reverse_label.unwrap_or_else(|| "reverse".into()),
            },
            &field,
        );
    }
    for (i, l) in file.links.into_iter().enumerate() {
        let field = format!("link[{i}] ({} -> {})", l.from.escape_debug(), l.to.escape_debug());
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
        b.add_link(make(from, to, false), &field);
        if l.duplex.unwrap_or(true) {
            b.add_link(make(to, from, true), &format!("{field} (reverse)"));
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

/// Write a topology in the file format. Every directed link is written as its own
/// `duplex = false` link, so a reloaded file is the same topology (interface directions
/// included: a link using an interface in reverse is written with the interface's
/// reverse-direction twin only where the topology already pairs them).
pub fn write(t: &Topology, format: FileFormat) -> Result<String, TopologyError> {
    let name = |id: usize| t.devices[id].name.clone();
    let mut links = Vec::new();
    let mut done = vec![false; t.links.len()];
    for (i, l) in t.links.iter().enumerate() {
        if done[i] {
            continue;
        }
        // Pair it with its reverse twin (same bandwidth, latency, class, reversed interfaces) as one duplex link.
        let twin = t.out_links(l.to).iter().copied().find(|&j| {
            let m = &t.links[j];
            !done[j]
                && j != i
                && m.to == l.from
                && m.bytes_per_sec == l.bytes_per_sec
                && m.latency_secs == l.latency_secs
                && m.class == l.class
                && m.interfaces.len() == l.interfaces.len()
                && m.interfaces
                    .iter()
                    .zip(&l.interfaces)
                    .all(|(a, b)| a.interface == b.interface && a.reverse != b.reverse)
        });
        let forward_ok = l.interfaces.iter().all(|u| !u.reverse);
        let duplex = twin.is_some() && forward_ok;
        done[i] = true;
        if duplex {
            if let Some(j) = twin {
                done[j] = true;
            }
        }
        if !forward_ok && twin.is_none() {
            return Err(TopologyError::Parse {
                format: "topology file",
                message: format!(
                    "link {} uses an interface in reverse without a forward twin; the file format cannot express it",
                    t.link_name(i)
                ),
            });
        }
        links.push(LinkEntry {
            from: name(l.from),
            to: name(l.to),
            bandwidth: Quantity::Number(l.bytes_per_sec),
            latency: (l.latency_secs > 0.0).then_some(Quantity::Number(l.latency_secs)),
            duplex: Some(duplex),
            class: Some(l.class),
            interfaces: l.interfaces.iter().map(|u| t.interfaces[u.interface].name.clone()).collect(),
        });
    }
    let file = TopologyFile {
        name: Some(t.name.clone()),
        description: (!t.description.is_empty()).then(|| t.description.clone()),
        round_startup: Some(Quantity::Number(t.round_startup_secs)),
        gpus: Some(t.gpus().len()),
        servers: Some(t.gpu_servers()),
        routing: (t.routing != Routing::default()).then_some(t.routing),
        ranks: Some(t.default_ranks.iter().map(|&d| name(d)).collect()),
        devices: t
            .devices
            .iter()
            .map(|d| DeviceEntry {
                name: d.name.clone(),
                kind: d.kind,
                server: d.server.clone(),
                tier: d.tier,
                rail: d.rail,
                in_network_reduction: d.in_network_reduction,
            })
            .collect(),
        interfaces: t
            .interfaces
            .iter()
            .map(|i| InterfaceEntry {
                name: i.name.clone(),
                bandwidth: Quantity::Number(i.bytes_per_sec),
                forward_label: Some(i.forward_label.clone()),
                reverse_label: Some(i.reverse_label.clone()),
            })
            .collect(),
        links,
        host: t.host.counted().then(|| HostEntry {
            local_copy: t.host.local_bytes_per_sec.map(Quantity::Number),
            message: (t.host.message_secs > 0.0).then_some(Quantity::Number(t.host.message_secs)),
        }),
        achievable: AchievableEntry::of(&t.achievable),
    };
    let text = match format {
        FileFormat::Toml => {
            toml::to_string(&file).map_err(|e| TopologyError::Parse { format: "TOML", message: e.to_string() })?
        }
        FileFormat::Json => {
            serde_json::to_string_pretty(&file)
                .map_err(|e| TopologyError::Parse { format: "JSON", message: e.to_string() })?
                + "\n"
        }
    };
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_round_trip_through_both_formats() {
        for spec in ["hgx-h100x2", "a100-pcie-control:ports=2", "clos:k=4,tiers=3"] {
            let t = crate::presets::preset(spec).unwrap();
            for format in [FileFormat::Toml, FileFormat::Json] {
                let text = write(&t, format).unwrap();
                let back = parse(&text, format, "x").unwrap();
                assert_eq!(back.devices, t.devices, "{spec}");
                assert_eq!(back.links.len(), t.links.len(), "{spec}");
                assert_eq!(back.default_ranks, t.default_ranks);
                let a = t.route(t.default_ranks[0], *t.default_ranks.last().unwrap()).unwrap();
                let b = back.route(back.default_ranks[0], *back.default_ranks.last().unwrap()).unwrap();
                assert_eq!(a.bottleneck_bytes_per_sec, b.bottleneck_bytes_per_sec);
            }
        }
    }

    #[test]
    fn reading_stops_at_the_limit() {
        let path = std::env::temp_dir().join(format!("railyard-read-limit-{}", std::process::id()));
        std::fs::write(&path, "0123456789abcdefghij").unwrap();
        let err = read_text(&path, 10).unwrap_err().to_string();
        assert!(err.contains("more than 10 bytes"), "{err}");
        assert_eq!(read_text(&path, 20).unwrap().len(), 20);
        std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
        assert!(read_text(&path, 20).unwrap_err().to_string().contains("not UTF-8"));
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn empty_absurd_and_unprintable_inputs_are_refused_with_the_field() {
        let two = |name: &str, bandwidth: &str| {
            format!(
                "[[device]]\nname = \"{name}\"\nkind = \"gpu\"\n[[device]]\nname = \"g1\"\nkind = \"gpu\"\n\
                 [[link]]\nfrom = \"{name}\"\nto = \"g1\"\nbandwidth = {bandwidth}\n"
            )
        };
        let refused = |text: &str| parse(text, FileFormat::Toml, "x").unwrap_err().to_string();
        assert!(parse(&two("g0", "1e9"), FileFormat::Toml, "x").is_ok());
        assert!(refused("").contains("no GPU"), "{}", refused(""));
        assert!(refused("[[device]]\nname = \"s\"\nkind = \"switch\"\n").contains("no GPU"));
        for bandwidth in ["1e-300", "0.5", "1e17", "\"0.5 B/s\"", "\"20000 TB/s\""] {
            let e = refused(&two("g0", bandwidth));
            assert!(e.contains("link[0] (g0 -> g1).bandwidth") && e.contains("1 byte/s to 10 PB/s"), "{e}");
        }
        for (name, word) in [("", "is empty"), ("  ", "is empty"), ("g\\u0000x", "control character")] {
            let e = refused(&two(name, "1e9"));
            assert!(e.contains("device[0]") && e.contains(word), "{e}");
        }
        let e = refused(&two(&"g".repeat(300), "1e9"));
        assert!(e.contains("longer than 256 bytes"), "{e}");
        let e = refused(&format!("round_startup = \"2s\"\n{}", two("g0", "1e9")));
        assert!(e.contains("round_startup") && e.contains("0 to 1 s"), "{e}");
    }
}

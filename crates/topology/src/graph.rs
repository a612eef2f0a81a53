//! The cluster as a directed graph: devices, directed links with per-direction
//! bandwidth, and interfaces that several links share (seed 001 §7.1.2: "若多個埠共享內部
//! 介面，再對該介面計算合計流量" — when several ports share an internal interface,
//! its combined traffic is a resource of its own).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::achievable::Achievable;
use crate::error::TopologyError;
pub use crate::kinds::{DeviceKind, LinkClass};

/// The largest topology accepted: 4 Mi devices (a 131,072-GPU rail fabric has about
/// 420 Ki) and 16 Mi directed links; device and link ids then fit in 32 bits, which
/// the route table relies on.
pub const MAX_DEVICES: usize = 1 << 22;
pub const MAX_LINKS: usize = 1 << 24;

pub type DeviceId = usize;
pub type LinkId = usize;
pub type InterfaceId = usize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Device {
    pub name: String,
    pub kind: DeviceKind,
    /// The server (host) the device sits in; network switches have none.
    pub server: Option<String>,
    /// Switch tier: 1 leaf, 2 spine, 3 core.
    pub tier: Option<u8>,
    /// Rail index of a NIC or of a leaf switch (rail-optimized fabrics).
    pub rail: Option<u32>,
    /// Whether this switch can reduce in the network (SHARP / NVLS style).
    pub in_network_reduction: bool,
}

/// How routes are chosen (see the `route` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// The closest path type first, as NCCL ranks paths (NVL, then PCIe and the host,
    /// then the network): NVLink alone if it joins the pair, else NVLink and PCIe, else
    /// anything; the widest paths within that type. Two GPUs of one server never talk
    /// through their NICs while NVLink or PCIe joins them, however slow.
    #[default]
    PathType,
    /// The widest paths over any links (a slow NVLink is bypassed through the network,
    /// as with NCCL_P2P_DISABLE and NCCL_SHM_DISABLE set).
    Widest,
}

impl Routing {
    pub fn as_str(self) -> &'static str {
        match self {
            Routing::PathType => "path-type",
            Routing::Widest => "widest",
        }
    }

    /// The link classes of each path type tried in turn before the whole fabric.
    pub fn tiers(self) -> &'static [&'static [LinkClass]] {
        match self {
            Routing::PathType => &[&[LinkClass::Nvlink], &[LinkClass::Nvlink, LinkClass::Pcie]],
            Routing::Widest => &[],
        }
    }
}

impl std::str::FromStr for Routing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "path-type" => Ok(Routing::PathType),
            "widest" => Ok(Routing::Widest),
            _ => Err(format!("\"{s}\": routing is path-type or widest")),
        }
    }
}

/// A link uses one direction of a shared interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct InterfaceUse {
    pub interface: InterfaceId,
    /// `false`: the interface's forward direction; `true`: its reverse direction.
    pub reverse: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub from: DeviceId,
    pub to: DeviceId,
    pub bytes_per_sec: f64,
    pub latency_secs: f64,
    pub class: LinkClass,
    pub interfaces: Vec<InterfaceUse>,
}

/// A resource several links draw from, e.g. the PCIe Gen4 x16 slot (32 GB/s per
/// direction) behind both ports of a dual-port ConnectX-7 (seed 001 §7.2.1, 對照設定).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interface {
    pub name: String,
    /// Per direction.
    pub bytes_per_sec: f64,
    /// Words for the two directions in reports, e.g. "tx" / "rx".
    pub forward_label: String,
    pub reverse_label: String,
}

/// One thing that carries bytes and can be a bottleneck: a link direction or one
/// direction of a shared interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    Link(LinkId),
    Interface { interface: InterfaceId, reverse: bool },
}

/// What a transfer costs on a host beyond its link time: the per-round model counts
/// payload on links and one α per round, but a process that runs the schedule also
/// copies and reduces in memory and pays a fixed overhead per message. GPU clusters
/// of the seeds leave these out (the seeds' worked numbers do); the runtime's hosts
/// (`railyard calibrate`, the tuner's defaults) count them.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct HostCosts {
    /// Memory bandwidth of local copies and reductions; `None`: not counted.
    pub local_bytes_per_sec: Option<f64>,
    /// Overhead of every message sent or received by the busiest rank.
    pub message_secs: f64,
}

/// Plausible host memory bandwidths and per-message overheads; anything outside is a typo.
const HOST_COPY_BYTES_PER_SEC: std::ops::RangeInclusive<f64> = 1e6..=1e15;
const HOST_MESSAGE_SECS: std::ops::RangeInclusive<f64> = 0.0..=1.0;
/// A link or interface: 1 byte/s to 10 PB/s. Outside it a time is either meaningless
/// or overflows to infinity (1e-300 B/s once printed "inf s" and "NaNx faster").
pub const LINK_BYTES_PER_SEC: std::ops::RangeInclusive<f64> = 1.0..=1e16;
/// A link's latency and the per-round start-up α: 0 to 1 s.
pub const LATENCY_SECS: std::ops::RangeInclusive<f64> = 0.0..=1.0;
/// The longest device or interface name, in bytes.
pub const MAX_NAME_BYTES: usize = 256;

impl HostCosts {
    /// Whether anything is counted.
    pub fn counted(&self) -> bool {
        self.local_bytes_per_sec.is_some() || self.message_secs > 0.0
    }

    /// What a rank's host adds to a collective (the one formula of the model and the
    /// simulator): `local_bytes` copied or reduced at the memory bandwidth, and `messages`
    /// sent or received at the per-message overhead. (local secs, message secs).
    pub fn secs(&self, local_bytes: u64, messages: u64) -> (f64, f64) {
        let local = self.local_bytes_per_sec.map_or(0.0, |bw| local_bytes as f64 / bw);
        (local, messages as f64 * self.message_secs)
    }
}

/// A built, validated topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    pub name: String,
    pub description: String,
    pub devices: Vec<Device>,
    pub links: Vec<Link>,
    pub interfaces: Vec<Interface>,
    /// α of the per-round model: the start-up every round pays (seed 001 §7.2.1).
    pub round_startup_secs: f64,
    /// Host-side costs the model adds to every schedule (none for the seeds' clusters).
    pub host: HostCosts,
    /// What NCCL-class software reaches on these links: the expected time's rates (the
    /// bound uses the line rates and α).
    pub achievable: Achievable,
    /// The default rank order (GPU devices); placement policies reorder it.
    pub default_ranks: Vec<DeviceId>,
    /// How routes are chosen.
    pub routing: Routing,
    out_links: Vec<Vec<LinkId>>,
    in_links: Vec<Vec<LinkId>>,
    by_name: HashMap<String, DeviceId>,
    /// NICs per server, in declaration order: the model asks for a placement's NICs on
    /// every costing, and a scan of every device is too slow on large fabrics.
    nics_by_server: HashMap<String, Vec<DeviceId>>,
}

impl Topology {
    /// The NICs of `server`, in declaration order (none for a name that is no server's).
    pub fn nics_of_server(&self, server: &str) -> &[DeviceId] {
        self.nics_by_server.get(server).map_or(&[], Vec::as_slice)
    }

    pub fn in_links(&self, device: DeviceId) -> &[LinkId] {
        &self.in_links[device]
    }

    pub fn device_id(&self, name: &str) -> Option<DeviceId> {
        self.by_name.get(name).copied()
    }

    pub fn out_links(&self, device: DeviceId) -> &[LinkId] {
        &self.out_links[device]
    }

    pub fn link_name(&self, link: LinkId) -> String {
        let l = &self.links[link];
        format!("{} -> {}", self.devices[l.from].name, self.devices[l.to].name)
    }

    /// Number of resources: every link direction, then both directions of every interface.
    pub fn resource_count(&self) -> usize {
        self.links.len() + 2 * self.interfaces.len()
    }

    pub fn resource_index(&self, resource: Resource) -> usize {
        match resource {
            Resource::Link(l) => l,
            Resource::Interface { interface, reverse } => self.links.len() + 2 * interface + usize::from(reverse),
        }
    }

    pub fn resource(&self, index: usize) -> Resource {
        if index < self.links.len() {
            Resource::Link(index)
        } else {
            let i = index - self.links.len();
            Resource::Interface { interface: i / 2, reverse: i % 2 == 1 }
        }
    }

    pub fn resource_name(&self, resource: Resource) -> String {
        match resource {
            Resource::Link(l) => self.link_name(l),
            Resource::Interface { interface, reverse } => {
                let i = &self.interfaces[interface];
                let dir = if reverse { &i.reverse_label } else { &i.forward_label };
                format!("{} ({})", i.name, dir)
            }
        }
    }

    /// Short word for the kind of resource: the link class, or "interface".
    pub fn resource_kind(&self, resource: Resource) -> &'static str {
        match resource {
            Resource::Link(l) => self.links[l].class.as_str(),
            Resource::Interface { .. } => "interface",
        }
    }

    pub fn resource_bytes_per_sec(&self, resource: Resource) -> f64 {
        match resource {
            Resource::Link(l) => self.links[l].bytes_per_sec,
            Resource::Interface { interface, .. } => self.interfaces[interface].bytes_per_sec,
        }
    }

    /// GPUs in declaration order.
    pub fn gpus(&self) -> Vec<DeviceId> {
        (0..self.devices.len()).filter(|&d| self.devices[d].kind == DeviceKind::Gpu).collect()
    }

    /// The server of a device (a device without one is its own server).
    pub fn server_of(&self, device: DeviceId) -> &str {
        let d = &self.devices[device];
        d.server.as_deref().unwrap_or(&d.name)
    }

    /// How many servers hold a GPU.
    pub fn gpu_servers(&self) -> usize {
        self.gpus().into_iter().map(|g| self.server_of(g)).collect::<std::collections::HashSet<_>>().len()
    }

    /// NIC devices, in declaration order.
    pub fn nics(&self) -> Vec<DeviceId> {
        (0..self.devices.len()).filter(|&d| self.devices[d].kind == DeviceKind::Nic).collect()
    }
}

/// Builds a topology in code (presets, generators and the file loader all use it).
#[derive(Debug, Clone)]
pub struct TopologyBuilder {
    name: String,
    description: String,
    devices: Vec<Device>,
    links: Vec<Link>,
    interfaces: Vec<Interface>,
    round_startup_secs: f64,
    host: HostCosts,
    achievable: Achievable,
    default_ranks: Option<Vec<DeviceId>>,
    routing: Routing,
    by_name: HashMap<String, DeviceId>,
    errors: Vec<TopologyError>,
}

impl TopologyBuilder {
    pub fn new(name: impl Into<String>) -> Self {
        TopologyBuilder {
            name: name.into(),
            description: String::new(),
            devices: Vec::new(),
            links: Vec::new(),
            interfaces: Vec::new(),
            round_startup_secs: 0.0,
            host: HostCosts::default(),
            achievable: Achievable::default(),
            default_ranks: None,
            routing: Routing::default(),
            by_name: HashMap::new(),
            errors: Vec::new(),
        }
    }

    pub fn description(&mut self, text: impl Into<String>) -> &mut Self {
        self.description = text.into();
        // Printed in reports: line breaks and tabs are text, other control characters are not.
        if self.description.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
            self.errors.push(TopologyError::BadName {
                field: "description".into(),
                name: self.description.escape_debug().to_string(),
                problem: "holds a control character other than a line break or tab",
            });
        }
        self
    }

    pub fn round_startup_secs(&mut self, secs: f64) -> &mut Self {
        self.round_startup_secs = secs;
        self
    }

    pub fn routing(&mut self, routing: Routing) -> &mut Self {
        self.routing = routing;
        self
    }

    pub fn host_costs(&mut self, host: HostCosts) -> &mut Self {
        self.host = host;
        self
    }

    pub fn achievable(&mut self, achievable: Achievable) -> &mut Self {
        self.achievable = achievable;
        self
    }

    pub fn device_by_name(&self, name: &str) -> Option<DeviceId> {
        self.by_name.get(name).copied()
    }

    /// Add a device; `field` names where it came from, for error messages.
    pub fn add_device(&mut self, device: Device, field: &str) -> DeviceId {
        check_name(&device.name, &format!("{field}.name"), &mut self.errors);
        if let Some(server) = &device.server {
            check_name(server, &format!("{field}.server"), &mut self.errors);
        }
        if let Some(&existing) = self.by_name.get(&device.name) {
            self.errors.push(TopologyError::DuplicateDevice { field: field.to_string(), name: device.name });
            return existing;
        }
        let id = self.devices.len();
        self.by_name.insert(device.name.clone(), id);
        self.devices.push(device);
        id
    }

    /// Shorthand for a device with only a name, a kind and a server.
    pub fn device(&mut self, name: impl Into<String>, kind: DeviceKind, server: Option<&str>) -> DeviceId {
        let name = name.into();
        let field = format!("device \"{name}\"");
        self.add_device(
            Device {
                name,
                kind,
                server: server.map(str::to_string),
                tier: None,
                rail: None,
                in_network_reduction: false,
            },
            &field,
        )
    }

    pub fn kind_of(&self, id: DeviceId) -> DeviceKind {
        self.devices[id].kind
    }

    pub fn device_mut(&mut self, id: DeviceId) -> &mut Device {
        &mut self.devices[id]
    }

    pub fn add_interface(&mut self, interface: Interface, field: &str) -> InterfaceId {
        if let Some(existing) = self.interfaces.iter().position(|i| i.name == interface.name) {
            self.errors.push(TopologyError::DuplicateInterface { field: field.to_string(), name: interface.name });
            return existing;
        }
        check_name(&interface.name, &format!("{field}.name"), &mut self.errors);
        for label in [&interface.forward_label, &interface.reverse_label] {
            check_name(label, &format!("{field}.forward_label/reverse_label"), &mut self.errors);
        }
        check_bandwidth(interface.bytes_per_sec, &format!("{field}.bandwidth"), &mut self.errors);
        self.interfaces.push(interface);
        self.interfaces.len() - 1
    }

    pub fn interface(&mut self, name: impl Into<String>, bytes_per_sec: f64) -> InterfaceId {
        let name = name.into();
        let field = format!("interface \"{name}\"");
        self.add_interface(
            Interface { name, bytes_per_sec, forward_label: "forward".into(), reverse_label: "reverse".into() },
            &field,
        )
    }

    pub fn interface_by_name(&self, name: &str) -> Option<InterfaceId> {
        self.interfaces.iter().position(|i| i.name == name)
    }

    pub fn add_link(&mut self, link: Link, field: &str) -> LinkId {
        if link.from == link.to {
            self.errors
                .push(TopologyError::SelfLink { field: field.to_string(), name: self.devices[link.from].name.clone() });
        }
        check_bandwidth(link.bytes_per_sec, &format!("{field}.bandwidth"), &mut self.errors);
        if !LATENCY_SECS.contains(&link.latency_secs) {
            self.errors.push(TopologyError::BadLatency { field: format!("{field}.latency"), value: link.latency_secs });
        }
        self.links.push(link);
        self.links.len() - 1
    }

    /// A full-duplex link: two directed links of the same bandwidth and latency.
    /// Interfaces are used forward by `a -> b` and in reverse by `b -> a`.
    pub fn duplex(
        &mut self,
        a: DeviceId,
        b: DeviceId,
        bytes_per_sec: f64,
        latency_secs: f64,
        interfaces: &[InterfaceId],
    ) -> (LinkId, LinkId) {
        let class = LinkClass::between(self.devices[a].kind, self.devices[b].kind);
        self.duplex_of_class(a, b, bytes_per_sec, latency_secs, interfaces, class)
    }

    /// [`TopologyBuilder::duplex`] of a stated class, not the one the ends' kinds give.
    pub fn duplex_of_class(
        &mut self,
        a: DeviceId,
        b: DeviceId,
        bytes_per_sec: f64,
        latency_secs: f64,
        interfaces: &[InterfaceId],
        class: LinkClass,
    ) -> (LinkId, LinkId) {
        let field = format!("link {} <-> {}", self.devices[a].name, self.devices[b].name);
        let forward = Link {
            from: a,
            to: b,
            bytes_per_sec,
            latency_secs,
            class,
            interfaces: interfaces.iter().map(|&interface| InterfaceUse { interface, reverse: false }).collect(),
        };
        let backward = Link {
            from: b,
            to: a,
            bytes_per_sec,
            latency_secs,
            class,
            interfaces: interfaces.iter().map(|&interface| InterfaceUse { interface, reverse: true }).collect(),
        };
        (self.add_link(forward, &field), self.add_link(backward, &field))
    }

    pub fn default_ranks(&mut self, ranks: Vec<DeviceId>) -> &mut Self {
        self.default_ranks = Some(ranks);
        self
    }

    /// Validate and freeze. The first problem found is returned.
    pub fn build(self) -> Result<Topology, TopologyError> {
        if let Some(first) = self.errors.into_iter().next() {
            return Err(first);
        }
        if !LATENCY_SECS.contains(&self.round_startup_secs) {
            return Err(TopologyError::BadLatency { field: "round_startup".into(), value: self.round_startup_secs });
        }
        if let Some(bw) = self.host.local_bytes_per_sec {
            if !(HOST_COPY_BYTES_PER_SEC.contains(&bw)) {
                return Err(TopologyError::OutOfRange {
                    field: "host.local_copy".into(),
                    value: bw,
                    range: "1 MB/s to 1 PB/s (1e6 to 1e15 bytes per second)",
                });
            }
        }
        if !(HOST_MESSAGE_SECS.contains(&self.host.message_secs)) {
            return Err(TopologyError::OutOfRange {
                field: "host.message".into(),
                value: self.host.message_secs,
                range: "0 to 1 s",
            });
        }
        self.achievable.validate()?;
        if self.devices.len() > MAX_DEVICES {
            return Err(TopologyError::TooLarge { what: "devices", count: self.devices.len(), limit: MAX_DEVICES });
        }
        if self.links.len() > MAX_LINKS {
            return Err(TopologyError::TooLarge { what: "links", count: self.links.len(), limit: MAX_LINKS });
        }
        let mut out_links = vec![Vec::new(); self.devices.len()];
        let mut in_links = vec![Vec::new(); self.devices.len()];
        for (id, link) in self.links.iter().enumerate() {
            out_links[link.from].push(id);
            in_links[link.to].push(id);
        }
        let default_ranks = match self.default_ranks {
            Some(ranks) => ranks,
            None => (0..self.devices.len()).filter(|&d| self.devices[d].kind == DeviceKind::Gpu).collect(),
        };
        check_ranks(&self.devices, &default_ranks, "ranks")?;
        // A file with no device (an empty TOML) or no GPU has nothing to run a collective on.
        if !self.devices.iter().any(|d| d.kind == DeviceKind::Gpu) {
            return Err(TopologyError::NoGpus);
        }
        let mut nics_by_server: HashMap<String, Vec<DeviceId>> = HashMap::new();
        for (id, d) in self.devices.iter().enumerate().filter(|(_, d)| d.kind == DeviceKind::Nic) {
            nics_by_server.entry(d.server.clone().unwrap_or_else(|| d.name.clone())).or_default().push(id);
        }
        Ok(Topology {
            nics_by_server,
            name: self.name,
            description: self.description,
            devices: self.devices,
            links: self.links,
            interfaces: self.interfaces,
            round_startup_secs: self.round_startup_secs,
            host: self.host,
            achievable: self.achievable,
            default_ranks,
            routing: self.routing,
            out_links,
            in_links,
            by_name: self.by_name,
        })
    }
}

/// Every rank on a GPU, no GPU twice: for a topology's default ranks and for placements.
pub(crate) fn check_ranks(devices: &[Device], ranks: &[DeviceId], field: &str) -> Result<(), TopologyError> {
    let mut first_rank_on: Vec<Option<usize>> = vec![None; devices.len()];
    for (rank, &device) in ranks.iter().enumerate() {
        let d = &devices[device];
        if d.kind != DeviceKind::Gpu {
            return Err(TopologyError::RankNotOnGpu {
                field: field.into(),
                rank,
                name: d.name.clone(),
                kind: d.kind.as_str().into(),
            });
        }
        if let Some(other) = first_rank_on[device] {
            return Err(TopologyError::RankTwice { field: field.into(), rank, other, name: d.name.clone() });
        }
        first_rank_on[device] = Some(rank);
    }
    Ok(())
}

fn check_bandwidth(value: f64, field: &str, errors: &mut Vec<TopologyError>) {
    if !LINK_BYTES_PER_SEC.contains(&value) {
        errors.push(TopologyError::BadBandwidth { field: field.to_string(), value });
    }
}

/// Names appear in messages, tables and NCCL XML: not empty, printable, bounded.
fn check_name(name: &str, field: &str, errors: &mut Vec<TopologyError>) {
    let problem = if name.trim().is_empty() {
        Some("is empty")
    } else if name.chars().any(char::is_control) {
        Some("holds a control character (NUL, newline, ...)")
    } else if name.len() > MAX_NAME_BYTES {
        Some("is longer than 256 bytes")
    } else {
        None
    };
    if let Some(problem) = problem {
        errors.push(TopologyError::BadName {
            field: field.to_string(),
            name: name.escape_debug().to_string(),
            problem,
        });
    }
}

//! NCCL's topology XML (`NCCL_TOPO_DUMP_FILE`, docs/sources.md#nccl-tuner):
//! `<system><cpu numaid host_hash><pci busid class link_speed link_width>…<gpu dev>
//! <nvlink target count tclass/></gpu>…<nic><net name dev speed/></nic>…`.
//!
//! Bandwidths as NCCL derives them (NCCL's src/graph/topo.h, docs/sources.md#nccl-tuner), except NVLink: a PCIe link is
//! link_width × per-lane rate (32 GT/s → 3 GB/s per lane, so Gen5 x16 = 48 GB/s; Gen4
//! x16 = 24 GB/s); a NIC is speed (Mb/s) / 8; an NVLink bundle is count x
//! `LinkDefaults::nvlink_bytes_per_sec`. `tclass` 0x068000 targets are NVSwitch chips,
//! merged into one switch per host as NCCL does (5+5+4+4 links = 18 x 25 = 450 GB/s per
//! H100/H200); 0x03… targets are GPUs. CPUs with different `host_hash` are different servers; their NICs are wired to
//! one fabric switch. The export writes our topology back in this shape.

use std::collections::BTreeMap;
use std::fmt::Write;

use roxmltree::Node;

use super::LinkDefaults;
use crate::error::TopologyError;
use crate::graph::{DeviceId, DeviceKind, LinkClass, Topology, TopologyBuilder};

fn err(message: impl Into<String>) -> TopologyError {
    TopologyError::Parse { format: "NCCL topology XML", message: message.into() }
}

/// Per-lane GB/s of a `link_speed` string (NCCL's kvDictPciGen / 80 → GB/s per lane).
fn lane_bytes_per_sec(speed: &str) -> Option<f64> {
    let units_of_100mbps =
        [("2.5 GT/s", 15.0), ("5 GT/s", 30.0), ("8 GT/s", 60.0), ("16 GT/s", 120.0), ("32 GT/s", 240.0), ("64", 480.0)]
            .iter()
            .find(|(k, _)| speed.starts_with(k) || speed.starts_with(&k.replace(" GT/s", ".0 GT/s")))
            .map(|(_, v)| *v)?;
    Some(units_of_100mbps / 80.0 * 1e9)
}

/// A GPU known by its PCI class alone: a 3D controller (0x0302), or a VGA controller
/// (0x0300) from NVIDIA (0x10de) — not a board's management VGA (ASPEED's BMC). A vendor
/// other than NVIDIA's is no GPU NCCL runs on.
fn is_bare_gpu(class: &str, vendor: Option<&str>) -> bool {
    let nvidia = vendor.map(|v| v.eq_ignore_ascii_case("0x10de"));
    (class.starts_with("0x0302") && nvidia != Some(false)) || (class.starts_with("0x0300") && nvidia == Some(true))
}

/// A NIC known by its PCI class alone: InfiniBand (0x0207), or Ethernet (0x0200) from
/// the vendors whose NICs carry NCCL's traffic (Mellanox/NVIDIA 0x15b3, Amazon's EFA
/// 0x1d0f; no vendor given: the file lists it for NCCL) — not a management port.
fn is_bare_nic(class: &str, vendor: Option<&str>) -> bool {
    let carrier = vendor.is_none_or(|v| ["0x15b3", "0x1d0f"].iter().any(|k| v.eq_ignore_ascii_case(k)));
    class.starts_with("0x0207") || (class.starts_with("0x0200") && carrier)
}

struct Importer<'a> {
    b: TopologyBuilder,
    defaults: &'a LinkDefaults,
    server: String,
    /// busid -> device (for nvlink targets)
    by_busid: BTreeMap<String, DeviceId>,
    nvlinks: Vec<(DeviceId, String, f64, String)>,
    nics: Vec<DeviceId>,
    nic_bw: Vec<f64>,
    counter: usize,
    /// GPUs and NICs known by their PCI class alone (vendor files: `<pci class=
    /// "0x030200"/>` with no `<gpu>` child), numbered per host in file order.
    bare_gpus: usize,
    bare_nics: usize,
    /// Over every host.
    bare_gpus_total: usize,
    /// Every GPU, bare or with its <gpu> element.
    gpus_total: usize,
}

impl Importer<'_> {
    fn attr<'n>(node: Node<'n, 'n>, name: &str) -> Result<&'n str, TopologyError> {
        node.attribute(name).ok_or_else(|| {
            let pos = node.document().text_pos_at(node.range().start);
            err(format!("line {}: <{}> has no {name} attribute", pos.row, node.tag_name().name()))
        })
    }

    /// link_width × per-lane rate. Absent, empty or "Unknown" mean NCCL could not read
    /// it, and the default is used; width 0 is 16 lanes, as NCCL takes it (`if (width ==
    /// 0) width = 16;`, ncclTopoAddPci, src/graph/topo.cc); anything else that does not
    /// read (`link_speed="NaN"`) is refused rather than silently replaced.
    fn pci_bandwidth(&self, node: Node) -> Result<f64, TopologyError> {
        let line = || node.document().text_pos_at(node.range().start).row;
        let unknown =
            |v: Option<&str>| v.is_none_or(|v| v.trim().is_empty() || v.trim().eq_ignore_ascii_case("unknown"));
        let (width, speed) = (node.attribute("link_width"), node.attribute("link_speed"));
        if unknown(width) || unknown(speed) {
            return Ok(self.defaults.pcie_bytes_per_sec);
        }
        let (width, speed) = (width.unwrap_or_default(), speed.unwrap_or_default());
        let lanes: u32 =
            width.trim().parse().ok().filter(|w| (0..=64).contains(w)).ok_or_else(|| {
                err(format!("line {}: link_width=\"{width}\" is not a lane count from 1 to 64", line()))
            })?;
        let lanes = if lanes == 0 { 16 } else { lanes };
        let lane = lane_bytes_per_sec(speed.trim()).ok_or_else(|| {
            err(format!("line {}: link_speed=\"{speed}\" is not a PCIe rate (2.5, 5, 8, 16, 32 or 64 GT/s)", line()))
        })?;
        Ok(f64::from(lanes) * lane)
    }

    fn name(&mut self, base: &str) -> String {
        self.counter += 1;
        if self.server.is_empty() {
            base.to_string()
        } else {
            format!("{}.{base}", self.server)
        }
    }

    /// Import a `<pci>` subtree hanging off `parent`.
    fn pci(&mut self, node: Node, parent: DeviceId, depth: usize) -> Result<(), TopologyError> {
        if depth > 16 {
            return Err(err("PCIe tree deeper than 16 levels"));
        }
        let busid = Self::attr(node, "busid")?.to_string();
        let class = node.attribute("class").unwrap_or("");
        let bw = self.pci_bandwidth(node)?;
        // One host's devices share a server name; a single host is "node" (as its CPUs are).
        let server = if self.server.is_empty() { "node".to_string() } else { self.server.clone() };
        let gpu = node.children().find(|c| c.has_tag_name("gpu"));
        let nic = node.children().find(|c| c.has_tag_name("nic"));
        let me = if let Some(g) = gpu {
            let dev = Self::attr(g, "dev")?;
            let n = self.name(&format!("gpu{dev}"));
            let id = self.b.device(n, DeviceKind::Gpu, Some(&server));
            self.gpus_total += 1;
            for l in g.children().filter(|c| c.has_tag_name("nvlink")) {
                let target = Self::attr(l, "target")?.to_string();
                let count: f64 = Self::attr(l, "count")?
                    .parse()
                    .map_err(|_| err(format!("nvlink count on gpu{dev} is not a number")))?;
                if !(count > 0.0 && count <= 64.0) {
                    return Err(err(format!("nvlink count {count} on gpu{dev} out of range")));
                }
                self.nvlinks.push((id, target, count, l.attribute("tclass").unwrap_or("").to_string()));
            }
            id
        } else if is_bare_gpu(class, node.attribute("vendor")) {
            // A GPU by its PCI class (3D or VGA controller): vendor topology files (Azure
            // ND, AWS p4d) list no <gpu> element, so no NVLink either — NCCL learns those
            // from the driver.
            let n = self.name(&format!("gpu{}", self.bare_gpus));
            self.bare_gpus += 1;
            self.bare_gpus_total += 1;
            self.gpus_total += 1;
            self.b.device(n, DeviceKind::Gpu, Some(&server))
        } else if nic.is_none() && is_bare_nic(class, node.attribute("vendor")) {
            // A network controller without <nic>: one port at the default rate.
            let port = self.name(&format!("nicpci{}", self.counter));
            let id = self.b.device(port, DeviceKind::PcieSwitch, Some(&server));
            let n = self.name(&format!("nic{}", self.bare_nics));
            self.bare_nics += 1;
            let nic_id = self.b.device(n, DeviceKind::Nic, Some(&server));
            self.b.duplex(id, nic_id, bw, 0.0, &[]);
            self.nics.push(nic_id);
            self.nic_bw.push(self.defaults.nic_bytes_per_sec);
            id
        } else if class.starts_with("0x02") || nic.is_some() {
            let n = self.name(&format!("nicpci{}", self.counter));
            let id = self.b.device(n, DeviceKind::PcieSwitch, Some(&server));
            for net in nic.iter().flat_map(|n| n.children().filter(|c| c.has_tag_name("net"))) {
                let dev = Self::attr(net, "dev")?;
                // speed in Mb/s; absent or 0 (NCCL could not read it) means the default.
                let nic_bw = match net.attribute("speed").map(str::trim) {
                    None | Some("" | "0") => self.defaults.nic_bytes_per_sec,
                    Some(text) => match text.parse::<f64>() {
                        Ok(mbps) if mbps.is_finite() && mbps > 0.0 => mbps * 1e6 / 8.0,
                        _ => {
                            let row = net.document().text_pos_at(net.range().start).row;
                            return Err(err(format!("line {row}: net speed=\"{text}\" is not a rate in Mb/s")));
                        }
                    },
                };
                let n = self.name(&format!("nic{dev}"));
                let nic_id = self.b.device(n, DeviceKind::Nic, Some(&server));
                self.b.duplex(id, nic_id, bw, 0.0, &[]);
                self.nics.push(nic_id);
                self.nic_bw.push(nic_bw);
            }
            id
        } else {
            let n = self.name(&format!("pcie{}", self.counter));
            self.b.device(n, DeviceKind::PcieSwitch, Some(&server))
        };
        self.b.duplex(me, parent, bw, 0.0, &[]);
        self.by_busid.insert(busid.to_ascii_lowercase(), me);
        for child in node.children().filter(|c| c.has_tag_name("pci")) {
            self.pci(child, me, depth + 1)?;
        }
        Ok(())
    }
}

/// Deepest element nesting accepted.
const MAX_NESTING: usize = 64;

/// The deepest element nesting of `text`, from its tags alone: `<x` opens, `</x` and
/// `/>` close; `<?`, `<!` (declarations, comments) neither.
fn nesting_depth(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut depth, mut deepest) = (0usize, 0usize);
    for (i, &b) in bytes.iter().enumerate() {
        match (b, bytes.get(i + 1)) {
            (b'<', Some(b'/')) => depth = depth.saturating_sub(1),
            (b'<', Some(b'?' | b'!')) => {}
            (b'<', _) => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (b'/', Some(b'>')) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Import NCCL topology XML.
pub fn import(text: &str, name: &str, defaults: &LinkDefaults) -> Result<Topology, TopologyError> {
    if text.len() > 16 << 20 {
        return Err(err("more than 16 MiB of XML"));
    }
    // A machine's XML nests a handful deep; refuse absurd nesting before the parser
    // (and anything walking its tree) recurses into it.
    let depth = nesting_depth(text);
    if depth > MAX_NESTING {
        return Err(err(format!("elements nested {depth} deep; a topology nests at most {MAX_NESTING}")));
    }
    let doc = roxmltree::Document::parse(text).map_err(|e| err(e.to_string()))?;
    let root = doc.root_element();
    if !root.has_tag_name("system") {
        return Err(err(format!("the root element is <{}>, expected <system>", root.tag_name().name())));
    }
    let cpus: Vec<Node> = root.children().filter(|c| c.has_tag_name("cpu")).collect();
    if cpus.is_empty() {
        return Err(err("<system> has no <cpu>"));
    }
    let mut hosts: Vec<String> = Vec::new();
    for c in &cpus {
        let h = c.attribute("host_hash").unwrap_or("0").to_string();
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    let mut imp = Importer {
        b: TopologyBuilder::new(name),
        defaults,
        server: String::new(),
        by_busid: BTreeMap::new(),
        nvlinks: Vec::new(),
        nics: Vec::new(),
        counter: 0,
        nic_bw: Vec::new(),
        bare_gpus: 0,
        bare_nics: 0,
        bare_gpus_total: 0,
        gpus_total: 0,
    };
    imp.b.description(format!("imported from NCCL topology XML: {} server(s)", hosts.len()));
    imp.b.round_startup_secs(defaults.round_startup_secs);
    let fabric = (hosts.len() > 1).then(|| {
        let f = imp.b.device("fabric", DeviceKind::Switch, None);
        imp.b.device_mut(f).tier = Some(1);
        f
    });
    let mut nvswitches: BTreeMap<String, DeviceId> = BTreeMap::new();
    for (h, host) in hosts.iter().enumerate() {
        imp.server = if hosts.len() == 1 { String::new() } else { crate::presets::server_name(h, hosts.len()) };
        let server = if imp.server.is_empty() { "node".to_string() } else { imp.server.clone() };
        let first_nic = imp.nics.len();
        (imp.bare_gpus, imp.bare_nics) = (0, 0);
        imp.by_busid.clear();
        imp.nvlinks.clear();
        let mut socket_ids = Vec::new();
        for (k, c) in cpus.iter().filter(|c| c.attribute("host_hash").unwrap_or("0") == host).enumerate() {
            let numa = c.attribute("numaid").unwrap_or("?").to_string();
            let n = imp.name(&format!("cpu{}", if numa == "?" { k.to_string() } else { numa }));
            let cpu = imp.b.device(n, DeviceKind::Cpu, Some(&server));
            socket_ids.push(cpu);
            for p in c.children().filter(|x| x.has_tag_name("pci")) {
                imp.pci(p, cpu, 0)?;
            }
        }
        for (i, &a) in socket_ids.iter().enumerate() {
            for &c in &socket_ids[i + 1..] {
                imp.b.duplex(a, c, defaults.inter_socket_bytes_per_sec, 0.0, &[]);
            }
        }
        let links = std::mem::take(&mut imp.nvlinks);
        let mut gpu_pairs_done = Vec::new();
        let mut to_switch: BTreeMap<(DeviceId, DeviceId), f64> = BTreeMap::new();
        for (gpu, target, count, tclass) in links {
            let bw = count * defaults.nvlink_bytes_per_sec;
            let target_l = target.to_ascii_lowercase();
            if tclass.starts_with("0x03") {
                if let Some(&other) = imp.by_busid.get(&target_l) {
                    // A GPU's NVLinks to itself (Azure's NC A100 v4 file) carry nothing.
                    if other == gpu {
                        continue;
                    }
                    let key = (gpu.min(other), gpu.max(other));
                    if !gpu_pairs_done.contains(&key) {
                        gpu_pairs_done.push(key);
                        imp.b.duplex(gpu, other, bw, 0.0, &[]);
                    }
                    continue;
                }
                return Err(err(format!("nvlink target {target} is not a GPU of this host")));
            }
            // NVSwitch chips (0x068000) or anything else NVLink reaches: like NCCL, all of
            // a host's NVSwitch chips form one switch, and a GPU's bundles to them add up.
            let key = format!("{server}/nvswitch");
            let sw = match nvswitches.get(&key) {
                Some(&s) => s,
                None => {
                    let n = imp.name(&format!("nvswitch{}", nvswitches.len()));
                    let s = imp.b.device(n, DeviceKind::NvSwitch, Some(&server));
                    nvswitches.insert(key, s);
                    s
                }
            };
            *to_switch.entry((gpu, sw)).or_insert(0.0) += bw;
        }
        for ((gpu, sw), bw) in to_switch {
            imp.b.duplex(gpu, sw, bw, 0.0, &[]);
        }
        if let Some(f) = fabric {
            for i in first_nic..imp.nics.len() {
                let (nic, bw) = (imp.nics[i], imp.nic_bw[i]);
                imp.b.duplex(nic, f, bw, 0.0, &[]);
            }
        }
    }
    if imp.gpus_total == 0 {
        return Err(err(
            "no GPU in the file (no <gpu> element, no PCI device of class 0x0302): a skeleton that NCCL completes \
             with what it detects on the machine (NCCL_TOPO_FILE); import an NCCL_TOPO_DUMP_FILE written on it instead",
        ));
    }
    if imp.bare_gpus_total > 0 {
        imp.b.description(format!(
            "imported from NCCL topology XML: {} server(s); {} GPU(s) known only by their PCI class (a vendor \
             file: no <gpu> element, so no NVLink — PCIe only here; an NCCL_TOPO_DUMP_FILE of the machine has them)",
            hosts.len(),
            imp.bare_gpus_total
        ));
    }
    imp.b.build()
}

/// Write a topology in NCCL's XML shape: one `<cpu host_hash>` per server; below it a
/// `<pci class="0x060400">` bridge per PCIe switch holding the GPUs and NICs attached to
/// it (so GPU–NIC affinity survives), other GPUs and NICs directly below the CPU; GPU
/// NVLink bundles as `<nvlink count>` (bandwidth / the per-link default). Shared
/// interfaces (a NIC's PCIe slot) have no XML form and are not written.
pub fn export(t: &Topology, defaults: &LinkDefaults) -> String {
    let mut out = String::from("<system version=\"1\">\n");
    let server_of = |id: DeviceId| t.devices[id].server.clone().unwrap_or_else(|| t.devices[id].name.clone());
    let mut servers: Vec<String> = Vec::new();
    for (id, d) in t.devices.iter().enumerate() {
        if matches!(d.kind, DeviceKind::Gpu | DeviceKind::Nic) && !servers.contains(&server_of(id)) {
            servers.push(server_of(id));
        }
    }
    let busid = |id: DeviceId| format!("0000:{:02x}:{:02x}.0", (id >> 8) & 0xff, id & 0xff);
    let link_to = |from: DeviceId, kinds: &[DeviceKind]| -> Option<(DeviceId, f64)> {
        t.out_links(from)
            .iter()
            .map(|&l| &t.links[l])
            .find(|l| kinds.contains(&t.devices[l.to].kind))
            .map(|l| (l.to, l.bytes_per_sec))
    };
    let endpoint = |out: &mut String, id: DeviceId, indent: &str| {
        let d = &t.devices[id];
        let pci = link_to(id, &[DeviceKind::PcieSwitch, DeviceKind::Cpu]).map_or(defaults.pcie_bytes_per_sec, |x| x.1);
        if d.kind == DeviceKind::Gpu {
            let _ = writeln!(
                out,
                "{indent}<pci busid=\"{}\" class=\"0x030200\" link_speed=\"32.0 GT/s PCIe\" link_width=\"{}\">",
                busid(id),
                lanes(pci)
            );
            let rank = t.default_ranks.iter().position(|&r| r == id).unwrap_or(0);
            let _ = writeln!(out, "{indent}  <gpu dev=\"{rank}\" sm=\"90\" rank=\"{rank}\" gdr=\"1\">");
            for l in t.out_links(id).iter().map(|&l| &t.links[l]).filter(|l| l.class == LinkClass::Nvlink) {
                let count = (l.bytes_per_sec / defaults.nvlink_bytes_per_sec).round().max(1.0);
                let tclass = if t.devices[l.to].kind == DeviceKind::Gpu { "0x030200" } else { "0x068000" };
                let _ = writeln!(
                    out,
                    "{indent}    <nvlink target=\"{}\" count=\"{count}\" tclass=\"{tclass}\"/>",
                    busid(l.to)
                );
            }
            let _ = writeln!(out, "{indent}  </gpu>\n{indent}</pci>");
        } else {
            let wire = t
                .out_links(id)
                .iter()
                .map(|&l| &t.links[l])
                .find(|l| l.class == LinkClass::Nic)
                .map_or(defaults.nic_bytes_per_sec, |l| l.bytes_per_sec);
            let _ = writeln!(
                out,
                "{indent}<pci busid=\"{}\" class=\"0x020000\" link_speed=\"32.0 GT/s PCIe\" link_width=\"{}\">",
                busid(id),
                lanes(pci)
            );
            let _ = writeln!(
                out,
                "{indent}  <nic>\n{indent}    <net name=\"{}\" dev=\"{id}\" speed=\"{:.0}\" port=\"1\" latency=\"0.000000\" gdr=\"1\"/>\n{indent}  </nic>\n{indent}</pci>",
                d.name,
                wire * 8.0 / 1e6
            );
        }
    };
    for (h, server) in servers.iter().enumerate() {
        let _ =
            writeln!(out, "  <cpu host_hash=\"0x{:x}\" numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\">", h + 1);
        let mine = |id: &usize| server_of(*id) == *server;
        let ends: Vec<DeviceId> = (0..t.devices.len())
            .filter(mine)
            .filter(|&i| matches!(t.devices[i].kind, DeviceKind::Gpu | DeviceKind::Nic))
            .collect();
        let mut placed = vec![false; t.devices.len()];
        for sw in (0..t.devices.len()).filter(mine).filter(|&i| t.devices[i].kind == DeviceKind::PcieSwitch) {
            let below: Vec<DeviceId> = ends
                .iter()
                .copied()
                .filter(|&e| !placed[e] && link_to(e, &[DeviceKind::PcieSwitch]).is_some_and(|x| x.0 == sw))
                .collect();
            if below.is_empty() {
                continue;
            }
            let width = t.out_links(sw).iter().map(|&l| t.links[l].bytes_per_sec).fold(0.0, f64::max);
            let _ = writeln!(
                out,
                "    <pci busid=\"{}\" class=\"0x060400\" link_speed=\"32.0 GT/s PCIe\" link_width=\"{}\">",
                busid(sw),
                lanes(width)
            );
            for e in below {
                placed[e] = true;
                endpoint(&mut out, e, "      ");
            }
            out.push_str("    </pci>\n");
        }
        for e in ends.into_iter().filter(|&e| !placed[e]) {
            endpoint(&mut out, e, "    ");
        }
        out.push_str("  </cpu>\n");
    }
    out.push_str("</system>\n");
    out
}

/// PCIe lanes at 32 GT/s (3 GB/s each) that carry `bytes_per_sec`, at least 1, at most 32.
fn lanes(bytes_per_sec: f64) -> u32 {
    (bytes_per_sec / 3e9).round().clamp(1.0, 32.0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_rates_follow_nccl() {
        assert_eq!(lane_bytes_per_sec("32.0 GT/s PCIe"), Some(3e9));
        assert_eq!(lane_bytes_per_sec("16 GT/s"), Some(1.5e9));
        assert_eq!(lane_bytes_per_sec("warp speed"), None);
    }

    #[test]
    fn garbage_is_an_error() {
        for bad in [
            "",
            "<system",
            "<notsystem/>",
            "<system/>",
            "<system><cpu><pci/></cpu></system>",
            "<system><cpu><pci busid=\"1\"><gpu/></pci></cpu></system>",
        ] {
            assert!(import(bad, "x", &LinkDefaults::default()).is_err(), "{bad}");
        }
    }

    fn one_gpu(link_speed: &str, link_width: &str, net_speed: &str) -> String {
        format!(
            "<system version=\"1\"><cpu numaid=\"0\">\
             <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"{link_speed}\" link_width=\"{link_width}\">\
             <gpu dev=\"0\"/></pci>\
             <pci busid=\"0000:02:00.0\" class=\"0x020000\" link_speed=\"16 GT/s PCIe\" link_width=\"16\">\
             <nic><net name=\"mlx5_0\" dev=\"0\" speed=\"{net_speed}\"/></nic></pci></cpu></system>"
        )
    }

    #[test]
    fn unreadable_rates_are_refused_and_unknown_ones_take_the_default() {
        let d = LinkDefaults::default();
        let gpu_link = |t: &Topology| {
            let g = t.device_id("gpu0").unwrap();
            t.links[t.out_links(g)[0]].bytes_per_sec
        };
        assert_eq!(gpu_link(&import(&one_gpu("32.0 GT/s PCIe", "16", "400000"), "x", &d).unwrap()), 48e9);
        // Width 0 is 16 lanes, as NCCL takes it.
        assert_eq!(gpu_link(&import(&one_gpu("32.0 GT/s PCIe", "0", "400000"), "x", &d).unwrap()), 48e9);
        for (speed, width) in [("Unknown", "16"), ("", "16")] {
            let t = import(&one_gpu(speed, width, "400000"), "x", &d).unwrap();
            assert_eq!(gpu_link(&t), d.pcie_bytes_per_sec, "{speed} x{width}");
        }
        for (speed, width, net, word) in [
            ("NaN", "16", "400000", "link_speed=\"NaN\""),
            ("32.0 GT/s PCIe", "x16", "400000", "link_width=\"x16\""),
            ("32.0 GT/s PCIe", "65", "400000", "link_width=\"65\""),
            ("32.0 GT/s PCIe", "16", "NaN", "speed=\"NaN\""),
            ("32.0 GT/s PCIe", "16", "-5", "speed=\"-5\""),
        ] {
            let e = import(&one_gpu(speed, width, net), "x", &d).unwrap_err().to_string();
            assert!(e.contains(word) && e.contains("line 1"), "{e}");
        }
    }

    /// Vendor topology files (Azure ND, AWS p4d) list GPUs and NICs by PCI class alone,
    /// with no <gpu> or <nic> element: each is a GPU or a NIC at the default rate.
    #[test]
    fn vendor_files_name_gpus_by_pci_class() {
        let d = LinkDefaults::default();
        let xml = "<system version=\"1\"><cpu numaid=\"0\">\
                   <pci busid=\"ffff:ff:01.0\" class=\"0x060400\" link_speed=\"16 GT/s\" link_width=\"16\">\
                   <pci busid=\"0001:00:00.0\" class=\"0x030200\" link_speed=\"16 GT/s\" link_width=\"16\"/>\
                   <pci busid=\"0101:00:00.0\" class=\"0x020700\" link_speed=\"16 GT/s\" link_width=\"16\"/>\
                   <pci busid=\"0002:00:00.0\" class=\"0x030200\" link_speed=\"16 GT/s\" link_width=\"16\"/>\
                   </pci></cpu></system>";
        let t = import(xml, "ndv4", &d).unwrap();
        let kind = |k: DeviceKind| t.devices.iter().filter(|x| x.kind == k).count();
        assert_eq!((kind(DeviceKind::Gpu), kind(DeviceKind::Nic)), (2, 1));
        // A board's management VGA (ASPEED) and an Intel management port are neither.
        let bmc = xml.replace(
            "<pci busid=\"0002:00:00.0\" class=\"0x030200\"",
            "<pci busid=\"0003:00:00.0\" class=\"0x030000\" vendor=\"0x1a03\" link_speed=\"\" link_width=\"0\"/>\
             <pci busid=\"0004:00:00.0\" class=\"0x020000\" vendor=\"0x8086\" link_speed=\"\" link_width=\"0\"/>\
             <pci busid=\"0002:00:00.0\" class=\"0x030200\"",
        );
        let t = import(&bmc, "bmc", &d).unwrap();
        let kind = |k: DeviceKind| t.devices.iter().filter(|x| x.kind == k).count();
        assert_eq!((kind(DeviceKind::Gpu), kind(DeviceKind::Nic)), (2, 1));
        assert!(t.device_id("gpu1").is_some());
        assert!(t.description.contains("PCI class"), "{}", t.description);
    }
}

//! What NCCL's tuner would be given on a railyard topology: ranks and nodes from the
//! placement, the path type inside a node from its route, and the channels and
//! per-channel bandwidths NCCL's graph search would settle on. Inside one node the
//! channel count is an input (NCCL opens 16 on an 8-GPU NVSwitch node; a log's `N coll
//! channels` line says how many it opened) and the speed is the largest of NCCL's
//! candidates (`search.cc`) that they all carry over a GPU's widest path. Across nodes a
//! ring's channel runs at one speed through a NIC and the node, so the search is replayed
//! in outline (`RingLimits`): each NIC, each rank's path to the network and a GPU's path
//! in the node hold the channels that fit in them, the speed carrying most wins, and
//! NCCL's split of fast channels follows. Every value says where it came from, and each
//! can be given instead (`Overrides`), e.g. from a log's `Pattern …, nChannels N, bw
//! intra/inter` line.

use serde::Serialize;

use railyard_topology::{DeviceKind, LinkClass, Placement, RouteTable, Topology};

use crate::error::NcclError;
use crate::tuner::{Algo, Arch, Cpu, Proto, TunerInput};

/// NCCL's per-channel speed candidates, GB/s (`src/graph/search.cc`): inside a node and
/// across nodes, for SM90 (Hopper), SM100 (Blackwell) and older GPUs.
const SPEED_INTRA: [f64; 13] = [40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0];
const SPEED_INTER: [f64; 19] =
    [48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12];
const SM90_SPEED_INTRA: [f64; 11] = [60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0];
const SM90_SPEED_INTER: [f64; 17] =
    [48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12];
const SM100_SPEED_INTRA: [f64; 12] = [90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0];
const SM100_SPEED_INTER: [f64; 20] = [
    96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12,
];

/// What a user says instead of what is derived.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub arch: Option<Arch>,
    pub channels: Option<usize>,
    pub bw_intra_gb_per_s: Option<f64>,
    pub bw_inter_gb_per_s: Option<f64>,
    pub nvls: Option<bool>,
    pub collnet: bool,
    pub algos: Option<Vec<Algo>>,
    pub protos: Option<Vec<Proto>>,
}

/// The default channel count: what NCCL opens on an 8-GPU NVSwitch node.
pub const DEFAULT_CHANNELS: usize = 16;

/// The tuner's input and, per field, where its value came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shape {
    pub input: TunerInput,
    pub notes: Vec<(String, String)>,
}

/// The largest candidate speed that `channels` channels carry within the total, and the
/// channels: fewer when not even the slowest candidate fits them all (as NCCL's search
/// settles for fewer channels).
fn speed_for(speeds: &[f64], total_gb_per_s: f64, channels: usize) -> (f64, usize) {
    let slowest = speeds[speeds.len() - 1];
    let mut c = channels;
    loop {
        let fits = speeds.iter().copied().find(|&s| s * c as f64 <= total_gb_per_s * (1.0 + 1e-9));
        match fits {
            Some(s) => return (s, c),
            None if c > 1 => c -= 1,
            None => return (slowest, 1),
        }
    }
}

/// What bounds a ring's channels across nodes in NCCL's search (`search.cc`): a channel
/// enters and leaves a node through one NIC at one speed, no faster than a GPU's path to
/// the network; each NIC carries the channels whose speeds fit in its bandwidth, each
/// rank's path those that fit in it, and a GPU's path inside the node all of them.
struct RingLimits {
    path_gb_per_s: f64,
    ranks_per_node: usize,
    nic_gb_per_s: Vec<f64>,
    /// A GPU's widest path inside the node (None with one rank per node).
    intra_gb_per_s: Option<f64>,
}

/// A speed and channel count the search settles on, and whether it split its channels.
struct RingFound {
    speed: f64,
    channels: usize,
    split: bool,
}

impl RingLimits {
    const EPS: f64 = 1e-9;

    /// How many channels of `speed` fit at once (0 when one is faster than the path).
    fn fit(&self, speed: f64) -> usize {
        if speed > self.path_gb_per_s * (1.0 + Self::EPS) {
            return 0;
        }
        let per = |bw: f64| (bw / speed + Self::EPS).floor() as usize;
        let nics: usize = self.nic_gb_per_s.iter().map(|&b| per(b)).sum();
        let paths = self.ranks_per_node * per(self.path_gb_per_s);
        let intra = self.intra_gb_per_s.map_or(usize::MAX, per);
        nics.min(paths).min(intra)
    }

    /// NCCL's search with at most `channels` channels: from the fastest candidate no
    /// faster than the path, the speed whose channels carry most in total, a slower one
    /// tried only while it is more than 0.49 of the best found (`search.cc`); then every
    /// channel of 25 GB/s or more duplicated (`ncclTopoDupChannels`: twice the channels,
    /// at most `channels`, the speed divided as they are), except on Hopper and newer where
    /// more than 4 channels run below 50 GB/s.
    fn search(&self, speeds: &[f64], channels: usize, arch: Arch) -> RingFound {
        let mut best: Option<(f64, usize)> = None;
        for &s in speeds {
            if let Some((b, _)) = best {
                if s / b <= 0.49 {
                    break;
                }
            }
            let c = self.fit(s).min(channels.max(1));
            if c == 0 {
                continue;
            }
            if best.is_none_or(|(b, n)| s * c as f64 > b * n as f64 * (1.0 + Self::EPS)) {
                best = Some((s, c));
            }
        }
        let Some((speed, c)) = best else {
            return RingFound { speed: speeds[speeds.len() - 1], channels: 1, split: false };
        };
        let keep = arch >= Arch::Hopper && speed < 50.0 && c > 4;
        let dup = (2 * c).min(channels.max(1));
        if speed >= 25.0 && !keep && dup > c {
            RingFound { speed: speed / dup.div_ceil(c) as f64, channels: dup, split: true }
        } else {
            RingFound { speed, channels: c, split: false }
        }
    }

    /// The fastest candidate at which `channels` channels (given) all fit, else the
    /// slowest; the channels as given.
    fn speed_for_channels(&self, speeds: &[f64], channels: usize) -> RingFound {
        let speed = speeds.iter().copied().find(|&s| self.fit(s) >= channels).unwrap_or(speeds[speeds.len() - 1]);
        RingFound { speed, channels, split: false }
    }

    fn describe(&self) -> String {
        let plural = |n: usize, one: &str, many: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {many}") };
        let nics = match self.nic_gb_per_s.as_slice() {
            [first, rest @ ..] if rest.iter().all(|b| b == first) => {
                format!("{} ({first:.1} GB/s)", plural(rest.len() + 1, "NIC", "NICs"))
            }
            all => format!("NICs ({} GB/s)", all.iter().map(|b| format!("{b:.1}")).collect::<Vec<_>>().join(", ")),
        };
        let inside = self
            .intra_gb_per_s
            .map_or(String::new(), |b| format!(", and a GPU's widest path in the node ({b:.1} GB/s) all of them"));
        format!(
            "the candidate no faster than a rank's path to the network ({:.1} GB/s) whose channels carry most \
             together: the node's {nics} and its {} to the network each carry as many as fit{inside}",
            self.path_gb_per_s,
            plural(self.ranks_per_node, "rank's path", "ranks' paths"),
        )
    }
}

/// The GPU generation a topology's name says (`a100-…`, `hgx-h100x2`), if any.
fn name_arch(name: &str) -> Option<Arch> {
    let n = name.to_ascii_lowercase();
    [
        ("v100", Arch::Volta),
        ("a100", Arch::Ampere),
        ("h100", Arch::Hopper),
        ("h200", Arch::Hopper),
        ("h800", Arch::Hopper),
        ("b200", Arch::Blackwell),
    ]
    .into_iter()
    .find(|(k, _)| n.contains(k))
    .map(|(_, a)| a)
}

pub fn shape(topology: &Topology, placement: &Placement, o: &Overrides) -> Result<Shape, NcclError> {
    let bad = |field: &str, message: String| NcclError::BadInput { field: field.into(), message };
    let ranks = placement.len();
    if ranks < 2 {
        return Err(bad("ranks", format!("{ranks}: NCCL's tuner needs at least 2 ranks")));
    }
    let servers = placement.ranks_by_server(topology);
    let nodes = servers.len();
    if servers.iter().any(|s| s.len() != servers[0].len()) {
        return Err(bad(
            "ranks",
            format!("NCCL's tuner takes the same number of ranks on every node; these are {:?} per node", {
                servers.iter().map(Vec::len).collect::<Vec<_>>()
            }),
        ));
    }
    let ppn = servers[0].len();
    let mut notes = Vec::new();
    let mut routes = RouteTable::new(topology);
    let width = |routes: &mut RouteTable, a: usize, b: usize| -> Result<(f64, bool), NcclError> {
        let (da, db) = (placement.devices[a], placement.devices[b]);
        let r = routes.get(da, db).map_err(|e| bad("topology", e.to_string()))?;
        let nvlink = r.links.iter().all(|&(l, _)| topology.links[l].class == LinkClass::Nvlink);
        Ok((r.bottleneck_bytes_per_sec / 1e9, nvlink))
    };
    let (intra_total, intra_nvlink) =
        if ppn > 1 { width(&mut routes, servers[0][0], servers[0][1])? } else { (0.0, true) };
    // Across nodes: the first node's NICs, each at its wire's rate (a channel enters and
    // leaves the node through one of them).
    let first_server = topology.server_of(placement.devices[servers[0][0]]).to_string();
    let nic_speeds: Vec<f64> = topology
        .nics_of_server(&first_server)
        .iter()
        .map(|&id| {
            let wires = topology.out_links(id).iter().filter(|&&l| topology.links[l].class == LinkClass::Nic);
            wires.map(|&l| topology.links[l].bytes_per_sec).fold(0.0, f64::max) / 1e9
        })
        .filter(|&b| b > 0.0)
        .collect();
    let nvswitch = topology.devices.iter().any(|d| d.kind == DeviceKind::NvSwitch);
    let named = name_arch(&topology.name);
    let arch = o.arch.or(named).unwrap_or(Arch::Hopper);
    notes.push((
        "arch".into(),
        match (o.arch, named) {
            (Some(_), _) => "given".into(),
            (None, Some(a)) => format!("{a:?}, from the topology's name (--arch to change)"),
            (None, None) => "Hopper (the seeds' H100; --arch to change)".into(),
        },
    ));
    // NCCL counts an NVLink at its own per-link rate, below the line rate a topology
    // gives (H100: 18 x 20.6 = 370.8 GB/s of the 450; topo.h's SM*_NVLINK_BW over 25 or 50).
    let intra_total = if intra_nvlink && ppn > 1 {
        let per_link = match arch {
            Arch::Volta | Arch::Ampere => 20.0 / 25.0,
            Arch::Hopper => 20.6 / 25.0,
            Arch::Blackwell => 40.1 / 50.0,
        };
        let nccl_counts = intra_total * per_link;
        notes.push((
            "nvlink".into(),
            format!("{intra_total} GB/s line rate counted as NCCL does: {nccl_counts:.1} GB/s"),
        ));
        nccl_counts
    } else {
        intra_total
    };
    let mut channels = o.channels.unwrap_or(DEFAULT_CHANNELS);
    // Across nodes without a count given, the search's note says how many.
    if nodes == 1 || o.channels.is_some() {
        notes.push((
            "channels".into(),
            match o.channels {
                Some(_) => "given".into(),
                None => {
                    format!("{DEFAULT_CHANNELS}, what NCCL opens on an 8-GPU NVSwitch node (a log's `N coll channels`)")
                }
            },
        ));
    }
    let (intra_speeds, inter_speeds): (&[f64], &[f64]) = match arch {
        Arch::Hopper => (&SM90_SPEED_INTRA, &SM90_SPEED_INTER),
        Arch::Blackwell => (&SM100_SPEED_INTRA, &SM100_SPEED_INTER),
        _ => (&SPEED_INTRA, &SPEED_INTER),
    };
    // NVLS reduces among a node's GPUs: with one rank per node there is nothing to reduce.
    let nvls = o.nvls.unwrap_or(nvswitch && arch >= Arch::Hopper) && ppn > 1;
    // NVLS's graph has channels of its own, not the network ring's.
    let nvls_channels = channels;
    let mut tree_intra = None;
    let mut nvls_intra = None;
    let mut nvls_inter = None;
    let (bw_intra, bw_inter) = if nodes == 1 {
        let s = match o.bw_intra_gb_per_s {
            Some(v) => {
                notes.push(("bw_intra".into(), "given".into()));
                v
            }
            None => {
                let (s, c) = speed_for(intra_speeds, intra_total, channels);
                if c < channels && o.channels.is_none() {
                    notes.push((
                        "channels".into(),
                        format!("{c}: no candidate speed fits {channels} channels within {intra_total:.1} GB/s"),
                    ));
                    channels = c;
                }
                notes.push((
                    "bw_intra".into(),
                    format!("{s} GB/s: NCCL's largest candidate speed that {channels} channels carry within {intra_total:.1} GB/s (a GPU's widest path in a node)"),
                ));
                s
            }
        };
        (s, o.bw_inter_gb_per_s.unwrap_or(s))
    } else {
        // Across nodes NCCL's search takes its speeds from the inter-node list and runs a
        // ring's channel at one speed end to end: into the node through a NIC, through
        // every GPU of the node over NVLink, out through a NIC (`search.cc`: `bwIntra =
        // bwInter`). The channels together are bounded by the node's NICs, by each GPU's
        // own NVLink, and by the ranks' paths to the network.
        let (net_path, _) = width(&mut routes, servers[0][0], servers[1][0])?;
        let limits = RingLimits {
            path_gb_per_s: net_path,
            ranks_per_node: ppn,
            nic_gb_per_s: if nic_speeds.is_empty() { vec![net_path; ppn] } else { nic_speeds },
            intra_gb_per_s: (ppn > 1).then_some(intra_total),
        };
        let inter = match o.bw_inter_gb_per_s {
            Some(v) => {
                notes.push(("bw_inter".into(), "given".into()));
                v
            }
            None => {
                let found = match o.channels {
                    Some(c) => limits.speed_for_channels(inter_speeds, c),
                    None => limits.search(inter_speeds, channels, arch),
                };
                if o.channels.is_none() {
                    notes.push((
                        "channels".into(),
                        format!(
                            "{}: the ring channels NCCL's search finds across nodes (of at most {channels}){}",
                            found.channels,
                            if found.split { ", each of 25 GB/s or more split in two" } else { "" }
                        ),
                    ));
                }
                channels = found.channels;
                notes.push(("bw_inter".into(), format!("{} GB/s: {}", found.speed, limits.describe())));
                found.speed
            }
        };
        let intra = match o.bw_intra_gb_per_s {
            Some(v) => {
                notes.push(("bw_intra".into(), "given".into()));
                v
            }
            None => {
                notes.push((
                    "bw_intra".into(),
                    format!("{inter} GB/s: a ring's channel runs at one speed inside the node and through the NICs"),
                ));
                inter
            }
        };
        if ppn > 1 && o.bw_intra_gb_per_s.is_none() {
            // A tree's intra speed is raised through the same candidates while the node's
            // paths carry its channels, until it is twice the inter speed.
            let tree = inter_speeds
                .iter()
                .rev()
                .copied()
                .filter(|&t| t > intra && t * channels as f64 <= intra_total * (1.0 + 1e-9))
                .fold(intra, |up_to, t| if up_to < 2.0 * inter { t } else { up_to });
            if tree != intra {
                notes.push((
                    "tree bw_intra".into(),
                    format!("{tree} GB/s: raised inside the node while it carries the channels, until twice bw_inter or more"),
                ));
                tree_intra = Some(tree);
            }
            // NVLS's graph is searched on NVLink alone, on its own channels.
            let (nv, _) = speed_for(intra_speeds, intra_total, nvls_channels);
            if nvls && nv != intra {
                notes.push((
                    "NVLS bw_intra".into(),
                    format!("{nv} GB/s: NVLink's speed on {nvls_channels} channels (NVLS's own graph)"),
                ));
                nvls_intra = Some(nv);
            }
        }
        if nvls && o.bw_inter_gb_per_s.is_none() {
            // NVLS's channels leave the node through its NICs too, all of them at once.
            let across = RingLimits { intra_gb_per_s: None, ..limits };
            let s = across.speed_for_channels(inter_speeds, nvls_channels).speed;
            if s != inter {
                notes.push((
                    "NVLS bw_inter".into(),
                    format!("{s} GB/s: the fastest candidate at which NVLS's {nvls_channels} channels all fit through the NICs"),
                ));
                nvls_inter = Some(s);
            }
        }
        (intra, inter)
    };
    notes.push((
        "nvls".into(),
        match o.nvls {
            Some(true) if !nvls => "off: given on, but one rank per node has nothing to reduce in an NVSwitch".into(),
            Some(_) => "given".into(),
            None if nvls => "on: NVSwitch and a Hopper or newer GPU (NCCL_NVLS_ENABLE=2 default)".into(),
            None => "off: needs an NVSwitch, a Hopper or newer GPU and more than one rank per node".into(),
        },
    ));
    notes.push((
        "collnet".into(),
        if o.collnet { "on (given)".into() } else { "off: NCCL_COLLNET_ENABLE defaults to 0".into() },
    ));
    let input = TunerInput {
        ranks,
        nodes,
        arch,
        cpu: Cpu::Intel,
        intra_nvlink,
        channels,
        bw_intra_gb_per_s: bw_intra,
        bw_inter_gb_per_s: bw_inter,
        tree_bw_intra_gb_per_s: tree_intra,
        nvls_bw_intra_gb_per_s: nvls_intra,
        nvls_bw_inter_gb_per_s: nvls_inter,
        nvls_channels: if nvls { nvls_channels } else { 0 },
        collnet: o.collnet,
        pat: ppn == 1,
        ll128: intra_nvlink || ppn == 1,
        latency_inter_us: 0.0,
        algos: o.algos.clone(),
        protos: o.protos.clone(),
    };
    Ok(Shape { input, notes })
}

/// NCCL's name of `c` in per-function `NCCL_ALGO`/`NCCL_PROTO` lists ("other" for the
/// collectives it has no entry for).
pub fn nccl_function_name(c: railyard_schedule::Collective) -> &'static str {
    use railyard_schedule::Collective;
    match c {
        Collective::AllReduce => "allreduce",
        Collective::AllGather => "allgather",
        Collective::ReduceScatter => "reducescatter",
        Collective::Broadcast => "broadcast",
        Collective::Reduce => "reduce",
        _ => "other",
    }
}

/// `NCCL_ALGO` / `NCCL_PROTO` as NCCL reads them for one collective (`env.rst`, 2.24+):
/// `Ring,Tree`, `^Tree` (all but), and per-function lists `"ring;allreduce:tree,^nvls"`
/// where the collective's own entry wins. Names are case-insensitive.
pub fn parse_algo_env(text: &str, collective: &str) -> Result<Vec<Algo>, NcclError> {
    let names = |name: &str| -> Result<Vec<Algo>, NcclError> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "tree" => vec![Algo::Tree],
            "ring" => vec![Algo::Ring],
            "collnet" => vec![Algo::CollNetDirect, Algo::CollNetChain],
            "collnetdirect" => vec![Algo::CollNetDirect],
            "collnetchain" => vec![Algo::CollNetChain],
            "nvls" => vec![Algo::Nvls],
            "nvlstree" => vec![Algo::NvlsTree],
            "pat" => vec![Algo::Pat],
            _ => {
                return Err(NcclError::BadInput {
                    field: "NCCL_ALGO".into(),
                    message: format!(
                        "unknown algorithm \"{name}\" (Ring, Tree, CollNet, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT)"
                    ),
                })
            }
        })
    };
    select("NCCL_ALGO", text, collective, &crate::tuner::ALGOS, names)
}

pub fn parse_proto_env(text: &str, collective: &str) -> Result<Vec<Proto>, NcclError> {
    let names = |name: &str| -> Result<Vec<Proto>, NcclError> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "ll" => vec![Proto::Ll],
            "ll128" => vec![Proto::Ll128],
            "simple" => vec![Proto::Simple],
            _ => {
                return Err(NcclError::BadInput {
                    field: "NCCL_PROTO".into(),
                    message: format!("unknown protocol \"{name}\" (LL, LL128, Simple)"),
                })
            }
        })
    };
    select("NCCL_PROTO", text, collective, &crate::tuner::PROTOS, names)
}

fn select<T: Copy + PartialEq>(
    field: &str,
    text: &str,
    collective: &str,
    all: &[T],
    names: impl Fn(&str) -> Result<Vec<T>, NcclError>,
) -> Result<Vec<T>, NcclError> {
    let mut global = None;
    let mut own = None;
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (func, list) = match part.split_once(':') {
            Some((f, l)) => (Some(f.trim().to_ascii_lowercase()), l),
            None => (None, part),
        };
        let list = list.trim();
        let (exclude, list) = match list.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, list),
        };
        let mut named = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            named.extend(names(name)?);
        }
        let chosen: Vec<T> = if exclude { all.iter().copied().filter(|a| !named.contains(a)).collect() } else { named };
        match func {
            Some(f) if f == collective => own = Some(chosen),
            Some(_) => {}
            None => global = Some(chosen),
        }
    }
    let chosen = own.or(global).unwrap_or_else(|| all.to_vec());
    // NCCL refuses to run a collective its settings leave nothing for.
    if chosen.is_empty() {
        return Err(NcclError::BadInput {
            field: field.into(),
            message: format!("\"{text}\" leaves nothing for {collective}"),
        });
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_topology::{presets::preset, PlacementPolicy};

    #[test]
    fn hgx_h100x2_gives_two_nodes_of_eight_with_nvlink_and_nvls() {
        let t = preset("hgx-h100x2").unwrap();
        let p = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
        let s = shape(&t, &p, &Overrides::default()).unwrap();
        let i = &s.input;
        assert_eq!((i.ranks, i.nodes, i.intra_nvlink), (16, 2, true));
        // Across nodes a ring's channel runs at one speed through a NIC and the node: at
        // 48 GB/s (the fastest Hopper candidate within a 50 GB/s path) one GPU's NVLink,
        // 450 GB/s counted as NCCL does (18 x 20.6 = 370.8), holds 7 channels; at 45, 8
        // (one per NIC): 360 GB/s in all, the most. Below 50 GB/s NCCL does not split more
        // than 4 channels on Hopper. NVLS's graph is NVLink's alone, on its own 16
        // channels: 370.8 over 16 is 23.2, so 20 (intra speeds 60, 50, 40, 30, 24, 20).
        assert_eq!((i.channels, i.bw_intra_gb_per_s, i.bw_inter_gb_per_s), (8, 45.0, 45.0));
        assert_eq!((i.tree_bw_intra_gb_per_s, i.nvls_bw_intra_gb_per_s), (None, Some(20.0)));
        assert_eq!(i.nvls_channels, 16);
        assert!(!i.collnet);
    }

    /// One GPU on each of two nodes: its ring leaves through its own 400 Gbit/s NIC, so
    /// NCCL's estimate is that NIC's rate, not the node's eight NICs' nor NVLink's: one
    /// channel of 48 GB/s (the path's 50 GB/s), split into 2 of 24.
    #[test]
    fn one_gpu_per_node_is_held_to_its_path_to_the_network() {
        let t = preset("hgx-h200:nodes=2").unwrap();
        let p = Placement::new(&t, &"interleaved".parse().unwrap(), Some(2)).unwrap();
        let s = shape(&t, &p, &Overrides::default()).unwrap();
        let i = &s.input;
        assert_eq!((i.ranks, i.nodes, i.channels), (2, 2, 2));
        assert_eq!((i.bw_intra_gb_per_s, i.bw_inter_gb_per_s), (24.0, 24.0));
        assert_eq!((i.tree_bw_intra_gb_per_s, i.nvls_bw_intra_gb_per_s, i.nvls_channels), (None, None, 0));
    }

    /// With 4 NICs of 50 GB/s for 8 GPUs, each NIC holds one channel at 48: 4 channels,
    /// split into 8 of 24 (NCCL splits 4 channels or fewer); channels given are kept, at
    /// the fastest speed at which they all fit.
    #[test]
    fn each_nic_holds_the_channels_that_fit_in_it() {
        let t = preset("dgx-h100:nodes=2,nics=4").unwrap();
        let p = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
        let i = shape(&t, &p, &Overrides::default()).unwrap().input;
        assert_eq!((i.channels, i.bw_inter_gb_per_s), (8, 24.0));
        let given = Overrides { channels: Some(12), ..Overrides::default() };
        let i = shape(&t, &p, &given).unwrap().input;
        // 12 channels over 4 NICs: 3 each, so at most 16.6 GB/s: the candidate 15.
        assert_eq!((i.channels, i.bw_inter_gb_per_s), (12, 15.0));
    }

    #[test]
    fn nccl_algo_and_proto_strings() {
        use crate::tuner::{Algo::*, Proto::*};
        assert_eq!(parse_algo_env("Ring,Tree", "allreduce").unwrap(), vec![Ring, Tree]);
        assert_eq!(parse_algo_env("^tree", "allreduce").unwrap().len(), 6);
        assert_eq!(parse_algo_env("ring;allreduce:tree", "allreduce").unwrap(), vec![Tree]);
        assert_eq!(parse_algo_env("ring;allreduce:tree", "broadcast").unwrap(), vec![Ring]);
        assert_eq!(parse_algo_env("allreduce:^tree,collnet", "allreduce").unwrap(), vec![Ring, Nvls, NvlsTree, Pat]);
        assert_eq!(parse_proto_env("LL,Simple;allreduce:^LL", "allreduce").unwrap(), vec![Ll128, Simple]);
        assert!(parse_algo_env("warp", "allreduce").unwrap_err().to_string().contains("warp"));
        // Settings that leave a collective nothing are refused, as NCCL refuses to run it.
        let none = parse_proto_env("^LL,LL128,Simple", "allreduce").unwrap_err().to_string();
        assert!(none.contains("NCCL_PROTO") && none.contains("leaves nothing for allreduce"), "{none}");
        assert!(parse_algo_env("allreduce:^ring,tree,nvls,nvlstree,collnet,pat", "allreduce").is_err());
        // Another function's empty list is not this one's.
        assert_eq!(parse_proto_env("broadcast:^LL,LL128,Simple", "allreduce").unwrap().len(), 3);
    }
}

//! What NCCL's tuner would be given on a railyard topology: ranks and nodes from the
//! placement, the path type inside a node from its route, and the channels and
//! per-channel bandwidths NCCL's graph search would settle on. The search itself is not
//! replayed: the channel count is an input (NCCL opens 16 on an 8-GPU NVSwitch node;
//! a log's `N coll channels` line says how many it opened), and the per-channel speed is
//! the largest of NCCL's candidate speeds (`search.cc`) that the channels can all carry
//! at once — inside a node over one GPU's widest path to another, across nodes over a
//! node's NICs together. Every value says where it came from, and each can be given
//! instead (`Overrides`), e.g. from a log's `Pattern …, nChannels N, bw intra/inter` line.

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

/// A ring's channels across nodes as NCCL's search settles them (`search.cc`): it starts
/// at the fastest candidate and takes a slower one only when more channels at it carry
/// more in total, up to half the channels, then duplicates every channel of 25 GB/s or
/// more at half the speed. The speed and the channels.
fn ring_speed_across(speeds: &[f64], total_gb_per_s: f64, channels: usize) -> (f64, usize) {
    let mut best = (speeds[speeds.len() - 1], 1);
    for c in 1..=(channels / 2).max(1) {
        if let Some(s) = speeds.iter().copied().find(|&s| s * c as f64 <= total_gb_per_s * (1.0 + 1e-9)) {
            if s * c as f64 > best.0 * best.1 as f64 * (1.0 + 1e-9) {
                best = (s, c);
            }
        }
    }
    match best {
        (s, c) if s >= 25.0 && 2 * c <= channels => (s / 2.0, 2 * c),
        other => other,
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
    // Across nodes: every NIC of the first node's ranks together (rings spread over them).
    let first_server = topology.server_of(placement.devices[servers[0][0]]).to_string();
    let nic_total: f64 = topology
        .devices
        .iter()
        .enumerate()
        .filter(|(_, d)| d.kind == DeviceKind::Nic && d.server.as_deref() == Some(first_server.as_str()))
        .map(|(id, _)| {
            let wires = topology.out_links(id).iter().filter(|&&l| topology.links[l].class == LinkClass::Nic);
            wires.map(|&l| topology.links[l].bytes_per_sec).fold(0.0, f64::max)
        })
        .sum::<f64>()
        / 1e9;
    let inter_total = if nodes > 1 {
        if nic_total > 0.0 {
            nic_total
        } else {
            width(&mut routes, servers[0][0], servers[1][0])?.0
        }
    } else {
        intra_total
    };
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
    notes.push((
        "channels".into(),
        match o.channels {
            Some(_) => "given".into(),
            None => {
                format!("{DEFAULT_CHANNELS}, what NCCL opens on an 8-GPU NVSwitch node (a log's `N coll channels`)")
            }
        },
    ));
    let (intra_speeds, inter_speeds): (&[f64], &[f64]) = match arch {
        Arch::Hopper => (&SM90_SPEED_INTRA, &SM90_SPEED_INTER),
        Arch::Blackwell => (&SM100_SPEED_INTRA, &SM100_SPEED_INTER),
        _ => (&SPEED_INTRA, &SPEED_INTER),
    };
    let nvls = o.nvls.unwrap_or(nvswitch && arch >= Arch::Hopper && ppn > 1);
    let mut tree_intra = None;
    let mut nvls_intra = None;
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
        let mut total = inter_total.min(ppn as f64 * net_path);
        if ppn > 1 {
            total = total.min(intra_total);
        }
        let inter = match o.bw_inter_gb_per_s {
            Some(v) => {
                notes.push(("bw_inter".into(), "given".into()));
                v
            }
            None => {
                let (s, c) = if o.channels.is_some() {
                    speed_for(inter_speeds, total, channels)
                } else {
                    ring_speed_across(inter_speeds, total, channels)
                };
                if c != channels {
                    notes.push((
                        "channels".into(),
                        format!("{c}: the ring channels NCCL's search finds within {total:.1} GB/s, each of 25 GB/s or more split in two"),
                    ));
                    channels = c;
                }
                notes.push((
                    "bw_inter".into(),
                    format!(
                        "{s} GB/s: {channels} channels within {total:.1} GB/s, the least of the node's NICs \
                         ({inter_total:.1}), its {ppn} ranks' paths to the network ({ppn} x {net_path:.1}){}",
                        if ppn > 1 {
                            format!(" and a GPU's widest path in the node ({intra_total:.1})")
                        } else {
                            String::new()
                        }
                    ),
                ));
                s
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
            // A tree's intra speed is raised while the node's paths carry it, to at most
            // twice the inter speed; NVLS's graph is searched on NVLink alone.
            let (nv, _) = speed_for(intra_speeds, intra_total, channels);
            let tree = nv.min(2.0 * inter).max(intra);
            if tree != intra {
                notes.push((
                    "tree bw_intra".into(),
                    format!("{tree} GB/s: the speed inside the node, at most twice bw_inter"),
                ));
                tree_intra = Some(tree);
            }
            if nvls && nv != intra {
                notes.push((
                    "NVLS bw_intra".into(),
                    format!("{nv} GB/s: NVLink's speed on {channels} channels (NVLS's own graph)"),
                ));
                nvls_intra = Some(nv);
            }
        }
        (intra, inter)
    };
    notes.push((
        "nvls".into(),
        match o.nvls {
            Some(_) => "given".into(),
            None if nvls => "on: NVSwitch and a Hopper or newer GPU (NCCL_NVLS_ENABLE=2 default)".into(),
            None => "off: needs an NVSwitch and a Hopper or newer GPU".into(),
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
        nvls_channels: if nvls { channels } else { 0 },
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
    select(text, collective, &crate::tuner::ALGOS, names)
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
    select(text, collective, &crate::tuner::PROTOS, names)
}

fn select<T: Copy + PartialEq>(
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
    Ok(own.or(global).unwrap_or_else(|| all.to_vec()))
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
        assert_eq!((i.ranks, i.nodes, i.channels, i.intra_nvlink), (16, 2, 16, true));
        // Across nodes a ring's channel runs at one speed through NVLink and the NICs,
        // within the least of 8 NICs x 50 = 400 GB/s and one GPU's NVLink, 450 GB/s counted
        // as NCCL does (18 x 20.6 = 370.8): 8 channels of 45 (Hopper's inter speeds 48, 45,
        // ...; 8 x 48 = 384 is too much), split into 16 of 22.5. NVLS's graph is NVLink's
        // alone: 370.8 over 16 is 23.2, so 20 (intra speeds 60, 50, 40, 30, 24, 20).
        assert_eq!((i.bw_intra_gb_per_s, i.bw_inter_gb_per_s), (22.5, 22.5));
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
    }
}

//! An `NCCL_DEBUG=INFO` log (docs/sources.md#nccl-tuner: its format strings) in railyard's words: the version, each
//! rank's host and device (`comm … rank r nRanks n nNodes m localRanks l …`), the ring of
//! every channel (`Channel 00/16 :    0   1   2 …`), every rank's tree per channel
//! (`Trees [0] c0/c1/c2->r->parent …`), the transport of every connection
//! (`Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`), what the graph search found (`Pattern p,
//! crossNic x, nChannels n, bw intra/inter, type T/T, sameChannels s`), the channel
//! counts, `NCCL_ALGO`/`NCCL_PROTO` set by the environment, and the tuner's per-call
//! choices (`AllReduce: 1024 Bytes -> Algo 1 proto 0 …`). Lines it does not know are
//! counted, never fatal; a truncated or interleaved log yields what it holds.

use std::collections::BTreeMap;

use serde::Serialize;

use railyard_schedule::tree::Tree;

/// Largest log read: 256 MiB; ranks, channels and lines beyond these are refused.
pub const MAX_LOG_BYTES: u64 = 256 << 20;
pub const MAX_RANKS: usize = 1 << 16;
pub const MAX_CHANNELS: usize = 64;
/// Host names kept (a log of more hosts is counted as at least this many).
pub const MAX_HOSTS: usize = 1 << 16;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankInfo {
    pub rank: usize,
    pub host: String,
    pub pid: u64,
    pub device: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pattern {
    pub pattern: u32,
    pub cross_nic: u32,
    pub channels: usize,
    pub bw_intra_gb_per_s: f64,
    pub bw_inter_gb_per_s: f64,
    pub type_intra: String,
    pub type_inter: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Connection {
    pub channel: usize,
    pub from: usize,
    pub to: usize,
    /// The transport as printed: `P2P/IPC`, `SHM/direct/direct`, `NET/IB/0`, …
    pub via: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunedCall {
    pub collective: String,
    pub bytes: u64,
    /// Names or NCCL's indices as printed (older releases print indices).
    pub algo: String,
    pub proto: String,
}

/// One rank's place in one channel's tree: its children and its parent.
pub type TreeLine = (Vec<usize>, Option<usize>);

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct NcclLog {
    pub version: Option<String>,
    pub ranks: Option<usize>,
    /// Where the rank count comes from when no `comm … nRanks` line gives it: the
    /// highest rank the rings, trees or connections name (an excerpt).
    pub ranks_inferred_from: Option<String>,
    pub nodes: Option<usize>,
    /// Where the node count comes from: `nNodes`, the hosts the ranks named, or the
    /// rank count over `localRanks`; None when the log says nothing of it.
    pub nodes_from: Option<String>,
    pub local_ranks: Option<usize>,
    pub rank_info: Vec<RankInfo>,
    /// The ranks `rank_info` holds, so a log of many `comm` lines is read in time linear
    /// in its lines.
    #[serde(skip)]
    rank_info_ranks: std::collections::HashSet<usize>,
    /// Every host named in a line's prefix (at most `MAX_HOSTS`), whichever line it is.
    pub hosts: std::collections::BTreeSet<String>,
    /// The highest CUDA device a line's prefix names (`[3]`).
    #[serde(skip)]
    pub max_device: Option<usize>,
    /// Channel → ring order (ranks in ring order).
    pub rings: BTreeMap<usize, Vec<usize>>,
    /// Channel → rank → (children, parent) as its Trees line says.
    pub trees: BTreeMap<usize, BTreeMap<usize, TreeLine>>,
    pub connections: Vec<Connection>,
    pub patterns: Vec<Pattern>,
    pub coll_channels: Option<usize>,
    pub nvls_channels: Option<usize>,
    pub collnet_channels: Option<usize>,
    pub env: BTreeMap<String, String>,
    pub tuned: Vec<TunedCall>,
    pub lines: usize,
    /// NCCL INFO lines this reader does not use, and lines that are not NCCL's at all.
    pub unknown_info_lines: usize,
    pub other_lines: usize,
    /// Lines that looked like a known kind but did not read (line numbers, at most 100).
    pub unreadable: Vec<usize>,
    /// Why some of them did not (line and reason, at most 100).
    pub problems: Vec<(usize, String)>,
}

impl NcclLog {
    /// The tree of one channel, when every rank's line for it is present.
    pub fn tree(&self, channel: usize) -> Result<Tree, String> {
        let ranks = self.ranks.ok_or("the log gives no rank count (no `comm … nRanks` line)")?;
        let lines = self.trees.get(&channel).ok_or_else(|| format!("no Trees line has channel {channel}"))?;
        let missing: Vec<usize> = (0..ranks).filter(|r| !lines.contains_key(r)).collect();
        if !missing.is_empty() {
            // Said in a line, however many are missing.
            let shown: Vec<usize> = missing.iter().take(16).copied().collect();
            let more = match missing.len() - shown.len() {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            return Err(format!("channel {channel}: no Trees line from ranks {shown:?}{more} (a truncated log?)"));
        }
        Ok(Tree { parent: (0..ranks).map(|r| lines[&r].1).collect() })
    }

    /// Why the GPUs of a node talk over PCIe or host memory rather than NVLink, where
    /// the log shows it: a connection through shared memory, or a graph whose paths
    /// inside a node are PCIe's (`type PIX/…`).
    pub fn pcie_inside_nodes(&self) -> Option<String> {
        if let Some(c) = self.connections.iter().find(|c| c.via.starts_with("SHM")) {
            return Some(format!("ranks {} and {} connect through host memory ({})", c.from, c.to, c.via));
        }
        self.patterns
            .iter()
            .find(|p| ["PIX", "PXB", "PHB", "SYS", "PCI", "NODE"].contains(&p.type_intra.as_str()))
            .map(|p| format!("NCCL's graph search found {} paths inside a node (PCIe)", p.type_intra))
    }

    /// The transports the connections use, by kind (`P2P/IPC`, `NET/IB`, `SHM/direct`):
    /// the first two parts of each, with counts, in first-seen order.
    pub fn transports(&self) -> Vec<(String, usize)> {
        let mut kinds: Vec<(String, usize)> = Vec::new();
        for c in &self.connections {
            let kind = c.via.split('/').take(2).collect::<Vec<_>>().join("/");
            match kinds.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => kinds.push((kind, 1)),
            }
        }
        kinds
    }
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.trim().parse().ok()
}

/// `host:pid:tid [dev] NCCL INFO message` → (host, pid, dev, message).
fn prefix(line: &str) -> Option<(&str, u64, usize, &str)> {
    let (head, message) = line.split_once(" NCCL INFO ")?;
    let (who, dev) = head.rsplit_once(" [")?;
    let dev = num(dev.strip_suffix(']')?)?;
    let mut parts = who.trim().rsplitn(3, ':');
    let _tid = parts.next()?;
    let pid = num(parts.next()?)?;
    // Launchers put their own tags before the host (`[0] `, `0: `, `node1: `). A number
    // is no host: `2024-05-01 10:59:58 [0] NCCL INFO …` is a timestamp's hour.
    let host = parts.next()?.rsplit(char::is_whitespace).next()?;
    if host.is_empty() || host.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((host, pid, dev, message))
}

pub fn parse(text: &str) -> NcclLog {
    let mut log = NcclLog::default();
    for (i, line) in text.lines().enumerate() {
        log.lines += 1;
        // mpirun --tag-output prefixes every line with `[job,rank]<stdout>:`.
        let line = match line.split_once("]<stdout>:").or_else(|| line.split_once("]<stderr>:")) {
            Some((tag, rest)) if tag.starts_with('[') => rest,
            _ => line,
        };
        // A line without NCCL's `host:pid:tid [dev]` prefix (a launcher or a log
        // collector cut it) is still read for what its message says, under no host.
        let (host, pid, dev, m) = match prefix(line) {
            Some(p) => p,
            None => match line.split_once("NCCL INFO ") {
                Some((_, m)) => ("", 0, 0, m),
                // A comm line with everything before it cut away.
                None if line.trim_start().starts_with("comm 0x") || line.trim_start().starts_with("ncclCommInit") => {
                    ("", 0, 0, line.trim())
                }
                // nccl-tests and applications print the bare version line.
                None => match line.find("NCCL version ") {
                    Some(at) => ("", 0, 0, &line[at..]),
                    None => {
                        log.other_lines += 1;
                        continue;
                    }
                },
            },
        };
        if !host.is_empty() {
            if log.hosts.len() < MAX_HOSTS && !log.hosts.contains(host) {
                log.hosts.insert(host.to_string());
            }
            log.max_device = Some(log.max_device.map_or(dev, |d| d.max(dev)));
        }
        let m = m.trim();
        // `ncclCommInitRankConfig comm 0x… rank 0 nranks 8 … - Init START` (2.19+).
        let m = match m.split_once(' ') {
            Some((first, rest)) if first.starts_with("ncclCommInit") => rest.trim_start(),
            _ => m,
        };
        let known = if let Some(v) = m.strip_prefix("NCCL version ") {
            log.version = v.split_whitespace().next().map(str::to_string);
            true
        } else if (m.starts_with("comm ") || m.starts_with("rank "))
            && (m.contains(" nRanks ") || m.contains(" nranks "))
        {
            match comm_line(&mut log, m, host, pid, dev) {
                Ok(known) => known,
                Err(why) => {
                    if log.problems.len() < 100 {
                        log.problems.push((i + 1, why));
                    }
                    false
                }
            }
        } else if let Some(rest) = m.strip_prefix("Trees") {
            trees_line(&mut log, rest)
        } else if (m.starts_with("Channel ") || m.starts_with("Ring ")) && m.contains(" via ") {
            // NCCL up to 2.7 prints a connection as `Ring 00 : 0[0] -> 1[1] via P2P/IPC`.
            connection_line(&mut log, m)
        } else if m.starts_with("Channel ") || m.starts_with("Ring ") && !m.contains("->") {
            // `Ring 00 :  0 1 2 …`: the ring order as NCCL up to 2.7 prints it.
            ring_line(&mut log, m)
        } else if m.starts_with("Pattern ") {
            pattern_line(&mut log, m)
        } else if m.contains(" coll channels") {
            channels_line(&mut log, m)
        } else if let Some((var, value)) = env_line(m) {
            log.env.insert(var, value);
            true
        } else if m.contains(" Bytes -> Algo ") {
            tuned_line(&mut log, m)
        } else {
            log.unknown_info_lines += 1;
            continue;
        };
        if !known {
            note_unreadable(&mut log, i + 1);
        }
    }
    // A comm line that was refused (nRanks 0) is an error to report, not a gap to fill.
    if log.ranks.is_none() && log.problems.is_empty() {
        infer_ranks(&mut log);
    }
    infer_nodes(&mut log);
    log
}

/// An excerpt without a `comm … nRanks` line: the rank count is the highest rank its
/// rings, trees or connections name, plus one — at least as many as there are.
fn infer_ranks(log: &mut NcclLog) {
    let from_rings = log.rings.values().flatten().max().copied();
    let from_trees = log
        .trees
        .values()
        .flat_map(|t| t.iter())
        .flat_map(|(&r, (kids, parent))| kids.iter().copied().chain(*parent).chain([r]))
        .max();
    let from_connections = log.connections.iter().map(|c| c.from.max(c.to)).max();
    let named: Vec<(&str, usize)> = [("rings", from_rings), ("trees", from_trees), ("connections", from_connections)]
        .into_iter()
        .filter_map(|(what, top)| Some((what, top? + 1)))
        .collect();
    let Some(&(_, ranks)) = named.iter().max_by_key(|(_, n)| *n) else { return };
    let what: Vec<&str> = named.iter().map(|(w, _)| *w).collect();
    log.ranks = Some(ranks);
    log.ranks_inferred_from =
        Some(format!("the highest rank the {} name (the log has no `comm … nRanks` line)", what.join(" and ")));
}

/// Older logs do not print nNodes. In order: the rank count over `localRanks`; the
/// hosts of the ranks' `comm` lines when every rank printed one; then guesses, said as
/// such — one GPU per node where every line on two or more hosts is device 0, else the
/// hosts the lines name (at least two where a connection crosses the network).
fn infer_nodes(log: &mut NcclLog) {
    if log.nodes.is_some() {
        log.nodes_from = Some("nNodes".into());
        return;
    }
    let hosts = log.hosts.len();
    let Some(ranks) = log.ranks else {
        if hosts > 0 {
            log.nodes = Some(hosts);
            log.nodes_from = Some("the hosts its lines name".into());
        }
        return;
    };
    if let Some(l) = log.local_ranks.filter(|&l| l > 0) {
        log.nodes = Some(ranks.div_ceil(l));
        log.nodes_from = Some(format!("{ranks} ranks over localRanks {l}"));
        return;
    }
    let mut comm_hosts: Vec<&str> = log.rank_info.iter().map(|r| r.host.as_str()).collect();
    comm_hosts.sort_unstable();
    comm_hosts.dedup();
    if log.rank_info.len() == ranks && !comm_hosts.is_empty() {
        log.nodes = Some(comm_hosts.len());
        log.nodes_from = Some(format!("the hosts of its {ranks} ranks' comm lines"));
        return;
    }
    if hosts >= 2 && log.max_device == Some(0) {
        log.nodes = Some(ranks);
        log.nodes_from = Some(format!("a guess: every line on its {hosts} hosts is device 0, so one GPU per node"));
        return;
    }
    let net = log.connections.iter().any(|c| c.via.starts_with("NET") || c.via.starts_with("COLLNET"));
    if hosts == 0 && !net {
        return;
    }
    log.nodes = Some(hosts.max(if net { 2 } else { 1 }).min(ranks));
    log.nodes_from = Some(format!(
        "a guess: the {hosts} host(s) its lines name{}",
        if net && hosts < 2 { ", and connections over the network (so at least 2)" } else { "" }
    ));
}

fn note_unreadable(log: &mut NcclLog, line: usize) {
    if log.unreadable.len() < 100 {
        log.unreadable.push(line);
    }
}

/// `comm 0x5581 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0`
fn comm_line(log: &mut NcclLog, m: &str, host: &str, pid: u64, dev: usize) -> Result<bool, String> {
    let words: Vec<&str> = m.split_whitespace().collect();
    let word = |key: &str| words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1)).copied();
    let after = |key: &str| word(key).and_then(num::<usize>);
    // `nRanks` since 2.12; older releases print `nranks … cudaDev … - Init COMPLETE`.
    let (Some(rank), Some(ranks_text)) = (after("rank"), word("nRanks").or_else(|| word("nranks"))) else {
        return Ok(false);
    };
    let ranks = match num::<u64>(ranks_text) {
        Some(n) if (1..=MAX_RANKS as u64).contains(&n) => n as usize,
        _ => return Err(format!("nRanks {ranks_text}: a rank count is 1 to {MAX_RANKS}")),
    };
    if rank >= ranks {
        return Err(format!("rank {rank} of nRanks {ranks}: not one of its ranks"));
    }
    log.ranks = Some(ranks);
    log.nodes = after("nNodes").or(log.nodes);
    log.local_ranks = after("localRanks").or(log.local_ranks);
    if !host.is_empty() && log.rank_info_ranks.insert(rank) {
        log.rank_info.push(RankInfo { rank, host: host.to_string(), pid, device: dev });
    }
    Ok(true)
}

/// ` [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1` (children/…->rank->parent per channel).
fn trees_line(log: &mut NcclLog, rest: &str) -> bool {
    let mut any = false;
    let mut parts = rest.split('[').skip(1);
    for part in parts.by_ref() {
        let Some((channel, tree)) = part.split_once(']') else { return false };
        let Some(channel) = num::<usize>(channel).filter(|&c| c < MAX_CHANNELS) else { return false };
        // NCCL 2.5–2.6 print the reduce and broadcast halves, `c0/c1/c2->r->p|p->r->c0/c1/c2`:
        // the first half says it all.
        let tree = tree.split('|').next().unwrap_or(tree);
        let fields: Vec<&str> = tree.trim().split("->").collect();
        if fields.len() != 3 {
            return false;
        }
        // NCCL 2.4 prints `parent->rank->c0/c1/c2`; later ones `c0/c1/c2->rank->parent`.
        let (children, parent) = match (fields[0].contains('/'), fields[2].contains('/')) {
            (false, true) => (fields[2], fields[0]),
            _ => (fields[0], fields[2]),
        };
        let children: Option<Vec<i64>> = children.split('/').map(num).collect();
        let (Some(children), Some(rank), Some(parent)) = (children, num::<usize>(fields[1]), num::<i64>(parent)) else {
            return false;
        };
        if rank >= MAX_RANKS || parent >= MAX_RANKS as i64 || children.iter().any(|&c| c >= MAX_RANKS as i64) {
            return false;
        }
        let kids = children.into_iter().filter(|&c| c >= 0).map(|c| c as usize).collect();
        let parent = (parent >= 0).then_some(parent as usize);
        log.trees.entry(channel).or_default().insert(rank, (kids, parent));
        any = true;
    }
    any
}

/// The channel a ring or connection line names: `Channel 00/16` (`Ring 00` before 2.8).
fn channel_of(head: &str) -> Option<usize> {
    let head = head.trim();
    let channel = head.strip_prefix("Channel ").or_else(|| head.strip_prefix("Ring "))?;
    channel.split('/').next().and_then(num::<usize>)
}

/// `Channel 00/16 :    0   1   2   3` (`Ring 00 : …` before 2.8)
fn ring_line(log: &mut NcclLog, m: &str) -> bool {
    let Some((head, ranks)) = m.split_once(':') else { return false };
    let Some(channel) = channel_of(head) else { return false };
    let order: Option<Vec<usize>> = ranks.split_whitespace().map(num).collect();
    match order {
        Some(order)
            if channel < MAX_CHANNELS
                && !order.is_empty()
                && order.len() <= MAX_RANKS
                && order.iter().all(|&r| r < MAX_RANKS) =>
        {
            log.rings.insert(channel, order);
            true
        }
        _ => false,
    }
}

/// `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC` (also `[send]`/`[receive]` words).
fn connection_line(log: &mut NcclLog, m: &str) -> bool {
    let Some((head, rest)) = m.split_once(':') else { return false };
    let Some(channel) = channel_of(head) else { return false };
    let Some((pair, via)) = rest.split_once(" via ") else { return false };
    let ends: Vec<&str> = pair.split("->").collect();
    if ends.len() != 2 {
        return false;
    }
    let rank = |s: &str| s.split_whitespace().next().and_then(|w| w.split('[').next()).and_then(num::<usize>);
    match (rank(ends[0]), rank(ends[1])) {
        (Some(from), Some(to)) if from < MAX_RANKS && to < MAX_RANKS => {
            // The net plugin's name may have spaces: `NET/AWS Libfabric/3/GDRDMA`.
            let via = via.trim().to_string();
            log.connections.push(Connection { channel, from, to, via });
            true
        }
        _ => false,
    }
}

/// `Pattern 4, crossNic 0, nChannels 16, bw 40.000000/40.000000, type NVL/PIX, sameChannels 1`
fn pattern_line(log: &mut NcclLog, m: &str) -> bool {
    let field =
        |key: &str| m.split(',').map(str::trim).find_map(|f| f.strip_prefix(key)).map(str::trim).map(str::to_string);
    let pattern = field("Pattern").and_then(|v| num(&v));
    let cross_nic = field("crossNic").and_then(|v| num(&v)).unwrap_or(0);
    let channels = field("nChannels").and_then(|v| num::<usize>(&v));
    let bw = field("bw");
    let ty = field("type");
    let (Some(pattern), Some(channels), Some(bw)) = (pattern, channels, bw) else { return false };
    let Some((intra, inter)) = bw.split_once('/') else { return false };
    let (Some(intra), Some(inter)) = (num::<f64>(intra), num::<f64>(inter)) else { return false };
    if !(intra.is_finite() && inter.is_finite()) || channels > MAX_CHANNELS {
        return false;
    }
    let (type_intra, type_inter) =
        ty.as_deref().and_then(|t| t.split_once('/')).map(|(a, b)| (a.to_string(), b.to_string())).unwrap_or_default();
    log.patterns.push(Pattern {
        pattern,
        cross_nic,
        channels,
        bw_intra_gb_per_s: intra,
        bw_inter_gb_per_s: inter,
        type_intra,
        type_inter,
    });
    true
}

/// `16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer`
fn channels_line(log: &mut NcclLog, m: &str) -> bool {
    let count = |what: &str| m.split(',').map(str::trim).find_map(|f| f.strip_suffix(what).and_then(num::<usize>));
    let coll = count(" coll channels");
    log.coll_channels = coll.filter(|&c| c <= MAX_CHANNELS);
    log.nvls_channels = count(" nvls channels").filter(|&c| c <= MAX_CHANNELS);
    log.collnet_channels = count(" collnet channels").filter(|&c| c <= MAX_CHANNELS);
    log.coll_channels.is_some()
}

/// `NCCL_ALGO set by environment to Ring`
fn env_line(m: &str) -> Option<(String, String)> {
    let (var, value) = m.split_once(" set by environment to ")?;
    let var = var.trim();
    var.starts_with("NCCL_").then(|| (var.to_string(), value.trim().to_string()))
}

/// `AllReduce: 8589934592 Bytes -> Algo 1 proto 2 time 86069.968750` or
/// `AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}`.
fn tuned_line(log: &mut NcclLog, m: &str) -> bool {
    let (collective, rest) = match m.split_once(':') {
        Some((c, r)) if !c.contains(' ') => (c.trim().to_string(), r),
        _ => (String::new(), m),
    };
    let words: Vec<&str> = rest.split_whitespace().collect();
    let bytes = words.first().and_then(|w| num::<u64>(w));
    let after = |key: &str| words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1)).map(|w| w.to_string());
    match (bytes, after("Algo"), after("proto")) {
        (Some(bytes), Some(algo), Some(proto)) => {
            log.tuned.push(TunedCall { collective, bytes, algo, proto });
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_documented_line_reads() {
        let text = "\
h1:100:200 [0] NCCL INFO NCCL version 2.18.3+cuda12.2
h1:100:200 [0] NCCL INFO comm 0x55 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0
h1:100:200 [0] NCCL INFO Channel 00/02 :    0   1   2   3
h1:100:200 [0] NCCL INFO Channel 01/02 :    0   3   2   1
h1:100:200 [0] NCCL INFO Trees [0] 1/2/-1->0->-1 [1] -1/-1/-1->0->1
h1:100:200 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 2, bw 20.000000/12.500000, type NVL/PIX, sameChannels 1
h1:100:200 [0] NCCL INFO 2 coll channels, 0 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
h1:100:200 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
h1:100:200 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0
h1:100:200 [0] NCCL INFO NCCL_ALGO set by environment to Ring
h1:100:200 [0] NCCL INFO AllReduce: 8589934592 Bytes -> Algo 1 proto 2 time 86069.968750
h1:100:200 [0] NCCL INFO something new in a later release
not an NCCL line
h1:100:200 [0] NCCL INFO Channel 00/02 :    0   x
";
        let log = parse(text);
        assert_eq!(log.version.as_deref(), Some("2.18.3+cuda12.2"));
        assert_eq!((log.ranks, log.nodes, log.local_ranks), (Some(4), Some(2), Some(2)));
        assert_eq!(log.rings[&0], vec![0, 1, 2, 3]);
        assert_eq!(log.rings[&1], vec![0, 3, 2, 1]);
        assert_eq!(log.trees[&0][&0], (vec![1, 2], None));
        assert_eq!(log.trees[&1][&0], (vec![], Some(1)));
        assert_eq!(log.patterns[0].channels, 2);
        assert_eq!((log.patterns[0].bw_intra_gb_per_s, log.patterns[0].bw_inter_gb_per_s), (20.0, 12.5));
        assert_eq!(log.coll_channels, Some(2));
        assert_eq!(log.connections.len(), 2);
        assert_eq!(log.connections[1].via, "NET/IB/0");
        assert_eq!(log.env["NCCL_ALGO"], "Ring");
        assert_eq!(
            log.tuned[0],
            TunedCall { collective: "AllReduce".into(), bytes: 8589934592, algo: "1".into(), proto: "2".into() }
        );
        assert_eq!((log.unknown_info_lines, log.other_lines), (1, 1));
        assert_eq!(log.unreadable, vec![14]);
        // Rank 1..3 printed no Trees line: the tree is incomplete, and said so.
        assert!(log.tree(0).unwrap_err().contains("[1, 2, 3]"));
    }

    /// What users paste into issues: an excerpt without a `comm` line yields its rings and
    /// trees, the rank count inferred and said.
    #[test]
    fn an_excerpt_yields_what_it_holds() {
        let log = parse(
            "n1:1:1 [0] NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7\n\
             n1:1:1 [0] NCCL INFO Trees [0] 1/4/-1->0->-1 [1] 1/-1/-1->0->4\n",
        );
        assert_eq!(log.ranks, Some(8));
        assert!(log.ranks_inferred_from.as_deref().is_some_and(|w| w.contains("rings and trees")), "{log:?}");
        assert_eq!(log.rings[&0].len(), 8);
        // Nothing says how many nodes beyond the one host named.
        assert_eq!((log.nodes, log.nodes_from.as_deref()), (Some(1), Some("a guess: the 1 host(s) its lines name")));
        // With no line at all naming ranks, no count is made up.
        assert_eq!(parse("n1:1:1 [0] NCCL INFO Using network IB\n").ranks, None);
    }

    /// Launcher tags, the bare version line, a plugin name with a space, the 2.19+
    /// `ncclCommInitRankConfig … - Init START` without a host prefix, NCCL 2.4's trees,
    /// and the node count from localRanks when only rank 0 introduced itself.
    #[test]
    fn real_world_noise_is_read_through() {
        let text = "\
NCCL version 2.20.5+cuda12.4
[0] node-a:10:10 [0] NCCL INFO comm 0x1 rank 0 nRanks 64 localRanks 4 localRank 0 MNNVL 0
[1,1]<stdout>:node-a:11:11 [1] NCCL INFO Trees [0] 0->1->2/-1/-1
NCCL INFO ncclCommInitRankConfig comm 0x2 rank 5 nranks 64 cudaDev 1 busId 2a000 - Init START
0: node-a:10:10 [0] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [send] via NET/AWS Libfabric/3/GDRDMA
node-a:10:10 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct
";
        let log = parse(text);
        assert_eq!(log.version.as_deref(), Some("2.20.5+cuda12.4"));
        assert_eq!(log.ranks, Some(64));
        assert_eq!(log.rank_info.len(), 1, "the line without a host names no host: {:?}", log.rank_info);
        assert_eq!(log.rank_info[0].host, "node-a");
        assert_eq!((log.nodes, log.nodes_from.as_deref()), (Some(16), Some("64 ranks over localRanks 4")));
        assert_eq!(log.trees[&0][&1], (vec![2], Some(0)), "NCCL 2.4's parent->rank->children");
        assert_eq!(log.connections[0].via, "NET/AWS Libfabric/3/GDRDMA");
        assert_eq!(log.transports(), vec![("NET/AWS Libfabric".to_string(), 1), ("SHM/direct".to_string(), 1)]);
        assert!(log.pcie_inside_nodes().is_some_and(|w| w.contains("host memory")));
        assert!(log.unreadable.is_empty(), "{:?}", log.unreadable);
    }

    /// What older releases print: NCCL 2.3's `rank r nranks n`, the `Ring NN :` orders and
    /// connections of releases before 2.8, NCCL 2.5–2.6's two-halved trees; a timestamp
    /// is no host; a ring naming a rank past the limit does not read.
    #[test]
    fn older_releases_read() {
        let text = "\
host1:1:1 [0] NCCL INFO rank 0 nranks 4
host1:1:1 [0] NCCL INFO Ring 00 :    0   1   2   3
host1:1:1 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC
host1:1:1 [0] NCCL INFO Trees [0] -1/-1/-1->0->1|1->0->-1/-1/-1
2024-05-01 10:59:58 [0] NCCL INFO Channel 01/02 :    0   1   2   3
host1:1:1 [0] NCCL INFO Channel 02/02 :    0   1   99999999
";
        let log = parse(text);
        assert_eq!(log.ranks, Some(4));
        assert_eq!(log.rings[&0], vec![0, 1, 2, 3]);
        assert_eq!(log.rings[&1], vec![0, 1, 2, 3], "the timestamped line is read, under no host");
        assert!(!log.rings.contains_key(&2));
        assert_eq!(log.connections[0].via, "P2P/IPC");
        assert_eq!(log.trees[&0][&0], (vec![], Some(1)));
        assert_eq!(log.hosts.iter().collect::<Vec<_>>(), ["host1"]);
        assert_eq!(log.unreadable, vec![6]);
    }

    /// Nodes by localRanks round up; one GPU per node where every line on several hosts is
    /// device 0; the hosts named, at least two where a connection crosses the network.
    #[test]
    fn nodes_are_counted_or_guessed_and_said() {
        let log = parse("a:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 9 localRanks 4 localRank 0\n");
        assert_eq!(log.nodes, Some(3));
        let log = parse(
            "a:1:1 [0] NCCL INFO Channel 00/01 :    0   1   2   3\n\
             b:1:1 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1\n",
        );
        assert_eq!(log.nodes, Some(4));
        assert!(log.nodes_from.as_deref().is_some_and(|w| w.starts_with("a guess")));
        let log = parse("a:1:1 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [send] via NET/IB/0\n");
        assert_eq!((log.ranks, log.nodes), (Some(5), Some(2)));
    }
}

//! NCCL's tuner as NCCL computes it (`ncclTopoTuneModel`, `ncclTopoGetAlgoTime`,
//! `topoGetAlgoInfo`; docs/sources.md#nccl-tuner): a latency and an
//! algorithm bandwidth per (algorithm, protocol) from the constants of
//! `tuner_constants.rs` and what NCCL's graph search found (channels and the per-channel
//! bandwidth inside a node and across nodes), then for a size the time
//! `lat + bytes / (1000 · bw)` µs of each, the smallest taken, and the channel count it
//! runs on. Every number of the table is printed, so a choice can be explained.

use serde::Serialize;

use crate::error::NcclError;
use crate::tuner_constants::*;

/// NCCL's algorithms, in its index order (log lines print the index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Algo {
    Tree,
    Ring,
    CollNetDirect,
    CollNetChain,
    #[serde(rename = "NVLS")]
    Nvls,
    #[serde(rename = "NVLSTree")]
    NvlsTree,
    #[serde(rename = "PAT")]
    Pat,
}

pub const ALGOS: [Algo; 7] =
    [Algo::Tree, Algo::Ring, Algo::CollNetDirect, Algo::CollNetChain, Algo::Nvls, Algo::NvlsTree, Algo::Pat];

impl Algo {
    pub fn as_str(self) -> &'static str {
        match self {
            Algo::Tree => "Tree",
            Algo::Ring => "Ring",
            Algo::CollNetDirect => "CollNetDirect",
            Algo::CollNetChain => "CollNetChain",
            Algo::Nvls => "NVLS",
            Algo::NvlsTree => "NVLSTree",
            Algo::Pat => "PAT",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The railyard schedule that moves data as this algorithm does (None: no equivalent).
    pub fn railyard_algorithm(self) -> Option<railyard_schedule::Algorithm> {
        use railyard_schedule::Algorithm as A;
        match self {
            // NCCL's rings are rail-aligned channels; its NVLS reduces in the NVSwitch.
            Algo::Ring => Some(A::RailRing),
            Algo::Tree => Some(A::DoubleTree),
            Algo::CollNetDirect => Some(A::InNetwork),
            Algo::CollNetChain => Some(A::InNetworkChain),
            Algo::Nvls => Some(A::Nvls),
            Algo::NvlsTree => Some(A::NvlsTree),
            Algo::Pat => Some(A::Pat),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Proto {
    #[serde(rename = "LL")]
    Ll,
    #[serde(rename = "LL128")]
    Ll128,
    Simple,
}

pub const PROTOS: [Proto; 3] = [Proto::Ll, Proto::Ll128, Proto::Simple];

impl Proto {
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Ll => "LL",
            Proto::Ll128 => "LL128",
            Proto::Simple => "Simple",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The same protocol as railyard's model names it.
    pub fn protocol(self) -> railyard_topology::Protocol {
        match self {
            Proto::Ll => railyard_topology::Protocol::Ll,
            Proto::Ll128 => railyard_topology::Protocol::Ll128,
            Proto::Simple => railyard_topology::Protocol::Simple,
        }
    }
}

/// The collectives NCCL's tuner models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Coll {
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    AllReduce,
}

impl Coll {
    pub fn from_railyard(c: railyard_schedule::Collective) -> Option<Coll> {
        use railyard_schedule::Collective as C;
        match c {
            C::AllReduce => Some(Coll::AllReduce),
            C::AllGather => Some(Coll::AllGather),
            C::ReduceScatter => Some(Coll::ReduceScatter),
            C::Broadcast => Some(Coll::Broadcast),
            C::Reduce => Some(Coll::Reduce),
            _ => None,
        }
    }

    /// Steps of a ring: 2(n−1) for all-reduce, n−1 for all-gather and reduce-scatter, n else.
    fn steps(self, ranks: usize) -> usize {
        match self {
            Coll::AllReduce => 2 * (ranks - 1),
            Coll::AllGather | Coll::ReduceScatter => ranks - 1,
            Coll::Broadcast | Coll::Reduce => ranks,
        }
    }
}

/// GPU generation: picks the rows of the per-channel caps (`compCapIndex`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Arch {
    Volta,
    Ampere,
    Hopper,
    Blackwell,
}

impl std::str::FromStr for Arch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "volta" | "v100" | "sm70" => Ok(Arch::Volta),
            "ampere" | "a100" | "sm80" => Ok(Arch::Ampere),
            "hopper" | "h100" | "h200" | "h800" | "sm90" => Ok(Arch::Hopper),
            "blackwell" | "b200" | "gb200" | "sm100" => Ok(Arch::Blackwell),
            _ => Err(format!("\"{s}\": volta, ampere, hopper or blackwell (or v100, a100, h100, b200)")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Cpu {
    Intel,
    Amd,
    Other,
}

/// What NCCL knows when it tunes: the communicator's shape and what its graph search
/// found. `channels`, `bw_intra` and `bw_inter` are the search's `nChannels` and
/// per-channel GB/s (a log's `Pattern …, nChannels N, bw intra/inter` line).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunerInput {
    pub ranks: usize,
    pub nodes: usize,
    pub arch: Arch,
    pub cpu: Cpu,
    /// The graph's intra-node type is NVLink (else PCI latencies apply).
    pub intra_nvlink: bool,
    pub channels: usize,
    pub bw_intra_gb_per_s: f64,
    pub bw_inter_gb_per_s: f64,
    /// The tree graph's and the NVLS graph's speed inside a node where it is not the
    /// ring's (None: `bw_intra_gb_per_s`). Across nodes a ring's channel runs at one speed
    /// through NVLink and the NICs (`search.cc` sets `bwIntra = bwInter` and raises only a
    /// tree's intra speed, to at most twice), while the NVLS graph is searched on NVLink.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_bw_intra_gb_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvls_bw_intra_gb_per_s: Option<f64>,
    /// The NVLS graph's speed across nodes where it is not the ring's (None:
    /// `bw_inter_gb_per_s`): its own channels share the node's NICs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvls_bw_inter_gb_per_s: Option<f64>,
    /// NVLS channels where NVLink SHARP can run (NVSwitch, Hopper or newer); 0 for none.
    pub nvls_channels: usize,
    /// CollNet (in-network reduction across nodes) enabled.
    pub collnet: bool,
    /// PAT enabled (NCCL's default: one GPU per node).
    pub pat: bool,
    /// LL128 enabled (NCCL enables it where the path types allow; see `default_ll128`).
    pub ll128: bool,
    /// The graph's extra inter-node latency (µs), added once (twice for Simple).
    pub latency_inter_us: f64,
    /// NCCL_ALGO / NCCL_PROTO: the algorithms and protocols allowed (None: all).
    pub algos: Option<Vec<Algo>>,
    pub protos: Option<Vec<Proto>>,
}

/// `NCCL_MAX_NTHREADS`.
const NCCL_MAX_THREADS: usize = 640;

/// Largest shapes accepted: NCCL's own (64 channels; ranks and nodes to 2^20).
pub const MAX_CHANNELS: usize = 64;
pub const MAX_RANKS: usize = 1 << 20;

impl TunerInput {
    /// The intra-node speed per channel of the graph algorithm `a` runs on: NVLS's graph
    /// for NVLS and NVLSTree, the tree's for Tree and CollNet (searched as trees), else
    /// the ring's.
    pub fn intra_of(&self, a: Algo) -> f64 {
        let own = match a {
            Algo::Nvls | Algo::NvlsTree => self.nvls_bw_intra_gb_per_s,
            Algo::Tree | Algo::CollNetDirect | Algo::CollNetChain => self.tree_bw_intra_gb_per_s,
            Algo::Ring | Algo::Pat => None,
        };
        own.unwrap_or(self.bw_intra_gb_per_s)
    }

    fn check(&self) -> Result<(), NcclError> {
        let bad = |field: &str, message: String| Err(NcclError::BadInput { field: field.into(), message });
        if !(2..=MAX_RANKS).contains(&self.ranks) {
            return bad("ranks", format!("{}: 2 to {MAX_RANKS}", self.ranks));
        }
        if self.nodes == 0 || self.nodes > self.ranks || !self.ranks.is_multiple_of(self.nodes) {
            return bad("nodes", format!("{}: 1 to {} and dividing the ranks evenly", self.nodes, self.ranks));
        }
        if !(1..=MAX_CHANNELS).contains(&self.channels) || self.nvls_channels > MAX_CHANNELS {
            return bad("channels", format!("{} (NVLS {}): 1 to {MAX_CHANNELS}", self.channels, self.nvls_channels));
        }
        // bw-inter first: across nodes the intra speed is derived from it.
        for (field, v) in [
            ("bw-inter", self.bw_inter_gb_per_s),
            ("bw-intra", self.bw_intra_gb_per_s),
            ("tree bw-intra", self.tree_bw_intra_gb_per_s.unwrap_or(self.bw_intra_gb_per_s)),
            ("NVLS bw-intra", self.nvls_bw_intra_gb_per_s.unwrap_or(self.bw_intra_gb_per_s)),
            ("NVLS bw-inter", self.nvls_bw_inter_gb_per_s.unwrap_or(self.bw_inter_gb_per_s)),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 10_000.0) {
                return bad(field, format!("{v} GB/s per channel: above 0, at most 10000"));
            }
        }
        if !(self.latency_inter_us.is_finite() && (0.0..=1e6).contains(&self.latency_inter_us)) {
            return bad("latency-inter", format!("{} us: 0 to 1e6", self.latency_inter_us));
        }
        Ok(())
    }

    fn ppn(&self) -> usize {
        self.ranks / self.nodes
    }

    /// The column of the per-node-count tables: 1, 2, 4+ nodes.
    fn nodes_column(&self) -> usize {
        if self.nodes <= 2 {
            self.nodes - 1
        } else {
            2
        }
    }

    fn arch_row(&self) -> usize {
        self.arch as usize
    }
}

/// One cell of NCCL's tuning table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cell {
    pub algo: Algo,
    pub proto: Proto,
    /// Whether NCCL would consider it (modelled for the collective, enabled, allowed).
    pub enabled: bool,
    pub latency_us: f64,
    /// Algorithm bandwidth (what NCCL stores in `bandwidths[coll][a][p]`), GB/s.
    pub algbw_gb_per_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    pub collective: Coll,
    pub cells: Vec<Cell>,
}

fn log2i(n: usize) -> u32 {
    if n == 0 {
        0
    } else {
        usize::BITS - 1 - n.leading_zeros()
    }
}

/// Whether NCCL models (collective, algorithm, protocol) at all (§1.5's last paragraph).
fn modelled(coll: Coll, a: Algo, p: Proto) -> bool {
    let simple_only = matches!(a, Algo::Nvls | Algo::NvlsTree | Algo::Pat | Algo::CollNetDirect | Algo::CollNetChain);
    if simple_only && p != Proto::Simple {
        return false;
    }
    match coll {
        Coll::Broadcast | Coll::Reduce => a == Algo::Ring,
        Coll::AllGather | Coll::ReduceScatter => matches!(a, Algo::Pat | Algo::Ring | Algo::Nvls | Algo::CollNetDirect),
        Coll::AllReduce => a != Algo::Pat,
    }
}

/// NCCL's latency and bandwidth of every (algorithm, protocol) for a collective.
pub fn table(input: &TunerInput, coll: Coll) -> Result<Table, NcclError> {
    input.check()?;
    let (n, nodes, ppn) = (input.ranks, input.nodes, input.ppn());
    let (arch, col) = (input.arch_row(), input.nodes_column());
    let nsteps = coll.steps(n) as f64;
    let ll_max_bw =
        if nodes == 1 { LL_MAX_BW[arch][col] } else { LL_MAX_BW[if input.cpu == Cpu::Amd { 1 } else { 0 }][col] };
    let intra_hw = if input.intra_nvlink { 0 } else { 1 };
    let mut cells = Vec::with_capacity(21);
    for a in ALGOS {
        for p in PROTOS {
            let allowed = input.algos.as_ref().is_none_or(|x| x.contains(&a))
                && input.protos.as_ref().is_none_or(|x| x.contains(&p));
            let available = match a {
                Algo::Nvls => input.nvls_channels >= 2 && (nodes == 1 || input.collnet),
                Algo::NvlsTree => input.nvls_channels >= 2 && nodes > 1,
                Algo::CollNetDirect | Algo::CollNetChain => input.collnet,
                Algo::Pat => input.pat,
                _ => true,
            } && (p != Proto::Ll128 || input.ll128);
            let (a_i, p_i) = (a.index(), p.index());
            let channels = if matches!(a, Algo::Nvls | Algo::NvlsTree) { input.nvls_channels } else { input.channels };
            let ch = channels as f64;
            // NCCL's ncclTopoTuneModel, bandwidth (docs/sources.md#nccl-tuner).
            let intra_of_graph = input.intra_of(a);
            let mut bw = if nodes <= 2 || matches!(a, Algo::CollNetDirect | Algo::CollNetChain) {
                intra_of_graph
            } else {
                input.bw_inter_gb_per_s
            };
            if matches!(a, Algo::Nvls | Algo::NvlsTree) && channels >= 2 {
                let mut intra = intra_of_graph * NVLS_EFFICIENCY[arch] * (ch - 1.0) / ch;
                if coll == Coll::AllReduce {
                    intra *= 2.0;
                } else {
                    intra *= (ppn as f64 - 1.0) / ppn as f64;
                }
                // bwInter of the NVLS graph (on one node the search gives it bwIntra's value).
                let inter = input.nvls_bw_inter_gb_per_s.unwrap_or(input.bw_inter_gb_per_s)
                    * if nodes <= 2 && a == Algo::NvlsTree { 2.0 } else { 1.0 };
                let cap = if a == Algo::NvlsTree { PER_CH_MAX_NVLS_TREE_BW[arch][col] } else { f64::INFINITY };
                bw = intra.min(inter).min(cap);
            }
            let mut bus = ch * bw;
            if a == Algo::Ring && p == Proto::Ll {
                bus = ll_max_bw.min(bus * 0.5);
            }
            if a == Algo::Ring && p == Proto::Ll128 {
                bus = (bus * 0.92).min(ch * PER_CH_MAX_RING_LL128_BW[arch][col]);
            }
            if a == Algo::Tree && coll == Coll::AllReduce {
                bus = (bus * 0.92).min(ch * PER_CH_MAX_TREE_BW[arch][col]);
            }
            if a == Algo::Tree && p == Proto::Ll {
                bus = (bus / 3.8).min(ll_max_bw);
            }
            if a == Algo::Tree && p == Proto::Ll128 {
                let f = if nodes == 1 { 7.0 / 9.0 } else { 120.0 / 128.0 };
                bus = (bus * f).min(ch * PER_CH_MAX_TREE_LL128_BW[arch][col]);
            }
            if a == Algo::Pat {
                bus *= 0.75;
            }
            if a == Algo::CollNetDirect && p == Proto::Simple {
                if matches!(coll, Coll::AllGather | Coll::ReduceScatter) {
                    bus = ppn as f64 * intra_of_graph.min(input.bw_inter_gb_per_s * 0.9);
                } else {
                    let mut factor = ppn as f64 / ch;
                    factor -= (factor - 1.0) / 2.0;
                    bus /= factor;
                    if arch >= Arch::Hopper as usize {
                        bus *= 0.85;
                    }
                }
            }
            // Bus bandwidth to algorithm bandwidth.
            if !(a != Algo::Ring && matches!(coll, Coll::AllGather | Coll::ReduceScatter)) {
                let ratio = if matches!(a, Algo::Ring | Algo::Nvls | Algo::NvlsTree) { n as f64 / nsteps } else { 0.5 };
                bus *= ratio;
            }
            // NCCL's ncclTopoTuneModel, latency (docs/sources.md#nccl-tuner).
            let intra_lat = HW_LATENCY_US[intra_hw][a_i][p_i];
            let mut inter_lat = if ppn == 1 { HW_LATENCY_US[2][0][p_i] } else { HW_LATENCY_US[2][a_i][p_i] };
            inter_lat += input.latency_inter_us;
            if p == Proto::Simple {
                inter_lat += input.latency_inter_us;
            }
            let mut lat = BASE_LATENCY_US[a_i][p_i];
            let per_node = (ppn as f64) - 1.0;
            let log_nodes = log2i(nodes) as f64;
            match a {
                Algo::Ring if matches!(coll, Coll::Broadcast | Coll::Reduce) => {
                    // One hop's latency per step unless every channel shares its path
                    // (taken as shared, NCCL's usual `sameChannels`); Simple uses Tree's value.
                    let hw = if nodes > 1 { 2 } else { intra_hw };
                    let row = if p == Proto::Simple { Algo::Tree.index() } else { a_i };
                    lat += HW_LATENCY_US[hw][row][p_i];
                }
                Algo::Ring => {
                    let overhead = if nodes > 1 {
                        let us = if input.cpu == Cpu::Amd { 2.0 } else { 1.0 };
                        us * if p == Proto::Simple { 3.0 } else { 1.0 }
                    } else {
                        0.0
                    };
                    let intra = intra_lat.max(overhead);
                    let inter_steps = if nodes == 1 {
                        0.0
                    } else if coll == Coll::AllReduce {
                        2.0 * (nodes as f64 - 1.0)
                    } else {
                        nodes as f64 - 1.0
                    };
                    lat += (nsteps - inter_steps) * intra + inter_steps * inter_lat;
                }
                Algo::Tree => {
                    if coll == Coll::AllReduce {
                        lat += 2.0 * (per_node * intra_lat + log_nodes * inter_lat);
                    }
                }
                Algo::CollNetDirect => {
                    lat += 2.0 * (per_node.min(1.0) * intra_lat + per_node * 0.4) + inter_lat;
                }
                Algo::CollNetChain => lat += 2.0 * per_node * intra_lat + inter_lat,
                Algo::Nvls => {
                    lat = intra_lat;
                    if nodes > 1 {
                        lat += inter_lat;
                    }
                }
                Algo::NvlsTree => lat += intra_lat + 2.0 * log_nodes * inter_lat,
                Algo::Pat => lat += log_nodes * (inter_lat / 3.5) + n as f64 * 2.8,
            }
            let enabled = allowed && available && modelled(coll, a, p) && bus > 0.0;
            cells.push(Cell { algo: a, proto: p, enabled, latency_us: lat, algbw_gb_per_s: bus });
        }
    }
    Ok(Table { collective: coll, cells })
}

/// One candidate's predicted time for a size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Candidate {
    pub algo: Algo,
    pub proto: Proto,
    pub latency_us: f64,
    /// The bandwidth used for this size (trees corrected at medium sizes).
    pub algbw_gb_per_s: f64,
    pub time_us: f64,
}

/// NCCL's choice for a size, with every candidate it compared and the channels it runs on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub bytes: u64,
    pub algo: Algo,
    pub proto: Proto,
    pub time_us: f64,
    pub channels: usize,
    pub threads: usize,
    pub candidates: Vec<Candidate>,
}

/// `ncclTopoGetAlgoTime` for every enabled cell, and `topoGetAlgoInfo`'s pick: the
/// smallest time, the first in NCCL's order on a tie. `bytes` is NCCL's `nBytes`: the
/// whole buffer (n × per-rank for all-gather and reduce-scatter).
pub fn choose(input: &TunerInput, table: &Table, bytes: u64) -> Option<Choice> {
    let coll = table.collective;
    let mut candidates = Vec::new();
    for c in table.cells.iter().filter(|c| c.enabled) {
        let mut bw = c.algbw_gb_per_s;
        let mut lat = c.latency_us;
        // NCCL's ncclTopoGetAlgoTime (docs/sources.md#nccl-tuner).
        let log_size = log2i((bytes >> 6) as usize) as usize;
        if c.algo == Algo::Tree && coll == Coll::AllReduce && bytes >> 6 > 0 && log_size < 23 {
            bw *= TREE_CORRECTION[c.proto.index()][log_size];
        }
        if c.algo == Algo::NvlsTree
            && coll == Coll::AllReduce
            && bytes >> 6 > 0
            && log_size < 24
            && input.arch == Arch::Blackwell
        {
            bw *= TREE_CORRECTION[c.proto.index()][log_size];
        }
        if c.algo == Algo::Ring
            && c.proto == Proto::Simple
            && input.nodes > 1
            && coll == Coll::AllReduce
            && bytes / (input.channels * input.ranks) as u64 >= 64
        {
            lat *= if input.arch < Arch::Ampere { 1.9 } else { 1.4 };
        }
        let time_us = lat + bytes as f64 / (1000.0 * bw);
        candidates.push(Candidate { algo: c.algo, proto: c.proto, latency_us: lat, algbw_gb_per_s: bw, time_us });
    }
    let best = candidates.iter().fold(None::<&Candidate>, |best, c| match best {
        Some(b) if c.time_us >= b.time_us => Some(b),
        _ => Some(c),
    })?;
    let (channels, threads) = channels_and_threads(input, best.algo, best.proto, bytes);
    Some(Choice {
        bytes,
        algo: best.algo,
        proto: best.proto,
        time_us: best.time_us,
        channels,
        threads,
        candidates: candidates.clone(),
    })
}

/// `topoGetAlgoInfo`'s channel and thread counts: fewer channels, then fewer threads,
/// while the size is below channels × threads × the per-thread threshold (§1.8).
fn channels_and_threads(input: &TunerInput, a: Algo, p: Proto, bytes: u64) -> (usize, usize) {
    let mut nc = if matches!(a, Algo::Nvls | Algo::NvlsTree) { input.nvls_channels } else { input.channels };
    let mut nt = MAX_THREADS[a.index()][p.index()];
    if matches!(a, Algo::Ring | Algo::Tree) {
        let mut threshold = THREAD_THRESHOLD[p.index()];
        if a == Algo::Ring && p == Proto::Ll {
            threshold *= input.ranks;
        }
        if matches!(a, Algo::CollNetDirect | Algo::CollNetChain) && p == Proto::Simple {
            threshold = COLLNET_SIMPLE_THREAD_THRESHOLD;
        }
        let below = |nc: usize, nt: usize| (bytes as u128) < (nc * nt * threshold) as u128;
        while below(nc, nt) && nc >= 2 {
            nc -= 1;
        }
        while below(nc, nt) && nt.is_multiple_of(128) {
            nt /= 2;
        }
        if p == Proto::Simple {
            nt += if a == Algo::Ring { 32 } else { 128 };
        }
        // Trees always run NCCL_MAX_NTHREADS (§1.8).
        if a == Algo::Tree {
            nt = NCCL_MAX_THREADS;
        }
    }
    (nc, nt)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One H100 node: 8 GPUs on NVSwitch; 16 channels of 20.6 GB/s (not from a log: a
    /// round shape for the arithmetic below).
    fn one_node() -> TunerInput {
        TunerInput {
            ranks: 8,
            nodes: 1,
            arch: Arch::Hopper,
            cpu: Cpu::Intel,
            intra_nvlink: true,
            channels: 16,
            bw_intra_gb_per_s: 20.0,
            bw_inter_gb_per_s: 20.0,
            tree_bw_intra_gb_per_s: None,
            nvls_bw_intra_gb_per_s: None,
            nvls_bw_inter_gb_per_s: None,
            nvls_channels: 0,
            collnet: false,
            pat: false,
            ll128: true,
            latency_inter_us: 0.0,
            algos: None,
            protos: None,
        }
    }

    fn cell(t: &Table, a: Algo, p: Proto) -> Cell {
        *t.cells.iter().find(|c| c.algo == a && c.proto == p).unwrap()
    }

    /// Single-node latencies worked by hand from ncclTopoTuneModel's formula: Ring LL 6.6+14×0.6 = 15.0,
    /// LL128 14.0+14×1.9 = 40.6, Simple 8.4+14×3.4 = 56.0; Tree LL 6.8+2×7×0.6 = 15.2,
    /// LL128 14+2×7×1.25 = 31.5, Simple 8.4+2×7×4 = 64.4; NVLS Simple 25.
    #[test]
    fn single_node_latencies_match_the_worked_values() {
        let mut input = one_node();
        input.nvls_channels = 16;
        let t = table(&input, Coll::AllReduce).unwrap();
        let lat = |a, p| (cell(&t, a, p).latency_us * 100.0).round() / 100.0;
        assert_eq!(
            [lat(Algo::Ring, Proto::Ll), lat(Algo::Ring, Proto::Ll128), lat(Algo::Ring, Proto::Simple)],
            [15.0, 40.6, 56.0]
        );
        assert_eq!(
            [lat(Algo::Tree, Proto::Ll), lat(Algo::Tree, Proto::Ll128), lat(Algo::Tree, Proto::Simple)],
            [15.2, 31.5, 64.4]
        );
        assert_eq!(lat(Algo::Nvls, Proto::Simple), 25.0);
    }

    /// Bandwidths of the same node, by hand: 16 channels × 20 GB/s = 320 GB/s bus.
    /// Ring Simple: 320 × 8/14 = 182.857 algbw. Ring LL: min(141, 160) = 141 bus → 80.571.
    /// Ring LL128: min(320 × 0.92 = 294.4, 16 × 36.7 = 587.2) = 294.4 → 168.229.
    /// Tree Simple: min(294.4, 16 × 38.7 = 619.2) = 294.4, × 0.5 = 147.2.
    /// Tree LL: 294.4 / 3.8 = 77.474 (under 141), × 0.5 = 38.737.
    /// Tree LL128: min(294.4 × 7/9 = 228.978, 587.2) × 0.5 = 114.489.
    #[test]
    fn single_node_bandwidths_match_the_hand_computation() {
        let t = table(&one_node(), Coll::AllReduce).unwrap();
        let bw = |a, p| (cell(&t, a, p).algbw_gb_per_s * 1000.0).round() / 1000.0;
        assert_eq!(bw(Algo::Ring, Proto::Simple), 182.857);
        assert_eq!(bw(Algo::Ring, Proto::Ll), 80.571);
        assert_eq!(bw(Algo::Ring, Proto::Ll128), 168.229);
        assert_eq!(bw(Algo::Tree, Proto::Simple), 147.2);
        assert_eq!(bw(Algo::Tree, Proto::Ll), 38.737);
        assert_eq!(bw(Algo::Tree, Proto::Ll128), 114.489);
    }

    /// The choice on one node, by hand from the two tests above (time = lat + bytes/(1000·bw)):
    /// 8 KiB: Ring LL 15.0 + 8192/80571 = 15.10; Tree LL 15.2 + 8192/(38737 × 0.7 [corr. 2^7]) = 15.50 → Ring LL.
    /// 1 MiB: Ring LL128 40.6 + 1048576/168229 = 46.83; Ring LL 15.0 + 13.01 = 28.01;
    ///        Ring Simple 56 + 5.73 = 61.7; Tree LL128 31.5 + 1048576/(114489 × 0.6) = 46.76 → Ring LL.
    /// 64 MiB: Ring Simple 56 + 67108864/182857 = 423.0; Ring LL128 40.6 + 398.9 = 439.5;
    ///         Tree Simple 64.4 + 67108864/(147200 × 0.8 [corr. 2^20]) = 634.3 → Ring Simple.
    #[test]
    fn single_node_choices_by_hand() {
        let input = one_node();
        let t = table(&input, Coll::AllReduce).unwrap();
        let pick = |bytes| {
            let c = choose(&input, &t, bytes).unwrap();
            (c.algo, c.proto)
        };
        assert_eq!(pick(8 << 10), (Algo::Ring, Proto::Ll));
        assert_eq!(pick(1 << 20), (Algo::Ring, Proto::Ll));
        assert_eq!(pick(64 << 20), (Algo::Ring, Proto::Simple));
        let c = choose(&input, &t, 64 << 20).unwrap();
        assert!((c.time_us - (56.0 + 67108864.0 / 182857.142857)).abs() < 1e-3, "{}", c.time_us);
    }

    #[test]
    fn restrictions_and_bad_shapes() {
        let mut input = one_node();
        input.algos = Some(vec![Algo::Tree]);
        let t = table(&input, Coll::AllReduce).unwrap();
        assert_eq!(choose(&input, &t, 64 << 20).unwrap().algo, Algo::Tree);
        // Broadcast is modelled for Ring only: nothing left.
        assert!(choose(&input, &table(&input, Coll::Broadcast).unwrap(), 1 << 20).is_none());
        input.algos = None;
        input.nodes = 3;
        assert!(table(&input, Coll::AllReduce).is_err());
        input.nodes = 1;
        input.channels = 0;
        assert!(table(&input, Coll::AllReduce).is_err());
    }

    #[test]
    fn small_sizes_use_fewer_channels() {
        let input = one_node();
        let t = table(&input, Coll::AllReduce).unwrap();
        let small = choose(&input, &t, 8 << 10).unwrap();
        // Ring LL: threshold 8 × 8 ranks = 64 B per thread; 8192 < nc × 512 × 64 down to nc = 1,
        // then threads halve while 8192 < 1 × nt × 64 and nt is a multiple of 128: 512 → 256 → 128.
        assert_eq!((small.channels, small.threads), (1, 128));
        assert_eq!(choose(&input, &t, 1 << 30).unwrap().channels, 16);
    }
}

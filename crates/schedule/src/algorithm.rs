//! The catalogue of algorithms: one name per generator, so the model, the simulator,
//! the runtime and the CLI all ask for schedules the same way.

use std::fmt;
use std::str::FromStr;

use crate::collective::Collective;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Ring in rank order (or a given order): the seed's contiguous ring; k channels with `channels`.
    Ring,
    /// Ring alternating servers: 0, 8, 1, 9, ... (seed 001 §7.2.1).
    InterleavedRing,
    /// NCCL's rings on a rail-optimized cluster: a channel per local rank (or as asked),
    /// each crossing servers on one rail, so the channels use every NIC (`rail_ring.rs`).
    RailRing,
    /// Pipelined chain from (broadcast) or to (reduce) the root.
    Chain,
    /// One binary tree, pipelined.
    Tree,
    /// NCCL's double binary tree: two complementary trees, half of the data each.
    DoubleTree,
    /// Recursive halving-doubling, with Rabenseifner's folding for non-powers of two.
    Rhd,
    /// Recursive doubling all-reduce: log2 P rounds of whole-vector exchanges (small messages).
    RecursiveDoubling,
    /// Bruck: all-gather, all-to-all, barrier in ⌈log2 P⌉ rounds.
    Bruck,
    /// NCCL's PAT: all-gather and reduce-scatter in ⌈log2 P⌉ aggregated rounds, what NCCL
    /// runs at one rank per node (`pat.rs`).
    Pat,
    /// Pairwise-exchange all-to-all: P − 1 rounds.
    Pairwise,
    /// Everyone sends straight to its destinations.
    Direct,
    /// Intra-server and inter-server stages (all-reduce, reduce-scatter, all-gather, all-to-all).
    Hierarchical,
    /// Hierarchical all-reduce with the inter-server stage done by the switches (SHARP / NVLS).
    InNetwork,
    /// NCCL's NVLS: the hierarchical all-reduce with each server's stages done in its
    /// NVSwitch (reduce-scatter by `multimem.ld_reduce`, all-gather by multicast), the
    /// shards crossing servers by the inter-server stage asked (ring by default; NVLS
    /// with SHARP in the network switches).
    Nvls,
    /// NCCL's NVLSTree: NVLS inside each server, the shards crossing servers by NCCL's
    /// double binary tree (`InterStage::Tree`) — what NCCL runs on several NVSwitch
    /// servers without in-network reduction (NCCL's `ncclTopoTuneModel`, src/graph/tuning.cc:
    /// NVLS across nodes needs CollNet; docs/sources.md#nccl-tuner).
    NvlsTree,
    /// NCCL's CollNet Chain: in each server a chain per local rank, shard j climbing to
    /// local rank j with the server's sum, which joins the switches' in-network reduction
    /// (SHARP) and brings the result back down; chunks stream through the chains' hops
    /// (`IntraStage::Chain`).
    InNetworkChain,
}

impl Algorithm {
    pub const ALL: [Algorithm; 17] = [
        Algorithm::Ring,
        Algorithm::InterleavedRing,
        Algorithm::Chain,
        Algorithm::Tree,
        Algorithm::DoubleTree,
        Algorithm::Rhd,
        Algorithm::RecursiveDoubling,
        Algorithm::Bruck,
        Algorithm::Pairwise,
        Algorithm::Direct,
        Algorithm::Hierarchical,
        Algorithm::InNetwork,
        Algorithm::Nvls,
        Algorithm::NvlsTree,
        Algorithm::RailRing,
        Algorithm::Pat,
        Algorithm::InNetworkChain,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::InterleavedRing => "interleaved-ring",
            Algorithm::RailRing => "rail-ring",
            Algorithm::Chain => "chain",
            Algorithm::Tree => "tree",
            Algorithm::DoubleTree => "double-tree",
            Algorithm::Rhd => "rhd",
            Algorithm::RecursiveDoubling => "recursive-doubling",
            Algorithm::Bruck => "bruck",
            Algorithm::Pat => "pat",
            Algorithm::Pairwise => "pairwise",
            Algorithm::Direct => "direct",
            Algorithm::Hierarchical => "hierarchical",
            Algorithm::InNetwork => "in-network",
            Algorithm::Nvls => "nvls",
            Algorithm::NvlsTree => "nvls-tree",
            Algorithm::InNetworkChain => "in-network-chain",
        }
    }

    /// Whether a generator exists for this collective (it may still refuse some rank
    /// counts, e.g. rhd reduce-scatter for a non-power of two, with a clear error).
    pub fn supports(self, c: Collective) -> bool {
        use Collective::*;
        match self {
            Algorithm::Ring | Algorithm::InterleavedRing | Algorithm::RailRing => {
                matches!(c, AllReduce | ReduceScatter | AllGather)
            }
            Algorithm::Chain => matches!(c, Broadcast | Reduce),
            Algorithm::Tree => matches!(c, AllReduce | Broadcast | Reduce),
            Algorithm::DoubleTree
            | Algorithm::InNetwork
            | Algorithm::InNetworkChain
            | Algorithm::Nvls
            | Algorithm::NvlsTree => c == AllReduce,
            Algorithm::Rhd => matches!(c, AllReduce | ReduceScatter | AllGather),
            Algorithm::RecursiveDoubling => c == AllReduce,
            Algorithm::Bruck => matches!(c, AllGather | AllToAll | AllToAllv | Barrier),
            Algorithm::Pat => matches!(c, AllGather | ReduceScatter),
            Algorithm::Pairwise => matches!(c, AllToAll | AllToAllv),
            Algorithm::Direct => c != AllReduce,
            Algorithm::Hierarchical => matches!(c, AllReduce | ReduceScatter | AllGather | AllToAll | AllToAllv),
        }
    }

    /// Whether the algorithm runs on parallel rings (`channels`).
    pub fn uses_channels(self) -> bool {
        matches!(self, Algorithm::Ring | Algorithm::InterleavedRing | Algorithm::RailRing)
    }

    /// Whether the algorithm follows a given rank order (`GenOptions::order`).
    pub fn uses_order(self) -> bool {
        matches!(self, Algorithm::Ring | Algorithm::Chain)
    }

    /// Whether the algorithm follows given server groups (`GenOptions::groups`).
    pub fn uses_groups(self) -> bool {
        matches!(
            self,
            Algorithm::InterleavedRing
                | Algorithm::RailRing
                | Algorithm::Hierarchical
                | Algorithm::InNetwork
                | Algorithm::InNetworkChain
                | Algorithm::Nvls
                | Algorithm::NvlsTree
        )
    }

    /// Whether the algorithm crosses servers by the inter-server stage asked
    /// (`GenOptions::inter_stage`): the hierarchical all-reduce and NVLS.
    pub fn uses_inter_stage(self) -> bool {
        matches!(self, Algorithm::Hierarchical | Algorithm::Nvls)
    }

    /// Whether switches reduce (in-network steps: SHARP, NVLS): hosts cannot run it, and a
    /// topology without a reducing switch cannot either.
    pub fn in_switch(self) -> bool {
        matches!(self, Algorithm::InNetwork | Algorithm::InNetworkChain | Algorithm::Nvls | Algorithm::NvlsTree)
    }

    /// Whether the algorithm cuts the message into pipelined chunks (`pipeline_chunks`).
    pub fn pipelined(self) -> bool {
        matches!(self, Algorithm::Chain | Algorithm::Tree | Algorithm::DoubleTree)
    }

    /// Whether its schedule of `collective` is cut into pipelined chunks: chain and trees
    /// always, the hierarchical all-reduces (their stages overlap chunk by chunk); the
    /// hierarchical reduce-scatter, all-gather and all-to-all are one piece whatever the
    /// chunk count asked.
    pub fn takes_chunks(self, collective: crate::Collective) -> bool {
        self.pipelined()
            || collective == crate::Collective::AllReduce
                && matches!(
                    self,
                    Algorithm::Hierarchical
                        | Algorithm::InNetwork
                        | Algorithm::InNetworkChain
                        | Algorithm::Nvls
                        | Algorithm::NvlsTree
                )
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Algorithm {
    /// A comma-separated list, or `all`/`auto` (every algorithm that runs `collective`).
    /// The flag says whether the list was named (an algorithm that cannot run is then an
    /// error rather than skipped).
    pub fn parse_list(text: &str, collective: crate::Collective) -> Result<(Vec<Algorithm>, bool), String> {
        if text == "all" || text == "auto" {
            return Ok((Algorithm::ALL.into_iter().filter(|a| a.supports(collective)).collect(), false));
        }
        let names: Vec<&str> = text.split(',').map(str::trim).collect();
        if let Some(word) = names.iter().find(|n| matches!(**n, "all" | "auto")) {
            return Err(format!(
                "\"{word}\" means every algorithm and stands alone; list algorithms by name instead (\"{text}\")"
            ));
        }
        let list = names.iter().map(|s| s.parse::<Algorithm>()).collect::<Result<Vec<_>, _>>()?;
        if list.is_empty() {
            return Err("the algorithm list is empty".into());
        }
        Ok((list, true))
    }
}

impl FromStr for Algorithm {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Algorithm::ALL.into_iter().find(|a| a.as_str() == text).ok_or_else(|| {
            let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.as_str()).collect();
            format!("unknown algorithm \"{text}\" (expected one of {})", names.join(", "))
        })
    }
}

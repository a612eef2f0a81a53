//! NCCL's algorithms as railyard schedules: what a run that does not force one
//! (`NCCL_ALGO`) chooses among, so a prediction of NCCL-class software weighs the same
//! schedules NCCL would (docs/sources.md#nccl-tuner: Ring, Tree, NVLS, NVLSTree, CollNet per
//! collective).

use railyard_schedule::{Algorithm, Collective, InterStage};
use railyard_topology::{Placement, Topology};

/// How a run's ranks spread over servers: what decides which of NCCL's algorithms run
/// and which schedule stands for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    pub servers: usize,
    pub ranks: usize,
}

impl Spread {
    pub fn of(topology: &Topology, placement: &Placement) -> Self {
        Spread { servers: placement.ranks_by_server(topology).len(), ranks: placement.len() }
    }

    /// Every rank on a server of its own (where NCCL runs PAT: its default
    /// `ncclPatEnable`, one GPU per node).
    pub fn one_per_server(self) -> bool {
        self.servers > 1 && self.servers == self.ranks
    }
}

/// How NCCL's trees cross servers — Tree and NVLSTree by a double binary tree
/// (`ncclTopoTuneModel`'s latency `2 * log2i(nNodes) * interLat`) — so the hierarchical
/// all-reduce that stands for NCCL's Tree crosses by `InterStage::Tree` in a request for
/// NCCL's algorithms, not by the ring railyard's own uses. (Where none of `algorithms`
/// has an inter-server stage, as for other collectives, there is nothing to set.)
pub fn nccl_inter_stage(collective: Collective, algorithms: &[Algorithm]) -> InterStage {
    match collective == Collective::AllReduce && algorithms.iter().any(|a| a.uses_inter_stage()) {
        true => InterStage::Tree,
        false => InterStage::Ring,
    }
}

/// NCCL's algorithms for `collective` over a run's ranks spread over servers (CollNet
/// Direct and Chain as `in-network` and `in-network-chain`).
/// All-gather and reduce-scatter by NVLS, and all-reduce by NCCL's single tree, have no
/// schedule of their own here: the rail-aligned rings and the double tree stand for
/// them. NVLS across servers needs in-network reduction (CollNet) in NCCL, which
/// `in-network` stands for; without it NCCL crosses servers by NVLSTree's tree
/// (NCCL's enable rules, src/graph/tuning.cc: NVLS on several nodes needs CollNet), so on
/// several servers NVLS is `nvls-tree`, and on one the two are the same. PAT runs
/// all-gather and reduce-scatter where every rank has a server of its own (NCCL's
/// default `ncclPatEnable`: one GPU per node).
pub fn nccl_algorithms(collective: Collective, spread: Spread) -> Vec<Algorithm> {
    use Algorithm::*;
    let nvls = if spread.servers > 1 { NvlsTree } else { Nvls };
    match collective {
        Collective::AllReduce => vec![RailRing, DoubleTree, Hierarchical, nvls, InNetwork, InNetworkChain],
        Collective::AllGather | Collective::ReduceScatter if spread.one_per_server() => vec![RailRing, Pat],
        Collective::AllGather | Collective::ReduceScatter => vec![RailRing],
        Collective::Broadcast | Collective::Reduce => vec![Chain],
        _ => vec![Direct],
    }
}

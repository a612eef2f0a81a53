//! NCCL's algorithms as railyard schedules: what a run that does not force one
//! (`NCCL_ALGO`) chooses among, so a prediction of NCCL-class software weighs the same
//! schedules NCCL would (nccl-facts.md: Ring, Tree, NVLS, CollNet per collective).

use railyard_schedule::{Algorithm, Collective};

/// NCCL's algorithms for `collective`. All-gather and reduce-scatter by NVLS or PAT,
/// and all-reduce by NCCL's single tree, have no schedule of their own here: the
/// rail-aligned rings and the double tree stand for them.
pub fn nccl_algorithms(collective: Collective) -> Vec<Algorithm> {
    use Algorithm::*;
    match collective {
        Collective::AllReduce => vec![RailRing, DoubleTree, Hierarchical, Nvls, InNetwork],
        Collective::AllGather | Collective::ReduceScatter => vec![RailRing],
        Collective::Broadcast | Collective::Reduce => vec![Chain],
        _ => vec![Direct],
    }
}

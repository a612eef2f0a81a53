//! Hierarchical all-reduce (seed 001 §7.2.1, 例題 7.2): each server's L ranks do a ring
//! reduce-scatter, so local rank j holds the server's reduction of shard j; the S ranks
//! holding shard j (one per server) all-reduce it across servers — as a ring over the
//! S servers, or as one in-network reduction (SHARP / NVLS); each server then does a
//! ring all-gather. Group g's rank j pairs with every other group's rank j, so the
//! order inside the groups decides the pairing (§7.2.5: i <-> i+8 stays on one rail,
//! i <-> i+9 crosses the spines).

use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::error::ScheduleError;
use crate::ir::{merge_parallel, with_shard, Buffer, InNetwork, LocalOp, Op, Region, Schedule, ScheduleBuilder, Step};
use crate::partition::partition;
use crate::ring::{all_gather_steps, all_reduce_steps, check_order, reduce_scatter_steps};

/// How the shards cross servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterStage {
    /// A ring all-reduce over the S ranks holding a shard: 2(S−1) rounds.
    Ring,
    /// One in-network reduction: each rank sends its shard once and receives the result once.
    InNetwork,
}

/// Check that `groups` are equal-sized and together list every rank once.
pub fn check_groups(groups: &[Vec<Rank>], ranks: usize) -> Result<(), ScheduleError> {
    let Some(first) = groups.first() else {
        return Err(ScheduleError::BadGroups { message: "no groups".into() });
    };
    if let Some(g) = groups.iter().find(|g| g.len() != first.len()) {
        return Err(ScheduleError::BadGroups {
            message: format!(
                "hierarchical algorithms need the same number of ranks in every server (found {} and {})",
                first.len(),
                g.len()
            ),
        });
    }
    let flat: Vec<Rank> = groups.concat();
    check_order(&flat, ranks).map_err(|e| ScheduleError::BadGroups { message: e.to_string() })
}

/// Hierarchical all-reduce over `groups` (one group per server, equal sizes).
pub fn hierarchical_all_reduce(
    spec: CollectiveSpec,
    groups: &[Vec<Rank>],
    inter: InterStage,
    elem_bytes: u64,
    algorithm: &str,
) -> Result<Schedule, ScheduleError> {
    if spec.collective != Collective::AllReduce {
        return Err(ScheduleError::Unsupported {
            algorithm: algorithm.to_string(),
            collective: spec.collective.as_str(),
        });
    }
    check_groups(groups, spec.ranks)?;
    let local = groups[0].len();
    let shards = partition(spec.count, local);
    let mut b = ScheduleBuilder::new(spec, algorithm, elem_bytes);
    for r in 0..spec.ranks {
        b.prologue(LocalOp {
            rank: r,
            read: Region::new(Buffer::Input, 0..spec.count),
            write: Region::new(Buffer::Output, 0..spec.count),
            op: Op::Copy,
        });
    }
    let intra_rs = merge_parallel(groups.iter().map(|g| reduce_scatter_steps(g, &shards, Buffer::Output)).collect());
    b.phase("intra-server reduce-scatter", intra_rs);
    // The ranks holding shard j, one per server.
    let holders: Vec<Vec<Rank>> = (0..local).map(|j| groups.iter().map(|g| g[j]).collect()).collect();
    match inter {
        InterStage::Ring => {
            let (rs, ag): (Vec<_>, Vec<_>) = holders
                .iter()
                .zip(&shards)
                .enumerate()
                .map(|(j, (ranks, shard))| {
                    let (rs, ag) = all_reduce_steps(ranks, shard.clone(), Buffer::Output);
                    (with_shard(rs, j as u32), with_shard(ag, j as u32))
                })
                .unzip();
            let mut steps = merge_parallel(rs);
            steps.extend(merge_parallel(ag));
            b.phase("inter-server all-reduce", steps);
        }
        InterStage::InNetwork => {
            let step = Step {
                transfers: Vec::new(),
                in_network: holders
                    .iter()
                    .zip(&shards)
                    .enumerate()
                    .filter(|(_, (ranks, _))| ranks.len() > 1)
                    .map(|(j, (ranks, shard))| {
                        let region = Region::new(Buffer::Output, shard.clone());
                        InNetwork { ranks: ranks.clone(), read: region, write: region, shard: Some(j as u32) }
                    })
                    .collect(),
            };
            b.phase("inter-server in-network all-reduce", vec![step]);
        }
    }
    let intra_ag = merge_parallel(groups.iter().map(|g| all_gather_steps(g, &shards, Buffer::Output)).collect());
    b.phase("intra-server all-gather", intra_ag);
    Ok(b.build())
}

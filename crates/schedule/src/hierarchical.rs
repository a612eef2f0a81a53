//! Hierarchical collectives.
//!
//! All-reduce (seed 001 §7.2.1, 例題 7.2): each server's L ranks do a ring
//! reduce-scatter, so local rank j holds the server's reduction of shard j; the S ranks
//! holding shard j (one per server) all-reduce it across servers — as a ring over the
//! S servers, or as one in-network reduction (SHARP / NVLS); each server then does a
//! ring all-gather. Group g's rank j pairs with every other group's rank j, so the
//! order inside the groups decides the pairing (§7.2.5: i <-> i+8 stays on one rail,
//! i <-> i+9 crosses the spines).
//!
//! Reduce-scatter: intra-server first (local rank j reduces the server's contributions
//! to every chunk held by a local-rank-j rank anywhere), then an inter-server ring per
//! local index. All-gather: inter-server first (each rank exchanges only its own chunk
//! with the same local index elsewhere), then intra-server. Either way every byte
//! crosses servers once. All-to-all (seed 000 §8.7.4): intra-server first — a block
//! for rank (h, j) goes to the local rank j, which then sends all its server's blocks
//! for server h to (h, j) — so cross-server traffic is aggregated per rail.

use std::ops::Range;
use std::sync::Arc;

use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::{CompactSchedule, SequenceRounds};
use crate::direct::AllToAllBlocks;
use crate::error::ScheduleError;
use crate::ir::{Buffer, InNetwork, LocalOp, Op, Region, ScheduleBuilder, Step, Transfer};
use crate::partition::{partition, partition_range};
use crate::ring::{
    all_gather_buffers, check_order, copy, reduce_scatter_buffers, single_blocks, Block, RingRounds, RingStage,
};

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
    spec: &CollectiveSpec,
    groups: &[Vec<Rank>],
    inter: InterStage,
    elem_bytes: u64,
    algorithm: &str,
) -> Result<CompactSchedule, ScheduleError> {
    if spec.collective != Collective::AllReduce {
        return Err(ScheduleError::Unsupported {
            algorithm: algorithm.to_string(),
            collective: spec.collective.as_str(),
        });
    }
    check_groups(groups, spec.ranks)?;
    let local = groups[0].len();
    let shards = partition(spec.count, local);
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    let shard_blocks = single_blocks(shards.clone());
    for r in 0..spec.ranks {
        b.prologue(LocalOp {
            rank: r,
            read: Region::new(Buffer::Input, 0..spec.count),
            write: Region::new(Buffer::Output, 0..spec.count),
            op: Op::Copy,
        });
    }
    b.rounds("intra-server reduce-scatter", per_server(groups, &shard_blocks, Buffer::Output, Op::Reduce));
    // The ranks holding shard j, one per server.
    let holders: Vec<Vec<Rank>> = (0..local).map(|j| groups.iter().map(|g| g[j]).collect()).collect();
    match inter {
        InterStage::Ring => {
            // Shard j all-reduced by a ring over its holders, each holding one block of it.
            let (mut rs, mut ag) = (RingRounds::default(), RingRounds::default());
            for (j, (ranks, shard)) in holders.iter().zip(&shards).enumerate() {
                let blocks = single_blocks(partition_range(shard.clone(), ranks.len()));
                rs.add(ranks, blocks.clone(), RingStage::new(Op::Reduce, Buffer::Output).of_shard(j as u32));
                ag.add(ranks, blocks, RingStage::new(Op::Copy, Buffer::Output).of_shard(j as u32));
            }
            b.rounds("inter-server all-reduce", SequenceRounds(vec![Box::new(rs), Box::new(ag)]));
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
                local: Vec::new(),
            };
            b.phase("inter-server in-network all-reduce", vec![step]);
        }
    }
    b.rounds("intra-server all-gather", per_server(groups, &shard_blocks, Buffer::Output, Op::Copy));
    Ok(b.build_compact())
}

/// A ring reduce-scatter (`Op::Reduce`) or all-gather (`Op::Copy`) inside every server
/// at once, each over the same blocks by local position.
fn per_server(groups: &[Vec<Rank>], blocks: &Arc<[Block]>, buffer: Buffer, op: Op) -> RingRounds {
    let mut rounds = RingRounds::default();
    for g in groups {
        rounds.add(g, blocks.clone(), RingStage::new(op, buffer));
    }
    rounds
}

/// Hierarchical reduce-scatter, all-gather or all-to-all over `groups`.
pub fn hierarchical(
    spec: &CollectiveSpec,
    groups: &[Vec<Rank>],
    elem_bytes: u64,
    algorithm: &str,
) -> Result<CompactSchedule, ScheduleError> {
    check_groups(groups, spec.ranks)?;
    let parts = spec.parts();
    let local = groups[0].len();
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    // Block of local index j: the chunks of every rank with local index j.
    let local_blocks: Arc<[Block]> = (0..local).map(|j| groups.iter().map(|g| parts[g[j]].clone()).collect()).collect();
    // A ring per local index j over the ranks with that index, each block its own chunk.
    let inter_server = |buffer: Buffer, op: Op| {
        let mut rounds = RingRounds::default();
        for j in 0..local {
            let ranks: Vec<Rank> = groups.iter().map(|g| g[j]).collect();
            let blocks = single_blocks(ranks.iter().map(|&r| parts[r].clone()).collect());
            rounds.add(&ranks, blocks, RingStage::new(op, buffer).of_shard(j as u32));
        }
        rounds
    };
    match spec.collective {
        Collective::ReduceScatter => {
            reduce_scatter_buffers(&mut b, spec.count, &parts);
            b.rounds("intra-server reduce-scatter", per_server(groups, &local_blocks, Buffer::Scratch, Op::Reduce));
            b.rounds("inter-server reduce-scatter", inter_server(Buffer::Scratch, Op::Reduce));
        }
        Collective::AllGather => {
            all_gather_buffers(&mut b, &parts);
            b.rounds("inter-server all-gather", inter_server(Buffer::Output, Op::Copy));
            b.rounds("intra-server all-gather", per_server(groups, &local_blocks, Buffer::Output, Op::Copy));
        }
        Collective::AllToAll | Collective::AllToAllv => all_to_all(spec, groups, &mut b),
        other => {
            return Err(ScheduleError::Unsupported { algorithm: algorithm.to_string(), collective: other.as_str() })
        }
    }
    Ok(b.build_compact())
}

fn all_to_all(spec: &CollectiveSpec, groups: &[Vec<Rank>], b: &mut ScheduleBuilder) {
    let position = |r: Rank| -> (usize, usize) {
        groups
            .iter()
            .enumerate()
            .find_map(|(g, ranks)| ranks.iter().position(|&x| x == r).map(|j| (g, j)))
            .unwrap_or((0, 0))
    };
    let blocks = AllToAllBlocks::new(spec);
    let send = |s: Rank, d: Rank| blocks.block(s, d).0;
    let recv = |s: Rank, d: Rank| blocks.block(s, d).1;
    let mut scratch_used = vec![0u64; spec.ranks];
    let (mut intra, mut inter) = (Step::default(), Step::default());
    for s in 0..spec.ranks {
        let (g, i) = position(s);
        for d in 0..spec.ranks {
            let (h, j) = position(d);
            let n = spec.pair_count(s, d);
            if s == d {
                b.prologue(copy(s, send(s, d), recv(s, d)));
            } else if g == h {
                intra.transfers.push(Transfer {
                    from: s,
                    to: d,
                    read: send(s, d),
                    write: recv(s, d),
                    op: Op::Copy,
                    shard: None,
                    channel: 0,
                });
            } else if i == j {
                inter.transfers.push(Transfer {
                    from: s,
                    to: d,
                    read: send(s, d),
                    write: recv(s, d),
                    op: Op::Copy,
                    shard: None,
                    channel: 0,
                });
            } else {
                // Relay through the local rank with the destination's local index.
                let relay = groups[g][j];
                let slot = Region::new(Buffer::Scratch, range(scratch_used[relay], n));
                scratch_used[relay] += n;
                intra.transfers.push(Transfer {
                    from: s,
                    to: relay,
                    read: send(s, d),
                    write: slot,
                    op: Op::Copy,
                    shard: None,
                    channel: 0,
                });
                inter.transfers.push(Transfer {
                    from: relay,
                    to: d,
                    read: slot,
                    write: recv(s, d),
                    op: Op::Copy,
                    shard: None,
                    channel: 0,
                });
            }
        }
    }
    for (r, &used) in scratch_used.iter().enumerate() {
        b.scratch(r, used);
    }
    b.phase("intra-server all-to-all", vec![intra]).phase("inter-server all-to-all", vec![inter]);
}

fn range(start: u64, len: u64) -> Range<u64> {
    start..start + len
}

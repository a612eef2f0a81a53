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

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use crate::builder::{merge_parallel, ScheduleBuilder};
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::{CompactSchedule, ListedRounds, ParallelRounds, RoundSource, SequenceRounds};
use crate::direct::AllToAllBlocks;
use crate::error::ScheduleError;
use crate::ir::{Buffer, Flow, InNetwork, LocalOp, Op, Region, Step, Transfer};
use crate::partition::{partition, partition_range};
use crate::rhd::{doubling_steps, halving_steps};
use crate::ring::{
    all_gather_buffers, check_order, copy, reduce_scatter_buffers, single_blocks, Block, RingRounds, RingStage,
};
use crate::tree::{binary_tree, complementary_tree};

/// How each server reduces its shards and gathers them back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IntraStage {
    /// A ring reduce-scatter and a ring all-gather over the server's ranks: L − 1 rounds
    /// each.
    #[default]
    Ring,
    /// In the NVSwitch (NVLS, seed 000 §8.5): the owner of shard j reads it reduced from
    /// every GPU of the server (`Flow::ReduceTo`), then stores it to all of them at once
    /// (`Flow::MulticastFrom`): one round each. Each GPU's link carries the buffer and
    /// one shard each way, not 2(L − 1)/L of the buffer as a ring's does.
    Nvls,
    /// Chains (NCCL's CollNet Chain, src/graph/tuning.cc: latency 2(L − 1) intra-node
    /// hops and one network step), one per local rank as NCCL's channels spread over a
    /// node's NICs: shard j climbs the chain that ends at local rank j (j − 1, j − 2, …,
    /// j + 1, j: each rank adds its own and passes it on, L − 1 hops), crosses servers from
    /// there (the inter-server stage), and comes back down the same chain. Each hop is a
    /// pipeline stage of its own, so chunks stream through the chains as through NCCL's.
    Chain,
}

/// How the shards cross servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum InterStage {
    /// A ring all-reduce over the S ranks holding a shard: 2(S−1) rounds.
    #[default]
    Ring,
    /// Recursive halving-doubling over the S ranks holding a shard (seed 000 §8.2.3):
    /// 2·log2 S rounds (+2 folding the ranks past a power of two), for thousands of servers.
    Rhd,
    /// One in-network reduction: each rank sends its shard once and receives the result once.
    InNetwork,
    /// NCCL's double binary tree over the S ranks holding a shard (docs/sources.md#nccl-tuner:
    /// NVLSTree and Tree cross nodes this way), half of the shard on each tree: a reduce
    /// up both trees then a broadcast down them, a round per tree level (2·D rounds, D
    /// the trees' depth), each level of a chunk in its own pipeline slot, so chunks
    /// stream through the levels as NCCL's tree pipeline streams them. A rank interior
    /// in one tree sends 1.5 of a shard and is a leaf sending 0.5 in the other: 2 shards
    /// each way in all, against a ring's 2(S − 1)/S — the same on 2 servers, a third
    /// more on 4.
    Tree,
}

impl InterStage {
    pub fn as_str(self) -> &'static str {
        match self {
            InterStage::Ring => "ring",
            InterStage::Rhd => "rhd",
            InterStage::InNetwork => "in-network",
            InterStage::Tree => "tree",
        }
    }
}

impl std::str::FromStr for InterStage {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "ring" => Ok(InterStage::Ring),
            "rhd" => Ok(InterStage::Rhd),
            "tree" => Ok(InterStage::Tree),
            other => Err(format!("unknown inter-server stage \"{other}\" (expected ring, rhd or tree)")),
        }
    }
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

/// Hierarchical all-reduce over `groups` (one group per server, equal sizes), the
/// message cut into `chunks` pipelined chunks. With one chunk the stages run one after
/// another. With more, stage i of chunk c runs in pipeline slot c + i beside the other
/// chunks' stages, round for round (the intra-server reduce-scatter, the inter-server
/// stage — or each tree level, a stage of its own — and the intra-server all-gather), as
/// NCCL's tree and NVLS-tree pipelines overlap their intra- and inter-node stages: the
/// time approaches the slowest stage's, not the sum.
pub fn hierarchical_all_reduce(
    spec: &CollectiveSpec,
    groups: &[Vec<Rank>],
    intra: IntraStage,
    inter: InterStage,
    chunks: usize,
    elem_bytes: u64,
    algorithm: &str,
) -> Result<CompactSchedule, ScheduleError> {
    if spec.collective != Collective::AllReduce {
        return Err(ScheduleError::unsupported(algorithm, spec.collective));
    }
    check_groups(groups, spec.ranks)?;
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    for r in 0..spec.ranks {
        b.prologue(LocalOp {
            rank: r,
            read: Region::new(Buffer::Input, 0..spec.count),
            write: Region::new(Buffer::Output, 0..spec.count),
            op: Op::Copy,
        });
    }
    let servers = Servers::of(groups);
    let stages: Vec<Vec<Stage>> = partition(spec.count, chunks.max(1))
        .into_iter()
        .map(|range| chunk_stages(&servers, range, intra, inter, chunks > 1))
        .collect();
    if stages.len() == 1 {
        for stage in stages.into_iter().flatten() {
            if let Some(rounds) = stage.rounds {
                b.rounds(stage.name.into_owned(), rounds);
            }
        }
        return Ok(b.build_compact());
    }
    // Slot t: stage i of chunk t − i (the all-gather of a chunk comes `last` slots after
    // its reduce-scatter). The two intra-server stages share the server's links, so the all-gather is put at the end of the slot and the
    // reduce-scatter at its start: they meet only where the inter-server stage is
    // shorter than the two together.
    let n = stages.len();
    // One chunk passes its stages, a slot each.
    let path = stages[0].len();
    let last = path - 1;
    let path_rounds: usize =
        stages[0].iter().map(|stage| stage.rounds.as_ref().map_or(0, |r| r.rounds())).sum::<usize>().max(1);
    let mut slots: Vec<Vec<SlotPart>> = (0..n + last).map(|_| Vec::new()).collect();
    for (c, chunk) in stages.into_iter().enumerate() {
        for (i, stage) in chunk.into_iter().enumerate() {
            if let Some(rounds) = stage.rounds {
                slots[c + i].push((i, rounds, format!("{} of chunk {}", stage.name, c + 1)));
            }
        }
    }
    for (t, slot) in slots.into_iter().enumerate() {
        if slot.is_empty() {
            continue;
        }
        let length = slot.iter().map(|(_, r, _)| r.rounds()).max().unwrap_or(0);
        let names: Vec<String> = slot.iter().map(|(_, _, name)| name.clone()).collect();
        let sources = slot
            .into_iter()
            // NVLS's stages use the NVSwitch's two directions the other way round (the
            // reduce-scatter sends, the all-gather receives): they start together.
            .map(|(stage, rounds, _)| {
                (if stage == last && intra == IntraStage::Ring { length - rounds.rounds() } else { 0 }, rounds)
            })
            .collect();
        b.rounds(format!("pipeline slot {}: {}", t + 1, names.join(" + ")), ParallelRounds(sources));
    }
    let mut schedule = b.build_compact();
    schedule.path_rounds = path_rounds;
    Ok(schedule)
}

/// A stage in a pipeline slot: its index in the chunk's stages, its rounds, its words.
type SlotPart = (usize, Box<dyn RoundSource>, String);

/// One stage of one chunk: its name and its rounds (none when it has nothing to do).
struct Stage {
    name: Cow<'static, str>,
    rounds: Option<Box<dyn RoundSource>>,
}

fn boxed(source: impl RoundSource + 'static) -> Option<Box<dyn RoundSource>> {
    (source.rounds() > 0).then(|| Box::new(source) as Box<dyn RoundSource>)
}

/// The stages of the hierarchical all-reduce of elements `range`: the intra-server
/// reduce-scatter, the inter-server stage (one per tree level for `InterStage::Tree`),
/// the intra-server all-gather.
fn chunk_stages(
    servers: &Servers,
    range: Range<u64>,
    intra: IntraStage,
    inter: InterStage,
    pipelined: bool,
) -> Vec<Stage> {
    let groups = &servers.groups[..];
    let local = groups[0].len();
    let shards = partition_range(range, local);
    let shard_blocks = single_blocks(shards.clone());
    // The ranks holding shard j, one per server.
    let holders: Vec<Vec<Rank>> = (0..local).map(|j| groups.iter().map(|g| g[j]).collect()).collect();
    let mut inter_stages: Vec<Stage> = Vec::new();
    let (name, rounds): (&'static str, Option<Box<dyn RoundSource>>) = match inter {
        InterStage::Tree => {
            // Pipelined, each level is cut into as many rounds as the intra-server stage
            // beside it in its slot takes, so the network's work spreads over the slot
            // (NVLS: one round). Alone (one chunk), a level is one round: cutting it
            // would only add rounds' latency.
            let pieces = match (intra, pipelined) {
                (IntraStage::Ring, true) => local.saturating_sub(1).max(1),
                _ => 1,
            };
            inter_stages = tree_stages(&holders, &shards, pieces);
            // The levels follow as stages of their own (below); none when one server.
            ("inter-server tree", None)
        }
        InterStage::Ring => {
            // Shard j all-reduced by a ring over its holders, each holding one block of it.
            let (mut rs, mut ag) = (RingRounds::default(), RingRounds::default());
            for (j, (ranks, shard)) in holders.iter().zip(&shards).enumerate() {
                let blocks = single_blocks(partition_range(shard.clone(), ranks.len()));
                rs.add(ranks, blocks.clone(), RingStage::new(Op::Reduce, Buffer::Output).of_shard(j as u32));
                ag.add(ranks, blocks, RingStage::new(Op::Copy, Buffer::Output).of_shard(j as u32));
            }
            ("inter-server all-reduce", boxed(SequenceRounds(vec![Box::new(rs), Box::new(ag)])))
        }
        InterStage::Rhd => {
            let lists: Vec<Vec<Step>> =
                holders.iter().zip(&shards).map(|(ranks, shard)| rhd_all_reduce_steps(ranks, shard.clone())).collect();
            ("inter-server all-reduce (rhd)", boxed(ListedRounds::of(merge_parallel(lists))))
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
                        InNetwork {
                            ranks: ranks.clone(),
                            read: region,
                            write: region,
                            shard: Some(j as u32),
                            flow: Flow::All,
                        }
                    })
                    .collect(),
                local: Vec::new(),
            };
            ("inter-server in-network all-reduce", boxed(ListedRounds::of(vec![step])))
        }
    };
    let (intra_rs, intra_ag) = match intra {
        IntraStage::Chain => {
            let (up, down) = chain_stages(servers, &shards);
            let mut stages = up;
            if inter_stages.is_empty() {
                stages.push(Stage { name: name.into(), rounds });
            } else {
                stages.extend(inter_stages);
            }
            stages.extend(down);
            return stages;
        }
        IntraStage::Ring => (
            boxed(per_server(groups, &shard_blocks, Buffer::Output, Op::Reduce)),
            boxed(per_server(groups, &shard_blocks, Buffer::Output, Op::Copy)),
        ),
        // As many rounds as the inter-server stage, each with a slice of every shard: in a
        // pipeline slot the NVSwitch's work then overlaps the network's round by round
        // (NVLSTree streams both at once), not all in the slot's first round.
        IntraStage::Nvls => {
            // A tree's levels are one round each: the NVSwitch's work is one round too.
            let pieces = rounds.as_ref().map_or(1, |r| r.rounds()).max(1);
            (
                nvls_rounds(groups, &shards, pieces, Flow::ReduceTo),
                nvls_rounds(groups, &shards, pieces, Flow::MulticastFrom),
            )
        }
    };
    let mut stages = vec![Stage { name: "intra-server reduce-scatter".into(), rounds: intra_rs }];
    if inter_stages.is_empty() {
        stages.push(Stage { name: name.into(), rounds });
    } else {
        stages.extend(inter_stages);
    }
    stages.push(Stage { name: "intra-server all-gather".into(), rounds: intra_ag });
    stages
}

/// `IntraStage::Chain`'s hops in every server at once, a stage each: shard j up the
/// chain that ends at local rank j (hop h: position L − h adds it into position L − h − 1,
/// position i being local rank (j + i) mod L) and back down (hop h: position h − 1 copies
/// it to position h). Each rank sends and receives one shard per hop. No stages where
/// a server has one rank.
fn chain_stages(servers: &Servers, shards: &[Range<u64>]) -> (Vec<Stage>, Vec<Stage>) {
    let hops = servers.groups[0].len().saturating_sub(1);
    let shards: Arc<[Range<u64>]> = shards.into();
    let stage = |hop: usize, up: bool| Stage {
        name: match up {
            true => format!("intra-server chain reduce, hop {hop} of {hops}").into(),
            false => format!("intra-server chain broadcast, hop {hop} of {hops}").into(),
        },
        rounds: boxed(ChainHop {
            groups: servers.groups.clone(),
            group_of: servers.group_of.clone(),
            shards: shards.clone(),
            hop,
            up,
        }),
    };
    ((1..=hops).map(|h| stage(h, true)).collect(), (1..=hops).map(|h| stage(h, false)).collect())
}

/// The server groups, held once for every chunk's stages, and each rank's group (for the
/// transfers of one rank, `RoundSource::step`).
struct Servers {
    groups: Arc<[Vec<Rank>]>,
    group_of: Arc<[usize]>,
}

impl Servers {
    fn of(groups: &[Vec<Rank>]) -> Self {
        let mut group_of = vec![usize::MAX; groups.iter().flatten().max().map_or(0, |&r| r + 1)];
        for (g, group) in groups.iter().enumerate() {
            for &r in group {
                group_of[r] = g;
            }
        }
        Servers { groups: groups.into(), group_of: group_of.into() }
    }
}

/// One hop of `IntraStage::Chain` in every server, made when asked rather than listed:
/// a round of P transfers, of which a search at 131,072 ranks holds dozens per chunk.
#[derive(Debug)]
struct ChainHop {
    groups: Arc<[Vec<Rank>]>,
    group_of: Arc<[usize]>,
    shards: Arc<[Range<u64>]>,
    hop: usize,
    up: bool,
}

impl ChainHop {
    /// Shard j's transfer in `group` (None where the shard is empty), in the order the
    /// whole round lists them: by group, then by shard.
    fn transfer(&self, group: &[Rank], j: usize) -> Option<Transfer> {
        let shard = &self.shards[j];
        if shard.end <= shard.start {
            return None;
        }
        let local = group.len();
        let at = |position: usize| group[(j + position) % local];
        let (from, to, op) = match self.up {
            true => (at(local - self.hop), at(local - self.hop - 1), Op::Reduce),
            false => (at(self.hop - 1), at(self.hop), Op::Copy),
        };
        let region = Region::new(Buffer::Output, shard.clone());
        Some(Transfer { from, to, read: region, write: region, op, shard: Some(j as u32), channel: 0 })
    }
}

impl RoundSource for ChainHop {
    fn rounds(&self) -> usize {
        usize::from(self.shards.iter().any(|s| s.end > s.start))
    }

    fn step(&self, _k: usize, rank: Option<Rank>) -> Step {
        let transfers = match rank {
            None => self
                .groups
                .iter()
                .flat_map(|g| (0..self.shards.len()).filter_map(move |j| self.transfer(g, j)))
                .collect(),
            // Only the rank's own server's transfers can name it.
            Some(rank) => self
                .group_of
                .get(rank)
                .and_then(|&g| self.groups.get(g))
                .map(|g| {
                    (0..self.shards.len())
                        .filter_map(|j| self.transfer(g, j))
                        .filter(|t| t.from == rank || t.to == rank)
                        .collect()
                })
                .unwrap_or_default(),
        };
        Step { transfers, ..Step::default() }
    }

    fn transfers_per_round(&self) -> usize {
        self.groups.len().saturating_mul(self.shards.len())
    }

    fn held(&self) -> usize {
        self.shards.len()
    }
}

/// The inter-server stage by NCCL's double binary tree (`InterStage::Tree`): for every
/// shard j, `holders[j]` (one rank per server) all-reduce it over a binary tree and its
/// complement, half of the shard on each, a stage per level: the reduce climbs from the
/// deepest level to the root, then the broadcast descends. Both trees' edges of a level
/// share its rounds: `pieces` of them, round i with slice i of every half. Empty when
/// there is one server.
fn tree_stages(holders: &[Vec<Rank>], shards: &[Range<u64>], pieces: usize) -> Vec<Stage> {
    let servers = holders.first().map_or(0, Vec::len);
    if servers < 2 {
        return Vec::new();
    }
    let trees = [binary_tree(servers), complementary_tree(servers)];
    let depths: Vec<Vec<usize>> = trees.iter().map(|t| (0..servers).map(|v| t.depth(v)).collect()).collect();
    let levels = depths.iter().flatten().copied().max().unwrap_or(0);
    // Slice `piece` of the edges (child, parent, half) whose child is at `depth`, over
    // every shard.
    let level = |depth: usize, up: bool, piece: usize| -> Step {
        let mut transfers = Vec::new();
        for (j, (ranks, shard)) in holders.iter().zip(shards).enumerate() {
            let halves = partition_range(shard.clone(), 2);
            for (t, (tree, half)) in trees.iter().zip(&halves).enumerate() {
                let Some(slice) = partition_range(half.clone(), pieces).into_iter().nth(piece) else { continue };
                for v in (0..servers).filter(|&v| depths[t][v] == depth) {
                    let Some(p) = tree.parent[v] else { continue };
                    let region = Region::new(Buffer::Output, slice.clone());
                    let (from, to, op) =
                        if up { (ranks[v], ranks[p], Op::Reduce) } else { (ranks[p], ranks[v], Op::Copy) };
                    transfers.push(Transfer {
                        from,
                        to,
                        read: region,
                        write: region,
                        op,
                        shard: Some(j as u32),
                        channel: 0,
                    });
                }
            }
        }
        Step { transfers, ..Step::default() }
    };
    let stage = |d: usize, up: bool| {
        let name = match up {
            true => format!("inter-server tree reduce from level {d} of {levels}"),
            false => format!("inter-server tree broadcast to level {d} of {levels}"),
        };
        Stage { name: name.into(), rounds: boxed(ListedRounds::of((0..pieces).map(|i| level(d, up, i)).collect())) }
    };
    (1..=levels).rev().map(|d| stage(d, true)).chain((1..=levels).map(|d| stage(d, false))).collect()
}

/// `pieces` rounds of NVLS steps, round i with slice i of every shard: in every server
/// of more than one rank, one in-switch step per shard j whose flow names the server's
/// local rank j (`flow(owner)`).
fn nvls_rounds(
    groups: &[Vec<Rank>],
    shards: &[Range<u64>],
    pieces: usize,
    flow: impl Fn(Rank) -> Flow,
) -> Option<Box<dyn RoundSource>> {
    let sliced: Vec<Vec<Range<u64>>> = shards.iter().map(|s| partition_range(s.clone(), pieces)).collect();
    let steps: Vec<Step> = (0..pieces)
        .map(|i| Step {
            in_network: groups
                .iter()
                .filter(|g| g.len() > 1)
                .flat_map(|g| {
                    sliced.iter().enumerate().filter(|(_, s)| s[i].end > s[i].start).map(|(j, s)| {
                        let region = Region::new(Buffer::Output, s[i].clone());
                        InNetwork {
                            ranks: g.clone(),
                            read: region,
                            write: region,
                            shard: Some(j as u32),
                            flow: flow(g[j]),
                        }
                    })
                })
                .collect(),
            ..Step::default()
        })
        .filter(|s| !s.in_network.is_empty())
        .collect();
    boxed(ListedRounds::of(steps))
}

/// An all-reduce of `shard` (in `Buffer::Output`) by recursive halving-doubling over
/// `ranks`, folding the ranks past the largest power of two in and out (seed 000 §8.2.4).
fn rhd_all_reduce_steps(ranks: &[Rank], shard: Range<u64>) -> Vec<Step> {
    let n = ranks.len();
    if n < 2 {
        return Vec::new();
    }
    let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let whole = Region::new(Buffer::Output, shard.clone());
    let fold = |from: Rank, to: Rank, op| Transfer { from, to, read: whole, write: whole, op, shard: None, channel: 0 };
    let chunks = partition_range(shard, p);
    let mut steps = Vec::new();
    if n > p {
        steps.push(Step {
            transfers: (p..n).map(|i| fold(ranks[i], ranks[i - p], Op::Reduce)).collect(),
            ..Step::default()
        });
    }
    steps.extend(halving_steps(&ranks[..p], &chunks, Buffer::Output));
    steps.extend(doubling_steps(&ranks[..p], &chunks, Buffer::Output));
    if n > p {
        steps.push(Step {
            transfers: (p..n).map(|i| fold(ranks[i - p], ranks[i], Op::Copy)).collect(),
            ..Step::default()
        });
    }
    steps
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
        other => return Err(ScheduleError::unsupported(algorithm, other)),
    }
    Ok(b.build_compact())
}

fn all_to_all(spec: &CollectiveSpec, groups: &[Vec<Rank>], b: &mut ScheduleBuilder) {
    // (group, local index) of every rank, looked up once: a search per pair made this
    // O(P³) (40 s at 2,160 ranks).
    let mut positions = vec![(0usize, 0usize); spec.ranks];
    for (g, ranks) in groups.iter().enumerate() {
        for (j, &r) in ranks.iter().enumerate() {
            positions[r] = (g, j);
        }
    }
    let position = |r: Rank| positions[r];
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check, generate, Algorithm, GenOptions};

    /// Every pipelined and rhd variant computes the all-reduce (the symbolic checker),
    /// and pipelining keeps every round's traffic: the same bytes, fewer rounds.
    #[test]
    fn pipelined_and_rhd_variants_are_correct() {
        for (servers, local) in [(2, 4), (3, 2), (5, 3), (4, 1), (1, 4), (6, 2)] {
            let p = servers * local;
            let groups: Vec<Vec<Rank>> = (0..servers).map(|s| (s * local..(s + 1) * local).collect()).collect();
            for count in [1u64, p as u64, 7 * p as u64 + 5] {
                let spec = CollectiveSpec::new(Collective::AllReduce, p, count);
                for (algorithm, inter) in [
                    (Algorithm::Hierarchical, InterStage::Ring),
                    (Algorithm::Hierarchical, InterStage::Rhd),
                    (Algorithm::InNetwork, InterStage::Ring),
                    (Algorithm::Hierarchical, InterStage::Tree),
                    (Algorithm::InNetworkChain, InterStage::Ring),
                ] {
                    let mut sent = None;
                    for chunks in [1, 2, 3, 5] {
                        let options = GenOptions {
                            groups: groups.clone(),
                            pipeline_chunks: chunks,
                            inter_stage: inter,
                            ..GenOptions::default()
                        };
                        let s = generate(algorithm, &spec, &options, 4).unwrap();
                        let what = format!("{algorithm} {inter:?} {servers}x{local} count {count} chunks {chunks}");
                        check(&s).unwrap_or_else(|e| panic!("{what}: {e}"));
                        let elements = s.elements_sent();
                        assert_eq!(*sent.get_or_insert(elements), elements, "{what}");
                    }
                }
            }
        }
    }

    /// Rhd between servers takes 2·log2 S rounds (plus folding) where the ring takes 2(S − 1).
    #[test]
    fn rhd_between_servers_is_logarithmic() {
        let (servers, local) = (16, 2);
        let groups: Vec<Vec<Rank>> = (0..servers).map(|s| vec![2 * s, 2 * s + 1]).collect();
        let spec = CollectiveSpec::new(Collective::AllReduce, servers * local, 1 << 12);
        let rounds = |inter| {
            let options = GenOptions { groups: groups.clone(), inter_stage: inter, ..GenOptions::default() };
            let s = crate::generate_compact(Algorithm::Hierarchical, &spec, &options, 4).unwrap();
            s.phases[1].rounds.rounds()
        };
        assert_eq!(rounds(InterStage::Ring), 30);
        assert_eq!(rounds(InterStage::Rhd), 8);
    }

    /// NCCL's double binary tree between servers: on S servers every holder of a shard
    /// sends 2 shards in all (1.5 where interior, 0.5 where a leaf; a ring's 2(S − 1)/S),
    /// except on 2 servers, where the trees are one edge and each rank sends 1 shard;
    /// the reduce climbs and the broadcast descends a level per round.
    #[test]
    fn tree_between_servers_sends_two_shards_per_holder() {
        for servers in [2usize, 4, 8, 13] {
            let local = 2;
            let p = servers * local;
            let groups: Vec<Vec<Rank>> = (0..servers).map(|s| (s * local..(s + 1) * local).collect()).collect();
            // Each shard an even number of elements, so the two trees get equal halves.
            let count = (p * 64) as u64;
            let shard = count / local as u64;
            let spec = CollectiveSpec::new(Collective::AllReduce, p, count);
            let options = GenOptions { groups: groups.clone(), inter_stage: InterStage::Tree, ..GenOptions::default() };
            let s = generate(Algorithm::Hierarchical, &spec, &options, 4).unwrap();
            check(&s).unwrap();
            let levels =
                crate::tree::binary_tree(servers).max_depth().max(crate::tree::complementary_tree(servers).max_depth());
            let tree_round = |r: &&crate::ir::Round| s.phases[r.phase].name.starts_with("inter-server tree");
            let inter: Vec<_> = s.rounds.iter().filter(tree_round).collect();
            assert_eq!(inter.len(), 2 * levels, "{servers} servers");
            let mut sent = vec![0u64; p];
            for t in inter.iter().flat_map(|r| &r.transfers) {
                sent[t.from] += t.read.len;
            }
            let expected = if servers == 2 { shard } else { 2 * shard };
            for (r, &bytes) in sent.iter().enumerate() {
                assert!(bytes <= expected, "{servers} servers: rank {r} sent {bytes} > {expected}");
            }
            assert_eq!(sent.iter().sum::<u64>(), 2 * (servers as u64 - 1) * shard * local as u64);
        }
    }

    /// CollNet's chains: each rank sends and receives one shard per hop, (L − 1)/L of
    /// the buffer each way up and again down, as a ring's reduce-scatter and all-gather;
    /// shard j crosses servers from local rank j; one chunk passes L − 1 hops up, the
    /// network, L − 1 down, and chunks stream through the hops (k chunks: 2(L − 1) + 1 +
    /// k − 1 rounds).
    #[test]
    fn the_chains_move_a_shard_per_rank_and_hop() {
        let (servers, local) = (3usize, 4usize);
        let p = servers * local;
        let groups: Vec<Vec<Rank>> = (0..servers).map(|s| (s * local..(s + 1) * local).collect()).collect();
        let count = 64u64;
        let spec = CollectiveSpec::new(Collective::AllReduce, p, count);
        for chunks in [1usize, 4] {
            let options = GenOptions { groups: groups.clone(), pipeline_chunks: chunks, ..GenOptions::default() };
            let s = generate(Algorithm::InNetworkChain, &spec, &options, 4).unwrap();
            check(&s).unwrap();
            assert_eq!(s.rounds.len(), 2 * (local - 1) + 1 + chunks - 1, "{chunks} chunks");
            let (mut sent, mut received) = (vec![0u64; p], vec![0u64; p]);
            for t in s.rounds.iter().flat_map(|r| &r.transfers) {
                sent[t.from] += t.read.len;
                received[t.to] += t.read.len;
            }
            let each_way = 2 * count * (local as u64 - 1) / local as u64;
            assert!(sent.iter().chain(&received).all(|&b| b == each_way), "{sent:?} {received:?}");
            for step in s.rounds.iter().flat_map(|r| &r.in_network) {
                let j = step.shard.expect("a shard") as usize;
                assert_eq!(step.ranks, groups.iter().map(|g| g[j]).collect::<Vec<_>>());
            }
        }
    }

    /// The chain's hops are made when asked: each rank's view of every round is its part
    /// of the whole round, in the same order.
    #[test]
    fn a_ranks_view_of_the_chain_is_its_part_of_each_round() {
        let groups: Vec<Vec<Rank>> = vec![vec![0, 2, 4], vec![1, 3, 5]];
        let spec = CollectiveSpec::new(Collective::AllReduce, 6, 17);
        for chunks in [1usize, 3] {
            let options = GenOptions { groups: groups.clone(), pipeline_chunks: chunks, ..GenOptions::default() };
            let s = crate::generate_compact(Algorithm::InNetworkChain, &spec, &options, 4).unwrap();
            let whole: Vec<_> = s.iter_rounds(None).collect();
            for r in 0..6 {
                let mine: Vec<_> = s.iter_rounds(Some(r)).collect();
                assert_eq!(mine.len(), whole.len());
                for (m, w) in mine.iter().zip(&whole) {
                    let part: Vec<_> = w.transfers.iter().filter(|t| t.from == r || t.to == r).cloned().collect();
                    assert_eq!(m.transfers, part, "rank {r}, {chunks} chunks");
                }
            }
        }
    }
}

//! Binary trees and NCCL's double binary tree (seed 000 §8.2.2). A reduce climbs the
//! tree (a node at depth d sends chunk c to its parent at step (D − d) + c, after its
//! children's chunk c arrived) and a broadcast descends it (chunk c leaves depth d at
//! step d + c): with C pipelined chunks each takes D + C − 1 steps of M/C. The double
//! binary tree runs two complementary trees — every rank is interior in at most one —
//! each on half of the data, so no rank forwards more than one tree's traffic.

use crate::builder::{merge_parallel, ScheduleBuilder};
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::CompactSchedule;
use crate::error::ScheduleError;
use crate::ir::{Buffer, Op, Region, Step, Transfer};
use crate::partition::{partition, partition_range};
use crate::ring::copy;

/// A tree over ranks: parent of each rank (None at the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    pub parent: Vec<Option<Rank>>,
}

impl Tree {
    pub fn root(&self) -> Rank {
        self.parent.iter().position(Option::is_none).unwrap_or(0)
    }

    pub fn children(&self, r: Rank) -> Vec<Rank> {
        (0..self.parent.len()).filter(|&c| self.parent[c] == Some(r)).collect()
    }

    pub fn depth(&self, r: Rank) -> usize {
        let mut d = 0;
        let mut at = r;
        while let Some(p) = self.parent[at] {
            d += 1;
            at = p;
            if d > self.parent.len() {
                break;
            }
        }
        d
    }

    pub fn max_depth(&self) -> usize {
        (0..self.parent.len()).map(|r| self.depth(r)).max().unwrap_or(0)
    }

    /// Ranks with at least one child.
    pub fn interior(&self) -> Vec<Rank> {
        (0..self.parent.len()).filter(|&r| !self.children(r).is_empty()).collect()
    }
}

/// NCCL's binary tree on ranks 0..n rooted at 0: a rank's level is its lowest set bit.
pub fn binary_tree(n: usize) -> Tree {
    let parent = (0..n)
        .map(|rank| {
            if rank == 0 {
                return None;
            }
            let bit = (0..usize::BITS).map(|b| 1usize << b).find(|b| rank & b != 0).unwrap_or(1);
            let up = (rank ^ bit) | (bit << 1);
            Some(if up >= n { rank ^ bit } else { up })
        })
        .collect();
    Tree { parent }
}

/// The complementary tree: the binary tree shifted by one rank (odd n) or mirrored (even n).
pub fn complementary_tree(n: usize) -> Tree {
    let base = binary_tree(n);
    let shift = n % 2 == 1;
    // Rank r plays base rank m(r); m is its own inverse when mirroring.
    let to_base = |r: Rank| if shift { (r + n - 1) % n } else { n - 1 - r };
    let from_base = |r: Rank| if shift { (r + 1) % n } else { n - 1 - r };
    Tree { parent: (0..n).map(|r| base.parent[to_base(r)].map(from_base)).collect() }
}

/// A tree relabelled so that `root` is its root: rank r plays virtual rank (r − root) mod n.
fn rerooted(tree: &Tree, root: Rank) -> Tree {
    let n = tree.parent.len();
    Tree { parent: (0..n).map(|r| tree.parent[(r + n - root) % n].map(|p| (p + root) % n)).collect() }
}

/// One step per k: every tree edge (child, parent) whose chunk `k − start(child, parent)`
/// exists carries it, as `edge` says.
fn pipelined_edges(
    tree: &Tree,
    chunks: &[std::ops::Range<u64>],
    start: impl Fn(&[usize], Rank, Rank) -> usize,
    edge: impl Fn(Rank, Rank, std::ops::Range<u64>) -> Transfer,
) -> Vec<Step> {
    let d_max = tree.max_depth();
    let c = chunks.len();
    if d_max == 0 || c == 0 {
        return Vec::new();
    }
    let depth: Vec<usize> = (0..tree.parent.len()).map(|r| tree.depth(r)).collect();
    (0..d_max + c - 1)
        .map(|k| Step {
            transfers: (0..tree.parent.len())
                .filter_map(|r| {
                    let parent = tree.parent[r]?;
                    let s = start(&depth, r, parent);
                    (k >= s && k - s < c).then(|| edge(r, parent, chunks[k - s].clone()))
                })
                .collect(),
            in_network: Vec::new(),
            local: Vec::new(),
        })
        .collect()
}

/// Pipelined reduce up `tree`: chunk c leaves depth d at step (D − d) + c.
pub fn reduce_steps(tree: &Tree, chunks: &[std::ops::Range<u64>], buffer_of: &dyn Fn(Rank) -> Buffer) -> Vec<Step> {
    let d_max = tree.max_depth();
    pipelined_edges(
        tree,
        chunks,
        |depth, child, _| d_max - depth[child],
        |child, parent, chunk| Transfer {
            from: child,
            to: parent,
            read: Region::new(buffer_of(child), chunk.clone()),
            write: Region::new(buffer_of(parent), chunk),
            op: Op::Reduce,
            shard: None,
            channel: 0,
        },
    )
}

/// Pipelined broadcast down `tree`: chunk c leaves depth d at step d + c.
pub fn broadcast_steps(tree: &Tree, chunks: &[std::ops::Range<u64>], buffer: Buffer) -> Vec<Step> {
    pipelined_edges(
        tree,
        chunks,
        |depth, _, parent| depth[parent],
        |child, parent, chunk| {
            let region = Region::new(buffer, chunk);
            Transfer { from: parent, to: child, read: region, write: region, op: Op::Copy, shard: None, channel: 0 }
        },
    )
}

/// An all-reduce over `trees`, each carrying an equal share of the data: reduce up every
/// tree, then broadcast down it, `chunks` pipelined pieces per share.
fn all_reduce_over(b: &mut ScheduleBuilder, spec: &CollectiveSpec, trees: &[Tree], chunks: usize) {
    let all = 0..spec.count;
    for r in 0..spec.ranks {
        b.prologue(copy(r, Region::new(Buffer::Input, all.clone()), Region::new(Buffer::Output, all.clone())));
    }
    let shares = partition(spec.count, trees.len());
    let (up, down): (Vec<_>, Vec<_>) = trees
        .iter()
        .zip(shares)
        .map(|(t, share)| {
            let pieces = partition_range(share, chunks.max(1));
            (reduce_steps(t, &pieces, &|_| Buffer::Output), broadcast_steps(t, &pieces, Buffer::Output))
        })
        .unzip();
    b.phase("tree reduce", merge_parallel(up)).phase("tree broadcast", merge_parallel(down));
}

/// An all-reduce over given trees (e.g. the ones an NCCL log prints), each a parent per
/// rank with one root; the data is split equally over them.
pub fn all_reduce_over_trees(
    spec: &CollectiveSpec,
    trees: &[Tree],
    chunks: usize,
    elem_bytes: u64,
    algorithm: &str,
) -> Result<CompactSchedule, ScheduleError> {
    if spec.collective != Collective::AllReduce {
        return Err(ScheduleError::unsupported(algorithm, spec.collective));
    }
    if trees.is_empty() {
        return Err(ScheduleError::BadTree { message: "no tree given".into() });
    }
    for (i, t) in trees.iter().enumerate() {
        check_tree(t, spec.ranks)
            .map_err(|message| ScheduleError::BadTree { message: format!("tree {i}: {message}") })?;
    }
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    all_reduce_over(&mut b, spec, trees, chunks);
    Ok(b.build_compact())
}

/// A parent per rank, parents in range, exactly one root, every rank reaching it.
pub fn check_tree(t: &Tree, ranks: usize) -> Result<(), String> {
    if t.parent.len() != ranks {
        return Err(format!("{} parents for {ranks} ranks", t.parent.len()));
    }
    let roots: Vec<Rank> = (0..ranks).filter(|&r| t.parent[r].is_none()).collect();
    if roots.len() != 1 {
        return Err(match roots.len() {
            0 => "no rank is the root (every rank has a parent: a cycle)".to_string(),
            n => format!("{n} roots (ranks {roots:?} have no parent); a tree has one"),
        });
    }
    for r in 0..ranks {
        let (mut at, mut hops) = (r, 0);
        while let Some(p) = t.parent[at] {
            if p >= ranks {
                return Err(format!("rank {at}'s parent {p} is not a rank (0..{ranks})"));
            }
            at = p;
            hops += 1;
            if hops > ranks {
                return Err(format!("rank {r} is on a cycle, not under the root"));
            }
        }
    }
    Ok(())
}

/// Binary tree (one tree) or double binary tree (`double`) for all-reduce, broadcast, reduce.
pub fn tree(
    spec: &CollectiveSpec,
    double: bool,
    chunks: usize,
    elem_bytes: u64,
    algorithm: &str,
) -> Result<CompactSchedule, ScheduleError> {
    let n = spec.ranks;
    let all = 0..spec.count;
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    let unsupported = || ScheduleError::unsupported(algorithm, spec.collective);
    match spec.collective {
        Collective::AllReduce => {
            let trees = if double { vec![binary_tree(n), complementary_tree(n)] } else { vec![binary_tree(n)] };
            all_reduce_over(&mut b, spec, &trees, chunks);
        }
        Collective::Broadcast if !double => {
            let t = rerooted(&binary_tree(n), spec.root);
            b.prologue(copy(
                spec.root,
                Region::new(Buffer::Input, all.clone()),
                Region::new(Buffer::Output, all.clone()),
            ));
            b.phase("tree broadcast", broadcast_steps(&t, &partition(spec.count, chunks.max(1)), Buffer::Output));
        }
        Collective::Reduce if !double => {
            let t = rerooted(&binary_tree(n), spec.root);
            let root = spec.root;
            for r in 0..n {
                let target = if r == root { Buffer::Output } else { Buffer::Scratch };
                if r != root {
                    b.scratch(r, spec.count);
                }
                b.prologue(copy(r, Region::new(Buffer::Input, all.clone()), Region::new(target, all.clone())));
            }
            let buffer_of = move |r: Rank| if r == root { Buffer::Output } else { Buffer::Scratch };
            b.phase("tree reduce", reduce_steps(&t, &partition(spec.count, chunks.max(1)), &buffer_of));
        }
        _ => return Err(unsupported()),
    }
    Ok(b.build_compact())
}

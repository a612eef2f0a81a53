//! Recursive-doubling all-reduce, the small-message choice of Open MPI's tuned module and
//! of MPICH (nccl-facts: "allreduce < 10000 B recursive doubling"): with p the largest
//! power of two ≤ P, at round k rank v and v XOR 2^k exchange all they hold and both add
//! it in, so after log2 p rounds every rank holds the whole reduction — half the rounds
//! of RHD (seed 000 §8.2.3), which is what counts when start-up (α) dominates. Ranks
//! p..P fold into ranks 0..P−p first and get the result back last (as RHD, §8.2.4).
//!
//! Partners add the same two values (v_lo + v_hi and v_hi + v_lo are the same bits: the
//! ops are commutative), so every rank ends with the same bits, unlike an all-to-all
//! exchange that each rank sums in its own order.
//!
//! The IR has no local step between rounds, so a sum is received into every copy that a
//! later round still needs: with R = log2 p rounds a rank keeps R copies (its output and
//! R − 1 scratch copies); round k sends one copy and adds the partner's into the R − k
//! still live. Each rank sends R(R+1)/2 · M instead of R · M (2 ranks: one round, M, no
//! extra): the model charges those bytes, so the tuner picks it only for small messages.

use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::error::ScheduleError;
use crate::ir::{Buffer, Op, Region, Schedule, ScheduleBuilder, Step, Transfer};
use crate::ring::copy;

pub fn recursive_doubling(spec: &CollectiveSpec, elem_bytes: u64, algorithm: &str) -> Result<Schedule, ScheduleError> {
    if spec.collective != Collective::AllReduce {
        return Err(ScheduleError::Unsupported {
            algorithm: algorithm.to_string(),
            collective: spec.collective.as_str(),
        });
    }
    let n = spec.ranks;
    let p = if n == 0 { 0 } else { 1usize << (usize::BITS - 1 - n.leading_zeros()) };
    let extra = n - p;
    let rounds = p.trailing_zeros() as usize;
    let copies = rounds.max(1);
    let count = spec.count;
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    let input = Region::new(Buffer::Input, 0..count);
    let slot = |s: usize| Region::new(Buffer::Scratch, s as u64 * count..(s as u64 + 1) * count);
    // Copy j of the running sum: the last is the output, the others scratch slots.
    let copy_at = |j: usize| if j + 1 == copies { Region::new(Buffer::Output, 0..count) } else { slot(j) };
    // With folded ranks, round 0 sends a folded copy that it does not write: one more slot.
    let fold_source = (extra > 0).then(|| slot(copies - 1));
    let t =
        |from: Rank, to: Rank, read: Region, write: Region, op: Op| Transfer { from, to, read, write, op, shard: None };
    let step = |transfers| vec![Step { transfers, in_network: vec![] }];
    for r in 0..p {
        b.scratch(r, (copies - 1 + usize::from(extra > 0)) as u64 * count);
        for region in (0..copies).map(copy_at).chain(fold_source) {
            b.prologue(copy(r, input, region));
        }
    }
    if extra > 0 {
        // Rank p+i adds its input into every copy of rank i.
        let fold = (0..extra).flat_map(|i| (0..copies).map(copy_at).chain(fold_source).map(move |w| (i, w)));
        b.phase("fold extra ranks in", step(fold.map(|(i, w)| t(p + i, i, input, w, Op::Reduce)).collect()));
    }
    for k in 0..rounds {
        // Round k sends what no round from k on writes — the input (or the folded copy)
        // first, then copy k − 1 — and adds the partner's into copies k.. .
        let send = match (k, fold_source) {
            (0, Some(folded)) => folded,
            (0, None) => input,
            _ => copy_at(k - 1),
        };
        let transfers = (0..p)
            .flat_map(|v| (k..copies).map(move |j| (v, j)))
            .map(|(v, j)| t(v ^ (1 << k), v, send, copy_at(j), Op::Reduce))
            .collect();
        b.phase(format!("recursive doubling, distance {}", 1 << k), step(transfers));
    }
    if extra > 0 {
        let output = Region::new(Buffer::Output, 0..count);
        b.phase("unfold to extra ranks", step((0..extra).map(|i| t(i, p + i, output, output, Op::Copy)).collect()));
    }
    Ok(b.build())
}

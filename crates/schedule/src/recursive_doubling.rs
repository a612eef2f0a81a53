//! Recursive-doubling all-reduce, the small-message choice of Open MPI's tuned module and
//! of MPICH (its CSEL rule "allreduce < 10000 B recursive doubling",
//! docs/sources.md#mpi-selection): with p the largest
//! power of two ≤ P, at round k rank v and v XOR 2^k exchange all they hold and both add
//! it in, so after log2 p rounds every rank holds the whole reduction — half the rounds
//! of RHD (seed 000 §8.2.3), which is what counts when start-up (α) dominates. Ranks
//! p..P fold into ranks 0..P−p first and get the result back last (as RHD, §8.2.4).
//!
//! Partners add the same two values (v_lo + v_hi and v_hi + v_lo are the same bits: the
//! ops are commutative), so every rank ends with the same bits, unlike an all-to-all
//! exchange that each rank sums in its own order.
//!
//! Each round receives the partner's running sum into scratch and adds it into the output
//! as a local step after the round, so each rank sends R · M over R = log2 p rounds. The
//! first round (when no rank was folded in) sends the input itself, the same bytes as the
//! output's copy of it, so the send need not wait for the copy.

use crate::builder::ScheduleBuilder;
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::CompactSchedule;
use crate::error::ScheduleError;
use crate::ir::{Buffer, LocalOp, Op, Region, Step, Transfer};
use crate::ring::copy;

pub fn recursive_doubling(
    spec: &CollectiveSpec,
    elem_bytes: u64,
    algorithm: &str,
) -> Result<CompactSchedule, ScheduleError> {
    if spec.collective != Collective::AllReduce {
        return Err(ScheduleError::unsupported(algorithm, spec.collective));
    }
    let n = spec.ranks;
    let p = if n == 0 { 0 } else { 1usize << (usize::BITS - 1 - n.leading_zeros()) };
    let extra = n - p;
    let rounds = p.trailing_zeros() as usize;
    let count = spec.count;
    let mut b = ScheduleBuilder::new(spec.clone(), algorithm, elem_bytes);
    let input = Region::new(Buffer::Input, 0..count);
    let output = Region::new(Buffer::Output, 0..count);
    let received = Region::new(Buffer::Scratch, 0..count);
    let t = |from: Rank, to: Rank, read: Region, write: Region, op: Op| Transfer {
        from,
        to,
        read,
        write,
        op,
        shard: None,
        channel: 0,
    };
    let step = |transfers, local| vec![Step { transfers, in_network: vec![], local }];
    for r in 0..p {
        if rounds > 0 {
            b.scratch(r, count);
        }
        b.prologue(copy(r, input, output));
    }
    if extra > 0 {
        // Rank p+i adds its input into rank i's running sum.
        b.phase(
            "fold extra ranks in",
            step((0..extra).map(|i| t(p + i, i, input, output, Op::Reduce)).collect(), vec![]),
        );
    }
    for k in 0..rounds {
        // Partners swap running sums into scratch, then each adds the other's in. The
        // first running sums are the inputs (when no rank was folded in): sent from the
        // input, they leave before the prologue's copy, which matters for tiny messages.
        let sent = if k == 0 && extra == 0 { input } else { output };
        let transfers = (0..p).map(|v| t(v ^ (1 << k), v, sent, received, Op::Copy)).collect();
        let adds = (0..p).map(|v| LocalOp { rank: v, read: received, write: output, op: Op::Reduce }).collect();
        b.phase(format!("recursive doubling, distance {}", 1 << k), step(transfers, adds));
    }
    if extra > 0 {
        b.phase(
            "unfold to extra ranks",
            step((0..extra).map(|i| t(i, p + i, output, output, Op::Copy)).collect(), vec![]),
        );
    }
    Ok(b.build_compact())
}

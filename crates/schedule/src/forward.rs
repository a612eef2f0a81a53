//! A pass every generated schedule goes through: a first-round send of bytes that the
//! prologue has just copied out of the rank's input reads them from the input instead.
//! Same bytes, same links, same cost in the model; but the send no longer depends on the
//! copy, so a runtime can start it first and copy while the peer receives (a broadcast's
//! root, a ring all-gather's own block, an all-reduce's first chunk).

use crate::ir::{Buffer, LocalOp, Op, Region, Transfer};

/// Rewrite the reads of round 0's `transfers` as described above, where exactly one
/// `prologue` operation of the sender writes the bytes read and it is a plain copy from
/// the input.
pub fn forward_reads(prologue: &[LocalOp], transfers: &mut [Transfer]) {
    // The prologue's operations by rank (in prologue order within a rank), so a rank's
    // few operations are found without scanning every rank's.
    let mut by_rank: Vec<usize> = (0..prologue.len()).collect();
    by_rank.sort_by_key(|&i| prologue[i].rank);
    let of_rank = |rank| {
        let start = by_rank.partition_point(|&i| prologue[i].rank < rank);
        let end = by_rank.partition_point(|&i| prologue[i].rank <= rank);
        by_rank[start..end].iter().map(|&i| &prologue[i])
    };
    for t in transfers.iter_mut().filter(|t| t.read.buffer != Buffer::Input && t.read.len > 0) {
        let mut writers = of_rank(t.from).filter(|l| l.write.overlaps(&t.read));
        let (Some(l), None) = (writers.next(), writers.next()) else { continue };
        if l.op != Op::Copy || l.read.buffer != Buffer::Input || !l.write.contains(&t.read) {
            continue;
        }
        t.read = Region::new(Buffer::Input, {
            let start = l.read.offset + (t.read.offset - l.write.offset);
            start..start + t.read.len
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::{check, generate, Algorithm, Collective, CollectiveSpec, GenOptions};

    use crate::ir::Buffer;

    #[test]
    fn first_round_sends_read_the_input_and_schedules_stay_correct() {
        for (c, a) in [
            (Collective::Broadcast, Algorithm::Chain),
            (Collective::AllGather, Algorithm::Ring),
            (Collective::AllReduce, Algorithm::Ring),
            (Collective::AllToAll, Algorithm::Pairwise),
        ] {
            for p in [2usize, 3, 5] {
                let spec = CollectiveSpec::new(c, p, 7 * p as u64 + 3);
                let s = generate(a, &spec, &GenOptions::default(), 4).unwrap();
                check(&s).unwrap_or_else(|e| panic!("{c:?} {a:?} {p}: {e}"));
                let first = &s.rounds[0];
                assert!(
                    first.transfers.iter().any(|t| t.read.buffer == Buffer::Input),
                    "{c:?} {a:?} {p}: round 0 still waits for the prologue"
                );
            }
        }
    }
}

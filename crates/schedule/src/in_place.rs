//! Running a schedule in place: the caller's one buffer holds both the input and the
//! output (`CollectiveSpec::in_place_offset`). Schedules are written with a separate,
//! never-written input; aliased, they stay correct as long as no rank reads input bytes
//! after it has overwritten them through the output, nor in the same round as it writes
//! them. `in_place_hazard` checks exactly that, walking a rank's prologue, rounds and
//! epilogue; a copy of input bytes onto themselves (the usual prologue) changes nothing
//! and is not a write.

use std::ops::Range;

use crate::collective::{InPlace, Rank};
use crate::ir::{Buffer, Op, Region, Schedule};

/// Where a region of `rank`'s buffers lies once aliased: in the caller's one buffer
/// (`Some`) or in scratch (`None`).
fn physical(layout: InPlace, r: &Region) -> Option<Range<u64>> {
    let shift = match (layout, r.buffer) {
        (_, Buffer::Scratch) => return None,
        (InPlace::InputIsOutputAt(o), Buffer::Input) => o,
        (InPlace::OutputIsInputAt(o), Buffer::Output) => o,
        _ => 0,
    };
    Some(r.offset + shift..r.offset + shift + r.len)
}

fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

/// Why `rank` cannot run `s` in place, or None when it can.
pub fn in_place_hazard(s: &Schedule, rank: Rank) -> Option<String> {
    let layout = s.spec.in_place_offset(rank);
    if layout == InPlace::Separate {
        return Some(format!("{} has no in-place form", s.spec.collective.as_str()));
    }
    // Bytes of the caller's buffer written so far (not counting identity copies).
    let mut written: Vec<Range<u64>> = Vec::new();
    let stale = |read: &Region, written: &[Range<u64>]| {
        read.buffer == Buffer::Input
            && read.len > 0
            && physical(layout, read).is_some_and(|p| written.iter().any(|w| overlaps(w, &p)))
    };
    let locals = |ops: &[crate::ir::LocalOp], stage: &str, written: &mut Vec<Range<u64>>| -> Option<String> {
        for l in ops.iter().filter(|l| l.rank == rank) {
            if stale(&l.read, written) {
                return Some(format!("the {stage} reads input bytes already overwritten"));
            }
            let (from, to) = (physical(layout, &l.read), physical(layout, &l.write));
            if l.op == Op::Copy && from.is_some() && from == to {
                continue;
            }
            written.extend(to.filter(|t| t.start < t.end));
        }
        None
    };
    if let Some(why) = locals(&s.prologue, "prologue", &mut written) {
        return Some(why);
    }
    for (i, round) in s.rounds.iter().enumerate() {
        let writes: Vec<Range<u64>> = round
            .transfers
            .iter()
            .filter(|t| t.to == rank)
            .map(|t| &t.write)
            .chain(round.in_network.iter().filter(|n| n.receives(rank)).map(|n| &n.write))
            .filter_map(|w| physical(layout, w))
            .filter(|w| w.start < w.end)
            .collect();
        let reads = round
            .transfers
            .iter()
            .filter(|t| t.from == rank)
            .map(|t| &t.read)
            .chain(round.in_network.iter().filter(|n| n.sends(rank)).map(|n| &n.read));
        for read in reads {
            if stale(read, &written) || stale(read, &writes) {
                return Some(format!("round {i} sends input bytes that are overwritten by then"));
            }
        }
        written.extend(writes);
        if let Some(why) = locals(&round.local, "local step", &mut written) {
            return Some(format!("round {i}: {why}"));
        }
    }
    locals(&s.epilogue, "epilogue", &mut written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        generate, Algorithm, Collective, CollectiveSpec, GenOptions, LocalOp, ScheduleBuilder, Step, Transfer,
    };

    #[test]
    fn every_generator_runs_in_place() {
        for c in Collective::ALL.into_iter().filter(|c| *c != Collective::AllToAllv) {
            for a in Algorithm::ALL.into_iter().filter(|a| a.supports(c)) {
                for p in [2usize, 3, 4, 5, 8] {
                    // Two servers where the rank count allows, for the hierarchical ones.
                    let groups = if p % 2 == 0 { vec![(0..p / 2).collect(), (p / 2..p).collect()] } else { vec![] };
                    let spec = CollectiveSpec::new(c, p, 11 * p as u64 + 1).with_root(p / 2).with_peer(p - 1);
                    let options = GenOptions { groups, ..GenOptions::default() };
                    // rhd refuses some rank counts; those have no schedule to check.
                    let Ok(s) = generate(a, &spec, &options, 4) else { continue };
                    for r in 0..p {
                        match in_place_hazard(&s, r) {
                            None => {}
                            Some(why) if why.contains("no in-place form") => {}
                            Some(why) => panic!("{c:?} {a} p={p} rank {r}: {why}"),
                        }
                    }
                }
            }
        }
        let a2a =
            generate(Algorithm::Pairwise, &CollectiveSpec::new(Collective::AllToAll, 2, 8), &Default::default(), 4);
        assert!(in_place_hazard(&a2a.unwrap(), 0).unwrap().contains("no in-place form"));
    }

    #[test]
    fn a_read_of_overwritten_input_is_a_hazard() {
        // Rank 0 receives into output [0, 4) in round 0, then sends input [0, 4) in round 1:
        // in place, that input is gone.
        let spec = CollectiveSpec::new(Collective::AllReduce, 2, 4);
        let mut b = ScheduleBuilder::new(spec, "test", 4);
        let t = |from, to, read: Buffer, write: Buffer| Transfer {
            from,
            to,
            read: Region::new(read, 0..4),
            write: Region::new(write, 0..4),
            op: Op::Copy,
            shard: None,
            channel: 0,
        };
        let step = |t: Transfer| Step { transfers: vec![t], in_network: vec![], local: vec![] };
        b.phase("x", vec![step(t(1, 0, Buffer::Input, Buffer::Output)), step(t(0, 1, Buffer::Input, Buffer::Output))]);
        let s = b.build();
        assert!(in_place_hazard(&s, 0).unwrap().contains("round 1"));
        assert_eq!(in_place_hazard(&s, 1), None);
        // A non-identity local copy counts as a write; the identity one does not.
        let spec = CollectiveSpec::new(Collective::AllReduce, 1, 4);
        let mut b = ScheduleBuilder::new(spec.clone(), "test", 4);
        let copy = |read: Range<u64>, write: Range<u64>| LocalOp {
            rank: 0,
            read: Region::new(Buffer::Input, read),
            write: Region::new(Buffer::Output, write),
            op: Op::Copy,
        };
        b.prologue(copy(0..4, 0..4)).epilogue(copy(0..2, 2..4));
        assert_eq!(in_place_hazard(&b.build(), 0), None);
        let mut b = ScheduleBuilder::new(spec, "test", 4);
        b.prologue(copy(0..2, 2..4)).epilogue(copy(2..4, 0..2));
        assert!(in_place_hazard(&b.build(), 0).unwrap().contains("epilogue"));
    }
}

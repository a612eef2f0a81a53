//! Why no rank returns from a call its peers did not make (issue 41).
//!
//! Every frame carries the call's signature (`frame::CallSig`) and every receive checks
//! it, so a rank that *hears* from a peer running a different call fails. What a
//! signature cannot catch alone is a rank that finishes without hearing from the rank
//! that disagrees: a broadcast's root only sends, so with ranks 1 and 2 on root 1 and
//! rank 0 on root 0, rank 0 returned at once and ranks 1 and 2 finished a broadcast of
//! rank 1's data between themselves, all without an error.
//!
//! The rule: a rank returns only once every rank is in the causal past of its last
//! receive: a frame from every rank reached it, directly or through ranks that had
//! checked theirs before sending. A rank that finds a mismatch sends nothing more in
//! the call (it aborts), so such a chain carries only agreement.
//!
//! - Collectives whose every output depends on every rank's input (all-reduce of at
//!   least one element, all-gather, reduce-scatter and all-to-all with no empty chunk,
//!   all-to-allv with no empty block, barrier) meet the rule through their data: a
//!   correct schedule carries every rank's input to every rank. (`tests` checks this
//!   against the causal order of every generator's schedule.)
//! - The others (broadcast, reduce, gather, scatter, and calls with empty chunks) add
//!   the rounds of a dissemination barrier (Hensgen, Finkel and Manber 1988): in round
//!   k rank r sends an empty frame to r + 2^k and receives one from r − 2^k (mod P),
//!   ⌈log2 P⌉ rounds, merged into the call's own first rounds so they overlap its data,
//!   and left out where the call already sends data along that edge in that round.
//! - Every call has at least the first of those rounds (r → r + 1), whatever its
//!   collective: ranks whose signatures differ at all differ between some r and r + 1,
//!   and rank r + 1 reads rank r's first frame of the call as soon as it arrives. So a
//!   mismatch is found at once on whichever rule each side follows, not at the timeout.
//!   Where the data already carries every rank to every rank, that frame orders nothing:
//!   no round waits for it, only the call's end (`Drive::deferred`; at 4 ranks on 2 cores
//!   an 8 B all-reduce took 4.44 µs with it against 4.30 without, medians of 9 runs).
//!
//! Send/recv is the exception: a call of two ranks, not of the communicator. The
//! receiver checks the sender's frames and the other ranks are not asked; a sender can
//! return before its peer has checked the call, and learns of a mismatch from the
//! peer's abort notice in its next call.
//!
//! The cost is latency, not bandwidth: the empty frames are headers. A broadcast's root
//! now waits for its peers to enter the call, as a barrier would (`docs/benchmarks.md`).

use railyard_schedule::{Collective, CollectiveSpec};

/// The dissemination rounds `spec`'s ranks add to a call (merged into its first rounds).
pub(crate) fn rounds(spec: &CollectiveSpec) -> usize {
    let ranks = spec.ranks;
    if ranks <= 1 || spec.collective == Collective::SendRecv {
        return 0;
    }
    if covered_by_data(spec) {
        1
    } else {
        ceil_log2(ranks)
    }
}

/// Whether every rank's output depends on every rank's input, so that a correct schedule
/// carries a frame from every rank to every rank (directly or forwarded).
pub(crate) fn covered_by_data(spec: &CollectiveSpec) -> bool {
    let ranks = spec.ranks as u64;
    match spec.collective {
        Collective::AllReduce => spec.count >= 1,
        // The balanced partition leaves no chunk (block) empty from `ranks` elements on.
        Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => spec.count >= ranks,
        Collective::AllToAllv => spec.counts.as_ref().is_some_and(|c| {
            c.iter().enumerate().all(|(i, row)| row.iter().enumerate().all(|(j, &n)| i == j || n > 0))
        }),
        Collective::Barrier => true,
        Collective::Broadcast
        | Collective::Reduce
        | Collective::Gather
        | Collective::Scatter
        | Collective::SendRecv => false,
    }
}

/// Rank `rank`'s partners in dissemination round `k`: (the rank it sends to, the rank it
/// receives from).
pub(crate) fn partners(rank: usize, ranks: usize, k: usize) -> (usize, usize) {
    let step = (1usize << k) % ranks;
    ((rank + step) % ranks, (rank + ranks - step) % ranks)
}

fn ceil_log2(n: usize) -> usize {
    (usize::BITS - (n - 1).leading_zeros()) as usize
}

/// An FNV-1a digest of an all-to-allv matrix, so ranks with different matrices differ in
/// their signatures (0 for the other collectives).
pub(crate) fn counts_digest(spec: &CollectiveSpec) -> u32 {
    let Some(counts) = &spec.counts else { return 0 };
    let mut h: u32 = 0x811c_9dc5;
    for n in counts.iter().flatten() {
        for b in n.to_le_bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_schedule::{generate, Algorithm, GenOptions, Schedule};

    /// Per rank, the ranks in the causal past of its last receive, as the engine runs a
    /// schedule: a rank sends in round k what it knew once its receives of rounds before k
    /// had landed. `extra(r, k)` adds rank r's agreement frames of round k as (to, from).
    fn heard(s: &Schedule, agreement: usize) -> Vec<Vec<bool>> {
        let p = s.spec.ranks;
        let mut known: Vec<Vec<bool>> = (0..p).map(|r| (0..p).map(|q| q == r).collect()).collect();
        let rounds = s.rounds.len().max(agreement);
        for k in 0..rounds {
            let mut edges: Vec<(usize, usize)> =
                s.rounds.get(k).map_or(vec![], |r| r.transfers.iter().map(|t| (t.from, t.to)).collect());
            if k < agreement {
                for r in 0..p {
                    let (to, _) = partners(r, p, k);
                    if !edges.contains(&(r, to)) {
                        edges.push((r, to));
                    }
                }
            }
            let before = known.clone();
            for (from, to) in edges {
                for q in 0..p {
                    known[to][q] |= before[from][q];
                }
            }
        }
        known
    }

    /// For every generator, collective, rank count and size (empty chunks included): with
    /// the rounds `rounds` adds, every rank has heard from every rank when its call ends;
    /// and where `covered_by_data` says so, the data alone does it.
    #[test]
    fn every_rank_hears_from_every_rank_before_it_returns() {
        let mut checked = 0;
        for p in 1..=9usize {
            for count in [0u64, 1, p as u64 - 1, p as u64, p as u64 + 1, 37] {
                for c in Collective::ALL {
                    for a in Algorithm::ALL {
                        // Send/recv is point to point: no agreement among the others.
                        if !a.supports(c) || a.in_switch() || c == Collective::SendRecv {
                            continue;
                        }
                        let mut specs = Vec::new();
                        let base = CollectiveSpec::new(c, p, count);
                        match c {
                            Collective::AllToAllv => {
                                let full = (0..p).map(|i| (0..p).map(|j| (i + j) as u64 % 3 + 1).collect()).collect();
                                let holes =
                                    (0..p).map(|i| (0..p).map(|j| u64::from((i + j) % 2 == 0)).collect()).collect();
                                specs.push(base.clone().with_counts(full));
                                specs.push(base.with_counts(holes));
                            }
                            _ if c.rooted() => specs.extend((0..p).map(|root| base.clone().with_root(root))),
                            _ => specs.push(base),
                        }
                        for spec in specs {
                            let groups = if p % 2 == 0 && p > 2 {
                                vec![(0..p / 2).collect(), (p / 2..p).collect()]
                            } else {
                                vec![]
                            };
                            let options =
                                GenOptions { groups, channels: 1, pipeline_chunks: 2, ..GenOptions::default() };
                            let Ok(s) = generate(a, &spec, &options, 4) else { continue };
                            let all = |h: &Vec<Vec<bool>>| h.iter().all(|r| r.iter().all(|&x| x));
                            assert!(all(&heard(&s, rounds(&spec))), "{a} {c:?} P={p} count={count} {spec:?}");
                            if covered_by_data(&spec) {
                                assert!(all(&heard(&s, 0)), "{a} {c:?} P={p} count={count}: data alone");
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 1000, "{checked}");
    }

    #[test]
    fn the_rounds_each_collective_adds() {
        let spec = |c, p, n| CollectiveSpec::new(c, p, n);
        assert_eq!(rounds(&spec(Collective::AllReduce, 1, 8)), 0);
        assert_eq!(rounds(&spec(Collective::SendRecv, 4, 8)), 0);
        assert_eq!(rounds(&spec(Collective::AllReduce, 8, 8)), 1);
        assert_eq!(rounds(&spec(Collective::AllReduce, 8, 0)), 3);
        assert_eq!(rounds(&spec(Collective::AllGather, 8, 7)), 3);
        assert_eq!(rounds(&spec(Collective::Broadcast, 2, 8)), 1);
        assert_eq!(rounds(&spec(Collective::Broadcast, 3, 8)), 2);
        assert_eq!(rounds(&spec(Collective::Broadcast, 5, 8)), 3);
        assert_eq!(partners(0, 5, 2), (4, 1));
        assert_eq!(partners(2, 3, 1), (1, 0));
        let m = |n| vec![vec![1, n], vec![2, 3]];
        let a = CollectiveSpec::new(Collective::AllToAllv, 2, 0).with_counts(m(1));
        let b = CollectiveSpec::new(Collective::AllToAllv, 2, 0).with_counts(m(4));
        assert_ne!(counts_digest(&a), counts_digest(&b));
        assert_eq!(counts_digest(&spec(Collective::AllReduce, 2, 8)), 0);
    }
}

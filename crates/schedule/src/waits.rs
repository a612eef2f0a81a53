//! Where a schedule stops when one rank never joins: the first round in which each
//! other rank waits for data that depends on the absent rank. A rank that never
//! started sends nothing; a rank that waits on it sends nothing after that either, so
//! the stall spreads along the schedule's transfers, round by round. Triage uses it to
//! say, for a job whose ranks wait on one that fell behind, at which step of NCCL's
//! algorithm each of them is stuck.

use crate::ir::{Flow, Schedule};
use crate::Rank;

/// For each rank, the index of the first round in which it waits on data that depends on
/// `absent` (None for `absent` itself and for ranks that never do).
pub fn first_waits(schedule: &Schedule, absent: Rank) -> Vec<Option<usize>> {
    let ranks = schedule.spec.ranks;
    let mut stalled = vec![false; ranks];
    let mut first = vec![None; ranks];
    if absent >= ranks {
        return first;
    }
    stalled[absent] = true;
    for (i, round) in schedule.rounds.iter().enumerate() {
        // Receivers stall on senders stalled before this round (a round's transfers run
        // together: one stalled in it sends nothing in it, and nothing later).
        let mut newly = Vec::new();
        for t in &round.transfers {
            if stalled[t.from] && !stalled[t.to] {
                newly.push(t.to);
            }
        }
        for step in &round.in_network {
            if step.ranks.iter().any(|&r| stalled[r]) {
                let receivers: Vec<Rank> = match step.flow {
                    Flow::All | Flow::MulticastFrom(_) => step.ranks.clone(),
                    Flow::ReduceTo(r) => vec![r],
                };
                let senders_stall = match step.flow {
                    Flow::MulticastFrom(from) => stalled[from],
                    _ => true,
                };
                if senders_stall {
                    newly.extend(receivers.into_iter().filter(|&r| !stalled[r]));
                }
            }
        }
        for r in newly {
            if !stalled[r] {
                stalled[r] = true;
                first[r] = Some(i);
            }
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{generate, GenOptions};
    use crate::{Algorithm, Collective, CollectiveSpec};

    /// Ring all-reduce of 4 ranks with rank 1 absent: rank 2 (its successor) waits in the
    /// first round, rank 3 in the second, rank 0 in the third.
    #[test]
    fn a_ring_stalls_one_rank_further_each_round() {
        let spec = CollectiveSpec::new(Collective::AllReduce, 4, 16);
        let s = generate(Algorithm::Ring, &spec, &GenOptions::default(), 4).unwrap();
        assert_eq!(first_waits(&s, 1), vec![Some(2), None, Some(0), Some(1)]);
    }

    /// Recursive doubling of 4: rank 0's partner in round 1 is rank 1; ranks 2 and 3
    /// hear of it in round 2.
    #[test]
    fn recursive_doubling_stalls_the_partner_first() {
        let spec = CollectiveSpec::new(Collective::AllReduce, 4, 16);
        let s = generate(Algorithm::RecursiveDoubling, &spec, &GenOptions::default(), 4).unwrap();
        assert_eq!(first_waits(&s, 0), vec![None, Some(0), Some(1), Some(1)]);
        assert_eq!(first_waits(&s, 9), vec![None; 4]);
    }
}

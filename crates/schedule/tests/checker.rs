//! Every generator, under the symbolic checker, for rank counts 1–33 and 64, sizes
//! that the rank count divides and sizes it does not (and zero).

use proptest::prelude::*;
use railyard_schedule::ring::interleaved_order;
use railyard_schedule::{check, generate, Algorithm, Collective, CollectiveSpec, Rank, Schedule};

fn rank_counts() -> Vec<usize> {
    (1..=33).chain([64]).collect()
}

fn sizes(p: usize) -> Vec<u64> {
    let p = p as u64;
    vec![0, 1, p.saturating_sub(1), p, 2 * p + 3, 97]
}

/// Every way to split p ranks into equal contiguous server groups.
fn groupings(p: usize) -> Vec<Vec<Vec<Rank>>> {
    (1..=p)
        .filter(|s| p.is_multiple_of(*s))
        .map(|servers| {
            let local = p / servers;
            (0..servers).map(|s| (s * local..(s + 1) * local).collect()).collect()
        })
        .collect()
}

fn assert_checks(schedule: &Schedule) {
    if let Err(e) = check(schedule) {
        panic!(
            "{} {:?} over {} ranks, {} elements: {e}",
            schedule.algorithm, schedule.spec.collective, schedule.spec.ranks, schedule.spec.count
        );
    }
}

#[test]
fn ring_collectives_pass_for_every_rank_count_and_size() {
    for p in rank_counts() {
        for count in sizes(p) {
            for collective in [Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather] {
                let spec = CollectiveSpec::new(collective, p, count);
                assert_checks(&generate(Algorithm::Ring, spec, &[], None, 4).unwrap());
                for groups in groupings(p) {
                    assert_checks(&generate(Algorithm::InterleavedRing, spec, &groups, None, 4).unwrap());
                }
            }
        }
    }
}

#[test]
fn hierarchical_all_reduce_passes_for_every_grouping() {
    for p in rank_counts() {
        for count in sizes(p) {
            let spec = CollectiveSpec::new(Collective::AllReduce, p, count);
            for groups in groupings(p) {
                for algo in [Algorithm::Hierarchical, Algorithm::InNetwork] {
                    assert_checks(&generate(algo, spec, &groups, None, 2).unwrap());
                }
            }
        }
    }
}

#[test]
fn ring_all_reduce_has_the_seed_round_count_and_volume() {
    // seed 001 §7.2.1: 16 ranks, 2(p-1) = 30 rounds, each rank sends 2(p-1)/p M.
    let m = 192 * 1024 * 1024 / 4;
    let s = generate(Algorithm::Ring, CollectiveSpec::new(Collective::AllReduce, 16, m), &[], None, 4).unwrap();
    assert_eq!(s.rounds.len(), 30);
    assert_eq!(s.elements_sent() * 4, 5760 * 1024 * 1024);
    assert_eq!(s.round_label(16), "all-gather step 2 of 15");
    let groups = groupings(16).into_iter().find(|g| g.len() == 2).unwrap();
    assert_eq!(interleaved_order(&groups)[..4], [0, 8, 1, 9]);
    let h =
        generate(Algorithm::Hierarchical, CollectiveSpec::new(Collective::AllReduce, 16, m), &groups, None, 4).unwrap();
    assert_eq!(h.rounds.len(), 7 + 2 + 7);
    assert_eq!(h.elements_sent() * 4, 5760 * 1024 * 1024);
}

fn ring16() -> Schedule {
    generate(Algorithm::Ring, CollectiveSpec::new(Collective::AllReduce, 16, 160), &[], None, 4).unwrap()
}

#[test]
fn checker_catches_a_missing_transfer() {
    let mut s = ring16();
    s.rounds[3].transfers.remove(5);
    let err = check(&s).unwrap_err();
    assert!(err.to_string().contains("postcondition"), "{err}");
}

#[test]
fn checker_catches_a_duplicated_transfer() {
    let mut s = ring16();
    let t = s.rounds[2].transfers[0].clone();
    s.rounds[2].transfers.push(t);
    let err = check(&s).unwrap_err();
    assert!(err.message.contains("twice") || err.message.contains("same round"), "{err}");
}

#[test]
fn checker_catches_a_missing_in_network_participant() {
    let groups = groupings(8).into_iter().find(|g| g.len() == 2).unwrap();
    let mut s =
        generate(Algorithm::InNetwork, CollectiveSpec::new(Collective::AllReduce, 8, 64), &groups, None, 4).unwrap();
    let round = s.rounds.iter_mut().find(|r| !r.in_network.is_empty()).unwrap();
    round.in_network[0].ranks.pop();
    assert!(check(&s).is_err());
}

#[test]
fn checker_catches_mixed_elements_and_out_of_range() {
    let mut s = ring16();
    s.rounds[0].transfers[0].read.offset += 1;
    assert!(check(&s).is_err());
    let mut s = ring16();
    s.rounds[0].transfers[0].write.offset = 1_000;
    let err = check(&s).unwrap_err();
    assert!(err.message.contains("outside"), "{err}");
}

#[test]
fn bad_groups_and_orders_are_errors() {
    let spec = CollectiveSpec::new(Collective::AllReduce, 4, 8);
    assert!(generate(Algorithm::Hierarchical, spec, &[vec![0, 1, 2], vec![3]], None, 4).is_err());
    assert!(generate(Algorithm::Ring, spec, &[], Some(&[0, 1, 1, 3]), 4).is_err());
    assert!(generate(Algorithm::Ring, spec, &[], Some(&[0, 1, 2]), 4).is_err());
    let rs = CollectiveSpec::new(Collective::ReduceScatter, 4, 8);
    assert!(generate(Algorithm::Hierarchical, rs, &[vec![0, 1], vec![2, 3]], None, 4).is_err());
    assert!(generate(Algorithm::Ring, CollectiveSpec::new(Collective::AllReduce, 0, 8), &[], None, 4).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn rings_over_any_order_pass(p in 1usize..24, count in 0u64..200, seed in any::<u64>(), which in 0usize..3) {
        // A permutation from the seed (Fisher-Yates with a tiny LCG; proptest shrinks the seed).
        let mut order: Vec<Rank> = (0..p).collect();
        let mut x = seed;
        for i in (1..p).rev() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (x >> 33) as usize % (i + 1));
        }
        let collective = [Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather][which];
        let s = generate(Algorithm::Ring, CollectiveSpec::new(collective, p, count), &[], Some(&order), 8).unwrap();
        prop_assert!(check(&s).is_ok(), "{:?}", check(&s));
    }
}

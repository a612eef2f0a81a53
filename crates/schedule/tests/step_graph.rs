//! The step graph of every generator: acyclic, and sufficient — running the steps one
//! at a time in random topological orders proves the same postcondition as running
//! them round by round.

use railyard_schedule::{
    check, check_in_order, dependencies, generate, Algorithm, Collective, CollectiveSpec, GenOptions,
};

#[test]
fn every_generator_has_an_acyclic_sufficient_step_graph() {
    let mut graphs = 0;
    for algorithm in Algorithm::ALL {
        for collective in Collective::ALL {
            if !algorithm.supports(collective) || collective == Collective::AllToAllv {
                continue;
            }
            for p in (1..=33).chain([64]) {
                for count in [1u64, (p as u64).saturating_sub(1).max(1), 2 * p as u64 + 3] {
                    let spec = CollectiveSpec::new(collective, p, count).with_root(p / 3);
                    let groups: Vec<Vec<usize>> = (0..p).collect::<Vec<_>>().chunks(4).map(<[usize]>::to_vec).collect();
                    let options = GenOptions {
                        groups,
                        order: None,
                        channels: 1 + p % 2,
                        pipeline_chunks: 1 + p % 3,
                        ..GenOptions::default()
                    };
                    let Ok(s) = generate(algorithm, &spec, &options, 4) else { continue };
                    // Large cases: the graph only (the contribution sets cost P^2 per element).
                    let g = dependencies(&s);
                    let steps: usize =
                        s.rounds.iter().map(|r| r.transfers.len() + r.in_network.len() + r.local.len()).sum();
                    assert_eq!(g.len(), steps);
                    for seed in [1u64, 0x9e37_79b9_7f4a_7c15] {
                        let order = g
                            .random_topological_order(seed ^ p as u64)
                            .unwrap_or_else(|| panic!("{algorithm} {collective:?} p={p}: the step graph has a cycle"));
                        if p <= 17 || p == 33 {
                            check(&s).unwrap_or_else(|e| panic!("{algorithm} {collective:?} p={p}: {e}"));
                            check_in_order(&s, &g, &order).unwrap_or_else(|e| {
                                panic!("{algorithm} {collective:?} p={p} count={count}, steps in random order: {e}")
                            });
                        }
                    }
                    graphs += 1;
                }
            }
        }
    }
    assert!(graphs > 1000, "{graphs}");
}

#[test]
fn a_missing_dependency_is_caught_by_running_in_order() {
    // Run a ring all-reduce's steps in reverse round order (not a topological order):
    // check_in_order refuses it and names the step that ran too early.
    let spec = CollectiveSpec::new(Collective::AllReduce, 4, 8);
    let s = generate(Algorithm::Ring, &spec, &GenOptions::default(), 4).unwrap();
    let g = dependencies(&s);
    let reversed: Vec<usize> = (0..g.len()).rev().collect();
    let err = check_in_order(&s, &g, &reversed).unwrap_err();
    assert!(err.to_string().contains("depends on"), "{err}");
}

#[test]
fn the_graph_is_built_in_about_linear_time_and_space() {
    // A ring all-reduce over 512 ranks: 523,264 steps, each waiting on a handful.
    let spec = CollectiveSpec::new(Collective::AllReduce, 512, 512 * 8);
    let s = generate(Algorithm::Ring, &spec, &GenOptions::default(), 4).unwrap();
    let g = dependencies(&s);
    assert_eq!(g.len(), 2 * 512 * 511);
    assert!(g.edge_count() <= 4 * g.len(), "{} edges for {} steps", g.edge_count(), g.len());
}

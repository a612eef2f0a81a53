//! On a uniform full mesh the per-round model of each schedule equals its closed form
//! (seed 000 §8.1.3); where the seed's formula differs from the schedule, the relation is
//! asserted too (see the doc comments in `closed_form.rs`).

use railyard_model::closed_form::{self as cf, AlphaBeta};
use railyard_model::cost;
use railyard_schedule::tree::binary_tree;
use railyard_schedule::{generate_compact, Algorithm, Collective, CollectiveSpec, GenOptions};
use railyard_topology::{presets::preset, Placement, PlacementPolicy};

const AB: AlphaBeta = AlphaBeta { alpha_secs: 5e-6, bytes_per_sec: 50e9 };

fn modelled(algorithm: Algorithm, collective: Collective, p: usize, bytes: u64, chunks: usize) -> f64 {
    let topo = preset(&format!("mesh:ranks={p},bw=50GB/s,alpha=5us")).unwrap();
    let placement = Placement::new(&topo, &PlacementPolicy::Contiguous, None).unwrap();
    let options = GenOptions { pipeline_chunks: chunks, ..GenOptions::default() };
    let schedule = generate_compact(algorithm, &CollectiveSpec::new(collective, p, bytes / 4), &options, 4).unwrap();
    cost(&schedule, &topo, &placement).unwrap().total_secs
}

fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()) + 1e-18
}

#[test]
fn ring_equals_its_closed_form() {
    for p in 2..=16 {
        let m = (p * 4096) as u64 * 4;
        let t = modelled(Algorithm::Ring, Collective::AllReduce, p, m, 1);
        assert!(
            same(t, cf::ring_all_reduce(AB, p, m as f64)),
            "p={p}: {t} vs {}",
            cf::ring_all_reduce(AB, p, m as f64)
        );
        assert!(same(modelled(Algorithm::Ring, Collective::ReduceScatter, p, m, 1), cf::ring_half(AB, p, m as f64)));
        assert!(same(modelled(Algorithm::Ring, Collective::AllGather, p, m, 1), cf::ring_half(AB, p, m as f64)));
    }
}

#[test]
fn rhd_equals_its_closed_form_and_sits_below_the_seeds() {
    for p in [2usize, 4, 8, 16, 32] {
        let m = (p * 1024) as u64 * 4;
        let t = modelled(Algorithm::Rhd, Collective::AllReduce, p, m, 1);
        assert!(same(t, cf::rhd_all_reduce(AB, p, m as f64)), "p={p}");
        assert!(t <= cf::rhd_all_reduce_seed(AB, p, m as f64));
    }
}

#[test]
fn pipelined_tree_equals_its_closed_form() {
    for p in [2usize, 3, 7, 8, 13, 16] {
        for chunks in [1usize, 4, 16] {
            let m = (chunks * 512) as u64 * 4;
            let depth = binary_tree(p).max_depth();
            let t = modelled(Algorithm::Tree, Collective::AllReduce, p, m, chunks);
            assert!(same(t, cf::tree_all_reduce_pipelined(AB, depth, chunks, m as f64)), "p={p} C={chunks}");
        }
    }
    // The seed's 2·log2 P·α + 2βM is a lower bound of the pipelined tree (depth log2 P);
    // with the best chunk count the schedule comes within 25% of it.
    let m = 64.0 * 1048576.0;
    let seed = cf::tree_all_reduce_seed(AB, 16, m);
    let best = (0..10).map(|k| cf::tree_all_reduce_pipelined(AB, 4, 1 << k, m)).fold(f64::INFINITY, f64::min);
    assert!(best >= seed && best < 1.25 * seed, "{best} vs {seed}");
}

#[test]
fn all_to_all_pairwise_equals_the_seeds_form_and_direct_is_one_round() {
    for p in 2..=12 {
        let m = (p * 256) as u64 * 4;
        assert!(
            same(modelled(Algorithm::Pairwise, Collective::AllToAll, p, m, 1), cf::all_to_all(AB, p, m as f64)),
            "p={p}"
        );
        assert!(
            same(modelled(Algorithm::Direct, Collective::AllToAll, p, m, 1), cf::p2p(AB, m as f64 / p as f64)),
            "p={p}"
        );
    }
}

#[test]
fn bus_bandwidth_factors() {
    let f = |c: Collective| c.bus_bandwidth_factor(8);
    assert_eq!(f(Collective::AllReduce), 2.0 * 7.0 / 8.0);
    assert_eq!(
        (f(Collective::AllGather), f(Collective::ReduceScatter), f(Collective::AllToAll)),
        (7.0 / 8.0, 7.0 / 8.0, 7.0 / 8.0)
    );
    assert_eq!((f(Collective::Broadcast), f(Collective::Reduce)), (1.0, 1.0));
}

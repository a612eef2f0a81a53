//! Ring search (seed 000 §8.3.3, §8.4.3).

use railyard_model::ring_search::{best_ring, HEURISTIC_FACTOR};
use railyard_topology::import::{nvidia_smi, LinkDefaults};
use railyard_topology::{DeviceKind, Placement, PlacementPolicy, TopologyBuilder};

const BRIDGE: &str = "        GPU0    GPU1    GPU2    GPU3    CPU Affinity
GPU0     X      NV4     NV4     NV2     0-31
GPU1    NV4      X      NV2     NV4     0-31
GPU2    NV4     NV2      X      NV4     0-31
GPU3    NV2     NV4     NV4      X      0-31
";

#[test]
fn the_seeds_four_gpu_bridge_machine() {
    let t = nvidia_smi::import(BRIDGE, "bridge", 1, &LinkDefaults::default()).unwrap();
    let p = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
    let ring = best_ring(&t, &p, false).unwrap();
    assert_eq!(ring.order, vec![0, 1, 3, 2]);
    assert_eq!(ring.ring_bytes_per_sec, 100e9);
    assert!(ring.exhaustive);
    // The reverse ring uses the other direction of the same NVLinks: two channels, twice the rate.
    assert_eq!(ring.channels.len(), 2);
    assert_eq!(ring.channels_bytes_per_sec, 200e9);
    let heuristic = best_ring(&t, &p, true).unwrap();
    assert_eq!(heuristic.order, vec![0, 1, 3, 2]);
}

#[test]
fn heuristic_stays_within_its_stated_factor_on_random_topologies() {
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut next = || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x >> 33
    };
    let mut worst: f64 = 1.0;
    let mut optimal = 0;
    for case in 0..120 {
        let p = 4 + (case % 5) as usize;
        let mut b = TopologyBuilder::new("random");
        let gpus: Vec<_> = (0..p).map(|i| b.device(format!("g{i}"), DeviceKind::Gpu, Some("s"))).collect();
        for i in 0..p {
            for j in i + 1..p {
                let bw = [25e9, 50e9, 100e9, 200e9][(next() % 4) as usize];
                b.duplex(gpus[i], gpus[j], bw, 0.0, &[]);
            }
        }
        let t = b.build().unwrap();
        let placement = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
        let exact = best_ring(&t, &placement, false).unwrap();
        let heuristic = best_ring(&t, &placement, true).unwrap();
        assert!(
            heuristic.ring_bytes_per_sec <= exact.ring_bytes_per_sec * (1.0 + 1e-12),
            "the exhaustive search missed a better ring"
        );
        let ratio = exact.ring_bytes_per_sec / heuristic.ring_bytes_per_sec;
        worst = worst.max(ratio);
        if ratio <= 1.0 + 1e-12 {
            optimal += 1;
        }
    }
    println!("heuristic optimal in {optimal} of 120 cases, worst 1/{worst}");
    assert!(worst <= HEURISTIC_FACTOR, "heuristic fell to 1/{worst} of the optimum");
    assert!(optimal >= 108, "heuristic optimal in only {optimal} of 120 cases");
}

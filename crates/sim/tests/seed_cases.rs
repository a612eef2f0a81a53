//! The seeds' cases the simulator must reproduce: readiness skew (seed 001 §7.6.1),
//! incast at one switch port, and ECMP collisions against the exact model (§7.5.3).

use railyard_schedule::{generate_compact, Algorithm, GenOptions};
mod common;
use common::one_round;
use railyard_schedule::{Collective, CollectiveSpec};
use railyard_sim::{simulate, Dependencies, JobSpec, Paths, SimOptions};
use railyard_topology::{presets::preset, DeviceKind, Placement, PlacementPolicy, Topology, TopologyBuilder};

fn all_reduce_secs(topo: &str, ready: &[f64], dependencies: Dependencies) -> f64 {
    let t = preset(topo).unwrap();
    let placement = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
    let spec = CollectiveSpec::new(Collective::AllReduce, placement.len(), (16 << 20) / 4);
    let options = GenOptions { channels: 1, pipeline_chunks: 1, ..GenOptions::default() };
    let schedule = generate_compact(Algorithm::Ring, &spec, &options, 4).unwrap();
    let job = JobSpec { ready_secs: ready.to_vec(), ..JobSpec::new("x", &schedule, placement, 0.0) };
    let options = SimOptions { dependencies, ..SimOptions::default() };
    simulate(&t, &[job], &options).unwrap().jobs[0].finish_secs
}

/// Seed 001 §7.6.1: four participants ready at 0, 0, 0 and 2 ms exchange for 0.4 ms once
/// all are there: done at 2.4 ms; halving the exchange gives 2.2 ms; all ready at 0, 0.4 ms.
#[test]
fn readiness_skew_delays_the_exchange_to_the_last_ready() {
    // A ring all-reduce of 16 MiB over 4 ranks moves 6 x 4 MiB per link: 0.4 ms at
    // 62.91456 GB/s, 0.2 ms at twice that.
    let slow = "mesh:ranks=4,bw=62.91456GB/s,alpha=0s";
    let fast = "mesh:ranks=4,bw=125.82912GB/s,alpha=0s";
    let skew = [0.0, 0.0, 0.0, 2e-3];
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(all_reduce_secs(slow, &[], Dependencies::Barriers), 0.4e-3));
    assert!(close(all_reduce_secs(slow, &skew, Dependencies::Barriers), 2.4e-3));
    assert!(close(all_reduce_secs(fast, &skew, Dependencies::Barriers), 2.2e-3));
    // Rank order lets the three ready ranks start without the fourth; the ring still
    // needs it, so the finish cannot come before it is ready, nor after 2.4 ms.
    let free = all_reduce_secs(slow, &skew, Dependencies::RankOrder);
    assert!(free > 2e-3 && free <= 2.4e-3 + 1e-9, "{free}");
}

/// n hosts on one leaf send to n hosts on another through m spines (one uplink each).
fn two_leaves(n: usize, m: usize, bytes_per_sec: f64) -> Topology {
    let mut b = TopologyBuilder::new("two-leaves");
    let (l1, l2) = (b.device("leaf1", DeviceKind::Switch, None), b.device("leaf2", DeviceKind::Switch, None));
    let mut gpus = Vec::new();
    for side in [l1, l2] {
        for i in 0..n {
            let g = b.device(format!("h{side}.{i}"), DeviceKind::Gpu, Some(&format!("s{side}.{i}")));
            b.duplex(g, side, bytes_per_sec, 0.0, &[]);
            gpus.push(g);
        }
    }
    for j in 0..m {
        let s = b.device(format!("spine{j}"), DeviceKind::Switch, None);
        b.duplex(l1, s, bytes_per_sec, 0.0, &[]);
        b.duplex(l2, s, bytes_per_sec, 0.0, &[]);
    }
    b.default_ranks(gpus);
    b.build().unwrap()
}

fn secs_of(t: &Topology, schedule: &railyard_schedule::CompactSchedule, paths: Paths) -> f64 {
    let placement = Placement::new(t, &PlacementPolicy::Contiguous, None).unwrap();
    let job = JobSpec::new("x", schedule, placement, 0.0);
    simulate(t, &[job], &SimOptions { paths, ..SimOptions::default() }).unwrap().jobs[0].secs
}

/// Seed 001 §7.5.3: n flows hashed onto m uplinks; the slowest finishes when the
/// busiest uplink has drained, so the mean finish over many seeds, in single-flow
/// times, is the mean busiest-uplink load — the exact model's expectation (within 2%).
#[test]
fn ecmp_collisions_match_the_exact_model() {
    let bw = 50e9;
    let bytes = 1 << 20;
    let one = bytes as f64 / bw;
    for (n, m) in [(8, 32), (32, 32)] {
        let t = two_leaves(n, m, bw);
        let pairs: Vec<(usize, usize)> = (0..n).map(|i| (i, n + i)).collect();
        let schedule = one_round(2 * n, &pairs, bytes);
        let seeds = 1500;
        let mean =
            (0..seeds).map(|seed| secs_of(&t, &schedule, Paths::Ecmp { seed }) / one).sum::<f64>() / seeds as f64;
        let exact = railyard_netmodels::ecmp::ecmp_case(n as u32, m as u32, 0.99).unwrap().expected_max;
        assert!((mean - exact).abs() / exact < 0.02, "({n}, {m}): simulated {mean}, exact {exact}");
        // Split over every spine, nothing collides: one flow's time.
        let split = secs_of(&t, &schedule, Paths::Split) / one;
        assert!((split - 1.0).abs() < 1e-6, "{split}");
    }
}

/// Seed 001 §7.5 (incast): an all-to-all of N hosts on one switch delivers N − 1
/// messages through every receiving port, one after another in effect — N − 1 single-
/// message serialisations, not one (what a simulator that prices each message as if it
/// had the port alone gets).
#[test]
fn all_to_all_through_one_switch_serialises_at_the_receiving_port() {
    let n = 8;
    let bw = 50e9;
    let mut b = TopologyBuilder::new("star");
    let sw = b.device("switch", DeviceKind::Switch, None);
    let gpus: Vec<_> = (0..n)
        .map(|i| {
            let g = b.device(format!("h{i}"), DeviceKind::Gpu, Some(&format!("s{i}")));
            b.duplex(g, sw, bw, 0.0, &[]);
            g
        })
        .collect();
    b.default_ranks(gpus);
    let t = b.build().unwrap();
    let bytes = 4 << 20;
    let pairs: Vec<(usize, usize)> =
        (0..n).flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j))).collect();
    let secs = secs_of(&t, &one_round(n, &pairs, bytes), Paths::Split);
    let single = bytes as f64 / bw;
    assert!((secs / single - (n - 1) as f64).abs() < 1e-6, "{} single-message times", secs / single);
}

/// Seed 001 §7.5.3: 8 MiB sprayed over eight 50 GB/s paths of 1–8 µs delay finishes in
/// per-path serialisation plus the slowest delay, near 29 µs; on one path, about 168 µs.
#[test]
fn spraying_over_eight_paths_against_one() {
    let mut b = TopologyBuilder::new("eight-paths");
    let a = b.device("a", DeviceKind::Gpu, Some("A"));
    let z = b.device("z", DeviceKind::Gpu, Some("Z"));
    for j in 0..8 {
        let s = b.device(format!("path{j}"), DeviceKind::Switch, None);
        b.duplex(a, s, 50e9, (j + 1) as f64 * 1e-6, &[]);
        b.duplex(s, z, 50e9, 0.0, &[]);
    }
    b.default_ranks(vec![a, z]);
    let t = b.build().unwrap();
    let schedule = one_round(2, &[(0, 1)], 8 << 20);
    let sprayed = secs_of(&t, &schedule, Paths::Split);
    let per_path = (8 << 20) as f64 / 8.0 / 50e9;
    assert!((sprayed - (per_path + 8e-6)).abs() < 1e-9, "{sprayed}");
    assert!((sprayed - 29e-6).abs() < 0.1e-6, "{sprayed}");
    for seed in 0..4 {
        let one = secs_of(&t, &schedule, Paths::Ecmp { seed });
        assert!(one > 168e-6 && one < 176e-6, "{one}");
    }
    // The receiver's reorder buffer: what the seven faster paths deliver ahead of the
    // slowest, against the packet-level model's peak (339 packets of 4 KiB).
    let placement = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
    let report = simulate(&t, &[JobSpec::new("x", &schedule, placement, 0.0)], &SimOptions::default()).unwrap();
    let packets = railyard_netmodels::spray::spray(&railyard_netmodels::spray::SprayInput::default()).unwrap();
    let (fluid, packet) = (report.reorder_peak_bytes, packets.peak_reorder_bytes);
    assert!((fluid - packet).abs() < 0.02 * packet, "fluid {fluid} against packets {packet}");
}

/// A hierarchical all-reduce cut into pipeline chunks overlaps each chunk's intra-server
/// stages with another chunk's inter-server stage: its time approaches the slower
/// stage's, not the sum of the three.
#[test]
fn pipelined_hierarchical_approaches_the_slower_stage() {
    let t = preset("rail:servers=8").unwrap();
    let placement = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
    let spec = CollectiveSpec::new(Collective::AllReduce, placement.len(), (1 << 30) / 4);
    let run = |chunks: usize| {
        let options =
            GenOptions { groups: placement.ranks_by_server(&t), pipeline_chunks: chunks, ..GenOptions::default() };
        let schedule = generate_compact(Algorithm::Hierarchical, &spec, &options, 4).unwrap();
        let job = JobSpec::new("x", &schedule, placement.clone(), 0.0);
        simulate(&t, &[job], &SimOptions::default()).unwrap().jobs.remove(0)
    };
    let whole = run(1);
    let stages: Vec<f64> = whole.phases.iter().map(|p| p.secs).collect();
    assert_eq!(stages.len(), 3);
    let (sum, slower) = (stages.iter().sum::<f64>(), stages.iter().copied().fold(0.0, f64::max));
    assert!((whole.secs - sum).abs() < 1e-9 * sum);
    let pipelined = run(16);
    assert!(pipelined.secs < 0.6 * sum, "{} against the sum {sum}", pipelined.secs);
    assert!(pipelined.secs > slower && pipelined.secs < 1.12 * slower, "{} against {slower}", pipelined.secs);
}

/// Seed 001 §7.5.1 example 7.5: two jobs each send 1 GB at 50 GB/s (20 ms) through one
/// 50 GB/s leaf uplink. Peaks together: 1 GB backlog, drained 20 ms after the senders
/// stop; overlapping 5 ms: 250 MB; 20 ms apart: no queue.
#[test]
fn two_periodic_jobs_queue_at_a_shared_uplink() {
    let t = preset("rail:servers=64,gpus=1,group=32,spines=1,over=32:1").unwrap();
    let spec = CollectiveSpec::new(Collective::SendRecv, 2, 1_000_000_000 / 4);
    let schedule = generate_compact(Algorithm::Direct, &spec, &GenOptions::default(), 4).unwrap();
    let placed = |a: &str, b: &str| Placement { devices: vec![t.device_id(a).unwrap(), t.device_id(b).unwrap()] };
    let run = |offset: f64| {
        let jobs = [
            JobSpec::new("a", &schedule, placed("s0.gpu0", "s32.gpu0"), 0.0),
            JobSpec::new("b", &schedule, placed("s1.gpu0", "s33.gpu0"), offset),
        ];
        let options = SimOptions { queues: true, buffer_bytes: Some(512.0 * 1024.0), ..SimOptions::default() };
        simulate(&t, &jobs, &options).unwrap()
    };
    let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol * b.abs().max(1e-12);
    let aligned = run(0.0);
    let q = &aligned.queues[0];
    assert_eq!(q.resource, "leaf0.rail0 -> spine0");
    // Times are the seed's plus one per-step start-up (α = 0.833 us).
    assert!(close(q.peak_bytes, 1e9, 1e-6) && close(q.peak_secs, 20e-3, 1e-4), "{q:?}");
    assert!(close(q.drained_secs.unwrap(), 40e-3, 1e-4), "{q:?}");
    assert!(close(q.over_buffer_bytes.unwrap(), 1e9 - 524_288.0, 1e-6));
    assert!(close(aligned.makespan_secs, 40e-3, 1e-4));
    let overlap_5ms = run(15e-3);
    let q = &overlap_5ms.queues[0];
    assert!(close(q.peak_bytes, 250e6, 1e-6) && close(q.drained_secs.unwrap(), 40e-3, 1e-4), "{q:?}");
    let apart = run(20e-3);
    assert!(apart.queues.is_empty(), "{:?}", apart.queues);
    assert!(close(apart.makespan_secs, 40e-3, 1e-4));
}

/// Seed 001 §7.1.2's cut model: a leaf with d hosts down and u uplinks gives the
/// cards it holds u·B between them. Two all-to-all jobs with five cards each on the same
/// two leaves of a 5:1 Clos: alone a job's five cards share leaf0's cut (20 GB/s a card),
/// together ten cards do (10 GB/s): twice the time, as the cut model says.
#[test]
fn two_jobs_sharing_leaf_uplinks_slow_as_the_cut_model_predicts() {
    use railyard_netmodels::clos::{clos_cut, ClosInput};
    let t = preset("clos:k=12,over=5:1").unwrap();
    let hosts = |range: std::ops::Range<usize>| -> Vec<usize> {
        range.map(|h| t.device_id(&format!("h{h}.gpu")).unwrap()).collect()
    };
    let a = Placement { devices: [hosts(0..5), hosts(10..15)].concat() };
    let b = Placement { devices: [hosts(5..10), hosts(15..20)].concat() };
    let spec = CollectiveSpec::new(Collective::AllToAll, 10, (64 << 20) / 4);
    let schedule = generate_compact(Algorithm::Direct, &spec, &GenOptions::default(), 4).unwrap();
    let cut = |cards| {
        clos_cut(&ClosInput { ports: 12, tiers: 2, down: 10, up: 2, port_bytes_per_sec: 50e9, job_cards: Some(cards) })
            .unwrap()
            .job
            .unwrap()
    };
    let run = |jobs: Vec<JobSpec<'_>>| simulate(&t, &jobs, &SimOptions::default()).unwrap();
    let alone = run(vec![JobSpec::new("a", &schedule, a.clone(), 0.0)]);
    let together = run(vec![JobSpec::new("a", &schedule, a, 0.0), JobSpec::new("b", &schedule, b, 0.0)]);
    // Bytes one card of job a sends out of leaf0.
    let up: f64 = alone.resources.iter().filter(|r| r.resource.starts_with("leaf0 -> spine")).map(|r| r.bytes).sum();
    let per_card = up / 5.0;
    let alpha = t.round_startup_secs;
    let predicted_alone = per_card / cut(5).per_card_bytes_per_sec + alpha;
    let predicted_together = per_card / cut(10).per_card_bytes_per_sec + alpha;
    let (sim_alone, sim_together) = (alone.jobs[0].secs, together.jobs[0].secs);
    assert!((sim_alone - predicted_alone).abs() < 0.02 * predicted_alone, "{sim_alone} vs {predicted_alone}");
    assert!(
        (sim_together - predicted_together).abs() < 0.02 * predicted_together,
        "{sim_together} vs {predicted_together}"
    );
}

/// The critical path of the seed's ring all-reduce: one transfer per round, each starting
/// when the one before it ended (plus α), all held back by the NIC link into rank 0's
/// server, and the last one ending when the job does.
#[test]
fn the_ring_critical_path_is_one_nic_transfer_per_round() {
    let t = preset("hgx-h100x2").unwrap();
    let placement = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
    let spec = CollectiveSpec::new(Collective::AllReduce, 16, (192 << 20) / 4);
    let schedule = generate_compact(Algorithm::Ring, &spec, &GenOptions::default(), 4).unwrap();
    let report = simulate(&t, &[JobSpec::new("ring", &schedule, placement, 0.0)], &SimOptions::default()).unwrap();
    let job = &report.jobs[0];
    let path = job.critical_path.as_ref().unwrap();
    assert_eq!(path.len(), 30);
    let alpha = t.round_startup_secs;
    for w in path.windows(2) {
        assert!((w[1].start_secs - (w[0].end_secs + alpha)).abs() < 1e-11, "{w:?}");
    }
    assert!((path[29].end_secs - job.finish_secs).abs() < 1e-12);
    assert!(path.iter().all(|c| c.resource.as_deref().is_some_and(|r| r.contains("nic"))), "{path:?}");
}

//! The fluid model's flow control against seed 001 §7.5.2: a half-full 512 KiB buffer
//! fed at 100 GB/s and drained at 50 GB/s fills in 5.2 us, drops about 738 KB until the
//! senders cut to 40 GB/s at 20 us, and is empty again at about 72 us. With PFC instead
//! of drops, the pause spreads upstream and slows a flow that never crosses the full port.

mod common;
use common::one_round;
use railyard_sim::fluid::{simulate_fluid, FlowControl, FluidOptions};
use railyard_sim::JobSpec;
use railyard_topology::{DeviceKind, Placement, Topology, TopologyBuilder};

fn all_gpus(t: &Topology) -> Placement {
    Placement { devices: t.default_ranks.clone() }
}

#[test]
fn a_half_full_buffer_fills_drops_and_drains_after_the_rate_cut() {
    // Two senders at 50 GB/s into one 50 GB/s port.
    let mut b = TopologyBuilder::new("incast");
    let sw = b.device("switch", DeviceKind::Switch, None);
    let gpus: Vec<_> = (0..3)
        .map(|i| {
            let g = b.device(format!("h{i}"), DeviceKind::Gpu, Some(&format!("s{i}")));
            b.duplex(g, sw, 50e9, 0.0, &[]);
            g
        })
        .collect();
    b.default_ranks(gpus);
    let t = b.build().unwrap();
    let schedule = one_round(3, &[(0, 2), (1, 2)], 16 << 20);
    let job = JobSpec::new("incast", &schedule, all_gpus(&t), 0.0);
    let kib = 1024.0;
    let options = FluidOptions {
        dt_secs: 10e-9,
        flow_control: FlowControl::Drop,
        buffer_bytes: 512.0 * kib,
        initial_queue_bytes: 256.0 * kib,
        mark_bytes: Some(4096.0),
        feedback_secs: 20e-6,
        cut: 0.4,
        increase_bytes_per_sec: 0.0,
        horizon_secs: 100e-6,
        ..FluidOptions::default()
    };
    let r = simulate_fluid(&t, &[job], &options).unwrap();
    let port = r.ports.iter().find(|p| p.resource == "switch -> h2").unwrap();
    let near = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol;
    assert!(near(port.full_secs.unwrap(), 5.24e-6, 0.1e-6), "{port:?}");
    // 50 GB/s of excess from 5.24 us to the cut at 20 us.
    assert!(near(port.dropped_bytes, 738e3, 10e3), "{port:?}");
    // 512 KiB drained at 50 − 40 = 10 GB/s: empty 52 us after the cut.
    assert!(near(port.empty_secs.unwrap(), 72.4e-6, 0.5e-6), "{port:?}");
    assert!(r.flows.iter().all(|f| near(f.final_rate, 20e9, 1.0)));
}

/// h0 and h1 send to d, h2 to v; all cross the 150 GB/s link u between two switches,
/// only d's port (50 GB/s) is too slow. Dropping hurts only the flows to d; PFC pauses
/// u, then the hosts' links, and the flow to v waits though its own path is free.
#[test]
fn pfc_pause_spreads_to_a_flow_that_never_crosses_the_full_port() {
    let mut b = TopologyBuilder::new("two-switches");
    let (s1, s2) = (b.device("s1", DeviceKind::Switch, None), b.device("s2", DeviceKind::Switch, None));
    b.duplex(s1, s2, 150e9, 0.0, &[]);
    let mut gpus = Vec::new();
    for (name, sw) in [("h0", s1), ("h1", s1), ("h2", s1), ("d", s2), ("v", s2)] {
        let g = b.device(name, DeviceKind::Gpu, Some(name));
        b.duplex(g, sw, 50e9, 0.0, &[]);
        gpus.push(g);
    }
    b.default_ranks(gpus);
    let t = b.build().unwrap();
    let schedule = one_round(5, &[(0, 3), (1, 3), (2, 4)], 4 << 20);
    let run = |flow_control| {
        let job = JobSpec::new("incast", &schedule, all_gpus(&t), 0.0);
        let options = FluidOptions {
            flow_control,
            buffer_bytes: 1024.0 * 1024.0,
            xoff_bytes: 256.0 * 1024.0,
            xon_bytes: 128.0 * 1024.0,
            horizon_secs: 1e-3,
            ..FluidOptions::default()
        };
        simulate_fluid(&t, &[job], &options).unwrap()
    };
    let alone = (4u64 << 20) as f64 / 50e9;
    let victim =
        |r: &railyard_sim::fluid::FluidReport| r.flows.iter().find(|f| f.to == 4).unwrap().finish_secs.unwrap();
    let dropped = |r: &railyard_sim::fluid::FluidReport| r.flows.iter().map(|f| f.dropped_bytes).sum::<f64>();
    let drop = run(FlowControl::Drop);
    assert!(victim(&drop) < 1.05 * alone, "{} against {alone}", victim(&drop));
    assert!(dropped(&drop) > 0.0);
    let pfc = run(FlowControl::Pause);
    assert_eq!(dropped(&pfc), 0.0);
    assert!(victim(&pfc) > 1.5 * alone, "the victim finished at {} against {alone} alone", victim(&pfc));
    let paused = pfc.ports.iter().map(|p| p.paused_secs).fold(0.0, f64::max);
    assert!(paused > 0.0, "{:?}", pfc.ports);
}

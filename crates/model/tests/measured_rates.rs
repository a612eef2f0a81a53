//! A machine railyard measured (`railyard calibrate`'s topology) already runs at its
//! measured rates: what it expects of every algorithm is its bound, at every size, on
//! the Simple protocol (no NCCL latencies in place of the measured start-up).

use railyard_model::{plan, CollectiveRequest};
use railyard_schedule::Collective;
use railyard_topology::presets::{hosts, Transport, HOST_COSTS};

#[test]
fn a_measured_machine_expects_its_bound() {
    let shm = Transport { alpha_secs: 2e-6, bytes_per_sec: 10e9 };
    let net = Transport { alpha_secs: 20e-6, bytes_per_sec: 1e9 };
    let t = hosts("calibrated", &[vec![0, 1], vec![2, 3]], shm, Some(net), HOST_COSTS, "test".into()).unwrap();
    for bytes in [8u64, 64 << 10, 64 << 20] {
        let p = plan(&t, &CollectiveRequest::all(Collective::AllReduce, bytes, 4)).unwrap();
        for a in &p.algorithms {
            let (bound, expected) = (a.total_secs, a.expected_secs);
            // Pipelined chunks may share a round's start-up, so expected never exceeds the bound.
            assert!(expected <= bound * (1.0 + 1e-9), "{} at {bytes} B: expected {expected} > bound {bound}", a.name);
            assert!(expected >= 0.5 * bound, "{} at {bytes} B: expected {expected} far below bound {bound}", a.name);
            assert_eq!(a.protocol, railyard_topology::Protocol::Simple, "{} at {bytes} B", a.name);
        }
    }
}

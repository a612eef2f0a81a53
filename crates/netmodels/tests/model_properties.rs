//! Invariants of the network models on inputs other than the book's.

use proptest::prelude::*;
use railyard_netmodels::dag::{schedule, Graph, Operation, Policy};
use railyard_netmodels::ecmp::ecmp_case;
use railyard_netmodels::queue::{queue, Demand, QueueInput, Scenario};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// The exact max-load distribution sums to 1, and n/m ≤ E[L_max] ≤ n.
    #[test]
    fn ecmp_distribution_is_a_distribution(n in 1u32..24, m in 1u32..16) {
        let c = ecmp_case(n, m, 0.99).unwrap();
        let total: f64 = c.distribution.iter().sum();
        prop_assert!((total - 1.0).abs() < 1e-12);
        prop_assert!(c.expected_max >= n as f64 / m as f64 - 1e-12);
        prop_assert!(c.expected_max <= n as f64 + 1e-12);
        prop_assert!(c.relative_speed <= 1.0 + 1e-12);
        // No assignment has a busiest uplink below ⌈n/m⌉.
        let below: f64 = c.distribution[..c.collision_free_max as usize].iter().sum();
        prop_assert_eq!(below, 0.0);
    }

    /// Every operation starts after its ready time and its predecessors; the makespan is
    /// at least the critical path and at least any single operation.
    #[test]
    fn dag_finish_bounds(durations in prop::collection::vec(0u32..50, 1..12), edges in prop::collection::vec((0usize..12, 0usize..12), 0..20), ordered in any::<bool>()) {
        let n = durations.len();
        let operations: Vec<Operation> = durations.iter().enumerate().map(|(i, &d)| Operation {
            name: format!("op{i}"), secs: d as f64 * 1e-6, ready_secs: (i % 3) as f64 * 1e-6, resource: None,
        }).collect();
        // Edges only forward, so the graph has no cycle.
        let edges: Vec<(String, String)> = edges.into_iter().filter(|(a, b)| a < b && *b < n).map(|(a, b)| (format!("op{a}"), format!("op{b}"))).collect();
        let g = Graph { name: "random".into(), operations, edges: edges.clone() };
        let s = schedule(&g, if ordered { Policy::AllInOrder } else { Policy::OnlyRequired }).unwrap();
        prop_assert!(s.makespan_secs + 1e-15 >= s.critical_path_secs);
        for (i, o) in s.operations.iter().enumerate() {
            prop_assert!(o.start_secs + 1e-15 >= g.operations[i].ready_secs);
            prop_assert!((o.finish_secs - o.start_secs - g.operations[i].secs).abs() < 1e-12);
            prop_assert!(o.slack_secs >= 0.0);
        }
        for (a, b) in &edges {
            let (a, b): (usize, usize) = (a[2..].parse().unwrap(), b[2..].parse().unwrap());
            prop_assert!(s.operations[b].start_secs + 1e-15 >= s.operations[a].finish_secs);
        }
    }

    /// The fluid queue conserves bytes: arrived = sent + still queued; the backlog never goes negative.
    #[test]
    fn queue_conserves_bytes(rates in prop::collection::vec(1u32..100, 1..4), on_pct in prop::collection::vec(1u32..100, 4), offsets in prop::collection::vec(0u32..100, 4), egress in 1u32..150) {
        let demands: Vec<Demand> = rates.iter().enumerate().map(|(i, &r)| Demand {
            rate_bytes_per_sec: r as f64 * 1e9, period_secs: 0.1, on_secs: on_pct[i] as f64 * 1e-3,
        }).collect();
        let input = QueueInput {
            scenarios: vec![Scenario { name: "random".into(), offsets_secs: offsets[..demands.len()].iter().map(|&o| o as f64 * 1e-3).collect() }],
            demands,
            egress_bytes_per_sec: egress as f64 * 1e9,
            horizon_secs: 0.3,
            buffer_bytes: 1e6,
        };
        let o = queue(&input).unwrap();
        let s = &o.scenarios[0];
        prop_assert!((s.arrived_bytes - s.sent_bytes - s.final_backlog_bytes).abs() <= 1e-6 * s.arrived_bytes.max(1.0));
        prop_assert!(s.backlog.iter().all(|&(_, q)| q >= 0.0));
        prop_assert!(s.sent_bytes <= input.egress_bytes_per_sec * input.horizon_secs * (1.0 + 1e-9));
    }
}

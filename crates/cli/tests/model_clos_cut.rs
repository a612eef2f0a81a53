//! seed 001 §7.1.2 through `railyard model clos-cut --format json`.

mod common;
use common::{json, railyard};

fn tb(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap() / 1e12
}

#[test]
fn two_and_three_tier_k64() {
    let two = json(&["model", "clos-cut", "--ports", "64", "--tiers", "2", "--format", "json"]);
    assert_eq!(two["endpoints"], 2048);
    assert_eq!(two["switches"], 96);
    assert!((tb(&two["bisection_bytes_per_sec"]) - 51.2).abs() < 1e-9);
    let three = json(&["model", "clos-cut", "--ports", "64", "--tiers", "3", "--format", "json"]);
    assert_eq!(three["endpoints"], 65536);
    assert_eq!(three["switches"], 5120);
    assert!((tb(&three["bisection_bytes_per_sec"]) - 1638.4).abs() < 1e-6);
}

#[test]
fn oversubscribed_and_a_1024_card_job() {
    let over =
        json(&["model", "clos-cut", "--ports", "64", "--tiers", "2", "--oversubscription", "3:1", "--format", "json"]);
    assert_eq!(over["endpoints"], 3072);
    assert_eq!(over["switches"], 80);
    assert!((tb(&over["bisection_bytes_per_sec"]) - 25.6).abs() < 1e-9);
    assert!((tb(&over["job_cut_bytes_per_sec"]) - 17.6).abs() < 1e-9);
    let per_card = over["per_card_bytes_per_sec"].as_f64().unwrap() / 1e9;
    assert!((per_card - 17.2).abs() < 0.05, "{per_card}");
    let full = json(&["model", "clos-cut", "--job-cards", "1024", "--format", "json"]);
    assert!((tb(&full["job_cut_bytes_per_sec"]) - 51.2).abs() < 1e-9);
    assert!((full["per_card_bytes_per_sec"].as_f64().unwrap() / 1e9 - 50.0).abs() < 1e-9);
}

#[test]
fn markdown_and_bad_input() {
    let out = railyard(&["model", "clos-cut"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("51.2 TB/s"), "{}", out.stdout);
    for args in [
        vec!["model", "clos-cut", "--ports", "63"],
        vec!["model", "clos-cut", "--tiers", "4"],
        vec!["model", "clos-cut", "--ports", "4", "--oversubscription", "5:2"],
        vec!["model", "clos-cut", "--ports", "6000000", "--tiers", "3"],
        vec!["model", "clos-cut", "--down", "40", "--up", "30"],
        vec!["model", "clos-cut", "--down", "40"],
        vec!["model", "clos-cut", "--down", "40", "--up", "20", "--oversubscription", "2:1"],
        vec!["model", "clos-cut", "--oversubscription", "3"],
        vec!["model", "clos-cut", "--job-cards", "99999"],
        vec!["model", "clos-cut", "--port-bandwidth", "-1GB/s"],
    ] {
        let out = railyard(&args);
        assert_ne!(out.code, 0, "{args:?}");
        assert!(!out.stderr.contains("panicked"), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("error"), "{args:?}: {}", out.stderr);
    }
}

/// Real leaves split unevenly: 2:1 on 64 ports is 42 down, 21 up and one port idle;
/// `--down/--up` give the split directly.
#[test]
fn uneven_splits_are_taken_and_the_idle_ports_said() {
    let two_to_one = json(&["model", "clos-cut", "--oversubscription", "2:1", "--format", "json"]);
    assert_eq!((two_to_one["leaf_down"].as_u64(), two_to_one["leaf_up"].as_u64()), (Some(42), Some(21)));
    assert_eq!(two_to_one["leaf_idle"], 1);
    assert_eq!(two_to_one["endpoints"], 64 * 42);
    let md = railyard(&["model", "clos-cut", "--oversubscription", "2:1"]).stdout;
    assert!(md.contains("42 down / 21 up (2:1), 1 port idle"), "{md}");
    let explicit = json(&["model", "clos-cut", "--down", "40", "--up", "20", "--format", "json"]);
    assert_eq!(explicit["leaf_idle"], 4);
    assert_eq!(explicit["spines"], 20);
    assert_eq!(explicit["bisection_bytes_per_sec"].as_f64().unwrap(), 64.0 * 20.0 / 2.0 * 50e9);
}

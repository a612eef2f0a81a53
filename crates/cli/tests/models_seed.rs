//! seed 001 §7.2–§7.5 worked examples through `railyard model NAME --format json`: the
//! default run of every model reproduces the chapter's numbers, to the precision printed.

mod common;
use common::{json, models, railyard};
use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn round(x: f64, digits: i32) -> f64 {
    let s = 10f64.powi(digits);
    (x * s).round() / s
}

fn model(name: &str) -> Value {
    json(&["model", name, "--format", "json"])
}

#[test]
fn message_7_2_2() {
    let o = model("message");
    assert_eq!(round(f(&o["messages"][0]["total_secs"]) * 1e3, 1), 1.3);
    assert_eq!(round(f(&o["messages"][1]["total_secs"]) * 1e6, 1), 5.2);
    assert_eq!(round(f(&o["messages"][1]["startup_fraction"]) * 100.0, 0), 97.0);
    assert_eq!(round(f(&o["crossover_bytes"]), 0), 250000.0);
    assert_eq!(round(f(&o["pipeline_secs"]) * 1e3, 6), 11.0);
    assert_eq!(round(f(&o["pipeline_utilisation"]) * 100.0, 0), 73.0);
    assert_eq!(o["micro_batches_for_target"], 27);
}

#[test]
fn ep_dispatch_7_2_3() {
    let o = model("ep-dispatch");
    let t = |i: usize| f(&o["layouts"][i]["dispatch"]["bottleneck"]["secs"]) * 1e3;
    assert_eq!((round(t(0), 2), round(t(1), 2), round(t(2), 2)), (0.67, 0.08, 1.05));
    assert_eq!(f(&o["layouts"][0]["dispatch"]["total_bytes"]), 32.0 * 1048576.0);
}

#[test]
fn nic_relay_7_2_4() {
    let o = model("nic-relay");
    let ms: Vec<f64> = o["cases"].as_array().unwrap().iter().map(|c| round(f(&c["payload_secs"]) * 1e3, 1)).collect();
    assert_eq!(&ms[..3], &[24.2, 12.1, 8.1]);
    assert_eq!(round(f(&o["crossover_bytes"]) / 1e3, 2), 0.93);
}

#[test]
fn concurrency_7_3_4() {
    let o = model("concurrency");
    assert_eq!(o["slots_needed"], 391);
    let c128 = o["cases"].as_array().unwrap().iter().find(|c| c["slots"] == 128).unwrap();
    assert_eq!(round(f(&c128["slot_bound_bytes_per_sec"]) / 1e9, 1), 16.4);
    assert_eq!(round(f(&c128["effective_bytes_per_sec"]) / 1e9, 1), 13.7);
    assert_eq!(c128["binding"], "issue rate");
}

#[test]
fn remote_read_7_3_3() {
    let o = model("remote-read");
    let ns: Vec<f64> = o["paths"].as_array().unwrap().iter().map(|p| round(f(&p["total_secs"]) * 1e9, 0)).collect();
    assert_eq!(ns, vec![2222.0, 746.0, 419.0, 1572.0]);
    let reuse = &o["reuse"][0];
    assert_eq!(round(f(&reuse["crossover_uses"]), 2), 1.03);
    assert_eq!(round(f(&o["reuse"][1]["crossover_uses"]), 1), 10.3);
}

#[test]
fn connection_state_7_4_2() {
    let o = model("connection-state");
    assert_eq!(round(f(&o["private_bytes"]) / 1048576.0, 2), 8.52);
    assert_eq!(round(f(&o["shared_bytes"]) / 1048576.0, 2), 0.64);
    assert_eq!(o["groups_that_fit"], 3);
    assert_eq!(o["per_pair_overflow_endpoints"], 23);
    assert_eq!(o["shared_overflow_endpoints"], 2428);
}

#[test]
fn dag_7_4_3() {
    let o = model("dag");
    let s = o["schedules"].as_array().unwrap();
    let us = |graph: &str, policy: &str| {
        let x = s.iter().find(|x| x["graph"].as_str().unwrap().starts_with(graph) && x["policy"] == policy).unwrap();
        (round(f(&x["makespan_secs"]) * 1e6, 3), x.clone())
    };
    let (ordered, _) = us("example 7.4: publish", "all-in-order");
    let (required, r) = us("example 7.4: publish", "only-required");
    assert_eq!((ordered, required), (112.0, 102.0));
    let c = r["operations"].as_array().unwrap().iter().find(|o| o["name"] == "C unrelated transfer").unwrap();
    assert_eq!(round(f(&c["finish_secs"]) * 1e6, 3), 10.0);
    assert_eq!(round(f(&o["stale_read"]["corrected_secs"]) * 1e6, 3), 6.0);
}

#[test]
fn slots_7_4_4() {
    let o = model("slots");
    let us = |run: usize, key: &str| round(f(&o["runs"][run][key]) * 1e6, 3);
    assert_eq!(us(0, "transfers_done_secs"), 20.0);
    assert_eq!(us(1, "transfers_done_secs"), 48.0);
    assert_eq!((us(0, "all_released_secs"), us(1, "all_released_secs")), (80.0, 80.0));
}

#[test]
fn queue_7_5_1() {
    let o = model("queue");
    assert_eq!(round(f(&o["scenarios"][0]["peak_bytes"]) / 1e9, 6), 1.0);
    assert_eq!(round(f(&o["scenarios"][0]["drain_secs"]) * 1e3, 6), 20.0);
    assert_eq!(round(f(&o["scenarios"][1]["peak_bytes"]) / 1e6, 3), 250.0);
    assert_eq!(f(&o["scenarios"][2]["peak_bytes"]), 0.0);
    assert_eq!(round(f(&o["mean_utilisation"]), 6), 0.4);
}

#[test]
fn feedback_and_incast_7_5_2() {
    let o = model("feedback");
    assert_eq!(round(f(&o["fill_secs"]) * 1e6, 1), 5.2);
    assert_eq!(round(f(&o["delays"][0]["dropped_bytes"]) / 1e3, 0), 738.0);
    assert_eq!(round(f(&o["drains"][2]["drain_secs"]) * 1e6, 0), 52.0);
    let i = model("incast");
    let rows = i["rows"].as_array().unwrap();
    let delays: Vec<f64> = rows.iter().map(|r| round(f(&r["tolerable_feedback_secs"][0]) * 1e6, 2)).collect();
    assert_eq!(delays, vec![3.5, 1.5, 0.34]);
    let headroom: Vec<f64> = rows.iter().map(|r| f(&r["pfc_headroom_bytes"])).collect();
    assert_eq!(
        (round(headroom[0] / 1e3, 0), round(headroom[1] / 1e3, 0), round(headroom[2] / 1e6, 2)),
        (99.0, 231.0, 1.02)
    );
    assert_eq!(i["largest_group_without_pfc"], serde_json::json!([3, 6]));
}

#[test]
fn ecmp_table_7_5_3() {
    let o = model("ecmp");
    let expected = [
        (8, 32, 1.66, 3, "38.6", 60.1),
        (8, 16, 2.06, 4, "12.1", 48.5),
        (32, 32, 3.53, 6, "1.8e-13", 28.3),
        (32, 16, 4.83, 8, "0", 41.4),
        (128, 16, 13.36, 18, "0", 59.9),
    ];
    for (row, (n, m, e, p99, none, speed)) in o["cases"].as_array().unwrap().iter().zip(expected) {
        assert_eq!((row["flows"].as_u64().unwrap(), row["uplinks"].as_u64().unwrap()), (n, m));
        assert_eq!(round(f(&row["expected_max"]), 2), e, "({n},{m})");
        assert_eq!(row["percentile_max"], p99, "({n},{m})");
        let p = f(&row["no_collision_probability"]);
        let shown = if p == 0.0 {
            "0".to_string()
        } else if p < 1e-3 {
            format!("{p:.1e}")
        } else {
            format!("{:.1}", p * 100.0)
        };
        assert_eq!(shown, none, "({n},{m})");
        assert_eq!(round(f(&row["relative_speed"]) * 100.0, 1), speed, "({n},{m})");
    }
}

#[test]
fn multipath_and_spray_7_5_3() {
    let o = model("multipath");
    let us = |i: usize| f(&o["scenarios"][i]["delivery"]["completion_secs"]) * 1e6;
    assert_eq!((round(us(0), 2), round(us(1), 2), round(us(2), 1)), (1.33, 9.33, 21.2));
    assert_eq!(f(&o["scenarios"][1]["delivery"]["peak_reorder_bytes"]), 12288.0);
    let s = model("spray");
    assert_eq!(round(f(&s["completion_secs"]) * 1e6, 2), 28.97);
    assert_eq!(round(f(&s["peak_reorder_bytes"]) / 1e6, 2), 1.39);
    assert_eq!(s["peak_reorder_packets"], 339);
    assert_eq!(round(f(&s["single_path_secs"]) * 1e6, 1), 168.8);
}

#[test]
fn deadlock_7_5_4() {
    let o = model("deadlock");
    let flags: Vec<bool> = o["graphs"].as_array().unwrap().iter().map(|g| g["deadlocked"].as_bool().unwrap()).collect();
    assert_eq!(flags, vec![true, false, true, false]);
    assert_eq!(o["graphs"][0]["cycles"][0]["agents"], serde_json::json!(["request 1", "request 2"]));
}

#[test]
fn every_model_explains_itself_in_markdown() {
    for m in models() {
        let out = railyard(&["model", m]);
        assert_eq!(out.code, 0, "{m}: {}", out.stderr);
        // A title in the user's words (tests/plain_words.rs: no chapter citations).
        assert!(out.stdout.starts_with("# ") && !out.stdout.contains("seed"), "{m}: {}", out.stdout);
        assert!(out.stdout.contains("|"), "{m} prints a table");
    }
}

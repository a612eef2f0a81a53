//! Scenario files, `--set`, bad inputs and the charts of `railyard model`.

mod common;
use common::{json, models, railyard};
use std::path::PathBuf;

fn scenario(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(format!("{name}.json")).display().to_string()
}

fn temp(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("railyard-model-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Where two JSON documents differ, numbers compared to 1e-9 relative (a JSON round trip
/// of 2e-5 need not give back the same last bit).
fn differs(a: &serde_json::Value, b: &serde_json::Value, at: String) -> Option<String> {
    use serde_json::Value::*;
    match (a, b) {
        (Number(x), Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            ((x - y).abs() > 1e-9 * x.abs().max(y.abs()).max(1e-30)).then(|| format!("{at}: {x} vs {y}"))
        }
        (Array(x), Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (p, q))| differs(p, q, format!("{at}[{i}]")))
        }
        (Object(x), Object(y)) if x.len() == y.len() => x.iter().find_map(|(k, p)| {
            y.get(k).map_or(Some(format!("{at}.{k} missing")), |q| differs(p, q, format!("{at}.{k}")))
        }),
        _ => (a != b).then(|| format!("{at}: {a} vs {b}")),
    }
}

#[test]
fn bundled_scenarios_are_the_defaults() {
    for m in models() {
        let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(scenario(m)).unwrap()).unwrap();
        let defaults = json(&["model", m, "--print-inputs"]);
        assert_eq!(
            file, defaults,
            "scenarios/{m}.json differs from the built-in example; regenerate it with --print-inputs"
        );
        let from_file = json(&["model", m, "--inputs", &scenario(m), "--format", "json"]);
        if let Some(at) = differs(&from_file, &json(&["model", m, "--format", "json"]), String::new()) {
            panic!("{m}: running scenarios/{m}.json differs from the default run at {at}");
        }
    }
}

#[test]
fn other_inputs_stay_right() {
    // Experiment 7-8: 4 KiB requests with T = 4 µs need ⌈50e9·4e-6/4096⌉ = 49 slots.
    let o =
        json(&["model", "concurrency", "--set", "request_bytes=4 KiB", "--set", "slot_secs=4us", "--format", "json"]);
    assert_eq!(o["slots_needed"], 49);
    // Experiment 7-11: a 1 MiB buffer with 256 KiB used tolerates (1 MiB − 256 KiB)/50 GB/s.
    let o = json(&["model", "feedback", "--set", "buffer_bytes=1MiB", "--format", "json"]);
    assert!((o["tolerable_feedback_secs"].as_f64().unwrap() - 786432.0 / 50e9).abs() < 1e-15);
    // Experiment 7-14: 16 flows on 32 uplinks.
    let o = json(&["model", "ecmp", "--set", "cases=[[16,32]]", "--format", "json"]);
    let e = o["cases"][0]["expected_max"].as_f64().unwrap();
    assert!(e > 1.0 && e < 16.0);
}

#[test]
fn bad_scenarios_name_the_field() {
    let good = std::fs::read_to_string(scenario("concurrency")).unwrap();
    let missing = good.replace("\"slot_secs\": 2e-6,", "");
    let wrong_unit = good.replace("\"path_bytes_per_sec\": 50000000000.0", "\"path_bytes_per_sec\": \"50 GiB\"");
    let negative = good.replace("\"request_bytes\": 256.0", "\"request_bytes\": -256");
    let unknown = good.replace("\"slot_secs\"", "\"slot_sec\"");
    for (name, text, needles) in [
        ("missing.json", missing, vec!["slot_secs", "missing"]),
        ("unit.json", wrong_unit, vec!["path_bytes_per_sec", "unknown unit"]),
        ("negative.json", negative, vec!["request_bytes", ">= 0"]),
        ("unknown.json", unknown, vec!["slot_sec"]),
        ("garbage.json", "{ not json".into(), vec!["line 1"]),
    ] {
        let out = railyard(&["model", "concurrency", "--inputs", &temp(name, &text)]);
        assert_ne!(out.code, 0, "{name} should be rejected");
        assert!(!out.stderr.contains("panicked"), "{name}: {}", out.stderr);
        for n in needles {
            assert!(out.stderr.contains(n), "{name}: expected {n:?} in {}", out.stderr);
        }
    }
    for args in [
        vec!["model", "queue", "--set", "egress_bytes_per_sec=0"],
        vec!["model", "queue", "--set", "nosuch=1"],
        vec!["model", "ecmp", "--set", "cases=[[0,4]]"],
        vec!["model", "dag", "--set", "graphs.0.edges=[[\"A write D\",\"nope\"]]"],
        vec!["model", "multipath", "--set", "scenarios.0.split=[1,1]"],
        vec!["model", "message", "--svg", "/tmp/x.svg"],
    ] {
        let out = railyard(&args);
        assert_ne!(out.code, 0, "{args:?}");
        assert!(!out.stderr.contains("panicked"), "{args:?}: {}", out.stderr);
    }
}

fn svg(model: &str) -> String {
    let path = std::env::temp_dir().join(format!("railyard-{model}-{}.svg", std::process::id()));
    let out = railyard(&["model", model, "--svg", path.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    std::fs::read_to_string(path).unwrap()
}

/// (axis labels, series names) of a chart.
fn parse(text: &str) -> (Vec<String>, Vec<String>) {
    let doc = roxmltree::Document::parse(text).expect("well-formed SVG");
    let labels = doc
        .descendants()
        .filter(|n| n.attribute("class").is_some_and(|c| c.starts_with("axis-label")))
        .filter_map(|n| n.text().map(str::to_string))
        .collect();
    let series = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("series"))
        .filter_map(|n| n.attribute("data-name").map(str::to_string))
        .collect();
    (labels, series)
}

#[test]
fn charts_have_axes_with_units_and_series() {
    let (labels, series) = parse(&svg("concurrency"));
    assert!(labels.iter().any(|l| l.contains("slots")));
    assert!(labels.iter().any(|l| l.contains("GB/s")));
    assert_eq!(series.len(), 2);
    assert!(svg("concurrency").contains("391"), "the required slot count is marked");

    let (labels, series) = parse(&svg("remote-read"));
    assert!(labels.iter().any(|l| l.contains("ns")));
    assert!(series.contains(&"PCIe traversal".to_string()) && series.contains(&"wire".to_string()));

    let (labels, series) = parse(&svg("queue"));
    assert!(labels.iter().any(|l| l.contains("ms")) && labels.iter().any(|l| l.contains("MB")));
    assert_eq!(series.len(), 3);

    let (labels, series) = parse(&svg("ecmp"));
    assert!(labels.iter().any(|l| l.contains("L_max")));
    assert_eq!(series.len(), 5);
    assert!(series[2].contains("n=32 m=32"));
}

//! `railyard sim`: the seed's all-reduce simulated beside the model, the trace file,
//! ECMP collisions, and clear errors for bad input.

mod common;
use common::{json, railyard};

#[test]
fn the_seed_all_reduce_simulates_as_the_model_costs_it() {
    let out = json(&["sim", "--algo", "ring,hierarchical,in-network", "--format", "json"]);
    let runs = out["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    // seed 001 example 7.2: ring 7.575 ms, hierarchical 1.3 ms, in-network 1.299 ms.
    for (run, expect) in runs.iter().zip([7.575e-3, 1.300e-3, 1.299e-3]) {
        let sim = run["report"]["jobs"][0]["secs"].as_f64().unwrap();
        let model = run["model_secs"].as_f64().unwrap();
        let barriers = run["other_secs"].as_f64().unwrap();
        assert!((sim - expect).abs() / expect < 1e-3, "{}: {sim}", run["algorithm"]);
        assert!((barriers - model).abs() / model < 1e-3, "{}: {barriers} vs {model}", run["algorithm"]);
        assert!(sim <= barriers * (1.0 + 1e-12));
    }
}

#[test]
fn the_trace_loads_as_chrome_trace_json() {
    let dir = std::env::temp_dir().join(format!("railyard-sim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    let out = railyard(&["sim", "--algo", "hierarchical", "--trace", path.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let transfers = events.iter().filter(|e| e["name"] == "transfer").count();
    let rounds = events.iter().filter(|e| e["ph"] == "X" && e["name"] != "transfer").count();
    // 16 ranks: 7 + 7 intra-server rounds of 16 transfers simulated one by one at least
    // in part, and every one of the 16 rounds on the round track.
    assert_eq!(rounds, 16, "{trace}");
    assert!(transfers >= 16, "{transfers}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Hashing each connection onto one spine can put two on one uplink: never faster
/// than splitting every flow over both.
#[test]
fn ecmp_is_never_faster_than_spraying() {
    let topo = "rail:servers=8,gpus=2,group=2,spines=4";
    let split = json(&["sim", "--topo", topo, "--algo", "ring", "--size", "64MiB", "--format", "json"]);
    let split = split["runs"][0]["report"]["jobs"][0]["secs"].as_f64().unwrap();
    let mut slower = 0;
    for seed in 0..8 {
        let s = seed.to_string();
        let ecmp =
            json(&["sim", "--topo", topo, "--algo", "ring", "--size", "64MiB", "--ecmp", &s, "--format", "json"]);
        let t = ecmp["runs"][0]["report"]["jobs"][0]["secs"].as_f64().unwrap();
        assert!(t >= split * (1.0 - 1e-9), "seed {seed}: {t} < {split}");
        if t > split * 1.01 {
            slower += 1;
        }
    }
    assert!(slower > 0, "no seed made two connections collide");
}

#[test]
fn bad_input_is_a_clear_error() {
    for (args, expect) in [
        (vec!["sim", "--ranks", "17"], "17 ranks"),
        (vec!["sim", "--topo", "nosuch"], "unknown preset"),
        (vec!["sim", "--algo", "bogus"], "unknown algorithm"),
        (vec!["sim", "--algo", "pairwise"], "pairwise"),
        (vec!["sim", "--size", "3B"], "--dtype"),
        (vec!["sim", "--ecmp", "1", "--spray"], "cannot be used with"),
    ] {
        let out = railyard(&args);
        let err = &out.stderr;
        assert!(out.code != 0, "{args:?} succeeded");
        assert!(out.code != 101, "{args:?} panicked: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

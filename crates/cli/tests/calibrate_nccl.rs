//! `railyard calibrate --nccl-tests`: fitted to a published 1-node H100 ring run, the
//! topology it writes loads again, predicts that run's small sizes far closer than
//! NCCL's default latencies do, and predicts a 2-node run of the same cluster (not
//! fitted) at least as well as the defaults; bad requests are errors that name the fix.

mod common;
use common::{json, railyard};
use std::path::PathBuf;

fn repo(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path).display().to_string()
}

fn errors(results: &serde_json::Value, large: bool) -> Vec<f64> {
    results
        .as_array()
        .expect("results")
        .iter()
        .flat_map(|r| r["points"].as_array().expect("points").clone())
        .filter(|p| {
            let bytes = p["bytes"].as_u64().expect("bytes");
            if large {
                bytes >= 64 << 20
            } else {
                bytes <= 1 << 20
            }
        })
        .map(|p| (p["expected"].as_f64().expect("expected") / p["measured"].as_f64().expect("measured") - 1.0).abs())
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty());
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[test]
fn a_one_node_calibration_fits_its_run_and_predicts_two_nodes() {
    let out = std::env::temp_dir().join(format!("railyard-calibrated-{}.toml", std::process::id()));
    let fitted = repo("corpus/nccl-tests/hopper/h100-1n-ring-allreduce-together.txt");
    let check = repo("corpus/nccl-tests/hopper/h100-2n-ib-allreduce-ring-minctas24-nccl-tests-309.txt");
    let out_s = out.display().to_string();
    let report = json(&[
        "calibrate",
        "--nccl-tests",
        &fitted,
        "--topo",
        "dgx-h100",
        "--nccl-algo",
        "Ring",
        "--check",
        &check,
        "-o",
        &out_s,
        "--format",
        "json",
    ]);
    let c = &report["calibration"];
    // The small sizes: nccl-tests' per-call cost is far above NCCL's base latency.
    let (before, after) = (median(errors(&c["before"], false)), median(errors(&c["after"], false)));
    assert!(before > 1.0 && after < 0.1, "small sizes: {before} -> {after}");
    // The bandwidth side stays within a few per cent.
    assert!(median(errors(&c["after"], true)) < 0.05, "{}", c["after"]);
    // The 2-node run was not fitted: its large sizes stay within 12% (a 1-node fit says
    // nothing of the NICs) and its 1 MiB row comes closer with the fitted start-up.
    let large = median(errors(&report["check_after"], true));
    assert!(large < 0.12, "2-node large sizes: {large}");
    let (b2, a2) = (median(errors(&report["check_before"], false)), median(errors(&report["check_after"], false)));
    assert!(a2 < b2, "2-node small sizes: {b2} -> {a2}");
    let call = c["fitted"].as_array().expect("fitted").iter().find(|f| f["field"] == "call (Simple)").expect("call");
    assert!(call["fitted"].as_f64().expect("fitted") > 2.0 * call["default"].as_f64().expect("default"), "{call}");

    // The written topology loads, and plans with the fitted numbers.
    let shown = railyard(&["topo", "validate", &out_s]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let plan = railyard(&["plan", "--topo", &out_s, "--size", "8B", "--algo", "rail-ring"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(std::fs::read_to_string(&out).expect("written").contains("fitted by `railyard calibrate --nccl-tests`"));
    std::fs::remove_file(&out).expect("removed");
}

#[test]
fn bad_calibration_requests_are_errors() {
    let fitted = repo("corpus/nccl-tests/hopper/h100-1n-ring-allreduce-together.txt");
    let no_topo = railyard(&["calibrate", "--nccl-tests", &fitted, "-o", "/dev/null"]);
    assert_eq!(no_topo.code, 2, "{}", no_topo.stdout);
    assert!(no_topo.stderr.contains("--topo"), "{}", no_topo.stderr);
    let missing = railyard(&["calibrate", "--nccl-tests", "/nonexistent.txt", "--topo", "dgx-h100", "-o", "/dev/null"]);
    assert_ne!(missing.code, 0);
    assert!(missing.stderr.contains("/nonexistent.txt"), "{}", missing.stderr);
    // An output path that is not a topology file, and a file given twice.
    let yaml = railyard(&["calibrate", "--nccl-tests", &fitted, "--topo", "dgx-h100", "-o", "/tmp/x.yaml"]);
    assert!(yaml.code != 0 && yaml.stderr.contains(".toml or .json"), "{}", yaml.stderr);
    let twice = railyard(&["calibrate", "--nccl-tests", &fitted, &fitted, "--topo", "dgx-h100", "-o", "/tmp/x.toml"]);
    assert!(twice.code != 0 && twice.stderr.contains("twice"), "{}", twice.stderr);
    // A test railyard has no schedule of NCCL's for.
    let sendrecv = repo("corpus/nccl-tests/other/a100-1n-nvswitch-sendrecv-li-plus.txt");
    let p2p = railyard(&["calibrate", "--nccl-tests", &sendrecv, "--topo", "dgx-a100", "-o", "/tmp/x.toml"]);
    assert!(p2p.code != 0 && p2p.stderr.contains("cannot be fitted"), "{}", p2p.stderr);
    // 16 ranks on a machine whose preset has no node count to grow.
    let two_node = repo("corpus/nccl-tests/hopper/h100-2n-ib-allreduce-ring-minctas24-nccl-tests-309.txt");
    let small = railyard(&["calibrate", "--nccl-tests", &two_node, "--topo", "a100-pcie-control", "-o", "/dev/null"]);
    assert_ne!(small.code, 0, "{}", small.stdout);
}

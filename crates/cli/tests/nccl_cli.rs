//! `railyard analyze nccl-tests` and `railyard explain-nccl` (issue 15): nccl-tests
//! output read and checked against its own definitions, NCCL's tuner reproduced on
//! cases computed by hand from its constants (docs/sources.md#nccl-tuner), verdicts.

mod common;
use common::{json, railyard};
use serde_json::Value;
use std::path::PathBuf;

fn sample(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/nccl-tests").join(name).display().to_string()
}

fn rows(v: &Value) -> &Vec<Value> {
    v["output"]["rows"].as_array().unwrap()
}

/// Seed 000 §8.8.1's three rows (8 ranks, old layout): two print an algbw or busbw their
/// own time does not give; and the 1 GiB busbw of 109.7 GB/s says the run was not 8
/// nodes of one GPU on HDR InfiniBand (25 GB/s): no ring over such NICs can carry it.
#[test]
fn the_seed_sample_and_what_its_busbw_implies() {
    let f = sample("seed-000-8.8.txt");
    let v = json(&["analyze", "nccl-tests", &f, "--collective", "allreduce", "--format", "json"]);
    assert_eq!(v["output"]["ranks"], 8);
    let r = rows(&v);
    assert_eq!(r.len(), 3);
    // 1073741824 B / 17125 us = 62.700 GB/s; x 2·7/8 = 109.73 GB/s.
    let alg = r[2]["in_place"]["algbw_recomputed"].as_f64().unwrap();
    assert!((alg - 1073741824.0 / 17125e3).abs() < 1e-9);
    let agrees: Vec<bool> = r.iter().map(|x| x["out_of_place"]["consistent"].as_bool().unwrap()).collect();
    assert_eq!(agrees, [true, false, false]);
    let hdr = json(&[
        "analyze",
        "nccl-tests",
        &f,
        "--collective",
        "allreduce",
        "--topo",
        "rail:servers=8,gpus=1,nic=25GB/s",
        "--arch",
        "ampere",
        "--format",
        "json",
    ]);
    let sizes = hdr["analysis"]["sizes"].as_array().unwrap();
    assert_eq!(sizes[2]["verdict"], "faster-than-the-model-allows");
    // The bound: the fastest of railyard's algorithms there, an in-network reduction in
    // the leaves, which moves the GiB once up and once down each 25 GB/s NIC: 42.95 ms.
    let bound = sizes[2]["railyard_bound_us"].as_f64().unwrap();
    assert_eq!(sizes[2]["railyard_algorithm"], "in-network");
    assert!((bound / 1e3 - 1073741824.0 / 25e9 * 1e3).abs() < 0.05, "{bound}");
    let md = railyard(&["analyze", "nccl-tests", &f, "--collective", "allreduce"]).stdout;
    assert!(md.contains("2 of 3 rows print an algbw or busbw their own time does not give"), "{md}");
}

/// A 2 x 8 H100 run written from the format: as NCCL's tuner predicts up to 1 MiB, then
/// twice its prediction. NCCL's predictions at these sizes are computed by hand in
/// `explain_nccl_reproduces_the_tuner_by_hand` below (25.26, 38.64, 59.05, 79.65 us; 1 GiB
/// by NVLSTree 66.8 + 1073741824/326400 = 3356.45 us). The verdicts are against
/// railyard's expected time of the algorithm NCCL picks (Tree up to 1 MiB) under
/// railyard's fastest protocol, which up to 1 MiB expects less than the tuner (it charges
/// NCCL's base latency once, not nccl-tests' 20-40 us per call): slow throughout.
#[test]
fn a_curve_that_turns_slow_is_found_where_it_turns() {
    let f = sample("hgx-h100x2-all_reduce_perf.txt");
    // 16 channels of 24 GB/s, as a log's Pattern line would give them.
    let v = json(&[
        "analyze",
        "nccl-tests",
        &f,
        "--topo",
        "hgx-h100x2",
        "--channels",
        "16",
        "--bw-intra",
        "24",
        "--bw-inter",
        "24",
        "--format",
        "json",
    ]);
    assert_eq!(v["output"]["ranks"], 16);
    assert_eq!(v["output"]["ranks_from"], "rank lines");
    assert_eq!(v["output"]["hosts"], serde_json::json!(["nodeA", "nodeB"]));
    assert!(rows(&v).iter().all(|r| r["out_of_place"]["consistent"] == true && r["in_place"]["consistent"] == true));
    // 1 GiB in 8000 us: algbw 134.22 GB/s, busbw x 2·15/16 = 251.66.
    let last = &rows(&v)[4]["out_of_place"];
    assert!((last["busbw_recomputed"].as_f64().unwrap() - 1073741824.0 / 8e6 * 1.875).abs() < 1e-9);
    let verdicts: Vec<&str> =
        v["analysis"]["sizes"].as_array().unwrap().iter().map(|s| s["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["slow", "slow", "slow", "slow", "slow"]);
    // NCCL's Tree up to 1 MiB: railyard's double tree or hierarchical all-reduce.
    let algorithms: Vec<&str> = v["analysis"]["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["railyard_expected_algorithm"].as_str().unwrap())
        .collect();
    assert!(algorithms[..3].iter().all(|a| ["double-tree", "hierarchical"].contains(a)), "{algorithms:?}");
    // Run with one GPU per thread: no word about single-process launch latency.
    let notes = v["analysis"]["notes"].to_string();
    assert!(notes.contains("sizes judged slow are at most 1 MiB") && !notes.contains("-g 1"), "{notes}");
    // A published run of 8 GPUs driven by one thread (-g 8) is told why its small sizes lag.
    let together = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../corpus/nccl-tests/hopper/h100-1n-ring-allreduce-together.txt")
        .display()
        .to_string();
    let g8 =
        json(&["analyze", "nccl-tests", &together, "--topo", "dgx-h100", "--nccl-algo", "Ring", "--format", "json"]);
    assert_eq!(g8["output"]["gpus_per_thread"], 8);
    assert!(g8["analysis"]["notes"].to_string().contains("drives 8 GPUs from each thread (nccl-tests -g 8)"), "{g8}");
    for s in v["analysis"]["sizes"].as_array().unwrap() {
        let ratio = s["measured_us"].as_f64().unwrap() / s["railyard_expected_us"].as_f64().unwrap();
        assert!((s["ratio"].as_f64().unwrap() - ratio).abs() < 1e-12, "{s}");
        assert!(s["railyard_bound_us"].as_f64().unwrap() <= s["railyard_expected_us"].as_f64().unwrap(), "{s}");
    }
    let expected: Vec<f64> = v["analysis"]["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["nccl_expected_us"].as_f64().unwrap() * 100.0).round() / 100.0)
        .collect();
    assert_eq!(expected, [25.26, 38.64, 59.05, 79.65, 3356.45]);
}

/// all_gather_perf: the size column is the whole buffer, busbw = algbw x (n-1)/n.
#[test]
fn all_gather_uses_its_own_factor() {
    let f = sample("hgx-h100x2-all_gather_perf.txt");
    let v = json(&["analyze", "nccl-tests", &f, "--format", "json"]);
    assert_eq!(v["output"]["kind"], "AllGather");
    let r = &rows(&v)[1];
    assert_eq!(
        (r["bytes"].as_u64(), r["count"].as_u64(), r["root"].as_i64()),
        (Some(268435456), Some(4194304), Some(-1))
    );
    // 268435456 / 1500 us = 178.957 GB/s; x 15/16 = 167.77.
    assert!((r["out_of_place"]["busbw_recomputed"].as_f64().unwrap() - 268435456.0 / 1.5e6 * 15.0 / 16.0).abs() < 1e-9);
    assert_eq!(r["out_of_place"]["consistent"], true);
}

#[test]
fn bad_nccl_tests_input_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("railyard-nccl-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text, word) in [
        ("empty.txt", "", "no result rows"),
        ("words.txt", "# Collective test starting: all_reduce_perf\nhello world\n", "no result rows"),
        (
            "short.txt",
            "# Collective test starting: all_reduce_perf\n1024 256 float sum -1 1.0 1.0 1.0 0 1.0 1.0 1.0\n",
            "line 2",
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let out = railyard(&["analyze", "nccl-tests", path.to_str().unwrap(), "--ranks", "2"]);
        assert_eq!(out.code, 2, "{name}");
        assert!(out.stderr.contains(word), "{name}: {}", out.stderr);
    }
    let out = railyard(&["analyze", "nccl-tests", "/dev/urandom", "--collective", "allreduce"]);
    assert_eq!(out.code, 2);
}

fn pick(args: &[&str]) -> (String, f64) {
    let mut all = vec!["explain-nccl", "--format", "json", "--channels", "16", "--bw-intra", "24", "--bw-inter", "24"];
    all.extend_from_slice(args);
    let v = json(&all);
    let n = &v["nccl"];
    (format!("{}/{}", n["algo"].as_str().unwrap(), n["proto"].as_str().unwrap()), n["time_us"].as_f64().unwrap())
}

/// NCCL's choice by hand from its constants: 16 channels of 24 GB/s inside a node and
/// across (given, as a log's Pattern line says them); NVLS on (NVSwitch).
///
/// One node, 8 GPUs (`--ranks 8`): bus = 16 x 24 = 384 GB/s, ring steps 14.
/// Ring LL min(141, 192) x 8/14 = 80.571, lat 6.6 + 14 x 0.6 = 15.0;
/// Ring Simple 384 x 8/14 = 219.43, lat 56.0; Ring LL128 min(353.28, 587.2) x 8/14 = 201.87, lat 40.6;
/// Tree (min(353.28, 619.2)): LL 353.28/3.8 = 92.97 x 0.5 = 46.48, lat 15.2; LL128 x 7/9 x 0.5 = 137.39, lat 31.5;
/// NVLS: min(24 x 0.85 x 15/16 x 2 = 38.25, bwInter 24) = 24 per channel x 16 = 384 x 8/14
/// = 219.43, lat 25.
///   1 KiB: Ring LL 15.0 + 1024/80571 = 15.013; Tree LL 15.2 + 1024/(46484 x 0.9) = 15.224 → Ring/LL.
///   64 KiB: Ring LL 15.0 + 0.813 = 15.813; Tree LL 15.2 + 65536/(46484 x 0.6) = 17.55 → Ring/LL.
///   1 MiB: Ring LL 15.0 + 13.014 = 28.014; NVLS 25 + 1048576/219429 = 29.78 → Ring/LL.
///   256 MiB: NVLS 25 + 1223.3 = 1248.3; Ring Simple 56 + 1223.3 = 1279.3 → NVLS/Simple.
///   256 MiB with NCCL_ALGO=^NVLS: Ring Simple 1279.3; Ring LL128 40.6 + 1329.7;
///     Tree Simple 64.4 + 268435456/(176640 x 0.9) = 1752.9 → Ring/Simple.
///
/// Two nodes (hgx-h100x2, 16 ranks): bw = bwIntra (2 nodes), ring steps 30, 2 of them across.
/// Tree LL min(92.97, 39 [Intel, N2]) x 0.5 = 19.5, lat 6.8 + 2(7 x 0.6 + 5.0) = 25.2;
/// Tree LL128 353.28 x 120/128 x 0.5 = 165.6, lat 14 + 2(7 x 1.25 + 8.5) = 48.5;
/// Ring LL128 188.42, lat 14 + 28 x 1.9 + 2 x 4.0 = 75.2; Ring Simple 204.8,
/// lat 8.4 + 28 x 3.4 + 2 x 14 = 131.6 (x 1.4 at these sizes: 184.24);
/// NVLSTree min(38.25, 48, 57.7) x 16 x 16/30 = 326.4, lat 25 + 2 x 20.9 = 66.8.
///   1 KiB: Tree LL 25.2 + 1024/(19500 x 0.9) = 25.258 → Tree/LL.
///   128 KiB: Tree LL 25.2 + 131072/(19500 x 0.5) = 38.64; Ring LL 40 + 6.3 → Tree/LL.
///   1 MiB: Tree LL128 48.5 + 1048576/(165600 x 0.6) = 59.05; NVLSTree 66.8 + 3.21 = 70.01 → Tree/LL128.
///   4 MiB: NVLSTree 66.8 + 12.85 = 79.65; Tree LL128 48.5 + 4194304/(165600 x 0.8) = 80.16 → NVLSTree/Simple.
///   1 GiB with NVLS off: Ring Simple 184.24 + 1073741824/204800 = 5427.1; Ring LL128 75.2 + 5698.8 → Ring/Simple.
#[test]
fn explain_nccl_reproduces_the_tuner_by_hand() {
    let one = |size: &str, extra: &[&str]| {
        let mut a = vec!["--ranks", "8", "--size", size];
        a.extend_from_slice(extra);
        pick(&a)
    };
    let close = |(name, t): (String, f64), want: &str, us: f64| {
        assert_eq!(name, want);
        assert!((t - us).abs() < 0.01, "{want}: {t} vs {us}");
    };
    close(one("1KiB", &[]), "Ring/LL", 15.0 + 1024.0 / 80571.428571);
    close(one("64KiB", &[]), "Ring/LL", 15.0 + 65536.0 / 80571.428571);
    close(one("1MiB", &[]), "Ring/LL", 15.0 + 1048576.0 / 80571.428571);
    close(one("256MiB", &[]), "NVLS/Simple", 25.0 + 268435456.0 / 219428.571428);
    close(one("256MiB", &["--nccl-algo", "^NVLS"]), "Ring/Simple", 56.0 + 268435456.0 / 219428.571428);
    let two = |size: &str, extra: &[&str]| {
        let mut a = vec!["--size", size];
        a.extend_from_slice(extra);
        pick(&a)
    };
    close(two("1KiB", &[]), "Tree/LL", 25.2 + 1024.0 / (19500.0 * 0.9));
    close(two("128KiB", &[]), "Tree/LL", 25.2 + 131072.0 / (19500.0 * 0.5));
    close(two("1MiB", &[]), "Tree/LL128", 48.5 + 1048576.0 / (165600.0 * 0.6));
    close(two("4MiB", &[]), "NVLSTree/Simple", 66.8 + 4194304.0 / 326400.0);
    close(two("1GiB", &["--nvls", "off"]), "Ring/Simple", 131.6 * 1.4 + 1073741824.0 / 204800.0);
    // The sweep says where the choice changes.
    let md =
        railyard(&["explain-nccl", "--channels", "16", "--bw-intra", "24", "--bw-inter", "24", "--sweep", "8B:4GiB"])
            .stdout;
    assert!(md.contains("Tree/LL128 → NVLSTree/Simple at 4 MiB"), "{md}");
}

#[test]
fn explain_nccl_refuses_what_nccl_would_not_run() {
    for (args, word) in [
        (vec!["explain-nccl", "--collective", "alltoall"], "not alltoall"),
        (vec!["explain-nccl", "--nccl-algo", "warp"], "warp"),
        (vec!["explain-nccl", "--collective", "broadcast", "--nccl-algo", "tree"], "leave no algorithm"),
        (vec!["explain-nccl", "--channels", "0"], "channels"),
        (vec!["explain-nccl", "--bw-intra", "-3"], "bw-intra"),
        (vec!["explain-nccl", "--sweep", "4GiB:8B"], "FROM"),
        (vec!["explain-nccl", "--ranks", "0"], "ranks"),
        (vec!["explain-nccl", "--ranks", "1"], "ranks"),
    ] {
        let out = railyard(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stdout);
        assert!(out.stderr.contains(word), "{args:?}: {}", out.stderr);
    }
}

/// A 2 x 8 GPU NCCL INFO log written from the documented line formats: 16 ranks on two
/// hosts, two ring channels of one order, a chain tree per node joined across nodes
/// (rank 0 over 8 on channel 0, 8 over 0 on channel 1), P2P inside a node and IB across.
#[test]
fn an_nccl_log_gives_back_its_rings_and_trees_as_checked_schedules() {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/nccl-log/hgx-2x8.log").display().to_string();
    let v = json(&["analyze", "nccl-log", &f, "--format", "json"]);
    let log = &v["log"];
    assert_eq!(
        (log["ranks"].as_u64(), log["nodes"].as_u64(), log["local_ranks"].as_u64()),
        (Some(16), Some(2), Some(8))
    );
    assert_eq!(log["version"], "2.18.3+cuda12.2");
    assert_eq!(log["rank_info"].as_array().unwrap().len(), 16);
    let r = &v["report"];
    let rings = r["rings"].as_array().unwrap();
    assert_eq!(rings.len(), 1, "both channels use one order");
    assert_eq!(rings[0]["channels"], serde_json::json!([0, 1]));
    assert_eq!(rings[0]["checked"], true);
    // 16 ranks on 2 x 8 with 50 GB/s NICs: the ring is NIC-bound, example 7.2's 7.575 ms.
    assert!((rings[0]["secs"].as_f64().unwrap() * 1e3 - 7.575).abs() < 0.001);
    assert_eq!(r["trees"]["trees"], 2);
    assert_eq!(r["trees"]["checked"], true);
    assert_eq!(r["transports"], serde_json::json!([["P2P/IPC", 28], ["NET/IB", 4]]));
    // Channels 0 and 1 share one order: together they take what it takes alone.
    assert_eq!(r["rings_together"]["channels"], serde_json::json!([0, 1]));
    assert!((r["rings_together"]["secs"].as_f64().unwrap() * 1e3 - 7.575).abs() < 0.001);
    // The tuning lines (computed by hand from the constants with the log's own graph:
    // 2 channels x 24 GB/s, 16 ranks on 2 nodes) are what the tuner reproduces.
    for c in r["choices"].as_array().unwrap() {
        assert_eq!(c["same"], true, "{c}");
    }
    assert_eq!(r["choices"][1]["logged"], "Ring/Simple");
    // Cut after the first 30 lines: ranks 0-13 said who they are, some trees are missing.
    let text = std::fs::read_to_string(&f).unwrap();
    let cut: String = text.lines().take(30).map(|l| format!("{l}\n")).collect();
    let dir = std::env::temp_dir().join(format!("railyard-nccl-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cut.log");
    std::fs::write(&path, cut + "nodeA:5000:50 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1\n").unwrap();
    let v = json(&["analyze", "nccl-log", path.to_str().unwrap(), "--format", "json"]);
    assert!(v["report"]["tree_problems"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p.as_str().unwrap().contains("no Trees line from ranks")));
    assert!(!v["log"]["unreadable"].as_array().unwrap().is_empty());
    // Not a log at all.
    std::fs::write(dir.join("words.log"), "hello\nworld\n").unwrap();
    let out = railyard(&["analyze", "nccl-log", dir.join("words.log").to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("no NCCL INFO line"), "{}", out.stderr);
}

fn msccl(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/msccl").join(name).display().to_string()
}

/// msccl-tools' 8-GPU ring all-reduce imports as a 14-round schedule the checker proves,
/// costs as railyard's own ring does on one HGX node where MSCCL moves it in one pass,
/// and enters plan's table; a copy with one receive-reduce-send turned into
/// receive-copy-send is refused with the element named.
#[test]
fn an_msccl_all_reduce_is_checked_costed_and_planned() {
    let ring = msccl("allreduce_ring_8gpu.xml");
    let v = json(&["schedule", "import", "--msccl", &ring, "--size", "1MiB", "--format", "json"]);
    let c = &v["costed"];
    assert_eq!((v["gpus"].as_u64(), v["chunks"].as_u64(), c["rounds"].as_u64()), (Some(8), Some(8), Some(14)));
    let ours = c["railyard"].as_array().unwrap().iter().find(|x| x[0] == "ring").unwrap()[1].as_f64().unwrap();
    assert!((c["secs"].as_f64().unwrap() - ours).abs() < 1e-12, "{v}");
    // At 192 MiB its chunks of 24 MiB take 44 LL128 passes of 576,000 B; a thread block
    // starts a pass when it ends the one before, so the rounds add up past one ring's.
    let v = json(&["schedule", "import", "--msccl", &ring, "--format", "json"]);
    let c = &v["costed"];
    assert_eq!((c["passes"].as_u64(), c["pass_bytes"].as_u64()), (Some(44), Some(576_000)), "{v}");
    let ours = c["railyard"].as_array().unwrap().iter().find(|x| x[0] == "ring").unwrap()[1].as_f64().unwrap();
    assert!(c["rounds"].as_u64().unwrap() > 14 * 2 && c["secs"].as_f64().unwrap() > ours, "{v}");
    let plan = json(&["plan", "--ranks", "8", "--algo", &format!("ring,{ring}"), "--format", "json"]);
    let names: Vec<&str> = plan["algorithms"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ring", "msccl:allreduce_ring_8channelsperring"]);
    // Imported means proved: a program the checker refuses is an error (below).
    let pairs = json(&["schedule", "import", "--msccl", &msccl("allreduce_allpairs_8gpu.xml"), "--format", "json"]);
    assert_eq!(pairs["gpus"].as_u64(), Some(8));

    let dir = std::env::temp_dir().join(format!("railyard-msccl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let broken = dir.join("broken.xml");
    std::fs::write(&broken, std::fs::read_to_string(&ring).unwrap().replacen(r#"type="rrs""#, r#"type="rcs""#, 1))
        .unwrap();
    let b = broken.to_str().unwrap();
    let out = railyard(&["schedule", "import", "--msccl", b]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("checker refuses it") && out.stderr.contains("element"), "{}", out.stderr);
    let out = railyard(&["plan", "--ranks", "8", "--algo", b]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("the checker refuses it"), "{}", out.stderr);
    let out = railyard(&["plan", "--algo", &ring]);
    assert!(out.stderr.contains("written for 8 GPUs"), "{}", out.stderr);
    // An MSCCL program runs under the protocol it names: all-pairs says LL, so at 64 MiB
    // it is costed with LL's half payload where the ring takes Simple.
    let pairs = msccl("allreduce_allpairs_8gpu.xml");
    let plan = json(&[
        "plan",
        "--topo",
        "dgx-h100",
        "--algo",
        &format!("{pairs},ring"),
        "--size",
        "64MiB",
        "--format",
        "json",
    ]);
    let protocol_of = |name: &str| {
        plan["algorithms"].as_array().unwrap().iter().find(|a| a["name"] == name).unwrap()["protocol"].clone()
    };
    assert_eq!((protocol_of("msccl:allreduce_pairs"), protocol_of("ring")), ("LL".into(), "Simple".into()));
    // Proved on any machine; costed only on one large enough, and the output says so.
    let small = json(&["schedule", "import", "--msccl", &ring, "--topo", "rail:servers=1,gpus=4", "--format", "json"]);
    assert!(small["costed"].is_null(), "{small}");
    assert!(small["not_costed"].as_str().unwrap().contains("at least 8 GPUs"), "{small}");
}

fn corpus_msccl(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus/msccl").join(name).display().to_string()
}

/// msccl-tools' solver writes its broadcasts and reduces as coll="custom": refused
/// without a collective, saying what to name; read as a broadcast, the root the program
/// has (the GPU that never receives: 1) is found and the program proved; plan refuses
/// it for another root; the solver's reduce, which writes an input buffer, is refused.
#[test]
fn custom_msccl_programs_are_read_as_the_collective_named() {
    let bcast = corpus_msccl("sccl-ring4-broadcast-root1-s2.xml");
    let out = railyard(&["schedule", "import", "--msccl", &bcast, "--topo", "rail:servers=1,gpus=4"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("coll=\"custom\"") && out.stderr.contains("name the collective"), "{}", out.stderr);
    let v = json(&[
        "schedule",
        "import",
        "--msccl",
        &bcast,
        "--topo",
        "rail:servers=1,gpus=4",
        "--collective",
        "broadcast",
        "--format",
        "json",
    ]);
    assert_eq!((v["collective"].as_str(), v["gpus"].as_u64()), (Some("broadcast"), Some(4)), "{v}");
    let plan = |root: &str| {
        railyard(&[
            "plan",
            "--topo",
            "rail:servers=1,gpus=4",
            "--ranks",
            "4",
            "--collective",
            "broadcast",
            "--root",
            root,
            "--algo",
            &bcast,
        ])
    };
    let wrong_root = plan("0");
    assert!(wrong_root.stderr.contains("its root is rank 1, the plan's is 0"), "{}", wrong_root.stderr);
    assert_eq!(plan("1").code, 0);
    let reduce = corpus_msccl("sccl-ring4-reduce-root2-s2.xml");
    let out = railyard(&[
        "schedule",
        "import",
        "--msccl",
        &reduce,
        "--topo",
        "rail:servers=1,gpus=4",
        "--collective",
        "reduce",
    ]);
    assert!(out.stderr.contains("read as reduce") && out.stderr.contains("overwritten"), "{}", out.stderr);
}

/// railyard's ring written as MSCCL XML reads back as a correct 14-round program that
/// costs what the ring costs.
#[test]
fn our_ring_exports_to_msccl_and_back() {
    let dir = std::env::temp_dir().join(format!("railyard-msccl-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ring8.xml");
    let p = path.to_str().unwrap();
    let out = railyard(&["schedule", "export", "--msccl", "--algo", "ring", "--ranks", "8", "-o", p]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // 8 MiB: chunks of 1 MiB, one Simple pass of MSCCL's loop.
    let v = json(&["schedule", "import", "--msccl", p, "--size", "8MiB", "--format", "json"]);
    let c = &v["costed"];
    assert_eq!((c["rounds"].as_u64(), c["passes"].as_u64(), v["in_place"].as_bool()), (Some(14), Some(1), Some(false)));
    let ring = c["railyard"].as_array().unwrap().iter().find(|x| x[0] == "ring").unwrap()[1].as_f64().unwrap();
    assert!((c["secs"].as_f64().unwrap() / ring - 1.0).abs() < 1e-9, "{v}");
    let out = railyard(&["schedule", "export", "--algo", "ring"]);
    assert!(out.stderr.contains("--msccl"), "{}", out.stderr);
}

/// What cluster scripts write: two tests in one file, an INFO line between rows. Each
/// is read and analyzed as its own, in the file's order.
#[test]
fn a_file_of_several_tests_is_read_as_several() {
    let reduce = std::fs::read_to_string(sample("hgx-h100x2-all_reduce_perf.txt")).unwrap();
    let gather = std::fs::read_to_string(sample("hgx-h100x2-all_gather_perf.txt")).unwrap();
    let mut lines: Vec<&str> = reduce.lines().collect();
    let first_row = lines.iter().position(|l| !l.starts_with('#') && l.split_whitespace().count() >= 12).unwrap();
    lines.insert(first_row + 1, "nodeA:1:1 [0] NCCL INFO Channel 00/02 :    0   1   2");
    let text = format!("{}\n{gather}", lines.join("\n"));
    let dir = std::env::temp_dir().join(format!("railyard-concat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("both.txt");
    std::fs::write(&path, text).unwrap();
    let f = path.to_str().unwrap();
    let v = json(&["analyze", "nccl-tests", f, "--topo", "hgx-h100x2", "--format", "json"]);
    let tests = v["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 2);
    assert_eq!(tests[0]["output"]["kind"], "AllReduce");
    assert_eq!(tests[1]["output"]["kind"], "AllGather");
    // The same rows as each file alone.
    let alone = json(&["analyze", "nccl-tests", &sample("hgx-h100x2-all_gather_perf.txt"), "--format", "json"]);
    assert_eq!(tests[1]["output"]["rows"].as_array().unwrap().len(), rows(&alone).len());
    assert!(tests[1]["analysis"]["sizes"].as_array().is_some_and(|s| !s.is_empty()));
    let out = railyard(&["analyze", "nccl-tests", f]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("holds 2 tests, one after another: all_reduce_perf, all_gather_perf"),
        "{}",
        out.stdout
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The published NCCL logs and topology files of `corpus/` (sources in each
/// SOURCES.toml) read without hints, each in seconds: every log yields what it holds
/// (exit 0), every topology file imports or, a skeleton without GPUs, says so.
#[test]
fn the_published_logs_and_topology_files_read() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    let files = |dir: &str, ext: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(corpus.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == ext))
            .collect();
        v.sort();
        v
    };
    let logs = files("nccl-log", "log");
    assert!(logs.len() >= 30, "{} logs", logs.len());
    for f in &logs {
        let started = std::time::Instant::now();
        let out = railyard(&["analyze", "nccl-log", f.to_str().unwrap(), "--format", "json"]);
        assert_eq!(out.code, 0, "{}: {}", f.display(), out.stderr);
        assert!(started.elapsed().as_secs() < 10, "{}", f.display());
    }
    let xmls = files("topology-xml", "xml");
    assert!(xmls.len() >= 10, "{} topology files", xmls.len());
    for f in &xmls {
        let out = railyard(&["topo", "import", "--nccl-xml", f.to_str().unwrap()]);
        assert!(out.code == 0 || out.stderr.contains("skeleton"), "{}: {}", f.display(), out.stderr);
    }
}

/// Users pick MSCCL programs by size range: a sweep costs a program beside the built-in
/// algorithms at every size MSCCL would run it (its minBytes..maxBytes, a whole element
/// per chunk), and shows `-` elsewhere; asked for alone outside its range, it says why.
#[test]
fn msccl_programs_sweep_over_their_size_range() {
    let ring = std::fs::read_to_string(msccl("allreduce_ring_8gpu.xml")).unwrap();
    let ranged = ring.replacen("<algo ", "<algo minBytes=\"1024\" maxBytes=\"2097152\" ", 1);
    let dir = std::env::temp_dir().join(format!("railyard-msccl-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ranged.xml");
    std::fs::write(&path, ranged).unwrap();
    let algo = format!("ring,{}", path.display());
    let v = json(&[
        "plan",
        "--topo",
        "hgx-h100x2",
        "--ranks",
        "8",
        "--algo",
        &algo,
        "--sweep",
        "512B:8MiB",
        "--sweep-factor",
        "4",
        "--format",
        "json",
    ]);
    let series = v["series"].as_array().unwrap();
    let program = series.iter().find(|s| s["algorithm"].as_str().unwrap().starts_with("msccl:")).unwrap();
    let sizes: Vec<u64> = program["points"].as_array().unwrap().iter().map(|p| p["bytes"].as_u64().unwrap()).collect();
    assert_eq!(sizes, [2048, 8192, 32768, 131072, 524288, 2097152]);
    let out =
        railyard(&["plan", "--topo", "hgx-h100x2", "--ranks", "8", "--algo", path.to_str().unwrap(), "--size", "8MiB"]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("MSCCL runs this program from 1 KiB to 2 MiB"), "{}", out.stderr);
    std::fs::remove_dir_all(&dir).ok();
}

/// 128 ranks over two 72-GPU racks (OCI's 32 GB200 trays, 64 GPUs a rack): placed from
/// the first GPU on, 72 and 56 per rack, which NCCL's tuner cannot take, and the refusal
/// says how to place them; `--placement interleaved` spreads them 64 and 64 and judges.
/// (The run's first two sizes: every size plans 128 ranks.)
#[test]
fn analyze_takes_a_placement() {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../corpus/nccl-tests/other/gb200-32n-2rack-allreduce-oci-oke.txt");
    let head: Vec<String> = std::fs::read_to_string(full).unwrap().lines().take(8).map(String::from).collect();
    let file = std::env::temp_dir().join(format!("railyard-analyze-placement-{}.txt", std::process::id()));
    std::fs::write(&file, head.join("\n") + "\n").unwrap();
    let file = file.display().to_string();
    let base =
        ["analyze", "nccl-tests", &file, "--collective", "allreduce", "--topo", "gb200-nvl72:nodes=2,fabric=roce"];
    let uneven = railyard(&base);
    assert_ne!(uneven.code, 0, "{}", uneven.stdout);
    assert!(uneven.stderr.contains("[72, 56]") && uneven.stderr.contains("--placement"), "{}", uneven.stderr);
    let v = json(&[&base[..], &["--placement", "interleaved", "--format", "json"]].concat());
    let _ = std::fs::remove_file(&file);
    assert_eq!(v["analysis"]["sizes"].as_array().unwrap().len(), 2);
    assert_eq!(v["shape"]["input"]["nodes"], 2);
}

//! `railyard plan-training` reproduces the chapter's worked examples from its bundled
//! scenario (seed 001 §7.1.1, example 7.1, §7.6.1–§7.6.4), changes its answers as the
//! chapter says when an input changes, draws its charts, and refuses bad scenarios
//! with the field named.

mod common;
use common::{json, railyard};
use serde_json::Value;

/// `x` rounded to `digits` decimals, as the seed prints it.
fn r(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn bundled() -> Value {
    json(&["plan-training", "--examples", "--format", "json"])
}

fn scenario_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("railyard-plan-training-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn memory_and_placement_of_section_7_1_1() {
    let v = bundled();
    let m = v["memory"].as_array().unwrap();
    // 8B at 16 B/parameter: 128 GB on two 80 GB cards, 32 GB left.
    assert_eq!((f(&m[0]["bytes"]), f(&m[0]["gpus"]), f(&m[0]["free_bytes"])), (128e9, 2.0, 32e9));
    // 284B: about 4.5 TB.
    assert_eq!(r(f(&m[1]["bytes"]) / 1e12, 1), 4.5);
    // 1.6T and 2.8T at 0.5 B: 800 GB and 1.4 TB, at least 2 and 3 servers of 8 x 80 GB.
    assert_eq!((f(&m[2]["bytes"]), f(&m[2]["servers"])), (800e9, 2.0));
    assert_eq!((f(&m[3]["bytes"]), f(&m[3]["servers"])), (1.4e12, 3.0));
}

#[test]
fn example_7_1_more_cards_against_a_fixed_cut() {
    let v = bundled();
    let s = &v["scaling"];
    assert_eq!(r(f(&s["comm"]["secs"]) * 1e3, 1), 7.5);
    let row = |x: f64| s["rows"].as_array().unwrap().iter().find(|row| f(&row["multiple"]) == x).unwrap().clone();
    let ms = |row: &Value, k: &str| r(f(&row[k]) * 1e3, 1);
    assert_eq!((ms(&row(1.0), "sequential_secs"), ms(&row(1.0), "overlapped_secs")), (27.5, 20.0));
    assert_eq!((ms(&row(2.0), "sequential_secs"), ms(&row(2.0), "overlapped_secs")), (17.5, 10.0));
    assert_eq!((ms(&row(4.0), "sequential_secs"), ms(&row(4.0), "overlapped_secs")), (12.5, 7.5));
    // 20/x = 7.5: x ≈ 2.6 (2.65 with the unrounded 7.55 ms).
    let x = f(&s["crossover_multiple"]);
    assert!((x - 2.6).abs() < 0.05, "{x}");
}

#[test]
fn example_7_6_six_timelines_from_one_formula() {
    let v = bundled();
    let t = v["step"]["timelines"].as_array().unwrap();
    let steps: Vec<f64> = t.iter().map(|l| r(f(&l["step_secs"]) * 1e3, 1)).collect();
    assert_eq!(steps, vec![29.6, 23.3, 24.3, 26.6, 22.0, 23.8]);
    // The hierarchical communication hides behind compute when ready by 18.7 ms.
    assert_eq!(r(f(&t[1]["latest_hidden_ready_secs"]) * 1e3, 1), 18.7);
    // 128 requests of 256 B per 2 us cap each NIC at 16.4 GB/s.
    assert_eq!(r(f(&t[2]["comm"]["nic_bytes_per_sec"]) / 1e9, 1), 16.4);
    // Communication 83% shorter, the step only 21% (Amdahl).
    assert_eq!(r(1.0 - f(&t[1]["comm"]["secs"]) / f(&t[0]["comm"]["secs"]), 2), 0.83);
    assert_eq!(r(1.0 - 1.0 / f(&t[1]["step_speedup"]), 2), 0.21);
    // One NIC: the hierarchical all-reduce takes about 4.8 ms and ends at 21.8 ms.
    assert_eq!(r(f(&t[5]["comm"]["secs"]) * 1e3, 1), 4.8);
    assert_eq!(r(f(&t[5]["comm_end_secs"]) * 1e3, 1), 21.8);
    assert!(t[5]["comm"]["source"].as_str().unwrap().contains("nics=1"));
}

#[test]
fn the_simulator_times_the_same_timelines() {
    let m = bundled();
    let s = json(&["plan-training", "--examples", "--format", "json", "--engine", "sim"]);
    assert_eq!(s["engine"], "sim");
    for (a, b) in m["step"]["timelines"].as_array().unwrap().iter().zip(s["step"]["timelines"].as_array().unwrap()) {
        let (x, y) = (f(&a["step_secs"]), f(&b["step_secs"]));
        assert!((x - y).abs() / x < 0.02, "{}: model {x} vs sim {y}", a["name"]);
        assert!(b["comm"]["source"].as_str().unwrap().contains("simulator"));
    }
}

#[test]
fn readiness_skew_of_section_7_6_1() {
    let v = bundled();
    let c = v["readiness"]["cases"].as_array().unwrap();
    let finish: Vec<f64> = c.iter().map(|c| r(f(&c["finish_secs"]) * 1e3, 1)).collect();
    assert_eq!(finish, vec![2.4, 2.2, 0.4]);
}

#[test]
fn latency_bound_vs_bandwidth_bound_of_section_7_6_3() {
    let v = bundled();
    let l = &v["latency"];
    let var = l["variants"].as_array().unwrap();
    let (base, fast, short) = (&var[0], &var[1], &var[2]);
    // 14 rounds x 5 us = 70 us; payload equals start-up at 2 MB.
    assert_eq!(r(f(&base["startup_secs"]) * 1e6, 1), 70.0);
    assert_eq!(r(f(&base["crossover_bytes"]) / 1e6, 2), 2.0);
    // 8 MiB: 364 -> 168 us with 3x bandwidth; 8 KiB: 70.3 -> 70.1 us.
    assert_eq!(r(f(&base["secs"][1]) * 1e6, 0), 364.0);
    assert_eq!(r(f(&fast["secs"][1]) * 1e6, 0), 168.0);
    assert_eq!((r(f(&base["secs"][0]) * 1e6, 1), r(f(&fast["secs"][0]) * 1e6, 1)), (70.3, 70.1));
    // 72 all-reduces of 8 KiB: about 5.1 ms either way (14 us apart); 2 us start-up saves 3.0 ms.
    assert_eq!(r(f(&base["repeated_secs"]) * 1e3, 1), 5.1);
    assert_eq!(r((f(&base["repeated_secs"]) - f(&fast["repeated_secs"])) * 1e6, 0), 14.0);
    assert_eq!(r((f(&base["repeated_secs"]) - f(&short["repeated_secs"])) * 1e3, 1), 3.0);
    // Tail: mean 0.52 ms, p99 2.4 -> 2.2 -> 10.4 ms.
    let t = v["tail"].as_array().unwrap();
    assert_eq!(r(f(&t[0]["mean_secs"]) * 1e3, 2), 0.52);
    let p99: Vec<f64> = t.iter().map(|t| r(f(&t["quantile_secs"]) * 1e3, 1)).collect();
    assert_eq!(p99, vec![2.4, 2.2, 10.4]);
    // KV migration at 25 GB/s: 18.425 and 4.666 ms, 13.759 ms saved.
    let m = v["migration"].as_array().unwrap();
    assert_eq!((r(f(&m[0]["secs"]) * 1e3, 3), r(f(&m[1]["secs"]) * 1e3, 3)), (18.425, 4.666));
    assert_eq!(r(f(&m[1]["saved_secs"]) * 1e3, 3), 13.759);
}

fn rows(v: &Value, network: usize) -> Vec<Value> {
    v["supernode"]["networks"][network]["rows"].as_array().unwrap().clone()
}

#[test]
fn the_1024_gpu_super_node_table_of_section_7_6_4() {
    let v = bundled();
    let step = |rows: &[Value]| rows.iter().map(|p| r(f(&p["step_secs"]), 3)).collect::<Vec<_>>();
    let wan = |rows: &[Value]| rows.iter().map(|p| r(f(&p["tokens_per_sec"]) / 1e4, 1)).collect::<Vec<_>>();
    let (grows, capped) = (rows(&v, 0), rows(&v, 1));
    assert_eq!(step(&grows), vec![0.939, 0.690, 0.672, 0.663]);
    assert_eq!(wan(&grows), vec![111.7, 152.0, 156.0, 158.1]);
    assert_eq!(step(&capped), vec![0.939, 0.939, 0.935, 0.896]);
    assert_eq!(wan(&capped), vec![111.7, 111.7, 112.2, 117.1]);
    // Per super-node egress bytes: 127, 120, 112, 96 GB.
    let egress: Vec<f64> = grows.iter().map(|p| r(f(&p["gradient"]["egress_bytes"]) / 1e9, 0)).collect();
    assert_eq!(egress, vec![127.0, 120.0, 112.0, 96.0]);
    // Capped at 64 cards: hierarchical 31.1 + 300.0 = 331.1 ms loses to the ring's 317.7 ms.
    let g = &capped[1]["gradient"];
    assert_eq!((r(f(&g["hierarchical_secs"]) * 1e3, 1), r(f(&g["flat_ring_secs"]) * 1e3, 1)), (331.1, 317.7));
    assert_eq!((r(f(&g["local_secs"]) * 1e3, 1), r(f(&g["egress_secs"]) * 1e3, 1)), (31.1, 300.0));
    assert_eq!(g["chosen"], "flat ring");
    assert_eq!(grows[1]["gradient"]["chosen"], "hierarchical");
    // 8 cards: 0.318 s of gradient; 64 cards: about 69 ms.
    assert_eq!(r(f(&grows[0]["gradient"]["secs"]) * 1e3, 0), 318.0);
    assert_eq!(r(f(&grows[1]["gradient"]["secs"]) * 1e3, 0), 69.0);
    // Compute 0.485 s; TP all-reduces 0.086 s.
    assert_eq!((r(f(&grows[0]["compute_secs"]), 3), r(f(&grows[0]["tp_secs"]), 3)), (0.485, 0.086));
    // NVLink at 900 GB/s: 0.614 s and 170.9 x 10^4 tokens/s at 128 cards.
    let fast = rows(&v, 2);
    assert_eq!((r(f(&fast[2]["step_secs"]), 3), r(f(&fast[2]["tokens_per_sec"]) / 1e4, 1)), (0.614, 170.9));
}

#[test]
fn tp_candidates_and_recovery_of_section_7_6_4() {
    let v = bundled();
    let tp: Vec<f64> =
        v["supernode"]["tp_candidates"].as_array().unwrap().iter().map(|p| r(f(&p["step_secs"]), 3)).collect();
    assert_eq!(tp, vec![0.672, 0.753, 0.942, 1.333]);
    let rec = v["supernode"]["recovery"].as_array().unwrap();
    assert_eq!((f(&rec[0]["recovery_secs"]), f(&rec[1]["recovery_secs"])), (188.0, 316.0));
    assert_eq!((r(f(&rec[0]["overhead"]) * 100.0, 1), r(f(&rec[1]["overhead"]) * 100.0, 1)), (3.4, 3.8));
    let eff = |i: usize| r(f(&rec[i]["effective_tokens_per_sec"]) / 1e4, 1);
    assert_eq!((eff(0), eff(1)), (150.9, 152.3));
}

#[test]
fn oversubscription_3_to_1_triples_the_cross_domain_term() {
    // seed 001 §7.1.2 / §7.6.4: 3:1 at S = 128 takes the cross-domain term from about
    // 17.5 ms to 52.5 ms and the step up by about 35 ms.
    let base = railyard_bundled_supernode();
    let three = base.replace("name = \"egress grows with S\"", "name = \"egress grows with S\"\noversubscription = 3");
    assert_ne!(base, three);
    let path = scenario_file("oversubscribed.toml", &three);
    let v = json(&["plan-training", "--format", "json", "--scenario", path.to_str().unwrap()]);
    let before = &bundled()["supernode"]["networks"][0]["rows"][2];
    let after = &v["supernode"]["networks"][0]["rows"][2];
    assert_eq!(r(f(&before["gradient"]["egress_secs"]) * 1e3, 1), 17.5);
    assert_eq!(r(f(&after["gradient"]["egress_secs"]) * 1e3, 1), 52.5);
    assert_eq!(r((f(&after["step_secs"]) - f(&before["step_secs"])) * 1e3, 0), 35.0);
}

/// The bundled scenario's [supernode] section alone (with its networks and recovery).
fn railyard_bundled_supernode() -> String {
    let out = railyard(&["plan-training", "--examples", "--print-scenario"]);
    assert_eq!(out.code, 0);
    let start = out.stdout.find("[supernode]").unwrap();
    let end = out.stdout[start..].find("\n# seed 000").map_or(out.stdout.len(), |e| start + e);
    out.stdout[start..end].to_string()
}

#[test]
fn solve_answers_the_chapters_questions_and_names_the_most_sensitive_input() {
    let v = json(&["plan-training", "--examples", "--format", "json", "--solve"]);
    let answers = v["solved"]["answers"].as_array().unwrap();
    let find =
        |q: &str| answers.iter().find(|a| a["question"].as_str().unwrap().contains(q)).unwrap_or_else(|| panic!("{q}"));
    assert!((f(&find("card multiple")["value"]) - 2.65).abs() < 0.01);
    assert_eq!(r(f(&find("payload equals start-up (as given)")["value"]) / 1e6, 2), 2.0);
    assert_eq!(f(&find("TP degree")["value"]), 8.0);
    assert_eq!(f(&find("best tokens/s (egress grows with S, TP8)")["value"]), 256.0);
    // Capped egress at 64 cards: the flat ring wins between about 226 and 419 GB/s;
    // the hierarchical 331.1 ms equals the ring's 317.7 ms at 31.1 + 120 GB / B = 317.7 ms.
    let swaps: Vec<f64> = answers
        .iter()
        .filter(|a| a["question"].as_str().unwrap().contains("swap (S = 64"))
        .map(|a| f(&a["value"]) / 1e9)
        .collect();
    assert_eq!(swaps.len(), 2, "{swaps:?}");
    assert!((swaps[1] - 120.0 / (317.7 - 31.1) * 1e3).abs() < 1.0, "{swaps:?}");
    // Every sensitivity lists its inputs, the largest change first.
    for s in v["solved"]["sensitivity"].as_array().unwrap() {
        let d: Vec<f64> = s["inputs"].as_array().unwrap().iter().map(|i| f(&i["step_change_secs"]).abs()).collect();
        assert!(d.windows(2).all(|w| w[0] >= w[1]), "{s}");
    }
    // The step with data ready at 17 ms and the hierarchical all-reduce hidden: compute first.
    let hidden = v["solved"]["sensitivity"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["of"] == "step: hierarchical, data ready at 17 ms")
        .unwrap();
    assert_eq!(hidden["inputs"][0]["input"], "compute");
    // With the data ready at 17 ms, 10% less compute brings the ready time to 15.3 ms.
    let ring17 = v["solved"]["sensitivity"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["of"] == "step: ring, data ready at 17 ms")
        .unwrap();
    let compute = ring17["inputs"].as_array().unwrap().iter().find(|i| i["input"] == "compute").unwrap();
    assert_eq!(r(f(&compute["step_change_secs"]) * 1e3, 1), -1.7);
    // At 1,024 cards MFU leads.
    let big = v["solved"]["sensitivity"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["of"].as_str().unwrap().starts_with("step at S"))
        .unwrap();
    assert_eq!(big["inputs"][0]["input"], "MFU");
    // MFU ÷ 0.9 makes the 0.485 s of compute 10% shorter.
    assert_eq!(r(f(&big["inputs"][0]["step_change_secs"]) * 1e3, 1), -48.5);
    // The MoE crossover and the best bucket cap are solved, not only picked from a list.
    assert!(f(&find("off-node fraction")["value"]) > 0.0 && f(&find("off-node fraction")["value"]) < 1.0);
    assert!(find("bucket cap")["value"].is_number());
}

#[test]
fn svg_draws_the_timelines_and_the_super_node_sweep() {
    let path = std::env::temp_dir().join(format!("railyard-plan-training-{}.svg", std::process::id()));
    let out = railyard(&["plan-training", "--examples", "--svg", path.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let svg = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let doc = roxmltree::Document::parse(&svg).expect("the SVG parses");
    let texts: Vec<String> = doc.descendants().filter(|n| n.is_text()).map(|n| n.text().unwrap().to_string()).collect();
    for label in
        ["compute", "communication", "update", "data ready", "time since the step began (ms)", "GPUs per super-node S"]
    {
        assert!(texts.iter().any(|t| t == label), "no label {label:?}");
    }
    assert!(texts.iter().any(|t| t.starts_with("hierarchical, data ready at 17 ms: 22.0 ms")), "{texts:?}");
    let series: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("series"))
        .filter_map(|n| n.attribute("data-name"))
        .collect();
    for s in [
        "sequential",
        "overlapped",
        "egress grows with S",
        "egress capped at 400 GB/s",
        "egress grows with S, NVLink 900 GB/s",
    ] {
        assert!(series.contains(&s), "no series {s:?} in {series:?}");
    }
    // 6 timelines x (compute, communication, update, ready mark).
    assert_eq!(doc.descendants().filter(|n| n.attribute("class") == Some("bar")).count(), 24);
}

#[test]
fn bad_scenarios_are_refused_with_the_field_named() {
    let cases = [
        ("[step]\ncompute_secs = \"20ms\"\nupdate_secs = \"2ms\"\ntimeline = [{ name = \"x\", comm = { secs = \"1ms\" }, ready = 3 }]\n", "ready"),
        ("[scaling]\ncompute_secs = \"20 parsecs\"\ncomm = { secs = \"1ms\" }\nmultiples = [2]\n", "scaling.compute_secs"),
        ("[scaling]\ncompute_secs = \"20ms\"\ncomm = { secs = \"1ms\", cut_bytes = \"1MiB\" }\nmultiples = [2]\n", "exactly one"),
        ("[scaling]\ncompute_secs = \"20ms\"\ncomm = { topo = \"hgx-h100x2\", algo = \"ring\" }\nmultiples = [2]\n", "scaling.comm.size_bytes"),
        ("[scaling]\ncompute_secs = \"20ms\"\ncomm = { topo = \"nonesuch\", algo = \"ring\", size_bytes = 1024 }\nmultiples = [2]\n", "scaling.comm.topo"),
        ("title = \"nothing\"\n", "no section"),
        ("[readiness]\nready_secs = []\ncomm = { secs = \"1ms\" }\n", "readiness.ready_secs"),
        ("[step]\ncompute_secs = \"20ms\"\nupdate_secs = \"2ms\"\n[[step.timeline]]\nname = \"late\"\nready_secs = \"30ms\"\ncomm = { secs = \"1ms\" }\n", "step.timeline[0].ready_secs"),
        ("[tail]\ncase = [{ name = \"x\", count = 10, normal_secs = \"1ms\", events = [{ name = \"e\", extra_secs = \"1ms\", count = 11 }] }]\n", "tail.case[0].events"),
        ("[step]\ncompute_secs = \"20ms\"\nupdate_secs = \"2ms\"\n[[step.timeline]]\nname = \"x\"\ncomm = { secs = 0 }\n", "step.timeline[0].comm"),
        ("[step]\ncompute_secs = 1e308\nupdate_secs = \"2ms\"\n[[step.timeline]]\nname = \"x\"\ncomm = { secs = 1 }\n", "step.compute_secs"),
        ("[scaling]\ncompute_secs = \"20ms\"\ncomm = { topo = \"hgx-h100x2\", algo = \"ring\", size_bytes = 1023 }\nmultiples = [2]\n", "4-byte elements"),
        ("[scaling]\ncompute_secs = \"20ms\"\ncomm = { topo = \"hgx-h100x2\", algo = \"direct\", collective = \"alltoallv\", size_bytes = 1024 }\nmultiples = [2]\n", "scaling.comm.collective"),
        ("[readiness]\nready_secs = [0, 0]\ncomm = { topo = \"hgx-h100x2\", algo = \"ring\", size_bytes = 1024 }\n", "lists 2 ranks"),
        ("[moe]\ntokens = 64\ntop_k = 2\nexperts = 16\ncapacity_factor = 1\ntoken_bytes = 8\ngpus = 16\ngpus_per_node = 8\nnvlink_bytes_per_sec = 1e9\nnic_bytes_per_sec = 1e9\ncomm = { topo = \"rail:servers=8\" }\n", "moe.comm.topo"),
        ("[bucketing]\nlayers = 4\nlayer_backward_secs = \"1ms\"\nlayer_grad_bytes = \"1MiB\"\nbucket_bytes = [\"2MiB\"]\ncomm = { secs = \"1ms\" }\n", "bucketing.comm"),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = scenario_file(&format!("bad{i}.toml"), text);
        let out = railyard(&["plan-training", "--scenario", path.to_str().unwrap()]);
        assert_eq!(out.code, 2, "case {i} should fail: {}", out.stdout);
        assert!(out.stderr.contains(needle), "case {i}: {needle:?} not in {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
    // A super-node size that does not divide the cards, and TP that does not fit.
    let sn = railyard_bundled_supernode().replace("supernode_gpus = [8, 64, 128, 256]", "supernode_gpus = [8, 96]");
    let out = railyard(&["plan-training", "--scenario", scenario_file("sn.toml", &sn).to_str().unwrap()]);
    assert!(
        out.code == 2 && out.stderr.contains("supernode.supernode_gpus[1]") && out.stderr.contains("96"),
        "{}",
        out.stderr
    );
    // Recovery must checkpoint less often than it computes.
    let sn = railyard_bundled_supernode().replace("checkpoint_secs = \"10s\"", "checkpoint_secs = \"600s\"");
    let out = railyard(&["plan-training", "--scenario", scenario_file("ck.toml", &sn).to_str().unwrap()]);
    assert!(out.code == 2 && out.stderr.contains("supernode.recovery.checkpoint_secs"), "{}", out.stderr);
    // Not a scenario at all.
    let out = railyard(&["plan-training", "--scenario", "/dev/urandom"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("larger than") || out.stderr.contains("UTF-8"), "{}", out.stderr);
}

#[test]
fn a_topology_file_is_found_next_to_its_scenario() {
    let dir = std::env::temp_dir().join(format!("railyard-plan-training-rel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = railyard(&["topo", "export", "hgx-h100x2", "--format", "toml"]);
    assert_eq!(topo.code, 0, "{}", topo.stderr);
    std::fs::write(dir.join("two.toml"), topo.stdout).unwrap();
    let scenario = "[scaling]\ncompute_secs = \"20ms\"\ncomm = { topo = \"two.toml\", algo = \"ring\", size_bytes = \"192MiB\" }\nmultiples = [1]\n";
    std::fs::write(dir.join("s.toml"), scenario).unwrap();
    // Run from elsewhere: the file is found beside the scenario.
    let v = json(&["plan-training", "--format", "json", "--scenario", dir.join("s.toml").to_str().unwrap()]);
    assert!((f(&v["scaling"]["comm"]["secs"]) - 7.575e-3).abs() < 1e-6);
}

#[test]
fn the_printed_scenario_is_the_one_that_runs() {
    let path = scenario_file("printed.toml", &railyard(&["plan-training", "--examples", "--print-scenario"]).stdout);
    assert_eq!(json(&["plan-training", "--format", "json", "--scenario", path.to_str().unwrap()]), bundled());
    let path = scenario_file("job.toml", &railyard(&["plan-training", "--print-scenario"]).stdout);
    assert_eq!(
        json(&["plan-training", "--format", "json", "--scenario", path.to_str().unwrap()]),
        json(&["plan-training", "--format", "json"])
    );
}

/// A user's job: a 70B model on 1,024 H100s, every layout weighed; the fastest fits
/// in memory and beats the runner-up; a layout that cannot fit is refused with its
/// memory breakdown.
#[test]
fn a_users_job_is_planned_and_a_layout_that_does_not_fit_is_refused() {
    let dir = std::env::temp_dir().join(format!("railyard-job-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let search = dir.join("search.toml");
    std::fs::write(
        &search,
        "[job]\nmodel = \"llama3-70b\"\ntopo = \"dgx-h100:nodes=128\"\nglobal_batch = 512\nlayout = \"search\"\nshow = 3\n",
    )
    .unwrap();
    let v = json(&["plan-training", "--scenario", search.to_str().unwrap(), "--format", "json"]);
    let job = &v["job"];
    assert_eq!(job["gpus"], 1024);
    let ranked = job["ranked"].as_array().unwrap();
    assert_eq!(ranked.len(), 3);
    let secs: Vec<f64> = ranked.iter().map(|r| r["step"]["step_secs"].as_f64().unwrap()).collect();
    assert!(secs.windows(2).all(|w| w[0] <= w[1]), "{secs:?}");
    for r in ranked {
        assert!(r["memory"]["total_bytes"].as_f64().unwrap() <= r["memory"]["capacity_bytes"].as_f64().unwrap());
    }
    assert!(job["layouts_refused_for_memory"].as_u64().unwrap() > 0);
    // 70B of weights, gradients and optimizer state on one unsharded GPU: refused, said why.
    let fixed = dir.join("fixed.toml");
    std::fs::write(
        &fixed,
        "[job]\nmodel = \"llama3-70b\"\ntopo = \"dgx-h100:nodes=1\"\nglobal_batch = 8\nzero = 0\nlayout = { tp = 8, pp = 1, dp = 1, micro_batch = 1 }\n",
    )
    .unwrap();
    let out = railyard(&["plan-training", "--scenario", fixed.to_str().unwrap()]);
    assert!(out.code != 0 && out.code != 101, "{}", out.stderr);
    for word in ["no layout fits", "of weights", "of gradients", "of optimizer state", "of activations"] {
        assert!(out.stderr.contains(word), "{word}: {}", out.stderr);
    }
    // A layout whose degrees do not multiply to the GPUs says so.
    std::fs::write(
        &fixed,
        "[job]\nmodel = \"llama3-8b\"\ntopo = \"dgx-h100:nodes=2\"\nglobal_batch = 8\nlayout = { tp = 8, pp = 1, dp = 1 }\n",
    )
    .unwrap();
    let out = railyard(&["plan-training", "--scenario", fixed.to_str().unwrap()]);
    assert!(out.stderr.contains("8 GPUs, but the job has 16"), "{}", out.stderr);
    // Degrees whose product passes u64, an unknown layout key, an unknown model: each
    // refused by name, no panic.
    for (layout, says) in [
        ("{ tp = 131072, cp = 131072, pp = 131072, dp = 131072 }", "= 295147905179352825856 GPUs, but the job has 16"),
        ("{ tp = 8, pp = 1, dp = 2, foo = 3 }", "foo"),
    ] {
        std::fs::write(
            &fixed,
            format!("[job]\nmodel = \"llama3-8b\"\ntopo = \"dgx-h100:nodes=2\"\nglobal_batch = 8\nlayout = {layout}\n"),
        )
        .unwrap();
        let out = railyard(&["plan-training", "--scenario", fixed.to_str().unwrap()]);
        assert!(out.code == 2 && out.stderr.contains(says), "{layout}: {}", out.stderr);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// With no scenario, plan-training answers a stated example job (not the chapter), and
/// --svg draws its step: compute, what waits, what is hidden.
#[test]
fn the_default_is_an_example_job_and_its_step_is_drawn() {
    let out = railyard(&["plan-training"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("# Example job: Llama 3 70B on 128 DGX H100"), "{}", out.stdout);
    assert!(out.stdout.contains("layouts weighed"), "{}", out.stdout);
    let path = std::env::temp_dir().join(format!("railyard-job-{}.svg", std::process::id()));
    let out = railyard(&["plan-training", "--svg", path.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let svg = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let doc = roxmltree::Document::parse(&svg).expect("the SVG parses");
    let texts: Vec<String> = doc.descendants().filter(|n| n.is_text()).map(|n| n.text().unwrap().to_string()).collect();
    for label in ["compute", "pipeline bubble", "hidden communication", "hidden behind compute"] {
        assert!(texts.iter().any(|t| t == label), "no label {label:?} in {texts:?}");
    }
}

/// `--trace` writes the job's step as a Perfetto trace: its critical-path spans follow
/// each other to the step's end, as the report's step time says.
#[test]
fn the_job_step_is_a_perfetto_trace() {
    let path = std::env::temp_dir().join(format!("railyard-job-{}.json", std::process::id()));
    let out = railyard(&["plan-training", "--trace", path.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let trace: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    let report = json(&["plan-training", "--format", "json"]);
    let step_us = report["job"]["ranked"][0]["step"]["step_secs"].as_f64().unwrap() * 1e6;
    let events = trace["traceEvents"].as_array().unwrap();
    let path_end = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == 0)
        .map(|e| e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!((path_end - step_us).abs() <= 1e-6 * step_us, "{path_end} vs {step_us}");
    assert!(events.iter().any(|e| e["ph"] == "M" && e["args"]["name"] == "hidden behind compute"));
    let none = railyard(&["plan-training", "--examples", "--trace", path.to_str().unwrap()]);
    assert!(none.code != 0 && none.stderr.contains("no [job]"), "{}", none.stderr);
}

/// A [job]'s collectives run through the flow-level simulator with --engine sim: the
/// fastest algorithm's schedule simulated, its expected time scaled by what the
/// simulator adds over the bound. On rail-aligned groups nothing shares a link beyond
/// what the model counts, so the step is the model's (to 1e-6); the report says which
/// engine timed it.
#[test]
fn a_jobs_collectives_run_through_the_simulator() {
    let path = scenario_file(
        "job-sim.toml",
        "[job]\nmodel = \"llama3-8b\"\ntopo = \"dgx-h100:nodes=2\"\nglobal_batch = 16\n\
         layout = { tp = 4, pp = 2, dp = 2, micro_batch = 1 }\n",
    );
    let p = path.to_str().unwrap();
    let m = json(&["plan-training", "--scenario", p, "--format", "json"]);
    let s = json(&["plan-training", "--scenario", p, "--format", "json", "--engine", "sim"]);
    assert_eq!((m["job"]["engine"].as_str(), s["job"]["engine"].as_str()), (Some("model"), Some("sim")));
    let step = |v: &Value| f(&v["job"]["ranked"][0]["step"]["step_secs"]);
    assert!((step(&m) - step(&s)).abs() <= 1e-6 * step(&m), "model {} vs sim {}", step(&m), step(&s));
    assert_eq!(s["job"]["timed_by_model"], 0);
    // A data-parallel all-reduce over 256 GPUs crossing an oversubscribed spine: the
    // simulator's rounds overlap where the model's wait for each other (the hierarchical
    // schedule's stages), so the step differs — the simulator did run.
    let oversubscribed = scenario_file(
        "job-sim-over.toml",
        "[job]\ntopo = \"rail:servers=32,gpus=8,group=4,over=4:1,spines=1,sharp=off\"\ngpu = \"h100\"\n\
         global_batch = 256\nlayout = { tp = 1, pp = 1, dp = 256, micro_batch = 1 }\nzero = 0\n[job.model]\n\
         name = \"tiny\"\nlayers = 4\nhidden = 512\nffn = 2048\nheads = 8\nvocab = 32000\nseq_len = 1024\n",
    );
    let o = oversubscribed.to_str().unwrap();
    let m = json(&["plan-training", "--scenario", o, "--format", "json"]);
    let s = json(&["plan-training", "--scenario", o, "--format", "json", "--engine", "sim"]);
    assert!((step(&m) - step(&s)).abs() > 1e-4 * step(&m), "model {} vs sim {}", step(&m), step(&s));
    let md = railyard(&["plan-training", "--scenario", p, "--engine", "sim"]);
    assert!(
        md.stdout.contains("scaled by the flow-level simulator's makespan over the line-rate bound"),
        "{}",
        md.stdout
    );
}

/// The groups of a dimension run their collective at once: with TP 4 inside servers of
/// two NICs, the four data-parallel groups cross through the same two NICs of each
/// server. Simulated beside each other, their all-reduce takes twice what one group
/// alone (the model's view) takes; the model is unchanged.
#[test]
fn groups_that_share_a_servers_nics_are_simulated_together() {
    let path = scenario_file(
        "job-sim-shared.toml",
        "[job]\ntopo = \"dgx-h100:nodes=4,nics=2\"\nglobal_batch = 64\nzero = 0\n\
         layout = { tp = 4, pp = 1, dp = 8, micro_batch = 1 }\n[job.model]\nname = \"tiny\"\nlayers = 4\n\
         hidden = 2048\nffn = 8192\nheads = 16\nvocab = 32000\nseq_len = 1024\n",
    );
    let p = path.to_str().unwrap();
    let dp_secs = |v: &Value| {
        let lines = v["job"]["ranked"][0]["step"]["comms"].as_array().unwrap().clone();
        let dp = lines.iter().find(|c| c["name"] == "DP dense gradient all-reduce").unwrap().clone();
        f(&dp["secs"])
    };
    let m = json(&["plan-training", "--scenario", p, "--format", "json"]);
    let s = json(&["plan-training", "--scenario", p, "--format", "json", "--engine", "sim"]);
    let ratio = dp_secs(&s) / dp_secs(&m);
    assert!((1.8..2.2).contains(&ratio), "sim / model {ratio}");
    assert_eq!(s["job"]["simulated_without_all_neighbours"], 0);
}

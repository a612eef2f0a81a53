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

/// Two jobs on disjoint servers of a rail fabric do not slow each other; two on the
/// same GPUs share every link and take twice as long.
#[test]
fn jobs_share_the_network() {
    let dir = std::env::temp_dir().join(format!("railyard-sim-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let job = |name: &str, skip: usize| {
        format!(
            "[[job]]\nname = \"{name}\"\ncollective = \"allreduce\"\nsize = \"64MiB\"\nalgorithm = \"ring\"\n\
             skip = {skip}\nranks = 8\n"
        )
    };
    let apart = dir.join("apart.toml");
    std::fs::write(&apart, job("a", 0) + &job("b", 8)).unwrap();
    let together = dir.join("together.toml");
    std::fs::write(&together, job("a", 0) + &job("b", 0)).unwrap();
    let topo = "rail:servers=2,gpus=8";
    let out = json(&["sim", "--topo", topo, "--jobs", apart.to_str().unwrap(), "--format", "json"]);
    for j in out["jobs"].as_array().unwrap() {
        assert!((j["slowdown"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{j}");
    }
    // Together every link carries both rings' bytes: twice the transfer time, the same
    // 14 start-ups of α = 0.833 us.
    let out = json(&["sim", "--topo", topo, "--jobs", together.to_str().unwrap(), "--format", "json"]);
    let alpha = 14.0 * 0.833e-6;
    for j in out["jobs"].as_array().unwrap() {
        let (secs, alone) = (j["secs"].as_f64().unwrap(), j["alone_secs"].as_f64().unwrap());
        let expect = 2.0 * (alone - alpha) + alpha;
        assert!((secs - expect).abs() < 1e-6 * expect, "{j}");
    }
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, job("a", 0).replace("ring", "nosuch")).unwrap();
    let r = railyard(&["sim", "--jobs", bad.to_str().unwrap()]);
    assert!(r.code != 0 && r.code != 101 && r.stderr.contains("job 0 (a): algorithm"), "{}", r.stderr);
    std::fs::remove_dir_all(&dir).ok();
}

/// Seed 001 §7.6.1 through the CLI: the last rank ready at 2 ms holds the exchange.
#[test]
fn readiness_skew_through_the_cli() {
    let args = ["sim", "--topo", "mesh:ranks=4,bw=62.91456GB/s,alpha=0s", "--algo", "ring", "--size", "16MiB"];
    let out = json(&[&args[..], &["--barriers", "--ready", "0,0,0,2ms", "--format", "json"]].concat());
    let t = out["runs"][0]["report"]["jobs"][0]["finish_secs"].as_f64().unwrap();
    assert!((t - 2.4e-3).abs() < 1e-9, "{t}");
    let r = railyard(&[&args[..], &["--ready", "0,1ms"]].concat());
    assert!(r.code != 0 && r.code != 101 && r.stderr.contains("--ready: 2 times for 4 ranks"), "{}", r.stderr);
}

/// A failed spine cable is routed around (the two cross-rail flows of the ring then
/// share the one spine left: twice the time); a failed NIC stalls the job, said so.
#[test]
fn failed_links_are_routed_around_or_stall_the_job() {
    let time = |extra: &[&str]| {
        let out = json(&[&["sim", "--algo", "ring", "--size", "1GiB", "--format", "json"][..], extra].concat());
        out["runs"][0]["report"]["jobs"][0]["secs"].as_f64().unwrap()
    };
    let (whole, cut) = (time(&[]), time(&["--fail", "leaf0.rail7 -> spine0"]));
    assert!(cut > 1.9 * whole && cut < 2.1 * whole, "{whole} -> {cut}");
    let r = railyard(&["sim", "--algo", "ring", "--fail", "A.nic7"]);
    assert!(r.code != 0 && r.code != 101, "{}", r.stderr);
    assert!(r.stderr.contains("the job stalls") && r.stderr.contains("A.gpu7"), "{}", r.stderr);
    let r = railyard(&["sim", "--fail", "nosuch"]);
    assert!(r.code != 0 && r.code != 101 && r.stderr.contains("nosuch"), "{}", r.stderr);
}

/// `--queues`: a direct all-to-all over two servers queues at the leaf ports; the
/// table names them, and --buffer says by how much a small buffer falls short.
#[test]
fn queues_are_reported() {
    let out = json(&[
        "sim",
        "--topo",
        "rail:servers=4,gpus=2,group=2,spines=1,over=2:1",
        "--collective",
        "alltoall",
        "--algo",
        "direct",
        "--size",
        "64MiB",
        "--queues",
        "--buffer",
        "1MiB",
        "--no-compare",
        "--format",
        "json",
    ]);
    let queues = out["runs"][0]["report"]["queues"].as_array().unwrap();
    assert!(!queues.is_empty(), "{out}");
    let first = &queues[0];
    let (peak, over) = (first["peak_bytes"].as_f64().unwrap(), first["over_buffer_bytes"].as_f64().unwrap());
    assert!(peak > 1048576.0 && (peak - over - 1048576.0).abs() < 1.0, "{first}");
    let r = railyard(&["sim", "--buffer", "1MiB"]);
    assert!(r.code != 0 && r.stderr.contains("--queues"), "{}", r.stderr);
}

/// A step as a DAG: compute, then the gradient all-reduce (seed 001 example 7.2's ring,
/// 7.575 ms), then the update; each starts when what it waits for has finished.
#[test]
fn a_dag_of_compute_and_collectives() {
    let dir = std::env::temp_dir().join(format!("railyard-sim-dag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let step = dir.join("step.toml");
    std::fs::write(
        &step,
        "[[job]]\nname = \"backward\"\ncollective = \"none\"\ncompute = \"5ms\"\n\n\
         [[job]]\nname = \"grads\"\ncollective = \"allreduce\"\nsize = \"192MiB\"\nalgorithm = \"ring\"\n\
         after = [\"backward\"]\n\n\
         [[job]]\nname = \"update\"\ncollective = \"none\"\ncompute = \"1ms\"\nafter = [\"grads\"]\n",
    )
    .unwrap();
    let out = json(&["sim", "--jobs", step.to_str().unwrap(), "--format", "json"]);
    let jobs = out["jobs"].as_array().unwrap();
    let finish = |i: usize| jobs[i]["finish_secs"].as_f64().unwrap();
    let start = |i: usize| jobs[i]["start_secs"].as_f64().unwrap();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    assert!(close(finish(0), 5e-3), "{out}");
    assert!(close(start(1), 5e-3) && close(finish(1), 5e-3 + 7.575e-3), "{out}");
    assert!(close(start(2), finish(1)) && close(finish(2), finish(1) + 1e-3), "{out}");
    let cycle = dir.join("cycle.toml");
    std::fs::write(
        &cycle,
        "[[job]]\nname = \"a\"\ncollective = \"none\"\nafter = [\"b\"]\n\n\
         [[job]]\nname = \"b\"\ncollective = \"none\"\nafter = [\"a\"]\n",
    )
    .unwrap();
    let r = railyard(&["sim", "--jobs", cycle.to_str().unwrap()]);
    assert!(r.code != 0 && r.code != 101 && r.stderr.contains("cycle"), "{}", r.stderr);
    let unknown = dir.join("unknown.toml");
    std::fs::write(&unknown, "[[job]]\nname = \"a\"\ncollective = \"none\"\nafter = [\"zzz\"]\n").unwrap();
    let r = railyard(&["sim", "--jobs", unknown.to_str().unwrap()]);
    assert!(r.code != 0 && r.code != 101 && r.stderr.contains("zzz"), "{}", r.stderr);
    std::fs::remove_dir_all(&dir).ok();
}

/// `--svg`: a Gantt chart of the rounds (one bar each) above the busiest resources'
/// utilisation over time (one series each), in one well-formed SVG.
#[test]
fn the_svg_draws_rounds_and_utilisation() {
    let dir = std::env::temp_dir().join(format!("railyard-sim-svg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.svg");
    let r = railyard(&["sim", "--algo", "hierarchical", "--pipeline-chunks", "4", "--svg", path.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(&path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let class = |c: &str| doc.descendants().filter(|n| n.attribute("class") == Some(c)).count();
    // 4 chunks: 6 pipeline slots of 7 rounds each (the intra stages on 8 GPUs), 42 rounds.
    assert_eq!(class("bar"), 42, "{text}");
    assert_eq!(class("series"), 6);
    std::fs::remove_dir_all(&dir).ok();
}

/// `--flow-control`: the same all-to-all through an oversubscribed leaf drops with
/// dropping buffers and pauses (never drops) with PFC.
#[test]
fn flow_control_drops_or_pauses() {
    let run = |mode: &str| {
        json(&[
            "sim",
            "--topo",
            "rail:servers=4,gpus=2,group=2,spines=1,over=2:1",
            "--collective",
            "alltoall",
            "--algo",
            "direct",
            "--size",
            "4MiB",
            "--flow-control",
            mode,
            "--buffer",
            "256KiB",
            "--format",
            "json",
        ])
    };
    let dropped = |r: &serde_json::Value| {
        r[0]["flows"].as_array().unwrap().iter().map(|f| f["dropped_bytes"].as_f64().unwrap()).sum::<f64>()
    };
    let paused = |r: &serde_json::Value| {
        r[0]["ports"].as_array().unwrap().iter().map(|p| p["paused_secs"].as_f64().unwrap()).fold(0.0, f64::max)
    };
    let (drop, pause) = (run("drop"), run("pause"));
    assert!(dropped(&drop) > 0.0 && paused(&drop) == 0.0, "{drop}");
    assert!(dropped(&pause) == 0.0 && paused(&pause) > 0.0, "{pause}");
    for r in [&drop, &pause] {
        assert!(r[0]["jobs"][0]["finish_secs"].as_f64().unwrap() > 0.0, "{r}");
    }
    let bad = railyard(&["sim", "--flow-control", "drop", "--ecn", "1KiB", "--cut", "2"]);
    assert!(bad.code != 0 && bad.code != 101 && bad.stderr.contains("cut"), "{}", bad.stderr);
}

/// Review mends: a job named twice in `after` is waited for once; a file that never
/// ends (/dev/zero) is refused at the size limit; options the fluid model does not
/// honour are refused, not ignored.
#[test]
fn jobs_and_fluid_inputs_are_checked() {
    let dir = std::env::temp_dir().join(format!("railyard-sim-mends-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let twice = dir.join("twice.toml");
    std::fs::write(
        &twice,
        "[[job]]\nname = \"a\"\ncollective = \"none\"\ncompute = \"1ms\"\n\n\
         [[job]]\nname = \"b\"\ncollective = \"none\"\ncompute = \"1ms\"\nafter = [\"a\", \"a\"]\n",
    )
    .unwrap();
    let out = json(&["sim", "--jobs", twice.to_str().unwrap(), "--format", "json"]);
    assert!((out["jobs"][1]["finish_secs"].as_f64().unwrap() - 2e-3).abs() < 1e-9, "{out}");
    let r = railyard(&["sim", "--jobs", "/dev/zero"]);
    assert!(r.code != 0 && r.code != 101 && r.stderr.contains("limit"), "{}", r.stderr);
    for extra in [&["--svg", "/tmp/x.svg"][..], &["--ready", "0,1ms"], &["--queues"], &["--every-round"]] {
        let r = railyard(&[&["sim", "--flow-control", "pause"][..], extra].concat());
        assert!(r.code != 0 && r.code != 101 && r.stderr.contains("does not apply"), "{extra:?}: {}", r.stderr);
    }
    std::fs::remove_dir_all(&dir).ok();
}

//! Every primitive through `railyard plan`, automatic selection with its explanation,
//! and the size sweep (seed 000 §8.1–§8.3).

mod common;
use common::{json, railyard};

#[test]
fn every_collective_plans_on_the_seed_cluster() {
    for (collective, expect) in [
        ("broadcast", vec!["chain", "tree", "direct"]),
        ("reduce", vec!["chain", "tree", "direct"]),
        ("gather", vec!["direct"]),
        ("scatter", vec!["direct"]),
        ("alltoall", vec!["bruck", "pairwise", "direct", "hierarchical"]),
        ("allgather", vec!["ring", "interleaved-ring", "rhd", "bruck", "direct", "hierarchical", "rail-ring", "pat"]),
        ("reducescatter", vec!["ring", "interleaved-ring", "rhd", "direct", "hierarchical", "rail-ring", "pat"]),
        ("barrier", vec!["bruck", "direct"]),
        ("sendrecv", vec!["direct"]),
    ] {
        let plan = json(&["plan", "--collective", collective, "--size", "1MiB", "--root", "3", "--format", "json"]);
        let names: Vec<&str> =
            plan["algorithms"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
        assert_eq!(names, expect, "{collective}: {plan}");
        for a in plan["algorithms"].as_array().unwrap() {
            assert!(a["total_secs"].as_f64().unwrap() > 0.0, "{collective} {}", a["name"]);
        }
    }
}

#[test]
fn auto_explains_its_choice_and_compares_with_nccl() {
    // Among the seed's four schemes, in-network (example 7.2); NCCL's rule of thumb agrees.
    let plan = json(&["plan", "--algo", "ring,interleaved-ring,hierarchical,in-network", "--format", "json"]);
    let c = &plan["choice"];
    assert_eq!(c["algorithm"], "in-network");
    assert_eq!(c["runner_up"], "hierarchical");
    assert!(c["margin"].as_f64().unwrap() >= 0.0);
    assert_eq!(c["nccl"]["algorithm"], "collnet");
    assert_eq!(c["nccl"]["protocol"], "Simple");
    assert_eq!(c["agrees_with_nccl"], true);
    // With NCCL's own algorithms in the running, CollNet's chains win: their chunks
    // stream through the hops, so each server's NICs (SHARP) and NVLink work at once;
    // then the rail-aligned rings, each of 8 channels crossing on its own NIC (400 GB/s
    // between the servers, not one NIC's 50). The rule of thumb says CollNet too.
    let all = json(&["plan", "--algo", "auto", "--format", "json"]);
    assert_eq!(all["choice"]["algorithm"], "in-network-chain");
    assert_eq!(all["choice"]["runner_up"], "rail-ring");
    assert_eq!(all["choice"]["agrees_with_nccl"], true);
    // 8 bytes: latency-bound (fewest rounds wins); the rule of thumb says tree with LL.
    let small = json(&["plan", "--algo", "auto", "--size", "8B", "--format", "json"]);
    assert_eq!(small["choice"]["nccl"]["algorithm"], "tree");
    assert_eq!(small["choice"]["nccl"]["protocol"], "LL");
    assert!(
        ["tree", "double-tree", "rhd", "recursive-doubling"].contains(&small["choice"]["algorithm"].as_str().unwrap())
    );
    let md = railyard(&["plan", "--algo", "ring,interleaved-ring,hierarchical,in-network"]);
    assert!(md.stdout.contains("Chosen: **in-network**") && md.stdout.contains("rule of thumb"), "{}", md.stdout);
}

#[test]
fn sweep_shows_both_regimes_and_the_crossovers() {
    let svg = std::env::temp_dir().join(format!("railyard-sweep-{}.svg", std::process::id()));
    let s = json(&[
        "plan",
        "--sweep",
        "8B:1GiB",
        "--sweep-factor",
        "4",
        "--svg",
        svg.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let rows = s["rows"].as_array().unwrap();
    let first = rows.first().unwrap();
    let last = rows.last().unwrap();
    assert_eq!(first["bytes"], 8);
    assert!(
        ["tree", "double-tree", "rhd", "recursive-doubling"].contains(&first["fastest"].as_str().unwrap()),
        "{first}"
    );
    assert_eq!(last["bytes"], 1u64 << 30);
    assert!(
        ["ring", "interleaved-ring", "rail-ring", "hierarchical", "in-network", "in-network-chain"]
            .contains(&last["fastest"].as_str().unwrap()),
        "{last}"
    );
    assert!(!s["crossovers"].as_array().unwrap().is_empty());
    // algbw and busbw follow nccl-tests: busbw = algbw x 2(P-1)/P for all-reduce.
    let p = &s["series"][0]["points"][3];
    let ratio = p["busbw_bytes_per_sec"].as_f64().unwrap() / p["algbw_bytes_per_sec"].as_f64().unwrap();
    assert!((ratio - 2.0 * 15.0 / 16.0).abs() < 1e-12);
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let series = doc.descendants().filter(|n| n.attribute("class") == Some("series")).count();
    assert_eq!(series, s["series"].as_array().unwrap().len());
    assert!(text.contains("message size (bytes, log scale)"));
}

#[test]
fn options_and_bad_input() {
    let ring2 = json(&["plan", "--algo", "ring", "--channels", "2", "--format", "json"]);
    assert_eq!(ring2["algorithms"][0]["channels"], 2);
    let tree = json(&["plan", "--algo", "tree", "--pipeline-chunks", "4", "--format", "json"]);
    assert_eq!(tree["algorithms"][0]["pipeline_chunks"], 4);
    for (args, needle) in [
        (vec!["plan", "--collective", "gather", "--algo", "ring"], "does not implement gather"),
        (vec!["plan", "--collective", "broadcast", "--root", "99"], "--root: 99 is not a rank"),
        (vec!["plan", "--sweep", "1GiB:8B"], "FROM <= TO"),
        (vec!["plan", "--sweep", "8B"], "FROM:TO"),
        (vec!["plan", "--svg", "/tmp/x.svg"], "--sweep"),
        (vec!["plan", "--algo", "rhd", "--collective", "allgather", "--ranks", "12"], "power of two"),
    ] {
        let out = railyard(&args);
        assert_ne!(out.code, 0, "{args:?}");
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
}

/// `railyard plan --topo FILE` on a file like the one `railyard calibrate` writes shows
/// the host costs and chooses what the runtime's tuner chooses, collective by collective
/// and size by size: they call the same model and the same choice.
#[test]
fn plan_on_a_calibrated_file_predicts_the_runtime_tuner() {
    use railyard_runtime::tuner::{Tuner, DEFAULT_NET, DEFAULT_SHM};
    use railyard_schedule::{Collective, CollectiveSpec};
    use railyard_topology::file::{write, FileFormat};
    use railyard_topology::presets::{hosts, HOST_COSTS};

    let groups = vec![vec![0, 1, 2], vec![3, 4, 5]];
    let topo = hosts("calibrated", &groups, DEFAULT_SHM, Some(DEFAULT_NET), HOST_COSTS, "test".into()).unwrap();
    let dir = std::env::temp_dir().join(format!("railyard-tuner-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("calibrated.toml");
    std::fs::write(&path, write(&topo, FileFormat::Toml).unwrap()).unwrap();
    let file = path.to_str().unwrap();
    let mut tuner = Tuner::new(&groups, Some(file)).unwrap();
    let mut picked = std::collections::BTreeSet::new();
    for (collective, name) in
        [(Collective::AllReduce, "allreduce"), (Collective::AllGather, "allgather"), (Collective::AllToAll, "alltoall")]
    {
        for bytes in [8u64, 4 << 10, 256 << 10, 16 << 20] {
            let plan = json(&[
                "plan",
                "--topo",
                file,
                "--collective",
                name,
                "--size",
                &format!("{bytes}B"),
                "--format",
                "json",
            ]);
            let host = &plan["algorithms"][0]["host"];
            assert!(host["secs"].as_f64().unwrap() > 0.0, "the file's host costs are counted: {host}");
            let spec = CollectiveSpec::new(collective, 6, bytes / 4);
            let choice = tuner.choose(&spec, 4, &groups, 1, railyard_model::ChunkPolicy::Search, None).unwrap();
            assert_eq!(plan["fastest"], choice.algorithm.as_str(), "{name} {bytes} B");
            assert_eq!(plan["choice"]["algorithm"], choice.algorithm.as_str(), "{name} {bytes} B");
            picked.insert(choice.algorithm.as_str().to_string());
        }
    }
    assert!(picked.len() >= 3, "the sizes span several choices: {picked:?}");
    let md = railyard(&["plan", "--topo", file, "--size", "8B"]);
    assert_eq!(md.code, 0, "{}", md.stderr);
    assert!(md.stdout.contains("| host ") && md.stdout.contains("messages"), "{}", md.stdout);
    std::fs::remove_dir_all(&dir).ok();
}

/// A reader that stops early (`railyard plan --format json | head -c1`) ends the output
/// quietly, as other Unix tools do, instead of a panic on the closed pipe.
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(["plan", "--topo", "rail:servers=4", "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is dropped here, with well over 64 KiB still to write.
    let out = child.wait_with_output().unwrap();
    assert_eq!(first[0], b'{');
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

/// NCCL's rule reaches for CollNet only where in-network could have run: not when
/// `--algo` leaves it out, and not for collectives other than all-reduce.
#[test]
fn the_nccl_rule_offers_collnet_only_where_it_could_run() {
    let with = json(&["plan", "--format", "json"]);
    assert_eq!(with["choice"]["nccl"]["algorithm"], "collnet");
    let without = json(&["plan", "--algo", "ring,hierarchical", "--format", "json"]);
    assert_eq!(without["choice"]["nccl"]["algorithm"], "ring (multi-channel)");
    assert_eq!(without["choice"]["agrees_with_nccl"], true);
    let alltoall = json(&["plan", "--collective", "alltoall", "--format", "json"]);
    assert_ne!(alltoall["choice"]["nccl"]["algorithm"], "collnet");
}

/// The help's own example of a ring order counts down: `0-7,15-8`.
#[test]
fn a_ring_order_range_may_count_down() {
    let plan = json(&["plan", "--algo", "ring", "--order", "0-7,15-8", "--format", "json"]);
    assert!(plan["algorithms"][0]["total_secs"].as_f64().unwrap() > 0.0);
    let bad = railyard(&["plan", "--algo", "ring", "--order", "0-7,15-9"]);
    assert_eq!(bad.code, 2, "{}", bad.stdout);
}

/// `--order` and `--groups` that no algorithm asked for follows are refused, with the
/// algorithms they apply to named; a difference from NCCL's pick that `--algo` left out
/// is said as such, not as a disagreement.
#[test]
fn options_no_algorithm_follows_are_refused() {
    let out = railyard(&["plan", "--algo", "tree", "--order", "0-7"]);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(out.stderr.contains("--order") && out.stderr.contains("ring and chain"), "{}", out.stderr);
    let out = railyard(&["plan", "--algo", "ring", "--groups", "0-7/8-15"]);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(out.stderr.contains("--groups") && out.stderr.contains("hierarchical"), "{}", out.stderr);
    // With one that follows it among others, it is used where it applies.
    let mixed = json(&["plan", "--algo", "ring,tree", "--order", "0-7,15-8", "--format", "json"]);
    assert_eq!(mixed["algorithms"].as_array().unwrap().len(), 2);
    let small = json(&["plan", "--algo", "ring", "--size", "8KiB", "--format", "json"]);
    assert_eq!(small["choice"]["nccl"]["algorithm"], "tree");
    assert_eq!(small["choice"]["nccl_family_compared"], false);
    let md = railyard(&["plan", "--algo", "ring", "--size", "8KiB"]).stdout;
    assert!(md.contains("not among the algorithms compared") && !md.contains("disagree"), "{md}");
}

/// An algorithm asked for twice is planned once, and `--channels` is reported only on
/// the ring algorithms that run on channels.
#[test]
fn repeated_algorithms_and_channels_are_reported_as_run() {
    let plan = json(&["plan", "--algo", "ring,ring,tree", "--format", "json"]);
    let names: Vec<&str> = plan["algorithms"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ring", "tree"]);
    let plan = json(&["plan", "--channels", "4", "--format", "json"]);
    for a in plan["algorithms"].as_array().unwrap() {
        let rings = matches!(a["name"].as_str().unwrap(), "ring" | "interleaved-ring" | "rail-ring");
        assert_eq!(a["channels"], if rings { 4 } else { 1 }, "{}", a["name"]);
    }
}

/// `plan --help` names every algorithm `--algo` takes (its list is written by hand).
#[test]
fn the_help_names_every_algorithm() {
    let help = railyard(&["plan", "--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    let algo = help.stdout.split("--algo").nth(1).unwrap_or_default();
    let list = algo.split("[default").next().unwrap_or_default();
    let list = list.split_once("all` (").map_or(list, |(_, rest)| rest);
    let list = list.split(';').next().unwrap_or_default();
    let names: Vec<&str> = list.split([',', ':']).map(str::trim).collect();
    for a in railyard_schedule::Algorithm::ALL {
        assert!(names.contains(&a.as_str()), "{} is not in {names:?}", a.as_str());
    }
}

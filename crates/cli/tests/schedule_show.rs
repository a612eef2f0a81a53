//! `schedule show` prints an algorithm's rounds in words (and draws them, and gives the
//! schedule as JSON); `schedule check` proves it at the rank counts asked.

mod common;
use common::{json, railyard};

#[test]
fn a_ring_is_shown_round_by_round() {
    let out = railyard(&["schedule", "show", "--algo", "ring", "--ranks", "4"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rounds: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| round")).collect();
    assert_eq!(rounds.len(), 6, "{}", out.stdout);
    // Every round of a 4-rank ring: each rank sends one chunk to the next.
    for r in &rounds {
        for (from, to) in [(0, 1), (1, 2), (2, 3), (3, 0)] {
            assert!(r.contains(&format!("{from} -> {to}: ")), "{r}");
        }
    }
    assert!(rounds[0].contains("reduce into") && rounds[5].contains("copy into"), "{}", out.stdout);
    // The JSON is the schedule itself: the same rounds.
    let s = json(&["schedule", "show", "--algo", "ring", "--ranks", "4", "--format", "json"]);
    assert_eq!(s["rounds"].as_array().unwrap().len(), 6);
    assert_eq!(s["rounds"][0]["transfers"].as_array().unwrap().len(), 4);
}

#[test]
fn the_drawing_has_an_arrow_per_transfer() {
    let path = std::env::temp_dir().join(format!("railyard-show-{}.svg", std::process::id()));
    let p = path.to_string_lossy().into_owned();
    let out = railyard(&["schedule", "show", "--algo", "in-network", "--ranks", "8", "--svg", &p]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let doc = roxmltree::Document::parse(&text).expect("valid SVG");
    let arrows = doc.descendants().filter(|n| n.has_tag_name("line") && n.attribute("marker-end").is_some()).count();
    let s = json(&["schedule", "show", "--algo", "in-network", "--ranks", "8", "--format", "json"]);
    let transfers: usize =
        s["rounds"].as_array().unwrap().iter().map(|r| r["transfers"].as_array().unwrap().len()).sum();
    let switches: usize =
        s["rounds"].as_array().unwrap().iter().map(|r| r["in_network"].as_array().unwrap().len()).sum();
    assert_eq!(arrows, transfers);
    assert!(switches > 0 && doc.descendants().filter(|n| n.has_tag_name("rect")).count() == switches);
}

#[test]
fn check_proves_each_rank_count_and_says_which_it_cannot_build() {
    let out = railyard(&["schedule", "check", "--algo", "double-tree", "--ranks", "2-9"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("proved at 8 of 8 rank counts"), "{}", out.stdout);
    let out = railyard(&["schedule", "check", "--algo", "rhd", "--collective", "reducescatter", "--ranks", "2,3,4"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("proved at 2 of 3") && out.stdout.contains("not built"), "{}", out.stdout);
}

/// An algorithm that works server by server shows its servers: two of --per-server ranks.
#[test]
fn server_by_server_algorithms_show_their_servers() {
    let out = railyard(&["schedule", "show", "--algo", "in-network", "--ranks", "6", "--per-server", "3"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("switch: "), "{}", out.stdout);
    let checked = railyard(&["schedule", "check", "--algo", "in-network", "--ranks", "4,6,8", "--per-server", "2"]);
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    assert!(checked.stdout.contains("proved at 3 of 3"), "{}", checked.stdout);
}

#[test]
fn bad_requests_are_refused_by_name() {
    for (args, says) in [
        (vec!["schedule", "show", "--algo", "ring", "--ranks", "1"], "--ranks 2 to 64"),
        (vec!["schedule", "show", "--algo", "ring", "--ranks", "65"], "--ranks 2 to 64"),
        (vec!["schedule", "show", "--algo", "ring", "--chunks-per-rank", "0"], "--chunks-per-rank"),
        (vec!["schedule", "show", "--algo", "pairwise", "--collective", "allreduce"], "no allreduce schedule"),
        (vec!["schedule", "check", "--algo", "ring", "--ranks", "4-2"], "low to high"),
        (vec!["schedule", "check", "--algo", "ring", "--ranks", "2-999"], "2 to 128"),
        (vec!["schedule", "check", "--algo", "ring", "--ranks", "x"], "give N, A-B"),
        // Nothing to prove is not a success.
        (vec!["schedule", "check", "--algo", "pairwise", "--collective", "allreduce"], "no allreduce schedule"),
        (vec!["schedule", "check", "--algo", "ring", "--chunks-per-rank", "0"], "--chunks-per-rank"),
        (vec!["schedule", "check", "--algo", "hierarchical", "--ranks", "5,6,7"], "Nothing proved"),
        // Server by server: the ranks must make whole servers.
        (vec!["schedule", "show", "--algo", "hierarchical", "--ranks", "6"], "--per-server 4"),
    ] {
        let out = railyard(&args);
        assert_ne!(out.code, 0, "{args:?}");
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
}

/// `check --msccl` proves an MSCCL program as import does, and fails on a wrong one.
#[test]
fn check_proves_an_msccl_program_or_refuses_it() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let good = railyard(&["schedule", "check", "--msccl", &format!("{root}/samples/msccl/allreduce_ring_8gpu.xml")]);
    assert_eq!(good.code, 0, "{}", good.stderr);
    assert!(good.stdout.contains("Proved, in every mode"), "{}", good.stdout);
    let bad =
        railyard(&["schedule", "check", "--msccl", &format!("{root}/corpus/msccl/hostile-t1-hasdep0-deadlock.xml")]);
    assert_ne!(bad.code, 0, "{}", bad.stdout);
    let neither = railyard(&["schedule", "check"]);
    assert_eq!(neither.code, 2, "{}", neither.stderr);
    // A coll="custom" program (msccl-tools' solver) is proved as the collective named,
    // with the root its steps tell; without a name it is refused, saying what to name;
    // another program's own collective is not overridden.
    let custom = format!("{root}/corpus/msccl/sccl-ring4-broadcast-root1-s2.xml");
    let named = railyard(&["schedule", "check", "--msccl", &custom, "--collective", "broadcast"]);
    assert_eq!(named.code, 0, "{}", named.stderr);
    assert!(named.stdout.contains("broadcast from GPU 1 over 4 GPUs"), "{}", named.stdout);
    let unnamed = railyard(&["schedule", "check", "--msccl", &custom]);
    assert_ne!(unnamed.code, 0, "{}", unnamed.stdout);
    assert!(unnamed.stderr.contains("name the collective it implements"), "{}", unnamed.stderr);
    let other = format!("{root}/samples/msccl/allreduce_ring_8gpu.xml");
    let renamed = railyard(&["schedule", "check", "--msccl", &other, "--collective", "allgather"]);
    assert_ne!(renamed.code, 0, "{}", renamed.stdout);
    assert!(renamed.stderr.contains("not allgather"), "{}", renamed.stderr);
}

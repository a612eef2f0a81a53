//! `railyard perf` and `railyard launch` with real processes (a small set; the thread
//! matrix in the runtime crate covers every combination).

mod common;
use common::{json, railyard};

#[test]
fn perf_runs_ranks_as_processes_and_checks_every_element() {
    for (collective, np) in [
        ("all_reduce", "2"),
        ("all_gather", "3"),
        ("reduce_scatter", "2"),
        ("all_to_all", "3"),
        ("broadcast", "2"),
        ("reduce", "3"),
        ("gather", "3"),
        ("scatter", "3"),
        ("sendrecv", "3"),
    ] {
        let rows = json(&[
            // Up to 256 KiB: frames of 4 KiB and more take the single-copy path between processes.
            "perf", collective, "--np", np, "-b", "8", "-e", "256K", "-f", "8", "-n", "2", "-w", "1", "--format", "json",
        ]);
        let rows = rows.as_array().unwrap();
        assert!(!rows.is_empty(), "{collective}");
        for r in rows {
            assert_eq!(r["out_of_place"]["wrong"], 0, "{collective}: {r}");
            assert_eq!(r["in_place"]["wrong"], 0, "{collective}: {r}");
            assert!(r["out_of_place"]["time_us"].as_f64().unwrap() > 0.0);
            assert!(r["algo"].as_str().is_some_and(|a| a != "none"), "{collective}: no algorithm: {r}");
        }
    }
}

/// Issue 41: `-c 1` checks integer reductions as the runtime computes them, wrapping in
/// the type's width: at 8 ranks a product of values up to 5 overflows uint8 (the checker
/// computed it in f64 and saturated, reporting 8,192 wrong elements of a right result).
#[test]
fn integer_reductions_are_checked_as_they_wrap() {
    for dtype in ["uint8", "int32", "int64"] {
        for op in ["sum", "prod", "min", "max", "avg"] {
            let rows = json(&[
                "perf",
                "all_reduce",
                "--np",
                "8",
                "-c",
                "1",
                "-n",
                "1",
                "-w",
                "0",
                "-d",
                dtype,
                "-o",
                op,
                "-b",
                "1K",
                "-e",
                "1K",
                "--format",
                "json",
            ]);
            for r in rows.as_array().unwrap() {
                assert_eq!(r["out_of_place"]["wrong"], 0, "{dtype} {op}: {r}");
                assert_eq!(r["in_place"]["wrong"], 0, "{dtype} {op}: {r}");
            }
        }
    }
}

/// Transfers of 2 MiB and more between processes are shared: the receiver pulls pieces
/// while the sender pushes others (`shm.rs`); every element must land once, in place.
#[test]
fn large_transfers_shared_between_processes_are_exact() {
    for (collective, np) in [("broadcast", "2"), ("all_gather", "2"), ("all_reduce", "2")] {
        let rows =
            json(&["perf", collective, "--np", np, "-b", "6M", "-e", "6M", "-n", "2", "-w", "1", "--format", "json"]);
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 1, "{collective}");
        assert_eq!(rows[0]["out_of_place"]["wrong"], 0, "{collective}: {}", rows[0]);
        assert_eq!(rows[0]["in_place"]["wrong"], 0, "{collective}: {}", rows[0]);
    }
}

#[test]
fn perf_prints_the_nccl_tests_columns() {
    let out =
        railyard(&["perf", "all_reduce", "--np", "2", "-b", "1K", "-e", "1K", "-n", "2", "-d", "half", "-o", "max"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("#       size         count      type   redop    root     time   algbw   busbw  #wrong"),
        "{}",
        out.stdout
    );
    let row = out.stdout.lines().find(|l| l.trim_start().starts_with("1024")).expect("a 1024-byte row");
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[..5], &["1024", "512", "half", "max", "-1"]);
    assert_eq!(cols[8], "0");
    assert!(out.stdout.contains("# Out of bounds values : 0 OK"));
    // The algorithm that ran closes the row; the summary is C's %g (6 significant digits).
    let algo = cols.last().copied().unwrap_or_default();
    assert!(algo.parse::<railyard_schedule::Algorithm>().is_ok(), "{row}");
    let avg = out.stdout.lines().find_map(|l| l.strip_prefix("# Avg bus bandwidth    : ")).expect("a summary");
    let digits = avg.trim().trim_start_matches("0.").trim_start_matches('0').replace('.', "");
    assert!(digits.len() <= 6 && avg.trim().parse::<f64>().is_ok(), "{avg}");
}

/// --algo is honoured (the column says so) or refused, never replaced; -a, -m, -N, -C and
/// -T do what nccl-tests' do; -g and -t have no meaning here and are refused, saying why.
#[test]
fn perf_honours_or_refuses_the_nccl_tests_flags() {
    let rows = json(&[
        "perf",
        "all_reduce",
        "--np",
        "2",
        "-b",
        "64",
        "-e",
        "64",
        "-n",
        "3",
        "--algo",
        "rhd",
        "--format",
        "json",
    ]);
    assert_eq!(rows[0]["algo"], "rhd");
    let out = railyard(&[
        "perf",
        "all_gather",
        "--np",
        "2",
        "-b",
        "1K",
        "-e",
        "1K",
        "-n",
        "2",
        "-a",
        "3",
        "-m",
        "2",
        "-N",
        "2",
        "-C",
        "1",
        "-T",
        "10",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.matches("# Avg bus bandwidth").count(), 2, "two cycles: {}", out.stdout);
    assert!(out.stdout.contains(" cputime "), "{}", out.stdout);
    for (args, says) in [
        (vec!["perf", "all_reduce", "-g", "2"], "no GPUs"),
        (vec!["perf", "all_reduce", "-t", "4"], "one rank per process"),
        (vec!["perf", "broadcast", "--algo", "ring"], "does not implement broadcast"),
        (vec!["perf", "all_reduce", "-N", "0"], "-N 0"),
        (vec!["perf", "all_reduce", "-a", "7"], "-a 7"),
        (vec!["perf", "all_reduce", "-T", "0"], "-T 0"),
    ] {
        let out = railyard(&args);
        assert_ne!(out.code, 0, "{args:?}");
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn out_of_place_only_leaves_in_place_unmeasured() {
    let rows = json(&[
        "perf",
        "all_gather",
        "--np",
        "2",
        "-b",
        "64",
        "-e",
        "1K",
        "-f",
        "4",
        "-n",
        "2",
        "-w",
        "1",
        "--out-of-place-only",
        "--format",
        "json",
    ]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for r in rows {
        assert_eq!(r["out_of_place"]["wrong"], 0, "{r}");
        assert!(r["in_place"].is_null(), "{r}");
    }
}

#[test]
fn launch_sets_the_launcher_variables() {
    let exe = env!("CARGO_BIN_EXE_railyard");
    let out = railyard(&[
        "launch",
        "-n",
        "2",
        "--",
        exe,
        "perf",
        "all_reduce",
        "-b",
        "64",
        "-e",
        "64",
        "-n",
        "1",
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rows: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("rank 0's JSON");
    assert_eq!(rows[0]["size"], 64);
    assert_eq!(rows[0]["out_of_place"]["wrong"], 0);
}

#[test]
fn perf_rejects_bad_arguments() {
    for args in [
        vec!["perf", "barrier"],
        vec!["perf", "all_reduce", "-b", "1M", "-e", "1K"],
        vec!["perf", "all_reduce", "-d", "complex"],
        vec!["perf", "all_reduce", "-o", "xor"],
        vec!["perf", "all_reduce", "--np", "0"],
        vec!["perf", "broadcast", "-r", "5", "--np", "2", "-b", "8", "-e", "8"],
    ] {
        let out = railyard(&args);
        assert_ne!(out.code, 0, "{args:?}");
        assert!(!out.stderr.contains("panicked"), "{args:?}: {}", out.stderr);
    }
}

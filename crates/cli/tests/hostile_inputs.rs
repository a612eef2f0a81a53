//! What a hostile trial fed the CLI (issue 41): each input gets a right answer or an error
//! that says what is wrong — never "NaNx faster", a value kept silently, a 300-digit
//! number, "invalid digit found in string", or a run without end. Inputs too long to
//! spell on a command line are in tests/hostile/.

mod common;
use common::railyard;
use std::path::PathBuf;

fn input(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hostile").join(name).display().to_string()
}

/// Runs `args`; the exit code is 0 iff `ok`, and the output (stdout for a success,
/// stderr for an error) contains every `want` and none of the words no output may hold.
fn expect(args: &[&str], ok: bool, want: &[&str]) {
    let out = railyard(args);
    assert_eq!(out.code == 0, ok, "{args:?}: exit {}\n{}{}", out.code, out.stdout, out.stderr);
    let text = if ok { &out.stdout } else { &out.stderr };
    for w in want {
        assert!(text.contains(w), "{args:?}: no {w:?} in\n{text}");
    }
    for bad in ["NaN", "invalid digit", "0000000000000000", "panicked"] {
        // An input quoted back is not a result.
        if args.iter().any(|a| a.contains(bad)) {
            continue;
        }
        assert!(!out.stdout.contains(bad) && !out.stderr.contains(bad), "{args:?} printed {bad:?}:\n{text}");
    }
}

#[test]
fn plans_of_nothing_say_so() {
    expect(&["plan", "--ranks", "1"], true, &["nothing moves (one rank)"]);
    expect(&["plan", "--size", "0"], true, &["nothing moves (0 bytes)"]);
    expect(&["plan", "--size", "-0"], true, &["nothing moves (0 bytes)"]);
    expect(&["plan", "--topo", "mesh:ranks=1"], true, &["nothing moves (one rank)"]);
}

#[test]
fn presets_refuse_what_they_would_drop() {
    expect(&["plan", "--topo", "rail:servers=2,servers=4"], false, &["\"servers\" is given twice"]);
    expect(&["plan", "--topo", "clos:k=8,endpoints=0"], false, &["endpoints=0: at least 1"]);
}

#[test]
fn numbers_are_read_and_shown_as_a_person_writes_them() {
    for f in ["0.5", "1.0000001", "NaN", "inf"] {
        expect(&["plan", "--sweep", "8B:1KiB", "--sweep-factor", f], false, &["whole number of at least 2"]);
    }
    expect(&["plan", "--algo", "auto,ring"], false, &["\"auto\" means every algorithm and stands alone"]);
    // An exponent with a sign is a number; a tiny one is named with its limit.
    expect(&["plan", "--topo", "rail:nic=1e-308GB/s"], false, &["1 byte/s to 10 PB/s", "got 1e-299"]);
    expect(&["plan", "--topo", "rail:nic=1e-300B/s"], false, &["got 1e-300"]);
    expect(&["plan", "--topo", "rail:nic=5e-324"], false, &["got 5e-324"]);
    expect(&["plan", "--topo", "rail:alpha=1e308s"], false, &["0 to 1 s", "got 1e308 s"]);
    expect(&["plan", "--topo", "rail:nic=1e308"], false, &["got 1e308"]);
    expect(&["sim", "--dt", "1e-12s", "--flow-control", "drop"], false, &["dt = 1e-12 is out of its range", "0.1 ns"]);
    let ready = vec!["1e300s"; 16].join(",");
    expect(&["sim", "--ready", &ready, "--algo", "ring"], false, &["ready time 1e300 s", "0 to 1.8e7 s"]);
    expect(&["sim", "--ready", "0,0", "--algo", "ring"], false, &["--ready: 2 times for 16 ranks"]);
    expect(&["sim", "--jobs", &input("jobs-compute-inf.toml")], false, &["compute time 1e300 s"]);
}

#[test]
fn a_path_says_what_it_is() {
    expect(&["plan", "--topo", "/dev/zero"], false, &["is not a regular file"]);
    expect(&["plan", "--topo", "/dev/null"], false, &["is not a regular file"]);
    expect(&["plan", "--topo", env!("CARGO_MANIFEST_DIR")], false, &["is a directory"]);
    let smi = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../topologies/samples/bridge-4gpu.nvidia-smi.txt");
    let out = railyard(&["topo", "import", "--nvidia-smi", smi.to_str().unwrap(), "--servers", "0"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("copies of the machine") && !out.stderr.contains("preset"), "{}", out.stderr);
}

#[test]
fn nccl_artifacts_name_what_is_wrong_in_them() {
    for (file, want) in [
        ("nranks-0.log", "nRanks 0: a rank count is 1 to 65536"),
        ("nranks-300000.log", "nRanks 300000: a rank count is 1 to 65536"),
        ("nranks-huge.log", "nRanks 99999999999: a rank count is 1 to 65536"),
    ] {
        expect(&["analyze", "nccl-log", &input(file)], false, &[want]);
    }
    expect(&["analyze", "nccl-log", &input("tree-parent-9999.log")], true, &["bad tree", "parent 9999 is not a rank"]);
    expect(&["analyze", "nccl-log", &input("tree-no-root.log")], true, &["bad tree", "no rank is the root"]);
    expect(&["analyze", "nccl-log", &input("ring-twice.log")], true, &["channel 1", "rank 1 appears twice"]);
    expect(
        &["analyze", "nccl-tests", &input("count-wrong.txt")],
        true,
        &["a count of 999 float is not the size of 1073741824 B"],
    );
    expect(&["schedule", "import", "--msccl", &input("srcoff-negative.xml")], false, &["srcoff=\"-5\" is negative"]);
    let out = railyard(&["schedule", "import", "--msccl", &input("nchunks-zero.xml")]);
    assert!(out.stderr.contains("nchunksperloop=\"0\": 1 to") && !out.stderr.contains("ngpus"), "{}", out.stderr);
}

/// Searches and simulations with no bound of their own stop at a named limit, in seconds.
#[test]
fn searches_and_simulations_end() {
    // 300 GPUs on one NVSwitch: the ring heuristic stops at its limit of orders scored
    // (it once ran for minutes).
    let n = 300;
    let mut smi = format!(
        "\t{}\tCPU Affinity\tNUMA Affinity\n",
        (0..n).map(|i| format!("GPU{i}")).collect::<Vec<_>>().join("\t")
    );
    for i in 0..n {
        let cells: Vec<&str> = (0..n).map(|j| if i == j { "X" } else { "NV18" }).collect();
        smi.push_str(&format!("GPU{i}\t{}\t0-63\t0\n", cells.join("\t")));
    }
    smi.push_str("\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n");
    let path = std::env::temp_dir().join(format!("railyard-smi300-{}.txt", std::process::id()));
    std::fs::write(&path, smi).unwrap();
    let started = std::time::Instant::now();
    expect(
        &["topo", "import", "--nvidia-smi", path.to_str().unwrap(), "--ring"],
        true,
        &["stopped after", "orders scored"],
    );
    assert!(started.elapsed().as_secs() < 60);
    // Every round of a 4,096-rank ring: 33.5 million transfers, refused before any is simulated.
    expect(
        &["sim", "--topo", "rail:servers=512", "--algo", "ring", "--every-round", "--no-compare"],
        false,
        &["more than the limit of 8388608"],
    );
}

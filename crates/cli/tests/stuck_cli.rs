//! A stuck rank is named with its step; killed setups leave no ring files; the flight
//! recorder's dumps let `railyard triage` name the first call where ranks disagree.
//! Tests that count /dev/shm files run one at a time (a lock), since a concurrent job's
//! rings would be counted too.

mod common;
use common::railyard;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SHM: Mutex<()> = Mutex::new(());

fn ring_files() -> usize {
    std::fs::read_dir("/dev/shm")
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("railyard-")).count())
        .unwrap_or(0)
}

/// The pids of `parent`'s children whose environment says RANK=`rank`.
fn rank_pid(parent: u32, rank: usize, want: usize) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).unwrap_or_default();
        let kids: Vec<i32> = text.split_whitespace().filter_map(|p| p.parse().ok()).collect();
        if kids.len() == want {
            return kids.into_iter().find(|k| {
                std::fs::read(format!("/proc/{k}/environ"))
                    .map(|e| e.split(|&b| b == 0).any(|v| v == format!("RANK={rank}").as_bytes()))
                    .unwrap_or(false)
            });
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGSTOP one of 3 ranks in a loop of small all-reduces: the job ends soon after the
/// timeout (2 s), and the error names the stopped rank, that it is stopped, and the call
/// and round the others wait in. (Bounds on time here are "did it end by itself": the
/// stopped rank would hold the job forever.)
#[test]
fn a_stopped_rank_is_named_with_the_step_the_others_wait_in() {
    let _one = SHM.lock().unwrap_or_else(|e| e.into_inner());
    let before = ring_files();
    for trial in 0..3 {
        let perf = Command::new(env!("CARGO_BIN_EXE_railyard"))
            .args(["perf", "all_reduce", "--np", "3", "-b", "8", "-e", "8", "-n", "100000000", "-c", "0"])
            .env("RAILYARD_TIMEOUT_SECS", "2")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let victim = rank_pid(perf.id(), 1, 3).expect("perf started its 3 ranks");
        // Let the calls start (setup and warm-up done).
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: stopping a process this test started (perf's rank 1).
        unsafe { libc::kill(victim, libc::SIGSTOP) };
        let stopped = Instant::now();
        let out = perf.wait_with_output().unwrap();
        let took = stopped.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        eprintln!("trial {trial}: ended {took:?} after the stop\n{err}");
        assert_ne!(out.status.code(), Some(0), "{err}");
        assert!(took < Duration::from_secs(20), "the job did not end: {took:?}");
        assert!(err.contains(&format!("rank 1's process (pid {victim}) is stopped")), "{err}");
        assert!(err.contains("in call #") && err.contains("at round "), "no call or step: {err}");
        assert!(!err.contains("rank 0 is stuck") && !err.contains("rank 2 is stuck"), "a live rank blamed: {err}");
        // No rank survives the job.
        assert!(std::fs::metadata(format!("/proc/{victim}/stat")).is_err() || zombie(victim), "rank 1 survived");
    }
    assert_eq!(ring_files(), before, "ring files left in /dev/shm");
}

fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(true)
}

/// Ranks killed while they set up their shared-memory rings (or just after) leave no file
/// behind: the launcher sweeps the job's files when it ends. The job asks for more calls
/// than it can finish, so it ends only because of the kill (with 10 calls, a fast machine
/// finished the whole job inside 150 ms and exited 0 before the kill).
#[test]
fn ranks_killed_during_setup_leave_no_ring_files() {
    let _one = SHM.lock().unwrap_or_else(|e| e.into_inner());
    let before = ring_files();
    for delay_ms in [30, 80, 150] {
        let mut perf = Command::new(env!("CARGO_BIN_EXE_railyard"))
            .args(["perf", "all_reduce", "--np", "8", "-b", "8", "-e", "8", "-n", "100000000", "-c", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let Some(victim) = rank_pid(perf.id(), 3, 8) else {
            let _ = perf.kill();
            let _ = perf.wait();
            panic!("perf did not start its 8 ranks within 20 s");
        };
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: killing a process this test started (perf's rank 3).
        unsafe { libc::kill(victim, libc::SIGKILL) };
        let out = perf.wait_with_output().unwrap();
        assert_ne!(out.status.code(), Some(0), "killed at {delay_ms} ms");
        assert_eq!(ring_files(), before, "ring files left after a kill at {delay_ms} ms");
    }
}

/// Two ranks desync at their second call (8 against 16 elements): each writes its
/// flight recorder on the error, and triage names call #2, the size, both values, and
/// where each rank stopped.
#[test]
fn triage_names_the_first_call_where_ranks_disagree() {
    use railyard_runtime::{Communicator, Config, RedOp, UniqueId};
    let dir = std::env::temp_dir().join(format!("railyard-triage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config =
        Config { timeout: Duration::from_secs(20), dump_dir: Some(dir.clone()), trace_buffer: 8, ..Config::default() };
    let id = UniqueId::new(railyard_runtime::loopback_rendezvous_addr().unwrap()).unwrap();
    let ranks: Vec<_> = (0..2)
        .map(|r| {
            let (id, config) = (id.clone(), config.clone());
            std::thread::spawn(move || {
                let mut comm = Communicator::init(&id, r, 2, config).unwrap();
                let mut a = vec![1.0f32; 8];
                comm.all_reduce_in_place(&mut a, RedOp::Sum).unwrap();
                let mut b = vec![1.0f32; 8 + 8 * r];
                comm.all_reduce_in_place(&mut b, RedOp::Sum).unwrap_err();
            })
        })
        .collect();
    for r in ranks {
        r.join().unwrap();
    }
    let out = railyard(&["triage", dir.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let t = &out.stdout;
    assert!(t.contains("desync: call #2 is the first where ranks disagree, on size"), "{t}");
    assert!(t.contains("rank 0: 8 elements") && t.contains("rank 1: 16 elements"), "{t}");
    assert!(t.contains("waiting: rank 0 in call #2") && t.contains("failed at round 1 of 1"), "{t}");
    let json: serde_json::Value =
        serde_json::from_str(&railyard(&["triage", dir.to_str().unwrap(), "--format", "json"]).stdout).unwrap();
    assert_eq!(json["desync"]["seq"], 2);
    assert_eq!(json["desync"]["field"], "size");
    // An empty directory is explained.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let none = railyard(&["triage", empty.to_str().unwrap()]);
    assert!(none.code != 0 && none.stderr.contains("RAILYARD_DUMP_DIR"), "{}", none.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// PyTorch Flight Recorder dumps (JSON, as `_dump_fr_trace_json` writes them; written
/// here): triage names the rank behind and where NCCL's algorithm waits; a file that
/// is not one is named; an empty directory names both dump formats.
#[test]
fn triage_reads_pytorch_flight_recorder_dumps() {
    let dir = std::env::temp_dir().join(format!("railyard-fr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let entry = |seq: u64, op: &str, n: u64| {
        format!(
            r#"{{"record_id": {seq}, "process_group": ["0", "default_pg"], "collective_seq_id": {seq}, "p2p_seq_id": 0,
                "profiling_name": "nccl:{op}", "input_sizes": [[{n}]], "input_dtypes": ["BFloat16"],
                "output_sizes": [[{n}]], "state": "scheduled", "time_created_ns": {seq}}}"#
        )
    };
    let dump = |upto: u64| {
        let entries: Vec<String> =
            (1..=upto).map(|s| entry(s, if s == 3 { "all_reduce" } else { "broadcast" }, 1 << 20)).collect();
        format!(
            r#"{{"version": "2.10", "pg_config": {{"0": {{"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}}}},
                "entries": [{}]}}"#,
            entries.join(",")
        )
    };
    for rank in 0..8 {
        std::fs::write(dir.join(format!("nccl_trace_rank_{rank}")), dump(if rank == 5 { 2 } else { 3 })).unwrap();
    }
    let out = railyard(&["triage", dir.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = &out.stdout;
    assert!(text.contains("behind: rank 5 last issued collective #2; the others reached #3"), "{text}");
    assert!(text.contains("in NCCL's algorithm: all_reduce of 2097152 B on 8 ranks"), "{text}");
    assert!(text.contains("rank 5 never joins it"), "{text}");
    // A torn file (a rank that crashed while writing) is named; the others still tell.
    std::fs::write(dir.join("nccl_trace_rank_8"), b"\x80\x04not a pickle").unwrap();
    let out = railyard(&["triage", dir.to_str().unwrap()]);
    let text = &out.stdout;
    assert!(out.code == 0 && text.contains("unreadable, its rank counted as missing"), "{text}");
    assert!(text.contains("nccl_trace_rank_8") && text.contains("behind: rank 5"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    let out = railyard(&["triage", dir.to_str().unwrap()]);
    let err = &out.stderr;
    assert!(err.contains("railyard-trace-rank") && err.contains("TORCH_FR_DUMP_TEMP_FILE"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

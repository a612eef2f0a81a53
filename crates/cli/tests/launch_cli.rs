//! `railyard launch` manages the job: the first failure stops the others and its exit
//! code is the launcher's; signals reach every rank; ranks die with the launcher; stderr
//! lines come out whole with their rank; LOCAL_WORLD_SIZE is set; --timeout stops the job.
//! (Bounds on elapsed time here are "did it stop at all", against ranks that sleep 60 s.)

mod common;
use common::railyard;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn alive(pid: i32) -> bool {
    // A zombie (exited, not yet reaped by whoever adopted it) is not alive.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

fn pids(dir: &std::path::Path, n: usize) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got: Vec<i32> = (0..n)
            .filter_map(|r| std::fs::read_to_string(dir.join(format!("pid.{r}"))).ok())
            .filter_map(|t| t.trim().parse().ok())
            .collect();
        if got.len() == n || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("railyard-launch-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_first_failure_stops_the_job_with_its_exit_code() {
    let start = Instant::now();
    let out = railyard(&[
        "launch",
        "-n",
        "3",
        "--",
        "sh",
        "-c",
        "if [ $RANK = 1 ]; then echo broken >&2; exit 3; fi; exec sleep 60",
    ]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(start.elapsed() < Duration::from_secs(30), "the sleeping ranks were not stopped");
    assert!(out.stderr.contains("[rank 1] broken"), "{}", out.stderr);
    assert!(out.stderr.contains("rank 1 exited with code 3"), "{}", out.stderr);
    let killed =
        railyard(&["launch", "-n", "2", "--", "sh", "-c", "if [ $RANK = 0 ]; then kill -9 $$; fi; exec sleep 60"]);
    assert_eq!(killed.code, 128 + 9, "{}", killed.stderr);
}

#[test]
fn stderr_lines_carry_their_rank_and_the_variables_are_set() {
    let script = "for i in 1 2 3 4 5 6 7 8; do echo line-$RANK-$i-of-$LOCAL_WORLD_SIZE >&2; done";
    let out = railyard(&["launch", "-n", "2", "--", "sh", "-c", script]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for r in 0..2 {
        for i in 1..=8 {
            let want = format!("[rank {r}] line-{r}-{i}-of-2");
            assert!(out.stderr.lines().any(|l| l == want), "no {want:?} in {}", out.stderr);
        }
    }
    assert!(out.stderr.lines().all(|l| l.starts_with("[rank ")), "{}", out.stderr);
}

/// Issue 41: ranks' stdout lines come out whole, even lines longer than a pipe writes at
/// once (20,000 bytes each, written in pieces by `head | tr`, then the newline), and with
/// --prefix each starts with its rank.
#[test]
fn stdout_lines_come_out_whole_and_optionally_prefixed() {
    let script = "for i in 1 2 3 4 5 6 7 8 9 10; do head -c 20000 /dev/zero | tr '\\0' $RANK; echo; done";
    for prefix in [false, true] {
        let mut args = vec!["launch", "-n", "4"];
        if prefix {
            args.push("--prefix");
        }
        args.extend(["--", "sh", "-c", script]);
        let out = railyard(&args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines.len(), 40, "{} lines", lines.len());
        for line in lines {
            let (rank, body) = match prefix {
                true => {
                    let rest = line.strip_prefix("[rank ").expect("a prefix");
                    let (r, body) = rest.split_once("] ").expect("a prefix");
                    (r.chars().next().unwrap(), body)
                }
                false => (line.chars().next().unwrap(), line),
            };
            assert_eq!(body.len(), 20000, "a line cut or mixed: {}...", &line[..60.min(line.len())]);
            assert!(body.chars().all(|c| c == rank), "a line mixes ranks: {}...", &line[..60.min(line.len())]);
        }
    }
}

#[test]
fn timeout_stops_the_job() {
    let start = Instant::now();
    let out = railyard(&["launch", "-n", "2", "--timeout", "1", "--", "sleep", "60"]);
    assert_eq!(out.code, 124, "{}", out.stderr);
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(out.stderr.contains("--timeout"), "{}", out.stderr);
    assert_ne!(railyard(&["launch", "-n", "2", "--timeout", "-1", "--", "true"]).code, 0);
}

#[test]
fn sigterm_reaches_every_rank_and_a_killed_launcher_takes_its_ranks() {
    for (name, sig, want) in [("term", libc::SIGTERM, Some(128 + libc::SIGTERM)), ("kill", libc::SIGKILL, None)] {
        let dir = scratch(name);
        let script = format!("echo $$ > {}/pid.$RANK; exec sleep 60", dir.display());
        let mut launcher = Command::new(env!("CARGO_BIN_EXE_railyard"))
            .args(["launch", "-n", "2", "--", "sh", "-c", &script])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let ranks = pids(&dir, 2);
        assert_eq!(ranks.len(), 2, "the ranks did not start");
        // SAFETY: signalling the launcher child this test started.
        unsafe { libc::kill(launcher.id() as i32, sig) };
        let status = launcher.wait().unwrap();
        if let Some(code) = want {
            assert_eq!(status.code(), Some(code));
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while ranks.iter().any(|&p| alive(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ranks.iter().all(|&p| !alive(p)), "{name}: ranks outlived the launcher");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn killing_perf_takes_its_ranks() {
    let mut perf = Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(["perf", "all_reduce", "--np", "2", "-b", "1M", "-e", "1M", "-n", "1000000", "-c", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = perf.id();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut ranks: Vec<i32> = Vec::new();
    while ranks.len() < 2 && Instant::now() < deadline {
        let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        ranks = text.split_whitespace().filter_map(|p| p.parse().ok()).collect();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ranks.len(), 2, "perf did not start its ranks");
    perf.kill().unwrap();
    perf.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while ranks.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ranks.iter().all(|&p| !alive(p)), "perf's ranks outlived it");
}

#[test]
fn a_rank_that_left_the_process_group_is_stopped_too() {
    // Rank 1 starts its own session (setsid, which execs in place in a process that does
    // not lead its group), so a signal to the job's process group misses it, and starts a
    // child there that holds its stderr; it writes both pids from inside the new session,
    // and only then does rank 0 fail.
    let dir = scratch("setsid");
    let d = dir.display();
    let script = format!(
        "if [ $RANK = 1 ]; then exec setsid sh -c 'sleep 60 & echo $! > {d}/child; echo $$ > {d}/pid.1; wait'; fi; \
         while [ ! -s {d}/pid.1 ]; do sleep 0.05; done; exit 3"
    );
    let start = Instant::now();
    let out = railyard(&["launch", "-n", "2", "--", "sh", "-c", &script]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(start.elapsed() < Duration::from_secs(30), "the rank outside the group was not stopped");
    for file in ["pid.1", "child"] {
        let pid: i32 = std::fs::read_to_string(dir.join(file)).unwrap().trim().parse().unwrap();
        assert!(!alive(pid), "{file} ({pid}) outlived the launcher");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_a_rank_leaves_behind_ends_with_the_job() {
    // Rank 1 starts a background process in the job's group and exits 0 without waiting
    // for it; the job succeeds, and the launcher (its reaper once rank 1 is gone) gives it
    // a grace period, then stops it rather than leave it running. One that ends within
    // the grace (a log pipeline finishing) is only reaped.
    let dir = scratch("leftover");
    let script = format!("if [ $RANK = 1 ]; then sleep 60 & echo $! > {}/left; fi; exit 0", dir.display());
    let start = Instant::now();
    let out = railyard(&["launch", "-n", "2", "--", "sh", "-c", &script]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(start.elapsed() < Duration::from_secs(30), "the launcher waited for the leftover");
    assert!(
        out.stderr
            .contains("the ranks left processes running after the job: 1 sent SIGTERM, 0 SIGKILL, 0 still running"),
        "{}",
        out.stderr
    );
    let pid: i32 = std::fs::read_to_string(dir.join("left")).unwrap().trim().parse().unwrap();
    assert!(!alive(pid), "the leftover ({pid}) outlived the launcher");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_a_rank_leaves_behind_gets_a_grace_period_to_finish() {
    // A process that ends on its own shortly after its rank (a log pipeline flushing) is
    // reaped, not killed: its work is done and nothing is reported.
    let dir = scratch("late");
    let script = format!("if [ $RANK = 1 ]; then (sleep 0.3; echo done > {}/late) & fi; exit 0", dir.display());
    let out = railyard(&["launch", "-n", "2", "--", "sh", "-c", &script]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(dir.join("late")).unwrap_or_default(), "done\n", "{}", out.stderr);
    assert!(!out.stderr.contains("left processes running"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_leftover_that_ignores_sigterm_is_killed_with_its_children() {
    // A leftover ignoring SIGTERM, with a child that inherited the ignored signal: the
    // child comes back to the launcher only once its parent has been killed, after the
    // SIGKILLs went out, and must be killed too.
    let dir = scratch("ignores-term");
    let script = format!(
        "if [ $RANK = 1 ]; then sh -c 'trap \"\" TERM; sleep 60 & echo $! > {}/grandchild; wait' & fi; \
         while [ $RANK = 1 ] && [ ! -s {}/grandchild ]; do sleep 0.05; done; exit 0",
        dir.display(),
        dir.display()
    );
    let out = railyard(&["launch", "-n", "2", "--", "sh", "-c", &script]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("0 still running"), "{}", out.stderr);
    let pid: i32 = std::fs::read_to_string(dir.join("grandchild")).unwrap().trim().parse().unwrap();
    assert!(!alive(pid), "the leftover's child ({pid}) outlived the launcher");
    let _ = std::fs::remove_dir_all(&dir);
}

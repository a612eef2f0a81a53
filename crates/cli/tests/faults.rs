//! A rank killed with SIGKILL in the middle of an all-reduce: every other rank must fail
//! (not hang) within the timeout + 5 s, in 20 of 20 tries.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn killing_a_rank_mid_all_reduce_fails_the_others_in_time() {
    let exe = env!("CARGO_BIN_EXE_railyard");
    let timeout_secs = 3u64;
    for attempt in 0..20 {
        let port = railyard_runtime::loopback_rendezvous_addr().unwrap();
        let id = format!("{port}#{:032x}", 0x1234_5678_9abc_def0u128 + attempt as u128);
        let mut ranks: Vec<_> = (0..3)
            .map(|rank| {
                Command::new(exe)
                    .args(["perf", "all_reduce", "-b", "8M", "-e", "8M", "-n", "100000", "-w", "0", "-c", "0"])
                    .env("RAILYARD_ID", &id)
                    .env("RAILYARD_RANK", rank.to_string())
                    .env("RAILYARD_WORLD_SIZE", "3")
                    .env("RAILYARD_TIMEOUT_SECS", timeout_secs.to_string())
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(400));
        // All three must still be running: the kill lands mid-call, not after a failed start.
        for (rank, child) in ranks.iter_mut().enumerate() {
            assert!(child.try_wait().unwrap().is_none(), "attempt {attempt}: rank {rank} exited before the kill");
        }
        let victim = 1 + attempt % 2;
        ranks[victim].kill().unwrap(); // SIGKILL
        let killed_at = Instant::now();
        for (rank, child) in ranks.iter_mut().enumerate() {
            if rank == victim {
                let _ = child.wait();
                continue;
            }
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    assert!(!status.success(), "attempt {attempt}: rank {rank} finished without an error");
                    break;
                }
                if killed_at.elapsed() > Duration::from_secs(timeout_secs + 5) {
                    let _ = child.kill();
                    panic!("attempt {attempt}: rank {rank} still running {} s after the kill", timeout_secs + 5);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

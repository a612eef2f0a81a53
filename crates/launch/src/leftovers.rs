//! What the ranks leave behind: orphans come back to the launcher (a subreaper), which
//! reaps those that end and stops the rest when the job is over.

use std::process::Child;
use std::time::{Duration, Instant};

use crate::GRACE;

/// The most processes left behind by the ranks that the launcher signals.
const MAX_LEFTOVERS: usize = 4096;

/// Make this process the reaper of its orphaned descendants: a process a rank started and
/// left behind (a daemon, a child of a rank killed at teardown, a `setsid` that forked)
/// comes back to the launcher, which stops it when the job ends (`stop_leftovers`).
pub(crate) fn adopt_orphans() {
    // SAFETY: prctl(2) PR_SET_CHILD_SUBREAPER takes a flag and changes only which process
    // inherits this one's orphaned descendants.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    }
}

/// This process's children: every thread's list, or only the main thread's (which
/// started the ranks and, while it lives, is the one orphans are handed to).
fn children_now(every_thread: bool) -> Vec<libc::pid_t> {
    let read = |path: std::path::PathBuf, pids: &mut Vec<libc::pid_t>| {
        if let Ok(text) = std::fs::read_to_string(path) {
            pids.extend(text.split_whitespace().filter_map(|p| p.parse::<libc::pid_t>().ok()));
        }
    };
    let mut pids = Vec::new();
    if every_thread {
        for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
            read(task.path().join("children"), &mut pids);
        }
    } else {
        read(format!("/proc/self/task/{}/children", std::process::id()).into(), &mut pids);
    }
    pids.sort_unstable();
    pids.dedup();
    pids.truncate(MAX_LEFTOVERS);
    pids
}

/// Reap those of `pids` (children of this process that are not ranks) that have ended;
/// the ones still running.
fn reap_ended(pids: impl IntoIterator<Item = libc::pid_t>) -> Vec<libc::pid_t> {
    let mut running = Vec::new();
    for pid in pids {
        // SAFETY: waitpid(2) with WNOHANG on a child of this process (listed by the kernel
        // just now; only the main thread reaps, so it is still ours) that is not a rank,
        // whose status `Child::try_wait` collects: reaps it if it has ended, else returns
        // 0 at once.
        if unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) } == 0 {
            running.push(pid);
        }
    }
    running
}

/// Reap the leftovers that have already ended, so a long job whose ranks leave short-lived
/// processes behind does not pile up zombies; never a rank (`ranks`).
pub(crate) fn reap_ended_leftovers(ranks: &[Child]) {
    reap_ended(children_now(false).into_iter().filter(|&pid| !ranks.iter().any(|c| c.id() as libc::pid_t == pid)));
}

/// What became of the processes the ranks left behind.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Leftovers {
    /// Still running after the grace period: sent SIGTERM.
    pub stopped: usize,
    /// Still running a grace period later, or handed to the launcher after that (the
    /// children of those): sent SIGKILL.
    pub killed: usize,
    /// Not gone when the launcher gave up: left to init.
    pub left: usize,
}

/// Once every rank is reaped, every child of the launcher is something the ranks left
/// behind (their own children come back here as they die). Give them the grace period to
/// end on their own (a log pipeline behind a rank's output, a clean-up a rank started),
/// then SIGTERM, then after another grace period SIGKILL; reap whatever ends. At most
/// `MAX_LEFTOVERS` are looked at (and signalled) at a time (`children_now`).
pub(crate) fn stop_leftovers() -> Leftovers {
    let mut out = Leftovers::default();
    for sig in [None, Some(libc::SIGTERM), Some(libc::SIGKILL)] {
        let deadline = Instant::now() + GRACE;
        let mut running = reap_ended(children_now(true));
        if let Some(sig) = sig {
            // SAFETY: each pid is a running child of this process that has not been
            // reaped since it was listed, so the pid is still that process's.
            let sent = running.iter().filter(|&&pid| unsafe { libc::kill(pid, sig) } == 0).count();
            if sig == libc::SIGKILL {
                out.killed = sent;
            } else {
                out.stopped = sent;
            }
        }
        let mut killed: std::collections::BTreeSet<libc::pid_t> = running.iter().copied().collect();
        while !running.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            running = reap_ended(children_now(true));
            if let Some(sig @ libc::SIGKILL) = sig {
                // What a killed leftover had started comes here only once it is dead, after
                // the SIGKILLs went out (it inherited an ignored SIGTERM, say): kill it too.
                for &pid in &running {
                    // SAFETY: as above, a running child not reaped since it was listed.
                    if killed.len() < MAX_LEFTOVERS && !killed.contains(&pid) && unsafe { libc::kill(pid, sig) } == 0 {
                        killed.insert(pid);
                        out.killed += 1;
                    }
                }
            }
        }
        if running.is_empty() {
            break;
        }
        if sig == Some(libc::SIGKILL) {
            out.left = running.len();
        }
    }
    out
}

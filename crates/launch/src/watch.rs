//! Sleeping until a rank ends, a signal arrives or a deadline passes.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Child;
use std::time::Duration;

use crate::GRACE;

/// Where ranks cannot be watched through pidfds (Linux before 5.3), how often the
/// launcher looks at them.
pub(crate) const POLL: Duration = Duration::from_millis(5);
/// The longest the launcher sleeps at once. A SIGINT/SIGTERM interrupts the sleep only
/// when it lands on the main thread (not on a stderr relay thread) after the launcher
/// looked at the flag the handler sets; either way it is passed on at most this late.
pub(crate) const MAX_NAP: Duration = Duration::from_millis(100);

/// Waits on the ranks' pidfds, so the launcher sleeps until a rank ends, a signal
/// arrives or a deadline passes. A 5 ms poll woke it 200 times a second on cores whose
/// ranks spin while they wait (pinned, one each), and each wake-up took a time slice
/// from a rank in the middle of a timed call.
pub(crate) struct ExitWatch {
    /// Per rank: its pidfd while it runs; None once it has been reaped.
    fds: Vec<Option<OwnedFd>>,
    /// Every rank got a pidfd (else the launcher polls every `POLL`, as without pidfds).
    all: bool,
    /// The last sleep ended on a pidfd and no rank has been reaped since: a rank that
    /// ended but that this launcher cannot reap (a debugger traces it) keeps its pidfd
    /// readable, so until a rank is reaped the launcher polls every `POLL` instead.
    unreaped_exit: bool,
}

impl ExitWatch {
    pub(crate) fn new(children: &[Child]) -> ExitWatch {
        let mut fds: Vec<Option<OwnedFd>> = children.iter().map(|c| pidfd_open(c.id())).collect();
        let all = fds.iter().all(Option::is_some);
        if !all {
            fds.clear();
        }
        ExitWatch { fds, all, unreaped_exit: false }
    }

    /// Rank `rank` has been reaped: its pidfd would stay readable.
    pub(crate) fn reaped(&mut self, rank: usize) {
        if let Some(fd) = self.fds.get_mut(rank) {
            *fd = None;
        }
        self.unreaped_exit = false;
    }

    /// Sleep until a running rank ends, a signal interrupts the wait, or `at_most` (at
    /// least a millisecond) passes.
    pub(crate) fn nap(&mut self, at_most: Duration) {
        let at_most = at_most.max(Duration::from_millis(1));
        if !self.all || self.unreaped_exit {
            std::thread::sleep(at_most.min(POLL));
            return;
        }
        let mut polls: Vec<libc::pollfd> = self
            .fds
            .iter()
            .flatten()
            .map(|fd| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 })
            .collect();
        // Rounded up, so a deadline a fraction of a millisecond away does not spin.
        let ms = at_most.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `polls` is a live array of `polls.len()` pollfd entries, each holding a
        // pidfd this watch owns; poll(2) only writes their `revents`.
        let ready = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, ms) };
        if ready > 0 {
            self.unreaped_exit = true;
        } else if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // Not a signal: never retry a failing poll at once.
            std::thread::sleep(POLL);
        }
    }
}

/// How long the launcher may sleep: until the grace period after SIGTERM ends (then
/// SIGKILL), or until `--timeout`, at most `MAX_NAP`. Once the grace is over (SIGKILL
/// sent, ranks not all reaped) there is no deadline left, only `MAX_NAP`.
pub(crate) fn nap_for(since_term: Option<Duration>, timeout_left: Option<Duration>) -> Duration {
    let deadline = match (since_term, timeout_left) {
        (Some(t), _) if t < GRACE => Some(GRACE - t),
        (Some(_), _) => None,
        (None, left) => left,
    };
    deadline.map_or(MAX_NAP, |d| d.min(MAX_NAP))
}

/// A pidfd for a child this launcher has not reaped yet (so `pid` is still that child's);
/// None where the kernel has no pidfd_open.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a descriptor the kernel just opened for us alone.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Instant;
    /// Kills and reaps its children when dropped, so a failing test leaves none behind.
    struct Reaper(Vec<Child>);

    impl Drop for Reaper {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    #[test]
    fn a_nap_ends_when_a_rank_ends_and_a_reaped_rank_no_longer_wakes_it() {
        let spawn = |prog: &str, args: &[&str]| Command::new(prog).args(args).spawn().expect("spawn");
        let mut children = Reaper(vec![spawn("sleep", &["30"]), spawn("true", &[])]);
        let mut watch = ExitWatch::new(&children.0);
        if !watch.all {
            eprintln!("no pidfd_open on this kernel: the launcher polls every {POLL:?}");
            return;
        }
        let t = Instant::now();
        watch.nap(Duration::from_secs(20));
        assert!(t.elapsed() < Duration::from_secs(2), "woke when `true` ended, not at the deadline");
        assert!(watch.unreaped_exit, "the wake-up came from a pidfd");
        children.0[1].wait().expect("reap");
        watch.reaped(1);
        assert!(!watch.unreaped_exit);
        // Only `sleep 30` is watched now: the nap lasts until its deadline.
        let t = Instant::now();
        watch.nap(Duration::from_millis(50));
        assert!(t.elapsed() >= Duration::from_millis(50), "an ended, reaped rank still woke the launcher");
        assert!(!watch.unreaped_exit, "a nap that timed out saw no exit");
    }

    #[test]
    fn the_launcher_sleeps_to_the_next_deadline_and_never_for_nothing() {
        let ms = Duration::from_millis;
        // Nothing pending: the longest nap.
        assert_eq!(nap_for(None, None), MAX_NAP);
        // --timeout soon, or already passed (the next pass stops the job).
        assert_eq!(nap_for(None, Some(ms(30))), ms(30));
        assert_eq!(nap_for(None, Some(Duration::ZERO)), Duration::ZERO);
        assert_eq!(nap_for(None, Some(ms(5000))), MAX_NAP);
        // In the grace period: until SIGKILL is due.
        assert_eq!(nap_for(Some(GRACE - ms(20)), None), ms(20));
        // After it (SIGKILL sent, a rank not yet gone): no deadline, not a spin.
        assert_eq!(nap_for(Some(GRACE), Some(Duration::ZERO)), MAX_NAP);
        assert_eq!(nap_for(Some(GRACE + ms(500)), None), MAX_NAP);
    }
}

//! Signals: those the launcher receives are passed on to the ranks; the job is signalled
//! as a whole.

use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

/// The signal the launcher received (0: none).
pub(crate) static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGNALLED.store(sig, Ordering::SeqCst);
}

/// The dispositions `forward_signals` replaced, and how many jobs are forwarding: jobs
/// run at once (threads of a host program, Python) share one installation, and the last
/// to end restores what was there before the first began.
type Saved = [(libc::c_int, libc::sighandler_t); 3];
static FORWARDING: std::sync::Mutex<(usize, Option<Saved>)> = std::sync::Mutex::new((0, None));

/// A job's share of the signal forwarding; the last one dropped restores the host's
/// handlers.
pub(crate) struct Forwarding;

impl Drop for Forwarding {
    fn drop(&mut self) {
        let mut f = FORWARDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f.0 = f.0.saturating_sub(1);
        if f.0 > 0 {
            return;
        }
        for (sig, handler) in f.1.take().into_iter().flatten() {
            // SAFETY: reinstalls the disposition signal(2) returned for `sig` when the
            // first job replaced it: the host program's own handler, or a default.
            unsafe {
                libc::signal(sig, handler);
            }
        }
    }
}

/// Take SIGINT and SIGTERM (noted in `SIGNALLED` for every running job's loop to pass on)
/// and SIGCHLD's default, until the last returned guard is dropped.
pub(crate) fn forward_signals() -> Forwarding {
    let mut f = FORWARDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if f.0 == 0 {
        SIGNALLED.store(0, Ordering::SeqCst);
        // A launcher started with SIGCHLD ignored would have its ranks reaped by the
        // kernel: no exit status, and pidfds of pids that may be reused.
        // SAFETY: restoring the default disposition of SIGCHLD installs no handler.
        let chld = unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
        let mut previous = [(libc::SIGCHLD, chld), (libc::SIGINT, libc::SIG_DFL), (libc::SIGTERM, libc::SIG_DFL)];
        for entry in previous.iter_mut().skip(1) {
            // SAFETY: `on_signal` is an `extern "C"` function that only stores to an
            // atomic, which is async-signal-safe.
            entry.1 = unsafe { libc::signal(entry.0, on_signal as *const () as libc::sighandler_t) };
        }
        f.1 = Some(previous);
    }
    f.0 += 1;
    Forwarding
}

/// Signal the whole job: the process group `pgid` (the ranks and whatever they started
/// in it), and each rank of `unreaped` that has left that group (setsid): by its own group
/// when it leads one, else by its pid. Every rank gets the signal once: a second copy
/// would cut short its handler of the first (a Python rank's KeyboardInterrupt clean-up).
/// The job's group is signalled only while an unreaped rank is in it: once its last rank
/// is reaped its number may be reused by a stranger's group (whatever the ranks left in
/// it comes back to the launcher as an orphan, `stop_leftovers`).
pub(crate) fn signal_job(pgid: u32, unreaped: impl IntoIterator<Item = u32>, sig: libc::c_int) {
    let pgid = pgid as libc::pid_t;
    let mut group_held = false;
    for pid in unreaped {
        let pid = pid as libc::pid_t;
        // SAFETY: getpgid(2) and kill(2) on a child this launcher has not reaped: until
        // it is reaped its pid cannot be reused, nor can a group it leads (its pid) or is
        // in, so the signals reach that rank (or its zombie) and its own group.
        unsafe {
            let group = libc::getpgid(pid);
            if group == pgid {
                group_held = true;
            } else if group == pid {
                libc::kill(-pid, sig);
            } else if group > 0 {
                libc::kill(pid, sig);
            }
        }
    }
    if group_held {
        // SAFETY: kill(2) with a negative pid signals a process group; `pgid` is the group
        // this launcher created for its ranks (the first rank's pid, never 0 or 1), held
        // by an unreaped rank in it, so the number is still this job's.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

/// The pids of the ranks not yet reaped.
pub(crate) fn unreaped<'a>(children: &'a [Child], status: &'a [Option<ExitStatus>]) -> impl Iterator<Item = u32> + 'a {
    children.iter().zip(status).filter(|(_, s)| s.is_none()).map(|(c, _)| c.id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current(sig: libc::c_int) -> libc::sighandler_t {
        // SAFETY: reads the disposition by installing the default and putting back what
        // was there at once; the test holds no signal of its own.
        unsafe {
            let was = libc::signal(sig, libc::SIG_DFL);
            libc::signal(sig, was);
            was
        }
    }

    /// Two jobs at once (threads of a Python program): the first to end must not take
    /// Ctrl-C away from the other; the last restores the host's handler.
    #[test]
    fn forwarding_lasts_until_the_last_job_ends() {
        let host = current(libc::SIGTERM);
        let first = forward_signals();
        let second = forward_signals();
        let ours = on_signal as *const () as libc::sighandler_t;
        assert_eq!(current(libc::SIGTERM), ours);
        drop(first);
        assert_eq!(current(libc::SIGTERM), ours, "the second job still forwards");
        drop(second);
        assert_eq!(current(libc::SIGTERM), host);
    }
}

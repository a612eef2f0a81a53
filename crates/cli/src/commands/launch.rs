//! `railyard launch -n N -- PROG ARGS`: start N local ranks with the variables launchers
//! set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and
//! railyard's own (RAILYARD_ID with a fresh secret, RAILYARD_RANK, RAILYARD_WORLD_SIZE),
//! and manage the job as torchrun does: the first rank to fail (non-zero exit or a
//! signal) stops the others (SIGTERM, then SIGKILL after a second) and its exit code is
//! the launcher's; SIGINT/SIGTERM to the launcher go to every rank; ranks die with the
//! launcher (PR_SET_PDEATHSIG); a rank that left the job's process group (setsid) is
//! signalled by its own group or pid; processes the ranks leave behind come back to the
//! launcher (PR_SET_CHILD_SUBREAPER), which gives them a grace period after the job, then
//! SIGTERM, then SIGKILL; every stderr line comes out whole, prefixed `[rank N]`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use railyard_runtime::UniqueId;

#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// Ranks to start
    #[arg(short = 'n', long = "np")]
    pub np: usize,
    /// Stop the job (exit code 124) if it runs longer than this many seconds
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// The program and its arguments (after --)
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// The most ranks one launcher starts.
pub const MAX_RANKS: usize = 256;
/// A stderr line longer than this is passed on in pieces of this size, each prefixed.
pub const MAX_LINE_BYTES: u64 = 64 * 1024;
/// How long ranks get between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(1);
/// Where ranks cannot be watched through pidfds (Linux before 5.3), how often the
/// launcher looks at them.
const POLL: Duration = Duration::from_millis(5);
/// The longest the launcher sleeps at once. A SIGINT/SIGTERM interrupts the sleep only
/// when it lands on the main thread (not on a stderr relay thread) after the launcher
/// looked at the flag the handler sets; either way it is passed on at most this late.
const MAX_NAP: Duration = Duration::from_millis(100);

/// Waits on the ranks' pidfds, so the launcher sleeps until a rank ends, a signal
/// arrives or a deadline passes. A 5 ms poll woke it 200 times a second on cores whose
/// ranks spin while they wait (pinned, one each), and each wake-up took a time slice
/// from a rank in the middle of a timed call.
struct ExitWatch {
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
    fn new(children: &[Child]) -> ExitWatch {
        let mut fds: Vec<Option<OwnedFd>> = children.iter().map(|c| pidfd_open(c.id())).collect();
        let all = fds.iter().all(Option::is_some);
        if !all {
            fds.clear();
        }
        ExitWatch { fds, all, unreaped_exit: false }
    }

    /// Rank `rank` has been reaped: its pidfd would stay readable.
    fn reaped(&mut self, rank: usize) {
        if let Some(fd) = self.fds.get_mut(rank) {
            *fd = None;
        }
        self.unreaped_exit = false;
    }

    /// Sleep until a running rank ends, a signal interrupts the wait, or `at_most` (at
    /// least a millisecond) passes.
    fn nap(&mut self, at_most: Duration) {
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
fn nap_for(since_term: Option<Duration>, timeout_left: Option<Duration>) -> Duration {
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

/// The signal the launcher received (0: none).
static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGNALLED.store(sig, Ordering::SeqCst);
}

fn forward_signals() {
    // A launcher started with SIGCHLD ignored would have its ranks reaped by the kernel:
    // no exit status, and pidfds of pids that may be reused.
    // SAFETY: restoring the default disposition of SIGCHLD installs no handler.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_signal` is an `extern "C"` function that only stores to an atomic,
        // which is async-signal-safe; installing it replaces the default handler only.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Signal the whole job: the process group `pgid` (the ranks and whatever they started
/// in it), and each rank of `unreaped` that has left that group (setsid): by its own group
/// when it leads one, else by its pid. Every rank gets the signal once: a second copy
/// would cut short its handler of the first (a Python rank's KeyboardInterrupt clean-up).
/// The job's group is signalled only while an unreaped rank is in it: once its last rank
/// is reaped its number may be reused by a stranger's group (whatever the ranks left in
/// it comes back to the launcher as an orphan, `stop_leftovers`).
fn signal_job(pgid: u32, unreaped: impl IntoIterator<Item = u32>, sig: libc::c_int) {
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
fn unreaped<'a>(children: &'a [Child], status: &'a [Option<ExitStatus>]) -> impl Iterator<Item = u32> + 'a {
    children.iter().zip(status).filter(|(_, s)| s.is_none()).map(|(c, _)| c.id())
}

/// The most processes left behind by the ranks that the launcher signals.
const MAX_LEFTOVERS: usize = 4096;

/// Make this process the reaper of its orphaned descendants: a process a rank started and
/// left behind (a daemon, a child of a rank killed at teardown, a `setsid` that forked)
/// comes back to the launcher, which stops it when the job ends (`stop_leftovers`).
fn adopt_orphans() {
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
fn reap_ended_leftovers(ranks: &[Child]) {
    reap_ended(children_now(false).into_iter().filter(|&pid| !ranks.iter().any(|c| c.id() as libc::pid_t == pid)));
}

/// What became of the processes the ranks left behind.
#[derive(Debug, Default, PartialEq)]
struct Leftovers {
    /// Still running after the grace period: sent SIGTERM.
    stopped: usize,
    /// Still running a grace period later, or handed to the launcher after that (the
    /// children of those): sent SIGKILL.
    killed: usize,
    /// Not gone when the launcher gave up: left to init.
    left: usize,
}

/// Once every rank is reaped, every child of the launcher is something the ranks left
/// behind (their own children come back here as they die). Give them the grace period to
/// end on their own (a log pipeline behind a rank's output, a clean-up a rank started),
/// then SIGTERM, then after another grace period SIGKILL; reap whatever ends. At most
/// `MAX_LEFTOVERS` are looked at (and signalled) at a time (`children_now`).
fn stop_leftovers() -> Leftovers {
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

/// Pass a rank's stderr on, line by line, each line whole and prefixed.
/// `reading`: set while the relay waits for the rank's next line (not while it writes one
/// out), so the launcher gives up only on a relay with nothing left to pass on.
fn relay(rank: usize, stderr: impl Read, reading: &AtomicBool) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        reading.store(true, Ordering::SeqCst);
        let got = reader.by_ref().take(MAX_LINE_BYTES).read_until(b'\n', &mut line);
        reading.store(false, Ordering::SeqCst);
        match got {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut out = format!("[rank {rank}] ").into_bytes();
        out.extend_from_slice(&line);
        if !line.ends_with(b"\n") {
            out.push(b'\n');
        }
        // One write under the lock: lines of different ranks never interleave.
        let _ = std::io::stderr().lock().write_all(&out);
    }
}

fn describe(status: ExitStatus) -> (String, i32) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (format!("exited with code {code}"), code),
        (None, Some(sig)) => (format!("was killed by signal {sig}"), 128 + sig),
        _ => ("ended".to_string(), 1),
    }
}

/// One job of local ranks: what `railyard launch` and `perf --np` start.
pub struct Job<'a> {
    pub np: usize,
    pub program: &'a std::ffi::OsStr,
    pub args: &'a [String],
    /// Variables every rank gets besides the launcher's own.
    pub env: Vec<(String, String)>,
    /// Keep rank 0's standard output (the others' is dropped) instead of passing it on.
    pub capture_rank0_stdout: bool,
    pub timeout: Option<Duration>,
}

/// How a job ended.
pub struct Outcome {
    /// Rank 0's standard output, when captured.
    pub rank0_stdout: String,
    /// Why the job was stopped or failed, and the exit code that says so.
    pub failure: Option<(String, i32)>,
}

/// The most rank-0 output kept (perf prints a few KiB).
const MAX_CAPTURED_BYTES: u64 = 16 << 20;

/// Start the ranks, manage them until all have ended, and say how it went.
pub fn run_job(job: &Job) -> Result<Outcome> {
    let np = job.np;
    let addr = railyard_runtime::loopback_rendezvous_addr()?;
    let id = UniqueId::new(addr)?;
    forward_signals();
    adopt_orphans();
    let parent = std::process::id();
    let program = job.program;
    let mut children: Vec<Child> = Vec::new();
    let mut relays = Vec::new();
    let mut captured = None;
    let mut pgid: Option<u32> = None;
    for rank in 0..np {
        let mut cmd = Command::new(program);
        cmd.args(job.args)
            .env("RANK", rank.to_string())
            .env("WORLD_SIZE", np.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("LOCAL_WORLD_SIZE", np.to_string())
            .env("MASTER_ADDR", addr.ip().to_string())
            .env("MASTER_PORT", addr.port().saturating_sub(1).to_string())
            .env("RAILYARD_ID", id.to_string())
            .env("RAILYARD_RANK", rank.to_string())
            .env("RAILYARD_WORLD_SIZE", np.to_string())
            .env("RAILYARD_LOCAL_RANK", rank.to_string())
            .envs(job.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(match (job.capture_rank0_stdout, rank) {
                (false, _) => Stdio::inherit(),
                (true, 0) => Stdio::piped(),
                (true, _) => Stdio::null(),
            })
            .stderr(Stdio::piped())
            // One process group for the job: the first rank's.
            .process_group(pgid.map_or(0, |p| p as i32));
        // SAFETY: the closure runs in the child between fork and exec and only calls
        // prctl(2), getppid(2) and _exit(2), which are async-signal-safe; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The launcher may have died before prctl took effect.
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                if let Some(p) = pgid {
                    signal_job(p, children.iter().map(Child::id), libc::SIGKILL);
                }
                for c in &mut children {
                    let _ = c.wait();
                }
                return Err(e).with_context(|| format!("cannot start {} as rank {rank}", program.to_string_lossy()));
            }
        };
        pgid.get_or_insert(child.id());
        if let Some(stderr) = child.stderr.take() {
            let reading = std::sync::Arc::new(AtomicBool::new(false));
            let flag = reading.clone();
            relays.push((std::thread::spawn(move || relay(rank, stderr, &flag)), reading));
        }
        if let Some(stdout) = child.stdout.take() {
            captured = Some(std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stdout.take(MAX_CAPTURED_BYTES).read_to_string(&mut text);
                text
            }));
        }
        children.push(child);
    }
    let pgid = pgid.context("no rank started")?;
    let started = Instant::now();
    let mut status: Vec<Option<ExitStatus>> = vec![None; children.len()];
    let mut first_failure: Option<(usize, ExitStatus)> = None;
    let mut stop_reason: Option<String> = None;
    let mut code = 0;
    let mut term_sent: Option<Instant> = None;
    let mut watch = ExitWatch::new(&children);
    loop {
        for rank in 0..children.len() {
            if status[rank].is_none() {
                let waited = children[rank].try_wait();
                if waited.is_err() {
                    // Never leave ranks running behind an error; not by the pid of the
                    // rank whose wait failed (someone else may have reaped it).
                    let failed = children[rank].id();
                    signal_job(pgid, unreaped(&children, &status).filter(|&p| p != failed), libc::SIGKILL);
                }
                if let Some(s) = waited.context("waiting for a rank")? {
                    status[rank] = Some(s);
                    watch.reaped(rank);
                    if !s.success() && first_failure.is_none() && stop_reason.is_none() {
                        first_failure = Some((rank, s));
                    }
                }
            }
        }
        if status.iter().all(Option::is_some) {
            break;
        }
        if term_sent.is_none() {
            let sig = SIGNALLED.load(Ordering::SeqCst);
            if let Some((rank, s)) = first_failure {
                let (words, c) = describe(s);
                stop_reason = Some(format!("rank {rank} {words}; stopped the other ranks"));
                code = c;
            } else if sig != 0 {
                stop_reason = Some(format!("received signal {sig}; passed it to every rank"));
                code = 128 + sig;
            } else if let Some(t) = job.timeout.filter(|&t| started.elapsed() >= t) {
                stop_reason = Some(format!("ran past --timeout {} s; stopped every rank", t.as_secs_f64()));
                code = 124;
            }
            if stop_reason.is_some() {
                signal_job(
                    pgid,
                    unreaped(&children, &status),
                    if sig != 0 && first_failure.is_none() { sig } else { libc::SIGTERM },
                );
                // A stopped rank (SIGSTOP, a debugger) keeps the signal pending until it
                // runs again: let it run, so it ends now rather than at the SIGKILL.
                signal_job(pgid, unreaped(&children, &status), libc::SIGCONT);
                term_sent = Some(Instant::now());
            }
        } else if term_sent.is_some_and(|t| t.elapsed() >= GRACE) {
            signal_job(pgid, unreaped(&children, &status), libc::SIGKILL);
        }
        reap_ended_leftovers(&children);
        let timeout_left = job.timeout.map(|limit| limit.saturating_sub(started.elapsed()));
        watch.nap(nap_for(term_sent.map(|t| t.elapsed()), timeout_left));
    }
    let leftovers = stop_leftovers();
    if leftovers != Leftovers::default() {
        eprintln!(
            "railyard: the ranks left processes running after the job: {} sent SIGTERM, {} SIGKILL, {} still running",
            leftovers.stopped, leftovers.killed, leftovers.left
        );
    }
    // A process that escaped (not a descendant any more) may hold a rank's stderr open:
    // once a relay has waited a grace period for a line that does not come, stop waiting
    // for it. A relay still writing (to a slow reader of our stderr) is waited for.
    let relay_deadline = Instant::now() + GRACE;
    loop {
        let busy = relays.iter().any(|(r, reading)| !r.is_finished() && !reading.load(Ordering::SeqCst));
        if relays.iter().all(|(r, _)| r.is_finished()) || (!busy && Instant::now() >= relay_deadline) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for (r, _) in relays.into_iter().filter(|(r, _)| r.is_finished()) {
        let _ = r.join();
    }
    // Ranks killed while setting up their shared-memory links leave ring files behind.
    id.remove_shm_files();
    let rank0_stdout = captured.and_then(|c| c.join().ok()).unwrap_or_default();
    // A failure in the last rank still running ends the loop before the check above.
    if let (None, Some((rank, s))) = (&stop_reason, first_failure) {
        let (words, c) = describe(s);
        stop_reason = Some(format!("rank {rank} {words}"));
        code = c;
    }
    Ok(Outcome { rank0_stdout, failure: stop_reason.map(|r| (r, code)) })
}

/// Say why the job stopped and exit with its code (the CLI's edge: the code is the rank's).
pub fn exit_with(reason: &str, code: i32) -> ! {
    let _ = std::io::stdout().flush();
    eprintln!("error: {reason}");
    std::process::exit(code)
}

pub fn run(args: &LaunchArgs) -> Result<String> {
    if args.np == 0 || args.np > MAX_RANKS {
        bail!("-n must be 1..={MAX_RANKS}");
    }
    let timeout = match args.timeout {
        Some(t) if !(t > 0.0 && t <= 1e7) => bail!("--timeout must be 0..=1e7 seconds (got {t})"),
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
    let (program, rest) = args.command.split_first().context("nothing to launch")?;
    let job = Job {
        np: args.np,
        program: std::ffi::OsStr::new(program),
        args: rest,
        env: Vec::new(),
        capture_rank0_stdout: false,
        timeout,
    };
    match run_job(&job)?.failure {
        Some((reason, code)) => exit_with(&reason, code),
        None => Ok(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

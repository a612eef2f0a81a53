//! One job of local ranks: started with the variables launchers set (RANK, WORLD_SIZE,
//! LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and railyard's own (RAILYARD_ID
//! with a fresh secret, RAILYARD_RANK, RAILYARD_WORLD_SIZE), managed as torchrun manages
//! one: the first rank to fail (non-zero exit or a signal) stops the others (SIGTERM, then
//! SIGKILL after a second) and its exit code is the job's; SIGINT/SIGTERM to the launcher
//! go to every rank; ranks die with the launcher (PR_SET_PDEATHSIG); a rank that left the
//! job's process group (setsid) is signalled by its own group or pid; processes the ranks
//! leave behind come back to the launcher (PR_SET_CHILD_SUBREAPER), which gives them a
//! grace period after the job, then SIGTERM, then SIGKILL; output comes out in whole lines.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use railyard_runtime::UniqueId;

use crate::error::LaunchError;
use crate::leftovers::{adopt_orphans, reap_ended_leftovers, stop_leftovers, Leftovers};
use crate::relay::{relay, Sink};
use crate::signals::{forward_signals, signal_job, unreaped, SIGNALLED};
use crate::watch::{nap_for, ExitWatch};
use crate::GRACE;

/// The most ranks one launcher starts.
pub const MAX_RANKS: usize = 256;
/// The most rank-0 output kept (perf prints a few KiB).
const MAX_CAPTURED_BYTES: u64 = 16 << 20;

/// What becomes of the ranks' standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Passed on in whole lines; `prefix`: each line starts `[rank N] ` (as stderr's do).
    Lines { prefix: bool },
    /// Rank 0's kept (`Outcome::rank0_stdout`); the others' dropped.
    CaptureRank0,
}

/// One job of local ranks.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    pub np: usize,
    pub program: &'a std::ffi::OsStr,
    pub args: &'a [String],
    /// Variables every rank gets besides the launcher's own.
    pub env: Vec<(String, String)>,
    pub stdout: Output,
    pub timeout: Option<Duration>,
    /// Take over SIGINT and SIGTERM to pass them to the ranks: a launcher process's, not
    /// a host program's with handlers of its own (Python).
    pub forward_signals: bool,
    /// Become the reaper of what the ranks leave behind, and stop it after the job: a
    /// launcher process's, not a host program's with children of its own.
    pub adopt_leftovers: bool,
}

impl<'a> Job<'a> {
    /// `np` ranks of `program args`, output in whole lines, managed as a launcher process.
    pub fn new(np: usize, program: &'a std::ffi::OsStr, args: &'a [String]) -> Job<'a> {
        Job {
            np,
            program,
            args,
            env: Vec::new(),
            stdout: Output::Lines { prefix: false },
            timeout: None,
            forward_signals: true,
            adopt_leftovers: true,
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Rank 0's standard output, when captured.
    pub rank0_stdout: String,
    /// Why the job was stopped or failed, and the exit code that says so.
    pub failure: Option<(String, i32)>,
    /// What the ranks left running after the job, and what became of it.
    pub leftovers: Option<String>,
}

fn describe(status: ExitStatus) -> (String, i32) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (format!("exited with code {code}"), code),
        (None, Some(sig)) => (format!("was killed by signal {sig}"), 128 + sig),
        _ => ("ended".to_string(), 1),
    }
}

/// Start the ranks, manage them until all have ended, and say how it went.
pub fn run_job(job: &Job) -> Result<Outcome, LaunchError> {
    let np = job.np;
    if np == 0 || np > MAX_RANKS {
        return Err(LaunchError::Ranks { np, max: MAX_RANKS });
    }
    let addr = railyard_runtime::loopback_rendezvous_addr().map_err(LaunchError::Address)?;
    let id = UniqueId::new(addr)?;
    // Until the job is over (the guard restores what was there before).
    let _forwarding = job.forward_signals.then(forward_signals);
    if job.adopt_leftovers {
        adopt_orphans();
    }
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
            .stdout(match (job.stdout, rank) {
                (Output::Lines { .. }, _) | (Output::CaptureRank0, 0) => Stdio::piped(),
                (Output::CaptureRank0, _) => Stdio::null(),
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
                return Err(LaunchError::Start { program: program.to_string_lossy().into_owned(), rank, source: e });
            }
        };
        pgid.get_or_insert(child.id());
        if let Some(stderr) = child.stderr.take() {
            let reading = std::sync::Arc::new(AtomicBool::new(false));
            let flag = reading.clone();
            relays.push((std::thread::spawn(move || relay(rank, stderr, Sink::Stderr, true, &flag)), reading));
        }
        match (child.stdout.take(), job.stdout) {
            (Some(stdout), Output::Lines { prefix }) => {
                let reading = std::sync::Arc::new(AtomicBool::new(false));
                let flag = reading.clone();
                relays.push((std::thread::spawn(move || relay(rank, stdout, Sink::Stdout, prefix, &flag)), reading));
            }
            (Some(stdout), Output::CaptureRank0) => {
                captured = Some(std::thread::spawn(move || {
                    let mut text = String::new();
                    let _ = stdout.take(MAX_CAPTURED_BYTES).read_to_string(&mut text);
                    text
                }));
            }
            (None, _) => {}
        }
        children.push(child);
    }
    let Some(pgid) = pgid else { return Ok(Outcome::default()) };
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
                if let Some(s) = waited.map_err(LaunchError::Wait)? {
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
                stop_reason = Some(format!("ran past the timeout of {} s; stopped every rank", t.as_secs_f64()));
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
        if job.adopt_leftovers {
            reap_ended_leftovers(&children);
        }
        let timeout_left = job.timeout.map(|limit| limit.saturating_sub(started.elapsed()));
        watch.nap(nap_for(term_sent.map(|t| t.elapsed()), timeout_left));
    }
    let leftovers = if job.adopt_leftovers { stop_leftovers() } else { Leftovers::default() };
    let leftovers = (leftovers != Leftovers::default()).then(|| {
        format!(
            "the ranks left processes running after the job: {} sent SIGTERM, {} SIGKILL, {} still running",
            leftovers.stopped, leftovers.killed, leftovers.left
        )
    });
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
    Ok(Outcome { rank0_stdout, failure: stop_reason.map(|r| (r, code)), leftovers })
}

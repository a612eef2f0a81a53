//! The flight recorder: each communicator keeps its last K calls (RAILYARD_TRACE_BUFFER)
//! — sequence number, the call, the schedule round reached, bytes per peer, times, outcome
//! — and writes them as JSON (`Dump`) to RAILYARD_DUMP_DIR on its first error, on SIGUSR1
//! (noticed at the next call or while a call waits) and on request
//! (`Communicator::dump_trace`). `railyard triage DIR` reads every rank's dump and says
//! who is behind, where ranks first disagree and which step they wait on. PyTorch's
//! Flight Recorder does the same for NCCL; here the records know the schedule's rounds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::config::MAX_TRACE_CALLS;
use crate::frame::CallSig;

/// Bytes a call moves with one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerBytes {
    pub rank: usize,
    pub sent_bytes: u64,
    pub received_bytes: u64,
}

/// Where a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallState {
    Running,
    Done,
    Failed,
}

/// One call as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// This rank's call sequence number (1 for the first call).
    pub seq: u64,
    pub collective: String,
    pub count: u64,
    pub dtype: String,
    pub op: String,
    pub root: u32,
    pub peer: u32,
    pub algorithm: String,
    /// Rounds in this rank's schedule, and the round it reached, from 1 (0: none yet;
    /// `rounds` when done, or in its last round).
    pub rounds: u32,
    pub round_reached: u32,
    pub peers: Vec<PeerBytes>,
    /// Seconds since the communicator started, to the kernel tick (a few ms: the coarse
    /// clock, `coarse_now_ns`), as is `end_secs`.
    pub start_secs: f64,
    pub end_secs: Option<f64>,
    pub state: CallState,
    pub error: Option<String>,
}

impl CallRecord {
    /// The fields a desync compares, by name.
    pub fn fields(&self) -> [(&'static str, String); 7] {
        [
            ("collective", self.collective.clone()),
            ("size", format!("{} elements", self.count)),
            ("dtype", self.dtype.clone()),
            ("op", self.op.clone()),
            ("root", self.root.to_string()),
            ("peer", self.peer.to_string()),
            ("algorithm", self.algorithm.clone()),
        ]
    }

    /// The call in words; what a record does not know (PyTorch's Flight Recorder keeps no
    /// op, root or algorithm: empty, and root `u32::MAX`) is left out.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("{} of {} elements", self.collective, self.count), self.dtype.clone()];
        if !self.op.is_empty() {
            parts.push(self.op.clone());
        }
        if self.root != u32::MAX {
            parts.push(format!("root {}", self.root));
        }
        if !self.algorithm.is_empty() {
            parts.push(self.algorithm.clone());
        }
        parts.join(", ")
    }
}

/// What a rank writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dump {
    pub rank: usize,
    pub size: usize,
    pub host: String,
    pub pid: u32,
    /// Why it was written: the first error, "SIGUSR1" or the caller's reason.
    pub reason: String,
    pub unix_secs: f64,
    /// Seconds since the communicator started, when written.
    pub at_secs: f64,
    /// Oldest first.
    pub calls: Vec<CallRecord>,
}

/// The file a rank's dump goes to in `dir`.
pub fn dump_path(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("railyard-trace-rank{rank}.json"))
}

/// One call as held (compact, nothing allocated per call: names are made at dump time).
struct Entry {
    seq: u64,
    sig: CallSig,
    rounds: u32,
    round_reached: u32,
    peers: Arc<[PeerBytes]>,
    start_ns: u64,
    end_ns: Option<u64>,
    state: CallState,
    error: Option<String>,
}

impl Entry {
    fn record(&self, started_ns: u64) -> CallRecord {
        let f = self.sig.fields();
        let secs = |t: u64| t.saturating_sub(started_ns) as f64 * 1e-9;
        CallRecord {
            seq: self.seq,
            collective: f[0].1.clone(),
            count: self.sig.count,
            dtype: f[2].1.clone(),
            op: f[3].1.clone(),
            root: self.sig.root,
            peer: self.sig.peer,
            algorithm: f[6].1.clone(),
            rounds: self.rounds,
            round_reached: self.round_reached,
            peers: self.peers.to_vec(),
            start_secs: secs(self.start_ns),
            end_secs: self.end_ns.map(secs),
            state: self.state,
            error: self.error.clone(),
        }
    }
}

/// A communicator's last calls: a ring of `capacity` slots, overwritten in place once
/// full (a call costs no allocation, no move of an entry and no reference count).
pub struct Recorder {
    capacity: usize,
    calls: Vec<Entry>,
    /// The slot of the newest call (meaningless while `calls` is empty).
    newest: usize,
    /// `coarse_now_ns` when the communicator started.
    started_ns: u64,
}

/// The monotonic clock at the kernel tick's resolution (a few ms), in nanoseconds: a
/// recorder reads it twice per call, and the precise clock costs tens of nanoseconds a
/// read (a tenth of a small call); a trace of hung or slow calls needs milliseconds.
fn coarse_now_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `t` is; CLOCK_MONOTONIC_COARSE
    // exists on every Linux since 2.6.32 (on failure `t` stays zero).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl Recorder {
    pub fn new(capacity: usize) -> Recorder {
        let capacity = capacity.min(MAX_TRACE_CALLS);
        Recorder { capacity, calls: Vec::with_capacity(capacity), newest: 0, started_ns: coarse_now_ns() }
    }

    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Record a call starting.
    pub fn begin(&mut self, seq: u64, sig: CallSig, rounds: usize, peers: &Arc<[PeerBytes]>) {
        if self.capacity == 0 {
            return;
        }
        let start_ns = coarse_now_ns();
        if self.calls.len() < self.capacity {
            self.newest = self.calls.len();
            self.calls.push(Entry {
                seq,
                sig,
                rounds: rounds as u32,
                round_reached: 0,
                peers: Arc::clone(peers),
                start_ns,
                end_ns: None,
                state: CallState::Running,
                error: None,
            });
            return;
        }
        // Full: the oldest slot (the one after the newest) is overwritten. Its peers stay
        // when they are the same (a loop of one call): no reference count is touched.
        self.newest = if self.newest + 1 == self.capacity { 0 } else { self.newest + 1 };
        let e = &mut self.calls[self.newest];
        if !Arc::ptr_eq(&e.peers, peers) {
            e.peers = Arc::clone(peers);
        }
        (e.seq, e.sig, e.rounds, e.round_reached) = (seq, sig, rounds as u32, 0);
        (e.start_ns, e.end_ns, e.state) = (start_ns, None, CallState::Running);
        if e.error.is_some() {
            e.error = None;
        }
    }

    /// Oldest first.
    fn entries(&self) -> impl Iterator<Item = &Entry> {
        // Until full, slot order is call order; once full, the oldest follows the newest.
        // (A recorder of capacity 0 holds nothing: `calls` is empty, split 0.)
        let split = if self.calls.len() < self.capacity || self.calls.is_empty() { 0 } else { self.newest + 1 };
        self.calls[split..].iter().chain(&self.calls[..split])
    }

    fn newest_mut(&mut self) -> Option<&mut Entry> {
        self.calls.get_mut(self.newest)
    }

    /// The current call reached round `index` (from 0).
    pub fn reached(&mut self, index: usize) {
        if let Some(c) = self.newest_mut() {
            c.round_reached = index as u32 + 1;
        }
    }

    /// The current call ended.
    pub fn end(&mut self, error: Option<&str>) {
        if let Some(c) = self.newest_mut().filter(|c| c.state == CallState::Running) {
            c.end_ns = Some(coarse_now_ns());
            match error {
                None => {
                    c.state = CallState::Done;
                    c.round_reached = c.rounds;
                }
                Some(e) => {
                    c.state = CallState::Failed;
                    c.error = Some(e.to_string());
                }
            }
        }
    }

    pub fn last(&self) -> Option<CallRecord> {
        self.calls.get(self.newest).map(|e| e.record(self.started_ns))
    }

    pub fn dump(&self, rank: usize, size: usize, reason: &str) -> Dump {
        Dump {
            rank,
            size,
            host: crate::link::hostname(),
            pid: std::process::id(),
            reason: reason.to_string(),
            unix_secs: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
            at_secs: coarse_now_ns().saturating_sub(self.started_ns) as f64 * 1e-9,
            calls: self.entries().map(|e| e.record(self.started_ns)).collect(),
        }
    }
}

/// Write `dump` to its file in `dir` (written whole to a temporary name, then renamed,
/// so a reader never sees half a dump).
pub fn write_dump(dir: &Path, dump: &Dump) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dump_path(dir, dump.rank);
    let tmp = path.with_extension(format!("json.{}", std::process::id()));
    let text = serde_json::to_vec_pretty(dump).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

static DUMP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigusr1(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    DUMP_REQUESTED.store(true, Ordering::Relaxed);
}

/// Make SIGUSR1 ask every communicator of this process for a dump (once per process).
pub fn install_sigusr1() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // SAFETY: the handler only stores to an atomic (async-signal-safe); `sigaction`
        // with a zeroed mask and SA_RESTART installs it for this process.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigusr1 as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
        }
    });
}

/// Whether SIGUSR1 arrived since the last call (and clear it).
pub fn take_dump_request() -> bool {
    DUMP_REQUESTED.load(Ordering::Relaxed) && DUMP_REQUESTED.swap(false, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_schedule::{Algorithm, Collective, Dtype};

    #[test]
    fn dumps_the_last_calls_oldest_first_at_every_fill() {
        let sig = CallSig::new(Collective::Broadcast, 2, 0, 0, Dtype::F32, crate::RedOp::Sum, Algorithm::Chain);
        let peers: Arc<[PeerBytes]> = Arc::from(vec![]);
        for capacity in 0..=4 {
            let mut r = Recorder::new(capacity);
            assert!(r.dump(0, 2, "test").calls.is_empty());
            for n in 1..=10u64 {
                r.begin(n, sig, 1, &peers);
                r.reached(0);
                r.end(None);
                let seqs: Vec<u64> = r.dump(0, 2, "test").calls.iter().map(|c| c.seq).collect();
                let want: Vec<u64> = (n.saturating_sub(capacity as u64) + 1..=n).collect();
                assert_eq!(seqs, want, "capacity {capacity} after {n} calls");
                assert_eq!(r.last().map(|c| c.seq), (capacity > 0).then_some(n));
            }
        }
    }

    #[test]
    fn keeps_the_last_calls_and_writes_them() {
        let mut r = Recorder::new(2);
        let sig = CallSig::new(Collective::AllReduce, 8, 0, 0, Dtype::F32, crate::RedOp::Sum, Algorithm::Ring);
        let peers: Arc<[PeerBytes]> = Arc::from(vec![PeerBytes { rank: 1, sent_bytes: 32, received_bytes: 32 }]);
        for seq in 1..=3 {
            r.begin(seq, sig, 2, &peers);
            r.reached(0);
            r.end(if seq == 3 { Some("boom") } else { None });
        }
        let d = r.dump(0, 2, "test");
        assert_eq!(d.calls.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!((d.calls[0].state, d.calls[0].round_reached), (CallState::Done, 2));
        assert_eq!(
            (d.calls[1].state, d.calls[1].round_reached, d.calls[1].error.as_deref()),
            (CallState::Failed, 1, Some("boom"))
        );
        assert_eq!(d.calls[1].collective, "allreduce");
        let dir = std::env::temp_dir().join(format!("railyard-rec-{}", std::process::id()));
        let path = write_dump(&dir, &d).unwrap();
        let back: Dump = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(back, d);
        std::fs::remove_dir_all(&dir).unwrap();
        // Slots are reused when full: the failed call's slot takes a running call with no
        // error, and a call with other peers records its own.
        let others: Arc<[PeerBytes]> = Arc::from(vec![PeerBytes { rank: 0, sent_bytes: 8, received_bytes: 0 }]);
        r.begin(4, sig, 3, &peers);
        r.end(None);
        r.begin(5, sig, 1, &others);
        let d = r.dump(0, 2, "test");
        assert_eq!(d.calls.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![4, 5]);
        assert_eq!((d.calls[0].state, d.calls[0].rounds, d.calls[0].round_reached), (CallState::Done, 3, 3));
        assert_eq!(
            (d.calls[1].state, d.calls[1].error.as_deref(), d.calls[1].end_secs),
            (CallState::Running, None, None)
        );
        assert_eq!(d.calls[1].peers, others.to_vec());
        // A zero-size recorder records nothing.
        let mut off = Recorder::new(0);
        off.begin(1, sig, 1, &peers);
        assert!(off.last().is_none() && !off.enabled());
    }

    #[test]
    fn sigusr1_requests_a_dump() {
        install_sigusr1();
        assert!(!take_dump_request());
        // SAFETY: raising a signal whose handler only sets an atomic.
        unsafe { libc::raise(libc::SIGUSR1) };
        assert!(take_dump_request());
        assert!(!take_dump_request(), "taken once");
    }
}

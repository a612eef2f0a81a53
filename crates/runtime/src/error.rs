use thiserror::Error;

/// Everything a communicator call can fail with. After the first error the
/// communicator is broken: every later call returns `Broken` with the first error.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CommError {
    #[error("rank {peer}: {what} failed: {message}")]
    Io { peer: usize, what: &'static str, message: String },
    #[error("rank {peer}: no answer within {secs} s")]
    Timeout { peer: usize, secs: u64 },
    /// A round made no progress for the timeout while waiting on `peer`; `waiting` says
    /// for what. The communicator turns it into `Stuck` with its diagnosis.
    #[error("rank {peer}: no progress within {secs} s ({waiting})")]
    Stalled { peer: usize, secs: u64, waiting: String },
    /// The diagnosis of a stall: `rank` is the one that does not move (followed through
    /// the ranks that wait on others), `message` says how it was told and where this
    /// rank waits (call, collective, size, algorithm, round).
    #[error("rank {rank} is stuck: {message}")]
    Stuck { rank: usize, message: String },
    /// A peer's first error, which it sent to every rank before giving up.
    #[error("rank {peer} aborted the communicator: {message}")]
    Aborted { peer: usize, message: String },
    #[error("mismatched collective: {message}")]
    Mismatch { peer: usize, message: String },
    #[error("rank {peer} sent a bad frame: {message}")]
    BadFrame { peer: usize, message: String },
    #[error("bootstrap: {message}")]
    Bootstrap { message: String },
    #[error("bad arguments: {message}")]
    BadArgs { message: String },
    #[error("the communicator is broken by an earlier error: {0}")]
    Broken(Box<CommError>),
}

impl CommError {
    pub fn io(peer: usize, what: &'static str, e: std::io::Error) -> CommError {
        use std::io::ErrorKind::*;
        match e.kind() {
            WouldBlock | TimedOut => CommError::Timeout { peer, secs: 0 },
            _ => CommError::Io { peer, what, message: e.to_string() },
        }
    }
}

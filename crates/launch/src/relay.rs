//! A rank's output passed on line by line: each line whole (one write under the lock, so
//! lines of different ranks never interleave), optionally prefixed `[rank N] `.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// A line longer than this is passed on in pieces of this size, each whole.
pub const MAX_LINE_BYTES: u64 = 64 * 1024;

/// Where a relay writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sink {
    Stdout,
    Stderr,
}

/// Pass `stream` on to `sink`. `reading`: set while the relay waits for the rank's next
/// line (not while it writes one out), so the launcher gives up only on a relay with
/// nothing left to pass on.
pub(crate) fn relay(rank: usize, stream: impl Read, sink: Sink, prefix: bool, reading: &AtomicBool) {
    let mut reader = BufReader::new(stream);
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
        let mut out = if prefix { format!("[rank {rank}] ").into_bytes() } else { Vec::with_capacity(line.len() + 1) };
        out.extend_from_slice(&line);
        if !line.ends_with(b"\n") {
            out.push(b'\n');
        }
        let _ = match sink {
            Sink::Stdout => {
                let mut out_lock = std::io::stdout().lock();
                out_lock.write_all(&out).and_then(|()| out_lock.flush())
            }
            Sink::Stderr => std::io::stderr().lock().write_all(&out),
        };
    }
}

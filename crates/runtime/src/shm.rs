//! Shared-memory links between ranks on one host: one single-producer single-consumer
//! byte ring per direction, in a file under /dev/shm mapped by both processes.
//!
//! Layout: the consumer's read position at byte 0, the producer's write position at
//! byte 64 (separate cache lines), the data from byte 128, `capacity` bytes (a power of
//! two). The producer copies bytes in, then publishes the new write position with
//! Release; the consumer reads it with Acquire before copying out, then publishes its read
//! position with Release, which the producer reads with Acquire before reusing space.
//! Waiting spins briefly, then yields, then sleeps, so ranks that outnumber cores give
//! their core away; every wait ends at the configured deadline with `TimedOut`, or
//! earlier with `BrokenPipe` when the peer's process (its pid is in the header) is gone.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::MmapMut;

const HEAD: usize = 0;
/// The consumer's process id (so a producer can tell a dead peer from a slow one).
const READER_PID: usize = 8;
const TAIL: usize = 64;
/// The producer's process id.
const WRITER_PID: usize = 72;
const DATA: usize = 128;
/// Ring capacity bounds: at least a page, at most 1 GiB.
pub const MIN_RING_BYTES: usize = 4096;
pub const MAX_RING_BYTES: usize = 1 << 30;

struct Ring {
    map: MmapMut,
    capacity: usize,
}

// SAFETY: the map is only touched through atomics (positions) and through disjoint byte
// ranges that the SPSC protocol hands to exactly one side at a time.
unsafe impl Send for Ring {}
unsafe impl Sync for Ring {}

impl Ring {
    fn word(&self, at: usize) -> &AtomicU64 {
        // SAFETY: `at` is one of the header words (0, 8, 64, 72), inside the mapping and
        // 8-byte aligned (mappings are page aligned).
        unsafe { &*(self.map.as_ptr().add(at) as *const AtomicU64) }
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: DATA is inside the mapping; the protocol keeps producer and consumer on disjoint bytes.
        unsafe { (self.map.as_ptr() as *mut u8).add(DATA) }
    }
}

/// Whether process `pid` still runs (a zombie — killed, not yet reaped — does not).
fn alive(pid: u64) -> bool {
    if pid == 0 || pid == std::process::id() as u64 {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

fn wait(deadline: Instant, spins: &mut u32, peer_pid: &AtomicU64) -> io::Result<()> {
    *spins += 1;
    if *spins < 200 {
        std::hint::spin_loop();
    } else if *spins < 2000 {
        std::thread::yield_now();
    } else {
        if Instant::now() >= deadline {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "shared-memory peer did not move"));
        }
        if (*spins).is_multiple_of(200) && !alive(peer_pid.load(Ordering::Relaxed)) {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "shared-memory peer's process is gone"));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    Ok(())
}

/// The producing end of a ring.
pub struct ShmWriter {
    ring: Arc<Ring>,
    timeout: Duration,
}

/// The consuming end of a ring.
pub struct ShmReader {
    ring: Arc<Ring>,
    timeout: Duration,
}

impl Write for ShmWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let r = &self.ring;
        let deadline = Instant::now() + self.timeout;
        let mut spins = 0;
        let tail = r.word(TAIL).load(Ordering::Relaxed);
        let free = loop {
            let head = r.word(HEAD).load(Ordering::Acquire);
            let free = r.capacity - (tail - head) as usize;
            if free > 0 {
                break free;
            }
            wait(deadline, &mut spins, r.word(READER_PID))?;
        };
        let n = free.min(buf.len());
        let at = (tail as usize) & (r.capacity - 1);
        let first = n.min(r.capacity - at);
        // SAFETY: bytes [at, at+first) and [0, n-first) of the data area are free: the
        // consumer has read past them (head) and will not touch them until tail moves.
        unsafe {
            std::ptr::copy_nonoverlapping(buf.as_ptr(), r.data().add(at), first);
            std::ptr::copy_nonoverlapping(buf.as_ptr().add(first), r.data(), n - first);
        }
        r.word(TAIL).store(tail + n as u64, Ordering::Release);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for ShmReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let r = &self.ring;
        let deadline = Instant::now() + self.timeout;
        let mut spins = 0;
        let head = r.word(HEAD).load(Ordering::Relaxed);
        let avail = loop {
            let tail = r.word(TAIL).load(Ordering::Acquire);
            let avail = (tail - head) as usize;
            if avail > 0 {
                break avail;
            }
            wait(deadline, &mut spins, r.word(WRITER_PID))?;
        };
        let n = avail.min(buf.len());
        let at = (head as usize) & (r.capacity - 1);
        let first = n.min(r.capacity - at);
        // SAFETY: bytes [at, at+first) and [0, n-first) were published by the producer
        // (tail, Acquire) and it will not overwrite them until head moves past.
        unsafe {
            std::ptr::copy_nonoverlapping(r.data().add(at), buf.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(r.data(), buf.as_mut_ptr().add(first), n - first);
        }
        r.word(HEAD).store(head + n as u64, Ordering::Release);
        Ok(n)
    }
}

fn map(path: &Path, capacity: usize, create: bool) -> io::Result<Ring> {
    if !capacity.is_power_of_two() || !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&capacity) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "ring capacity must be a power of two between 4 KiB and 1 GiB",
        ));
    }
    let file = OpenOptions::new().read(true).write(true).create_new(create).open(path)?;
    let len = (DATA + capacity) as u64;
    if create {
        file.set_len(len)?;
    } else if file.metadata()?.len() != len {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "ring file has the wrong size"));
    }
    // SAFETY: the file is ours (created with create_new, or named by our peer under our
    // secret) and both sides only access it through the ring protocol.
    // Populated up front: faulting the ring's pages in during the first calls cost more
    // than the copies (a 128 KiB all-reduce took 3x longer until the ring had wrapped once).
    let map = unsafe { memmap2::MmapOptions::new().populate().map_mut(&file)? };
    Ok(Ring { map, capacity })
}

/// The two files of a pair: lower rank to higher, and back.
pub fn pair_paths(dir: &Path, tag: u64, lo: usize, hi: usize) -> (PathBuf, PathBuf) {
    (dir.join(format!("railyard-{tag:016x}-{lo}-{hi}")), dir.join(format!("railyard-{tag:016x}-{hi}-{lo}")))
}

/// Create a ring file (the lower rank of a pair does).
pub fn create(path: &Path, capacity: usize) -> io::Result<()> {
    map(path, capacity, true).map(|_| ())
}

/// Open a ring file's producing end.
pub fn writer(path: &Path, capacity: usize, timeout: Duration) -> io::Result<ShmWriter> {
    let ring = map(path, capacity, false)?;
    ring.word(WRITER_PID).store(std::process::id() as u64, Ordering::Relaxed);
    Ok(ShmWriter { ring: Arc::new(ring), timeout })
}

/// Open a ring file's consuming end.
pub fn reader(path: &Path, capacity: usize, timeout: Duration) -> io::Result<ShmReader> {
    let ring = map(path, capacity, false)?;
    ring.word(READER_PID).store(std::process::id() as u64, Ordering::Relaxed);
    Ok(ShmReader { ring: Arc::new(ring), timeout })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_cross_in_order_through_wraps() {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("railyard-test-ring-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        create(&path, 4096).unwrap();
        let mut w = writer(&path, 4096, Duration::from_secs(5)).unwrap();
        let mut r = reader(&path, 4096, Duration::from_secs(5)).unwrap();
        std::fs::remove_file(&path).unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let expect = data.clone();
        let t = std::thread::spawn(move || w.write_all(&data).unwrap());
        let mut got = vec![0u8; expect.len()];
        r.read_exact(&mut got).unwrap();
        t.join().unwrap();
        assert_eq!(got, expect);
    }

    #[test]
    fn a_silent_peer_times_out() {
        let path = std::env::temp_dir().join(format!("railyard-test-ring2-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        create(&path, 4096).unwrap();
        let mut r = reader(&path, 4096, Duration::from_millis(100)).unwrap();
        std::fs::remove_file(&path).unwrap();
        let mut b = [0u8; 1];
        assert_eq!(r.read(&mut b).unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(map(&path, 1000, true).is_err());
    }
}

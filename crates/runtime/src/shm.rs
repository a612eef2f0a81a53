//! Shared-memory links between ranks on one host: one single-producer single-consumer
//! byte ring per direction, in a file under /dev/shm mapped by both processes.
//!
//! Layout: the consumer's read position at byte 0, the producer's write position at
//! byte 64 (separate cache lines), the data from byte 128, `capacity` bytes (a power of
//! two). The producer copies bytes in, then publishes the new write position with
//! Release; the consumer reads it with Acquire before copying out, then publishes its read
//! position with Release, which the producer reads with Acquire before reusing space.
//! Both ends only try (`try_write`, `try_read`) and never wait: waiting, deadlines and
//! noticing a dead peer (each side's pid is in the header) belong to the progress engine.
//! Byte 16 counts the single-copy descriptors the consumer has pulled (`cma.rs`).
//!
//! Bytes 128–168 are a board for sharing one large single-copy transfer: the consumer
//! (receiver) publishes where the bytes are and where they go, in pieces; then it pulls
//! pieces and the producer (sender), if it is only waiting for the acknowledgement, pushes
//! pieces (`process_vm_writev`), each side claiming the next piece with an atomic, so two
//! cores copy and neither waits on the other. The claim word packs the transfer's number
//! with the next piece index, so a helper that read an old transfer's addresses can never
//! claim a piece of a newer one: its compare-and-swap fails. The receiver starts a new
//! transfer only once every piece of the last is done; data then at byte 192.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapMut;

const HEAD: usize = 0;
/// The consumer's process id (so a producer can tell a dead peer from a slow one).
const READER_PID: usize = 8;
/// Single-copy descriptors the consumer has pulled (on the consumer's cache line).
const ACKED: usize = 16;
const TAIL: usize = 64;
/// The producer's process id.
const WRITER_PID: usize = 72;
/// The shared transfer's number (high 32 bits) and next unclaimed piece (low 32 bits).
const SHARE_NEXT: usize = 128;
/// Pieces of the shared transfer done (by either side).
const SHARE_DONE: usize = 136;
/// Where the bytes are (in the producer) and where they go (in the consumer), and how many.
const SHARE_SRC: usize = 144;
const SHARE_DST: usize = 152;
const SHARE_LEN: usize = 160;
const DATA: usize = 192;
/// A shared transfer goes in pieces of this many bytes.
pub const SHARE_PIECE_BYTES: usize = 1 << 20;
/// Ring capacity bounds: at least a page, at most 1 GiB.
pub const MIN_RING_BYTES: usize = 4096;
pub const MAX_RING_BYTES: usize = 1 << 30;

struct Ring {
    map: MmapMut,
    capacity: usize,
}

// SAFETY: each end owns its own mapping; the shared bytes are only touched through
// atomics (positions) and through disjoint ranges that the SPSC protocol hands to exactly
// one side at a time, so moving an end to another thread is sound.
unsafe impl Send for Ring {}

impl Ring {
    fn word(&self, at: usize) -> &AtomicU64 {
        // SAFETY: `at` is one of the header words (below DATA), inside the mapping and
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

/// The producing end of a ring.
pub struct ShmWriter {
    ring: Ring,
    /// Single-copy descriptors posted through this ring (the consumer acknowledges each).
    posted: u64,
}

/// The consuming end of a ring.
pub struct ShmReader {
    ring: Ring,
    /// Shared transfers opened through this ring (numbers them).
    shares: u64,
}

impl ShmWriter {
    /// Copy as much of `buf` as fits into the ring, without waiting; the bytes written.
    pub fn try_write(&mut self, buf: &[u8]) -> usize {
        let r = &self.ring;
        let tail = r.word(TAIL).load(Ordering::Relaxed);
        let head = r.word(HEAD).load(Ordering::Acquire);
        let free = r.capacity - (tail - head) as usize;
        let n = free.min(buf.len());
        if n == 0 {
            return 0;
        }
        let at = (tail as usize) & (r.capacity - 1);
        let first = n.min(r.capacity - at);
        // SAFETY: bytes [at, at+first) and [0, n-first) of the data area are free: the
        // consumer has read past them (head) and will not touch them until tail moves.
        unsafe {
            std::ptr::copy_nonoverlapping(buf.as_ptr(), r.data().add(at), first);
            std::ptr::copy_nonoverlapping(buf.as_ptr().add(first), r.data(), n - first);
        }
        r.word(TAIL).store(tail + n as u64, Ordering::Release);
        n
    }

    /// Count one more single-copy descriptor sent through this ring.
    pub fn post(&mut self) {
        self.posted += 1;
    }

    /// Whether the consumer has acknowledged every descriptor posted (so the memory
    /// they describe may change again).
    pub fn all_acked(&self) -> bool {
        self.ring.word(ACKED).load(Ordering::Acquire) >= self.posted
    }

    /// Whether the consuming process still runs.
    pub fn peer_alive(&self) -> bool {
        alive(self.ring.word(READER_PID).load(Ordering::Relaxed))
    }

    /// Push one piece of the consumer's shared transfer, if one is open: the bytes pushed
    /// (0 when there is nothing to claim). Call only while a posted descriptor is
    /// unacknowledged: the transfer is then one of ours. (The addresses come from the
    /// consumer, who can read all of our memory anyway; the kernel checks both.)
    pub fn help(&self) -> io::Result<usize> {
        let r = &self.ring;
        let next = r.word(SHARE_NEXT).load(Ordering::Acquire);
        let len = r.word(SHARE_LEN).load(Ordering::Relaxed) as usize;
        let piece = (next & 0xffff_ffff) as usize;
        if piece >= len.div_ceil(SHARE_PIECE_BYTES) {
            return Ok(0);
        }
        let (src, dst) = (r.word(SHARE_SRC).load(Ordering::Relaxed), r.word(SHARE_DST).load(Ordering::Relaxed));
        // Claimed only if nobody moved the word since it was read: then the transfer the
        // addresses belong to is still open (it ends only after all its pieces are done).
        if r.word(SHARE_NEXT).compare_exchange(next, next + 1, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return Ok(0);
        }
        let at = piece * SHARE_PIECE_BYTES;
        let n = SHARE_PIECE_BYTES.min(len - at);
        crate::cma::push(r.word(READER_PID).load(Ordering::Relaxed), src + at as u64, dst + at as u64, n)?;
        r.word(SHARE_DONE).fetch_add(1, Ordering::Release);
        Ok(n)
    }
}

/// A shared transfer the consumer opened (`ShmReader::share`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    number: u64,
    pieces: u64,
}

impl ShmReader {
    /// Copy up to `buf.len()` published bytes out of the ring, without waiting; the bytes read.
    pub fn try_read(&mut self, buf: &mut [u8]) -> usize {
        let r = &self.ring;
        let head = r.word(HEAD).load(Ordering::Relaxed);
        let tail = r.word(TAIL).load(Ordering::Acquire);
        let n = ((tail - head) as usize).min(buf.len());
        if n == 0 {
            return 0;
        }
        let at = (head as usize) & (r.capacity - 1);
        let first = n.min(r.capacity - at);
        // SAFETY: bytes [at, at+first) and [0, n-first) were published by the producer
        // (tail, Acquire) and it will not overwrite them until head moves past.
        unsafe {
            std::ptr::copy_nonoverlapping(r.data().add(at), buf.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(r.data(), buf.as_mut_ptr().add(first), n - first);
        }
        r.word(HEAD).store(head + n as u64, Ordering::Release);
        n
    }

    /// Acknowledge one single-copy descriptor: its bytes have been pulled.
    pub fn ack(&mut self) {
        self.ring.word(ACKED).fetch_add(1, Ordering::Release);
    }

    /// Open a shared transfer of `len` bytes from `src` in the producer to `dst` here.
    /// The previous one must be finished (`share_finished`) or revoked.
    pub fn share(&mut self, src: u64, dst: u64, len: usize) -> Share {
        let r = &self.ring;
        self.shares = (self.shares + 1) & 0xffff_ffff;
        r.word(SHARE_DONE).store(0, Ordering::Relaxed);
        r.word(SHARE_SRC).store(src, Ordering::Relaxed);
        r.word(SHARE_DST).store(dst, Ordering::Relaxed);
        r.word(SHARE_LEN).store(len as u64, Ordering::Relaxed);
        r.word(SHARE_NEXT).store(self.shares << 32, Ordering::Release);
        Share { number: self.shares, pieces: len.div_ceil(SHARE_PIECE_BYTES) as u64 }
    }

    /// Claim the next piece of `share` for this side to pull: its index, or None when all
    /// are claimed. Mark it with `share_piece_done` afterwards, whether the pull worked.
    pub fn share_claim(&self, share: Share) -> Option<usize> {
        let word = self.ring.word(SHARE_NEXT);
        if word.load(Ordering::Relaxed) & 0xffff_ffff >= share.pieces {
            return None;
        }
        let next = word.fetch_add(1, Ordering::AcqRel);
        debug_assert_eq!(next >> 32, share.number, "only the consumer opens transfers");
        let piece = next & 0xffff_ffff;
        (piece < share.pieces).then_some(piece as usize)
    }

    pub fn share_piece_done(&self) {
        self.ring.word(SHARE_DONE).fetch_add(1, Ordering::Release);
    }

    /// Whether every piece of `share` is in place (the producer's pushes are visible).
    pub fn share_finished(&self, share: Share) -> bool {
        self.ring.word(SHARE_DONE).load(Ordering::Acquire) >= share.pieces
    }

    /// Close `share` early (the call failed): nobody claims another piece, and this waits
    /// (up to `limit`, or until the producer is gone) for pieces the producer is pushing,
    /// so none lands in the buffer after the call has returned it to its owner.
    pub fn share_revoke(&self, share: Share, limit: std::time::Duration) {
        let r = &self.ring;
        let next = r.word(SHARE_NEXT).fetch_add(share.pieces, Ordering::AcqRel);
        let claimed = (next & 0xffff_ffff).min(share.pieces);
        let start = std::time::Instant::now();
        while r.word(SHARE_DONE).load(Ordering::Acquire) < claimed && start.elapsed() < limit && self.peer_alive() {
            std::thread::yield_now();
        }
    }

    /// The producing process (whose memory single-copy descriptors point into).
    pub fn peer_pid(&self) -> u64 {
        self.ring.word(WRITER_PID).load(Ordering::Relaxed)
    }

    /// Whether the producing process still runs.
    pub fn peer_alive(&self) -> bool {
        alive(self.peer_pid())
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
pub fn writer(path: &Path, capacity: usize) -> io::Result<ShmWriter> {
    let ring = map(path, capacity, false)?;
    ring.word(WRITER_PID).store(std::process::id() as u64, Ordering::Relaxed);
    Ok(ShmWriter { ring, posted: 0 })
}

/// Open a ring file's consuming end.
pub fn reader(path: &Path, capacity: usize) -> io::Result<ShmReader> {
    let ring = map(path, capacity, false)?;
    ring.word(READER_PID).store(std::process::id() as u64, Ordering::Relaxed);
    Ok(ShmReader { ring, shares: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(name: &str, capacity: usize) -> (ShmWriter, ShmReader) {
        let path = std::env::temp_dir().join(format!("railyard-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        create(&path, capacity).unwrap();
        let w = writer(&path, capacity).unwrap();
        let r = reader(&path, capacity).unwrap();
        std::fs::remove_file(&path).unwrap();
        (w, r)
    }

    #[test]
    fn bytes_cross_in_order_through_wraps() {
        let (mut w, mut r) = ring("ring", 4096);
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let expect = data.clone();
        let t = std::thread::spawn(move || {
            let mut at = 0;
            while at < data.len() {
                at += w.try_write(&data[at..(at + 3000).min(data.len())]);
            }
        });
        let mut got = vec![0u8; expect.len()];
        let mut at = 0;
        while at < got.len() {
            at += r.try_read(&mut got[at..]);
        }
        t.join().unwrap();
        assert_eq!(got, expect);
    }

    #[test]
    fn a_full_ring_takes_nothing_and_an_empty_one_gives_nothing() {
        let (mut w, mut r) = ring("full", 4096);
        assert_eq!(w.try_write(&[1u8; 5000]), 4096);
        assert_eq!(w.try_write(&[1u8; 10]), 0);
        let mut b = [0u8; 100];
        assert_eq!(r.try_read(&mut b), 100);
        assert_eq!(w.try_write(&[2u8; 300]), 100);
        let mut rest = vec![0u8; 8192];
        assert_eq!(r.try_read(&mut rest), 4096);
        assert_eq!(r.try_read(&mut rest), 0);
        assert!(rest[..3996].iter().all(|&x| x == 1) && rest[3996..4096].iter().all(|&x| x == 2));
        // Acknowledgements count posted descriptors; both pids are ours, so alive.
        assert!(w.all_acked());
        w.post();
        assert!(!w.all_acked());
        r.ack();
        assert!(w.all_acked() && w.peer_alive() && r.peer_alive());
        assert_eq!(r.peer_pid(), std::process::id() as u64);
        assert!(map(Path::new("/nonexistent/x"), 1000, true).is_err());
    }

    #[test]
    fn a_shared_transfer_is_copied_once_whoever_claims_each_piece() {
        crate::cma::allow_peers();
        let (w, mut r) = ring("share", 4096);
        let len = 5 * SHARE_PIECE_BYTES + 12_345;
        let src: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        if !crate::cma::probe(std::process::id() as u64, src.as_ptr() as u64, &src[..16]) {
            eprintln!("cross-memory attach is not permitted here; transfers are not shared");
            return;
        }
        for round in 0..3 {
            let mut dst = vec![0u8; len];
            let share = r.share(src.as_ptr() as u64, dst.as_mut_ptr() as u64, len);
            // The producer helps from another thread while the consumer pulls.
            let helper = std::thread::scope(|s| {
                let h = s.spawn(|| {
                    let mut pushed = 0;
                    while !r.share_finished(share) {
                        pushed += w.help().unwrap();
                    }
                    pushed
                });
                while let Some(piece) = r.share_claim(share) {
                    let at = piece * SHARE_PIECE_BYTES;
                    let end = (at + SHARE_PIECE_BYTES).min(len);
                    crate::cma::pull(std::process::id() as u64, src.as_ptr() as u64 + at as u64, &mut dst[at..end])
                        .unwrap();
                    r.share_piece_done();
                }
                h.join().unwrap()
            });
            assert!(r.share_finished(share));
            assert!(dst == src, "round {round}: every piece in place");
            assert!(helper <= len);
            // A finished transfer offers nothing more.
            assert_eq!(w.help().unwrap(), 0);
            assert_eq!(r.share_claim(share), None);
        }
        // Revoked before anyone claimed: nothing can be claimed or pushed afterwards.
        let mut dst = vec![0u8; len];
        let share = r.share(src.as_ptr() as u64, dst.as_mut_ptr() as u64, len);
        r.share_revoke(share, std::time::Duration::from_millis(100));
        assert_eq!(w.help().unwrap(), 0);
        assert_eq!(r.share_claim(share), None);
        assert!(dst.iter().all(|&b| b == 0));
    }
}

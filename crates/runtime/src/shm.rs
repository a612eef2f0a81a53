//! Shared-memory links between ranks on one host: one single-producer single-consumer
//! byte ring per direction, in a file under /dev/shm mapped by both processes.
//!
//! Layout: the consumer's read position at byte 0, the producer's write position at
//! byte 64 (separate cache lines), the data from byte `DATA`, `capacity` bytes (a power of
//! two). The producer copies bytes in, then publishes the new write position with
//! Release; the consumer reads it with Acquire before copying out, and publishes its read
//! position with Release once an eighth of the ring has been read since it last did, or
//! before its rank waits (`ShmReader::release`); the producer reads it with Acquire, only
//! when the space it knows of is not enough, before reusing space.
//! Each end keeps its own position privately and only reads the other's from the mapping,
//! and a position the peer wrote is checked before use (`tail - head` must lie in
//! `0..=capacity`): a corrupt or hostile peer makes a call fail, never copy outside the
//! mapping. Both ends only try (`try_write`, `try_read`) and never wait: waiting, deadlines
//! and noticing a dead peer (each side's pid is in the header, read once at setup) belong
//! to the progress engine. Byte 16 counts the single-copy descriptors the consumer has
//! pulled (`cma.rs`).
//!
//! Bytes 128–168 are the board of a shared single-copy transfer (`share.rs` has the
//! protocol). Bytes 80–96 are the producer's wait status (which call and round it waits
//! in, and for whom: `progress.rs` publishes it only once a wait has gone on, so the hot
//! path never writes it), and bytes 192–1280 its abort notice (the text of its first error),
//! so one rank's diagnosis reaches every peer on the host.
//!
//! The rings carry frames (`frame.rs`): one that fits in a cache line is padded to end on
//! one (`frame_pad`), so consecutive small frames never share a line; the padding is
//! skipped by both ends, never written or read.
//!
//! Files are created 0600 with O_EXCL (`create_new`) under a name that includes the job's
//! tag, checked to be ours when opened, and removed as soon as both ends have mapped them;
//! `remove_job_files` sweeps what a killed setup left (the launchers call it).

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memmap2::MmapMut;

pub use crate::share::Share;
use crate::share::{Board, Claimed};

const HEAD: usize = 0;
/// The consumer's process id (so a producer can tell a dead peer from a slow one).
const READER_PID: usize = 8;
/// Single-copy descriptors the consumer has pulled (on the consumer's cache line).
const ACKED: usize = 16;
const TAIL: usize = 64;
/// The producer's process id.
const WRITER_PID: usize = 72;
/// The producer's wait: the call it waits in (its sequence number; 0 when not waiting),
/// and the round (high 32 bits) and the rank it waits for (low 32 bits).
const STATUS_CALL: usize = 80;
const STATUS_WAIT: usize = 88;
/// The shared transfer's words (`share.rs`).
const SHARE_NEXT: usize = 128;
const SHARE_DONE: usize = 136;
const SHARE_SRC: usize = 144;
const SHARE_DST: usize = 152;
const SHARE_LEN: usize = 160;
/// Length of the producer's abort notice (0: none), published after its text.
const ABORT_LEN: usize = 192;
const ABORT_TEXT: usize = 256;
/// An abort notice holds at most this many bytes of text.
pub const ABORT_TEXT_BYTES: usize = 1024;
const DATA: usize = ABORT_TEXT + ABORT_TEXT_BYTES;
/// Ring capacity bounds: at least a page, at most 1 GiB.
pub const MIN_RING_BYTES: usize = 4096;
pub const MAX_RING_BYTES: usize = 1 << 30;
/// All the rings of one host's job together stay within this, whatever the rank count:
/// each ring is the configured size or the largest power of two that keeps the job's
/// `ranks × (ranks − 1)` rings within it (`ring_bytes_for`): 64 ranks map 256 KiB rings,
/// 1 GiB in all, instead of 16 GiB of 4 MiB rings.
pub const MAX_JOB_RING_BYTES: usize = 1 << 30;
/// Rings never shrink below this for the job bound (a smaller one only costs more wakeups).
pub const MIN_BOUNDED_RING_BYTES: usize = 64 << 10;

/// The ring size for a job of `ranks` ranks when `configured` is asked for.
pub fn ring_bytes_for(configured: usize, ranks: usize) -> usize {
    let rings = ranks.saturating_mul(ranks.saturating_sub(1)).max(1);
    let share = MAX_JOB_RING_BYTES / rings;
    // The largest power of two not above the share.
    let bounded = if share == 0 { 0 } else { 1usize << (usize::BITS - 1 - share.leading_zeros()) };
    configured.min(bounded.max(MIN_BOUNDED_RING_BYTES)).max(MIN_RING_BYTES)
}

/// A frame that fits in a cache line of the ring (header and payload at most this many
/// bytes: a small call's) is padded so that it ends on a line (`frame_pad`), and the
/// consumer skips that padding before it reads the next frame (`ShmReader::align`).
/// Unpadded, such a frame shares a line with the next one (a consumer reading frame k
/// takes back the line the producer is writing frame k + 1 into), and after one odd-sized
/// frame every 64-byte frame spans two lines. Longer frames are not padded: padding a
/// 72–88-byte frame to two whole lines measured slower than the line it shares
/// (`docs/benchmarks.md`). The capacity is a power of two of at least a page, so a
/// multiple of this.
pub const FRAME_ALIGN_BYTES: usize = 64;

/// Whether a frame of `len` bytes (header included) is padded: it fits in a line.
pub const fn padded(len: usize) -> bool {
    len <= FRAME_ALIGN_BYTES
}

/// The padding after a frame of `len` bytes (header included) that starts at ring
/// position `start`: up to the next line when the frame fits in one, else none.
pub const fn frame_pad(start: u64, len: usize) -> usize {
    if padded(len) {
        (start.wrapping_add(len as u64).wrapping_neg() % FRAME_ALIGN_BYTES as u64) as usize
    } else {
        0
    }
}

/// What `ShmReader::peek` saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peek<'a> {
    /// The bytes are published and stay in place until `advance`.
    Bytes(Published<'a>),
    /// Fewer are published yet.
    Short,
    /// They run round the ring's end.
    Wrapped,
}

/// Published bytes in the ring, read only by copying: a misbehaving producer could write
/// them at any time, so no reference into shared memory is handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published<'a> {
    at: *const u8,
    len: usize,
    /// Borrows the reader, so the bytes cannot outlive the read position's next move.
    _reader: std::marker::PhantomData<&'a ShmReader>,
}

impl Published<'_> {
    /// The first `N` bytes, copied out; None when there are fewer.
    pub fn head<const N: usize>(&self) -> Option<[u8; N]> {
        // SAFETY: `N <= len` bytes from `at` lie in the ring's data area (`peek`); read by
        // value, so a producer writing them meanwhile changes only the copy's contents.
        (N <= self.len).then(|| unsafe { std::ptr::read_unaligned(self.at as *const [u8; N]) })
    }

    /// Whether the first `N` bytes are `want` (compared a word at a time: a frame header
    /// is checked on every small receive, and a call to `memcmp` costs more than the words).
    pub fn starts_with<const N: usize>(&self, want: &[u8; N]) -> bool {
        let Some(got) = self.head::<N>() else { return false };
        let word = |b: &[u8]| u64::from_ne_bytes(<[u8; 8]>::try_from(b).unwrap_or_default());
        let (g, w) = (got.chunks_exact(8), want.chunks_exact(8));
        let tails_equal = g.remainder() == w.remainder();
        g.zip(w).fold(0, |diff, (a, b)| diff | (word(a) ^ word(b))) == 0 && tails_equal
    }

    /// Copy bytes `from..` into `dst` (exactly `dst.len()` of them, which must be there).
    pub fn copy_to(&self, from: usize, dst: &mut [u8]) {
        assert!(from <= self.len && dst.len() <= self.len - from, "a copy past the published bytes");
        // SAFETY: the range lies inside the `len` published bytes (asserted), in the ring's
        // data area; `dst` is a separate, exclusive buffer of this process.
        unsafe { std::ptr::copy_nonoverlapping(self.at.add(from), dst.as_mut_ptr(), dst.len()) }
    }
}

struct Ring {
    /// The mapping's first byte: every access goes through this one raw pointer.
    base: *mut u8,
    capacity: usize,
    /// Keeps the mapping alive (shared by both ends only in tests, which run them in one
    /// process).
    _map: std::sync::Arc<MmapMut>,
}

// SAFETY: each end owns its own mapping; the shared bytes are only touched through
// atomics (positions, words) and through disjoint ranges that the SPSC protocol hands to
// exactly one side at a time, so moving an end to another thread is sound.
unsafe impl Send for Ring {}
// SAFETY: through `&Ring` only atomics are touched (header words) and bytes whose writer
// publishes them with Release before they are read (the abort text); writing the data
// area and the abort text needs `&mut` of the end that owns them.
unsafe impl Sync for Ring {}

impl Ring {
    fn new(mut map: MmapMut, capacity: usize) -> Ring {
        assert_eq!(map.len(), DATA + capacity, "a ring's mapping holds its header and data");
        Ring { base: map.as_mut_ptr(), capacity, _map: std::sync::Arc::new(map) }
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        assert!(at.is_multiple_of(8) && at + 8 <= DATA, "header word {at}");
        // SAFETY: `at` is a header word below DATA (asserted), inside the mapping (which is
        // DATA + capacity bytes, checked in `map`) and 8-byte aligned (mappings are page
        // aligned). The peer writes these bytes only through atomics too.
        unsafe { &*(self.base.add(at) as *const AtomicU64) }
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: DATA is inside the mapping; the protocol keeps producer and consumer on disjoint bytes.
        unsafe { self.base.add(DATA) }
    }

    fn board(&self) -> Board<'_, AtomicU64> {
        Board {
            next: self.word(SHARE_NEXT),
            done: self.word(SHARE_DONE),
            src: self.word(SHARE_SRC),
            dst: self.word(SHARE_DST),
            len: self.word(SHARE_LEN),
        }
    }

    /// The bytes in use given both positions, if the positions are consistent.
    fn used(&self, head: u64, tail: u64) -> io::Result<usize> {
        match tail.checked_sub(head) {
            Some(n) if n <= self.capacity as u64 => Ok(n as usize),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("ring positions are corrupt (read {head}, write {tail}, capacity {})", self.capacity),
            )),
        }
    }
}

/// Whether process `pid` still runs (a zombie — killed, not yet reaped — does not).
fn alive(pid: u64) -> bool {
    if pid == 0 || pid == std::process::id() as u64 {
        return true;
    }
    process_state(pid).is_some_and(|state| state != 'Z' && state != 'X')
}

/// The state letter of process `pid` (R, S, D, T for stopped, Z, ...), if it exists.
pub fn process_state(pid: u64) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state letter follows the command name in parentheses.
    stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next())
}

/// A peer's published wait (`ShmReader::peer_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitStatus {
    /// The peer's call sequence number.
    pub call: u64,
    /// The round of that call's schedule it waits in.
    pub round: u32,
    /// The rank it waits for.
    pub on: usize,
}

/// The producing end of a ring.
pub struct ShmWriter {
    ring: Ring,
    /// Our write position (the mapping's copy is only published).
    tail: u64,
    /// The consumer's read position as last read: free space is reckoned from it, and the
    /// shared word (on the consumer's cache line) is read again only when that is not
    /// enough, so a stream of small frames does not pull the line across cores each time.
    head_seen: u64,
    /// Descriptors known acknowledged (the shared count is read only while some are not).
    /// An atomic only so `&self` can update it; it is private to this end.
    acked_seen: AtomicU64,
    /// Single-copy descriptors posted through this ring (the consumer acknowledges each).
    posted: u64,
    /// The consumer's pid, read once the setup handshake is over.
    peer_pid: u64,
}

/// The consuming end of a ring.
pub struct ShmReader {
    ring: Ring,
    /// Our read position.
    head: u64,
    /// The read position as last published to the producer (`release`).
    head_published: u64,
    /// The producer's write position as last read (read again when it is not enough).
    tail_seen: u64,
    /// The last frame read was padded to a line (`frame_read`), not yet skipped.
    pad_due: bool,
    /// Shared transfers opened through this ring (numbers them).
    shares: u64,
    /// The producer's pid, read once the setup handshake is over.
    peer_pid: u64,
}

impl ShmWriter {
    /// Copy as much of `buf` as fits into the ring, without waiting; the bytes written.
    /// (The engine writes frames with `try_write_parts`; this is the tests' plain write.)
    #[cfg(test)]
    pub fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.try_write_parts(&[buf], 0)
    }

    /// The padding after a frame of `len` bytes written next (`frame_pad`).
    pub fn frame_pad(&self, len: usize) -> usize {
        frame_pad(self.tail, len)
    }

    /// Write a whole frame, `head` then `body` then `pad` bytes skipped, if it all fits
    /// before the ring's end (nearly every small frame: the fixed-size head is a few
    /// stores rather than a call to `memcpy`); else as `try_write_parts` does. The bytes
    /// written and skipped.
    pub fn try_write_frame<const H: usize>(&mut self, head: &[u8; H], body: &[u8], pad: usize) -> io::Result<usize> {
        let want = H + body.len() + pad;
        let cap = self.ring.capacity;
        let at = (self.tail as usize) & (cap - 1);
        let free = cap - self.ring.used(self.head_seen, self.tail)?;
        if want <= free && want <= cap - at {
            let data = self.ring.data();
            // SAFETY: `at + want <= capacity`, so both ranges lie in the data area, which is
            // free: the consumer has read past it (head, validated against our own tail).
            unsafe {
                std::ptr::write_unaligned(data.add(at) as *mut [u8; H], *head);
                std::ptr::copy_nonoverlapping(body.as_ptr(), data.add(at + H), body.len());
            }
            self.publish(want);
            return Ok(want);
        }
        self.try_write_parts(&[head, body], pad)
    }

    /// Copy a prefix of `parts` (in order) into the ring, as much as fits, then skip up to
    /// `pad` bytes after them (a frame's padding, `frame_pad`: never read, so not
    /// written), and publish it all once; the bytes written and skipped.
    pub fn try_write_parts(&mut self, parts: &[&[u8]], pad: usize) -> io::Result<usize> {
        let want: usize = parts.iter().map(|p| p.len()).sum::<usize>() + pad;
        let cap = self.ring.capacity;
        let mut free = cap - self.ring.used(self.head_seen, self.tail)?;
        if free < want {
            self.head_seen = self.ring.word(HEAD).load(Ordering::Acquire);
            free = cap - self.ring.used(self.head_seen, self.tail)?;
        }
        let data = self.ring.data();
        let at = (self.tail as usize) & (cap - 1);
        if want <= free && want <= cap - at {
            // All of it fits before the ring's end (nearly every small frame): straight
            // copies, one after the other.
            let mut to = at;
            for p in parts {
                // SAFETY: `to + p.len() <= at + want <= capacity`, so the range lies in the
                // data area, which is free (as below: the consumer has read past it).
                unsafe { std::ptr::copy_nonoverlapping(p.as_ptr(), data.add(to), p.len()) };
                to += p.len();
            }
            self.publish(want);
            return Ok(want);
        }
        let mut written = 0;
        let mut all = true;
        for p in parts.iter().filter(|p| !p.is_empty()) {
            let n = (free - written).min(p.len());
            if n == 0 {
                all = false;
                break;
            }
            let at = ((self.tail + written as u64) as usize) & (cap - 1);
            let first = n.min(cap - at);
            // SAFETY: `at < capacity`, `first <= capacity - at` and `n - first <= at` (n is at
            // most the free space, itself at most capacity), so both ranges lie in the data
            // area; they are free: the consumer has read past them (head, validated against
            // our own tail) and will not touch them until tail moves.
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr(), data.add(at), first);
                // Round the ring's end (rare: skip the call otherwise).
                if n > first {
                    std::ptr::copy_nonoverlapping(p.as_ptr().add(first), data, n - first);
                }
            }
            written += n;
            if n < p.len() {
                all = false;
                break;
            }
        }
        if all {
            written += (free - written).min(pad);
        }
        self.publish(written);
        Ok(written)
    }

    /// Make `n` more written bytes visible to the consumer.
    fn publish(&mut self, n: usize) {
        if n > 0 {
            self.tail += n as u64;
            self.ring.word(TAIL).store(self.tail, Ordering::Release);
        }
    }

    /// Count one more single-copy descriptor sent through this ring.
    pub fn post(&mut self) {
        self.posted += 1;
    }

    /// Whether the consumer has acknowledged every descriptor posted (so the memory
    /// they describe may change again).
    pub fn all_acked(&self) -> bool {
        if self.acked_seen.load(Ordering::Relaxed) >= self.posted {
            return true;
        }
        let acked = self.ring.word(ACKED).load(Ordering::Acquire);
        self.acked_seen.store(acked, Ordering::Relaxed);
        acked >= self.posted
    }

    /// Whether the consuming process still runs.
    pub fn peer_alive(&self) -> bool {
        alive(self.peer_pid)
    }

    /// Push one piece of the consumer's shared transfer, if one is open: the bytes pushed
    /// (0 when there is nothing to claim). Call only while a posted descriptor is
    /// unacknowledged: the transfer is then one of ours. (The addresses come from the
    /// consumer, who can read all of our memory anyway; the kernel checks both.)
    pub fn help(&self) -> io::Result<usize> {
        let board = self.ring.board();
        let Some(Claimed { src, dst, len, .. }) = board.help_claim() else { return Ok(0) };
        let pushed = crate::cma::push(self.peer_pid, src, dst, len);
        // Done whether it worked: the consumer waits for every claimed piece.
        board.piece_done();
        pushed.map(|_| len)
    }

    /// Publish that this rank waits in `status` (None: it no longer waits).
    pub fn publish_status(&self, status: Option<WaitStatus>) {
        let r = &self.ring;
        match status {
            Some(s) => {
                r.word(STATUS_WAIT).store(((s.round as u64) << 32) | (s.on as u64 & 0xffff_ffff), Ordering::Relaxed);
                r.word(STATUS_CALL).store(s.call, Ordering::Release);
            }
            None => r.word(STATUS_CALL).store(0, Ordering::Release),
        }
    }

    /// Leave an abort notice for the consumer (the first one stays).
    pub fn publish_abort(&mut self, text: &str) {
        let r = &self.ring;
        if r.word(ABORT_LEN).load(Ordering::Acquire) != 0 {
            return;
        }
        let mut end = text.len().min(ABORT_TEXT_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        // SAFETY: ABORT_TEXT..ABORT_TEXT + ABORT_TEXT_BYTES is inside the header, below
        // DATA, and only the producer writes it (before publishing its length).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), r.base.add(ABORT_TEXT), end);
        }
        r.word(ABORT_LEN).store(end.max(1) as u64, Ordering::Release);
    }
}

impl ShmReader {
    /// Copy up to `buf.len()` published bytes out of the ring, without waiting; the bytes read.
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.published(buf.len())?.min(buf.len());
        let (r, head) = (&self.ring, self.head);
        if n == 0 {
            return Ok(0);
        }
        let at = (head as usize) & (r.capacity - 1);
        let first = n.min(r.capacity - at);
        // SAFETY: as in `try_write_parts`, both ranges lie in the data area (n is at most
        // the validated bytes in use, at most capacity); they were published by the
        // producer (tail, Acquire) and it will not overwrite them until head moves past.
        unsafe {
            std::ptr::copy_nonoverlapping(r.data().add(at), buf.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(r.data(), buf.as_mut_ptr().add(first), n - first);
        }
        self.head = head + n as u64;
        self.release_some();
        Ok(n)
    }

    /// Publish the read position once an eighth of the ring has been read since it was
    /// last published. Publishing every frame made the producer, when it had filled the
    /// ring, re-read a line the consumer had just written for every frame, and the
    /// consumer then wait for that line back to write it again.
    fn release_some(&mut self) {
        if self.head - self.head_published >= (self.ring.capacity >> 3) as u64 {
            self.release();
        }
    }

    /// Publish the read position, so the producer may reuse what has been read. Done
    /// every eighth of the ring (`release_some`) and whenever this rank is about to wait
    /// (`progress::drive`) or to hold back (`progress::slip`), so a producer waiting for
    /// room never waits on a consumer that waits too. Not at the end of a call (with one frame a call that would be every
    /// frame again): what was read since the last publication, less than an eighth of the
    /// ring, stays counted as in use until this rank next waits, so a producer running
    /// calls ahead has up to that much less room in the meantime.
    pub fn release(&mut self) {
        if self.head != self.head_published {
            self.head_published = self.head;
            self.ring.word(HEAD).store(self.head, Ordering::Release);
        }
    }

    /// A frame of `len` bytes (header included) has been read: the next frame starts past
    /// its padding, if it has any (`frame_pad`; `align` skips it).
    pub fn frame_read(&mut self, len: usize) {
        self.pad_due = padded(len);
    }

    /// Move the read position to the next frame's start, past the last frame's padding
    /// (`frame_read`); whether it is there (false: the padding is not published yet).
    pub fn align(&mut self) -> io::Result<bool> {
        if !self.pad_due {
            return Ok(true);
        }
        let skip = (self.head.wrapping_neg() % FRAME_ALIGN_BYTES as u64) as usize;
        self.pad_due = false;
        if skip == 0 {
            return Ok(true);
        }
        // Nearly always published with its frame (as last seen: no load of the peer's word).
        if self.tail_seen.saturating_sub(self.head) >= skip as u64 {
            self.head += skip as u64;
            return Ok(true);
        }
        if self.published(skip)? < skip {
            self.pad_due = true;
            return Ok(false);
        }
        self.advance(skip)?;
        Ok(true)
    }

    /// Bytes published past the read position: as last seen, or read again from the
    /// producer's position (validated) when that is fewer than `want`.
    fn published(&mut self, want: usize) -> io::Result<usize> {
        let available = self.ring.used(self.head, self.tail_seen)?;
        if available >= want {
            return Ok(available);
        }
        self.tail_seen = self.ring.word(TAIL).load(Ordering::Acquire);
        self.ring.used(self.head, self.tail_seen)
    }

    /// Bytes the producer has published past the read position, read from its position
    /// now (validated): how far ahead of this consumer it is.
    pub fn ahead(&mut self) -> io::Result<usize> {
        // No count of bytes is already known to be enough: `published` reads it again.
        self.published(usize::MAX)
    }

    /// The `len` published bytes at the read position, if they lie contiguous there:
    /// `Short` when fewer are published, `Wrapped` when they run round the ring's end.
    /// They stay unread until `advance`.
    pub fn peek(&mut self, len: usize) -> io::Result<Peek<'_>> {
        let at = (self.head as usize) & (self.ring.capacity - 1);
        if len > self.ring.capacity - at {
            return Ok(Peek::Wrapped);
        }
        if self.published(len)? < len {
            return Ok(Peek::Short);
        }
        let r = &self.ring;
        // SAFETY: `at + len <= capacity` (checked above), so the range lies in the data
        // area (`Published` reads it only by copying); its bytes were published by the
        // producer (tail, Acquire, validated against the capacity), which does not write
        // them again until head moves past them (`advance` needs `&mut self`).
        let at = unsafe { r.data().add(at) } as *const u8;
        Ok(Peek::Bytes(Published { at, len, _reader: std::marker::PhantomData }))
    }

    /// Move the read position past `len` bytes that `peek` showed.
    pub fn advance(&mut self, len: usize) -> io::Result<()> {
        let head = self.head + len as u64;
        self.ring.used(head, self.tail_seen)?;
        self.head = head;
        self.release_some();
        Ok(())
    }

    /// Acknowledge one single-copy descriptor: its bytes have been pulled.
    pub fn ack(&mut self) {
        self.ring.word(ACKED).fetch_add(1, Ordering::Release);
    }

    /// Open a shared transfer of `len` bytes from `src` in the producer to `dst` here.
    /// The previous one must be finished (`share_finished`) or revoked.
    pub fn share(&mut self, src: u64, dst: u64, len: usize) -> Share {
        self.shares = (self.shares + 1) & 0xffff_ffff;
        self.ring.board().open(self.shares, src, dst, len)
    }

    /// Claim the next piece of `share` for this side to pull: its index, or None when all
    /// are claimed. Mark it with `share_piece_done` afterwards, whether the pull worked.
    pub fn share_claim(&self, share: Share) -> Option<usize> {
        self.ring.board().claim(share)
    }

    pub fn share_piece_done(&self) {
        self.ring.board().piece_done();
    }

    /// Whether every piece of `share` is in place (the producer's pushes are visible).
    pub fn share_finished(&self, share: Share) -> bool {
        self.ring.board().finished(share)
    }

    /// Close `share` early (the call failed): nobody claims another piece, and this waits
    /// for pieces the producer is pushing, so none lands in the buffer after the call has
    /// returned it to its owner. A producer that dies ends the wait. One alive that has
    /// not finished its piece within `limit` (stopped between claiming and pushing) could
    /// write into the buffer at any later time: rather than return memory that may change
    /// under its owner, the process aborts, saying why.
    pub fn share_revoke(&self, share: Share, limit: Duration) {
        let board = self.ring.board();
        let claimed = board.revoke(share);
        let start = Instant::now();
        while board.done_count() < claimed {
            if !self.peer_alive() {
                return;
            }
            if start.elapsed() >= limit {
                eprintln!(
                    "railyard: process {} still holds a claim to copy into a buffer of a failed call after {:?}; \
                     aborting rather than returning memory that it may still write",
                    self.peer_pid, limit
                );
                std::process::abort();
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// The ring's data capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.ring.capacity
    }

    /// The producing process (whose memory single-copy descriptors point into).
    pub fn peer_pid(&self) -> u64 {
        self.peer_pid
    }

    /// Whether the producing process still runs.
    pub fn peer_alive(&self) -> bool {
        alive(self.peer_pid)
    }

    /// The producer's published wait, if it says it waits.
    pub fn peer_status(&self) -> Option<WaitStatus> {
        let r = &self.ring;
        let call = r.word(STATUS_CALL).load(Ordering::Acquire);
        let wait = r.word(STATUS_WAIT).load(Ordering::Relaxed);
        (call != 0).then_some(WaitStatus { call, round: (wait >> 32) as u32, on: (wait & 0xffff_ffff) as usize })
    }

    /// The producer's abort notice, if it left one.
    pub fn peer_abort(&self) -> Option<String> {
        let r = &self.ring;
        let len = r.word(ABORT_LEN).load(Ordering::Acquire);
        if len == 0 {
            return None;
        }
        let len = (len as usize).min(ABORT_TEXT_BYTES);
        let mut text = vec![0u8; len];
        // SAFETY: ABORT_TEXT..+len (len at most ABORT_TEXT_BYTES) is inside the header;
        // the producer wrote it before publishing the length (Acquire above).
        unsafe { std::ptr::copy_nonoverlapping(r.base.add(ABORT_TEXT), text.as_mut_ptr(), len) };
        Some(String::from_utf8_lossy(&text).trim_end_matches('\0').to_string())
    }
}

fn map(path: &Path, capacity: usize, create: bool) -> io::Result<Ring> {
    if !capacity.is_power_of_two() || !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&capacity) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "ring capacity must be a power of two between 4 KiB and 1 GiB",
        ));
    }
    // Owner only, and never an existing file (O_EXCL): nobody else can read the rings or
    // hand us a file of theirs.
    let file = OpenOptions::new().read(true).write(true).create_new(create).mode(0o600).open(path)?;
    let len = (DATA + capacity) as u64;
    let meta = file.metadata()?;
    if create {
        file.set_len(len)?;
    } else if meta.len() != len {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "ring file has the wrong size"));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, "ring file is not ours alone"));
    }
    // SAFETY: the file is ours (created with create_new, or checked above to be ours and
    // private) and both sides only access it through the ring protocol; its length is
    // DATA + capacity, so every offset the ring uses is inside the mapping.
    // Populated up front: faulting the ring's pages in during the first calls cost more
    // than the copies (a 128 KiB all-reduce took 3x longer until the ring had wrapped once).
    let map = unsafe { memmap2::MmapOptions::new().populate().map_mut(&file)? };
    Ok(Ring::new(map, capacity))
}

/// The two files of a pair: lower rank to higher, and back.
pub fn pair_paths(dir: &Path, tag: u64, lo: usize, hi: usize) -> (PathBuf, PathBuf) {
    (dir.join(format!("railyard-{tag:016x}-{lo}-{hi}")), dir.join(format!("railyard-{tag:016x}-{hi}-{lo}")))
}

/// Remove every ring file of the job tagged `tag` left in `dir` (a setup killed between
/// creating and removing them); the files removed.
pub fn remove_job_files(dir: &Path, tag: u64) -> usize {
    let prefix = format!("railyard-{tag:016x}-");
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// Create a ring file (the lower rank of a pair does).
pub fn create(path: &Path, capacity: usize) -> io::Result<()> {
    map(path, capacity, true).map(|_| ())
}

/// Open a ring file's producing end.
pub fn writer(path: &Path, capacity: usize) -> io::Result<ShmWriter> {
    let ring = map(path, capacity, false)?;
    ring.word(WRITER_PID).store(std::process::id() as u64, Ordering::Relaxed);
    let tail = ring.word(TAIL).load(Ordering::Relaxed);
    let head_seen = ring.word(HEAD).load(Ordering::Relaxed);
    Ok(ShmWriter { ring, tail, head_seen, acked_seen: AtomicU64::new(0), posted: 0, peer_pid: 0 })
}

/// Open a ring file's consuming end.
pub fn reader(path: &Path, capacity: usize) -> io::Result<ShmReader> {
    let ring = map(path, capacity, false)?;
    ring.word(READER_PID).store(std::process::id() as u64, Ordering::Relaxed);
    let head = ring.word(HEAD).load(Ordering::Relaxed);
    Ok(ShmReader { ring, head, head_published: head, tail_seen: head, pad_due: false, shares: 0, peer_pid: 0 })
}

/// Once both ends are open (the setup handshake is over), read the peers' pids for good;
/// false if either is missing (the pair then falls back to TCP).
pub fn settle(rx: &mut ShmReader, tx: &mut ShmWriter) -> bool {
    rx.peer_pid = rx.ring.word(WRITER_PID).load(Ordering::Acquire);
    tx.peer_pid = tx.ring.word(READER_PID).load(Ordering::Acquire);
    rx.peer_pid != 0 && tx.peer_pid != 0 && rx.peer_pid <= i32::MAX as u64 && tx.peer_pid <= i32::MAX as u64
}

/// Both ends of one ring in one anonymous mapping (no file: tests that use it run under
/// Miri, and the progress engine's tests drive frames through it in one process).
#[cfg(test)]
pub(crate) fn anon(capacity: usize) -> (ShmWriter, ShmReader) {
    let ring = Ring::new(MmapMut::map_anon(DATA + capacity).expect("an anonymous mapping"), capacity);
    let twin = Ring { base: ring.base, capacity, _map: std::sync::Arc::clone(&ring._map) };
    let me = std::process::id() as u64;
    (
        ShmWriter { ring, tail: 0, head_seen: 0, acked_seen: AtomicU64::new(0), posted: 0, peer_pid: me },
        ShmReader { ring: twin, head: 0, head_published: 0, tail_seen: 0, pad_due: false, shares: 0, peer_pid: me },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::share::SHARE_PIECE_BYTES;

    /// Ring index arithmetic: every split of the wrap point, and positions checked.
    #[test]
    fn ring_arithmetic_wraps_every_way() {
        let (mut w, mut r) = anon(MIN_RING_BYTES);
        let mut sent = 0u32;
        let mut got = 0u32;
        // Writes and reads of coprime lengths put the wrap at every offset.
        for step in 0..90usize {
            let n = 1 + (step * 37) % 600;
            let chunk: Vec<u8> = (0..n as u32).map(|i| (sent + i) as u8).collect();
            let wrote = w.try_write(&chunk).unwrap();
            sent += wrote as u32;
            let mut buf = vec![0u8; 1 + (step * 53) % 700];
            let read = r.try_read(&mut buf).unwrap();
            for (i, b) in buf[..read].iter().enumerate() {
                assert_eq!(*b, (got + i as u32) as u8, "byte {} after step {step}", got + i as u32);
            }
            got += read as u32;
        }
        assert!(sent > 4 * MIN_RING_BYTES as u32, "wrapped several times ({sent} bytes)");
        // A position the peer corrupted is refused.
        w.ring.word(TAIL).store(u64::MAX, Ordering::Release);
        assert!(r.try_read(&mut [0u8; 8]).is_err());
    }

    /// `peek` shows published bytes in place (copied out only), short when fewer are
    /// published, wrapped when they run round the end; `advance` moves past them and
    /// refuses to move past what is published.
    #[test]
    fn peek_shows_whole_runs_and_advance_checks_them() {
        let (mut w, mut r) = anon(MIN_RING_BYTES);
        assert_eq!(r.peek(8).unwrap(), Peek::Short);
        assert_eq!(w.try_write_parts(&[&[1, 2, 3], &[4, 5]], 0).unwrap(), 5);
        assert_eq!(r.peek(6).unwrap(), Peek::Short);
        let Peek::Bytes(b) = r.peek(5).unwrap() else { panic!("five bytes are published") };
        assert_eq!((b.len, b.head::<3>(), b.head::<6>()), (5, Some([1, 2, 3]), None));
        assert!(b.starts_with(&[1, 2, 3]) && b.starts_with(&[1, 2, 3, 4, 5]));
        assert!(!b.starts_with(&[1, 2, 4]) && !b.starts_with(&[1, 2, 3, 4, 5, 6]), "differs, or past the bytes");
        let mut tail = [0u8; 2];
        b.copy_to(3, &mut tail);
        assert_eq!(tail, [4, 5]);
        assert!(r.advance(6).is_err(), "past the published bytes");
        r.advance(5).unwrap();
        assert_eq!(r.peek(1).unwrap(), Peek::Short);
        // Fill to 3 bytes before the end: a 5-byte run there wraps, a 3-byte one does not.
        let pad = vec![9u8; MIN_RING_BYTES - 8];
        assert_eq!(w.try_write(&pad).unwrap(), pad.len());
        let Peek::Bytes(b) = r.peek(pad.len()).unwrap() else { panic!("published") };
        assert_eq!(b.len, pad.len());
        r.advance(pad.len()).unwrap();
        assert_eq!(w.try_write(&[7; 10]).unwrap(), 10);
        assert_eq!(r.peek(5).unwrap(), Peek::Wrapped);
        assert!(matches!(r.peek(3).unwrap(), Peek::Bytes(b) if b.head::<3>() == Some([7, 7, 7])));
        let mut all = [0u8; 10];
        assert_eq!(r.try_read(&mut all).unwrap(), 10);
        assert_eq!(all, [7; 10]);
        // A write position the peer corrupted (beyond the capacity) is refused.
        w.ring.word(TAIL).store(r.head + MIN_RING_BYTES as u64 + 1, Ordering::Release);
        assert!(r.peek(1).is_err());
    }

    /// A frame that fits in a line is padded to end on one and the consumer skips that
    /// padding before the next frame, only once it is published; a longer frame is not
    /// padded.
    #[test]
    fn small_frames_are_padded_to_a_line_and_the_reader_skips_the_padding() {
        assert_eq!(
            [(0, 1), (0, 56), (0, 64), (0, 65), (8, 56), (40, 60), (100, 64)].map(|(s, l)| frame_pad(s, l)),
            [63, 8, 0, 0, 0, 28, 28]
        );
        let (mut w, mut r) = anon(MIN_RING_BYTES);
        assert!(r.align().unwrap(), "position 0 is a frame start");
        // A frame written whole: its head compared a word at a time (here two words and a
        // remainder), the padding skipped.
        let head: [u8; 20] = std::array::from_fn(|i| i as u8);
        assert_eq!(w.frame_pad(22), 42);
        assert_eq!(w.try_write_frame(&head, &[9, 9], 42).unwrap(), 64);
        let Peek::Bytes(b) = r.peek(22).unwrap() else { panic!("published") };
        assert!(b.starts_with(&head));
        for i in [0, 9, 17, 19] {
            let mut other = head;
            other[i] ^= 1;
            assert!(!b.starts_with(&other), "byte {i} differs");
        }
        r.advance(22).unwrap();
        r.frame_read(22);
        assert!(r.align().unwrap());
        assert!(r.align().unwrap(), "aligned already: nothing more skipped");
        assert_eq!(r.head, 64);
        // A frame of `len` bytes written without its padding and read back whole: the
        // padding it is owed, and whether the reader is at the next frame's start.
        let frame = |w: &mut ShmWriter, r: &mut ShmReader, len: usize| {
            let pad = w.frame_pad(len);
            assert_eq!(w.try_write(&vec![7u8; len]).unwrap(), len);
            let mut got = vec![0u8; len];
            assert_eq!(r.try_read(&mut got).unwrap(), len);
            assert!(got.iter().all(|&b| b == 7));
            r.frame_read(len);
            (pad, r.align().unwrap())
        };
        // A 100-byte frame is not padded: the next one starts right after it.
        assert_eq!(frame(&mut w, &mut r, 100), (0, true));
        assert_eq!(r.head, 164);
        // A 57-byte frame from byte 164 is padded to byte 256; until the padding is
        // published the reader waits for it.
        assert_eq!(frame(&mut w, &mut r, 57), (35, false), "the padding is not published yet");
        assert_eq!(w.try_write_parts(&[], 35).unwrap(), 35);
        assert!(r.align().unwrap());
        assert_eq!(r.head, 256);
        // A frame that runs round the ring's end is written in two parts, padding last.
        let fill = vec![1u8; MIN_RING_BYTES - 256 - 10];
        assert_eq!(w.try_write(&fill).unwrap(), fill.len());
        let mut sink = vec![0u8; fill.len()];
        assert_eq!(r.try_read(&mut sink).unwrap(), fill.len());
        r.release();
        assert_eq!(w.frame_pad(16), 58, "from 10 bytes before the end to the line after it");
        assert_eq!(w.try_write_frame(&[3u8; 8], &[4u8; 8], 58).unwrap(), 74);
        assert_eq!(w.tail as usize % MIN_RING_BYTES, 64, "round the end");
        let mut got = [0u8; 16];
        assert_eq!(r.try_read(&mut got).unwrap(), 16);
        assert_eq!(got, [3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4]);
        r.frame_read(16);
        assert!(r.align().unwrap());
        assert_eq!(r.head as usize % MIN_RING_BYTES, 64);
    }

    /// The read position reaches the producer once an eighth of the ring has been read
    /// since it last did, or on `release` (which `progress::drive` calls before it waits),
    /// not with every read: until then the producer counts those bytes as in use.
    #[test]
    fn the_read_position_is_published_by_eighths_or_on_release() {
        let (mut w, mut r) = anon(MIN_RING_BYTES);
        let eighth = MIN_RING_BYTES / 8;
        assert_eq!(w.try_write(&vec![1u8; MIN_RING_BYTES]).unwrap(), MIN_RING_BYTES);
        let mut buf = vec![0u8; eighth];
        assert_eq!(r.try_read(&mut buf[..100]).unwrap(), 100);
        let Peek::Bytes(_) = r.peek(64).unwrap() else { panic!("published") };
        r.advance(64).unwrap();
        assert_eq!(r.ring.word(HEAD).load(Ordering::Acquire), 0, "164 bytes read: not yet published");
        assert_eq!(w.try_write(&[2u8; 10]).unwrap(), 0, "the producer sees a full ring");
        r.release();
        assert_eq!(r.ring.word(HEAD).load(Ordering::Acquire), 164);
        assert_eq!(w.try_write(&[2u8; 200]).unwrap(), 164);
        // An eighth read (by either way of reading) publishes by itself.
        assert_eq!(r.try_read(&mut buf[..eighth - 1]).unwrap(), eighth - 1);
        assert_eq!(r.ring.word(HEAD).load(Ordering::Acquire), 164);
        r.advance(1).unwrap();
        assert_eq!(r.ring.word(HEAD).load(Ordering::Acquire), 164 + eighth as u64);
        assert_eq!(r.try_read(&mut buf).unwrap(), eighth);
        assert_eq!(r.ring.word(HEAD).load(Ordering::Acquire), 164 + 2 * eighth as u64);
        // Nothing new read: releasing again publishes the same position.
        r.release();
        assert_eq!(r.ring.word(HEAD).load(Ordering::Acquire), 164 + 2 * eighth as u64);
    }

    fn ring(name: &str, capacity: usize) -> (ShmWriter, ShmReader) {
        let path = std::env::temp_dir().join(format!("railyard-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        create(&path, capacity).unwrap();
        let mut w = writer(&path, capacity).unwrap();
        let mut r = reader(&path, capacity).unwrap();
        assert!(settle(&mut r, &mut w));
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
                at += w.try_write(&data[at..(at + 3000).min(data.len())]).unwrap();
            }
        });
        let mut got = vec![0u8; expect.len()];
        let mut at = 0;
        while at < got.len() {
            at += r.try_read(&mut got[at..]).unwrap();
        }
        t.join().unwrap();
        assert_eq!(got, expect);
    }

    #[test]
    fn a_full_ring_takes_nothing_and_an_empty_one_gives_nothing() {
        let (mut w, mut r) = ring("full", 4096);
        assert_eq!(w.try_write(&[1u8; 5000]).unwrap(), 4096);
        assert_eq!(w.try_write(&[1u8; 10]).unwrap(), 0);
        let mut b = [0u8; 100];
        assert_eq!(r.try_read(&mut b).unwrap(), 100);
        // Fewer bytes than an eighth of the ring read: room once the reader releases them.
        assert_eq!(w.try_write(&[2u8; 300]).unwrap(), 0);
        r.release();
        assert_eq!(w.try_write(&[2u8; 300]).unwrap(), 100);
        let mut rest = vec![0u8; 8192];
        assert_eq!(r.try_read(&mut rest).unwrap(), 4096);
        assert_eq!(r.try_read(&mut rest).unwrap(), 0);
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
                    let span = crate::share::piece_span(len as u64, piece as u64);
                    let (at, end) = (span.start as usize, span.end as usize);
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

    #[test]
    fn positions_a_peer_corrupts_fail_the_call_instead_of_copying_outside() {
        let (mut w, mut r) = ring("corrupt", 4096);
        assert_eq!(w.try_write(&[7u8; 100]).unwrap(), 100);
        // The peer claims 5000 bytes are waiting in a 4096-byte ring.
        w.ring.word(TAIL).store(5000, Ordering::Release);
        let err = r.try_read(&mut [0u8; 8192]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        // A read position ahead of the write position, read when the writer needs more
        // room than it last saw free.
        r.ring.word(HEAD).store(1 << 40, Ordering::Release);
        assert_eq!(w.try_write(&[1u8; 4096]).unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn files_are_private_exclusive_and_swept_by_tag() {
        let dir = std::env::temp_dir().join(format!("railyard-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = pair_paths(&dir, 0xabc, 0, 1);
        create(&a, 4096).unwrap();
        assert_eq!(std::fs::metadata(&a).unwrap().mode() & 0o777, 0o600);
        // O_EXCL: an existing name is never reused.
        assert_eq!(create(&a, 4096).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        // A file others may read is refused.
        std::fs::write(&b, vec![0u8; DATA + 4096]).unwrap();
        std::fs::set_permissions(&b, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        assert_eq!(reader(&b, 4096).err().map(|e| e.kind()), Some(io::ErrorKind::PermissionDenied));
        let other = pair_paths(&dir, 0xdef, 0, 1).0;
        create(&other, 4096).unwrap();
        assert_eq!(remove_job_files(&dir, 0xabc), 2);
        assert!(!a.exists() && !b.exists() && other.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rings_shrink_so_a_job_stays_within_its_bound() {
        let four = 4 << 20;
        assert_eq!(ring_bytes_for(four, 2), four);
        assert_eq!(ring_bytes_for(four, 16), four);
        assert_eq!(ring_bytes_for(four, 64), 256 << 10);
        for ranks in [2usize, 3, 17, 64, 100, 4096] {
            let ring = ring_bytes_for(four, ranks);
            assert!(ring.is_power_of_two() && ring >= MIN_RING_BYTES, "{ranks}: {ring}");
            assert!(ring * ranks * (ranks - 1) <= MAX_JOB_RING_BYTES || ring == MIN_BOUNDED_RING_BYTES, "{ranks}");
        }
        assert_eq!(ring_bytes_for(4096, 2), 4096, "a smaller configured ring stays");
    }

    #[test]
    fn waits_and_aborts_are_seen_by_the_other_end() {
        let (mut w, r) = ring("status", 4096);
        assert_eq!(r.peer_status(), None);
        w.publish_status(Some(WaitStatus { call: 9, round: 3, on: 2 }));
        assert_eq!(r.peer_status(), Some(WaitStatus { call: 9, round: 3, on: 2 }));
        w.publish_status(None);
        assert_eq!(r.peer_status(), None);
        assert_eq!(r.peer_abort(), None);
        let long = "é".repeat(200);
        w.publish_abort(&long);
        let got = r.peer_abort().unwrap();
        assert!(got.len() <= ABORT_TEXT_BYTES && long.starts_with(&got) && !got.is_empty());
        // The first notice stays.
        w.publish_abort("second");
        assert_eq!(r.peer_abort().unwrap(), got);
        assert!(matches!(process_state(std::process::id() as u64), Some('R' | 'S')));
    }
}

//! The claiming protocol of a shared single-copy transfer (`shm.rs` keeps its five words
//! in the ring header; `cma.rs` moves the bytes): the receiver opens a transfer (where the
//! bytes are, where they go, how many), then it and the sender each claim the next piece
//! with an atomic and copy it, so neither waits on the other.
//!
//! The claim word packs the transfer's number (high 32 bits) with the next unclaimed
//! piece (low 32 bits). A helper claims with a compare-and-swap against the word it read
//! before reading the addresses: the swap succeeds only if nobody moved the word since,
//! and the receiver opens a new transfer (rewriting the addresses) only after moving it
//! (by claiming the last piece, or revoking), so a helper can never copy an old
//! transfer's piece to a new transfer's addresses. `revoke` moves the word past the end
//! so nothing more can be claimed, and reports how many pieces were claimed; once that
//! many are done, no copy into the buffer is in flight and the buffer may go back to its
//! owner.
//!
//! No I/O and no waiting here: the words are a trait, so `tests/share_loom.rs` runs this
//! very code under loom's exhaustive interleavings with loom's atomics.

use std::sync::atomic::{AtomicU64, Ordering};

/// A shared transfer of at least `SHARE_LARGE_BYTES` goes in pieces of this many bytes.
pub const SHARE_PIECE_BYTES: usize = 1 << 20;

/// The smallest piece: a shared transfer of two of them is the shortest that is shared.
pub const SHARE_MIN_PIECE_BYTES: usize = 64 << 10;

/// Transfers from this long on go in `SHARE_PIECE_BYTES` pieces.
pub const SHARE_LARGE_BYTES: u64 = 2 * SHARE_PIECE_BYTES as u64;

/// Shorter transfers go in smaller pieces, so the sender takes part in them at all:
/// (shorter than, piece bytes). A piece costs a system call and a claim, so longer
/// transfers take longer pieces. 2-rank broadcast: 128 KiB in 64 KiB pieces 6.5 µs
/// against 7.7 pulled whole; 512 KiB in 256 KiB pieces 18 µs against 35 pulled whole;
/// 2 MiB in 256 KiB pieces 116 µs against 98 in 1 MiB ones.
pub const SHARE_PIECES: [(u64, u64); 2] = [(512 << 10, SHARE_MIN_PIECE_BYTES as u64), (SHARE_LARGE_BYTES, 256 << 10)];

/// The piece size of a shared transfer of `len` bytes: both sides work it out from the
/// length on the board, so nothing more is published.
pub fn piece_bytes(len: u64) -> u64 {
    SHARE_PIECES.iter().find(|&&(below, _)| len < below).map_or(SHARE_PIECE_BYTES as u64, |&(_, size)| size)
}

/// Where piece `piece` of a shared transfer of `len` bytes lies: its offset and length
/// (the receiver's claims and the sender's alike).
pub fn piece_span(len: u64, piece: u64) -> std::ops::Range<u64> {
    let size = piece_bytes(len);
    let at = piece.saturating_mul(size).min(len);
    at..(at + size).min(len)
}

/// One shared 64-bit word (`AtomicU64` in a mapping; loom's in the model test).
pub trait Word {
    fn load(&self, order: Ordering) -> u64;
    fn store(&self, value: u64, order: Ordering);
    fn fetch_add(&self, value: u64, order: Ordering) -> u64;
    fn compare_exchange(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64>;
}

impl Word for AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    fn store(&self, value: u64, order: Ordering) {
        AtomicU64::store(self, value, order)
    }
    fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
        AtomicU64::fetch_add(self, value, order)
    }
    fn compare_exchange(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        AtomicU64::compare_exchange(self, current, new, success, failure)
    }
}

/// The board's five words.
pub struct Board<'a, W: Word> {
    /// Transfer number (high 32 bits) and next unclaimed piece (low 32 bits).
    pub next: &'a W,
    /// Pieces done, by either side.
    pub done: &'a W,
    pub src: &'a W,
    pub dst: &'a W,
    pub len: &'a W,
}

/// A transfer the receiver opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub number: u64,
    pub pieces: u64,
}

/// A piece a helper claimed: copy `len` bytes from `src` to `dst`, then `piece_done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimed {
    pub index: usize,
    pub src: u64,
    pub dst: u64,
    pub len: usize,
}

/// Transfers at most this long: 2^20 pieces, so a revoke (adding the pieces to a piece
/// index at most one past them) never carries into the transfer number's bits.
pub const MAX_SHARE_BYTES: u64 = (1 << 20) * SHARE_PIECE_BYTES as u64;

impl<W: Word> Board<'_, W> {
    /// Open transfer `number` (the receiver's count, wrapping at 32 bits) of `len` bytes.
    /// The previous transfer must be finished or revoked (its word moved past its pieces).
    pub fn open(&self, number: u64, src: u64, dst: u64, len: usize) -> Share {
        assert!(len as u64 <= MAX_SHARE_BYTES, "a shared transfer of {len} bytes");
        let number = number & 0xffff_ffff;
        self.done.store(0, Ordering::Relaxed);
        self.src.store(src, Ordering::Relaxed);
        self.dst.store(dst, Ordering::Relaxed);
        self.len.store(len as u64, Ordering::Relaxed);
        // Release: a helper that reads this word (Acquire) sees the addresses above.
        self.next.store(number << 32, Ordering::Release);
        Share { number, pieces: (len as u64).div_ceil(piece_bytes(len as u64)) }
    }

    /// The receiver claims the next piece of `share`: its index, or None when all are
    /// claimed (or the transfer was revoked).
    pub fn claim(&self, share: Share) -> Option<usize> {
        if self.next.load(Ordering::Relaxed) & 0xffff_ffff >= share.pieces {
            return None;
        }
        let next = self.next.fetch_add(1, Ordering::AcqRel);
        // Only the receiver opens transfers, so the number is ours; the piece may be past
        // the end if the other side claimed the last one meanwhile.
        let piece = next & 0xffff_ffff;
        (next >> 32 == share.number && piece < share.pieces).then_some(piece as usize)
    }

    /// The sender claims the next piece of whatever transfer is open, if any.
    pub fn help_claim(&self) -> Option<Claimed> {
        let next = self.next.load(Ordering::Acquire);
        let len = self.len.load(Ordering::Relaxed);
        let piece = next & 0xffff_ffff;
        if len > MAX_SHARE_BYTES || piece >= len.div_ceil(piece_bytes(len)) {
            return None;
        }
        let (src, dst) = (self.src.load(Ordering::Relaxed), self.dst.load(Ordering::Relaxed));
        // Claimed only if nobody moved the word since it was read: then the transfer the
        // addresses belong to is still open (see the module comment).
        self.next.compare_exchange(next, next + 1, Ordering::AcqRel, Ordering::Relaxed).ok()?;
        let span = piece_span(len, piece);
        let (at, n) = (span.start, span.end - span.start);
        Some(Claimed { index: piece as usize, src: src.wrapping_add(at), dst: dst.wrapping_add(at), len: n as usize })
    }

    /// A claimed piece is copied (or failed: either way nobody copies it any more).
    pub fn piece_done(&self) {
        self.done.fetch_add(1, Ordering::Release);
    }

    /// Pieces done so far.
    pub fn done_count(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }

    /// Whether every piece of `share` is done.
    pub fn finished(&self, share: Share) -> bool {
        self.done_count() >= share.pieces
    }

    /// Close `share` early: nothing more can be claimed. Returns how many pieces had been
    /// claimed; once `done_count()` reaches it, no copy into the buffer is in flight.
    pub fn revoke(&self, share: Share) -> u64 {
        let next = self.next.fetch_add(share.pieces, Ordering::AcqRel);
        (next & 0xffff_ffff).min(share.pieces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words() -> [AtomicU64; 5] {
        std::array::from_fn(|_| AtomicU64::new(0))
    }

    fn board(w: &[AtomicU64; 5]) -> Board<'_, AtomicU64> {
        Board { next: &w[0], done: &w[1], src: &w[2], dst: &w[3], len: &w[4] }
    }

    #[test]
    fn pieces_are_claimed_once_and_cover_the_transfer() {
        let w = words();
        let b = board(&w);
        let len = 3 * SHARE_PIECE_BYTES + 5;
        let s = b.open(1, 1000, 9000, len);
        assert_eq!(s.pieces, 4);
        assert_eq!(b.claim(s), Some(0));
        let h = b.help_claim().expect("a piece is left");
        assert_eq!(
            h,
            Claimed {
                index: 1,
                src: 1000 + SHARE_PIECE_BYTES as u64,
                dst: 9000 + SHARE_PIECE_BYTES as u64,
                len: SHARE_PIECE_BYTES
            }
        );
        assert_eq!(b.claim(s), Some(2));
        assert_eq!(b.help_claim().map(|c| (c.index, c.len)), Some((3, 5)));
        assert_eq!((b.claim(s), b.help_claim()), (None, None));
        for _ in 0..3 {
            b.piece_done();
        }
        assert!(!b.finished(s));
        b.piece_done();
        assert!(b.finished(s));
    }

    #[test]
    fn shorter_transfers_go_in_smaller_pieces() {
        let w = words();
        let b = board(&w);
        assert_eq!((piece_bytes(SHARE_LARGE_BYTES - 1), piece_bytes(SHARE_LARGE_BYTES)), (256 << 10, 1 << 20));
        assert_eq!((piece_bytes((512 << 10) - 1), piece_bytes(512 << 10)), (64 << 10, 256 << 10));
        assert_eq!(piece_bytes(0), 64 << 10);
        let len = SHARE_LARGE_BYTES as usize - 1;
        let s = b.open(3, 1000, 9000, len);
        assert_eq!(s.pieces, 8);
        assert_eq!(b.claim(s), Some(0));
        let h = b.help_claim().expect("a piece is left");
        assert_eq!((h.index, h.src, h.dst, h.len), (1, 1000 + (256 << 10), 9000 + (256 << 10), 256 << 10));
        assert_eq!((2..8).map(|_| b.claim(s)).collect::<Vec<_>>(), (2..8).map(Some).collect::<Vec<_>>());
        assert_eq!(piece_span(len as u64, 7), (7 << 18)..len as u64);
        // The last piece is 256 KiB less one byte.
        let w2 = words();
        let b2 = board(&w2);
        let s2 = b2.open(4, 0, 0, len);
        for _ in 0..7 {
            b2.claim(s2);
        }
        assert_eq!(b2.help_claim().map(|c| (c.index, c.len)), Some((7, (256 << 10) - 1)));
    }

    #[test]
    fn a_revoked_transfer_offers_nothing_and_counts_its_claims() {
        let w = words();
        let b = board(&w);
        let s = b.open(7, 0, 0, 5 * SHARE_PIECE_BYTES);
        assert_eq!(b.help_claim().map(|c| c.index), Some(0));
        assert_eq!(b.claim(s), Some(1));
        assert_eq!(b.revoke(s), 2);
        assert_eq!((b.claim(s), b.help_claim()), (None, None));
        // A transfer number wraps at 32 bits without touching the piece count.
        let s = b.open(u32::MAX as u64 + 3, 0, 0, SHARE_PIECE_BYTES);
        assert_eq!(s.number, 2);
        assert_eq!(b.claim(s), Some(0));
        // A length no transfer can have (a corrupt board) offers nothing.
        w[4].store(u64::MAX, Ordering::Relaxed);
        w[0].store(0, Ordering::Relaxed);
        assert_eq!(b.help_claim(), None);
    }
}

//! The shared-transfer claiming protocol (`share.rs`) under loom: every interleaving of
//! the receiver and the helping sender (and every order the memory model lets their
//! loads see), with loom's atomics in the board's words. The buffer is loom cells, so a
//! copy that is not ordered before the receiver's read of the buffer is a reported race:
//! that is the property "no piece lands after the transfer is finished or revoked".

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use railyard_runtime::share::{Board, Word, SHARE_PIECE_BYTES};
use std::sync::atomic::Ordering;

/// loom's atomic as a board word.
struct LoomWord(AtomicU64);

impl Word for LoomWord {
    fn load(&self, order: Ordering) -> u64 {
        self.0.load(order)
    }
    fn store(&self, value: u64, order: Ordering) {
        self.0.store(value, order)
    }
    fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
        self.0.fetch_add(value, order)
    }
    fn compare_exchange(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        self.0.compare_exchange(current, new, success, failure)
    }
}

/// The board's words and two destination buffers (transfer A writes buffer 0, B buffer 1),
/// one cell per piece; a piece's "copy" writes the transfer's number into its cell.
struct Shared {
    words: [LoomWord; 5],
    buffers: [[UnsafeCell<u64>; 2]; 2],
}

impl Shared {
    fn new() -> Arc<Shared> {
        Arc::new(Shared {
            words: std::array::from_fn(|_| LoomWord(AtomicU64::new(0))),
            buffers: std::array::from_fn(|_| std::array::from_fn(|_| UnsafeCell::new(0))),
        })
    }

    fn board(&self) -> Board<'_, LoomWord> {
        let w = &self.words;
        Board { next: &w[0], done: &w[1], src: &w[2], dst: &w[3], len: &w[4] }
    }

    /// Copy piece `index` of the transfer whose destination is buffer `dst`.
    fn copy(&self, dst: u64, index: usize, value: u64) {
        // SAFETY: loom's cell hands out a valid pointer and checks the access for races.
        self.buffers[dst as usize][index].with_mut(|p| unsafe { *p = value });
    }

    fn read(&self, dst: usize) -> [u64; 2] {
        // SAFETY: as in `copy`; loom reports a read racing a write.
        [0, 1].map(|i| self.buffers[dst][i].with(|p| unsafe { *p }))
    }
}

const TWO_PIECES: usize = 2 * SHARE_PIECE_BYTES;
/// A transfer of one (the smallest) piece.
const ONE_PIECE: usize = railyard_runtime::share::SHARE_MIN_PIECE_BYTES;

/// The helper loop of the sender: claim and copy whatever it can, `tries` times.
fn helper(shared: &Shared, tries: usize) {
    for _ in 0..tries {
        if let Some(c) = shared.board().help_claim() {
            // `dst` names the buffer; `src` carries the transfer's number (the data).
            shared.copy(
                c.dst - (c.index * SHARE_PIECE_BYTES) as u64,
                c.index,
                c.src - (c.index * SHARE_PIECE_BYTES) as u64,
            );
            shared.board().piece_done();
        }
        loom::thread::yield_now();
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Receiver and helper share a two-piece transfer: once finished, every piece holds the
/// data exactly once and every copy is ordered before the receiver reads.
#[test]
fn a_finished_transfer_has_every_piece_and_no_copy_in_flight() {
    model(|| {
        let shared = Shared::new();
        let s2 = Arc::clone(&shared);
        let share = shared.board().open(1, 7, 0, TWO_PIECES);
        let h = loom::thread::spawn(move || helper(&s2, 2));
        while let Some(piece) = shared.board().claim(share) {
            shared.copy(0, piece, 7);
            shared.board().piece_done();
        }
        while !shared.board().finished(share) {
            loom::thread::yield_now();
        }
        assert_eq!(shared.read(0), [7, 7]);
        h.join().unwrap();
    });
}

/// The receiver revokes at once and waits only for the pieces claimed before: after
/// that no copy into the buffer can happen (loom would report the race), and pieces
/// not claimed stay untouched.
#[test]
fn after_a_revoke_settles_nothing_writes_the_buffer() {
    model(|| {
        let shared = Shared::new();
        let s2 = Arc::clone(&shared);
        let share = shared.board().open(1, 7, 0, TWO_PIECES);
        let h = loom::thread::spawn(move || helper(&s2, 3));
        let claimed = shared.board().revoke(share);
        while shared.board().done_count() < claimed {
            loom::thread::yield_now();
        }
        let got = shared.read(0);
        assert!(got.iter().filter(|&&v| v == 7).count() as u64 == claimed, "{got:?} with {claimed} claimed");
        assert_eq!(shared.board().claim(share), None);
        h.join().unwrap();
    });
}

/// A helper that read transfer A's addresses never copies into transfer B's buffer with
/// A's data: the receiver finishes A alone, opens B (another buffer), and the helper's
/// claims land each in the buffer of the transfer they belong to.
#[test]
fn a_stale_helper_never_copies_into_the_next_transfer() {
    model(|| {
        let shared = Shared::new();
        let s2 = Arc::clone(&shared);
        let a = shared.board().open(1, 5, 0, ONE_PIECE);
        let h = loom::thread::spawn(move || helper(&s2, 2));
        while let Some(piece) = shared.board().claim(a) {
            shared.copy(0, piece, 5);
            shared.board().piece_done();
        }
        while !shared.board().finished(a) {
            loom::thread::yield_now();
        }
        assert_eq!(shared.read(0)[0], 5);
        let b = shared.board().open(2, 9, 1, ONE_PIECE);
        while let Some(piece) = shared.board().claim(b) {
            shared.copy(1, piece, 9);
            shared.board().piece_done();
        }
        while !shared.board().finished(b) {
            loom::thread::yield_now();
        }
        h.join().unwrap();
        // Buffer 0 holds only A's data, buffer 1 only B's: no helper mixed them.
        assert_eq!(shared.read(0), [5, 0]);
        assert_eq!(shared.read(1), [9, 0]);
    });
}

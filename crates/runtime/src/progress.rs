//! The progress engine: one round of a schedule, as queues of frames to send and frames
//! to receive on every lane, driven without blocking until all are done. Each pass over
//! the lanes moves whatever bytes can move; sends and receives of all peers advance
//! together, so two ranks that send each other more than a link buffers never deadlock,
//! and no helper thread is needed. With nothing to move, the engine waits in steps: spin,
//! then yield the core (at once when the machine's ranks outnumber its cores), then sleep or
//! `poll` the sockets. A round that makes no progress for the timeout fails, naming a
//! peer; a shared-memory peer whose process has gone fails it sooner.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::{Duration, Instant};

use railyard_schedule::{Dtype, Op};

use crate::cma::{self, DESCRIPTOR_BYTES};
use crate::error::CommError;
use crate::frame::{check, CallSig, Header, Kind, HEADER_BYTES, MAX_ABORT_BYTES, MAX_FRAME_BYTES};
use crate::lane_io::{LaneIo, Transport};
use crate::reduce::{reduce_into, RedOp};
use crate::share::{SHARE_MIN_PIECE_BYTES, SHARE_PIECE_BYTES};
use crate::shm::{Peek, Share, ShmReader, WaitStatus};
use crate::slip::{hold_back, Ended, Policy};

/// Received data is reduced into place in slices of this many bytes (a multiple of every
/// element size), while the slice is in cache.
pub const REDUCE_SLICE_BYTES: usize = 256 << 10;

/// A transfer is striped over a peer's TCP lanes only in stripes of at least this many bytes.
pub const STRIPE_MIN_BYTES: usize = 64 << 10;

/// Frames at least this long go to a shared-memory peer as single-copy descriptors when
/// the pair can (below it, the ring's two copies cost less than the extra handshake).
/// Open MPI's vader switches at its 4 KiB eager limit too; measured here with `perf
/// --np 2`, 2 KiB made 4–16 KiB all-gathers slower and 8 KiB made 4–8 KiB broadcasts slower.
pub const CMA_MIN_BYTES: usize = 4 << 10;

/// The same for a rank that only sends in the call (a broadcast's or a scatter's root):
/// its peer copies each frame out of the ring while it copies the next one in, so the two
/// copies overlap, and the ring beats a pull (a system call and an acknowledgement) up to
/// here. A 2-rank broadcast through the ring against pulls: 8 KiB 0.62 µs a call against
/// 2.18, 64 KiB 4.8 against 6.0, 128 KiB 10.0 against 9.2 (`docs/benchmarks.md`).
pub const ONE_WAY_CMA_MIN_BYTES: usize = 128 << 10;

/// Single-copy receives (plain copies) at least this long are shared with the sender:
/// it pushes pieces while this side pulls others (`shm.rs`), so a sender that only waits
/// (a broadcast's root) lends its core. Two 1 MiB pieces at least; shorter ones are one
/// pull (which also bounds each kernel copy of a plain pull to under 2 MiB). In an
/// exchange both sides are busy pulling, and sharing smaller transfers measured no
/// better.
pub const SHARE_MIN_BYTES: usize = 2 * SHARE_PIECE_BYTES;

/// The same for a rank that only receives in the call (a broadcast's non-root), whose
/// peer only sends and would otherwise wait: two of the smallest pieces
/// (`share::piece_bytes`). 2-rank broadcast: 128 KiB 6.5 µs shared against 7.7 pulled
/// whole, 512 KiB 19 against 30.
pub const ONE_WAY_SHARE_MIN_BYTES: usize = 2 * SHARE_MIN_PIECE_BYTES;

/// The frames of a transfer of `len` bytes of `elem`-byte elements over `lanes` lanes:
/// (lane, byte range), in the order each lane carries them. Sender and receiver compute
/// the same split. An empty transfer is one empty frame (its header still checks the call).
pub fn frames(len: usize, elem: usize, lanes: usize) -> impl Iterator<Item = (usize, Range<usize>)> {
    let elem = elem.max(1);
    let stripes = (len / STRIPE_MIN_BYTES).clamp(1, lanes.max(1));
    // One stripe (every shared-memory link, every small transfer) needs no division: this
    // runs twice per transfer on the small-message path.
    let elems = if stripes == 1 { 0 } else { len / elem };
    (0..stripes).flat_map(move |s| {
        // Balanced, element-aligned stripes; the last takes any partial element.
        let start = if s == 0 { 0 } else { (elems * s / stripes) * elem };
        let end = if s + 1 == stripes { len } else { (elems * (s + 1) / stripes) * elem };
        // At least one frame per stripe (an empty transfer is one empty frame).
        let pieces = (end - start).div_ceil(MAX_FRAME_BYTES).max(1);
        (0..pieces).map(move |i| (s, start + i * MAX_FRAME_BYTES..(start + (i + 1) * MAX_FRAME_BYTES).min(end)))
    })
}

struct Out {
    header: [u8; HEADER_BYTES],
    /// The bytes (a data frame) — or what a descriptor frame carries instead.
    payload: *const u8,
    len: usize,
    descriptor: Option<[u8; DESCRIPTOR_BYTES]>,
    /// Padding after the body (`LaneIo::frame_pad`), skipped rather than written.
    pad: usize,
    /// Bytes written so far, of header, body and padding.
    sent: usize,
}

struct In {
    expect: Header,
    dst: *mut u8,
    op: Op,
    header: [u8; HEADER_BYTES],
    header_got: usize,
    kind: Option<Kind>,
    descriptor: [u8; DESCRIPTOR_BYTES],
    descriptor_got: usize,
    /// Payload bytes already in place.
    done: usize,
    /// Bytes waiting in the lane's reduction buffer.
    fill: usize,
    /// A single-copy receive shared with the sender (`shm.rs`), once opened.
    share: Option<Share>,
    /// Single-copy receives from this long on are shared (`SHARE_MIN_BYTES`,
    /// `ONE_WAY_SHARE_MIN_BYTES`).
    share_min: usize,
    /// Taken whenever it arrives, but no round waits for it: only the call's end does
    /// (`queue_deferred_receive`).
    deferred: bool,
}

/// A peer: its transport and its lanes (one for shared memory, one per socket for TCP).
pub struct Link {
    pub transport: Transport,
    /// Whether large messages to and from this peer are pulled in one copy (`cma.rs`).
    pub cma: bool,
    pub lanes: Vec<Lane>,
}

/// One stream to a peer with its pending work.
pub struct Lane {
    pub io: LaneIo,
    out: VecDeque<Out>,
    incoming: VecDeque<In>,
    reduce_buf: Vec<u8>,
    /// Pieces queued this round each way (numbers on the wire, from 0 per round).
    out_pieces: u64,
    in_pieces: u64,
    /// A frame was cut off mid-way when the queues were cleared: the stream is no longer
    /// framed, so an abort notice cannot follow it (the socket is shut instead).
    torn: bool,
}

// SAFETY: the raw pointers in the queues are only set during one `Communicator` call,
// which borrows the buffers they point into; every way out of a call leaves the queues
// empty (a finished round drains them; on any error `Communicator::run_prepared` calls
// `clear_all`, and asserts `all_idle` in debug builds), so a Lane moved to another thread
// between calls holds no pointer.
unsafe impl Send for Lane {}

impl Lane {
    pub fn new(io: LaneIo) -> Lane {
        Lane {
            io,
            out: VecDeque::new(),
            incoming: VecDeque::new(),
            reduce_buf: Vec::new(),
            out_pieces: 0,
            in_pieces: 0,
            torn: false,
        }
    }

    /// Whether the lane has work a round waits for (`deferred`: deferred receives too).
    fn busy(&self, deferred: bool) -> bool {
        !self.out.is_empty()
            || self.incoming.iter().any(|f| deferred || !f.deferred)
            || matches!(&self.io, LaneIo::Shm { tx, .. } if !tx.all_acked())
    }

    /// Drop whatever a failed round left queued. A shared receive is revoked first, so
    /// the sender pushes nothing more into a buffer the caller gets back.
    fn clear(&mut self) {
        if let (Some(share), LaneIo::Shm { rx, .. }) = (self.incoming.front().and_then(|f| f.share), &self.io) {
            rx.share_revoke(share, SHARE_REVOKE_WAIT);
        }
        self.torn |= self.out.front().is_some_and(|f| f.sent > 0);
        self.out.clear();
        self.incoming.clear();
    }

    fn push_out(&mut self, peer: usize) -> Result<usize, CommError> {
        let mut progressed = 0;
        while let Some(f) = self.out.front_mut() {
            let body: &[u8] = match &f.descriptor {
                Some(d) => d,
                // SAFETY: the frame's bytes lie in a buffer `execute` keeps alive and
                // unwritten for the round.
                None if f.len > 0 => unsafe { std::slice::from_raw_parts(f.payload, f.len) },
                None => &[],
            };
            if f.sent == 0 {
                // The padding depends on where the frame starts: worked out as it starts.
                f.pad = self.io.frame_pad(HEADER_BYTES + body.len());
            }
            let (body_end, total) = (HEADER_BYTES + body.len(), HEADER_BYTES + body.len() + f.pad);
            let n = if f.sent < HEADER_BYTES {
                self.io.try_write(&[&f.header[f.sent..], body], f.pad)
            } else if f.sent < body_end {
                self.io.try_write(&[&body[f.sent - HEADER_BYTES..]], f.pad)
            } else {
                self.io.try_write(&[], total - f.sent)
            }
            .map_err(|e| CommError::io(peer, "send", e))?;
            if n == 0 {
                break;
            }
            f.sent += n;
            progressed += n;
            if f.sent == total {
                self.out.pop_front();
            }
        }
        Ok(progressed)
    }

    fn pull_in(&mut self, peer: usize, dtype: Dtype, op: RedOp) -> Result<usize, CommError> {
        let mut progressed = 0;
        let Lane { io, incoming, reduce_buf, .. } = self;
        let rx_err = |e| CommError::io(peer, "receive", e);
        while let Some(f) = incoming.front_mut() {
            if let (0, LaneIo::Shm { rx, .. }) = (f.header_got, &mut *io) {
                // A new frame on shared memory: first skip the padding of the last one, if
                // it had one (`shm::frame_pad`).
                if !rx.align().map_err(rx_err)? {
                    break;
                }
                // A small data frame that has arrived whole is taken from the ring in one
                // go: its header compared in place of decoding it, one position update.
                if takes_whole(rx, f.expect.len) {
                    match take_whole(rx, &f.expect, f.dst, f.op, reduce_buf, peer, Reduction { dtype, op })? {
                        Whole::Taken => {
                            progressed += HEADER_BYTES + f.expect.len as usize;
                            incoming.pop_front();
                            continue;
                        }
                        Whole::Short => break,
                        Whole::Declined => {}
                    }
                }
            }
            if f.header_got < HEADER_BYTES {
                if !fill(io, &mut f.header, &mut f.header_got, &mut progressed).map_err(rx_err)? {
                    break;
                }
                let h = Header::decode(&f.header, peer)?;
                if h.kind == Kind::Abort {
                    return Err(read_abort(io, h.len as usize, peer));
                }
                check(&h, &f.expect, peer)?;
                f.kind = Some(h.kind);
            }
            let len = f.expect.len as usize;
            // SAFETY: the destination lies in this round's output or scratch buffer, which
            // `execute` keeps alive and which no send of the round reads.
            let dst = unsafe { std::slice::from_raw_parts_mut(f.dst, len) };
            if f.kind == Some(Kind::Descriptor) {
                if !fill(io, &mut f.descriptor, &mut f.descriptor_got, &mut progressed).map_err(rx_err)? {
                    break;
                }
                let LaneIo::Shm { rx, .. } = io else {
                    return Err(CommError::BadFrame { peer, message: "a descriptor arrived over TCP".into() });
                };
                let (addr, described) = cma::decode(&f.descriptor);
                if described != f.expect.len {
                    return Err(CommError::BadFrame {
                        peer,
                        message: format!("a descriptor of {described} bytes for a frame of {len}"),
                    });
                }
                let pid = rx.peer_pid();
                let pull = |d: &mut [u8], at: usize| {
                    cma::pull(pid, addr + at as u64, d).map_err(|e| CommError::io(peer, "single-copy receive", e))
                };
                match f.op {
                    Op::Copy if len >= f.share_min => {
                        let share = *f.share.get_or_insert_with(|| rx.share(addr, dst.as_ptr() as u64, len));
                        while let Some(piece) = rx.share_claim(share) {
                            let span = crate::share::piece_span(len as u64, piece as u64);
                            let at = span.start as usize;
                            let d = &mut dst[at..span.end as usize];
                            let pulled = pull(d, at);
                            rx.share_piece_done();
                            pulled?;
                            progressed += d.len();
                        }
                        if !rx.share_finished(share) {
                            // The sender is still pushing its last pieces.
                            break;
                        }
                        rx.ack();
                        rx.frame_read(HEADER_BYTES + DESCRIPTOR_BYTES);
                        incoming.pop_front();
                        continue;
                    }
                    Op::Copy => pull(dst, 0)?,
                    Op::Reduce => {
                        ensure_len(reduce_buf, REDUCE_SLICE_BYTES);
                        for (i, d) in dst.chunks_mut(REDUCE_SLICE_BYTES).enumerate() {
                            let src = &mut reduce_buf[..d.len()];
                            pull(src, i * REDUCE_SLICE_BYTES)?;
                            reduce_into(dtype, op, d, src);
                        }
                    }
                }
                rx.ack();
                rx.frame_read(HEADER_BYTES + DESCRIPTOR_BYTES);
                progressed += len;
                incoming.pop_front();
                continue;
            }
            while f.done < len {
                let n = match f.op {
                    Op::Copy => {
                        let n = io.try_read(&mut dst[f.done..]).map_err(rx_err)?;
                        f.done += n;
                        n
                    }
                    Op::Reduce => {
                        ensure_len(reduce_buf, REDUCE_SLICE_BYTES);
                        let want = (len - f.done).min(REDUCE_SLICE_BYTES);
                        let n = io.try_read(&mut reduce_buf[f.fill..want]).map_err(rx_err)?;
                        f.fill += n;
                        if f.fill == want {
                            reduce_into(dtype, op, &mut dst[f.done..f.done + want], &reduce_buf[..want]);
                            f.done += want;
                            f.fill = 0;
                        }
                        n
                    }
                };
                if n == 0 {
                    break;
                }
                progressed += n;
            }
            if f.done < len {
                break;
            }
            io.frame_read(HEADER_BYTES + len);
            incoming.pop_front();
        }
        Ok(progressed)
    }
}

/// How `take_whole` left a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Whole {
    Taken,
    /// Not all there yet: wait.
    Short,
    /// Not a data frame like the one expected, or round the ring's end: read byte-wise.
    Declined,
}

/// Whether a frame of `len` payload bytes is taken whole from `rx` (`take_whole`): a
/// small one that fits the ring.
fn takes_whole(rx: &ShmReader, len: u64) -> bool {
    len as usize <= EAGER_MAX_BYTES && HEADER_BYTES + len as usize <= rx.capacity()
}

/// Receive `f` in one go if its whole frame (header and payload) is in the ring and is
/// the data frame `f` expects. Anything else (a descriptor, a mismatch, a frame round the
/// ring's end) is left in the ring for the byte-wise path, which reads and reports it. A
/// data frame no larger than the ring is always published whole in the end (the frames
/// before it leave room for it), so a short one is waited for.
///
/// The header is compared byte for byte with the expected one: the encoding is one to
/// one (every byte is a field), so equal bytes are a header that decodes and passes `check`
/// (`frame.rs` tests this), and any other goes the byte-wise way to be named. Everything
/// is copied out of the ring before use (`Published`): a reduction reads a private copy.
fn take_whole(
    rx: &mut ShmReader,
    expect: &Header,
    dst: *mut u8,
    action: Op,
    reduce_buf: &mut Vec<u8>,
    peer: usize,
    reduction: Reduction,
) -> Result<Whole, CommError> {
    let len = expect.len as usize;
    let rx_err = |e| CommError::io(peer, "receive", e);
    let want = expect.encode();
    let frame = match rx.peek(HEADER_BYTES + len).map_err(rx_err)? {
        Peek::Bytes(b) if b.starts_with(&want) => b,
        Peek::Bytes(_) | Peek::Wrapped => return Ok(Whole::Declined),
        // Wait for the rest only when what is there is the expected header (or less):
        // another frame (a descriptor's whole frame may be shorter) is read byte-wise.
        Peek::Short => {
            return Ok(match rx.peek(HEADER_BYTES).map_err(rx_err)? {
                Peek::Bytes(h) if !h.starts_with(&want) => Whole::Declined,
                Peek::Wrapped => Whole::Declined,
                Peek::Bytes(_) | Peek::Short => Whole::Short,
            })
        }
    };
    // SAFETY: the destination lies in this round's output or scratch buffer, `len` bytes
    // (the expected length), which `execute` keeps alive and no send of the round reads.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst, len) };
    match action {
        Op::Copy => frame.copy_to(HEADER_BYTES, dst),
        Op::Reduce => {
            ensure_len(reduce_buf, len);
            frame.copy_to(HEADER_BYTES, &mut reduce_buf[..len]);
            reduce_into(reduction.dtype, reduction.op, dst, &reduce_buf[..len]);
        }
    }
    rx.advance(HEADER_BYTES + len).map_err(rx_err)?;
    rx.frame_read(HEADER_BYTES + len);
    Ok(Whole::Taken)
}

/// The text of an abort notice whose header was just read (`len` bytes, arriving now:
/// the sender writes header and text together), as the peer's error.
fn read_abort(io: &mut LaneIo, len: usize, peer: usize) -> CommError {
    let mut text = vec![0u8; len.min(MAX_ABORT_BYTES)];
    let mut got = 0;
    let start = Instant::now();
    while got < text.len() && start.elapsed() < ABORT_READ_WAIT {
        match io.try_read(&mut text[got..]) {
            Ok(0) => std::thread::yield_now(),
            Ok(n) => got += n,
            Err(_) => break,
        }
    }
    CommError::Aborted { peer, message: String::from_utf8_lossy(&text[..got]).into_owned() }
}

/// How long the rest of an abort notice may take to arrive after its header.
const ABORT_READ_WAIT: Duration = Duration::from_millis(200);

/// The first abort notice any peer left (checked before blaming a stall on anyone).
pub(crate) fn any_abort(links: &mut [Option<Link>]) -> Option<CommError> {
    for (peer, link) in links.iter_mut().enumerate() {
        for lane in link.iter_mut().flat_map(|l| l.lanes.iter_mut()) {
            if let Some(e) = pending_abort(lane, peer) {
                return Some(e);
            }
        }
    }
    None
}

/// A peer's abort notice waiting on an idle lane (nothing expected from it): shared
/// memory leaves it in the ring header; over TCP, an abort frame at the head of the
/// stream (looked at without taking it, unless it is an abort).
fn pending_abort(lane: &mut Lane, peer: usize) -> Option<CommError> {
    match &mut lane.io {
        LaneIo::Shm { rx, .. } => rx.peer_abort().map(|message| CommError::Aborted { peer, message }),
        LaneIo::Tcp { rx, .. } => {
            if !lane.incoming.is_empty() {
                // The engine reads this lane; an abort there is found in `pull_in`.
                return None;
            }
            let mut head = [0u8; HEADER_BYTES];
            let buffered = rx.buffer();
            let seen = if buffered.is_empty() {
                rx.get_ref().peek(&mut head).unwrap_or(0)
            } else {
                let n = buffered.len().min(HEADER_BYTES);
                head[..n].copy_from_slice(&buffered[..n]);
                n
            };
            if seen < HEADER_BYTES {
                return None;
            }
            let h = Header::decode(&head, peer).ok().filter(|h| h.kind == Kind::Abort)?;
            let mut skip = [0u8; HEADER_BYTES];
            let mut got = 0;
            while got < HEADER_BYTES {
                match lane.io.try_read(&mut skip[got..]) {
                    Ok(n) => got += n,
                    Err(_) => return Some(CommError::Aborted { peer, message: String::new() }),
                }
            }
            Some(read_abort(&mut lane.io, h.len as usize, peer))
        }
    }
}

/// Tell every peer this communicator's first error, `text` (best effort, without
/// waiting long): shared-memory peers find it in the ring header; TCP peers get an abort
/// frame, or, where a frame was cut off mid-way, a closed connection.
pub fn abort_all(links: &mut [Option<Link>], text: &str) {
    let cut = text.len().min(MAX_ABORT_BYTES);
    let mut end = cut;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let body = &text.as_bytes()[..end];
    for link in links.iter_mut().flatten() {
        for lane in &mut link.lanes {
            match &mut lane.io {
                LaneIo::Shm { tx, .. } => tx.publish_abort(text),
                LaneIo::Tcp { tx, .. } if lane.torn => {
                    let _ = tx.shutdown(std::net::Shutdown::Both);
                }
                LaneIo::Tcp { .. } => {
                    let header = Header {
                        kind: Kind::Abort,
                        call: 0,
                        sig: CallSig::default(),
                        piece: 0,
                        len: body.len() as u64,
                    }
                    .encode();
                    let mut frame = header.to_vec();
                    frame.extend_from_slice(body);
                    let (mut sent, start) = (0, Instant::now());
                    while sent < frame.len() && start.elapsed() < ABORT_READ_WAIT {
                        match lane.io.try_write(&[&frame[sent..]], 0) {
                            Ok(0) => std::thread::yield_now(),
                            Ok(n) => sent += n,
                            Err(_) => break,
                        }
                    }
                    if sent < frame.len() {
                        if let LaneIo::Tcp { tx, .. } = &lane.io {
                            let _ = tx.shutdown(std::net::Shutdown::Both);
                        }
                    }
                }
            }
            lane.torn = true;
        }
    }
}

/// What this rank still waits for on `peer`'s lanes: "a receive of 8 B (piece 0)" or "a
/// send of 8 B the peer has not taken".
fn waiting_for(link: &Link) -> String {
    let mut what = Vec::new();
    for lane in &link.lanes {
        if let Some(f) = lane.incoming.front() {
            // A small frame is taken whole once it is all there, so "not whole yet" may
            // mean part of it has arrived.
            let got =
                if f.header_got < HEADER_BYTES { "not whole yet".to_string() } else { format!("{} B in", f.done) };
            what.push(format!("a receive of {} B (piece {}; {got})", f.expect.len, f.expect.piece));
        }
        if let Some(f) = lane.out.front() {
            let taken = f.sent.saturating_sub(HEADER_BYTES).min(f.len);
            what.push(format!("a send of {} B ({taken} B taken)", f.len));
        }
        if what.is_empty() {
            if let LaneIo::Shm { tx, .. } = &lane.io {
                if !tx.all_acked() {
                    what.push("the acknowledgement of a single-copy send".to_string());
                }
            }
        }
    }
    what.join(" and ")
}

/// Read into `buf[*got..]` what has arrived (counting it in `moved`); whether `buf` is full.
fn fill(io: &mut LaneIo, buf: &mut [u8], got: &mut usize, moved: &mut usize) -> std::io::Result<bool> {
    let n = io.try_read(&mut buf[*got..])?;
    *got += n;
    *moved += n;
    Ok(*got == buf.len())
}

fn ensure_len(buf: &mut Vec<u8>, len: usize) {
    if buf.len() < len {
        buf.resize(len, 0);
    }
}

/// What every frame of a call carries besides its piece and length.
#[derive(Clone, Copy)]
pub struct Call {
    /// The call number with this peer.
    pub number: u64,
    pub sig: CallSig,
}

/// Start a round on a link: piece numbers restart from 0.
pub fn begin_round(link: &mut Link) {
    for lane in &mut link.lanes {
        lane.out_pieces = 0;
        lane.in_pieces = 0;
    }
}

/// Frames of at most this many payload bytes go out as they are queued when nothing is
/// queued before them on their lane (a small call's frame then leaves before the rest of
/// the round is set up); larger ones wait for `kick` or `drive`, as before.
pub const EAGER_MAX_BYTES: usize = 16 << 10;

/// Queue `data` to go to the link's peer; a small frame with nothing ahead of it is
/// written at once, as far as the stream takes it. `one_way`: this rank only sends in the
/// call (`ONE_WAY_CMA_MIN_BYTES`). Whether anything was left queued (for `drive`).
pub fn queue_send(
    link: &mut Link,
    call: Call,
    data: &[u8],
    elem: usize,
    peer: usize,
    one_way: bool,
) -> Result<bool, CommError> {
    let lanes = link.lanes.len();
    // Frames this long or longer are pulled by the peer (single copy), when the link can.
    let cma_min = match (link.cma, one_way) {
        (false, _) => usize::MAX,
        (true, false) => CMA_MIN_BYTES,
        (true, true) => ONE_WAY_CMA_MIN_BYTES,
    };
    // One lane and one frame (every shared-memory link's small send): no split to work out.
    if lanes == 1 && data.len() <= MAX_FRAME_BYTES {
        return send_frame(&mut link.lanes[0], cma_min, call, data, peer);
    }
    let mut queued = false;
    for (lane, range) in frames(data.len(), elem, lanes) {
        queued |= send_frame(&mut link.lanes[lane], cma_min, call, &data[range], peer)?;
    }
    Ok(queued)
}

/// One frame of `queue_send` on lane `l`: written at once when small and nothing is
/// queued before it, else queued; pulled by the peer when at least `cma_min` bytes.
/// Whether it was queued.
fn send_frame(l: &mut Lane, cma_min: usize, call: Call, bytes: &[u8], peer: usize) -> Result<bool, CommError> {
    let single_copy = bytes.len() >= cma_min;
    let kind = if single_copy { Kind::Descriptor } else { Kind::Data };
    let header = Header { kind, call: call.number, sig: call.sig, piece: l.out_pieces, len: bytes.len() as u64 };
    l.out_pieces += 1;
    let header = header.encode();
    // The padding depends on where the frame starts: a queued frame's is worked out
    // when its first byte goes (`push_out`).
    let mut pad = 0;
    let mut sent = 0;
    if !single_copy && bytes.len() <= EAGER_MAX_BYTES && l.out.is_empty() {
        pad = l.io.frame_pad(HEADER_BYTES + bytes.len());
        sent = l.io.try_write_frame(&header, bytes, pad).map_err(|e| CommError::io(peer, "send", e))?;
        if sent == HEADER_BYTES + bytes.len() + pad {
            return Ok(false);
        }
    }
    let descriptor = single_copy.then(|| cma::encode(bytes.as_ptr() as u64, bytes.len() as u64));
    if let (true, LaneIo::Shm { tx, .. }) = (single_copy, &mut l.io) {
        tx.post();
    }
    l.out.push_back(Out { header, payload: bytes.as_ptr(), len: bytes.len(), descriptor, pad, sent });
    Ok(true)
}

/// A call's element type and reduction operator (what a receive that reduces needs).
#[derive(Debug, Clone, Copy)]
pub struct Reduction {
    pub dtype: Dtype,
    pub op: RedOp,
}

/// Queue a receive from the link's peer into `dst`, copied or reduced. A small frame that
/// is already whole in a shared-memory ring, with nothing queued before it on its lane,
/// is taken straight into place instead (`take_whole`): the repeated small call whose peer
/// is ahead never touches the queue. `one_way`: this rank only receives in the call
/// (`ONE_WAY_SHARE_MIN_BYTES`). Whether anything was left queued.
pub fn queue_receive(
    link: &mut Link,
    call: Call,
    dst: &mut [u8],
    op: Op,
    reduction: Reduction,
    peer: usize,
    one_way: bool,
) -> Result<bool, CommError> {
    let lanes = link.lanes.len();
    let share_min = if one_way { ONE_WAY_SHARE_MIN_BYTES } else { SHARE_MIN_BYTES };
    // One lane and one frame (every shared-memory link's small receive): no split.
    if lanes == 1 && dst.len() <= MAX_FRAME_BYTES {
        return receive_frame(&mut link.lanes[0], call, dst, op, reduction, peer, share_min);
    }
    let mut queued = false;
    let elem = reduction.dtype.size_bytes() as usize;
    for (lane, range) in frames(dst.len(), elem, lanes) {
        queued |= receive_frame(&mut link.lanes[lane], call, &mut dst[range], op, reduction, peer, share_min)?;
    }
    Ok(queued)
}

/// One frame of `queue_receive` on `lane`, into `dst`: taken at once when it is
/// already whole in the ring, else queued. Whether it was queued.
fn receive_frame(
    lane: &mut Lane,
    call: Call,
    dst: &mut [u8],
    op: Op,
    reduction: Reduction,
    peer: usize,
    share_min: usize,
) -> Result<bool, CommError> {
    let (at, len) = (dst.as_mut_ptr(), dst.len());
    let Lane { io, incoming, reduce_buf, in_pieces, .. } = lane;
    let expect = Header { kind: Kind::Data, call: call.number, sig: call.sig, piece: *in_pieces, len: len as u64 };
    *in_pieces += 1;
    if let (true, LaneIo::Shm { rx, .. }) = (incoming.is_empty(), &mut *io) {
        let rx_err = |e| CommError::io(peer, "receive", e);
        if takes_whole(rx, expect.len)
            && rx.align().map_err(rx_err)?
            && take_whole(rx, &expect, at, op, reduce_buf, peer, reduction)? == Whole::Taken
        {
            return Ok(false);
        }
    }
    incoming.push_back(In {
        expect,
        dst: at,
        op,
        header: [0; HEADER_BYTES],
        header_got: 0,
        kind: None,
        descriptor: [0; DESCRIPTOR_BYTES],
        descriptor_got: 0,
        done: 0,
        fill: 0,
        share: None,
        share_min,
        deferred: false,
    });
    Ok(true)
}

/// Queue an empty frame from the link's peer that no round waits for: it is checked
/// whenever it arrives (so a peer running another call is found at once) and only the
/// call's end waits for it (`Drive::deferred`). Taken at once when it is already there.
/// Whether it was left queued.
pub fn queue_deferred_receive(link: &mut Link, call: Call, peer: usize) -> Result<bool, CommError> {
    let lane = &mut link.lanes[0];
    let queued =
        receive_frame(lane, call, &mut [], Op::Copy, Reduction { dtype: Dtype::U8, op: RedOp::Sum }, peer, usize::MAX)?;
    if let Some(f) = lane.incoming.back_mut().filter(|_| queued) {
        f.deferred = true;
    }
    Ok(queued)
}

/// Whether any deferred receive is still queued.
pub(crate) fn deferred_pending(links: &[Option<Link>]) -> bool {
    links.iter().flatten().flat_map(|l| &l.lanes).any(|l| l.incoming.iter().any(|f| f.deferred))
}

/// How long to spin and yield before sleeping: `spins` busy polls, then yields until
/// either `yields` of them or `yield_for` has passed (the time bound matters where a yield
/// gives the core away for a whole time slice), then 50 µs sleeps or `poll`.
#[derive(Debug, Clone, Copy)]
pub struct Idle {
    pub spins: u32,
    pub yields: u32,
    pub yield_for: Duration,
}

impl Idle {
    /// With a core per rank, keep the core for as long as a large transfer takes (as Open
    /// MPI's and NCCL's progress loops do): a 50 µs sleep that overlaps a peer's
    /// acknowledgement adds up to a tenth of a 2-3 ms call, and the next call's first
    /// message waits on it. When ranks outnumber cores give the core away at once, and
    /// sleep soon, so the peer we wait for can run.
    pub fn for_machine(ranks_here: usize, cores: usize) -> Idle {
        if ranks_here <= cores {
            Idle { spins: 2000, yields: u32::MAX, yield_for: Duration::from_millis(20) }
        } else {
            Idle { spins: 0, yields: 4000, yield_for: Duration::from_millis(20) }
        }
    }
}

/// One pass that sends what the links to `peers` take now, without waiting (so peers can
/// start on a round while this rank does local work). Lanes with nothing queued (small
/// frames already went out as they were queued) are passed over.
pub fn kick(links: &mut [Option<Link>], peers: &[usize]) -> Result<(), CommError> {
    for &peer in peers {
        let Some(link) = links.get_mut(peer).and_then(Option::as_mut) else { continue };
        for lane in link.lanes.iter_mut().filter(|l| !l.out.is_empty()) {
            if let Err(e) = lane.push_out(peer) {
                clear_all(links);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// After a failed call, how long a revoked shared receive waits for the sender's
/// pushes in flight (one piece each, well under a millisecond) before the process aborts
/// rather than return a buffer a stopped sender could still write (`shm::share_revoke`).
const SHARE_REVOKE_WAIT: Duration = Duration::from_secs(10);

/// Shared-memory peers are checked for death every this many sleeps.
const LIVENESS_EVERY_SLEEPS: u32 = 64;
const LIVENESS_EVERY_YIELDS: u32 = 16384;
const SLEEP: Duration = Duration::from_micros(50);

/// How a round is driven: the call's element type and reduction, the waiting policy and
/// the timeout without progress.
#[derive(Debug, Clone, Copy)]
pub struct Drive {
    pub dtype: Dtype,
    pub op: RedOp,
    pub idle: Idle,
    pub timeout: Duration,
    /// The call's sequence number and the schedule round, published to shared-memory
    /// peers once a wait goes on (`shm::WaitStatus`), so a stall can be traced to the
    /// rank that does not move.
    pub call: u64,
    pub round: u32,
    /// Wait for the deferred receives too (the call's end).
    pub deferred: bool,
}

/// Whether no frame is queued on any link.
pub(crate) fn all_idle(links: &[Option<Link>]) -> bool {
    links.iter().flatten().flat_map(|l| &l.lanes).all(|l| l.out.is_empty() && l.incoming.is_empty())
}

/// Empty every queue (after an error: the communicator is broken and nothing queued may
/// be touched again).
pub(crate) fn clear_all(links: &mut [Option<Link>]) {
    for link in links.iter_mut().flatten() {
        link.lanes.iter_mut().for_each(Lane::clear);
    }
}

/// Drive every queued frame of every link to completion (including single-copy
/// acknowledgements); how many passes over the links found nothing to move (how long
/// the round waited, without reading a clock: `slip::Streak` uses it). On error the
/// queues are emptied and the error returned.
pub fn drive(links: &mut [Option<Link>], how: Drive) -> Result<u32, CommError> {
    let mut published = false;
    let result = drive_until_done(links, how, &mut published);
    // A failed wait stays published: peers diagnosing their own stall follow it here.
    if published && result.is_ok() {
        publish_wait(links, None);
    }
    if result.is_err() {
        clear_all(links);
    }
    result
}

/// Fall back behind the producer of every shared-memory lane with a receive queued
/// (`slip::hold_back`), the read position published first so it has room to get ahead.
/// All lanes together hold back at most `policy.max` and one look (a lane reached after
/// that is not looked at). Why each lane's slip ended, in lane order (TCP lanes have
/// none: a slip is about shared cache lines).
pub fn slip(links: &mut [Option<Link>], policy: &Policy) -> Result<Vec<Ended>, CommError> {
    let start = Instant::now();
    let mut ended = Vec::new();
    for (peer, link) in links.iter_mut().enumerate() {
        let Some(link) = link else { continue };
        for lane in link.lanes.iter_mut().filter(|l| !l.incoming.is_empty()) {
            if let LaneIo::Shm { rx, .. } = &mut lane.io {
                rx.release();
                let gap = policy.gap_for(rx.capacity());
                let e = hold_back(gap, policy, || rx.ahead(), std::hint::spin_loop, || start.elapsed())
                    .map_err(|e| CommError::io(peer, "receive", e))?;
                ended.push(e);
            }
        }
    }
    Ok(ended)
}

/// Publish this rank's wait (or its end) to every shared-memory peer.
fn publish_wait(links: &[Option<Link>], status: Option<WaitStatus>) {
    for lane in links.iter().flatten().flat_map(|l| &l.lanes) {
        if let LaneIo::Shm { tx, .. } = &lane.io {
            tx.publish_status(status);
        }
    }
}

/// Publish every shared-memory lane's read position.
fn release_all(links: &mut [Option<Link>]) {
    for lane in links.iter_mut().flatten().flat_map(|l| &mut l.lanes) {
        if let LaneIo::Shm { rx, .. } = &mut lane.io {
            rx.release();
        }
    }
}

/// The first peer with work pending (the one a wait is on).
fn first_busy(links: &[Option<Link>], deferred: bool) -> Option<usize> {
    links
        .iter()
        .enumerate()
        .find_map(|(peer, l)| l.as_ref().filter(|l| l.lanes.iter().any(|lane| lane.busy(deferred))).map(|_| peer))
}

fn drive_until_done(links: &mut [Option<Link>], how: Drive, published: &mut bool) -> Result<u32, CommError> {
    let Drive { dtype, op, idle, timeout, call, round, deferred } = how;
    let mut waits = 0u32;
    let mut empty = 0u32;
    let mut sleeps = 0u32;
    let mut since: Option<Instant> = None;
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        let mut moved = 0usize;
        let mut pending = false;
        for (peer, link) in links.iter_mut().enumerate() {
            let Some(link) = link else { continue };
            for lane in &mut link.lanes {
                if !lane.out.is_empty() {
                    moved += lane.push_out(peer)?;
                }
                if !lane.incoming.is_empty() {
                    moved += lane.pull_in(peer, dtype, op)?;
                }
                if let LaneIo::Shm { tx, .. } = &lane.io {
                    // Waiting for the peer to take a single-copy send: push pieces of it.
                    if !tx.all_acked() {
                        moved += tx.help().map_err(|e| CommError::io(peer, "single-copy send", e))?;
                    }
                }
                pending |= lane.busy(deferred);
            }
        }
        if !pending {
            return Ok(empty);
        }
        if moved > 0 {
            waits = 0;
            sleeps = 0;
            since = None;
            continue;
        }
        if waits == 0 {
            // About to wait: what this rank has read is published first (`ShmReader::release`).
            release_all(links);
        }
        waits = waits.saturating_add(1);
        empty = empty.saturating_add(1);
        if waits <= idle.spins {
            std::hint::spin_loop();
            continue;
        }
        let waited = since.get_or_insert_with(Instant::now).elapsed();
        if !*published {
            // Past the spins: say whom this rank waits for (off the fast path).
            let on = first_busy(links, deferred).unwrap_or(0);
            publish_wait(links, Some(WaitStatus { call, round, on }));
            *published = true;
        }
        if waited >= timeout {
            let peer = first_busy(links, deferred).unwrap_or(0);
            let waiting = links.get(peer).and_then(|l| l.as_ref()).map(waiting_for).unwrap_or_default();
            return Err(CommError::Stalled { peer, secs: timeout.as_secs(), waiting });
        }
        let yielding = waits - idle.spins <= idle.yields && waited < idle.yield_for;
        if !yielding {
            sleeps += 1;
        }
        // A dead shared-memory peer never moves its counters: look for its process every
        // so many yields or sleeps (a pid check is a syscall; not every pass).
        let check = if yielding {
            (waits - idle.spins).is_multiple_of(LIVENESS_EVERY_YIELDS)
        } else {
            sleeps.is_multiple_of(LIVENESS_EVERY_SLEEPS)
        };
        if check {
            if let Some(e) = any_abort(links) {
                return Err(e);
            }
            for (peer, link) in links.iter().enumerate() {
                if let Some(l) = link {
                    if l.lanes.iter().any(|lane| lane.busy(deferred) && lane.io.peer_gone()) {
                        return Err(CommError::Io {
                            peer,
                            what: "shared-memory transfer",
                            message: "the peer's process is gone".into(),
                        });
                    }
                }
            }
        }
        if yielding {
            std::thread::yield_now();
            continue;
        }
        // Only sockets pending: sleep in poll until one is ready (or 1 ms). Else a short sleep.
        fds.clear();
        let mut shm_pending = false;
        for link in links.iter().flatten() {
            for lane in link.lanes.iter().filter(|l| l.busy(deferred)) {
                match lane.io.fd() {
                    Some(fd) => {
                        let mut events = 0;
                        if !lane.out.is_empty() {
                            events |= libc::POLLOUT;
                        }
                        if !lane.incoming.is_empty() {
                            events |= libc::POLLIN;
                        }
                        fds.push(libc::pollfd { fd, events, revents: 0 });
                    }
                    None => shm_pending = true,
                }
            }
        }
        if shm_pending || fds.is_empty() {
            std::thread::sleep(SLEEP);
        } else {
            // SAFETY: `fds` is a live array of pollfd for sockets we own.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 1) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cover_the_transfer_in_element_aligned_stripes() {
        for (len, elem, lanes) in [(0, 4, 1), (0, 4, 3), (10, 2, 4), (1 << 20, 4, 4), (200_004, 4, 3), (3 << 16, 8, 2)]
        {
            let f: Vec<_> = frames(len, elem, lanes).collect();
            assert!(!f.is_empty());
            let mut at = 0;
            for (lane, r) in &f {
                assert_eq!(r.start, at, "contiguous");
                assert!(*lane < lanes);
                assert!(r.len() <= MAX_FRAME_BYTES);
                assert_eq!(r.start % elem, 0, "element aligned");
                at = r.end;
            }
            assert_eq!(at, len);
        }
        // Small transfers stay on one lane; 1 MiB over 4 lanes is four 256 KiB stripes.
        assert!(frames(STRIPE_MIN_BYTES * 2 - 1, 4, 4).all(|(l, _)| l == 0));
        let f: Vec<_> = frames(1 << 20, 4, 4).collect();
        assert_eq!(
            f.iter().map(|(l, r)| (*l, r.len())).collect::<Vec<_>>(),
            (0..4).map(|l| (l, 1 << 18)).collect::<Vec<_>>()
        );
        // Pieces no longer than a frame.
        assert_eq!(frames(MAX_FRAME_BYTES * 2 + 8, 8, 1).count(), 3);
    }

    proptest::proptest! {
        /// Any transfer: frames tile it exactly, in order, element-aligned, each on a lane
        /// that exists and no longer than a frame; stripes other than the last hold at
        /// least STRIPE_MIN_BYTES worth of elements.
        #[test]
        fn frames_tile_any_transfer(elems in 0usize..200_000, elem_pow in 0u32..4, lanes in 1usize..17) {
            let elem = 1usize << elem_pow;
            let len = elems * elem;
            let f: Vec<_> = frames(len, elem, lanes).collect();
            let mut at = 0;
            let mut last_lane = 0;
            for (lane, r) in &f {
                proptest::prop_assert_eq!(r.start, at);
                proptest::prop_assert!(*lane < lanes && *lane >= last_lane);
                proptest::prop_assert!(r.len() <= MAX_FRAME_BYTES && r.start % elem == 0);
                last_lane = *lane;
                at = r.end;
            }
            proptest::prop_assert_eq!(at, len);
            let used = f.iter().map(|(l, _)| l).max().map_or(0, |l| l + 1);
            proptest::prop_assert!(used <= (len / STRIPE_MIN_BYTES).max(1));
        }
    }

    #[test]
    fn ranks_that_outnumber_cores_never_spin() {
        assert_eq!(Idle::for_machine(4, 2).spins, 0);
        assert!(Idle::for_machine(2, 2).spins > 0);
        // Yielding is bounded in time either way, so a wait on a stalled peer sleeps and
        // checks its timeout however long one yield takes.
        for idle in [Idle::for_machine(4, 2), Idle::for_machine(2, 2)] {
            assert!(idle.yield_for <= Duration::from_millis(100));
        }
        assert!(Idle::for_machine(4, 2).yields < Idle::for_machine(2, 2).yields);
    }

    /// Two ranks' links to each other over one pair of rings (rank 0's is `links[1]`,
    /// rank 1's `links[0]`).
    fn shm_pair(capacity: usize) -> (Link, Link) {
        let ((w01, r01), (w10, r10)) = (crate::shm::anon(capacity), crate::shm::anon(capacity));
        let link =
            |rx, tx| Link { transport: Transport::Shm, cma: false, lanes: vec![Lane::new(LaneIo::Shm { rx, tx })] };
        (link(r10, w01), link(r01, w10))
    }

    /// Drive `link` (to `peer`) until nothing is queued on it; the link back.
    fn drive_one(link: Link, peer: usize) -> Result<Link, CommError> {
        let mut links: Vec<Option<Link>> = (0..2).map(|_| None).collect();
        links[peer] = Some(link);
        let idle = Idle { spins: 10, yields: 10, yield_for: Duration::from_millis(1) };
        let how = Drive {
            dtype: Dtype::U8,
            op: RedOp::Sum,
            idle,
            timeout: Duration::from_secs(5),
            call: 1,
            round: 0,
            deferred: false,
        };
        drive(&mut links, how)?;
        links[peer].take().ok_or_else(|| CommError::BadArgs { message: "the link went".into() })
    }

    const BYTES: Reduction = Reduction { dtype: Dtype::U8, op: RedOp::Sum };

    /// A rank that only sends keeps frames below `ONE_WAY_CMA_MIN_BYTES` in the ring (its
    /// peer copies one out while it copies the next in); in an exchange, frames from
    /// `CMA_MIN_BYTES` go single-copy (a descriptor frame, queued until pulled).
    #[test]
    fn a_rank_that_only_sends_keeps_mid_sized_frames_in_the_ring() {
        let (mut a, _b) = shm_pair(1 << 20);
        a.cma = true;
        let call = Call { number: 1, sig: CallSig::default() };
        begin_round(&mut a);
        let descriptor = |a: &Link| a.lanes[0].out.back().map(|o| o.descriptor.is_some());
        let mid = vec![3u8; 8 << 10];
        assert!(!queue_send(&mut a, call, &mid, 1, 1, true).unwrap(), "one way: written into the ring at once");
        assert_eq!(descriptor(&a), None);
        assert!(queue_send(&mut a, call, &mid, 1, 1, false).unwrap());
        assert_eq!(descriptor(&a), Some(true), "an exchange pulls it");
        let (mut a, _b) = shm_pair(1 << 20);
        a.cma = true;
        begin_round(&mut a);
        let below = vec![3u8; ONE_WAY_CMA_MIN_BYTES - 1];
        assert!(queue_send(&mut a, call, &below, 1, 1, true).unwrap(), "longer than eager: queued");
        assert_eq!(descriptor(&a), Some(false));
        let large = vec![3u8; ONE_WAY_CMA_MIN_BYTES];
        assert!(queue_send(&mut a, call, &large, 1, 1, true).unwrap());
        assert_eq!(descriptor(&a), Some(true), "one way from ONE_WAY_CMA_MIN_BYTES: pulled");
    }

    /// How the one shared-memory lane's slip ended. It cannot time out here unless the
    /// test thread is descheduled for 50 µs between the slip's start and its first look (a
    /// window of nanoseconds): later stalls end it as `Quiet` or `Gap` first.
    fn slipped(ended: Result<Vec<Ended>, CommError>) -> Ended {
        match ended.unwrap()[..] {
            [Ended::TimedOut] => panic!("descheduled for the whole slip: rerun"),
            [e] => e,
            ref other => panic!("one lane slips, not {other:?}"),
        }
    }

    /// A slip only looks at the producer's position and holds back for the ring's gap (a
    /// quarter of a 4 KiB ring): with a producer that writes nothing it gives up (`Quiet`),
    /// with one already that far ahead it returns at once (`Gap`); either way the receive
    /// it held back still lands, in order, from the untouched ring.
    #[test]
    fn a_slip_takes_nothing_and_holds_back_for_the_rings_gap() {
        let policy = crate::slip::POLICY;
        assert!(policy.max_call_bytes < CMA_MIN_BYTES as u64, "a slipping call's producer never waits for it");
        let (mut a, mut b) = shm_pair(crate::shm::MIN_RING_BYTES);
        let call = Call { number: 1, sig: CallSig::default() };
        begin_round(&mut a);
        begin_round(&mut b);
        let mut got = [0u8; 8];
        assert!(queue_receive(&mut b, call, &mut got, Op::Copy, BYTES, 0, false).unwrap(), "nothing there yet");
        let mut links: Vec<Option<Link>> = vec![Some(b), None];
        assert_eq!(slipped(slip(&mut links, &policy)), Ended::Quiet);
        // The frame, then 20 more 64-byte frames: 1344 bytes, past the 1 KiB gap.
        for byte in [7u8].into_iter().chain([9u8; 20]) {
            assert!(!queue_send(&mut a, call, &[byte; 8], 1, 1, false).unwrap());
        }
        let ahead = |links: &mut Vec<Option<Link>>| match &mut links[0].as_mut().unwrap().lanes[0].io {
            LaneIo::Shm { rx, .. } => rx.ahead().unwrap(),
            _ => unreachable!("a shared-memory pair"),
        };
        assert_eq!(ahead(&mut links), 21 * 64);
        assert_eq!(slipped(slip(&mut links, &policy)), Ended::Gap);
        assert_eq!(ahead(&mut links), 21 * 64, "the slip read nothing out of the ring");
        let b = links[0].take().unwrap();
        drive_one(b, 0).unwrap();
        assert_eq!(got, [7u8; 8]);
    }

    /// A slip publishes what this rank has read before it holds back, so a producer that
    /// filled the ring can get ahead.
    #[test]
    fn a_slip_gives_the_producer_the_room_already_read() {
        let (mut a, mut b) = shm_pair(crate::shm::MIN_RING_BYTES);
        let call = Call { number: 1, sig: CallSig::default() };
        begin_round(&mut a);
        begin_round(&mut b);
        // Seven frames read (448 bytes, under the eighth of the ring that publishes itself).
        for _ in 0..7 {
            assert!(!queue_send(&mut a, call, &[1u8; 8], 1, 1, false).unwrap());
            let mut got = [0u8; 8];
            assert!(!queue_receive(&mut b, call, &mut got, Op::Copy, BYTES, 0, false).unwrap());
        }
        let tx = |a: &mut Link| match &mut a.lanes[0].io {
            LaneIo::Shm { tx, .. } => tx.try_write(&[0u8; 4096]).unwrap(),
            _ => unreachable!("a shared-memory pair"),
        };
        // The producer fills the rest of the ring, as far as it knows.
        assert_eq!(tx(&mut a), 4096 - 448);
        assert_eq!(tx(&mut a), 0, "the read position is not published yet");
        let mut got = [0u8; 8];
        assert!(queue_receive(&mut b, call, &mut got, Op::Copy, BYTES, 0, false).unwrap());
        let mut links: Vec<Option<Link>> = vec![Some(b), None];
        assert_eq!(slipped(slip(&mut links, &crate::slip::POLICY)), Ended::Gap);
        assert_eq!(tx(&mut a), 448, "the slip published the 448 bytes read");
    }

    /// A small frame goes out as it is queued, and one already whole in the ring lands as
    /// its receive is queued: neither leaves anything for `drive`. A receive queued before
    /// its frame arrives is queued, and `drive` lands it, after the first frame's padding.
    #[test]
    fn small_frames_move_as_they_are_queued_and_only_late_ones_wait_for_drive() {
        let (mut a, mut b) = shm_pair(crate::shm::MIN_RING_BYTES);
        let sig = CallSig::default();
        let call = Call { number: 1, sig };
        let how = BYTES;
        begin_round(&mut a);
        begin_round(&mut b);
        let first: Vec<u8> = (1..=5).collect();
        assert!(!queue_send(&mut a, call, &first, 1, 1, false).unwrap(), "written at once");
        let mut got = [0u8; 5];
        assert!(!queue_receive(&mut b, call, &mut got, Op::Copy, how, 0, false).unwrap(), "taken at once");
        assert_eq!(got, [1, 2, 3, 4, 5]);
        // Received before it is sent: queued, then landed by `drive` (here reduced into place).
        let mut sum = [10u8; 70];
        assert!(queue_receive(&mut b, call, &mut sum, Op::Reduce, how, 0, false).unwrap());
        let second = [2u8; 70];
        assert!(!queue_send(&mut a, call, &second, 1, 1, false).unwrap());
        drive_one(b, 0).unwrap();
        assert_eq!(sum, [12u8; 70]);
    }

    /// Small frames queued behind one longer than the ring: each one's padding is worked
    /// out where it starts (when its first byte goes), and the reader keeps in step.
    #[test]
    fn small_frames_queued_behind_a_large_one_keep_the_reader_in_step() {
        for big in [4000usize, 4040, 5000, 6000, 6001, 8200] {
            let (mut a, mut b) = shm_pair(crate::shm::MIN_RING_BYTES);
            let call = Call { number: 1, sig: CallSig::default() };
            let large: Vec<u8> = (0..big).map(|i| i as u8).collect();
            let smalls: Vec<Vec<u8>> = (0..12).map(|k| vec![k as u8 + 1; k]).collect();
            let sender = std::thread::spawn(move || -> Result<(), CommError> {
                begin_round(&mut a);
                queue_send(&mut a, call, &large, 1, 1, false)?;
                for s in &smalls {
                    queue_send(&mut a, call, s, 1, 1, false)?;
                }
                drive_one(a, 1).map(|_| ())
            });
            begin_round(&mut b);
            let mut got_large = vec![0u8; big];
            let mut got: Vec<Vec<u8>> = (0..12).map(|k| vec![0u8; k]).collect();
            queue_receive(&mut b, call, &mut got_large, Op::Copy, BYTES, 0, false).unwrap();
            for g in got.iter_mut() {
                queue_receive(&mut b, call, g, Op::Copy, BYTES, 0, false).unwrap();
            }
            drive_one(b, 0).unwrap();
            sender.join().expect("sender thread").unwrap();
            assert!(got_large.iter().enumerate().all(|(i, &x)| x == i as u8), "{big}");
            for (k, g) in got.iter().enumerate() {
                assert!(g.iter().all(|&x| x == k as u8 + 1), "{big} bytes, then frame {k}");
            }
        }
    }

    /// 400 calls of 0–8 bytes through a one-page ring whose reader starts late: the ring
    /// fills, frames and paddings are published in pieces, every call gets its bytes.
    #[test]
    fn a_full_ring_of_small_frames_keeps_every_call_in_step() {
        let (mut a, mut b) = shm_pair(crate::shm::MIN_RING_BYTES);
        let calls = 400u64;
        let sender = std::thread::spawn(move || -> Result<(), CommError> {
            for c in 1..=calls {
                begin_round(&mut a);
                let data = vec![c as u8; (c % 9) as usize];
                if queue_send(&mut a, Call { number: c, sig: CallSig::default() }, &data, 1, 1, false)? {
                    a = drive_one(a, 1)?;
                }
            }
            Ok(())
        });
        std::thread::sleep(Duration::from_millis(50));
        for c in 1..=calls {
            begin_round(&mut b);
            let mut got = vec![0u8; (c % 9) as usize];
            let call = Call { number: c, sig: CallSig::default() };
            if queue_receive(&mut b, call, &mut got, Op::Copy, BYTES, 0, false).unwrap() {
                b = drive_one(b, 0).unwrap();
            }
            assert!(got.iter().all(|&x| x == c as u8), "call {c}");
        }
        sender.join().expect("sender thread").unwrap();
    }
}

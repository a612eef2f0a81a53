//! A schedule as one rank runs it, worked out once when the schedule is generated rather
//! than on every call: this rank's sends, receives and local steps per round as byte
//! spans checked against the buffer lengths every call validates (input and output from
//! the spec, scratch from the schedule), the peers it talks to, the in-place verdict and
//! whether round 0 may start before the prologue. A repeated small call then walks short
//! lists of ready byte ranges: no region arithmetic, no filtering of other ranks'
//! transfers, no bounds checks on the critical path.

use std::collections::HashMap;
use std::sync::Arc;

use railyard_schedule::{in_place_hazard, Buffer, CollectiveSpec, InPlaceLayout, LocalOp, Op, Region, Schedule};

use crate::error::CommError;
use crate::recorder::PeerBytes;

/// Byte lengths of a rank's three buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lens {
    pub input: usize,
    pub output: usize,
    pub scratch: usize,
}

impl Lens {
    fn of(&self, b: Buffer) -> usize {
        match b {
            Buffer::Input => self.input,
            Buffer::Output => self.output,
            Buffer::Scratch => self.scratch,
        }
    }

    /// A region as a byte span, which must lie inside its buffer (a schedule bug must not
    /// become a wild access).
    fn span(&self, r: &Region, elem: usize) -> Result<Span, CommError> {
        let bytes = |n: u64| usize::try_from(n).ok().and_then(|n| n.checked_mul(elem));
        let (start, len) = (bytes(r.offset), bytes(r.len));
        match (start, len) {
            (Some(start), Some(len)) if self.holds(r.buffer, start, len) => Ok(Span { buffer: r.buffer, start, len }),
            _ => Err(CommError::BadArgs {
                message: format!("a schedule region {:?} ends past its {}-byte buffer", r, self.of(r.buffer)),
            }),
        }
    }

    /// Whether bytes `start..start + len` lie inside buffer `b` (without overflow).
    fn holds(&self, b: Buffer, start: usize, len: usize) -> bool {
        len <= self.of(b) && start <= self.of(b) - len
    }
}

/// Bytes `start..start + len` of one of the rank's buffers, inside it (checked when made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub buffer: Buffer,
    pub start: usize,
    pub len: usize,
}

/// A copy or reduction between this rank's buffers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalStep {
    pub read: Span,
    pub write: Span,
    pub op: Op,
    /// Nothing reads the destination again in the call, so a copy may stream past the
    /// cache (`copy.rs`). A copy that a reduction or a send reads next (all-reduce's
    /// accumulator) stays cached.
    pub stream: bool,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct SendStep {
    pub to: usize,
    pub read: Span,
    /// A receive of the same round writes these bytes: they are copied out first. The
    /// symbolic checker proves no generator does this; a hand-made schedule may.
    pub clash: bool,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct ReceiveStep {
    pub from: usize,
    pub write: Span,
    pub op: Op,
    /// An agreement frame no round waits for, only the call's end (`agreement.rs`).
    pub deferred: bool,
}

/// This rank's part of one round, in schedule order.
#[derive(Debug, Clone, Default)]
pub(crate) struct RoundSteps {
    /// The peers of the round's sends and receives, each once: their piece numbers restart.
    pub peers: Vec<usize>,
    pub sends: Vec<SendStep>,
    pub receives: Vec<ReceiveStep>,
    /// Local steps once what the round received has landed.
    pub local: Vec<LocalStep>,
}

pub(crate) struct Prepared {
    pub lens: Lens,
    pub layout: InPlaceLayout,
    /// This rank can run it with input and output aliased (`in_place_hazard`).
    pub aliasable: bool,
    /// The peers this rank exchanges data with: a call advances their call numbers.
    pub peers: Vec<usize>,
    /// Bytes sent to and received from each of them (for the flight recorder).
    pub peer_bytes: Arc<[PeerBytes]>,
    /// Round 0's sends read nothing the prologue writes, so round 0 starts before it and
    /// the peers receive (or pull) while this rank copies. (In place, the input is only
    /// read in round 0 where the prologue copies it onto itself, which is skipped.)
    pub early: bool,
    /// This rank only receives in the call (sends nothing): the calls that may slip
    /// behind a streaming producer (`slip.rs`).
    pub receive_only: bool,
    /// The call's ranks wait for each other's agreement frames (`agreement.rs`): no
    /// producer can run calls ahead of this rank, so there is nothing to slip behind.
    pub lockstep: bool,
    /// Bytes this rank receives in the call.
    pub received_bytes: u64,
    /// This rank only sends in the call (receives nothing): its sends stay in the ring
    /// longer before single copy takes over (`progress::ONE_WAY_CMA_MIN_BYTES`).
    pub send_only: bool,
    pub prologue: Vec<LocalStep>,
    pub rounds: Vec<RoundSteps>,
    pub epilogue: Vec<LocalStep>,
}

impl Prepared {
    /// `schedule` may hold only this rank's part (`CompactSchedule::for_rank`).
    pub fn new(schedule: &Schedule, me: usize, elem: usize) -> Result<Prepared, CommError> {
        let lens = Lens {
            input: schedule.spec.input_len(me) as usize * elem,
            output: schedule.spec.output_len(me) as usize * elem,
            scratch: schedule.scratch_len[me] as usize * elem,
        };
        let mut talks = vec![false; schedule.spec.ranks];
        let mut bytes: HashMap<usize, (u64, u64)> = HashMap::new();
        let mut rounds = Vec::with_capacity(schedule.rounds.len());
        for round in &schedule.rounds {
            if !round.in_network.is_empty() {
                return Err(CommError::BadArgs {
                    message: "in-network steps need a reducing switch; the runtime cannot run them".into(),
                });
            }
            let mut steps = RoundSteps::default();
            let receives = round.transfers.iter().filter(|t| t.to == me);
            for t in round.transfers.iter().filter(|t| t.from == me) {
                let clash = receives.clone().any(|x| x.write.overlaps(&t.read));
                steps.sends.push(SendStep { to: t.to, read: lens.span(&t.read, elem)?, clash });
                talks[t.to] = true;
                bytes.entry(t.to).or_default().0 += t.read.len * elem as u64;
            }
            for t in receives {
                let write = writable_span(&lens, &t.write, elem)?;
                steps.receives.push(ReceiveStep { from: t.from, write, op: t.op, deferred: false });
                talks[t.from] = true;
                bytes.entry(t.from).or_default().1 += t.write.len * elem as u64;
            }
            for l in round.local.iter().filter(|l| l.rank == me) {
                steps.local.push(local_step(&lens, l, elem, false)?);
            }
            let mut peers: Vec<usize> =
                steps.sends.iter().map(|s| s.to).chain(steps.receives.iter().map(|r| r.from)).collect();
            peers.sort_unstable();
            peers.dedup();
            steps.peers = peers;
            rounds.push(steps);
        }
        // Decided on the data alone: the agreement's empty frames change no transport choice.
        let receive_only = rounds.iter().all(|r| r.sends.is_empty()) && rounds.iter().any(|r| !r.receives.is_empty());
        let send_only = rounds.iter().all(|r| r.receives.is_empty()) && rounds.iter().any(|r| !r.sends.is_empty());
        add_agreement(&mut rounds, &schedule.spec, me, &mut talks);
        // Agreement peers too (no bytes): the flight recorder lists whom the call waits on.
        for peer in (0..talks.len()).filter(|&p| talks[p]) {
            bytes.entry(peer).or_default();
        }
        // This rank's local ops, prologue then epilogue.
        let locals: Vec<&LocalOp> =
            schedule.prologue.iter().chain(&schedule.epilogue).filter(|l| l.rank == me).collect();
        let in_prologue = schedule.prologue.iter().filter(|l| l.rank == me).count();
        let early = schedule.rounds.first().is_some_and(|r| {
            r.transfers
                .iter()
                .filter(|t| t.from == me)
                .all(|t| !locals[..in_prologue].iter().any(|l| l.write.overlaps(&t.read)))
        });
        // Whether each local op's destination is read again later in the call.
        let read_later = |i: usize, w: &Region| {
            // A local op reads `w` when its source or (reducing) its destination overlaps it.
            let reads = |l: &LocalOp| l.read.overlaps(w) || (l.op == Op::Reduce && l.write.overlaps(w));
            let by_rounds = i < in_prologue
                && (schedule.rounds.iter().flat_map(|r| &r.transfers).any(|t| {
                    (t.from == me && t.read.overlaps(w)) || (t.to == me && t.op == Op::Reduce && t.write.overlaps(w))
                }) || schedule.rounds.iter().flat_map(|r| &r.local).any(|l| l.rank == me && reads(l)));
            by_rounds || locals[i + 1..].iter().any(|l| reads(l))
        };
        let mut steps = Vec::with_capacity(locals.len());
        for (i, l) in locals.iter().enumerate() {
            steps.push(local_step(&lens, l, elem, !read_later(i, &l.write))?);
        }
        let epilogue = steps.split_off(in_prologue);
        let mut peer_bytes: Vec<PeerBytes> = bytes
            .into_iter()
            .map(|(rank, (sent_bytes, received_bytes))| PeerBytes { rank, sent_bytes, received_bytes })
            .collect();
        peer_bytes.sort_by_key(|p| p.rank);
        let received_bytes = peer_bytes.iter().map(|p| p.received_bytes).sum();
        Ok(Prepared {
            lens,
            layout: schedule.spec.in_place_layout(me),
            aliasable: in_place_hazard(schedule, me).is_none(),
            peers: (0..talks.len()).filter(|&p| talks[p]).collect(),
            peer_bytes: peer_bytes.into(),
            early,
            receive_only,
            lockstep: crate::agreement::rounds(&schedule.spec) > 0
                && !crate::agreement::covered_by_data(&schedule.spec),
            received_bytes,
            send_only,
            prologue: steps,
            rounds,
            epilogue,
        })
    }
}

/// Merge the agreement's empty frames (`agreement.rs`) into this rank's first rounds:
/// in round k one to its dissemination partner and one from the other, unless the round
/// already carries data along that edge. Sends go first, so they leave before the round's
/// data; an empty frame reads and writes nothing. Where the data alone carries every rank
/// to every rank (`covered_by_data`), the one frame from r − 1 is there to find a mismatch
/// at once, not to order anything: no round waits for it, only the call's end.
fn add_agreement(rounds: &mut Vec<RoundSteps>, spec: &CollectiveSpec, me: usize, talks: &mut [bool]) {
    let agreement = crate::agreement::rounds(spec);
    let deferred = crate::agreement::covered_by_data(spec);
    if rounds.len() < agreement {
        rounds.resize_with(agreement, RoundSteps::default);
    }
    // Empty spans: an empty send reads nothing of the input, an empty receive writes
    // nothing of the output (so neither disturbs the early start or the in-place verdict).
    let (read_nothing, write_nothing) =
        (Span { buffer: Buffer::Input, start: 0, len: 0 }, Span { buffer: Buffer::Output, start: 0, len: 0 });
    for (k, steps) in rounds.iter_mut().enumerate().take(agreement) {
        let (to, from) = crate::agreement::partners(me, spec.ranks, k);
        if !steps.sends.iter().any(|s| s.to == to) {
            steps.sends.insert(0, SendStep { to, read: read_nothing, clash: false });
        }
        if !steps.receives.iter().any(|r| r.from == from) {
            steps.receives.push(ReceiveStep { from, write: write_nothing, op: Op::Copy, deferred });
        }
        for peer in [to, from] {
            talks[peer] = true;
            if let Err(at) = steps.peers.binary_search(&peer) {
                steps.peers.insert(at, peer);
            }
        }
    }
}

fn local_step(lens: &Lens, l: &LocalOp, elem: usize, stream: bool) -> Result<LocalStep, CommError> {
    let (read, write) = (lens.span(&l.read, elem)?, writable_span(lens, &l.write, elem)?);
    if read.len != write.len {
        return Err(CommError::BadArgs {
            message: format!("a schedule's local step reads {:?} into {:?}: different lengths", l.read, l.write),
        });
    }
    Ok(LocalStep { read, write, op: l.op, stream })
}

/// The input is never written (in place it is the caller's only copy): refused when
/// prepared, before any round runs, so `execute` writes only output and scratch.
fn writable_span(lens: &Lens, r: &Region, elem: usize) -> Result<Span, CommError> {
    match r.buffer {
        Buffer::Input => Err(CommError::BadArgs { message: "a schedule wrote to an input buffer".into() }),
        _ => lens.span(r, elem),
    }
}

/// A call's three buffers as raw bases. In place, input and output alias; the engine
/// holds sources and destinations of several transfers at once, so every access goes
/// through these.
#[derive(Clone, Copy)]
pub(crate) struct Bases {
    input: *mut u8,
    output: *mut u8,
    scratch: *mut u8,
    lens: Lens,
}

impl Bases {
    /// # Safety
    /// Each pointer must be valid for its buffer's length in `lens` for as long as the
    /// bases are used.
    pub unsafe fn new(input: *mut u8, output: *mut u8, scratch: *mut u8, lens: Lens) -> Bases {
        Bases { input, output, scratch, lens }
    }

    /// The first byte of `s`, which must lie inside its buffer (spans from the `Prepared`
    /// these bases were made for always do; checked all the same: a few compares).
    pub fn at(&self, s: &Span) -> *mut u8 {
        assert!(self.lens.holds(s.buffer, s.start, s.len), "a span {s:?} outside its buffer");
        let base = match s.buffer {
            Buffer::Input => self.input,
            Buffer::Output => self.output,
            Buffer::Scratch => self.scratch,
        };
        // SAFETY: `start + len` is within the buffer (asserted), whose pointer is valid for
        // its length (`Bases::new`'s contract).
        unsafe { base.add(s.start) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_schedule::{generate_compact, Algorithm, Collective, CollectiveSpec, GenOptions};

    /// A schedule that writes a rank's input — by a receive or by a local step — is refused
    /// when prepared, before any round runs.
    #[test]
    fn writes_to_the_input_are_refused_up_front() {
        use railyard_schedule::{ScheduleBuilder, Step, Transfer};
        let spec = CollectiveSpec::new(Collective::AllReduce, 2, 4);
        let input = Region::new(Buffer::Input, 0..4);
        let output = Region::new(Buffer::Output, 0..4);
        let receive = Transfer { from: 0, to: 1, read: input, write: input, op: Op::Copy, shard: None, channel: 0 };
        let local = LocalOp { rank: 1, read: output, write: input, op: Op::Copy };
        for (transfers, locals) in [(vec![receive], vec![]), (vec![], vec![local])] {
            let mut b = ScheduleBuilder::new(spec.clone(), "hand-made", 4);
            b.phase("bad", vec![Step { transfers, in_network: vec![], local: locals }]);
            let err = Prepared::new(&b.build().for_rank(1), 1, 4).err().expect("refused");
            assert!(err.to_string().contains("input buffer"), "{err}");
        }
    }

    /// A region past its buffer is refused when prepared, naming the buffer's length.
    #[test]
    fn regions_past_their_buffer_are_refused_up_front() {
        use railyard_schedule::{ScheduleBuilder, Step, Transfer};
        let spec = CollectiveSpec::new(Collective::AllReduce, 2, 4);
        let past = Region::new(Buffer::Output, 2..6);
        let send = Transfer {
            from: 0,
            to: 1,
            read: past,
            write: Region::new(Buffer::Output, 0..4),
            op: Op::Copy,
            shard: None,
            channel: 0,
        };
        let mut b = ScheduleBuilder::new(spec, "hand-made", 4);
        b.phase("bad", vec![Step { transfers: vec![send], in_network: vec![], local: vec![] }]);
        let err = Prepared::new(&b.build().for_rank(0), 0, 4).err().expect("refused");
        assert!(err.to_string().contains("ends past its 16-byte buffer"), "{err}");
    }

    /// A region whose byte offset overflows is refused, not wrapped into range; so is a
    /// local step between regions of different lengths. A span outside the bases panics.
    #[test]
    fn overflowing_regions_and_uneven_local_steps_are_refused() {
        let lens = Lens { input: 16, output: 16, scratch: 0 };
        let huge = Region { buffer: Buffer::Output, offset: u64::MAX / 2, len: 2 };
        assert!(lens.span(&huge, 4).is_err());
        assert!(lens.span(&Region::new(Buffer::Output, 0..4), 4).is_ok());
        assert!(lens.span(&Region::new(Buffer::Scratch, 0..1), 4).is_err());
        let uneven = LocalOp {
            rank: 0,
            read: Region::new(Buffer::Input, 0..2),
            write: Region::new(Buffer::Output, 0..4),
            op: Op::Copy,
        };
        let err = local_step(&lens, &uneven, 4, false).expect_err("refused");
        assert!(err.to_string().contains("different lengths"), "{err}");
        let mut buf = [0u8; 16];
        // SAFETY: every base points to 16 bytes (scratch: none are used).
        let bases = unsafe { Bases::new(buf.as_mut_ptr(), buf.as_mut_ptr(), buf.as_mut_ptr(), lens) };
        let inside = Span { buffer: Buffer::Output, start: 12, len: 4 };
        assert_eq!(bases.at(&inside) as usize, buf.as_ptr() as usize + 12);
        let outside = Span { buffer: Buffer::Output, start: 13, len: 4 };
        assert!(std::panic::catch_unwind(|| bases.at(&outside)).is_err());
    }

    fn prepared(c: Collective, a: Algorithm, ranks: usize, rank: usize) -> Prepared {
        let spec = CollectiveSpec::new(c, ranks, 1 << 20);
        let options = GenOptions { channels: 1, pipeline_chunks: 1, ..GenOptions::default() };
        let s = generate_compact(a, &spec, &options, 4).expect("generates");
        Prepared::new(&s.for_rank(rank), rank, 4).expect("prepares")
    }

    #[test]
    fn copies_stream_unless_the_call_reads_their_destination_again() {
        // All-gather copies its own chunk into the output and sends it from the input
        // (forwarded): nothing reads the copy again.
        for ranks in [2, 3, 4] {
            let p = prepared(Collective::AllGather, Algorithm::Ring, ranks, 1);
            let locals: Vec<_> = p.prologue.iter().chain(&p.epilogue).collect();
            assert!(!locals.is_empty() && locals.iter().all(|l| l.stream), "all-gather {ranks}");
        }
        // Ring all-reduce copies its input into the output and reduces into it.
        let p = prepared(Collective::AllReduce, Algorithm::Ring, 2, 0);
        assert!(!p.prologue.is_empty() && p.prologue.iter().all(|l| !l.stream), "{:?}", p.prologue);
    }

    /// Recursive doubling and the ring all-gather send round 0 from the input, which the
    /// prologue does not write (recursive doubling) or only copies into the output (the
    /// all-gather's own chunk): round 0 leaves before the prologue's copy on every rank.
    /// The ring all-gather's later rounds forward from the output.
    #[test]
    fn round_0_leaves_before_the_prologue_copy() {
        let cases = [
            (Collective::AllReduce, Algorithm::RecursiveDoubling, [2, 4, 8]),
            (Collective::AllGather, Algorithm::Ring, [2, 3, 4]),
        ];
        for (c, a, rank_counts) in cases {
            for ranks in rank_counts {
                for rank in 0..ranks {
                    let p = prepared(c, a, ranks, rank);
                    assert!(p.early && !p.prologue.is_empty(), "{a} {ranks} ranks, rank {rank}");
                    assert!(p.rounds[0].sends.iter().all(|s| s.read.buffer == Buffer::Input), "{a} {ranks} ranks");
                }
                if a == Algorithm::Ring {
                    let p = prepared(c, a, ranks, 0);
                    let mut later = p.rounds[1..].iter().flat_map(|r| &r.sends);
                    assert!(later.all(|s| s.read.buffer == Buffer::Output), "{ranks} ranks");
                }
            }
        }
    }

    /// The ranks that may slip behind a streaming producer (`slip.rs`) are those that only
    /// receive: a broadcast's non-roots fed straight by the root, a chain's last rank; not
    /// the root, a forwarding rank, nor any rank of an all-reduce.
    #[test]
    fn only_ranks_that_only_receive_are_receive_only() {
        let only = |c, a, ranks, rank| {
            let p = prepared(c, a, ranks, rank);
            (p.receive_only, p.received_bytes)
        };
        let sends_only = |c, a, ranks, rank| prepared(c, a, ranks, rank).send_only;
        assert!(sends_only(Collective::Broadcast, Algorithm::Direct, 2, 0));
        assert!(sends_only(Collective::Scatter, Algorithm::Direct, 3, 0));
        assert!(!sends_only(Collective::Broadcast, Algorithm::Chain, 3, 1));
        assert!(!sends_only(Collective::Broadcast, Algorithm::Direct, 2, 1));
        assert!(!sends_only(Collective::SendRecv, Algorithm::Direct, 3, 1));
        assert!(!sends_only(Collective::AllReduce, Algorithm::RecursiveDoubling, 2, 0));
        let full = 4u64 << 20;
        assert_eq!(only(Collective::Broadcast, Algorithm::Direct, 2, 1), (true, full));
        assert_eq!(only(Collective::Broadcast, Algorithm::Direct, 2, 0), (false, 0));
        assert_eq!(only(Collective::Broadcast, Algorithm::Chain, 3, 2), (true, full));
        assert_eq!(only(Collective::Broadcast, Algorithm::Chain, 3, 1), (false, full));
        for rank in 0..2 {
            assert_eq!(only(Collective::AllReduce, Algorithm::RecursiveDoubling, 2, rank), (false, full));
        }
        // A gather's root receives every other rank's chunk (all of them counted); a
        // send/recv's bystander neither sends nor receives, so it is not receive-only.
        let spec = CollectiveSpec::new(Collective::Gather, 3, 1 << 20);
        let chunks = (spec.input_len(1) + spec.input_len(2)) * 4;
        assert_eq!(only(Collective::Gather, Algorithm::Direct, 3, 0), (true, chunks));
        assert_eq!(only(Collective::SendRecv, Algorithm::Direct, 3, 1), (false, 0));
        assert_eq!(only(Collective::SendRecv, Algorithm::Direct, 3, 2), (true, full));
    }

    /// A ring all-reduce of 1 Mi f32 (4 MiB) on 4 ranks: rank 1 sends only to rank 2 and
    /// receives only from rank 0, a quarter (1 MiB) per round, 2 × 3 rounds.
    #[test]
    fn a_rings_steps_are_this_ranks_byte_spans() {
        let p = prepared(Collective::AllReduce, Algorithm::Ring, 4, 1);
        assert_eq!(p.rounds.len(), 6);
        assert_eq!(p.peers, vec![0, 2]);
        for r in &p.rounds {
            assert_eq!(r.peers, vec![0, 2]);
            assert!(r.sends.iter().all(|s| s.to == 2 && s.read.len == 1 << 20 && !s.clash), "{:?}", r.sends);
            assert!(r.receives.iter().all(|x| x.from == 0 && x.write.len == 1 << 20), "{:?}", r.receives);
        }
        let sent: u64 = p.peer_bytes.iter().map(|b| b.sent_bytes).sum();
        assert_eq!(sent, 6 << 20);
    }
}

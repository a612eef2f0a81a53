//! Deadlock freedom: whether every rank of a schedule finishes when each channel holds a
//! bounded number of messages in flight.
//!
//! Each rank runs a *program*: a sequence of posts, each a set of operations (send or
//! receive of one transfer, joining one in-network step) that the rank starts together
//! and must all finish before its next post. The runtime posts a round's operations
//! together ([`Programs::rounds`]); a blocking transport would post them one at a time
//! ([`Programs::one_by_one`]). A stream delivers in FIFO order — one per (from, to,
//! channel) as the IR promises, or one per (from, to) as the runtime carries all of a
//! peer pair's channels ([`Fifo`]): the k-th receive the receiver posts on it takes the
//! k-th message the sender sends on it, so both must list its transfers in the same order
//! (checked first). A stream holds at most `slots` messages sent and not yet received;
//! with 0 slots a send finishes only when its receive does (rendezvous: a message too
//! large for the buffer).
//!
//! For programs in step order (both built-in postings) freedom holds by construction:
//! the earliest unfinished step always has every rank it needs waiting on it. `check`
//! runs it anyway, as a guard on how programs are built; what it proves beyond that is
//! any other program order a transport might use.
//!
//! The check executes this abstractly. Every rule only ever enables more (a posted
//! message stays posted, a freed slot stays free), so one execution finishes exactly
//! when every execution does; if it stops short, every blocked rank waits on another
//! blocked rank and following the waits yields a cycle, which the error names.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::collective::Rank;
use crate::error::CheckError;
use crate::ir::Schedule;

/// One operation of a rank's program: the transfer or in-network step is named by its
/// round and its place in that round's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Send { round: usize, index: usize },
    Receive { round: usize, index: usize },
    InNetwork { round: usize, index: usize },
}

/// Every rank's program: `posts[rank]` is its posts in order, each a list of operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Programs {
    pub posts: Vec<Vec<Vec<Operation>>>,
}

impl Programs {
    /// What the runtime does: each rank posts all its operations of a round together
    /// (in step order) and finishes them before the next round.
    pub fn rounds(schedule: &Schedule) -> Self {
        let ranks = schedule.spec.ranks;
        let mut posts: Vec<Vec<Vec<Operation>>> = vec![Vec::new(); ranks];
        // The round each rank's last post is for: a post is opened at a rank's first
        // operation of a round, so the work is the operations', not rounds x ranks.
        let mut open = vec![usize::MAX; ranks];
        let mut add = |rank: Rank, round: usize, op: Operation| {
            let (Some(posts), Some(open)) = (posts.get_mut(rank), open.get_mut(rank)) else { return };
            if *open != round {
                *open = round;
                posts.push(Vec::new());
            }
            if let Some(post) = posts.last_mut() {
                post.push(op);
            }
        };
        for (round, r) in schedule.rounds.iter().enumerate() {
            for (index, t) in r.transfers.iter().enumerate().filter(|(_, t)| t.from != t.to) {
                add(t.from, round, Operation::Send { round, index });
                add(t.to, round, Operation::Receive { round, index });
            }
            for (index, n) in r.in_network.iter().enumerate() {
                for &rank in &n.ranks {
                    add(rank, round, Operation::InNetwork { round, index });
                }
            }
        }
        Programs { posts }
    }

    /// A blocking transport: one operation at a time, in step order (round, then place).
    pub fn one_by_one(schedule: &Schedule) -> Self {
        let rounds = Programs::rounds(schedule);
        Programs {
            posts: rounds.posts.into_iter().map(|p| p.into_iter().flatten().map(|o| vec![o]).collect()).collect(),
        }
    }
}

/// Which transfers share one FIFO stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fifo {
    /// One stream per (from, to, channel): the IR's promise.
    Channel,
    /// One stream per (from, to): the runtime's single ordered link per peer pair.
    PeerPair,
}

/// What the check saw, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlockReport {
    pub posts: usize,
    pub operations: usize,
    pub channels: usize,
}

fn fail(message: String) -> CheckError {
    CheckError { at: "deadlock check".to_string(), message }
}

/// A channel's messages: the transfers (round, index) in the sender's order.
struct Channel {
    from: Rank,
    to: Rank,
    channel: u32,
    messages: Vec<(usize, usize)>,
    sends_posted: usize,
    received: usize,
}

/// Where each operation sits, resolved once.
#[derive(Clone, Copy)]
enum Resolved {
    Send { channel: usize, seq: usize },
    Receive { channel: usize, seq: usize },
    InNetwork { step: usize },
}

/// Check that every rank finishes `programs` on `schedule` with `slots` messages per
/// stream, streams as `fifo` says: the operations wired to their streams and in-network
/// steps (the two ends of every stream must agree on its order), then run until no rank
/// can go on; a rank left blocked is on a cycle of waits, which the error names.
pub fn check_deadlock(
    schedule: &Schedule,
    programs: &Programs,
    slots: usize,
    fifo: Fifo,
) -> Result<DeadlockReport, CheckError> {
    let ranks = schedule.spec.ranks;
    if programs.posts.len() != ranks {
        return Err(fail(format!("{} programs for {ranks} ranks", programs.posts.len())));
    }
    let mut wiring = Wiring::new(schedule, programs, fifo)?;
    wiring.check_fifo()?;
    let mut run = Execution::new(&wiring);
    run.go(&mut wiring, slots);
    let blocked = |r: Rank| run.post[r] < wiring.resolved[r].len();
    match (0..ranks).find(|&r| blocked(r)) {
        None => Ok(DeadlockReport {
            posts: wiring.resolved.iter().map(Vec::len).sum(),
            operations: wiring.resolved.iter().flatten().map(Vec::len).sum(),
            channels: wiring.channels.len(),
        }),
        Some(start) => Err(run.cycle(&wiring, start, slots)),
    }
}

/// The programs' operations wired to what they act on: every stream (a channel) with
/// its messages in the sender's order and the receiver's, every in-network step with
/// the ranks that have joined it.
struct Wiring<'s> {
    schedule: &'s Schedule,
    fifo: Fifo,
    channels: Vec<Channel>,
    received_order: Vec<Vec<(usize, usize)>>,
    /// Per in-network step: its (round, index) and the ranks that have joined it.
    steps: Vec<(usize, usize)>,
    joined: Vec<Vec<Rank>>,
    /// Per rank, per post, its operations.
    resolved: Vec<Vec<Vec<Resolved>>>,
}

impl<'s> Wiring<'s> {
    fn new(schedule: &'s Schedule, programs: &Programs, fifo: Fifo) -> Result<Self, CheckError> {
        let mut w = Wiring {
            schedule,
            fifo,
            channels: Vec::new(),
            received_order: Vec::new(),
            steps: Vec::new(),
            joined: Vec::new(),
            resolved: Vec::with_capacity(programs.posts.len()),
        };
        let mut channel_of: HashMap<(Rank, Rank, u32), usize> = HashMap::new();
        let mut step_of: HashMap<(usize, usize), usize> = HashMap::new();
        for (rank, posts) in programs.posts.iter().enumerate() {
            let mut rank_posts = Vec::with_capacity(posts.len());
            for post in posts {
                let mut ops = Vec::with_capacity(post.len());
                for &op in post {
                    ops.push(w.resolve(rank, op, &mut channel_of, &mut step_of)?);
                }
                rank_posts.push(ops);
            }
            w.resolved.push(rank_posts);
        }
        Ok(w)
    }

    /// Where `op` of `rank` acts: its channel and place on it, or its in-network step.
    fn resolve(
        &mut self,
        rank: Rank,
        op: Operation,
        channel_of: &mut HashMap<(Rank, Rank, u32), usize>,
        step_of: &mut HashMap<(usize, usize), usize>,
    ) -> Result<Resolved, CheckError> {
        let (round, index) = match op {
            Operation::Send { round, index }
            | Operation::Receive { round, index }
            | Operation::InNetwork { round, index } => (round, index),
        };
        let r = self.schedule.rounds.get(round).ok_or_else(|| fail(format!("rank {rank}: no round {round}")))?;
        match op {
            Operation::Send { .. } | Operation::Receive { .. } => {
                let t =
                    r.transfers.get(index).ok_or_else(|| fail(format!("rank {rank}: {}", self.label(round, index))))?;
                let sends = matches!(op, Operation::Send { .. });
                if (sends && t.from != rank) || (!sends && t.to != rank) {
                    return Err(fail(format!("rank {rank} is not an end of {}", self.label(round, index))));
                }
                let key = (t.from, t.to, if self.fifo == Fifo::Channel { t.channel } else { 0 });
                let c = *channel_of.entry(key).or_insert_with(|| {
                    self.channels.push(Channel {
                        from: t.from,
                        to: t.to,
                        channel: key.2,
                        messages: Vec::new(),
                        sends_posted: 0,
                        received: 0,
                    });
                    self.received_order.push(Vec::new());
                    self.channels.len() - 1
                });
                Ok(if sends {
                    self.channels[c].messages.push((round, index));
                    Resolved::Send { channel: c, seq: self.channels[c].messages.len() - 1 }
                } else {
                    self.received_order[c].push((round, index));
                    Resolved::Receive { channel: c, seq: self.received_order[c].len() - 1 }
                })
            }
            Operation::InNetwork { .. } => {
                let n = r
                    .in_network
                    .get(index)
                    .ok_or_else(|| fail(format!("rank {rank}: no in-network step {index} in round {round}")))?;
                if !n.ranks.contains(&rank) {
                    return Err(fail(format!("rank {rank} does not join in-network step {index} of round {round}")));
                }
                let step = *step_of.entry((round, index)).or_insert_with(|| {
                    self.steps.push((round, index));
                    self.joined.push(Vec::new());
                    self.steps.len() - 1
                });
                Ok(Resolved::InNetwork { step })
            }
        }
    }

    fn label(&self, round: usize, index: usize) -> String {
        self.schedule.rounds.get(round).and_then(|r| r.transfers.get(index)).map_or_else(
            || format!("round {round} transfer {index} (no such transfer)"),
            |t| self.schedule.transfer_label(round, t),
        )
    }

    fn stream(&self, ch: &Channel) -> String {
        match self.fifo {
            Fifo::Channel => format!("channel {} from rank {} to rank {}", ch.channel, ch.from, ch.to),
            Fifo::PeerPair => format!("the stream from rank {} to rank {}", ch.from, ch.to),
        }
    }

    /// Every stream is FIFO: its sender and receiver post its messages in one order.
    fn check_fifo(&self) -> Result<(), CheckError> {
        for (c, ch) in self.channels.iter().enumerate() {
            let got = &self.received_order[c];
            if let Some(k) = (0..ch.messages.len().max(got.len())).find(|&k| ch.messages.get(k) != got.get(k)) {
                let name = |m: Option<&(usize, usize)>| m.map_or("nothing".to_string(), |&(r, i)| self.label(r, i));
                return Err(fail(format!(
                    "{} is FIFO, but message {k} is {} in the sender's order and {} in the receiver's",
                    self.stream(ch),
                    name(ch.messages.get(k)),
                    name(got.get(k))
                )));
            }
        }
        Ok(())
    }

    fn participants(&self, step: usize) -> usize {
        let (round, index) = self.steps[step];
        self.schedule.rounds[round].in_network[index].ranks.len()
    }
}

/// The programs run: each rank's current post, which of its operations are done, and the
/// ranks to look at again.
struct Execution {
    post: Vec<usize>,
    done: Vec<Vec<bool>>,
    queue: Vec<Rank>,
    queued: Vec<bool>,
}

impl Execution {
    fn new(w: &Wiring) -> Self {
        let ranks = w.resolved.len();
        Execution {
            post: vec![0; ranks],
            done: (0..ranks).map(|r| vec![false; w.resolved[r].first().map_or(0, Vec::len)]).collect(),
            queue: Vec::new(),
            queued: vec![false; ranks],
        }
    }

    fn wake(&mut self, rank: Rank) {
        if !std::mem::replace(&mut self.queued[rank], true) {
            self.queue.push(rank);
        }
    }

    /// Entering a post makes its sends visible and its in-network joins counted.
    fn enter(&mut self, w: &mut Wiring, rank: Rank, post: usize) {
        for i in 0..w.resolved[rank][post].len() {
            match w.resolved[rank][post][i] {
                Resolved::Send { channel, seq } => {
                    w.channels[channel].sends_posted = w.channels[channel].sends_posted.max(seq + 1);
                    self.wake(w.channels[channel].to);
                }
                Resolved::Receive { channel, .. } => self.wake(w.channels[channel].from),
                Resolved::InNetwork { step } => {
                    w.joined[step].push(rank);
                    let (round, index) = w.steps[step];
                    for &q in &w.schedule.rounds[round].in_network[index].ranks {
                        self.wake(q);
                    }
                }
            }
        }
    }

    /// Run until no rank can go on.
    fn go(&mut self, w: &mut Wiring, slots: usize) {
        for rank in 0..w.resolved.len() {
            if !w.resolved[rank].is_empty() {
                self.enter(w, rank, 0);
            }
            self.wake(rank);
        }
        while let Some(rank) = self.queue.pop() {
            self.queued[rank] = false;
            while self.post[rank] < w.resolved[rank].len() {
                let post = self.post[rank];
                let mut progress = true;
                while progress {
                    progress = false;
                    for i in 0..w.resolved[rank][post].len() {
                        if self.done[rank][i] {
                            continue;
                        }
                        let finished = match w.resolved[rank][post][i] {
                            Resolved::Send { channel, seq } => {
                                let ch = &w.channels[channel];
                                ch.received > seq || seq < ch.received + slots
                            }
                            Resolved::Receive { channel, seq } => {
                                let ch = &mut w.channels[channel];
                                let ready = ch.sends_posted > seq && ch.received == seq;
                                if ready {
                                    ch.received += 1;
                                    let from = ch.from;
                                    self.wake(from);
                                }
                                ready
                            }
                            Resolved::InNetwork { step } => w.joined[step].len() == w.participants(step),
                        };
                        if finished {
                            self.done[rank][i] = true;
                            progress = true;
                        }
                    }
                }
                if !self.done[rank].iter().all(|&d| d) {
                    break;
                }
                self.post[rank] += 1;
                let next = w.resolved[rank].get(self.post[rank]).map_or(0, Vec::len);
                self.done[rank] = vec![false; next];
                if self.post[rank] < w.resolved[rank].len() {
                    self.enter(w, rank, self.post[rank]);
                }
            }
        }
    }

    /// Follow the waits from blocked rank `start` until one repeats: that is the cycle. A
    /// blocked rank's wait is on one of its pending operations whose other end is blocked
    /// too (there is one: an operation waiting only on a finished rank would have finished).
    fn cycle(&self, w: &Wiring, start: Rank, slots: usize) -> CheckError {
        let blocked = |r: Rank| self.post[r] < w.resolved[r].len();
        let wait_on = |r: Rank, op: Resolved| -> (Rank, String) {
            match op {
                Resolved::Receive { channel, seq } => {
                    let ch = &w.channels[channel];
                    let (round, index) = ch.messages[seq.min(ch.messages.len().saturating_sub(1))];
                    (ch.from, format!("rank {r} waits to receive {} on {}", w.label(round, index), w.stream(ch)))
                }
                Resolved::Send { channel, seq } => {
                    let ch = &w.channels[channel];
                    let (round, index) = ch.messages[seq];
                    let why = if slots == 0 { "no buffering".to_string() } else { format!("all {slots} slots full") };
                    (ch.to, format!("rank {r} waits for rank {} to take {} ({why})", ch.to, w.label(round, index)))
                }
                Resolved::InNetwork { step } => {
                    let (round, index) = w.steps[step];
                    let missing = w.schedule.rounds[round].in_network[index]
                        .ranks
                        .iter()
                        .copied()
                        .find(|q| !w.joined[step].contains(q))
                        .unwrap_or(r);
                    let at = w.schedule.round_label(round);
                    (missing, format!("rank {r} waits for rank {missing} to join the in-network step of {at}"))
                }
            }
        };
        let wait_of = |r: Rank| -> (Rank, String) {
            let ops = &w.resolved[r][self.post[r]];
            let pending = ops.iter().zip(&self.done[r]).filter(|(_, &d)| !d).map(|(&op, _)| wait_on(r, op));
            let mut first = None;
            for (next, how) in pending {
                if blocked(next) && next != r {
                    return (next, how);
                }
                first.get_or_insert((next, how));
            }
            first.unwrap_or((r, format!("rank {r} waits on itself")))
        };
        let mut seen: Vec<Option<usize>> = vec![None; w.resolved.len()];
        let mut path: Vec<(Rank, String)> = Vec::new();
        let mut r = start;
        let cycle_start = loop {
            if let Some(at) = seen[r] {
                break at;
            }
            if !blocked(r) {
                let (last, how) = path.pop().unwrap_or((r, String::new()));
                return fail(format!("{how}, but rank {r} has finished (rank {last} can never go on)"));
            }
            seen[r] = Some(path.len());
            let (next, how) = wait_of(r);
            path.push((r, how));
            r = next;
        };
        let mut message = format!("deadlock with {slots} message slot(s) per channel: ");
        for (i, (_, how)) in path[cycle_start..].iter().enumerate() {
            if i > 0 {
                message.push_str(", ");
            }
            let _ = write!(message, "{how}");
        }
        let _ = write!(message, " — a cycle of {} ranks", path.len() - cycle_start);
        fail(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{generate, Algorithm, Collective, CollectiveSpec, GenOptions};

    fn ring(p: usize) -> Schedule {
        generate(
            Algorithm::Ring,
            &CollectiveSpec::new(Collective::AllReduce, p, 64 * p as u64),
            &GenOptions::default(),
            4,
        )
        .unwrap()
    }

    /// Each rank does its operations of a round one at a time, sends first (`true`, the
    /// naive "send to the next, then receive from the previous") or receives first.
    fn reordered(s: &Schedule, sends_first: bool) -> Programs {
        let mut programs = Programs::rounds(s);
        for posts in &mut programs.posts {
            *posts = posts
                .iter()
                .flat_map(|ops| {
                    let mut ops = ops.clone();
                    ops.sort_by_key(|o| matches!(o, Operation::Send { .. }) != sends_first);
                    ops.into_iter().map(|o| vec![o])
                })
                .collect();
        }
        programs
    }

    #[test]
    fn a_reordered_ring_deadlocks_and_the_cycle_is_named() {
        for p in 2..=9 {
            let s = ring(p);
            // Sends first: with no buffering every send waits for a receive that its
            // receiver posts only after its own send.
            let err = check_deadlock(&s, &reordered(&s, true), 0, Fifo::Channel).unwrap_err().to_string();
            assert!(err.contains(&format!("a cycle of {p} ranks")), "{err}");
            for r in 0..p {
                let next = (r + 1) % p;
                let wait = format!("rank {r} waits for rank {next} to take reduce-scatter step 1 of {}: rank {r} -> rank {next} (no buffering)", p - 1);
                assert!(err.contains(&wait), "{err}");
            }
            // One slot per channel lets every send finish first, so the same programs finish.
            let report = check_deadlock(&s, &reordered(&s, true), 1, Fifo::Channel).unwrap();
            assert_eq!(report.operations, 2 * p * 2 * (p - 1));
            // Receives first deadlock however much is buffered: nobody sends.
            let err = check_deadlock(&s, &reordered(&s, false), 64, Fifo::Channel).unwrap_err().to_string();
            assert!(
                err.contains("waits to receive reduce-scatter step 1")
                    && err.contains(&format!("a cycle of {p} ranks")),
                "{err}"
            );
        }
    }

    #[test]
    fn the_runtimes_posting_and_step_order_finish_without_buffering() {
        let s = ring(5);
        assert_eq!(check_deadlock(&s, &Programs::rounds(&s), 0, Fifo::Channel).unwrap().posts, 5 * 8);
        assert_eq!(check_deadlock(&s, &Programs::one_by_one(&s), 0, Fifo::Channel).unwrap().posts, 5 * 8 * 2);
    }

    #[test]
    fn receives_out_of_channel_order_break_fifo() {
        // Two messages on one channel in one round (a hierarchical reduce-scatter block
        // of two ranges); the receiver takes them in the opposite order.
        let spec = CollectiveSpec::new(Collective::ReduceScatter, 4, 64);
        let options = GenOptions { groups: vec![vec![0, 1], vec![2, 3]], ..GenOptions::default() };
        let s = generate(Algorithm::Hierarchical, &spec, &options, 4).unwrap();
        let mut programs = Programs::rounds(&s);
        let receiver = s.rounds[0].transfers[0].to;
        for ops in &mut programs.posts[receiver] {
            ops.reverse();
        }
        let err = check_deadlock(&s, &programs, 1, Fifo::Channel).unwrap_err().to_string();
        assert!(err.contains("is FIFO, but message 0"), "{err}");
    }

    /// Two channels to one peer: the IR orders each alone, the runtime's one stream per
    /// peer pair orders them together, so a receiver taking them the other way round
    /// passes the first and breaks the second.
    #[test]
    fn one_stream_per_peer_pair_orders_channels_together() {
        let spec = CollectiveSpec::new(Collective::AllReduce, 2, 64);
        let s = generate(Algorithm::Ring, &spec, &GenOptions { channels: 2, ..GenOptions::default() }, 4).unwrap();
        let mut programs = Programs::rounds(&s);
        for ops in &mut programs.posts[1] {
            let (mut receives, sends): (Vec<_>, Vec<_>) =
                ops.iter().partition(|o| matches!(o, Operation::Receive { .. }));
            receives.reverse();
            *ops = receives.into_iter().chain(sends).collect();
        }
        check_deadlock(&s, &programs, 0, Fifo::Channel).unwrap();
        let err = check_deadlock(&s, &programs, 0, Fifo::PeerPair).unwrap_err().to_string();
        assert!(err.contains("the stream from rank 0 to rank 1 is FIFO, but message 0"), "{err}");
    }

    #[test]
    fn an_in_network_step_waits_for_every_participant() {
        let spec = CollectiveSpec::new(Collective::AllReduce, 4, 64);
        let options = GenOptions { groups: vec![vec![0, 1], vec![2, 3]], ..GenOptions::default() };
        let s = generate(Algorithm::InNetwork, &spec, &options, 4).unwrap();
        check_deadlock(&s, &Programs::one_by_one(&s), 0, Fifo::Channel).unwrap();
        // Two in-network steps of ranks 0 and 1, joined in opposite orders.
        let mut b = crate::ScheduleBuilder::new(CollectiveSpec::new(Collective::AllReduce, 2, 8), "hand-made", 4);
        let half = |r: std::ops::Range<u64>| crate::Region::new(crate::Buffer::Output, r);
        let step = |r: std::ops::Range<u64>| crate::InNetwork {
            ranks: vec![0, 1],
            read: half(r.clone()),
            write: half(r),
            shard: None,
            flow: crate::Flow::All,
        };
        b.phase(
            "in-network",
            vec![crate::Step { transfers: Vec::new(), in_network: vec![step(0..4), step(4..8)], local: Vec::new() }],
        );
        let s = b.build();
        let (first, second) =
            (Operation::InNetwork { round: 0, index: 0 }, Operation::InNetwork { round: 0, index: 1 });
        let programs = Programs { posts: vec![vec![vec![first], vec![second]], vec![vec![second], vec![first]]] };
        let err = check_deadlock(&s, &programs, 4, Fifo::Channel).unwrap_err().to_string();
        assert!(err.contains("rank 0 waits for rank 1 to join the in-network step of in-network step 1 of 1"), "{err}");
        assert!(err.contains("a cycle of 2 ranks"), "{err}");
    }
}

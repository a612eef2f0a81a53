//! Temporal slipping: a consumer that keeps catching its producer up in a shared-memory
//! ring falls back behind it on purpose (FastForward, Giacomoni et al., PPoPP 2008).
//!
//! Why: when a rank only receives, call after call (the non-root ranks of a repeated small
//! broadcast), its producer runs calls ahead of it and neither ever waits, so the
//! consumer reads lines the producer wrote long before. But when the consumer has caught
//! up, it reads each frame's line as it is written and the lines ahead of it, the producer
//! then writes lines the consumer's core holds, and both slow down to the speed of those
//! lines crossing between cores: a state that lasts (8 B broadcast at N = 2 on the
//! development machine: 0.16–0.30 µs a call in it, 0.10–0.14 out of it, from one launch
//! of the same binary to the next). Slipping by a few pages gets out of it.
//!
//! The rule, kept apart from the ring and the clock so tests drive it: after
//! `after_waits` receive-only calls that each waited for their frame, and briefly
//! (`short_wait`: the producer was streaming, only just ahead; `Streak`), the next such
//! wait first holds back (`hold_back`) until the producer is `gap_bytes` ahead, has
//! written nothing for `quiet_checks` looks in a row, or `max` has passed. A call that
//! sends, or receives more than `max_call_bytes`, or waits long, ends the run: an exchange
//! (all-reduce, ping-pong) or a receiver waiting on a producer that computes between
//! calls never slips. What a slip costs a call is bounded by `max`.

use std::io;
use std::time::Duration;

/// When and how far a streaming consumer falls back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Receive-only calls in a row that waited briefly for their frame before one slips.
    pub after_waits: u32,
    /// A wait at most this long is one behind a streaming producer; a longer one ends
    /// the run.
    pub short_wait: Duration,
    /// How far ahead the producer should be when the consumer goes on: past the few
    /// lines a core's prefetchers read ahead of a sequential reader, so whole pages
    /// (at most a quarter of the ring, `gap_for`).
    pub gap_bytes: usize,
    /// Spin pauses between two looks at the producer's position (one look reads a line
    /// the producer writes, so not every pause).
    pub check_pauses: u32,
    /// Looks in a row that see no new byte before the slip gives up on the producer (it
    /// is not streaming). More than one: a producer writing lines this core holds can
    /// stall for a look's worth of time.
    pub quiet_checks: u32,
    /// The longest one slip holds back.
    pub max: Duration,
    /// Only calls that receive at most this many bytes slip: small frames are the ones
    /// whose lines cross one by one (a larger call's frames stream, and holding one back
    /// would only delay it).
    pub max_call_bytes: u64,
}

/// The policy the runtime uses (measured in `docs/benchmarks.md`).
pub const POLICY: Policy = Policy {
    after_waits: 8,
    short_wait: Duration::from_micros(5),
    gap_bytes: 16 << 10,
    check_pauses: 32,
    quiet_checks: 4,
    max: Duration::from_micros(50),
    max_call_bytes: 4 << 10,
};

impl Policy {
    /// Whether a call may slip: this rank only receives in it, and little.
    pub fn applies(&self, receive_only: bool, received_bytes: u64) -> bool {
        receive_only && received_bytes <= self.max_call_bytes
    }

    /// The gap to hold back for on a ring of `capacity` bytes: `gap_bytes`, at most a
    /// quarter of the ring (a producer must have room to get that far ahead).
    pub fn gap_for(&self, capacity: usize) -> usize {
        self.gap_bytes.min(capacity / 4)
    }
}

/// Counts receive-only calls that waited briefly since the last slip (or the last call
/// that could not slip, or waited long), and says when one should slip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Streak {
    waited: u32,
}

impl Streak {
    /// A call that may not slip (`Policy::applies`) ends the run.
    pub fn reset(&mut self) {
        self.waited = 0;
    }

    /// A receive-only round is about to wait (`waits`) or found everything there (not
    /// `waits`): whether to slip now. Rounds that did not wait leave the count as it is (a
    /// consumer close behind its producer finds some frames there and waits for others);
    /// a slip starts it again.
    pub fn observe(&mut self, waits: bool, policy: &Policy) -> bool {
        if waits && self.waited >= policy.after_waits {
            self.waited = 0;
            return true;
        }
        false
    }

    /// The round's wait took `wait`: a short one counts towards a slip, a long one ends
    /// the run.
    pub fn waited(&mut self, wait: Duration, policy: &Policy) {
        self.waited = if wait <= policy.short_wait { self.waited.saturating_add(1) } else { 0 };
    }
}

/// Why a slip ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The producer is the gap ahead.
    Gap,
    /// The producer wrote nothing for `quiet_checks` looks: it is not streaming.
    Quiet,
    /// `max` passed first.
    TimedOut,
}

/// Hold back while the producer gets `gap` bytes ahead: `ahead` reads how many bytes it
/// has published past the read position, `pause` is one spin pause, `elapsed` the time
/// since the slip began. Reads nothing else and takes nothing from the ring.
pub fn hold_back(
    gap: usize,
    policy: &Policy,
    mut ahead: impl FnMut() -> io::Result<usize>,
    mut pause: impl FnMut(),
    mut elapsed: impl FnMut() -> Duration,
) -> io::Result<Ended> {
    let mut seen = ahead()?;
    let mut quiet = 0;
    loop {
        if seen >= gap {
            return Ok(Ended::Gap);
        }
        for _ in 0..policy.check_pauses {
            pause();
        }
        let now = ahead()?;
        quiet = if now == seen { quiet + 1 } else { 0 };
        if quiet >= policy.quiet_checks {
            return Ok(Ended::Quiet);
        }
        if elapsed() >= policy.max {
            return Ok(Ended::TimedOut);
        }
        seen = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A producer that writes `bytes_per_pause` bytes a pause for `pauses_left` pauses
    /// (then stops), on a virtual clock of `ns_per_pause` a pause.
    fn run(gap: usize, start: usize, bytes_per_pause: usize, pauses_left: u64, ns_per_pause: u64) -> (Ended, u64) {
        let pauses = Cell::new(0u64);
        let ahead = || Ok(start + bytes_per_pause * pauses.get().min(pauses_left) as usize);
        let ended = hold_back(
            gap,
            &POLICY,
            ahead,
            || pauses.set(pauses.get() + 1),
            || Duration::from_nanos(pauses.get() * ns_per_pause),
        )
        .unwrap();
        (ended, pauses.get())
    }

    #[test]
    fn a_streaming_producer_is_let_get_the_gap_ahead() {
        // 64-byte frames, one every 7 pauses (about 0.1 µs): 16 KiB is 256 frames ahead.
        let (ended, pauses) = run(16 << 10, 64, 10, u64::MAX, 14);
        assert_eq!(ended, Ended::Gap);
        // Held back until the gap, and no check later than the one that saw it.
        let checks = pauses / POLICY.check_pauses as u64;
        assert_eq!(checks, ((16 << 10) - 64usize).div_ceil(10 * POLICY.check_pauses as usize) as u64);
    }

    #[test]
    fn a_producer_that_stops_costs_a_few_checks() {
        let check = POLICY.check_pauses as u64;
        let quiet = POLICY.quiet_checks as u64;
        // One frame published, nothing more: the consumer goes on after `quiet_checks`
        // looks (about 1.8 µs here).
        let (ended, pauses) = run(16 << 10, 0, 64, 0, 14);
        assert_eq!((ended, pauses), (Ended::Quiet, quiet * check));
        // Streaming for a while, then stopping: ends `quiet_checks` looks after the last
        // one that saw a change.
        let (ended, pauses) = run(16 << 10, 0, 8, 100, 14);
        assert_eq!(ended, Ended::Quiet);
        assert_eq!(pauses, 100u64.div_ceil(check) * check + quiet * check);
    }

    #[test]
    fn a_producer_that_stalls_for_fewer_looks_is_still_streaming() {
        // 64 bytes a look, but nothing for `quiet_checks - 1` looks out of every 10.
        let (looks, at) = (Cell::new(0u64), Cell::new(0usize));
        let ahead = || {
            let n = looks.get();
            looks.set(n + 1);
            if n % 10 >= POLICY.quiet_checks as u64 - 1 {
                at.set(at.get() + 64);
            }
            Ok(at.get())
        };
        let ended = hold_back(4096, &POLICY, ahead, || {}, || Duration::ZERO).unwrap();
        assert_eq!(ended, Ended::Gap);
    }

    #[test]
    fn a_slow_producer_is_waited_for_at_most_max() {
        // One byte a pause never makes 16 KiB within 50 µs of 14-ns pauses.
        let (ended, pauses) = run(16 << 10, 0, 1, u64::MAX, 14);
        assert_eq!(ended, Ended::TimedOut);
        let max_ns = POLICY.max.as_nanos() as u64;
        assert!(pauses * 14 >= max_ns && pauses * 14 < max_ns + 14 * POLICY.check_pauses as u64, "{pauses}");
    }

    #[test]
    fn a_producer_already_ahead_is_not_waited_for() {
        assert_eq!(run(4096, 4096, 0, 0, 14), (Ended::Gap, 0));
    }

    #[test]
    fn a_failed_look_ends_the_slip_with_its_error() {
        let e = hold_back(64, &POLICY, || Err(io::Error::other("corrupt")), || {}, || Duration::ZERO).unwrap_err();
        assert_eq!(e.to_string(), "corrupt");
    }

    /// Calls as `Communicator::execute` reports them: each waits (`observe`), slips if told,
    /// and otherwise says how long it waited. The indices of the calls that slipped.
    fn slips(waits: impl IntoIterator<Item = Option<Duration>>) -> Vec<usize> {
        let mut s = Streak::default();
        let mut at = Vec::new();
        for (i, wait) in waits.into_iter().enumerate() {
            if s.observe(wait.is_some(), &POLICY) {
                at.push(i);
            } else if let Some(w) = wait {
                s.waited(w, &POLICY);
            }
        }
        at
    }

    #[test]
    fn only_a_run_of_short_waits_slips_and_a_slip_starts_the_count_again() {
        let short = Some(Duration::from_nanos(300));
        // The 9th short wait in a row slips, then the 18th.
        assert_eq!(slips(vec![short; 20]), vec![8, 17]);
        // Calls that found their frame there do not count, nor end the run.
        let every_other: Vec<_> = (0..20).map(|i| if i % 2 == 0 { short } else { None }).collect();
        assert_eq!(slips(every_other), vec![16]);
        // A long wait (a producer computing between calls, not streaming) ends the run.
        let mut w = vec![short; 4];
        w.push(Some(Duration::from_micros(40)));
        w.extend(vec![short; 9]);
        assert_eq!(slips(w), vec![13]);
        // A call that may not slip (it sends) ends the run too.
        let mut s = Streak::default();
        for _ in 0..8 {
            assert!(!s.observe(true, &POLICY));
            s.waited(Duration::ZERO, &POLICY);
        }
        s.reset();
        assert!(!s.observe(true, &POLICY));
    }

    #[test]
    fn only_small_receive_only_calls_slip() {
        assert!(POLICY.applies(true, 8));
        assert!(POLICY.applies(true, 4096));
        assert!(!POLICY.applies(true, 4097));
        assert!(!POLICY.applies(false, 8));
    }

    #[test]
    fn the_gap_fits_small_rings() {
        assert_eq!(POLICY.gap_for(4 << 20), 16 << 10);
        assert_eq!(POLICY.gap_for(4096), 1024);
    }
}

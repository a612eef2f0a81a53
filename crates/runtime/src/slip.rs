//! Temporal slipping: a consumer that keeps catching its producer up in a shared-memory
//! ring falls back behind it on purpose (FastForward, Giacomoni et al., PPoPP 2008).
//!
//! Why: when a rank only receives, call after call (a repeated small point-to-point
//! receive; a broadcast's non-roots did before its ranks waited for each other's agreement,
//! `agreement.rs`, and such lockstep calls do not slip), its producer runs calls ahead of
//! it and neither ever waits, so the
//! consumer reads lines the producer wrote long before. But when the consumer has caught
//! up, it reads each frame's line as it is written and the lines ahead of it, the producer
//! then writes lines the consumer's core holds, and both slow down to the speed of those
//! lines crossing between cores: a state that lasts (8 B broadcast at N = 2 on the
//! development machine: 0.16–0.30 µs a call in it, 0.10–0.14 out of it, from one launch
//! of the same binary to the next). Slipping by a few pages gets out of it.
//!
//! The rule, kept apart from the ring and the clock so tests drive it (`Streak`,
//! `hold_back`): a round may slip when this rank only receives in the call, at most
//! `max_call_bytes` in all, with a core of its own. After `after_waits` such rounds that
//! each waited briefly for their frames (at most `short_polls` empty passes of the
//! progress engine: the producer was streaming, only just ahead), the next one that has to
//! wait first holds back until the producer is `gap_bytes` ahead, has written nothing for
//! `quiet_for`, or `max` has passed. A round that could not slip, or that waited long,
//! starts the count again: an exchange (all-reduce, ping-pong) never slips, nor does a
//! receiver whose producer computes between calls.
//!
//! What a slip can cost: one round (once per `after_waits` short waits) returns up to
//! `max` later than its frames arrived, when the producer keeps writing but too slowly to
//! get the gap ahead in time (a root that broadcasts a small value every 0.2–2 µs); about
//! `quiet_for` when the producer stops. The receiver then finds those frames there and
//! catches up, so a stream's throughput is its producer's either way, but a stream that
//! ends in a call the producer waits on (a reply, a barrier) can take up to `max` longer.
//! `RAILYARD_SLIP=0` turns it off.

use std::io;
use std::time::Duration;

/// When and how far a streaming consumer falls back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Rounds that waited briefly for their frames before one slips.
    pub after_waits: u32,
    /// A wait of at most this many empty passes of the progress engine (`progress::drive`)
    /// is one behind a streaming producer (a pass is a poll of the links and a spin pause:
    /// tens of nanoseconds); a longer one starts the count again. Counted in passes, so
    /// that no clock is read on the way out of a wait.
    pub short_polls: u32,
    /// How far ahead the producer should be when the consumer goes on: past the few
    /// lines a core's prefetchers read ahead of a sequential reader, so whole pages
    /// (at most a quarter of the ring, `gap_for`).
    pub gap_bytes: usize,
    /// Spin pauses between two looks at the producer's position (one look reads a line
    /// the producer writes, so not every pause).
    pub check_pauses: u32,
    /// A producer that writes nothing for this long is not streaming: the slip ends. More
    /// than one look's worth: a producer writing lines this core holds can stall briefly.
    pub quiet_for: Duration,
    /// The longest one slip holds back, all producers together.
    pub max: Duration,
    /// Only rounds of calls that receive at most this many bytes slip: small frames are
    /// the ones whose lines cross one by one (a larger call's frames stream, and holding
    /// one back would only delay it). Below the single-copy threshold
    /// (`progress::CMA_MIN_BYTES`), whose producer waits for the consumer's
    /// acknowledgement and so can never get ahead.
    pub max_call_bytes: u64,
}

/// The policy the runtime uses (measured in `docs/benchmarks.md`).
pub const POLICY: Policy = Policy {
    after_waits: 8,
    short_polls: 64,
    gap_bytes: 16 << 10,
    check_pauses: 32,
    quiet_for: Duration::from_micros(2),
    max: Duration::from_micros(50),
    max_call_bytes: 2 << 10,
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

/// Counts the rounds that may slip and waited briefly since the last slip (or the last
/// round that could not slip, or waited long), and says when one should slip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Streak {
    waited: u32,
}

impl Streak {
    /// A round starts: `may` is whether its call may slip (`Policy::applies`, switched on,
    /// the rank spinning on a core of its own), `waits` whether it has to wait for what it
    /// receives. Whether to slip before waiting. Rounds that did not wait leave the count
    /// as it is (a consumer close behind its producer finds some frames there and waits
    /// for others); one that may not slip ends the run, and a slip starts it again.
    pub fn before_round(&mut self, may: bool, waits: bool, policy: &Policy) -> bool {
        if !may {
            self.waited = 0;
            return false;
        }
        if waits && self.waited >= policy.after_waits {
            self.waited = 0;
            return true;
        }
        false
    }

    /// A round that may slip, and did not, waited `empty_polls` passes (`progress::drive`):
    /// a short wait counts towards a slip, a long one ends the run.
    pub fn after_wait(&mut self, empty_polls: u32, policy: &Policy) {
        self.waited = if empty_polls <= policy.short_polls { self.waited.saturating_add(1) } else { 0 };
    }
}

/// Why a slip ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The producer is the gap ahead.
    Gap,
    /// The producer wrote nothing for `quiet_for`: it is not streaming.
    Quiet,
    /// `max` passed first (counted from the start of the whole slip, so a slip over
    /// several producers ends the remaining ones at once).
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
    let mut last_change = elapsed();
    if last_change >= policy.max {
        return Ok(Ended::TimedOut);
    }
    let mut seen = ahead()?;
    loop {
        if seen >= gap {
            return Ok(Ended::Gap);
        }
        for _ in 0..policy.check_pauses {
            pause();
        }
        let now = ahead()?;
        let t = elapsed();
        if now != seen {
            (seen, last_change) = (now, t);
        } else if t.saturating_sub(last_change) >= policy.quiet_for {
            return Ok(Ended::Quiet);
        }
        if t >= policy.max {
            return Ok(Ended::TimedOut);
        }
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

    const CHECK: u64 = POLICY.check_pauses as u64;

    #[test]
    fn a_streaming_producer_is_let_get_the_gap_ahead() {
        // 64-byte frames, one every 7 pauses (about 0.1 µs): 16 KiB is 256 frames ahead.
        let (ended, pauses) = run(16 << 10, 64, 10, u64::MAX, 14);
        assert_eq!(ended, Ended::Gap);
        // Held back until the gap, and no check later than the one that saw it.
        assert_eq!(pauses / CHECK, ((16 << 10) - 64u64).div_ceil(10 * CHECK));
    }

    #[test]
    fn a_producer_that_stops_costs_quiet_for() {
        // The first look at or past `quiet_for` after the last change ends it, whatever a
        // pause costs: 14 ns (this machine) or 140 ns (a slower pause).
        for ns in [14u64, 140] {
            let quiet_looks = (POLICY.quiet_for.as_nanos() as u64).div_ceil(CHECK * ns);
            // One frame published, nothing more.
            let (ended, pauses) = run(16 << 10, 0, 64, 0, ns);
            assert_eq!((ended, pauses), (Ended::Quiet, quiet_looks * CHECK), "{ns} ns a pause");
            // Streaming for a while, then stopping.
            let (ended, pauses) = run(16 << 10, 0, 8, 100, ns);
            assert_eq!(ended, Ended::Quiet);
            assert_eq!(pauses, 100u64.div_ceil(CHECK) * CHECK + quiet_looks * CHECK, "{ns} ns a pause");
        }
    }

    #[test]
    fn a_producer_that_stalls_for_less_than_quiet_for_is_still_streaming() {
        // 64 bytes a look (32 pauses of 14 ns, 0.45 µs), except for 3 looks (1.3 µs) out
        // of every 10.
        let (looks, at) = (Cell::new(0u64), Cell::new(0usize));
        let ahead = || {
            let n = looks.get();
            looks.set(n + 1);
            if n % 10 >= 3 {
                at.set(at.get() + 64);
            }
            Ok(at.get())
        };
        let now = || Duration::from_nanos(looks.get() * CHECK * 14);
        let ended = hold_back(4096, &POLICY, ahead, || {}, now).unwrap();
        assert_eq!(ended, Ended::Gap);
    }

    #[test]
    fn a_slow_producer_is_waited_for_at_most_max() {
        // One byte a pause never makes 16 KiB within 50 µs of 14-ns pauses.
        let (ended, pauses) = run(16 << 10, 0, 1, u64::MAX, 14);
        assert_eq!(ended, Ended::TimedOut);
        let max_ns = POLICY.max.as_nanos() as u64;
        assert!(pauses * 14 >= max_ns && pauses * 14 < max_ns + 14 * CHECK, "{pauses}");
        // A slip whose time is already up (an earlier producer used it) does not look.
        let looked = Cell::new(false);
        let ahead = || {
            looked.set(true);
            Ok(0)
        };
        let ended = hold_back(64, &POLICY, ahead, || {}, || POLICY.max).unwrap();
        assert_eq!((ended, looked.get()), (Ended::TimedOut, false));
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

    /// Rounds as `Communicator::execute` reports them: each may slip or not, waits or
    /// not (`Some(empty passes)`), slips if told, and otherwise says how long it waited.
    /// The indices of the rounds that slipped.
    fn slips(rounds: impl IntoIterator<Item = (bool, Option<u32>)>) -> Vec<usize> {
        let mut s = Streak::default();
        let mut at = Vec::new();
        for (i, (may, wait)) in rounds.into_iter().enumerate() {
            if s.before_round(may, wait.is_some(), &POLICY) {
                at.push(i);
            } else if let (true, Some(polls)) = (may, wait) {
                s.after_wait(polls, &POLICY);
            }
        }
        at
    }

    #[test]
    fn only_a_run_of_short_waits_slips_and_a_slip_starts_the_count_again() {
        let short = (true, Some(POLICY.short_polls));
        let long = (true, Some(POLICY.short_polls + 1));
        let there = (true, None);
        let sends = (false, Some(0));
        // The 9th short wait in a row slips, then the 18th.
        assert_eq!(slips(vec![short; 20]), vec![8, 17]);
        // Rounds that found their frames there do not count, nor end the run.
        let every_other: Vec<_> = (0..20).map(|i| if i % 2 == 0 { short } else { there }).collect();
        assert_eq!(slips(every_other), vec![16]);
        // A long wait (a producer computing between calls, not streaming) ends the run,
        // and so does a round that may not slip (it sends, or receives too much).
        for breaker in [long, sends] {
            let mut w = vec![short; 4];
            w.push(breaker);
            w.extend(vec![short; 9]);
            assert_eq!(slips(w), vec![13], "{breaker:?}");
        }
        // A round that may not slip never does, however long the run before it.
        let mut w = vec![short; 8];
        w.push(sends);
        assert_eq!(slips(w), Vec::<usize>::new());
    }

    #[test]
    fn only_small_receive_only_calls_slip() {
        assert!(POLICY.applies(true, 8));
        assert!(POLICY.applies(true, 2048));
        assert!(!POLICY.applies(true, 2049));
        assert!(!POLICY.applies(false, 8));
    }

    #[test]
    fn the_gap_fits_small_rings() {
        assert_eq!(POLICY.gap_for(4 << 20), 16 << 10);
        assert_eq!(POLICY.gap_for(4096), 1024);
    }
}

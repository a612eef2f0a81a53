//! Temporal slipping: a consumer that keeps catching its producer up in a shared-memory
//! ring falls back behind it on purpose (FastForward, Giacomoni et al., PPoPP 2008).
//!
//! Why: when a rank only receives, call after call (the non-root ranks of a repeated small
//! broadcast), its producer runs calls ahead of it and neither ever waits, so the
//! consumer reads lines the producer wrote long before. But when the consumer has caught
//! up, it reads each frame's line as it is written and the lines ahead of it, the producer
//! then writes lines the consumer's core holds, and both slow down to the speed of those
//! lines crossing between cores: a state that lasts (8 B broadcast at N = 2 on the
//! development machine: 0.16–0.25 µs a call in it, 0.10–0.14 out of it, from one launch
//! of the same binary to the next). Slipping once by a few pages gets out of it.
//!
//! The rule, kept apart from the ring and the clock so tests drive it: after
//! `after_waits` receive-only calls in a row that each had to wait for their frame
//! (`Streak`), the next such wait first holds back (`hold_back`) until the producer is
//! `gap_bytes` ahead, stops writing for one check, or `max` has passed. A producer that
//! is not streaming (one frame, then nothing) costs one check (`check_pauses` spin
//! pauses, about half a microsecond); a rank that sends in the call never slips, so an
//! exchange (all-reduce, ping-pong) is never held back.

use std::io;
use std::time::Duration;

/// When and how far a streaming consumer falls back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Receive-only calls in a row that waited for their frame before one slips.
    pub after_waits: u32,
    /// How far ahead the producer should be when the consumer goes on: past the few
    /// lines a core's prefetchers read ahead of a sequential reader, so whole pages
    /// (at most a quarter of the ring, `gap_for`).
    pub gap_bytes: usize,
    /// Spin pauses between two looks at the producer's position (one look reads a line
    /// the producer writes, so not every pause).
    pub check_pauses: u32,
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
    gap_bytes: 16 << 10,
    check_pauses: 32,
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

/// Counts receive-only calls that had to wait, and says when one should slip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Streak {
    waited: u32,
}

impl Streak {
    /// A receive-only round is about to wait (`waits`) or found everything there (not
    /// `waits`): whether to slip now. A round that did not wait ends the streak, and so
    /// does a slip (the next one needs `after_waits` waits again).
    pub fn observe(&mut self, waits: bool, policy: &Policy) -> bool {
        if !waits {
            self.waited = 0;
            return false;
        }
        self.waited = self.waited.saturating_add(1);
        if self.waited > policy.after_waits {
            self.waited = 0;
            return true;
        }
        false
    }
}

/// Why a slip ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The producer is the gap ahead.
    Gap,
    /// The producer wrote nothing between two looks: it is not streaming.
    Paused,
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
    loop {
        if seen >= gap {
            return Ok(Ended::Gap);
        }
        for _ in 0..policy.check_pauses {
            pause();
        }
        let now = ahead()?;
        if now == seen {
            return Ok(Ended::Paused);
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
    fn a_producer_that_stops_costs_one_check() {
        // One frame published, nothing more: the consumer goes on after one look.
        let (ended, pauses) = run(16 << 10, 0, 64, 0, 14);
        assert_eq!((ended, pauses), (Ended::Paused, POLICY.check_pauses as u64));
        // Streaming for a while, then stopping: ends at the first look that sees no change.
        let (ended, pauses) = run(16 << 10, 0, 8, 100, 14);
        assert_eq!(ended, Ended::Paused);
        assert_eq!(pauses, 100u64.div_ceil(POLICY.check_pauses as u64) * POLICY.check_pauses as u64 + 32);
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

    #[test]
    fn only_a_run_of_waits_slips_and_a_slip_starts_the_count_again() {
        let mut s = Streak::default();
        let slips: Vec<bool> = (0..20).map(|_| s.observe(true, &POLICY)).collect();
        let at: Vec<usize> = slips.iter().enumerate().filter(|(_, &b)| b).map(|(i, _)| i).collect();
        // The 9th wait in a row slips, then the 18th.
        assert_eq!(at, vec![8, 17]);
        let mut s = Streak::default();
        for _ in 0..8 {
            assert!(!s.observe(true, &POLICY));
        }
        // A call that found its frame there ends the run.
        assert!(!s.observe(false, &POLICY));
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

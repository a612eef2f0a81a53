//! Simulated time: whole picoseconds, so two runs of one input order every event the
//! same way (no float comparisons decide what happens first).

use serde::Serialize;

/// Picoseconds per second.
const PICOS_PER_SEC: f64 = 1e12;

/// A point in simulated time or a duration, in picoseconds (u64: about 213 days).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct Picos(pub u64);

impl Picos {
    pub const ZERO: Picos = Picos(0);

    /// The first whole picosecond at or after `secs` (an event is never early); `None`
    /// when `secs` is negative, not finite or past the range.
    pub fn ceil_secs(secs: f64) -> Option<Picos> {
        let p = (secs * PICOS_PER_SEC).ceil();
        (p.is_finite() && p >= 0.0 && p < u64::MAX as f64).then_some(Picos(p as u64))
    }

    pub fn secs(self) -> f64 {
        self.0 as f64 / PICOS_PER_SEC
    }

    pub fn saturating_add(self, other: Picos) -> Picos {
        Picos(self.0.saturating_add(other.0))
    }

    pub fn saturating_sub(self, other: Picos) -> Picos {
        Picos(self.0.saturating_sub(other.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_up_to_whole_picoseconds() {
        assert_eq!(Picos::ceil_secs(1e-6), Some(Picos(1_000_000)));
        assert_eq!(Picos::ceil_secs(1.5e-12), Some(Picos(2)));
        assert_eq!(Picos::ceil_secs(0.0), Some(Picos::ZERO));
        assert_eq!(Picos::ceil_secs(-1e-9), None);
        assert_eq!(Picos::ceil_secs(f64::NAN), None);
        assert_eq!(Picos::ceil_secs(1e12), None);
        assert_eq!(Picos(2_500_000).secs(), 2.5e-6);
    }
}

//! What the schedule crate's integration tests share: the rank counts, specs and server
//! groupings every generator is run over.

use railyard_schedule::{Collective, CollectiveSpec, Rank};

/// 1–33 and 64.
pub fn rank_counts() -> Vec<usize> {
    (1..=33).chain([64]).collect()
}

/// Equal contiguous server groups: one per divisor, plus the trivial ones.
pub fn groupings(p: usize) -> Vec<Vec<Vec<Rank>>> {
    (1..=p)
        .filter(|s| p.is_multiple_of(*s))
        .map(|servers| {
            let local = p / servers;
            (0..servers).map(|s| (s * local..(s + 1) * local).collect()).collect()
        })
        .collect()
}

pub fn spec(c: Collective, p: usize, count: u64) -> CollectiveSpec {
    let s = CollectiveSpec::new(c, p, count).with_root(p / 3).with_peer(p - 1);
    if c == Collective::AllToAllv {
        // Uneven per-pair sizes, some zero.
        let counts = (0..p).map(|i| (0..p).map(|j| ((i * 7 + j * 3) as u64 + count) % 5).collect()).collect();
        s.with_counts(counts)
    } else {
        s
    }
}

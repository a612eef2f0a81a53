//! Splitting `count` elements into `parts` contiguous chunks that differ by at most one
//! element: the first `count % parts` chunks get one more. Sizes that the rank count
//! does not divide (and zero) are first-class, not an afterthought.

use std::ops::Range;

pub fn partition(count: u64, parts: usize) -> Vec<Range<u64>> {
    partition_range(0..count, parts)
}

/// Partition an arbitrary range the same way.
pub fn partition_range(range: Range<u64>, parts: usize) -> Vec<Range<u64>> {
    if parts == 0 {
        return Vec::new();
    }
    let count = range.end.saturating_sub(range.start);
    let base = count / parts as u64;
    let extra = count % parts as u64;
    let mut start = range.start;
    (0..parts as u64)
        .map(|i| {
            let len = base + u64::from(i < extra);
            let r = start..start + len;
            start += len;
            r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn uneven_and_zero() {
        assert_eq!(partition(10, 4), vec![0..3, 3..6, 6..8, 8..10]);
        assert_eq!(partition(0, 3), vec![0..0, 0..0, 0..0]);
        assert_eq!(partition(2, 4), vec![0..1, 1..2, 2..2, 2..2]);
        assert_eq!(partition_range(5..12, 2), vec![5..9, 9..12]);
    }

    proptest! {
        #[test]
        fn chunks_tile_the_range(start in 0u64..1000, len in 0u64..10_000, parts in 1usize..70) {
            let chunks = partition_range(start..start + len, parts);
            prop_assert_eq!(chunks.len(), parts);
            prop_assert_eq!(chunks[0].start, start);
            prop_assert_eq!(chunks[parts - 1].end, start + len);
            for w in chunks.windows(2) {
                prop_assert_eq!(w[0].end, w[1].start);
                let a = w[0].end - w[0].start;
                let b = w[1].end - w[1].start;
                prop_assert!(a == b || a == b + 1);
            }
        }
    }
}

//! Bytes per (source server, destination server) over a whole schedule: an all-to-all
//! adds to every pair, so up to a few thousand servers the totals are a dense table
//! (an index instead of a hash probe per add; the table fits where the pairs would),
//! beyond that a map of the pairs that carried bytes.

use rustc_hash::FxHashMap;

/// Servers up to which the totals are a dense servers × servers table (32 MiB at the
/// limit; the model keeps two, bytes between servers and bytes into the spines).
const DENSE_SERVERS: usize = 2048;

#[derive(Debug)]
pub(crate) enum ServerPairBytes {
    Dense { servers: usize, bytes: Vec<f64> },
    Sparse(FxHashMap<(u32, u32), f64>),
}

impl ServerPairBytes {
    pub(crate) fn new(servers: usize) -> Self {
        if servers <= DENSE_SERVERS {
            ServerPairBytes::Dense { servers, bytes: vec![0.0; servers * servers] }
        } else {
            ServerPairBytes::Sparse(FxHashMap::default())
        }
    }

    pub(crate) fn add(&mut self, (a, b): (u32, u32), bytes: f64) {
        match self {
            ServerPairBytes::Dense { servers, bytes: table } => table[a as usize * *servers + b as usize] += bytes,
            ServerPairBytes::Sparse(map) => *map.entry((a, b)).or_insert(0.0) += bytes,
        }
    }

    /// Every pair that carried bytes.
    pub(crate) fn into_pairs(self) -> Vec<((u32, u32), f64)> {
        match self {
            ServerPairBytes::Dense { servers, bytes } => bytes
                .into_iter()
                .enumerate()
                .filter(|&(_, b)| b != 0.0)
                .map(|(i, b)| (((i / servers) as u32, (i % servers) as u32), b))
                .collect(),
            ServerPairBytes::Sparse(map) => map.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_sparse_totals_agree() {
        let adds = [((0u32, 1u32), 5.0), ((2, 0), 1.5), ((0, 1), 2.0), ((1, 1), 3.0)];
        let mut dense = ServerPairBytes::new(3);
        let mut sparse = ServerPairBytes::Sparse(FxHashMap::default());
        for (pair, bytes) in adds {
            dense.add(pair, bytes);
            sparse.add(pair, bytes);
        }
        assert!(matches!(dense, ServerPairBytes::Dense { .. }));
        let (mut a, mut b) = (dense.into_pairs(), sparse.into_pairs());
        a.sort_by_key(|p| p.0);
        b.sort_by_key(|p| p.0);
        assert_eq!(a, vec![((0, 1), 7.0), ((1, 1), 3.0), ((2, 0), 1.5)]);
        assert_eq!(a, b);
        assert!(matches!(ServerPairBytes::new(DENSE_SERVERS + 1), ServerPairBytes::Sparse(_)));
    }
}

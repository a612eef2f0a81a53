//! Rail-aligned rings: what NCCL's ring search builds on a rail-optimized cluster
//! (seed 000 §8.5 on channels; NCCL `src/graph/search.cc`, docs/sources.md#nccl-tuner):
//! several rings (channels), each entering and leaving a server on the GPU of one rail,
//! so every cross-server hop stays on one rail leaf and the channels spread over all
//! of a server's NICs — where rotations of one ring order (`ring.rs`) all cross on the
//! same two GPUs and the same NIC.
//!
//! Channel c visits server 0's local ranks from local index c onward (c, c+1, …, c−1),
//! the next server backwards from where that one left off (c−1, c−2, …, c), and so on
//! alternating: the hop between servers joins two ranks of one local index, and so one
//! rail. With an even number of servers the ring closes on a rail too; with an odd
//! number its closing hop crosses rails (c−1 to c), as NCCL's does without PXN.

use crate::collective::{CollectiveSpec, Rank};
use crate::compact::CompactSchedule;
use crate::error::ScheduleError;
use crate::limits::MAX_CHANNELS;
use crate::ring::{check_order, ring_orders};

/// The channel count of a rail-aligned ring: as asked, or one per local rank when the
/// request leaves it at 1 (NCCL opens at least one channel per NIC), at most
/// `MAX_CHANNELS`.
pub fn rail_channels(asked: usize, local: usize) -> usize {
    if asked > 1 { asked } else { local.max(1) }.min(MAX_CHANNELS)
}

/// Channel `c`'s ring over `groups` (servers of equal size, ranks in local order).
pub fn rail_order(groups: &[Vec<Rank>], c: usize, channels: usize) -> Vec<Rank> {
    let local = groups.first().map_or(0, Vec::len);
    if local == 0 {
        return Vec::new();
    }
    // Channels spread their entry points evenly over the local indices.
    let start = c * local / channels.max(1) % local;
    let mut order = Vec::with_capacity(groups.len() * local);
    for (i, g) in groups.iter().enumerate() {
        if i % 2 == 0 {
            order.extend((0..local).map(|k| g[(start + k) % local]));
        } else {
            // Begins where the server before ended: local index start − 1.
            order.extend((0..local).map(|k| g[(start + 2 * local - 1 - k) % local]));
        }
    }
    order
}

/// All-reduce, reduce-scatter or all-gather over rail-aligned rings.
pub fn rail_ring(
    spec: &CollectiveSpec,
    groups: &[Vec<Rank>],
    channels: usize,
    elem_bytes: u64,
    algorithm: &str,
) -> Result<CompactSchedule, ScheduleError> {
    crate::hierarchical::check_groups(groups, spec.ranks)?;
    let local = groups.first().map_or(0, Vec::len);
    if groups.iter().any(|g| g.len() != local) {
        return Err(ScheduleError::BadGroups {
            message: "rail-aligned rings need servers of equal size (every rank's rail is its local index)".into(),
        });
    }
    let channels = rail_channels(channels, local);
    let orders: Vec<Vec<Rank>> = (0..channels).map(|c| rail_order(groups, c, channels)).collect();
    for order in &orders {
        check_order(order, spec.ranks)?;
    }
    ring_orders(spec, &orders, elem_bytes, algorithm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cross_server_hop_stays_on_one_rail() {
        let groups: Vec<Vec<Rank>> = (0..4).map(|s| (s * 8..(s + 1) * 8).collect()).collect();
        for c in 0..8 {
            let order = rail_order(&groups, c, 8);
            assert_eq!(order.len(), 32);
            for i in 0..order.len() {
                let (a, b) = (order[i], order[(i + 1) % order.len()]);
                if a / 8 != b / 8 {
                    assert_eq!(a % 8, b % 8, "channel {c}: {a} -> {b} changes rail");
                }
            }
        }
        // The 8 channels leave each server on 8 different rails.
        let mut exits: Vec<Rank> = (0..8).map(|c| rail_order(&groups, c, 8)[7] % 8).collect();
        exits.sort_unstable();
        assert_eq!(exits, (0..8).collect::<Vec<_>>());
    }
}

//! Helpers shared by the simulator's integration tests.
// Each test file uses a different subset.
#![allow(dead_code)]

use railyard_schedule::{
    Buffer, Collective, CollectiveSpec, CompactSchedule, Op, Region, ScheduleBuilder, Step, Transfer,
};

/// One round in which each (from, to) pair moves `bytes` (one-byte elements).
pub fn one_round(ranks: usize, pairs: &[(usize, usize)], bytes: u64) -> CompactSchedule {
    let spec = CollectiveSpec::new(Collective::AllToAll, ranks, bytes * ranks as u64);
    let mut b = ScheduleBuilder::new(spec, "flows", 1);
    let transfers = pairs
        .iter()
        .map(|&(from, to)| Transfer {
            from,
            to,
            read: Region::new(Buffer::Input, 0..bytes),
            write: Region::new(Buffer::Output, 0..bytes),
            op: Op::Copy,
            shard: None,
            channel: 0,
        })
        .collect();
    b.phase("flows", vec![Step { transfers, ..Step::default() }]);
    b.build_compact()
}

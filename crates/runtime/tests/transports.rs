//! Which transport same-host ranks use, and that shared-memory rings leave no files
//! behind. Its own test binary: the file count must not see other tests' rings.

mod common;

use std::collections::BTreeSet;

use common::with_ranks;
use railyard_runtime::{Config, RedOp};

fn ring_files() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("railyard-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn same_host_ranks_use_shared_memory_and_tcp_when_told() {
    let before = ring_files();
    for shm in [true, false] {
        let config = Config { shm, ..Config::default() };
        let results = with_ranks(3, config, |comm| {
            let mut comm = comm.unwrap();
            let mut x = vec![1.0f64; 100_000];
            comm.all_reduce_in_place(&mut x, RedOp::Sum).unwrap();
            assert!(x.iter().all(|&v| v == 3.0));
            comm.transports().to_vec()
        });
        for (rank, t) in results.iter().enumerate() {
            for (peer, &kind) in t.iter().enumerate() {
                let want = if peer == rank {
                    "self"
                } else if shm {
                    "shm"
                } else {
                    "tcp"
                };
                assert_eq!(kind, want, "rank {rank} peer {peer}");
            }
        }
    }
    // No ring files are left behind: none that were not there before (this test runs
    // alone in its binary, so no other test's rings come and go meanwhile).
    assert_eq!(ring_files().difference(&before).count(), 0);
}

//! The compact schedules expand to exactly what the generators produced before schedules
//! were made compact: a digest of every generated schedule (every algorithm × collective
//! × rank count 1–33 and 64 × sizes × options), recorded from the transfer-by-transfer
//! generators, is compared with the expansion of today's. `RAILYARD_BLESS=1` rewrites
//! the record (only when a generator is changed on purpose).

use std::fmt::Write as _;

mod common;

use common::{groupings, rank_counts, spec};
use railyard_schedule::compact::same_traffic;
use railyard_schedule::{generate, generate_compact, Algorithm, Collective, GenOptions, Step};

const RECORD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/schedules.txt");

fn options(algorithm: Algorithm, p: usize) -> Vec<GenOptions> {
    let groupings = groupings(p).into_iter();
    match algorithm {
        Algorithm::Ring => vec![
            GenOptions::default(),
            GenOptions { channels: 3, ..GenOptions::default() },
            GenOptions { order: Some((0..p).rev().collect()), channels: 2, ..GenOptions::default() },
        ],
        Algorithm::InterleavedRing
        | Algorithm::Hierarchical
        | Algorithm::InNetwork
        | Algorithm::InNetworkChain
        | Algorithm::Nvls
        | Algorithm::NvlsTree
        | Algorithm::RailRing => groupings.map(|groups| GenOptions { groups, ..GenOptions::default() }).collect(),
        Algorithm::Chain | Algorithm::Tree | Algorithm::DoubleTree => {
            vec![GenOptions::default(), GenOptions { pipeline_chunks: 3, ..GenOptions::default() }]
        }
        _ => vec![GenOptions::default()],
    }
}

/// FNV-1a: a digest that stays the same across Rust releases (std's hasher does not).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn digests() -> String {
    let mut out = String::new();
    for algorithm in Algorithm::ALL {
        for c in Collective::ALL.into_iter().filter(|&c| algorithm.supports(c)) {
            for p in rank_counts() {
                let mut all = Vec::new();
                let mut generated = 0;
                for count in [0, 1, p as u64 - 1, 2 * p as u64 + 3, 8 * p as u64] {
                    for o in options(algorithm, p) {
                        match generate(algorithm, &spec(c, p, count), &o, 4) {
                            Ok(s) => {
                                all.extend(serde_json::to_vec(&s).expect("serialises"));
                                generated += 1;
                            }
                            Err(e) => all.extend(e.to_string().into_bytes()),
                        }
                    }
                }
                writeln!(out, "{algorithm} {} p={p} schedules={generated} {:016x}", c.as_str(), fnv1a(&all))
                    .expect("writes");
            }
        }
    }
    out
}

#[test]
fn every_schedule_expands_to_the_recorded_transfers() {
    let now = digests();
    if std::env::var_os("RAILYARD_BLESS").is_some() {
        std::fs::write(RECORD, &now).expect("writes the record");
        return;
    }
    let recorded = std::fs::read_to_string(RECORD).expect("the record exists");
    for (line, (was, is)) in recorded.lines().zip(now.lines()).enumerate() {
        assert_eq!(is, was, "line {}: a schedule changed", line + 1);
    }
    assert_eq!(now.lines().count(), recorded.lines().count());
}

/// A rank's part made from the compact form is the whole schedule's transfers that the
/// rank sends or receives (and its in-network and local steps), round for round; and a
/// round a source says repeats its predecessor's traffic does.
#[test]
fn parts_and_repeats_agree_with_the_expansion() {
    let mut repeats = 0;
    for algorithm in Algorithm::ALL {
        for c in Collective::ALL.into_iter().filter(|&c| algorithm.supports(c)) {
            for p in (1..=9).chain([16, 33]) {
                for count in [1, 2 * p as u64 + 3, 8 * p as u64] {
                    for o in options(algorithm, p) {
                        let Ok(compact) = generate_compact(algorithm, &spec(c, p, count), &o, 4) else { continue };
                        let whole = compact.expand();
                        let at = format!("{algorithm} {c:?} p={p} count={count} {o:?}");
                        for rank in 0..p {
                            let part = compact.for_rank(rank);
                            assert_eq!(part.rounds.len(), whole.rounds.len(), "{at}");
                            for (mine, all) in part.rounds.iter().zip(&whole.rounds) {
                                let sent: Vec<_> =
                                    all.transfers.iter().filter(|t| t.from == rank || t.to == rank).collect();
                                assert_eq!(mine.transfers.iter().collect::<Vec<_>>(), sent, "{at} rank {rank}");
                                let joined: Vec<_> =
                                    all.in_network.iter().filter(|n| n.ranks.contains(&rank)).collect();
                                assert_eq!(mine.in_network.iter().collect::<Vec<_>>(), joined, "{at} rank {rank}");
                                let own: Vec<_> = all.local.iter().filter(|l| l.rank == rank).collect();
                                assert_eq!(mine.local.iter().collect::<Vec<_>>(), own, "{at} rank {rank}");
                                assert_eq!((mine.phase, mine.step), (all.phase, all.step));
                            }
                        }
                        let step = |i: usize| {
                            let r = &whole.rounds[i];
                            Step {
                                transfers: r.transfers.clone(),
                                in_network: r.in_network.clone(),
                                local: r.local.clone(),
                            }
                        };
                        let mut index = 0;
                        for phase in &compact.phases {
                            for k in 0..phase.rounds.rounds() {
                                if k > 0 && phase.rounds.repeats_previous(k) {
                                    assert!(same_traffic(&step(index - 1), &step(index)), "{at}: round {index}");
                                    repeats += 1;
                                }
                                index += 1;
                            }
                        }
                        assert_eq!(index, whole.rounds.len());
                    }
                }
            }
        }
    }
    assert!(repeats > 1000, "only {repeats} repeated rounds seen");
}

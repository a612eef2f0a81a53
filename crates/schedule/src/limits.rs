//! The largest schedules generated, checked before anything is allocated. An expanded
//! schedule holds every transfer of every round (about 80 bytes each), so a ring over
//! 8,192 ranks would be 134 million transfers and 10 GB; a compact one holds what its
//! phases' sources hold (a ring: its positions and blocks). Each generator's count is
//! bounded from its inputs alone, for either form, and a request whose bound passes the
//! limit is refused with the numbers, not attempted.

use crate::algorithm::Algorithm;
use crate::collective::{Collective, CollectiveSpec};
use crate::error::{Fewer, ScheduleError};

/// Ranks of one collective: 262,144, twice the largest clusters the seeds reason about.
pub const MAX_RANKS: usize = 1 << 18;
/// Parallel rings (NCCL runs at most 32 channels; twice that leaves room to explore).
pub const MAX_CHANNELS: usize = 64;
/// Pipelined chunks of chain and trees.
pub const MAX_PIPELINE_CHUNKS: usize = 1 << 12;
/// Transfers of one schedule (or items a compact one holds): 32 Mi, about 2.7 GB held
/// (3–4 GB while `plan` costs it).
pub const MAX_TRANSFERS: u128 = 1 << 25;

/// Which form of a schedule is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Every transfer held (`generate`).
    Expanded,
    /// Rounds made on demand where a generator can (`generate_compact`).
    Compact,
}

/// What a request asks for besides its algorithm and collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Parallel rings.
    pub channels: usize,
    /// Pipelined chunks.
    pub chunks: usize,
    /// Ranks of the largest server group.
    pub group: usize,
    /// Server groups.
    pub groups: usize,
}

/// An upper bound on the items a compact schedule holds: rings hold their positions and
/// blocks (O(P) per channel); the other generators list their transfers.
pub fn held_bound(algorithm: Algorithm, spec: &CollectiveSpec, shape: Shape) -> u128 {
    let p = spec.ranks as u128;
    let ring_held = |factor: u128| factor.saturating_mul(p);
    match algorithm {
        // Prologue, epilogue, and three positions per rank per ring (two rings a channel).
        Algorithm::Ring | Algorithm::InterleavedRing => ring_held(8u128.saturating_mul(shape.channels as u128 + 1)),
        Algorithm::RailRing => {
            let channels = shape.channels.max(shape.group).min(MAX_CHANNELS) as u128;
            ring_held(8u128.saturating_mul(channels + 1))
        }
        // Per chunk: rings' positions, and an rhd inter-server stage's listed transfers.
        Algorithm::Hierarchical | Algorithm::InNetwork if spec.collective == Collective::AllReduce => {
            let k = shape.chunks as u128;
            let rounds_log = u128::from(usize::BITS - spec.ranks.leading_zeros()) + 1;
            ring_held(24u128.saturating_mul(k))
                .saturating_add(ring_held(2u128.saturating_mul(rounds_log + 2)).saturating_mul(k))
        }
        Algorithm::Hierarchical if matches!(spec.collective, Collective::ReduceScatter | Collective::AllGather) => {
            ring_held(24)
        }
        // Shifts and prologue; an all-to-allv also its block offsets (as many as its counts).
        Algorithm::Pairwise if spec.collective == Collective::AllToAll => ring_held(2),
        Algorithm::Pairwise => ring_held(2).saturating_add(2u128.saturating_mul(p).saturating_mul(p)),
        _ => transfers_bound(algorithm, spec, shape),
    }
}

/// An upper bound on the transfers `algorithm` generates for `spec` of `shape`. A
/// property test holds every generator under it.
pub fn transfers_bound(algorithm: Algorithm, spec: &CollectiveSpec, shape: Shape) -> u128 {
    let Shape { channels, chunks, group, groups } = shape;
    // Saturating: the bound of an absurd request is "too large", never an overflow.
    let m = |factors: &[u128]| factors.iter().fold(1u128, |a, &b| a.saturating_mul(b));
    let p = spec.ranks as u128;
    let (c, k, g, s) = (channels as u128, chunks as u128, group as u128, groups as u128);
    let rounds_log = u128::from(usize::BITS - spec.ranks.leading_zeros()) + 1;
    let collective = spec.collective;
    match algorithm {
        Algorithm::Ring | Algorithm::InterleavedRing => m(&[2, c, p, p]),
        // At least one channel per local rank (`rail_ring::rail_channels`).
        Algorithm::RailRing => m(&[2, c.max(g).min(MAX_CHANNELS as u128), p, p]),
        Algorithm::Chain => m(&[2, p, k]),
        Algorithm::Tree => m(&[4, p, k]),
        Algorithm::DoubleTree => m(&[8, p, k]),
        Algorithm::Rhd => m(&[4, p, rounds_log]),
        // One exchange per rank per round, plus folding.
        Algorithm::RecursiveDoubling => m(&[2, p, rounds_log]),
        Algorithm::Bruck => m(&[p, p, rounds_log]),
        // At most two messages per rank and round (`pat.rs`).
        Algorithm::Pat => m(&[2, p, rounds_log]),
        Algorithm::Pairwise | Algorithm::Direct => m(&[2, p, p]),
        // All-reduce, per chunk: intra-server rings of g ranks, inter-server rings of s
        // groups or rhd over them (in-network: no inter-server transfers); the others
        // relay between all groups.
        Algorithm::Hierarchical if collective == Collective::AllReduce => {
            m(&[2, p, g.saturating_add(s).saturating_add(rounds_log + 2), k]).saturating_add(m(&[2, p, k]))
        }
        Algorithm::Hierarchical => m(&[4, p, p]),
        Algorithm::InNetwork => m(&[2, p, g, k]).saturating_add(m(&[2, p, k])),
        // Per chunk: a transfer per rank and hop, g − 1 hops up the chains and as many
        // down, and in-network steps listing each shard's holders.
        Algorithm::InNetworkChain => m(&[2, p, g, k]).saturating_add(m(&[2, p, k])),
        // Inter-server rings or rhd as hierarchical's; per chunk two stages of in-switch
        // steps, one per shard of every server and round, each listing the server's g ranks.
        Algorithm::Nvls => {
            // The in-switch stages are cut into as many rounds as the inter-server stage.
            let pieces = s.saturating_mul(2).saturating_add(rounds_log + 2);
            m(&[2, p, s.saturating_add(rounds_log + 2), k]).saturating_add(m(&[2, p, g, k, pieces]))
        }
        // Per chunk: two tree edges per holder and direction (one per tree), and one
        // in-switch round each way, a step per shard listing the server's g ranks.
        Algorithm::NvlsTree => m(&[8, p, k]).saturating_add(m(&[2, p, g, k])),
    }
}

/// Refuse what would be too large to hold; see the module documentation.
pub fn check_limits(
    algorithm: Algorithm,
    spec: &CollectiveSpec,
    channels: usize,
    chunks: usize,
    groups: &[Vec<usize>],
    form: Form,
) -> Result<(), ScheduleError> {
    let too_large = |what: &'static str, value: u128, limit: u128, why: &'static str, fewer: &'static [Fewer]| {
        ScheduleError::TooLarge { algorithm: algorithm.as_str(), what, value, limit, why, fewer }
    };
    if spec.ranks > MAX_RANKS {
        return Err(too_large("ranks", spec.ranks as u128, MAX_RANKS as u128, "", &[Fewer::Ranks]));
    }
    if channels > MAX_CHANNELS {
        return Err(too_large("channels", channels as u128, MAX_CHANNELS as u128, "", &[Fewer::Channels]));
    }
    if chunks > MAX_PIPELINE_CHUNKS {
        let max = MAX_PIPELINE_CHUNKS as u128;
        return Err(too_large("pipeline chunks", chunks as u128, max, "", &[Fewer::PipelineChunks]));
    }
    let group = groups.iter().map(Vec::len).max().unwrap_or(spec.ranks);
    let shape = Shape { channels, chunks, group, groups: groups.len().max(1) };
    let bound = match form {
        Form::Expanded => transfers_bound(algorithm, spec, shape),
        Form::Compact => held_bound(algorithm, spec, shape),
    };
    if bound > MAX_TRANSFERS {
        use Fewer::{Channels, PipelineChunks, Ranks};
        let (why, fewer): (&'static str, &'static [Fewer]) =
            match (form, algorithm.uses_channels(), algorithm.pipelined()) {
                (Form::Expanded, _, _) => (
                    "this schedule would be held transfer by transfer (about 80 bytes each)",
                    &[Ranks, Channels, PipelineChunks],
                ),
                (Form::Compact, true, _) => ("a ring holds its positions once per channel", &[Channels]),
                (Form::Compact, _, true) => {
                    ("this algorithm lists its transfers (about 80 bytes each)", &[PipelineChunks, Ranks])
                }
                (Form::Compact, _, _) => ("this algorithm lists its transfers (about 80 bytes each)", &[Ranks]),
            };
        return Err(too_large("transfers (at most)", bound, MAX_TRANSFERS, why, fewer));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{generate, generate_compact, GenOptions, InterStage};

    /// Every generator stays under its bound, so the limit never refuses a schedule
    /// for more than it would hold.
    #[test]
    fn every_generator_stays_under_its_bound() {
        for algorithm in Algorithm::ALL {
            for collective in Collective::ALL {
                if !algorithm.supports(collective) || collective == Collective::AllToAllv {
                    continue;
                }
                for p in (1..=17).chain([24, 32, 33]) {
                    for count in [1u64, p as u64, 7 * p as u64 + 3] {
                        for (channels, chunks, inter_stage) in [
                            (1, 1, InterStage::Ring),
                            (3, 4, InterStage::Ring),
                            (1, 3, InterStage::Rhd),
                            (1, 3, InterStage::Tree),
                        ] {
                            let spec = CollectiveSpec::new(collective, p, count).with_root(p / 2);
                            let groups: Vec<Vec<usize>> =
                                (0..p).collect::<Vec<_>>().chunks(4).map(<[usize]>::to_vec).collect();
                            let options = GenOptions {
                                groups: groups.clone(),
                                order: None,
                                channels,
                                pipeline_chunks: chunks,
                                inter_stage,
                            };
                            let Ok(s) = generate(algorithm, &spec, &options, 4) else { continue };
                            let transfers: usize = s.rounds.iter().map(|r| r.transfers.len()).sum();
                            let shape = Shape { channels, chunks, group: 4.min(p), groups: groups.len() };
                            let bound = transfers_bound(algorithm, &spec, shape);
                            assert!(
                                transfers as u128 <= bound,
                                "{algorithm} {collective:?} p={p} count={count}: {transfers} > {bound}"
                            );
                            let held = generate_compact(algorithm, &spec, &options, 4).expect("generates").held();
                            let bound = held_bound(algorithm, &spec, shape);
                            assert!(
                                held as u128 <= bound,
                                "{algorithm} {collective:?} p={p} count={count}: holds {held} > {bound}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_ring_over_8192_ranks_is_refused_expanded_with_the_numbers_and_held_compact() {
        let spec = CollectiveSpec::new(Collective::AllReduce, 8192, 1 << 28);
        let err = generate(Algorithm::Ring, &spec, &GenOptions::default(), 4).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("134217728") && text.contains("33554432"), "{text}");
        let compact = generate_compact(Algorithm::Ring, &spec, &GenOptions::default(), 4).expect("held compactly");
        assert_eq!(compact.held(), 8192 + 2 * 3 * 8192, "a prologue copy and two rings of positions");
        assert_eq!(compact.rounds(), 2 * 8191);
        let spec = CollectiveSpec::new(Collective::AllReduce, 4096, 1 << 28);
        assert!(check_limits(Algorithm::Ring, &spec, 1, 1, &[], Form::Expanded).is_ok());
        let spec = CollectiveSpec::new(Collective::AllToAll, 8192, 1 << 28);
        let err = generate_compact(Algorithm::Direct, &spec, &GenOptions::default(), 4).unwrap_err();
        assert!(err.to_string().contains("transfers (at most)"), "{err}");
        let pairwise = generate_compact(Algorithm::Pairwise, &spec, &GenOptions::default(), 4).expect("held compactly");
        assert_eq!((pairwise.held(), pairwise.rounds()), (8192 + 8191, 8191));
        let options = GenOptions { channels: 65, ..GenOptions::default() };
        let small = CollectiveSpec::new(Collective::AllReduce, 4, 64);
        assert!(generate(Algorithm::Ring, &small, &options, 4).unwrap_err().to_string().contains("channels"));
        let options = GenOptions { pipeline_chunks: usize::MAX, ..GenOptions::default() };
        assert!(generate(Algorithm::Tree, &small, &options, 4).unwrap_err().to_string().contains("pipeline chunks"));
    }
}

//! Choosing an algorithm per call by the same model and request `railyard plan` uses: a
//! `CollectiveRequest` for every algorithm that implements the collective (and that the
//! runtime can run: not in-network), costed by `plan` on a topology of this job.
//! The topology is RAILYARD_TOPO (e.g. the file `railyard calibrate` wrote, the same on
//! every rank) or, without it, the job's hosts with default transport figures below.
//! Either way its host costs (local copies and reductions at memory bandwidth, a fixed
//! overhead per message; see `railyard_topology::presets::HOST_COSTS`) are part of the
//! model's total.
//!
//! Workloads whose sizes vary (sequence lengths) send a new size on most calls, and a
//! plan of every algorithm took 0.55 ms; so, like NCCL's tuner, this one works from a
//! table made once per collective (and element size, root, forced algorithm, channels):
//! each algorithm and chunk count's time as a line in the element count, a + b·n, costed
//! by `plan` at two sizes. For one schedule shape the per-round model is linear in the
//! size (every round's bytes scale with it; α and the per-message host cost do not), up to
//! the rounding of chunks, so the line gives `plan`'s choice but near a crossover, where
//! both are within rounding of each other. A new size then costs an evaluation of the
//! lines, not a plan. Below `SMALL_PER_RANK` elements per rank, where chunks are a few
//! elements and empty ones drop rounds, every count is planned exactly (and cached).
//! Every rank computes the same choice from the same inputs; every table is bounded.
//! One exception the model cannot see: where a one-host job's ranks outnumber its cores
//! (`Tuner::crowded`), a broadcast goes direct whatever the model says (see `choose`).

use std::collections::HashMap;

use railyard_model::request::chunk_choices;
use railyard_model::{plan_on, ChunkPolicy, CollectiveRequest};
use railyard_schedule::{Algorithm, Collective, CollectiveSpec};
use railyard_topology::presets::{hosts, Transport, HOST_COSTS};
use railyard_topology::{Placement, PlacementPolicy, Topology};

use crate::error::CommError;

/// Defaults for a machine nobody calibrated: shared memory and loopback-class TCP.
pub const DEFAULT_SHM: Transport = Transport { alpha_secs: 3e-6, bytes_per_sec: 5e9 };
pub const DEFAULT_NET: Transport = Transport { alpha_secs: 30e-6, bytes_per_sec: 1.25e9 };

/// Counts below this many elements per rank are planned exactly, not read off the lines.
pub const SMALL_PER_RANK: u64 = 64;
/// The lines are costed at these multiples of `SMALL_PER_RANK` elements per rank.
const ANCHORS: [u64; 2] = [1, 1024];
/// Tables kept at most (one per collective, element size, root, forced algorithm and
/// channels); the tables are emptied when full.
pub const MAX_SHAPES: usize = 256;
/// Exactly planned small counts kept at most; emptied when full.
pub const MAX_SMALL: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub algorithm: Algorithm,
    pub pipeline_chunks: usize,
}

/// What a table is for: collective, element size, root, forced algorithm, channels.
type Shape = (Collective, u64, usize, Option<Algorithm>, usize);

/// One algorithm cut into `chunks`: its time at `n` elements is `fixed_secs + per_elem_secs·n`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Line {
    algorithm: Algorithm,
    chunks: usize,
    fixed_secs: f64,
    per_elem_secs: f64,
}

pub struct Tuner {
    topology: Topology,
    placement: Placement,
    lines: HashMap<Shape, Vec<Line>>,
    small: HashMap<(Shape, u64), Choice>,
    /// The whole job is on one host with more ranks than the fewest cores any of them may
    /// run on (`comm.rs`'s `job_is_crowded`).
    crowded: bool,
    /// Plans run so far (each is a costing of schedules; a choice off a table runs none).
    plans: u64,
}

impl Tuner {
    /// From RAILYARD_TOPO if set, else from the hosts with the default figures.
    pub fn new(groups: &[Vec<usize>], topo_file: Option<&str>) -> Result<Tuner, CommError> {
        let bad = |m: String| CommError::BadArgs { message: m };
        let topology = match topo_file {
            Some(path) => railyard_topology::file::load(std::path::Path::new(path))
                .map_err(|e| bad(format!("RAILYARD_TOPO: {e}")))?,
            None => hosts(
                "job",
                groups,
                DEFAULT_SHM,
                Some(DEFAULT_NET),
                HOST_COSTS,
                "this job's hosts, default transport figures".into(),
            )
            .map_err(|e| bad(e.to_string()))?,
        };
        let size: usize = groups.iter().map(Vec::len).sum();
        let placement = Placement::new(&topology, &PlacementPolicy::Contiguous, Some(size))
            .map_err(|e| bad(format!("RAILYARD_TOPO: {e}")))?;
        Ok(Tuner { topology, placement, lines: HashMap::new(), small: HashMap::new(), crowded: false, plans: 0 })
    }

    /// Whether the job's ranks outnumber its host's cores. Every rank must pass the same
    /// value (the communicator derives it from every rank's core count, sent at setup).
    pub fn crowded(mut self, crowded: bool) -> Tuner {
        self.crowded = crowded;
        self
    }

    /// Plans run so far: a new size of a collective already tabled runs none.
    pub fn plans(&self) -> u64 {
        self.plans
    }

    /// Entries held in the tables (bounded by `MAX_SHAPES` tables and `MAX_SMALL` counts).
    pub fn held(&self) -> usize {
        self.lines.values().map(Vec::len).sum::<usize>() + self.small.len()
    }

    /// The fastest algorithm for `spec` on this job by the per-round model (`forced`: its
    /// chunks only), cut into chunks as `policy` says.
    pub fn choose(
        &mut self,
        spec: &CollectiveSpec,
        elem_bytes: u64,
        groups: &[Vec<usize>],
        channels: usize,
        policy: ChunkPolicy,
        forced: Option<Algorithm>,
    ) -> Option<Choice> {
        if spec.collective == Collective::AllToAllv {
            return None;
        }
        // Ranks sharing cores: every hop of a chain or a tree waits for its receiver to be
        // scheduled, so a broadcast goes direct (one hop; each receiver pulls from the
        // root when it runs). Measured at N = 4 on 2 cores, 32 KiB: 22 context switches a
        // call for the chain, 45 for the tree, 3 direct; 16 µs a call direct against 69
        // for the chain, and direct is faster at every size from 8 B to 2 MiB. The model
        // has no notion of ranks sharing a core.
        if self.crowded && spec.collective == Collective::Broadcast && forced.is_none() {
            return Some(Choice { algorithm: Algorithm::Direct, pipeline_chunks: 1 });
        }
        let root = if spec.collective.rooted() { spec.root } else { 0 };
        let shape: Shape = (spec.collective, elem_bytes, root, forced, channels);
        let ranks = spec.ranks as u64;
        let chosen = if spec.count < SMALL_PER_RANK * ranks {
            if let Some(c) = self.small.get(&(shape, spec.count)) {
                *c
            } else {
                let p = self.plan(spec, elem_bytes, groups, channels, forced, ChunkPolicy::Search)?;
                let best = p.fastest()?;
                let c =
                    Choice { algorithm: best.algorithm.builtin()?, pipeline_chunks: best.pipeline_chunks.unwrap_or(1) };
                if self.small.len() >= MAX_SMALL {
                    self.small.clear();
                }
                self.small.insert((shape, spec.count), c);
                c
            }
        } else {
            if !self.lines.contains_key(&shape) {
                let lines = self.lines_for(spec, elem_bytes, groups, channels, forced);
                if self.lines.len() >= MAX_SHAPES {
                    self.lines.clear();
                }
                self.lines.insert(shape, lines);
            }
            let n = spec.count as f64;
            // The first of equals, in the table's order (algorithms as `Algorithm::ALL`,
            // then fewer chunks), as `plan` breaks ties.
            let best = self.lines.get(&shape)?.iter().filter(|l| l.chunks as u64 <= spec.count).fold(
                None::<(f64, &Line)>,
                |best, l| {
                    let t = l.fixed_secs + l.per_elem_secs * n;
                    match best {
                        Some((b, _)) if b <= t => best,
                        _ => Some((t, l)),
                    }
                },
            )?;
            Choice { algorithm: best.1.algorithm, pipeline_chunks: best.1.chunks }
        };
        // A chunk count asked for (RAILYARD_PIPELINE_CHUNKS, RAILYARD_CHUNK_BYTES) stands.
        let pipeline_chunks = match policy {
            ChunkPolicy::Fixed(_) => chunk_choices(chosen.algorithm, spec.collective, policy, spec.count)[0],
            ChunkPolicy::Search | ChunkPolicy::SearchAll => chosen.pipeline_chunks,
        };
        Some(Choice { algorithm: chosen.algorithm, pipeline_chunks })
    }

    /// Every algorithm the runtime can run for `spec`'s collective (or only `forced`).
    fn candidates(spec: &CollectiveSpec, forced: Option<Algorithm>) -> Vec<Algorithm> {
        match forced {
            Some(a) => vec![a],
            None => Algorithm::ALL.into_iter().filter(|a| a.supports(spec.collective) && !a.in_switch()).collect(),
        }
    }

    /// `plan` of `algorithms` for `spec` on this job.
    fn plan_of(
        &mut self,
        spec: &CollectiveSpec,
        elem_bytes: u64,
        groups: &[Vec<usize>],
        channels: usize,
        algorithms: Vec<Algorithm>,
        chunks: ChunkPolicy,
    ) -> Option<railyard_model::Plan> {
        // The hosts are the server groups of the algorithms that take them; `plan` refuses
        // groups when none of the candidates does (a broadcast's chain, tree and direct),
        // and an empty list (the caller's unequal hosts).
        let groups = (!groups.is_empty() && algorithms.iter().any(|a| a.uses_groups())).then(|| groups.to_vec());
        let request = CollectiveRequest {
            root: spec.root,
            groups,
            channels,
            chunks,
            strict: false,
            ..CollectiveRequest::new(spec.collective, spec.count * elem_bytes, elem_bytes, algorithms)
        };
        self.plans += 1;
        plan_on(&self.topology, &self.placement, &request).ok()
    }

    fn plan(
        &mut self,
        spec: &CollectiveSpec,
        elem_bytes: u64,
        groups: &[Vec<usize>],
        channels: usize,
        forced: Option<Algorithm>,
        chunks: ChunkPolicy,
    ) -> Option<railyard_model::Plan> {
        let algorithms = Self::candidates(spec, forced);
        self.plan_of(spec, elem_bytes, groups, channels, algorithms, chunks)
    }

    /// Each candidate algorithm and chunk count as a line in the element count, from
    /// `plan` at the two anchor sizes; a variant that cannot run at both is left out.
    fn lines_for(
        &mut self,
        spec: &CollectiveSpec,
        elem_bytes: u64,
        groups: &[Vec<usize>],
        channels: usize,
        forced: Option<Algorithm>,
    ) -> Vec<Line> {
        let ranks = spec.ranks as u64;
        let at = ANCHORS.map(|k| k * SMALL_PER_RANK * ranks);
        let mut lines = Vec::new();
        for algorithm in Self::candidates(spec, forced) {
            for chunks in chunk_choices(algorithm, spec.collective, ChunkPolicy::Search, at[1]) {
                let mut secs = [0.0; 2];
                let mut ok = true;
                for (k, &count) in at.iter().enumerate() {
                    let sized = CollectiveSpec { count, ..spec.clone() };
                    let p =
                        self.plan_of(&sized, elem_bytes, groups, channels, vec![algorithm], ChunkPolicy::Fixed(chunks));
                    match p.as_ref().and_then(|p| p.algorithms.first()) {
                        Some(b) => secs[k] = b.total_secs,
                        None => ok = false,
                    }
                }
                if ok {
                    let per_elem_secs = (secs[1] - secs[0]) / (at[1] - at[0]) as f64;
                    let fixed_secs = secs[0] - per_elem_secs * at[0] as f64;
                    lines.push(Line { algorithm, chunks, fixed_secs, per_elem_secs });
                }
            }
        }
        lines
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_by_the_model() {
        let two_hosts = vec![vec![0, 1], vec![2, 3]];
        let mut t = Tuner::new(&two_hosts, None).unwrap();
        let big = CollectiveSpec::new(Collective::AllReduce, 4, 1 << 20);
        assert_eq!(
            t.choose(&big, 4, &two_hosts, 1, ChunkPolicy::Search, None).unwrap().algorithm,
            Algorithm::Hierarchical
        );
        let one_host = vec![vec![0, 1, 2, 3, 4, 5, 6, 7]];
        let mut t = Tuner::new(&one_host, None).unwrap();
        let tiny = CollectiveSpec::new(Collective::AllReduce, 8, 2);
        let a = t.choose(&tiny, 4, &one_host, 1, ChunkPolicy::Search, None).unwrap().algorithm;
        assert!(
            matches!(a, Algorithm::Tree | Algorithm::DoubleTree | Algorithm::Rhd | Algorithm::RecursiveDoubling),
            "{a}"
        );
        // At two ranks, recursive doubling's one round wins for small all-reduces; for
        // large ones it reduces twice what the ring does.
        let pair = vec![vec![0, 1]];
        let mut two = Tuner::new(&pair, None).unwrap();
        let choose = |t: &mut Tuner, count| {
            t.choose(&CollectiveSpec::new(Collective::AllReduce, 2, count), 4, &pair, 1, ChunkPolicy::Search, None)
        };
        assert_eq!(choose(&mut two, 512).unwrap().algorithm, Algorithm::RecursiveDoubling);
        assert_ne!(choose(&mut two, 1 << 21).unwrap().algorithm, Algorithm::RecursiveDoubling);
        // At two ranks Bruck's all-to-all costs the same on the link as pairwise, but it
        // rotates the whole buffer twice locally.
        let a2a = CollectiveSpec::new(Collective::AllToAll, 2, 8 << 20);
        assert_ne!(two.choose(&a2a, 4, &pair, 1, ChunkPolicy::Search, None).unwrap().algorithm, Algorithm::Bruck);
        // At four ranks and 8 bytes the single tree sends fewer messages than the double one.
        let four = vec![vec![0, 1, 2, 3]];
        let mut t4 = Tuner::new(&four, None).unwrap();
        let small = CollectiveSpec::new(Collective::AllReduce, 4, 2);
        assert_ne!(t4.choose(&small, 4, &four, 1, ChunkPolicy::Search, None).unwrap().algorithm, Algorithm::DoubleTree);
        // Cached: the same answer without costing again.
        assert_eq!(t.choose(&tiny, 4, &one_host, 1, ChunkPolicy::Search, None).unwrap().algorithm, a);
    }

    #[test]
    fn unequal_hosts_are_tuned_without_server_groups() {
        // The communicator passes no groups when hosts differ in size.
        let hosts = vec![vec![0, 1, 2], vec![3]];
        let mut t = Tuner::new(&hosts, None).unwrap();
        for c in [Collective::AllReduce, Collective::Broadcast, Collective::AllGather] {
            assert!(
                t.choose(&CollectiveSpec::new(c, 4, 1 << 16), 4, &[], 1, ChunkPolicy::Search, None).is_some(),
                "{c:?}"
            );
        }
    }

    #[test]
    fn a_crowded_machine_broadcasts_direct_and_nothing_else_changes() {
        let four = vec![vec![0, 1, 2, 3]];
        let pick = |t: &mut Tuner, c, count| {
            t.choose(&CollectiveSpec::new(c, 4, count), 4, &four, 1, ChunkPolicy::Search, None).map(|c| c.algorithm)
        };
        let mut roomy = Tuner::new(&four, None).unwrap();
        let mut crowded = Tuner::new(&four, None).unwrap().crowded(true);
        // The model costs broadcasts too (it once got the hosts as groups, which only
        // hierarchical algorithms take, refused, and the runtime fell back to the chain):
        // one round wins while start-up dominates, the pipelined chain from 512 KiB.
        for (count, modelled) in
            [(2u64, Algorithm::Direct), (8 << 10, Algorithm::Direct), (128 << 10, Algorithm::Chain)]
        {
            assert_eq!(pick(&mut roomy, Collective::Broadcast, count), Some(modelled), "{count}");
            assert_eq!(pick(&mut crowded, Collective::Broadcast, count), Some(Algorithm::Direct), "{count}");
            assert_eq!(
                pick(&mut crowded, Collective::Reduce, count),
                pick(&mut roomy, Collective::Reduce, count),
                "{count}: reduces do not change"
            );
            let all_reduce = pick(&mut roomy, Collective::AllReduce, count);
            assert!(all_reduce.is_some());
            assert_eq!(pick(&mut crowded, Collective::AllReduce, count), all_reduce, "{count}: only broadcasts change");
        }
    }

    /// The lines give `plan`'s choice: over sizes from the line threshold to 64 MiB, on one
    /// and two hosts, for every collective the tuner chooses for, the algorithm read off
    /// the lines costs (by `plan` itself) within 1% of `plan`'s fastest, and is `plan`'s
    /// own choice at nearly every size.
    #[test]
    fn the_lines_choose_what_plan_chooses() {
        let (mut sizes, mut same) = (0, 0);
        for hosts in [vec![(0..4).collect::<Vec<_>>()], vec![vec![0, 1, 2], vec![3, 4, 5]], vec![(0..8).collect()]] {
            let ranks: usize = hosts.iter().map(Vec::len).sum();
            let mut t = Tuner::new(&hosts, None).unwrap();
            for c in [
                Collective::AllReduce,
                Collective::AllGather,
                Collective::ReduceScatter,
                Collective::AllToAll,
                Collective::Broadcast,
                Collective::Reduce,
            ] {
                let mut count = SMALL_PER_RANK * ranks as u64;
                while count <= 16 << 20 {
                    let spec = CollectiveSpec::new(c, ranks, count);
                    let got = t.choose(&spec, 4, &hosts, 1, ChunkPolicy::Search, None).unwrap();
                    let exact = t.plan(&spec, 4, &hosts, 1, None, ChunkPolicy::Search).unwrap();
                    let best = exact.fastest().unwrap();
                    let mine = t
                        .plan_of(&spec, 4, &hosts, 1, vec![got.algorithm], ChunkPolicy::Fixed(got.pipeline_chunks))
                        .unwrap();
                    let ratio = mine.algorithms[0].total_secs / best.total_secs;
                    assert!(ratio <= 1.01, "{c:?} {ranks} ranks {count}: {got:?} costs {ratio} of {}", best.name);
                    sizes += 1;
                    same += usize::from(best.algorithm.builtin() == Some(got.algorithm));
                    count = count * 5 / 3 + 1;
                }
            }
        }
        assert!(same * 100 >= sizes * 95, "the same choice at {same} of {sizes} sizes");
    }

    /// Issue 41: a workload that sends a new size on every call (varying sequence lengths)
    /// gets its choices off the tables: a million distinct sizes run no plan once the
    /// collective is tabled (each plan took 0.55 ms), and the tables stay bounded.
    #[test]
    fn a_million_new_sizes_run_no_plan_and_hold_bounded_tables() {
        let hosts = vec![vec![0, 1, 2, 3]];
        let mut t = Tuner::new(&hosts, None).unwrap();
        let first =
            t.choose(&CollectiveSpec::new(Collective::AllReduce, 4, 1 << 20), 4, &hosts, 1, ChunkPolicy::Search, None);
        assert!(first.is_some());
        let plans = t.plans();
        for k in 0..1_000_000u64 {
            let count = SMALL_PER_RANK * 4 + k * 7;
            let spec = CollectiveSpec::new(Collective::AllReduce, 4, count);
            assert!(t.choose(&spec, 4, &hosts, 1, ChunkPolicy::Search, None).is_some());
        }
        assert_eq!(t.plans(), plans, "no plan for a size of a tabled collective");
        // Small counts are planned exactly, each once, and the cache of them is bounded.
        for count in 0..(SMALL_PER_RANK * 4) {
            t.choose(&CollectiveSpec::new(Collective::AllReduce, 4, count), 4, &hosts, 1, ChunkPolicy::Search, None);
        }
        assert!(t.held() <= MAX_SMALL + MAX_SHAPES * 64, "{} entries", t.held());
    }
}

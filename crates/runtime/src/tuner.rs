//! Choosing an algorithm per call exactly as `railyard plan` does: a `CollectiveRequest`
//! for every algorithm that implements the collective (and that the runtime can run: not
//! in-network), costed by `plan` on a topology of this job, whose fastest is the choice —
//! the same request and function `railyard plan` uses, so `railyard plan --topo FILE` on
//! the file `railyard calibrate` wrote predicts what the runtime picks.
//! The topology is RAILYARD_TOPO (e.g. that file, the same on every rank) or, without
//! it, the job's hosts with default transport figures below. Either way its host costs
//! (local copies and reductions at memory bandwidth, a fixed overhead per message; see
//! `railyard_topology::presets::HOST_COSTS`) are part of the model's total.
//! Choices are cached per (collective, count, element size), like NCCL's tuner table, and
//! every rank computes the same one from the same inputs.
//! One exception the model cannot see: where a one-host job's ranks outnumber its cores
//! (`Tuner::crowded`), a broadcast goes direct whatever the model says (see `choose`).

use std::collections::HashMap;

use railyard_model::{plan_on, ChunkPolicy, CollectiveRequest};
use railyard_schedule::{Algorithm, Collective, CollectiveSpec};
use railyard_topology::presets::{hosts, Transport, HOST_COSTS};
use railyard_topology::{Placement, PlacementPolicy, Topology};

use crate::error::CommError;

/// Defaults for a machine nobody calibrated: shared memory and loopback-class TCP.
pub const DEFAULT_SHM: Transport = Transport { alpha_secs: 3e-6, bytes_per_sec: 5e9 };
pub const DEFAULT_NET: Transport = Transport { alpha_secs: 30e-6, bytes_per_sec: 1.25e9 };

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub algorithm: Algorithm,
    pub pipeline_chunks: usize,
}

/// A choice's inputs: collective, count, element size, root, forced algorithm, chunk policy.
type Key = (Collective, u64, u64, usize, Option<Algorithm>, ChunkPolicy);

pub struct Tuner {
    topology: Topology,
    placement: Placement,
    table: HashMap<Key, Choice>,
    /// The whole job is on one host with more ranks than the fewest cores any of them may
    /// run on (`comm.rs`'s `job_is_crowded`).
    crowded: bool,
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
        Ok(Tuner { topology, placement, table: HashMap::new(), crowded: false })
    }

    /// Whether the job's ranks outnumber its host's cores. Every rank must pass the same
    /// value (the communicator derives it from every rank's core count, sent at setup).
    pub fn crowded(mut self, crowded: bool) -> Tuner {
        self.crowded = crowded;
        self
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
        let key = (spec.collective, spec.count, elem_bytes, spec.root, forced, policy);
        if let Some(c) = self.table.get(&key) {
            return Some(*c);
        }
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
            let choice = Choice { algorithm: Algorithm::Direct, pipeline_chunks: 1 };
            self.table.insert(key, choice);
            return Some(choice);
        }
        let algorithms: Vec<Algorithm> = match forced {
            Some(a) => vec![a],
            None => Algorithm::ALL
                .into_iter()
                .filter(|a| a.supports(spec.collective) && *a != Algorithm::InNetwork)
                .collect(),
        };
        // The hosts are the server groups of the algorithms that take them; `plan` refuses
        // groups when none of the candidates does (a broadcast's chain, tree and direct),
        // and an empty list (the caller's unequal hosts).
        let groups = (!groups.is_empty() && algorithms.iter().any(|a| a.uses_groups())).then(|| groups.to_vec());
        let request = CollectiveRequest {
            root: spec.root,
            groups,
            channels,
            chunks: policy,
            strict: false,
            ..CollectiveRequest::new(spec.collective, spec.count * elem_bytes, elem_bytes, algorithms)
        };
        let p = plan_on(&self.topology, &self.placement, &request).ok()?;
        let best = p.fastest()?;
        let choice =
            Choice { algorithm: best.algorithm.builtin()?, pipeline_chunks: best.pipeline_chunks.unwrap_or(1) };
        self.table.insert(key, choice);
        Some(choice)
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
}

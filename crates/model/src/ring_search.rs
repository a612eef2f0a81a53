//! Ring search on asymmetric topologies (seed 000 §8.3.3, §8.4.3): the ring order
//! that maximises the ring's bottleneck bandwidth. Every round of a ring sends one chunk
//! on every ring edge at once, so an order's cost is max over resources of (bytes the
//! edges put on it / its bandwidth) per byte of chunk — the per-round model of one round,
//! shared links and interfaces included. Exhaustive (rank 0 first, one direction) up to
//! `EXHAUSTIVE_MAX` ranks; beyond, nearest-widest-neighbour from every start, then 2-opt
//! reversals and swaps (a heuristic whose
//! result the tests keep within `HEURISTIC_FACTOR` of the exhaustive optimum on random
//! small topologies).

use serde::Serialize;

use crate::error::ModelError;
use railyard_schedule::Rank;
use railyard_topology::{Placement, Resource, RouteTable, Topology};

pub const EXHAUSTIVE_MAX: usize = 9;
/// Ring orders the heuristic scores at most (each costs a pass over the ring): 128 GPUs
/// once took 24 s and 300 more than a minute; with this bound a search stays within a
/// few seconds at any size, and says when it stopped early.
pub const MAX_ORDERS_SCORED: usize = 50_000;
/// The heuristic's ring bandwidth is at least the optimum divided by this (the tests
/// also require it to find the optimum in at least 90% of random small cases).
pub const HEURISTIC_FACTOR: f64 = 2.0;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RingSearch {
    /// Ranks in ring order, starting at rank 0.
    pub order: Vec<Rank>,
    /// Bytes per second each ring edge sustains when all edges send at once.
    pub ring_bytes_per_sec: f64,
    /// The resource that limits it.
    pub bottleneck: String,
    pub exhaustive: bool,
    pub orders_evaluated: usize,
    /// Whether the heuristic stopped at `MAX_ORDERS_SCORED` before it could improve no more.
    pub stopped_early: bool,
    /// The channel set: the best ring alone, or with its reverse (which uses the other
    /// direction of every full-duplex link), whichever moves more bytes per second.
    pub channels: Vec<Vec<Rank>>,
    /// Bytes per second the channel set moves along the ring in total.
    pub channels_bytes_per_sec: f64,
}

/// (seconds per byte of the slowest resource, that resource), and the smooth tie-breaker.
type Score = ((f64, usize), f64);

struct Scorer<'a> {
    topology: &'a Topology,
    placement: &'a Placement,
    routes: RouteTable<'a>,
    load: Vec<f64>,
}

impl<'a> Scorer<'a> {
    /// Seconds per byte of the slowest resource, and which, when every edge of `order` sends one byte.
    fn score(&mut self, order: &[Rank]) -> Result<(f64, usize), ModelError> {
        self.scores(order).map(|(worst, _)| worst)
    }

    /// The score and, as a tie-breaker on plateaus of the maximum, Σ (load/B)^8 — a
    /// smooth stand-in for "how many resources are nearly as slow".
    fn scores(&mut self, order: &[Rank]) -> Result<Score, ModelError> {
        self.load.iter_mut().for_each(|x| *x = 0.0);
        let p = order.len();
        for i in 0..p {
            let (a, b) = (self.placement.devices[order[i]], self.placement.devices[order[(i + 1) % p]]);
            if a == b {
                continue;
            }
            let route = self.routes.get(a, b)?;
            for &(link, fraction) in route.links {
                self.load[link] += fraction;
                for u in &self.topology.links[link].interfaces {
                    let r = self
                        .topology
                        .resource_index(Resource::Interface { interface: u.interface, reverse: u.reverse });
                    self.load[r] += fraction;
                }
            }
        }
        let mut worst = (0.0f64, 0usize);
        let mut smooth = 0.0;
        for (i, &l) in self.load.iter().enumerate() {
            if l > 0.0 {
                let s = l / self.topology.resource_bytes_per_sec(self.topology.resource(i));
                if s > worst.0 * (1.0 + 1e-12) {
                    worst = (s, i);
                }
                smooth += (s * 1e9).powi(8);
            }
        }
        Ok((worst, smooth))
    }
}

fn canonical(order: &[Rank]) -> Vec<Rank> {
    let p = order.len();
    let start = order.iter().position(|&r| r == 0).unwrap_or(0);
    let mut o: Vec<Rank> = (0..p).map(|i| order[(start + i) % p]).collect();
    if p > 2 && o[1] > o[p - 1] {
        o[1..].reverse();
    }
    o
}

/// Next lexicographic permutation; false when `v` was the last one.
fn next_permutation(v: &mut [Rank]) -> bool {
    let n = v.len();
    if n < 2 {
        return false;
    }
    let Some(i) = (0..n - 1).rev().find(|&i| v[i] < v[i + 1]) else { return false };
    let j = (i + 1..n).rev().find(|&j| v[j] > v[i]).unwrap_or(i + 1);
    v.swap(i, j);
    v[i + 1..].reverse();
    true
}

/// Search the best ring; `force_heuristic` skips the exhaustive search (for tests).
pub fn best_ring(topology: &Topology, placement: &Placement, force_heuristic: bool) -> Result<RingSearch, ModelError> {
    let p = placement.len();
    if p == 0 {
        return Err(ModelError::BadInput { field: "ranks".into(), message: "no ranks to order".into() });
    }
    let mut scorer =
        Scorer { topology, placement, routes: RouteTable::new(topology), load: vec![0.0; topology.resource_count()] };
    let mut evaluated = 0;
    let mut stopped_early = false;
    let (order, (secs, resource), exhaustive) = if p <= EXHAUSTIVE_MAX && !force_heuristic {
        let mut rest: Vec<Rank> = (1..p).collect();
        let mut best: Option<(Vec<Rank>, (f64, usize))> = None;
        loop {
            // One direction of each ring: the second rank below the last.
            if rest.len() < 2 || rest[0] < rest[rest.len() - 1] {
                let order: Vec<Rank> = std::iter::once(0).chain(rest.iter().copied()).collect();
                let s = scorer.score(&order)?;
                evaluated += 1;
                if best.as_ref().is_none_or(|b| s.0 < b.1 .0 * (1.0 - 1e-12)) {
                    best = Some((order, s));
                }
            }
            if !next_permutation(&mut rest) {
                break;
            }
        }
        let (o, s) = best.unwrap_or((vec![0], (0.0, 0)));
        (o, s, true)
    } else {
        // Nearest widest neighbour from every starting rank, each improved by 2-opt
        // (segment reversals accepted when they lower the maximum, or keep it and lower
        // the smooth tie-breaker); the best result wins.
        let better = |a: &Score, b: &Score| {
            a.0 .0 < b.0 .0 * (1.0 - 1e-12) || (a.0 .0 <= b.0 .0 * (1.0 + 1e-12) && a.1 < b.1 * (1.0 - 1e-12))
        };
        let mut best: Option<(Vec<Rank>, Score)> = None;
        // Starts spread over the ranks: every one while the budget allows a 2-opt pass
        // from each, fewer beyond.
        let passes = (MAX_ORDERS_SCORED / (p * p).max(1)).max(1);
        let starts: Vec<Rank> = (0..passes.min(p)).map(|k| k * p / passes.min(p)).collect();
        for start in starts {
            let mut order = vec![start];
            let mut left: Vec<Rank> = (0..p).filter(|&r| r != start).collect();
            while !left.is_empty() {
                let at = placement.devices[*order.last().unwrap_or(&start)];
                let mut pick = (0usize, f64::NEG_INFINITY);
                for (k, &r) in left.iter().enumerate() {
                    let w = scorer.routes.get(at, placement.devices[r])?.bottleneck_bytes_per_sec;
                    if w > pick.1 {
                        pick = (k, w);
                    }
                }
                order.push(left.remove(pick.0));
            }
            let mut current = scorer.scores(&order)?;
            evaluated += 1;
            for _ in 0..20 {
                let mut improved = false;
                for i in 1..p {
                    if evaluated >= MAX_ORDERS_SCORED {
                        stopped_early = true;
                        break;
                    }
                    for j in i + 1..p {
                        // Two moves: reverse the segment i..=j, or swap ranks i and j.
                        for swap in [false, true] {
                            let apply = |o: &mut Vec<Rank>| if swap { o.swap(i, j) } else { o[i..=j].reverse() };
                            apply(&mut order);
                            let s = scorer.scores(&order)?;
                            evaluated += 1;
                            if better(&s, &current) {
                                current = s;
                                improved = true;
                            } else {
                                apply(&mut order);
                            }
                        }
                    }
                }
                if !improved || stopped_early {
                    break;
                }
            }
            if best.as_ref().is_none_or(|b| better(&current, &b.1)) {
                best = Some((order, current));
            }
        }
        let (order, (current, _)) = best.unwrap_or((vec![0], ((0.0, 0), 0.0)));
        (order, current, false)
    };
    // Channel set: k rings each carrying 1/k; a resource's load is the sum over rings.
    let reversed: Vec<Rank> = order.iter().rev().copied().collect();
    let mut pair_load = |rings: &[&[Rank]]| -> Result<f64, ModelError> {
        let mut total = vec![0.0; topology.resource_count()];
        for ring in rings {
            scorer.score(ring)?;
            for (t, l) in total.iter_mut().zip(&scorer.load) {
                *t += l / rings.len() as f64;
            }
        }
        let worst = total
            .iter()
            .enumerate()
            .filter(|(_, &l)| l > 0.0)
            .map(|(i, &l)| l / topology.resource_bytes_per_sec(topology.resource(i)))
            .fold(0.0, f64::max);
        // Each ring edge carries 1/k of the bytes: the set moves 1/worst per edge in total.
        Ok(if worst > 0.0 { 1.0 / worst } else { f64::INFINITY })
    };
    let single = pair_load(&[&order])?;
    let double = if p > 2 { pair_load(&[&order, &reversed])? } else { single };
    let (channels, channels_bytes_per_sec) = if double > single * (1.0 + 1e-9) {
        (vec![canonical(&order), reversed.clone()], double)
    } else {
        (vec![canonical(&order)], single)
    };
    Ok(RingSearch {
        channels,
        channels_bytes_per_sec,
        order: canonical(&order),
        ring_bytes_per_sec: if secs > 0.0 { 1.0 / secs } else { f64::INFINITY },
        bottleneck: if secs > 0.0 { topology.resource_name(topology.resource(resource)) } else { "-".into() },
        exhaustive,
        orders_evaluated: evaluated,
        stopped_early,
    })
}

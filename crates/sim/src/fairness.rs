//! Max-min fair rates by progressive filling (seed 001 §7.5: flows that share a link
//! share its bandwidth; a flow held back elsewhere leaves its share to the others).
//!
//! Every unfrozen flow's rate rises together; a flow puts `weight × rate` on each of
//! its resources (a route split over ECMP paths puts a fraction on each). A resource
//! saturates at level (capacity − what frozen flows use) / (weight of unfrozen flows);
//! the lowest such level freezes that resource's unfrozen flows at it, and the levels
//! of the other resources those flows cross are recomputed. A heap of levels with stale
//! entries skipped makes this O(F·L·log R) for F flows of L resources each.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::membership::Membership;

/// Below this a resource's remaining unfrozen weight is rounding left by subtractions.
const WEIGHT_EPSILON: f64 = 1e-12;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Level {
    level: f64,
    resource: u32,
    version: u32,
}

impl Eq for Level {}

impl Ord for Level {
    // Min-heap by level, ties to the lower resource so runs are reproducible.
    fn cmp(&self, other: &Self) -> Ordering {
        other.level.total_cmp(&self.level).then(other.resource.cmp(&self.resource))
    }
}

impl PartialOrd for Level {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Scratch space for [`FairShare::rates`], kept between calls so a simulation does not
/// allocate per event. Sized by the number of resources.
#[derive(Debug, Default)]
pub struct FairShare {
    weight: Vec<f64>,
    used: Vec<f64>,
    version: Vec<u32>,
    index: Membership,
    frozen: Vec<bool>,
    heap: BinaryHeap<Level>,
    /// The resource that froze each flow of the last call (its bottleneck), u32::MAX if none.
    pub bottleneck: Vec<u32>,
}

impl FairShare {
    pub fn new(resources: usize) -> Self {
        FairShare {
            weight: vec![0.0; resources],
            used: vec![0.0; resources],
            version: vec![0; resources],
            index: Membership::new(resources),
            ..FairShare::default()
        }
    }

    /// Max-min fair rates (bytes/s) of `flows` — each the resources it crosses, with the
    /// fraction of its rate on each — on resources of `capacity` (bytes/s), written to
    /// `rates` (one per flow). A flow that crosses no resource gets `f64::INFINITY`.
    /// Resource indices must be below the size given to `new`.
    pub fn rates(&mut self, flows: &[&[(u32, f64)]], capacity: &[f64], rates: &mut Vec<f64>) {
        rates.clear();
        rates.resize(flows.len(), f64::INFINITY);
        self.bottleneck.clear();
        self.bottleneck.resize(flows.len(), u32::MAX);
        for &e in self.index.touched() {
            self.weight[e as usize] = 0.0;
            self.used[e as usize] = 0.0;
        }
        self.index.build(flows);
        // Weights summed flow by flow, in the flows' order (the same sums every time).
        for f in flows {
            for &(e, w) in *f {
                self.weight[e as usize] += w;
            }
        }
        self.heap.clear();
        for &e in self.index.touched() {
            let ei = e as usize;
            self.version[ei] = self.version[ei].wrapping_add(1);
            if self.weight[ei] > WEIGHT_EPSILON {
                self.heap.push(Level { level: capacity[ei] / self.weight[ei], resource: e, version: self.version[ei] });
            }
        }
        self.frozen.clear();
        self.frozen.resize(flows.len(), false);
        while let Some(Level { level, resource, version }) = self.heap.pop() {
            let e = resource as usize;
            if version != self.version[e] || self.weight[e] <= WEIGHT_EPSILON {
                continue;
            }
            let Some(s) = self.index.slot(resource) else { continue };
            for m in 0..self.index.members(s).len() {
                let i = self.index.members(s)[m] as usize;
                if self.frozen[i] {
                    continue;
                }
                self.frozen[i] = true;
                rates[i] = level;
                self.bottleneck[i] = resource;
                for &(e2, w2) in flows[i] {
                    let e2i = e2 as usize;
                    self.used[e2i] += w2 * level;
                    self.weight[e2i] -= w2;
                    self.version[e2i] = self.version[e2i].wrapping_add(1);
                    if e2 != resource && self.weight[e2i] > WEIGHT_EPSILON {
                        // Levels only rise: a resource not yet saturated saturates at
                        // or above the level being frozen.
                        let left = (capacity[e2i] - self.used[e2i]).max(0.0);
                        self.heap.push(Level {
                            level: (left / self.weight[e2i]).max(level),
                            resource: e2,
                            version: self.version[e2i],
                        });
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn solve(flows: &[Vec<(u32, f64)>], capacity: &[f64]) -> Vec<f64> {
        let mut fair = FairShare::new(capacity.len());
        let mut rates = Vec::new();
        let refs: Vec<&[(u32, f64)]> = flows.iter().map(Vec::as_slice).collect();
        fair.rates(&refs, capacity, &mut rates);
        rates
    }

    #[test]
    fn flows_on_one_link_share_it_equally() {
        let rates = solve(&[vec![(0, 1.0)], vec![(0, 1.0)], vec![(0, 1.0)], vec![(0, 1.0)]], &[100.0]);
        assert_eq!(rates, vec![25.0; 4]);
    }

    /// The textbook case: a flow held back by a narrow link leaves its share of a wide one.
    #[test]
    fn a_flow_held_back_elsewhere_leaves_its_share() {
        // Link 0 (10) carries flows a and b; link 1 (2) carries b and c.
        let rates = solve(&[vec![(0, 1.0)], vec![(0, 1.0), (1, 1.0)], vec![(1, 1.0)]], &[10.0, 2.0]);
        assert_eq!(rates, vec![9.0, 1.0, 1.0]);
    }

    /// A route split half and half over two paths puts half its rate on each.
    #[test]
    fn split_routes_weigh_their_fraction() {
        let rates = solve(&[vec![(0, 0.5), (1, 0.5)], vec![(0, 1.0)]], &[10.0, 10.0]);
        // Level l: link 0 carries 0.5 l + l = 10 -> l = 6.67.
        assert!((rates[0] - 20.0 / 3.0).abs() < 1e-9 && (rates[1] - 20.0 / 3.0).abs() < 1e-9, "{rates:?}");
        let rates = solve(&[vec![]], &[1.0]);
        assert_eq!(rates, vec![f64::INFINITY]);
    }

    proptest! {
        /// Max-min fairness as defined: no resource is over capacity, and every flow
        /// crosses a saturated resource on which no flow has a larger rate.
        #[test]
        fn rates_are_feasible_and_max_min_fair(
            capacity in proptest::collection::vec(1.0f64..100.0, 1..6),
            raw in proptest::collection::vec(proptest::collection::btree_set(0u32..6, 1..4), 1..12),
        ) {
            let r = capacity.len() as u32;
            let flows: Vec<Vec<(u32, f64)>> = raw
                .iter()
                .map(|set| set.iter().map(|&e| e % r).collect::<std::collections::BTreeSet<u32>>()
                    .into_iter().map(|e| (e, 1.0)).collect())
                .collect();
            let rates = solve(&flows, &capacity);
            let mut load = vec![0.0; capacity.len()];
            for (f, &x) in flows.iter().zip(&rates) {
                for &(e, w) in f { load[e as usize] += w * x; }
            }
            for (e, &l) in load.iter().enumerate() {
                prop_assert!(l <= capacity[e] * (1.0 + 1e-9), "resource {e} over capacity");
            }
            for (i, f) in flows.iter().enumerate() {
                let bottlenecked = f.iter().any(|&(e, _)| {
                    let e = e as usize;
                    load[e] >= capacity[e] * (1.0 - 1e-9)
                        && flows.iter().zip(&rates).all(|(g, &y)| !g.iter().any(|&(x, _)| x as usize == e) || y <= rates[i] * (1.0 + 1e-9))
                });
                prop_assert!(bottlenecked, "flow {i} at {} has no bottleneck", rates[i]);
            }
        }
    }
}

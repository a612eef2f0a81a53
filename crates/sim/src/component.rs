//! The flows whose rates can change when flows start or end: those connected to the
//! changed ones through shared resources. Max-min rates of flows in one connected
//! component do not depend on any other component, so only this one is recomputed —
//! with the same arithmetic, in the same flow order, as a recomputation of all flows
//! would do for it (the equality is a test).

use crate::membership::Membership;

/// Scratch space sized by the number of resources, kept between calls.
#[derive(Debug, Default)]
pub struct Components {
    index: Membership,
    resource_seen: Vec<bool>,
    flow_seen: Vec<bool>,
    stack: Vec<usize>,
}

impl Components {
    pub fn new(resources: usize) -> Self {
        Components { index: Membership::new(resources), ..Components::default() }
    }

    /// Positions (sorted) of the flows connected to the `seed_flows` and to any flow
    /// crossing one of `seed_resources`.
    pub fn connected(&mut self, flows: &[&[(u32, f64)]], seed_resources: &[u32], seed_flows: &[usize]) -> Vec<usize> {
        self.index.build(flows);
        self.resource_seen.clear();
        self.resource_seen.resize(self.index.touched().len(), false);
        self.flow_seen.clear();
        self.flow_seen.resize(flows.len(), false);
        self.stack.clear();
        // A seed resource no live flow crosses is left out.
        for &e in seed_resources {
            if let Some(s) = self.index.slot(e) {
                if !self.resource_seen[s] {
                    self.resource_seen[s] = true;
                    self.stack.push(s);
                }
            }
        }
        let mut found: Vec<usize> = Vec::new();
        let reach = |i: usize, found: &mut Vec<usize>, stack: &mut Vec<usize>, seen: &mut Vec<bool>| {
            found.push(i);
            for &(e, _) in flows[i] {
                if let Some(s) = self.index.slot(e) {
                    if !seen[s] {
                        seen[s] = true;
                        stack.push(s);
                    }
                }
            }
        };
        for &i in seed_flows {
            if !self.flow_seen[i] {
                self.flow_seen[i] = true;
                reach(i, &mut found, &mut self.stack, &mut self.resource_seen);
            }
        }
        while let Some(s) = self.stack.pop() {
            for m in 0..self.index.members(s).len() {
                let i = self.index.members(s)[m] as usize;
                if !self.flow_seen[i] {
                    self.flow_seen[i] = true;
                    reach(i, &mut found, &mut self.stack, &mut self.resource_seen);
                }
            }
        }
        found.sort_unstable();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_sharing_resources_transitively_are_one_component() {
        // 0-1 share resource 1, 1-2 share 2, 3 is alone on 5.
        let flows: Vec<Vec<(u32, f64)>> =
            vec![vec![(0, 1.0), (1, 1.0)], vec![(1, 1.0), (2, 1.0)], vec![(2, 1.0)], vec![(5, 1.0)]];
        let refs: Vec<&[(u32, f64)]> = flows.iter().map(Vec::as_slice).collect();
        let mut c = Components::new(8);
        assert_eq!(c.connected(&refs, &[0], &[]), vec![0, 1, 2]);
        assert_eq!(c.connected(&refs, &[], &[3]), vec![3]);
        assert_eq!(c.connected(&refs, &[7], &[]), Vec::<usize>::new());
        assert_eq!(c.connected(&refs, &[5], &[2]), vec![0, 1, 2, 3]);
    }
}

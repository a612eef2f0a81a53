//! The flows whose rates can change when flows start or end: those connected to the
//! changed ones through shared resources. Max-min rates of flows in one connected
//! component do not depend on any other component, so only this one is recomputed —
//! with the same arithmetic, in the same flow order, as a recomputation of all flows
//! would do for it (the equality is a test).

/// Scratch space sized by the number of resources, kept between calls.
#[derive(Debug, Default)]
pub struct Components {
    /// Place of each touched resource in `touched` (u32::MAX: untouched).
    slot: Vec<u32>,
    touched: Vec<u32>,
    offsets: Vec<usize>,
    members: Vec<u32>,
    resource_seen: Vec<bool>,
    flow_seen: Vec<bool>,
    stack: Vec<u32>,
}

impl Components {
    pub fn new(resources: usize) -> Self {
        Components { slot: vec![u32::MAX; resources], ..Components::default() }
    }

    /// Positions (sorted) of the flows connected to the `seed_flows` and to any flow
    /// crossing one of `seed_resources`.
    pub fn connected(&mut self, flows: &[&[(u32, f64)]], seed_resources: &[u32], seed_flows: &[usize]) -> Vec<usize> {
        for &e in &self.touched {
            self.slot[e as usize] = u32::MAX;
        }
        self.touched.clear();
        self.offsets.clear();
        for f in flows {
            for &(e, _) in *f {
                let ei = e as usize;
                if self.slot[ei] == u32::MAX {
                    self.slot[ei] = self.touched.len() as u32;
                    self.touched.push(e);
                    self.offsets.push(0);
                }
                self.offsets[self.slot[ei] as usize] += 1;
            }
        }
        let mut total = 0;
        for o in self.offsets.iter_mut() {
            let c = *o;
            *o = total;
            total += c;
        }
        self.offsets.push(total);
        self.members.clear();
        self.members.resize(total, 0);
        let mut fill: Vec<usize> = self.offsets[..self.touched.len()].to_vec();
        for (i, f) in flows.iter().enumerate() {
            for &(e, _) in *f {
                let s = self.slot[e as usize] as usize;
                self.members[fill[s]] = i as u32;
                fill[s] += 1;
            }
        }
        self.resource_seen.clear();
        self.resource_seen.resize(self.touched.len(), false);
        self.flow_seen.clear();
        self.flow_seen.resize(flows.len(), false);
        self.stack.clear();
        // Resources on the stack by slot; a seed resource no live flow crosses is left out.
        for &e in seed_resources {
            let s = self.slot.get(e as usize).copied().unwrap_or(u32::MAX);
            if s != u32::MAX && !self.resource_seen[s as usize] {
                self.resource_seen[s as usize] = true;
                self.stack.push(s);
            }
        }
        let mut found: Vec<usize> = Vec::new();
        for &i in seed_flows {
            if !self.flow_seen[i] {
                self.flow_seen[i] = true;
                found.push(i);
                for &(e, _) in flows[i] {
                    let s = self.slot[e as usize];
                    if !self.resource_seen[s as usize] {
                        self.resource_seen[s as usize] = true;
                        self.stack.push(s);
                    }
                }
            }
        }
        while let Some(s) = self.stack.pop() {
            for m in self.offsets[s as usize]..self.offsets[s as usize + 1] {
                let i = self.members[m] as usize;
                if self.flow_seen[i] {
                    continue;
                }
                self.flow_seen[i] = true;
                found.push(i);
                for &(e, _) in flows[i] {
                    let t = self.slot[e as usize];
                    if !self.resource_seen[t as usize] {
                        self.resource_seen[t as usize] = true;
                        self.stack.push(t);
                    }
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

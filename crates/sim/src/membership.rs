//! Which flows cross each resource, as one flat table rebuilt per use: the resources
//! the flows touch, in the order first seen, each with the positions of its flows. The
//! fairness computation and the component search both walk it; scratch is kept between
//! calls and sized by the resources touched, not by the fabric.

#[derive(Debug, Default)]
pub struct Membership {
    /// Place of each touched resource in `touched` (u32::MAX: untouched).
    slot: Vec<u32>,
    touched: Vec<u32>,
    offsets: Vec<usize>,
    members: Vec<u32>,
}

impl Membership {
    pub fn new(resources: usize) -> Self {
        Membership { slot: vec![u32::MAX; resources], ..Membership::default() }
    }

    /// Index `flows` (each the resources it crosses, with weights).
    pub fn build(&mut self, flows: &[&[(u32, f64)]]) {
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
            let count = *o;
            *o = total;
            total += count;
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
    }

    /// The resources touched, in the order first seen.
    pub fn touched(&self) -> &[u32] {
        &self.touched
    }

    /// The place of resource `e` among the touched ones.
    pub fn slot(&self, e: u32) -> Option<usize> {
        self.slot.get(e as usize).copied().filter(|&s| s != u32::MAX).map(|s| s as usize)
    }

    /// Positions of the flows crossing the resource at `slot`.
    pub fn members(&self, slot: usize) -> &[u32] {
        &self.members[self.offsets[slot]..self.offsets[slot + 1]]
    }
}

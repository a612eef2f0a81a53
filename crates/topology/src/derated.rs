//! A topology with links made slower or faster, for what-if questions: a NIC whose
//! requests in flight cap its throughput (seed 001 §7.3.4, §7.6.2), three times the
//! bandwidth, a smaller per-round start-up (§7.6.3). Devices, names and routes stay;
//! only rates change, and the result is validated like any topology.

use crate::error::TopologyError;
use crate::graph::{Link, LinkClass, Topology};

impl Topology {
    /// This topology with every link of `class` at no more than `bytes_per_sec`.
    pub fn with_class_capped(&self, class: LinkClass, bytes_per_sec: f64) -> Result<Topology, TopologyError> {
        let name = format!("{} ({class:?} links at most {:.4e} B/s)", self.name, bytes_per_sec);
        self.rebuilt(name, |_, link| {
            Some(Link {
                bytes_per_sec: if link.class == class {
                    link.bytes_per_sec.min(bytes_per_sec)
                } else {
                    link.bytes_per_sec
                },
                ..link.clone()
            })
        })
    }

    /// This topology with every link's bandwidth multiplied by `factor`.
    pub fn with_bandwidth_scaled(&self, factor: f64) -> Result<Topology, TopologyError> {
        let name = format!("{} (bandwidth x{factor})", self.name);
        self.rebuilt(name, |_, link| Some(Link { bytes_per_sec: link.bytes_per_sec * factor, ..link.clone() }))
    }

    /// This topology with per-round start-up α = `secs`.
    pub fn with_round_startup(&self, secs: f64) -> Result<Topology, TopologyError> {
        let mut t = self.rebuilt(format!("{} (alpha {secs} s)", self.name), |_, link| Some(link.clone()))?;
        if !(0.0..=1.0).contains(&secs) {
            return Err(TopologyError::Invalid {
                field: "round_startup_secs".into(),
                message: format!("must be 0..1 s (got {})", railyard_units::units::format_number(secs)),
            });
        }
        t.round_startup_secs = secs;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::LinkClass;
    use crate::presets::preset;

    #[test]
    fn capping_nic_links_leaves_the_others_and_the_names() {
        let t = preset("hgx-h100x2").unwrap();
        let c = t.with_class_capped(LinkClass::Nic, 16.384e9).unwrap();
        assert_eq!(c.links.len(), t.links.len());
        for (a, b) in t.links.iter().zip(&c.links) {
            let want = if a.class == LinkClass::Nic { 16.384e9 } else { a.bytes_per_sec };
            assert_eq!(b.bytes_per_sec, want);
        }
        assert_eq!(c.device_id("A.nic3"), t.device_id("A.nic3"));
    }

    #[test]
    fn scaling_and_startup_are_checked() {
        let t = preset("mesh").unwrap();
        let s = t.with_bandwidth_scaled(3.0).unwrap();
        assert_eq!(s.links[0].bytes_per_sec, 150e9);
        assert_eq!(t.with_round_startup(2e-6).unwrap().round_startup_secs, 2e-6);
        assert!(t.with_round_startup(5.0).is_err());
        assert!(t.with_bandwidth_scaled(1e30).is_err());
    }
}

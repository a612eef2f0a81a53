//! A topology with links taken out: a cable, a NIC or a switch that failed. Routes are
//! searched again on what is left, so traffic goes around the failure where another
//! path exists; where none does, asking for the route is a `NoRoute` error that names
//! the two ends.

use crate::error::TopologyError;
use crate::graph::{DeviceId, Link, LinkId, Topology, TopologyBuilder};

/// What failed: every link to and from a device, or the links between two devices
/// (both directions: a cable carries both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Device(String),
    Cable(String, String),
}

impl std::str::FromStr for Failure {
    type Err = String;
    /// `DEVICE` or `A->B` / `A -> B` (either order: a cable fails both ways).
    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once("->") {
            Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => {
                Ok(Failure::Cable(a.trim().to_string(), b.trim().to_string()))
            }
            Some(_) => Err(format!("\"{text}\": a cable is named FROM->TO")),
            None if !text.trim().is_empty() => Ok(Failure::Device(text.trim().to_string())),
            None => Err("an empty name".into()),
        }
    }
}

impl Topology {
    /// The links `failures` take out, each failure naming at least one.
    pub fn failed_links(&self, failures: &[Failure]) -> Result<Vec<LinkId>, TopologyError> {
        let device = |name: &str| -> Result<DeviceId, TopologyError> {
            self.device_id(name)
                .ok_or_else(|| TopologyError::UnknownDevice { field: "failed".into(), name: name.to_string() })
        };
        let mut out = Vec::new();
        for f in failures {
            let hit: Vec<LinkId> = match f {
                Failure::Device(name) => {
                    let d = device(name)?;
                    (0..self.links.len()).filter(|&l| self.links[l].from == d || self.links[l].to == d).collect()
                }
                Failure::Cable(a, b) => {
                    let (a, b) = (device(a)?, device(b)?);
                    (0..self.links.len())
                        .filter(|&l| {
                            let (x, y) = (self.links[l].from, self.links[l].to);
                            (x, y) == (a, b) || (x, y) == (b, a)
                        })
                        .collect()
                }
            };
            if hit.is_empty() {
                let name = match f {
                    Failure::Device(n) => n.clone(),
                    Failure::Cable(a, b) => format!("{a}->{b}"),
                };
                return Err(TopologyError::NoSuchLink { name });
            }
            out.extend(hit);
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// This topology without `links` (devices, interfaces and everything else kept, so
    /// device and resource names stay the same).
    pub fn without_links(&self, links: &[LinkId]) -> Result<Topology, TopologyError> {
        let name = format!("{} (failed: {} links)", self.name, links.len());
        self.with_links_where(name, |l| links.binary_search(&l).is_err())
    }

    /// This topology with only the links `keep` keeps, in their order (devices,
    /// interfaces and everything else kept): link `i` of the result is the `i`-th kept.
    pub fn with_links_where(&self, name: String, keep: impl Fn(LinkId) -> bool) -> Result<Topology, TopologyError> {
        self.rebuilt(name, |l, link| keep(l).then(|| link.clone()))
    }

    /// This topology with each link replaced by what `edit` returns (dropped on `None`),
    /// everything else kept, built and validated again.
    pub(crate) fn rebuilt(
        &self,
        name: String,
        edit: impl Fn(LinkId, &Link) -> Option<Link>,
    ) -> Result<Topology, TopologyError> {
        let mut b = TopologyBuilder::new(name);
        b.description(self.description.clone());
        b.round_startup_secs(self.round_startup_secs);
        b.host_costs(self.host);
        b.routing(self.routing);
        for d in &self.devices {
            b.add_device(d.clone(), "device");
        }
        for i in &self.interfaces {
            b.add_interface(i.clone(), "interface");
        }
        for (l, link) in self.links.iter().enumerate() {
            if let Some(link) = edit(l, link) {
                b.add_link(link, "link");
            }
        }
        b.default_ranks(self.default_ranks.clone());
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::preset;

    #[test]
    fn a_failed_spine_cable_is_routed_around_and_a_failed_nic_cuts_its_gpu_off() {
        let t = preset("hgx-h100x2").unwrap();
        let (a7, b0) = (t.device_id("A.gpu7").unwrap(), t.device_id("B.gpu0").unwrap());
        let before = t.route(a7, b0).unwrap();
        let cable: Failure = "leaf0.rail7 -> spine0".parse().unwrap();
        let links = t.failed_links(&[cable]).unwrap();
        assert_eq!(links.len(), 2);
        let cut = t.without_links(&links).unwrap();
        let after = cut.route(a7, b0).unwrap();
        assert!(after.links.len() < before.links.len(), "the route no longer splits over spine0");
        assert!(after.links.iter().all(|&(l, _)| cut.link_name(l) != "leaf0.rail7 -> spine0"));
        let nic = t.failed_links(&["A.nic7".parse().unwrap()]).unwrap();
        let cut = t.without_links(&nic).unwrap();
        // A.gpu7 still reaches A.gpu6 over NVLink but nothing outside its server.
        assert!(cut.route(a7, t.device_id("A.gpu6").unwrap()).is_ok());
        assert!(matches!(cut.route(a7, b0), Err(TopologyError::NoRoute { .. })));
        assert!(t.failed_links(&["nosuch".parse().unwrap()]).is_err());
        assert!(t.failed_links(&["A.gpu0 -> B.gpu0".parse().unwrap()]).is_err());
    }
}

//! k-port Clos fabrics (seed 001 §7.1.2, footnote 34). Leaves have d ports down and
//! u up (d + u = k; d:u is the oversubscription). Two tiers: every spine has one port
//! per leaf, so there are k leaves and u spines. Three tiers as fat-tree pods: a pod is
//! k/2 leaves fully joined to u aggregation switches; each aggregation switch has k/2
//! ports up to its own group of k/2 cores; every core has one port per pod, so there
//! are k pods and u·k/2 cores. Endpoints are single-GPU hosts (GPU, PCIe, NIC).

use super::{PresetParams, RailParams};
use crate::error::TopologyError;
use crate::graph::{DeviceId, DeviceKind, Topology, TopologyBuilder};

#[derive(Debug, Clone, PartialEq)]
pub struct ClosParams {
    pub ports: usize,
    pub tiers: u8,
    /// (d, u): leaf ports down and up.
    pub leaf_down_up: (usize, usize),
    /// Build only this many endpoints (the first leaves / pods); all when `None`.
    pub endpoints: Option<usize>,
    pub port_bytes_per_sec: f64,
    pub round_startup_secs: f64,
}

/// Endpoint and switch counts of a full Clos, from its shape alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosShape {
    pub endpoints: usize,
    pub leaves: usize,
    /// Spines (2 tiers) or aggregation switches (3 tiers).
    pub middle: usize,
    /// Cores (3 tiers only).
    pub cores: usize,
    pub pods: usize,
    pub leaves_per_pod: usize,
}

impl ClosShape {
    pub fn switches(&self) -> usize {
        self.leaves + self.middle + self.cores
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl ClosParams {
    /// Leaf ports (down, up) from a port count and a D:U ratio: the largest whole split,
    /// m·D' down and m·U' up for the reduced ratio D':U' and the largest m with
    /// m·(D'+U') ≤ k. Ports left over stay idle, as on real leaves (2:1 on 64 ports is
    /// 42 + 21, one idle). None when not even one group fits.
    pub fn leaf_ports(ports: usize, ratio: (usize, usize)) -> Option<(usize, usize)> {
        let (d, u) = ratio;
        if d == 0 || u == 0 {
            return None;
        }
        let g = gcd(d, u);
        let (d, u) = (d / g, u / g);
        let per = d.checked_add(u).filter(|&per| per <= ports)?;
        let m = ports / per;
        Some((m * d, m * u))
    }

    pub fn from_params(p: &mut PresetParams) -> Result<Self, TopologyError> {
        let ports = p.take_usize("k", 8)?;
        let tiers = p.take_usize("tiers", 2)?;
        let ratio = p.take_ratio("over", (1, 1))?;
        let endpoints = p.take_usize("endpoints", usize::MAX)?;
        if endpoints == 0 {
            return Err(p.bad("endpoints=0: at least 1 (leave it out for every endpoint)"));
        }
        let port = p.take_bytes_per_sec("port", 50e9)?;
        let alpha = p.take_secs("alpha", RailParams::default().round_startup_secs)?;
        if ports < 2 || ports % 2 != 0 {
            return Err(p.bad(format!("k={ports}: the port count must be even and at least 2")));
        }
        if tiers != 2 && tiers != 3 {
            return Err(p.bad(format!("tiers={tiers}: 2 or 3")));
        }
        let leaf_down_up = ClosParams::leaf_ports(ports, ratio).ok_or_else(|| {
            p.bad(format!("over={}:{} does not split k={ports} ports into whole down and up counts", ratio.0, ratio.1))
        })?;
        let params = ClosParams {
            ports,
            tiers: tiers as u8,
            leaf_down_up,
            endpoints: (endpoints != usize::MAX).then_some(endpoints),
            port_bytes_per_sec: port,
            round_startup_secs: alpha,
        };
        let full = params.shape().endpoints;
        if params.endpoints.is_none() && full > 4096 {
            return Err(
                p.bad(format!("this Clos has {full} endpoints; build a part of it with endpoints=N (N <= 4096)"))
            );
        }
        if let Some(n) = params.endpoints {
            if n > full || n > 4096 {
                return Err(p.bad(format!("endpoints={n}: at most {} (and at most 4096 are built)", full.min(4096))));
            }
        }
        Ok(params)
    }

    pub fn shape(&self) -> ClosShape {
        let k = self.ports;
        let (d, u) = self.leaf_down_up;
        if self.tiers == 2 {
            ClosShape { endpoints: k * d, leaves: k, middle: u, cores: 0, pods: 1, leaves_per_pod: k }
        } else {
            let leaves_per_pod = k / 2;
            ClosShape {
                endpoints: k * leaves_per_pod * d,
                leaves: k * leaves_per_pod,
                middle: k * u,
                cores: u * k / 2,
                pods: k,
                leaves_per_pod,
            }
        }
    }
}

pub fn clos(name: &str, p: &ClosParams) -> Result<Topology, TopologyError> {
    let shape = p.shape();
    let (d, u) = p.leaf_down_up;
    let k = p.ports;
    let endpoints = p.endpoints.unwrap_or(shape.endpoints);
    let leaves_needed = endpoints.div_ceil(d);
    let mut b = TopologyBuilder::new(name);
    b.description(format!(
        "{}-tier Clos of {k}-port switches, leaves {d} down / {u} up, {endpoints} of {} endpoints built",
        p.tiers, shape.endpoints
    ));
    b.round_startup_secs(p.round_startup_secs);
    let bw = p.port_bytes_per_sec;
    let new_switch = |b: &mut TopologyBuilder, name: String, tier: u8| -> DeviceId {
        let id = b.device(name, DeviceKind::Switch, None);
        let dev = b.device_mut(id);
        dev.tier = Some(tier);
        dev.in_network_reduction = true;
        id
    };
    let leaves: Vec<DeviceId> = (0..leaves_needed).map(|l| new_switch(&mut b, format!("leaf{l}"), 1)).collect();
    for e in 0..endpoints {
        let host = format!("h{e}");
        let gpu = b.device(format!("{host}.gpu"), DeviceKind::Gpu, Some(&host));
        let pcie = b.device(format!("{host}.pcie"), DeviceKind::PcieSwitch, Some(&host));
        let nic = b.device(format!("{host}.nic"), DeviceKind::Nic, Some(&host));
        b.duplex(gpu, pcie, 64e9, 0.0, &[]);
        b.duplex(pcie, nic, 64e9, 0.0, &[]);
        b.duplex(nic, leaves[e / d], bw, 0.0, &[]);
    }
    if p.tiers == 2 {
        for s in 0..u {
            let spine = new_switch(&mut b, format!("spine{s}"), 2);
            for &leaf in &leaves {
                b.duplex(leaf, spine, bw, 0.0, &[]);
            }
        }
    } else {
        let pods = leaves_needed.div_ceil(shape.leaves_per_pod);
        let cores: Vec<DeviceId> = (0..shape.cores).map(|c| new_switch(&mut b, format!("core{c}"), 3)).collect();
        for pod in 0..pods {
            let pod_leaves = &leaves[pod * shape.leaves_per_pod..((pod + 1) * shape.leaves_per_pod).min(leaves.len())];
            for a in 0..u {
                let agg = new_switch(&mut b, format!("pod{pod}.agg{a}"), 2);
                for &leaf in pod_leaves {
                    b.duplex(leaf, agg, bw, 0.0, &[]);
                }
                for &core in &cores[a * k / 2..(a + 1) * k / 2] {
                    b.duplex(agg, core, bw, 0.0, &[]);
                }
            }
        }
    }
    b.build()
}

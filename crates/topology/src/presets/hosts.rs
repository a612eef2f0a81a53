//! A cluster of hosts as the runtime sees it: ranks grouped by host, shared memory inside
//! a host (every rank's link to the host's hub at the shared-memory bandwidth) and one NIC
//! per host onto one switch at the network bandwidth. `railyard calibrate` writes one of
//! these with measured numbers; the runtime's tuner builds one to choose algorithms.

use crate::achievable::Achievable;
use crate::error::TopologyError;
use crate::graph::{DeviceKind, HostCosts, LinkClass, Topology, TopologyBuilder};

/// What a host adds to every schedule when nobody measured it. A host's memcpy: the
/// peers' memcpy_bw measured 10–13 GB/s on the development machine. Per message sent or
/// received (a frame header, a ring or socket handoff): at 4 ranks on 2 cores a double
/// binary tree's 8 B all-reduce (more messages per rank) took 8–11 µs against a single
/// tree's 6–7 µs, while the link model priced both at 4 rounds. (At 2 ranks recursive
/// doubling saves a round but reduces the whole vector, not half: with these it wins
/// below ~60 KB.)
pub const HOST_COSTS: HostCosts = HostCosts { local_bytes_per_sec: Some(10e9), message_secs: 0.5e-6 };

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transport {
    pub alpha_secs: f64,
    pub bytes_per_sec: f64,
}

/// `hosts[h]` lists the ranks on host h (every rank exactly once). Devices are named
/// `host{h}.rank{r}`; the default rank order is by rank number.
pub fn hosts(
    name: &str,
    hosts: &[Vec<usize>],
    shm: Transport,
    net: Option<Transport>,
    host: HostCosts,
    description: String,
) -> Result<Topology, TopologyError> {
    let size: usize = hosts.iter().map(Vec::len).sum();
    let mut b = TopologyBuilder::new(name);
    b.description(description);
    let alpha =
        if hosts.len() > 1 { net.map_or(shm.alpha_secs, |n| n.alpha_secs.max(shm.alpha_secs)) } else { shm.alpha_secs };
    b.round_startup_secs(alpha);
    b.host_costs(host);
    b.achievable(Achievable::measured(
        alpha,
        "the transports' own rates and start-up (railyard calibrate measures them): what railyard's runtime reaches",
    ));
    let switch = (hosts.len() > 1).then(|| b.device("network", DeviceKind::Switch, None));
    let mut host_of = vec![None; size];
    let mut hubs = Vec::new();
    for (h, ranks) in hosts.iter().enumerate() {
        let host = format!("host{h}");
        hubs.push(b.device(format!("{host}.shm"), DeviceKind::NvSwitch, Some(&host)));
        for &r in ranks {
            if r >= size || host_of[r].is_some() {
                return Err(TopologyError::BadPresetParameter {
                    preset: name.into(),
                    message: format!("rank {r} is not listed exactly once"),
                });
            }
            host_of[r] = Some(h);
        }
    }
    let mut ranks = Vec::with_capacity(size);
    for (r, h) in host_of.iter().enumerate() {
        let h = h.ok_or_else(|| TopologyError::BadPresetParameter {
            preset: name.into(),
            message: format!("rank {r} has no host"),
        })?;
        let host = format!("host{h}");
        let gpu = b.device(format!("{host}.rank{r}"), DeviceKind::Gpu, Some(&host));
        b.duplex_of_class(gpu, hubs[h], shm.bytes_per_sec, 0.0, &[], LinkClass::Memory);
        ranks.push(gpu);
    }
    if let (Some(sw), Some(net)) = (switch, net) {
        for (h, &hub) in hubs.iter().enumerate() {
            let nic = b.device(format!("host{h}.nic"), DeviceKind::Nic, Some(&format!("host{h}")));
            // Every rank's network traffic leaves through the host's one NIC.
            b.duplex(hub, nic, 1e12, 0.0, &[]);
            b.duplex(nic, sw, net.bytes_per_sec, 0.0, &[]);
        }
    }
    b.default_ranks(ranks);
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::{parse, write, FileFormat};

    /// A measured machine's shared memory is a `memory` link (not NVLink), its rates are
    /// what was measured (fractions 1, no NCCL latency added), and a written file keeps both.
    #[test]
    fn shared_memory_is_memory_and_measured_rates_are_expected_rates() {
        let shm = Transport { alpha_secs: 1e-6, bytes_per_sec: 10e9 };
        let net = Transport { alpha_secs: 20e-6, bytes_per_sec: 1e9 };
        let t = hosts("calibrated", &[vec![0, 1], vec![2, 3]], shm, Some(net), HOST_COSTS, "test".into()).unwrap();
        let classes: Vec<LinkClass> = t.links.iter().filter(|l| l.bytes_per_sec == 10e9).map(|l| l.class).collect();
        assert_eq!(classes.len(), 8);
        assert!(classes.iter().all(|&c| c == LinkClass::Memory));
        assert_eq!(t.achievable.fraction(LinkClass::Memory), 1.0);
        assert_eq!(t.achievable.fraction(LinkClass::Nic), 1.0);
        let again = parse(&write(&t, FileFormat::Toml).unwrap(), FileFormat::Toml, "again").unwrap();
        let memory = again.links.iter().filter(|l| l.class == LinkClass::Memory).count();
        assert_eq!(memory, 8);
        assert_eq!(again.achievable.call_secs, [0.0; 3]);
    }
}

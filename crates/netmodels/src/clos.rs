//! Clos sizing and cuts (seed 001 §7.1.2, footnote 34): a k-port switch, leaves with
//! d ports down and u up. Two tiers: every spine has a port per leaf, so k leaves,
//! u spines, k·d endpoints. Three tiers (fat-tree pods, upper tiers non-blocking):
//! k pods of k/2 leaves and u aggregation switches, u·k/2 cores, k·(k/2)·d endpoints.
//! The bisection bandwidth is half of the top-tier links; a job that fills whole
//! leaves is cut from the rest by all of those leaves' uplinks.

use serde::Serialize;

use crate::error::NetModelError;

/// The largest switch radix accepted: 2,048 ports (today's largest switches have 512),
/// which keeps a 3-tier fabric's counts (k·(k/2)·d endpoints) far inside 64 bits.
pub const MAX_PORTS: usize = 2048;

/// A leaf's ports: `down` to endpoints, `up` to the next tier, `idle` unused (a ratio
/// that does not divide the radix, e.g. 2:1 on 64 ports is 42 + 21 with 1 idle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LeafSplit {
    pub down: usize,
    pub up: usize,
    pub idle: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClosInput {
    pub ports: usize,
    pub tiers: u8,
    pub down: usize,
    pub up: usize,
    pub port_bytes_per_sec: f64,
    pub job_cards: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobCut {
    pub cards: usize,
    /// Whole leaves the job occupies: ⌈cards / d⌉.
    pub leaves: usize,
    /// Uplinks of those leaves.
    pub cut_links: usize,
    pub job_cut_bytes_per_sec: f64,
    pub per_card_bytes_per_sec: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClosCut {
    pub ports: usize,
    pub tiers: u8,
    pub leaf_down: usize,
    pub leaf_up: usize,
    /// Leaf ports neither down nor up (k − d − u).
    pub leaf_idle: usize,
    /// d / u
    pub oversubscription: f64,
    pub endpoints: usize,
    pub switches: usize,
    pub leaves: usize,
    /// Spines (2 tiers) or aggregation switches (3 tiers).
    pub spines: usize,
    pub cores: usize,
    pub top_links: usize,
    pub bisection_bytes_per_sec: f64,
    /// What a non-blocking network would give the same endpoints: endpoints/2 x port.
    pub nonblocking_bisection_bytes_per_sec: f64,
    /// Bisection share per endpoint crossing the cut: bisection / (endpoints / 2).
    pub per_endpoint_bisection_bytes_per_sec: f64,
    pub job: Option<JobCut>,
    // The three keys the issue names, flattened for scripts.
    pub job_cut_bytes_per_sec: Option<f64>,
    pub per_card_bytes_per_sec: Option<f64>,
}

/// The largest whole split of k ports in the ratio d:u, as the Clos generator makes
/// its leaves (`ClosParams::leaf_ports`); the rest stay idle.
pub fn leaf_ports(ports: usize, ratio: (usize, usize)) -> Result<LeafSplit, NetModelError> {
    check_ports(ports)?;
    let bad = |message: String| NetModelError::BadInput { field: "oversubscription".into(), message };
    let (down, up) = railyard_topology::presets::ClosParams::leaf_ports(ports, ratio).ok_or_else(|| {
        bad(format!("{}:{}: both sides at least 1, and one group of them within {ports} ports", ratio.0, ratio.1))
    })?;
    Ok(LeafSplit { down, up, idle: ports - down - up })
}

/// Explicit down and up port counts; the rest of the k ports are idle.
pub fn leaf_ports_explicit(ports: usize, down: usize, up: usize) -> Result<LeafSplit, NetModelError> {
    check_ports(ports)?;
    if down == 0 || up == 0 || down.checked_add(up).is_none_or(|used| used > ports) {
        return Err(NetModelError::BadInput {
            field: "down/up".into(),
            message: format!("{down} down + {up} up: both at least 1, together at most the {ports} ports"),
        });
    }
    Ok(LeafSplit { down, up, idle: ports - down - up })
}

fn check_ports(k: usize) -> Result<(), NetModelError> {
    if k < 2 || !k.is_multiple_of(2) || k > MAX_PORTS {
        return Err(NetModelError::BadInput {
            field: "ports".into(),
            message: format!("{k}: must be even, from 2 to {MAX_PORTS}"),
        });
    }
    Ok(())
}

pub fn clos_cut(input: &ClosInput) -> Result<ClosCut, NetModelError> {
    let ClosInput { ports: k, tiers, down: d, up: u, port_bytes_per_sec: bw, job_cards } = *input;
    let split = leaf_ports_explicit(k, d, u)?;
    if !(1.0..=1e16).contains(&bw) {
        return Err(NetModelError::BadInput {
            field: "port bandwidth".into(),
            message: format!("{} bytes/s: must be 1 byte/s to 10 PB/s", railyard_units::units::format_number(bw)),
        });
    }
    let (endpoints, leaves, spines, cores, top_links) = match tiers {
        2 => (k * d, k, u, 0, k * u),
        3 => {
            let leaves = k * (k / 2);
            let cores = u * k / 2;
            (leaves * d, leaves, k * u, cores, cores * k)
        }
        _ => return Err(NetModelError::BadInput { field: "tiers".into(), message: format!("{tiers}: 2 or 3") }),
    };
    let bisection = (top_links / 2) as f64 * bw;
    let job = match job_cards {
        None => None,
        Some(0) => {
            return Err(NetModelError::BadInput { field: "job-cards".into(), message: "must be at least 1".into() })
        }
        Some(cards) if cards > endpoints => {
            return Err(NetModelError::BadInput {
                field: "job-cards".into(),
                message: format!("{cards} cards but the fabric has {endpoints} endpoints"),
            })
        }
        Some(cards) => {
            let job_leaves = cards.div_ceil(d);
            let cut_links = job_leaves * u;
            let cut = cut_links as f64 * bw;
            Some(JobCut {
                cards,
                leaves: job_leaves,
                cut_links,
                job_cut_bytes_per_sec: cut,
                // A card has one port: more uplinks than cards need cannot give it more.
                per_card_bytes_per_sec: (cut / cards as f64).min(bw),
            })
        }
    };
    Ok(ClosCut {
        ports: k,
        tiers,
        leaf_down: d,
        leaf_up: u,
        leaf_idle: split.idle,
        oversubscription: d as f64 / u as f64,
        endpoints,
        switches: leaves + spines + cores,
        leaves,
        spines,
        cores,
        top_links,
        bisection_bytes_per_sec: bisection,
        nonblocking_bisection_bytes_per_sec: (endpoints / 2) as f64 * bw,
        per_endpoint_bisection_bytes_per_sec: (bisection / (endpoints / 2) as f64).min(bw),
        job_cut_bytes_per_sec: job.as_ref().map(|j| j.job_cut_bytes_per_sec),
        per_card_bytes_per_sec: job.as_ref().map(|j| j.per_card_bytes_per_sec),
        job,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(tiers: u8, ratio: (usize, usize), job: Option<usize>) -> ClosCut {
        let LeafSplit { down, up, .. } = leaf_ports(64, ratio).unwrap();
        clos_cut(&ClosInput { ports: 64, tiers, down, up, port_bytes_per_sec: 50e9, job_cards: job }).unwrap()
    }

    #[test]
    fn seed_7_1_2_numbers() {
        let two = cut(2, (1, 1), Some(1024));
        assert_eq!((two.endpoints, two.switches, two.leaves, two.spines), (2048, 96, 64, 32));
        assert!((two.bisection_bytes_per_sec - 51.2e12).abs() < 1.0);
        assert!((two.job_cut_bytes_per_sec.unwrap() - 51.2e12).abs() < 1.0);
        assert!((two.per_card_bytes_per_sec.unwrap() - 50e9).abs() < 1.0);
        let three = cut(3, (1, 1), None);
        assert_eq!((three.endpoints, three.switches), (65536, 5120));
        assert!((three.bisection_bytes_per_sec - 1638.4e12).abs() < 1.0);
        let over = cut(2, (3, 1), Some(1024));
        assert_eq!((over.endpoints, over.switches, over.leaf_down, over.leaf_up), (3072, 80, 48, 16));
        assert!((over.bisection_bytes_per_sec - 25.6e12).abs() < 1.0);
        assert!((over.nonblocking_bisection_bytes_per_sec - 76.8e12).abs() < 1.0);
        // 16.7 GB/s per endpoint across the bisection.
        assert!((over.per_endpoint_bisection_bytes_per_sec / 1e9 - 16.67).abs() < 0.01);
        let job = over.job.unwrap();
        assert_eq!((job.leaves, job.cut_links), (22, 352));
        assert!((job.job_cut_bytes_per_sec - 17.6e12).abs() < 1.0);
        assert!((job.per_card_bytes_per_sec / 1e9 - 17.1875).abs() < 1e-9);
    }

    #[test]
    fn uneven_ratios_take_the_largest_whole_split() {
        assert_eq!(leaf_ports(64, (2, 1)).unwrap(), LeafSplit { down: 42, up: 21, idle: 1 });
        assert_eq!(leaf_ports(64, (4, 2)).unwrap(), LeafSplit { down: 42, up: 21, idle: 1 });
        assert_eq!(leaf_ports(64, (5, 2)).unwrap(), LeafSplit { down: 45, up: 18, idle: 1 });
        assert_eq!(leaf_ports(64, (3, 1)).unwrap(), LeafSplit { down: 48, up: 16, idle: 0 });
        let c =
            clos_cut(&ClosInput { ports: 64, tiers: 2, down: 42, up: 21, port_bytes_per_sec: 50e9, job_cards: None })
                .unwrap();
        // 64 leaves x 42 endpoints; 21 spines; bisection = 64·21/2 links.
        assert_eq!((c.endpoints, c.spines, c.leaf_idle, c.top_links), (2688, 21, 1, 1344));
        assert!((c.bisection_bytes_per_sec - 672.0 * 50e9).abs() < 1.0);
        assert!((c.oversubscription - 2.0).abs() < 1e-12);
    }

    /// More ports up than down (1:2) builds more cut than the cards can fill: each still
    /// has one 50 GB/s port.
    #[test]
    fn a_card_never_gets_more_than_its_port() {
        let split = leaf_ports(64, (1, 2)).unwrap();
        let c = clos_cut(&ClosInput {
            ports: 64,
            tiers: 2,
            down: split.down,
            up: split.up,
            port_bytes_per_sec: 50e9,
            job_cards: Some(64),
        })
        .unwrap();
        assert_eq!((split.down, split.up, split.idle), (21, 42, 1));
        assert_eq!(c.per_card_bytes_per_sec, Some(50e9));
        assert_eq!(c.per_endpoint_bisection_bytes_per_sec, 50e9);
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(leaf_ports(4, (5, 2)).is_err());
        assert!(leaf_ports(64, (usize::MAX, usize::MAX - 1)).is_err());
        assert!(leaf_ports(6_000_000, (1, 1)).unwrap_err().to_string().contains("2048"));
        assert!(leaf_ports_explicit(64, 40, 30).is_err());
        assert!(leaf_ports_explicit(64, usize::MAX, 2).is_err());
        assert!(clos_cut(&ClosInput { ports: 7, tiers: 2, down: 4, up: 3, port_bytes_per_sec: 1.0, job_cards: None })
            .is_err());
        assert!(clos_cut(&ClosInput { ports: 8, tiers: 4, down: 4, up: 4, port_bytes_per_sec: 1.0, job_cards: None })
            .is_err());
        assert!(clos_cut(&ClosInput {
            ports: 8,
            tiers: 2,
            down: 4,
            up: 4,
            port_bytes_per_sec: 1.0,
            job_cards: Some(33)
        })
        .is_err());
    }
}

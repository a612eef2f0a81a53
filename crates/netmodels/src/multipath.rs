//! One message over several paths (seed 001 §7.5.3): packets split over paths save
//! serialisation time but are delivered in order, so a slower path or a lost packet
//! holds back everything behind it; a reorder buffer keeps what arrived early.
//! Selective repeat resends only the lost packets; go-back-N resends from the first
//! loss to the end. Splitting pays only while the extra delay of the slowest path is
//! below the serialisation time it saves.

use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use crate::packets::{deliver, round_robin, split, Delivery, Path};
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_secs};
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathInput {
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub bytes_per_sec: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub delay_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Loss {
    pub packet: usize,
    /// From the end of the packet's first send to its resend.
    #[serde(deserialize_with = "quantity::secs")]
    pub recovery_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultipathScenario {
    pub name: String,
    pub paths: Vec<PathInput>,
    /// Packets per path; round robin when absent.
    #[serde(default)]
    pub split: Option<Vec<usize>>,
    #[serde(default)]
    pub losses: Vec<Loss>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MultipathInput {
    #[serde(deserialize_with = "quantity::bytes")]
    pub message_bytes: f64,
    #[serde(deserialize_with = "quantity::bytes")]
    pub packet_bytes: f64,
    pub scenarios: Vec<MultipathScenario>,
}

impl Default for MultipathInput {
    fn default() -> Self {
        // seed 001 §7.5.3 and footnote 24: 32 KiB (four BF16 hidden vectors) as eight 4 KiB
        // packets over two 50 GB/s paths.
        let path = |us: f64| PathInput { bytes_per_sec: 50e9, delay_secs: us * 1e-6 };
        MultipathInput {
            message_bytes: 32768.0,
            packet_bytes: 4096.0,
            scenarios: vec![
                MultipathScenario {
                    name: "two paths, 1 µs each".into(),
                    paths: vec![path(1.0), path(1.0)],
                    split: None,
                    losses: vec![],
                },
                MultipathScenario {
                    name: "second path 9 µs".into(),
                    paths: vec![path(1.0), path(9.0)],
                    split: None,
                    losses: vec![],
                },
                MultipathScenario {
                    name: "packet 0 lost, resent 20 µs later".into(),
                    paths: vec![path(1.0), path(1.0)],
                    split: None,
                    losses: vec![Loss { packet: 0, recovery_secs: 20e-6 }],
                },
                MultipathScenario {
                    name: "5 + 3 packets, 1 µs and 9 µs".into(),
                    paths: vec![path(1.0), path(9.0)],
                    split: Some(vec![5, 3]),
                    losses: vec![],
                },
            ],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MultipathResult {
    pub name: String,
    pub delivery: Delivery,
    /// Everything on the first path alone, nothing lost.
    pub single_path_secs: f64,
    pub selective_repeat_resent_bytes: f64,
    pub go_back_n_resent_bytes: f64,
    /// The extra delay of the slowest path at which splitting stops paying.
    pub break_even_extra_delay_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MultipathOutput {
    pub packets: usize,
    pub scenarios: Vec<MultipathResult>,
}

pub fn packet_count(message_bytes: f64, packet_bytes: f64) -> Result<usize, NetModelError> {
    positive("packet_bytes", packet_bytes)?;
    let n = (message_bytes / packet_bytes).ceil();
    if n > 1e6 {
        return Err(NetModelError::BadInput {
            field: "message_bytes".into(),
            message: "more than 1000000 packets".into(),
        });
    }
    Ok(n as usize)
}

pub fn multipath(input: &MultipathInput) -> Result<MultipathOutput, NetModelError> {
    let n = packet_count(input.message_bytes, input.packet_bytes)?;
    let mut scenarios = Vec::new();
    for (k, s) in input.scenarios.iter().enumerate() {
        if s.paths.is_empty() {
            return Err(NetModelError::BadInput {
                field: format!("scenarios[{k}].paths"),
                message: "needs at least one path".into(),
            });
        }
        for (p, path) in s.paths.iter().enumerate() {
            positive(&format!("scenarios[{k}].paths[{p}].bytes_per_sec"), path.bytes_per_sec)?;
        }
        let paths: Vec<Path> =
            s.paths.iter().map(|p| Path { bytes_per_sec: p.bytes_per_sec, delay_secs: p.delay_secs }).collect();
        let assignment = match &s.split {
            Some(counts) => {
                if counts.len() != paths.len() || counts.iter().sum::<usize>() != n {
                    return Err(NetModelError::BadInput {
                        field: format!("scenarios[{k}].split"),
                        message: format!("needs one count per path ({}) adding up to {n} packets", paths.len()),
                    });
                }
                split(counts)
            }
            None => round_robin(n, paths.len()),
        };
        for (l, loss) in s.losses.iter().enumerate() {
            if loss.packet >= n {
                return Err(NetModelError::BadInput {
                    field: format!("scenarios[{k}].losses[{l}].packet"),
                    message: format!("there are {n} packets"),
                });
            }
        }
        let lost: Vec<(usize, f64)> = s.losses.iter().map(|l| (l.packet, l.recovery_secs)).collect();
        let delivery = deliver(input.message_bytes, input.packet_bytes, &paths, &assignment, &lost);
        let single = deliver(input.message_bytes, input.packet_bytes, &paths[..1], &vec![0; n], &[]).completion_secs;
        // Same split with every path as fast as the first: what splitting saves.
        let even: Vec<Path> = paths.iter().map(|p| Path { delay_secs: paths[0].delay_secs, ..p.clone() }).collect();
        let split_even = deliver(input.message_bytes, input.packet_bytes, &even, &assignment, &[]).completion_secs;
        let first_loss = s.losses.iter().map(|l| l.packet).min();
        scenarios.push(MultipathResult {
            name: s.name.clone(),
            delivery,
            single_path_secs: single,
            selective_repeat_resent_bytes: s.losses.len() as f64 * input.packet_bytes,
            go_back_n_resent_bytes: first_loss.map_or(0.0, |f| input.message_bytes - f as f64 * input.packet_bytes),
            break_even_extra_delay_secs: single - split_even,
        });
    }
    Ok(MultipathOutput { packets: n, scenarios })
}

impl MultipathOutput {
    pub fn markdown(&self, input: &MultipathInput) -> String {
        let mut out = format!(
            "# One message over several paths\n\n{} in {} packets of {}.\n\n",
            format_bytes(input.message_bytes),
            self.packets,
            format_bytes(input.packet_bytes)
        );
        let mut t = Table::new([
            "scenario",
            "all delivered",
            "single path",
            "peak reorder buffer",
            "resent: selective / go-back-N",
            "break-even extra delay",
        ]);
        for s in &self.scenarios {
            t.row([
                s.name.clone(),
                format_secs(s.delivery.completion_secs),
                format_secs(s.single_path_secs),
                format!(
                    "{} ({} packets)",
                    format_bytes(s.delivery.peak_reorder_bytes),
                    s.delivery.peak_reorder_packets
                ),
                format!(
                    "{} / {}",
                    format_bytes(s.selective_repeat_resent_bytes),
                    format_bytes(s.go_back_n_resent_bytes)
                ),
                format_secs(s.break_even_extra_delay_secs),
            ]);
        }
        out.push_str(&t.render());
        out.push_str("\nIn-order delivery waits for the slowest earlier packet: splitting saves serialisation, a slower path or a loss costs its whole delay.\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_7_5_3_multipath() {
        let o = multipath(&MultipathInput::default()).unwrap();
        let us = |x: f64| (x * 1e8).round() / 100.0;
        let s = &o.scenarios;
        assert_eq!(us(s[0].delivery.completion_secs), 1.33);
        assert_eq!(us(s[0].single_path_secs), 1.66);
        assert_eq!(us(s[1].delivery.completion_secs), 9.33);
        assert_eq!(s[1].delivery.peak_reorder_bytes, 12288.0);
        assert_eq!((s[2].delivery.completion_secs * 1e7).round() / 10.0, 21.2);
        assert_eq!(s[2].delivery.peak_reorder_bytes, 28672.0);
        assert_eq!((s[2].selective_repeat_resent_bytes, s[2].go_back_n_resent_bytes), (4096.0, 32768.0));
        assert!((s[0].break_even_extra_delay_secs * 1e9 - 327.68).abs() < 1e-6);
    }
}

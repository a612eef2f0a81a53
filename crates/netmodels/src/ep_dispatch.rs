//! Expert-parallel dispatch and combine traffic (seed 001 §7.2.3): the matrix V[i][j]
//! of bytes from sender i to receiver j; row sums are what each sender sends, column
//! sums what each receiver takes in; summing through each NIC, each shared interface
//! and the cut, then dividing by the bandwidth, gives a time per resource — the largest
//! is the answer (the §7.1 resource model on an irregular exchange). Combine sends the
//! expert outputs back: the transpose, in its own dtype.

use serde::{Deserialize, Serialize};

use crate::error::positive;
use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs};
use railyard_units::Table;

/// How the receiving server takes traffic in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiverLayout {
    pub name: String,
    /// NICs (or ports) the receivers' traffic is spread over; receiver j uses NIC j mod nics.
    pub nics: usize,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub nic_bytes_per_sec: f64,
    /// A shared interface all of those NICs sit behind (a PCIe slot), if any.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "quantity::optional_bytes_per_sec")]
    pub shared_bytes_per_sec: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpDispatchInput {
    pub tokens: u64,
    pub top_k: u64,
    /// Bytes of one dispatched activation (hidden size x dtype).
    #[serde(deserialize_with = "quantity::bytes")]
    pub dispatch_bytes: f64,
    /// Bytes of one combined expert output (its own dtype).
    #[serde(deserialize_with = "quantity::bytes")]
    pub combine_bytes: f64,
    /// Share of dispatches whose expert is on the other server.
    #[serde(deserialize_with = "quantity::non_negative")]
    pub cross_fraction: f64,
    pub senders: usize,
    pub receivers: usize,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub sender_nic_bytes_per_sec: f64,
    /// Optional explicit remote dispatch counts, senders x receivers; replaces the
    /// uniform spread of tokens x top_k x cross_fraction.
    #[serde(default)]
    pub routing: Option<Vec<Vec<u64>>>,
    pub layouts: Vec<ReceiverLayout>,
}

impl Default for EpDispatchInput {
    fn default() -> Self {
        // seed 001 §7.2.3 and footnote 7: 1024 tokens, top-8, 8 KiB each, half remote;
        // into one 50 GB/s NIC, eight NICs, or the control setting's shared 32 GB/s slot.
        EpDispatchInput {
            tokens: 1024,
            top_k: 8,
            dispatch_bytes: 8192.0,
            combine_bytes: 8192.0,
            cross_fraction: 0.5,
            senders: 8,
            receivers: 8,
            sender_nic_bytes_per_sec: 50e9,
            routing: None,
            layouts: vec![
                ReceiverLayout { name: "one NIC".into(), nics: 1, nic_bytes_per_sec: 50e9, shared_bytes_per_sec: None },
                ReceiverLayout {
                    name: "eight NICs".into(),
                    nics: 8,
                    nic_bytes_per_sec: 50e9,
                    shared_bytes_per_sec: None,
                },
                ReceiverLayout {
                    name: "two ports behind one PCIe slot".into(),
                    nics: 2,
                    nic_bytes_per_sec: 25e9,
                    shared_bytes_per_sec: Some(32e9),
                },
            ],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceTime {
    pub resource: String,
    pub bytes: f64,
    pub bytes_per_sec: f64,
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Direction {
    pub total_bytes: f64,
    pub per_sender_bytes: Vec<f64>,
    pub per_receiver_bytes: Vec<f64>,
    /// Every resource with its time; the largest is `bottleneck`.
    pub resources: Vec<ResourceTime>,
    pub bottleneck: ResourceTime,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutResult {
    pub layout: String,
    pub dispatch: Direction,
    pub combine: Direction,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpDispatchOutput {
    pub remote_dispatches: f64,
    /// Dispatch matrix in bytes, senders x receivers.
    pub matrix_bytes: Vec<Vec<f64>>,
    pub layouts: Vec<LayoutResult>,
}

fn time(resource: String, bytes: f64, bytes_per_sec: f64) -> ResourceTime {
    ResourceTime { resource, bytes, bytes_per_sec, secs: bytes / bytes_per_sec }
}

/// Times of one direction: `v[i][j]` bytes from i (each on its own NIC of `send_bw`) to
/// j (spread over the layout's NICs); `receiving_layout` says which side is the layout.
fn direction(v: &[Vec<f64>], send_bw: f64, layout: &ReceiverLayout, layout_receives: bool) -> Direction {
    let rows = v.len();
    let cols = v.first().map_or(0, Vec::len);
    let per_sender: Vec<f64> = (0..rows).map(|i| v[i].iter().sum()).collect();
    let per_receiver: Vec<f64> = (0..cols).map(|j| (0..rows).map(|i| v[i][j]).sum()).collect();
    let total: f64 = per_sender.iter().sum();
    let (plain_side, layout_side, plain_word, layout_word) = if layout_receives {
        (&per_sender, &per_receiver, "sender", "receiver NIC")
    } else {
        (&per_receiver, &per_sender, "receiver", "sender NIC")
    };
    let mut resources: Vec<ResourceTime> =
        plain_side.iter().enumerate().map(|(i, &b)| time(format!("{plain_word} {i} NIC"), b, send_bw)).collect();
    let mut nic_bytes = vec![0.0; layout.nics];
    for (j, &b) in layout_side.iter().enumerate() {
        nic_bytes[j % layout.nics] += b;
    }
    resources.extend(
        nic_bytes.iter().enumerate().map(|(n, &b)| time(format!("{layout_word} {n}"), b, layout.nic_bytes_per_sec)),
    );
    let mut layout_capacity = layout.nics as f64 * layout.nic_bytes_per_sec;
    if let Some(shared) = layout.shared_bytes_per_sec {
        resources.push(time("shared interface".into(), total, shared));
        layout_capacity = layout_capacity.min(shared);
    }
    let cut_bw = (plain_side.len() as f64 * send_bw).min(layout_capacity);
    resources.push(time("cut between the servers".into(), total, cut_bw));
    // The first of equally slow resources is named (the interface before the cut it causes).
    let bottleneck = resources
        .iter()
        .fold(None::<&ResourceTime>, |best, r| match best {
            Some(b) if r.secs <= b.secs * (1.0 + 1e-12) => Some(b),
            _ => Some(r),
        })
        .cloned()
        .unwrap_or_else(|| time("nothing".into(), 0.0, 1.0));
    Direction {
        total_bytes: total,
        per_sender_bytes: per_sender,
        per_receiver_bytes: per_receiver,
        resources,
        bottleneck,
    }
}

/// The matrix is held and printed whole: at most 2^20 sender × receiver cells (1,024 ×
/// 1,024), and at most 4,096 on either side or NICs in a layout. The seed's case is 8 × 8.
pub const MAX_MATRIX_CELLS: usize = 1 << 20;
pub const MAX_SIDE: usize = 4096;
/// Receiver layouts compared in one run.
pub const MAX_LAYOUTS: usize = 64;

pub fn ep_dispatch(input: &EpDispatchInput) -> Result<EpDispatchOutput, NetModelError> {
    for (field, n) in [("senders", input.senders), ("receivers", input.receivers)] {
        if !(1..=MAX_SIDE).contains(&n) {
            return Err(NetModelError::BadInput {
                field: field.into(),
                message: format!("{n}: must be 1 to {MAX_SIDE}"),
            });
        }
    }
    if input.senders * input.receivers > MAX_MATRIX_CELLS {
        return Err(NetModelError::BadInput {
            field: "senders/receivers".into(),
            message: format!(
                "{} x {} is more than the {MAX_MATRIX_CELLS} cells of matrix this model holds and prints",
                input.senders, input.receivers
            ),
        });
    }
    if input.cross_fraction > 1.0 {
        return Err(NetModelError::BadInput {
            field: "cross_fraction".into(),
            message: "is a fraction, at most 1".into(),
        });
    }
    positive("sender_nic_bytes_per_sec", input.sender_nic_bytes_per_sec)?;
    let counts: Vec<Vec<f64>> = match &input.routing {
        Some(r) => {
            if r.len() != input.senders || r.iter().any(|row| row.len() != input.receivers) {
                return Err(NetModelError::BadInput {
                    field: "routing".into(),
                    message: format!("must be {} rows of {} counts", input.senders, input.receivers),
                });
            }
            r.iter().map(|row| row.iter().map(|&c| c as f64).collect()).collect()
        }
        None => {
            let remote = input.tokens as f64 * input.top_k as f64 * input.cross_fraction;
            let each = remote / (input.senders * input.receivers) as f64;
            vec![vec![each; input.receivers]; input.senders]
        }
    };
    let remote_dispatches: f64 = counts.iter().flatten().sum();
    let matrix: Vec<Vec<f64>> = counts.iter().map(|r| r.iter().map(|c| c * input.dispatch_bytes).collect()).collect();
    // Combine returns every dispatched activation from the expert: the transpose.
    let combine: Vec<Vec<f64>> = (0..input.receivers)
        .map(|j| (0..input.senders).map(|i| counts[i][j] * input.combine_bytes).collect())
        .collect();
    if input.layouts.len() > MAX_LAYOUTS {
        return Err(NetModelError::BadInput {
            field: "layouts".into(),
            message: format!("{} layouts; at most {MAX_LAYOUTS} are compared in one run", input.layouts.len()),
        });
    }
    let mut layouts = Vec::with_capacity(input.layouts.len());
    for (k, l) in input.layouts.iter().enumerate() {
        if !(1..=MAX_SIDE).contains(&l.nics) {
            return Err(NetModelError::BadInput {
                field: format!("layouts[{k}].nics"),
                message: format!("{}: must be 1 to {MAX_SIDE}", l.nics),
            });
        }
        positive(&format!("layouts[{k}].nic_bytes_per_sec"), l.nic_bytes_per_sec)?;
        if let Some(s) = l.shared_bytes_per_sec {
            positive(&format!("layouts[{k}].shared_bytes_per_sec"), s)?;
        }
        layouts.push(LayoutResult {
            layout: l.name.clone(),
            dispatch: direction(&matrix, input.sender_nic_bytes_per_sec, l, true),
            combine: direction(&combine, input.sender_nic_bytes_per_sec, l, false),
        });
    }
    Ok(EpDispatchOutput { remote_dispatches, matrix_bytes: matrix, layouts })
}

impl EpDispatchOutput {
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# Expert-parallel dispatch\n\n{} remote dispatches, {} each way in total.\n\n",
            self.remote_dispatches,
            format_bytes(self.layouts.first().map_or(0.0, |l| l.dispatch.total_bytes))
        );
        let mut t = Table::new([
            "receiver layout",
            "dispatch time",
            "bound by",
            "bytes there",
            "its bandwidth",
            "combine time",
        ]);
        for l in &self.layouts {
            let b = &l.dispatch.bottleneck;
            t.row([
                l.layout.clone(),
                format_secs(b.secs),
                b.resource.clone(),
                format_bytes(b.bytes),
                format_bytes_per_sec(b.bytes_per_sec),
                format_secs(l.combine.bottleneck.secs),
            ]);
        }
        out.push_str(&t.render());
        out.push_str(
            "\nEach time is the largest of per-sender, per-NIC, shared-interface and cut times. Spreading receivers over \
             NICs removes the single-NIC hot spot; ports behind one slot move the bottleneck to the slot.\n",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_past_the_limits_are_refused_before_anything_is_allocated() {
        let with = |senders, receivers, tokens| EpDispatchInput { senders, receivers, tokens, ..Default::default() };
        let e = ep_dispatch(&with(100_000, 100_000, 1024)).unwrap_err().to_string();
        assert!(e.contains("senders") && e.contains("4096"), "{e}");
        let e = ep_dispatch(&with(4096, 4096, 1024)).unwrap_err().to_string();
        assert!(e.contains("1048576 cells"), "{e}");
        // Large counts do not overflow: tokens x top_k is taken in floating point.
        let o = ep_dispatch(&with(1024, 1024, u64::MAX)).unwrap();
        assert!(o.remote_dispatches.is_finite() && o.remote_dispatches > 1e19);
    }

    #[test]
    fn seed_7_2_3() {
        let o = ep_dispatch(&EpDispatchInput::default()).unwrap();
        assert_eq!(o.remote_dispatches, 4096.0);
        assert_eq!(o.layouts[0].dispatch.total_bytes, 32.0 * 1048576.0);
        assert!((o.layouts[0].dispatch.bottleneck.secs * 1e3 - 0.671).abs() < 0.001);
        assert!((o.layouts[1].dispatch.bottleneck.secs * 1e3 - 0.0839).abs() < 0.0001);
        assert!((o.layouts[2].dispatch.bottleneck.secs * 1e3 - 1.049).abs() < 0.001);
        assert_eq!(o.layouts[2].dispatch.bottleneck.resource, "shared interface");
        // Combine is the transpose: the hot receiver is the hot sender.
        assert_eq!(o.layouts[0].combine.total_bytes, o.layouts[0].dispatch.total_bytes);
        assert!((o.layouts[0].combine.bottleneck.secs - o.layouts[0].dispatch.bottleneck.secs).abs() < 1e-15);
    }

    #[test]
    fn combine_in_bf16_after_fp8_dispatch_doubles() {
        let input = EpDispatchInput { dispatch_bytes: 7168.0, combine_bytes: 14336.0, ..EpDispatchInput::default() };
        let o = ep_dispatch(&input).unwrap();
        assert_eq!(o.layouts[1].combine.total_bytes, 2.0 * o.layouts[1].dispatch.total_bytes);
    }
}

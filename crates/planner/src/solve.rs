//! `--solve`: the chapter's crossover and optimum questions answered directly — the
//! card multiple where compute equals communication, the latest ready time that still
//! hides a communication, the size where start-up equals payload, the super-node size
//! and TP degree with the best tokens/s, the egress where hierarchical overtakes the flat
//! ring — and, for each step answer, the input it is most sensitive to: the change in
//! step time when each input moves 10% in the direction that helps.

use railyard_topology::units::{format_bytes_per_sec, format_secs};
use serde::Serialize;

use crate::error::PlannerError;
use crate::supernode::{Network, SupernodeInput};
use crate::Report;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub question: String,
    pub value: f64,
    /// "x", "s", "bytes", "GPUs", "B/s".
    pub unit: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sensitivity {
    /// What was varied around: "step: hierarchical, ready at 17 ms".
    pub of: String,
    pub step_secs: f64,
    /// (input, step time change when it improves by 10%), largest change first.
    pub inputs: Vec<(String, f64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Solved {
    pub answers: Vec<Answer>,
    pub sensitivity: Vec<Sensitivity>,
}

/// The most super-node sizes `--solve` tries.
pub const MAX_CANDIDATE_SIZES: usize = 64;

fn sorted(mut inputs: Vec<(String, f64)>) -> Vec<(String, f64)> {
    inputs.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
    inputs
}

/// Every `x` in `lo..hi` where `f` changes sign: a log-spaced scan of `steps` points,
/// then bisection inside each bracket.
pub fn crossings(lo: f64, hi: f64, steps: usize, f: impl Fn(f64) -> f64) -> Vec<f64> {
    let at = |i: usize| (lo.ln() + (hi.ln() - lo.ln()) * i as f64 / steps as f64).exp();
    let mut out = Vec::new();
    let mut prev = (at(0), f(at(0)));
    for i in 1..=steps {
        let x = at(i);
        let fx = f(x);
        if prev.1.is_finite() && fx.is_finite() && prev.1 != 0.0 && fx != 0.0 && prev.1.signum() != fx.signum() {
            let (mut a, mut b, fa) = (prev.0.ln(), x.ln(), prev.1);
            for _ in 0..100 {
                let m = 0.5 * (a + b);
                if f(m.exp()).signum() == fa.signum() {
                    a = m;
                } else {
                    b = m;
                }
            }
            out.push((0.5 * (a + b)).exp());
        }
        prev = (x, fx);
    }
    out
}

pub fn solve(report: &Report, supernode: Option<&SupernodeInput>) -> Result<Solved, PlannerError> {
    let mut out = Solved::default();
    if let Some(s) = &report.scaling {
        out.answers.push(Answer {
            question: "card multiple where compute equals communication (example 7.1)".into(),
            value: s.crossover_multiple,
            unit: "x",
            detail: format!("beyond it full overlap stops gaining; communication {}", s.comm.source),
        });
    }
    if let Some(step) = &report.step {
        for t in &step.timelines {
            out.answers.push(Answer {
                question: format!("latest ready time that still hides the communication: {}", t.name),
                value: t.latest_hidden_ready_secs,
                unit: "s",
                detail: format!(
                    "compute {} minus communication {}",
                    format_secs(step.compute_secs),
                    format_secs(t.comm.secs)
                ),
            });
            let base = t.step_secs;
            let f = |c: f64, r: f64, n: f64, u: f64| crate::step::step_secs(c, r.min(c), n, u) - base;
            let (c, r, n, u) = (t.compute_secs, t.ready_secs, t.comm.secs, step.update_secs);
            // Compute 10% shorter moves the ready time with it when the data was ready at its end.
            let r_after = if r >= c { 0.9 * c } else { r };
            out.sensitivity.push(Sensitivity {
                of: format!("step: {}", t.name),
                step_secs: base,
                inputs: sorted(vec![
                    ("compute".into(), f(0.9 * c, r_after, n, u)),
                    ("ready time".into(), f(c, 0.9 * r, n, u)),
                    ("communication".into(), f(c, r, 0.9 * n, u)),
                    ("update".into(), f(c, r, n, 0.9 * u)),
                ]),
            });
        }
    }
    if let Some(l) = &report.latency {
        for v in &l.variants {
            out.answers.push(Answer {
                question: format!("size where payload equals start-up ({})", v.name),
                value: v.crossover_bytes,
                unit: "bytes",
                detail: format!(
                    "start-up {} over {} per byte ({})",
                    format_secs(v.startup_secs),
                    format_secs(v.secs_per_byte),
                    format_bytes_per_sec(1.0 / v.secs_per_byte)
                ),
            });
        }
    }
    if let Some(input) = supernode {
        supernode_answers(input, &mut out)?;
    }
    Ok(out)
}

fn candidate_sizes(input: &SupernodeInput) -> Vec<u64> {
    let mut sizes: Vec<u64> = (1..=input.max_supernode.min(input.gpus))
        .filter(|&s| input.gpus.is_multiple_of(s) && s.is_multiple_of(input.tp))
        .collect();
    // Spread evenly when there are many divisors.
    if sizes.len() > MAX_CANDIDATE_SIZES {
        let step = sizes.len().div_ceil(MAX_CANDIDATE_SIZES);
        sizes = sizes.into_iter().step_by(step).collect();
    }
    sizes
}

fn supernode_answers(input: &SupernodeInput, out: &mut Solved) -> Result<(), PlannerError> {
    input.validate()?;
    for n in &input.network {
        let mut best: Option<crate::supernode::StepPoint> = None;
        for s in candidate_sizes(input) {
            if let Ok(p) = input.point(n, s, input.tp, "supernode") {
                if best.as_ref().is_none_or(|b| p.tokens_per_sec > b.tokens_per_sec) {
                    best = Some(p);
                }
            }
        }
        let Some(best) = best else { continue };
        out.answers.push(Answer {
            question: format!("super-node size with the best tokens/s ({}, TP{})", n.name, input.tp),
            value: best.size as f64,
            unit: "GPUs",
            detail: format!(
                "{:.4} s per step, {:.0} tokens/s, gradient by {} (up to {} GPUs per super-node)",
                best.step_secs, best.tokens_per_sec, best.gradient.chosen, input.max_supernode
            ),
        });
        out.sensitivity.push(sensitivity(input, n, best.size)?);
    }
    // Where hierarchical and the flat ring swap as the super-node egress varies: the
    // egress assumption is what varies, so once per distinct NVLink and NIC bandwidth.
    let mut seen: Vec<(u64, u64)> = Vec::new();
    for n in &input.network {
        let b_l = n.nvlink_bytes_per_sec.unwrap_or(input.nvlink_bytes_per_sec);
        let b_nic = n.nic_bytes_per_sec.unwrap_or(input.nic_bytes_per_sec);
        if seen.contains(&(b_l.to_bits(), b_nic.to_bits())) {
            continue;
        }
        seen.push((b_l.to_bits(), b_nic.to_bits()));
        for &s in &input.sizes {
            // With one DP member per coordinate in a super-node (q = 1), or one super-node,
            // the two are the same all-reduce.
            if s == input.gpus || s <= input.tp {
                continue;
            }
            let diff = |cap: f64| {
                let n = Network {
                    egress_cap_bytes_per_sec: Some(cap),
                    egress_per_gpu_bytes_per_sec: Some(f64::MAX / 1e6),
                    ..n.clone()
                };
                input
                    .point(&n, s, input.tp, "supernode")
                    .map_or(f64::NAN, |p| p.gradient.hierarchical_secs - p.gradient.flat_ring_secs)
            };
            let found = crossings(1e8, 1e15, 400, diff);
            for (i, &x) in found.iter().enumerate() {
                let faster_above = if diff(x * 1.01) < 0.0 { "hierarchical" } else { "the flat ring" };
                out.answers.push(Answer {
                    question: format!(
                        "super-node egress where hierarchical and the flat ring swap (S = {s}, NVLink {}, NIC {}){}",
                        format_bytes_per_sec(b_l),
                        format_bytes_per_sec(b_nic),
                        if found.len() > 1 {
                            format!(", crossing {} of {}", i + 1, found.len())
                        } else {
                            String::new()
                        }
                    ),
                    value: x,
                    unit: "B/s",
                    detail: format!("{faster_above} is faster just above it"),
                });
            }
        }
    }
    if let (Some(size), false) = (input.tp_candidates_size, input.tp_candidates.is_empty()) {
        let n = &input.network[0];
        let best = input
            .tp_candidates
            .iter()
            .filter_map(|&tp| input.point(n, size, tp, "supernode").ok())
            .max_by(|a, b| a.tokens_per_sec.total_cmp(&b.tokens_per_sec));
        if let Some(b) = best {
            out.answers.push(Answer {
                question: format!("TP degree with the best tokens/s at S = {size} ({})", n.name),
                value: b.tp as f64,
                unit: "x",
                detail: format!("{:.4} s per step, {:.0} tokens/s", b.step_secs, b.tokens_per_sec),
            });
        }
    }
    Ok(())
}

/// Step time change at super-node size `size` when each input improves by 10%.
pub fn sensitivity(input: &SupernodeInput, network: &Network, size: u64) -> Result<Sensitivity, PlannerError> {
    let base = input.point(network, size, input.tp, "supernode")?.step_secs;
    let at = |i: &SupernodeInput, n: &Network| i.point(n, size, i.tp, "supernode").map(|p| p.step_secs - base);
    let b_l = network.nvlink_bytes_per_sec.unwrap_or(input.nvlink_bytes_per_sec);
    let b_nic = network.nic_bytes_per_sec.unwrap_or(input.nic_bytes_per_sec);
    let per_gpu = network.egress_per_gpu_bytes_per_sec.unwrap_or(b_nic);
    let n = network.clone();
    let mut inputs = vec![
        ("MFU".to_string(), at(&SupernodeInput { mfu: (input.mfu * 1.1).min(1.0), ..input.clone() }, &n)?),
        ("update".into(), at(&SupernodeInput { update_secs: input.update_secs * 0.9, ..input.clone() }, &n)?),
        ("NVLink bandwidth".into(), at(input, &Network { nvlink_bytes_per_sec: Some(b_l * 1.1), ..n.clone() })?),
        (
            "NIC bandwidth".into(),
            at(
                input,
                &Network {
                    nic_bytes_per_sec: Some(b_nic * 1.1),
                    egress_per_gpu_bytes_per_sec: Some(per_gpu),
                    ..n.clone()
                },
            )?,
        ),
        (
            "egress per GPU".into(),
            at(input, &Network { egress_per_gpu_bytes_per_sec: Some(per_gpu * 1.1), ..n.clone() })?,
        ),
        (
            "start-up per round".into(),
            at(
                &SupernodeInput {
                    alpha_local_secs: input.alpha_local_secs * 0.9,
                    alpha_remote_secs: input.alpha_remote_secs * 0.9,
                    ..input.clone()
                },
                &n,
            )?,
        ),
    ];
    if let Some(cap) = network.egress_cap_bytes_per_sec {
        inputs.push((
            "egress cap".into(),
            at(input, &Network { egress_cap_bytes_per_sec: Some(cap * 1.1), ..n.clone() })?,
        ));
    }
    Ok(Sensitivity { of: format!("step at S = {size} ({})", network.name), step_secs: base, inputs: sorted(inputs) })
}

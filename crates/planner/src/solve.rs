//! `--solve`: the chapter's crossover and optimum questions answered directly — the
//! card multiple where compute equals communication, the latest ready time that still
//! hides a communication, the size where start-up equals payload, the super-node size
//! and TP degree with the best tokens/s, the egress where hierarchical overtakes the flat
//! ring — and, for each step answer, the input it is most sensitive to: the change in
//! step time when each input moves 10% in the direction that helps.

use railyard_units::units::{format_bytes_per_sec, format_secs};
use serde::Serialize;

use crate::comm::Coster;
use crate::error::PlannerError;
use crate::moe::MoeInput;
use crate::supernode::{Network, SupernodeInput};
use crate::{Report, Scenario};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub question: String,
    /// `None` where the answer is that there is none (say, a communication that cannot
    /// be hidden); `detail` says why.
    pub value: Option<f64>,
    /// "x", "s", "bytes", "GPUs", "B/s".
    pub unit: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sensitivity {
    /// What was varied around: "step: hierarchical, ready at 17 ms".
    pub of: String,
    pub step_secs: f64,
    /// Each input moved so that the time it governs is 10% shorter (times × 0.9, rates
    /// and MFU ÷ 0.9), largest step change first.
    pub inputs: Vec<InputChange>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputChange {
    pub input: String,
    /// Step time after the change minus before (negative: faster).
    pub step_change_secs: f64,
    /// Set where the input could not move the full 10% (MFU capped at 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn change(input: &str, step_change_secs: f64) -> InputChange {
    InputChange { input: input.into(), step_change_secs, note: None }
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Solved {
    pub answers: Vec<Answer>,
    pub sensitivity: Vec<Sensitivity>,
    /// The `[job]` on other node counts and NIC rates, and its targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<crate::job::solve::JobSolved>,
}

/// The most super-node sizes `--solve` tries.
pub const MAX_CANDIDATE_SIZES: usize = 64;

/// Largest change first; equal changes keep their order (the report calls them tied).
fn sorted(mut inputs: Vec<InputChange>) -> Vec<InputChange> {
    inputs.sort_by(|a, b| b.step_change_secs.abs().total_cmp(&a.step_change_secs.abs()));
    inputs
}

/// 10% less time on what a time input governs; a rate input ÷ 0.9 does the same.
const SHORTER: f64 = 0.9;

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

pub fn solve(report: &Report, scenario: &Scenario, coster: &Coster) -> Result<Solved, PlannerError> {
    let supernode = scenario.supernode.as_ref();
    let mut out = Solved::default();
    if let (Some(input), Some(job)) = (&scenario.job, &report.job) {
        out.job = crate::job::solve::solve(input, job, &|topo: &str| coster.load(topo, "job"), coster.engine)?;
    }
    if let Some(s) = &report.scaling {
        out.answers.push(Answer {
            question: "card multiple where compute equals communication (example 7.1)".into(),
            value: Some(s.crossover_multiple),
            unit: "x",
            detail: if s.crossover_multiple >= 1.0 {
                format!("beyond it full overlap stops gaining; communication {}", s.comm.source)
            } else {
                format!("below 1: communication already exceeds compute today; communication {}", s.comm.source)
            },
        });
    }
    if let Some(step) = &report.step {
        for t in &step.timelines {
            out.answers.push(Answer {
                question: format!("latest ready time that still hides the communication: {}", t.name),
                value: t.latest_hidden_ready_secs,
                unit: "s",
                detail: match t.latest_hidden_ready_secs {
                    Some(_) => format!(
                        "compute {} minus communication {}",
                        format_secs(step.compute_secs),
                        format_secs(t.comm.secs)
                    ),
                    None => format!(
                        "none: the communication ({}) is longer than the compute ({})",
                        format_secs(t.comm.secs),
                        format_secs(step.compute_secs)
                    ),
                },
            });
            let base = t.step_secs;
            let f = |c: f64, r: f64, n: f64, u: f64| crate::step::step_secs(c, r.min(c), n, u) - base;
            let (c, r, n, u) = (t.compute_secs, t.ready_secs, t.comm.secs, step.update_secs);
            out.sensitivity.push(Sensitivity {
                of: format!("step: {}", t.name),
                step_secs: base,
                inputs: sorted(vec![
                    // Shorter compute brings the ready time, a point inside it, along.
                    change("compute", f(SHORTER * c, SHORTER * r, n, u)),
                    change("ready time", f(c, SHORTER * r, n, u)),
                    change("communication", f(c, r, SHORTER * n, u)),
                    change("update", f(c, r, n, SHORTER * u)),
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
                detail: match v.crossover_bytes {
                    Some(_) => format!(
                        "start-up {} over {} per byte ({})",
                        format_secs(v.startup_secs),
                        format_secs(v.secs_per_byte),
                        format_bytes_per_sec(1.0 / v.secs_per_byte)
                    ),
                    None => format!("none: start-up {}, no payload term", format_secs(v.startup_secs)),
                },
            });
        }
    }
    if let Some(input) = supernode {
        supernode_answers(input, &mut out)?;
    }
    if let Some(moe) = &scenario.moe {
        // Where deduplication starts to pay for the second phase.
        let at = |f: f64| {
            let one = MoeInput { off_node_fractions: vec![f], comm: None, ..moe.clone() };
            crate::moe::evaluate(&one, coster).map_or(f64::NAN, |r| r.cases[0].flat_secs - r.cases[0].hierarchical_secs)
        };
        let one_node = moe.gpus == moe.gpus_per_node;
        let found = if one_node { Vec::new() } else { crossings(1e-4, 1.0, 200, at) };
        out.answers.push(Answer {
            question: "off-node fraction f above which the hierarchical all-to-all beats the flat one (MoE dispatch)"
                .into(),
            value: found.first().copied(),
            unit: "x",
            detail: match found.first() {
                _ if one_node => "none: the GPUs are one node, nothing crosses nodes".into(),
                Some(_) => {
                    "below it the flat all-to-all is faster: too little crosses nodes to repay the NVLink fan-out"
                        .into()
                }
                None => format!(
                    "none in 0.0001..1: {} is faster throughout",
                    if at(0.5) > 0.0 { "hierarchical" } else { "flat" }
                ),
            },
        });
    }
    if let Some(b) = &scenario.bucketing {
        let best = crate::bucketing::best_cap(b, coster);
        out.answers.push(Answer {
            question:
                "bucket cap with the least exposed communication (searched over the caps given and caps of the first 1, 2, … layers)"
                    .into(),
            value: best.as_ref().ok().map(|p| p.bucket_cap_bytes),
            unit: "bytes",
            detail: match &best {
                Ok(p) => format!(
                    "{} buckets, {} exposed, overlap ratio {:.1}%",
                    p.buckets.len(),
                    format_secs(p.exposed_comm_secs),
                    p.overlap_ratio * 100.0
                ),
                Err(e) => format!("not searched: {e}"),
            },
        });
    }
    Ok(out)
}

fn candidate_sizes(input: &SupernodeInput) -> Vec<u64> {
    let mut sizes: Vec<u64> = (1..=input.max_supernode_gpus.min(input.gpus))
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
            if let Ok(p) = input.point(n, s, input.tp, "supernode", "supernode.tp") {
                if best.as_ref().is_none_or(|b| p.tokens_per_sec > b.tokens_per_sec) {
                    best = Some(p);
                }
            }
        }
        let Some(best) = best else { continue };
        out.answers.push(Answer {
            question: format!("super-node size with the best tokens/s ({}, TP{})", n.name, input.tp),
            value: Some(best.supernode_gpus as f64),
            unit: "GPUs",
            detail: format!(
                "{:.4} s per step, {:.0} tokens/s, gradient by {} (up to {} GPUs per super-node)",
                best.step_secs, best.tokens_per_sec, best.gradient.chosen, input.max_supernode_gpus
            ),
        });
        out.sensitivity.push(sensitivity(input, n, best.supernode_gpus)?);
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
        for &s in &input.supernode_gpus {
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
                    .point(&n, s, input.tp, "supernode", "supernode.tp")
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
                    value: Some(x),
                    unit: "B/s",
                    detail: format!("{faster_above} is faster just above it"),
                });
            }
        }
    }
    if let (Some(size), false) = (input.tp_candidates_supernode_gpus, input.tp_candidates.is_empty()) {
        let n = &input.network[0];
        let best = input
            .tp_candidates
            .iter()
            .filter_map(|&tp| input.point(n, size, tp, "supernode", "supernode.tp_candidates").ok())
            .max_by(|a, b| a.tokens_per_sec.total_cmp(&b.tokens_per_sec));
        if let Some(b) = best {
            out.answers.push(Answer {
                question: format!("TP degree with the best tokens/s at S = {size} ({})", n.name),
                value: Some(b.tp as f64),
                unit: "TP",
                detail: format!("{:.4} s per step, {:.0} tokens/s", b.step_secs, b.tokens_per_sec),
            });
        }
    }
    Ok(())
}

/// Step time change at super-node size `size` when each input governs 10% less time.
pub fn sensitivity(input: &SupernodeInput, network: &Network, size: u64) -> Result<Sensitivity, PlannerError> {
    let base = input.point(network, size, input.tp, "supernode", "supernode.tp")?.step_secs;
    let at = |i: &SupernodeInput, n: &Network| {
        i.point(n, size, i.tp, "supernode", "supernode.tp").map(|p| p.step_secs - base)
    };
    let b_l = network.nvlink_bytes_per_sec.unwrap_or(input.nvlink_bytes_per_sec);
    let b_nic = network.nic_bytes_per_sec.unwrap_or(input.nic_bytes_per_sec);
    let n = network.clone();
    let mfu = input.mfu / SHORTER;
    let mut mfu_change = change("MFU", at(&SupernodeInput { mfu: mfu.min(1.0), ..input.clone() }, &n)?);
    if mfu > 1.0 {
        mfu_change.note = Some(format!("capped at 100% (+{:.1}%, not +11.1%)", (1.0 / input.mfu - 1.0) * 100.0));
    }
    // The NIC's rate also sets the egress where the network gives no egress of its own.
    let mut inputs = vec![
        mfu_change,
        change("update", at(&SupernodeInput { update_secs: input.update_secs * SHORTER, ..input.clone() }, &n)?),
        change("NVLink bandwidth", at(input, &Network { nvlink_bytes_per_sec: Some(b_l / SHORTER), ..n.clone() })?),
        change("NIC bandwidth", at(input, &Network { nic_bytes_per_sec: Some(b_nic / SHORTER), ..n.clone() })?),
        change(
            "start-up per round",
            at(
                &SupernodeInput {
                    alpha_local_secs: input.alpha_local_secs * SHORTER,
                    alpha_remote_secs: input.alpha_remote_secs * SHORTER,
                    ..input.clone()
                },
                &n,
            )?,
        ),
    ];
    if let Some(per_gpu) = network.egress_per_gpu_bytes_per_sec {
        let faster = Network { egress_per_gpu_bytes_per_sec: Some(per_gpu / SHORTER), ..n.clone() };
        inputs.push(change("egress per GPU", at(input, &faster)?));
    }
    if let Some(cap) = network.egress_cap_bytes_per_sec {
        inputs.push(change(
            "egress cap",
            at(input, &Network { egress_cap_bytes_per_sec: Some(cap / SHORTER), ..n.clone() })?,
        ));
    }
    Ok(Sensitivity { of: format!("step at S = {size} ({})", network.name), step_secs: base, inputs: sorted(inputs) })
}

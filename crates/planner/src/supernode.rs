//! A fixed number of GPUs split into super-nodes (NVLink domains) of S cards (seed 001
//! §7.6.4): the DP gradient all-reduce goes hierarchical — reduce-scatter over the q = S/tp
//! local members, all-reduce across the H = N/S super-nodes, all-gather back — or stays a
//! flat ring over all DP members, whichever is faster; the step adds compute (6·P·tokens
//! at peak × MFU), the TP all-reduces and the update. Recovery overhead follows
//! ε ≈ C/I + λ(I/2 + R).

use railyard_units::quantity;
use serde::{Deserialize, Serialize};

use crate::error::{positive, within, PlannerError};
use crate::workload;

pub const MAX_GPUS: u64 = 1 << 20;
/// The most super-node sizes (or TP candidates) one list may hold.
pub const MAX_SUPERNODE_SIZES: usize = 64;
pub const MAX_NETWORKS: usize = 16;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SupernodeInput {
    pub gpus: u64,
    pub params: f64,
    pub layers: u64,
    pub hidden: u64,
    pub tokens_per_step: u64,
    /// Tokens of one sequence (micro-batch); each DP replica takes whole sequences.
    pub tokens_per_sequence: u64,
    pub tp: u64,
    #[serde(default = "two")]
    pub grad_bytes_per_param: f64,
    #[serde(default = "two")]
    pub activation_bytes_per_elem: f64,
    #[serde(default = "sixteen")]
    pub state_bytes_per_param: f64,
    pub peak_flops_per_sec: f64,
    pub mfu: f64,
    #[serde(default = "four")]
    pub tp_allreduces_per_layer: u64,
    #[serde(deserialize_with = "quantity::secs")]
    pub update_secs: f64,
    /// Super-node sizes S (GPUs) to tabulate.
    pub supernode_gpus: Vec<u64>,
    /// B_L: NVLink per GPU per direction.
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub nvlink_bytes_per_sec: f64,
    /// B_NIC per direction.
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub nic_bytes_per_sec: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub alpha_local_secs: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub alpha_remote_secs: f64,
    /// The network assumptions compared (the first is the reference for TP, recovery
    /// and sensitivity).
    pub network: Vec<Network>,
    /// TP degrees to compare at `tp_candidates_supernode_gpus`.
    #[serde(default)]
    pub tp_candidates: Vec<u64>,
    #[serde(default)]
    pub tp_candidates_supernode_gpus: Option<u64>,
    /// The largest super-node `--solve` may choose (NVLink Switch System: 256 Hopper GPUs).
    #[serde(default = "max_supernode_gpus")]
    pub max_supernode_gpus: u64,
    #[serde(default)]
    pub recovery: Option<RecoveryInput>,
}

fn two() -> f64 {
    2.0
}
fn four() -> u64 {
    4
}
fn sixteen() -> f64 {
    16.0
}
fn max_supernode_gpus() -> u64 {
    256
}
fn one() -> f64 {
    1.0
}

/// What leaves a super-node: B_out = min(S × per-GPU egress / oversubscription, cap).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    pub name: String,
    /// Default: the NIC's bandwidth (every card's NIC joins the fabric).
    #[serde(default, deserialize_with = "quantity::optional_bytes_per_sec")]
    pub egress_per_gpu_bytes_per_sec: Option<f64>,
    #[serde(default, deserialize_with = "quantity::optional_bytes_per_sec")]
    pub egress_cap_bytes_per_sec: Option<f64>,
    /// Leaf oversubscription d:u as d/u (3 for 3:1).
    #[serde(default = "one")]
    pub oversubscription: f64,
    /// Overrides of the section's NVLink and NIC bandwidth.
    #[serde(default, deserialize_with = "quantity::optional_bytes_per_sec")]
    pub nvlink_bytes_per_sec: Option<f64>,
    #[serde(default, deserialize_with = "quantity::optional_bytes_per_sec")]
    pub nic_bytes_per_sec: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RecoveryInput {
    /// C: the pause to write a checkpoint.
    #[serde(deserialize_with = "quantity::secs")]
    pub checkpoint_secs: f64,
    /// I: effective compute between checkpoints.
    #[serde(deserialize_with = "quantity::secs")]
    pub interval_secs: f64,
    /// The job's mean time between interruptions at `mtbf_gpus` cards; the rate scales with cards.
    #[serde(deserialize_with = "quantity::secs")]
    pub job_mtbf_secs: f64,
    pub mtbf_gpus: u64,
    /// Fixed part of R.
    #[serde(deserialize_with = "quantity::secs")]
    pub restart_secs: f64,
    /// The channel each card of the affected super-node reads its state back over, one at a time.
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub read_bytes_per_sec: f64,
    /// Super-node sizes (GPUs) to evaluate.
    pub supernode_gpus: Vec<u64>,
}

/// How the DP gradient is all-reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GradientAlgorithm {
    /// Local reduce-scatter, all-reduce across super-nodes, local all-gather.
    #[serde(rename = "hierarchical")]
    Hierarchical,
    /// One ring over all DP members.
    #[serde(rename = "flat ring")]
    FlatRing,
}

impl std::fmt::Display for GradientAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GradientAlgorithm::Hierarchical => "hierarchical",
            GradientAlgorithm::FlatRing => "flat ring",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gradient {
    pub supernodes: u64,
    /// q: DP members of one TP coordinate inside a super-node.
    pub local_members: u64,
    /// G: gradient bytes per card.
    pub grad_bytes_per_gpu: f64,
    /// V_out: bytes leaving one super-node per direction.
    pub egress_bytes: f64,
    pub egress_bytes_per_sec: f64,
    pub local_secs: f64,
    pub remote_startup_secs: f64,
    pub nic_secs: f64,
    pub egress_secs: f64,
    pub hierarchical_secs: f64,
    pub flat_ring_secs: f64,
    pub chosen: GradientAlgorithm,
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepPoint {
    pub supernode_gpus: u64,
    pub tp: u64,
    pub dp: u64,
    pub compute_secs: f64,
    pub tp_message_bytes: f64,
    pub tp_secs: f64,
    pub gradient: Gradient,
    pub update_secs: f64,
    pub step_secs: f64,
    pub tokens_per_sec: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkRows {
    pub name: String,
    pub rows: Vec<StepPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecoveryRow {
    pub supernode_gpus: u64,
    pub recovery_secs: f64,
    pub interruptions_per_sec: f64,
    pub overhead: f64,
    pub tokens_per_sec: f64,
    pub effective_tokens_per_sec: f64,
    /// False where ε is too large for the first-order estimate (more than a tenth of the
    /// time lost): failures then overlap and the job may never finish an interval.
    pub first_order_valid: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SupernodeReport {
    pub state_bytes_per_gpu: f64,
    pub networks: Vec<NetworkRows>,
    pub tp_candidates: Vec<StepPoint>,
    pub recovery: Vec<RecoveryRow>,
}

impl SupernodeInput {
    pub fn validate(&self) -> Result<(), PlannerError> {
        if self.gpus == 0 || self.gpus > MAX_GPUS {
            return Err(PlannerError::bad("supernode.gpus", format!("must be 1..={MAX_GPUS} (got {})", self.gpus)));
        }
        positive("supernode.params", self.params)?;
        within("supernode.mfu", self.mfu, 1e-6, 1.0)?;
        positive("supernode.peak_flops_per_sec", self.peak_flops_per_sec)?;
        positive("supernode.nvlink_bytes_per_sec", self.nvlink_bytes_per_sec)?;
        positive("supernode.nic_bytes_per_sec", self.nic_bytes_per_sec)?;
        positive("supernode.grad_bytes_per_param", self.grad_bytes_per_param)?;
        positive("supernode.state_bytes_per_param", self.state_bytes_per_param)?;
        positive("supernode.activation_bytes_per_elem", self.activation_bytes_per_elem)?;
        within("supernode.alpha_local_secs", self.alpha_local_secs, 0.0, 1.0)?;
        within("supernode.alpha_remote_secs", self.alpha_remote_secs, 0.0, 1.0)?;
        for (field, v) in
            [("layers", self.layers), ("hidden", self.hidden), ("tokens_per_sequence", self.tokens_per_sequence)]
        {
            if v == 0 || v > 1 << 32 {
                return Err(PlannerError::bad(format!("supernode.{field}"), format!("must be 1..=2^32 (got {v})")));
            }
        }
        if self.tp == 0 || self.tp > self.gpus {
            return Err(PlannerError::bad("supernode.tp", format!("must be 1..={} (the GPUs)", self.gpus)));
        }
        if self.max_supernode_gpus < self.tp {
            return Err(PlannerError::bad(
                "supernode.max_supernode_gpus",
                format!("must be at least TP {} (got {})", self.tp, self.max_supernode_gpus),
            ));
        }
        within("supernode.params", self.params, 1.0, 1e16)?;
        within("supernode.update_secs", self.update_secs, 0.0, crate::error::MAX_SECS)?;
        within("supernode.peak_flops_per_sec", self.peak_flops_per_sec, 1.0, 1e21)?;
        within("supernode.nvlink_bytes_per_sec", self.nvlink_bytes_per_sec, 1.0, 1e16)?;
        within("supernode.nic_bytes_per_sec", self.nic_bytes_per_sec, 1.0, 1e16)?;
        within("supernode.state_bytes_per_param", self.state_bytes_per_param, 1e-3, 1e3)?;
        within("supernode.grad_bytes_per_param", self.grad_bytes_per_param, 1e-3, 1e3)?;
        within("supernode.activation_bytes_per_elem", self.activation_bytes_per_elem, 1e-3, 1e3)?;
        if self.tp_allreduces_per_layer > 1 << 16 {
            return Err(PlannerError::bad("supernode.tp_allreduces_per_layer", "must be at most 65536"));
        }
        if self.tokens_per_step == 0 || self.tokens_per_step > 1 << 40 {
            return Err(PlannerError::bad("supernode.tokens_per_step", "must be 1..=2^40"));
        }
        if self.supernode_gpus.is_empty() || self.supernode_gpus.len() > MAX_SUPERNODE_SIZES {
            return Err(PlannerError::bad("supernode.supernode_gpus", format!("give 1..={MAX_SUPERNODE_SIZES} sizes")));
        }
        if self.network.is_empty() || self.network.len() > MAX_NETWORKS {
            return Err(PlannerError::bad("supernode.network", format!("give 1..={MAX_NETWORKS} networks")));
        }
        if self.tp_candidates.len() > MAX_SUPERNODE_SIZES {
            return Err(PlannerError::bad("supernode.tp_candidates", format!("at most {MAX_SUPERNODE_SIZES}")));
        }
        for (i, n) in self.network.iter().enumerate() {
            within(&format!("supernode.network[{i}].oversubscription"), n.oversubscription, 1e-3, 1e6)?;
            for (f, v) in [
                ("egress_per_gpu_bytes_per_sec", n.egress_per_gpu_bytes_per_sec),
                ("egress_cap_bytes_per_sec", n.egress_cap_bytes_per_sec),
                ("nvlink_bytes_per_sec", n.nvlink_bytes_per_sec),
                ("nic_bytes_per_sec", n.nic_bytes_per_sec),
            ] {
                if let Some(v) = v {
                    within(&format!("supernode.network[{i}].{f}"), v, 1.0, 1e16)?;
                }
            }
        }
        if let Some(r) = &self.recovery {
            use crate::error::MAX_SECS;
            within("supernode.recovery.interval_secs", r.interval_secs, 1e-3, MAX_SECS)?;
            within("supernode.recovery.job_mtbf_secs", r.job_mtbf_secs, 1e-3, MAX_SECS)?;
            within("supernode.recovery.checkpoint_secs", r.checkpoint_secs, 0.0, MAX_SECS)?;
            within("supernode.recovery.restart_secs", r.restart_secs, 0.0, MAX_SECS)?;
            within("supernode.recovery.read_bytes_per_sec", r.read_bytes_per_sec, 1.0, 1e16)?;
            if r.checkpoint_secs >= r.interval_secs {
                return Err(PlannerError::bad(
                    "supernode.recovery.checkpoint_secs",
                    format!("must be shorter than interval_secs ({} s >= {} s)", r.checkpoint_secs, r.interval_secs),
                ));
            }
            if r.mtbf_gpus == 0 || r.mtbf_gpus > MAX_GPUS {
                return Err(PlannerError::bad("supernode.recovery.mtbf_gpus", format!("must be 1..={MAX_GPUS}")));
            }
            if r.supernode_gpus.len() > MAX_SUPERNODE_SIZES {
                return Err(PlannerError::bad(
                    "supernode.recovery.supernode_gpus",
                    format!("at most {MAX_SUPERNODE_SIZES} sizes"),
                ));
            }
        }
        Ok(())
    }

    /// The step at super-node size `size` with TP degree `tp` under `network`;
    /// `size_field` and `tp_field` name where each came from in errors.
    pub fn point(
        &self,
        network: &Network,
        size: u64,
        tp: u64,
        size_field: &str,
        tp_field: &str,
    ) -> Result<StepPoint, PlannerError> {
        if size == 0 || !self.gpus.is_multiple_of(size) {
            return Err(PlannerError::bad(size_field, format!("{size} does not divide the {} GPUs", self.gpus)));
        }
        if tp == 0 || !size.is_multiple_of(tp) {
            // The main table varies S at the section's TP: S is what is wrong there.
            let field = if tp == self.tp { size_field } else { tp_field };
            return Err(PlannerError::bad(field, format!("TP {tp} does not divide the super-node of {size} GPUs")));
        }
        let dp = self.gpus / tp;
        let sequences = self.tokens_per_step / self.tokens_per_sequence;
        if !self.tokens_per_step.is_multiple_of(self.tokens_per_sequence) || !sequences.is_multiple_of(dp) {
            return Err(PlannerError::bad(
                if tp == self.tp { "supernode.tokens_per_sequence" } else { tp_field },
                format!(
                    "{} tokens in sequences of {} do not split evenly over {dp} DP replicas (TP {tp})",
                    self.tokens_per_step, self.tokens_per_sequence
                ),
            ));
        }
        let b_l = network.nvlink_bytes_per_sec.unwrap_or(self.nvlink_bytes_per_sec);
        let b_nic = network.nic_bytes_per_sec.unwrap_or(self.nic_bytes_per_sec);
        let compute = workload::compute_secs(
            workload::step_flops(self.params, self.tokens_per_step as f64),
            self.gpus as f64,
            self.peak_flops_per_sec,
            self.mfu,
        );
        // Each replica's activations: its tokens × hidden × bytes, all-reduced over TP on NVLink.
        let message = workload::tp_message_bytes(
            (self.tokens_per_step / dp) as f64,
            self.hidden as f64,
            self.activation_bytes_per_elem,
        );
        let tp_secs = (self.layers * self.tp_allreduces_per_layer) as f64
            * workload::ring_allreduce_secs(tp as f64, message, self.alpha_local_secs, b_l);
        let gradient = self.gradient(network, size, tp, b_l, b_nic);
        let step = compute + tp_secs + gradient.secs + self.update_secs;
        Ok(StepPoint {
            supernode_gpus: size,
            tp,
            dp,
            compute_secs: compute,
            tp_message_bytes: message,
            tp_secs,
            gradient,
            update_secs: self.update_secs,
            step_secs: step,
            tokens_per_sec: self.tokens_per_step as f64 / step,
        })
    }

    fn gradient(&self, network: &Network, size: u64, tp: u64, b_l: f64, b_nic: f64) -> Gradient {
        let h = (self.gpus / size) as f64;
        let q = (size / tp) as f64;
        let dp = (self.gpus / tp) as f64;
        // G = grad bytes × P / tp: each card's share of the gradient.
        let g = self.grad_bytes_per_param * self.params / tp as f64;
        let per_gpu = network.egress_per_gpu_bytes_per_sec.unwrap_or(b_nic);
        let mut b_out = size as f64 * per_gpu / network.oversubscription;
        if let Some(cap) = network.egress_cap_bytes_per_sec {
            b_out = b_out.min(cap);
        }
        let (a_l, a_r) = (self.alpha_local_secs, self.alpha_remote_secs);
        // seed 001 §7.6.4: V_out = 2 (H-1)/H × tp × G (the seed's 8G at TP8).
        let v_out = 2.0 * (h - 1.0) / h * tp as f64 * g;
        let local = 2.0 * (q - 1.0) * a_l + 2.0 * (q - 1.0) * g / (q * b_l);
        let remote_startup = 2.0 * (h - 1.0) * a_r;
        let nic = 2.0 * (h - 1.0) * g / (h * q * b_nic);
        let egress = if h > 1.0 { v_out / b_out } else { 0.0 };
        let hierarchical = local + remote_startup + nic.max(egress);
        // The flat DP ring: 2(DP-1) rounds of G/DP; a super-node's q members of one TP
        // coordinate sit side by side, so each coordinate's ring leaves a super-node once
        // (tp rings per super-node share its egress) and every other edge is NVLink.
        let chunk = g / dp;
        let round = if h > 1.0 {
            a_r + (chunk / b_nic).max(tp as f64 * chunk / b_out).max(chunk / b_l)
        } else {
            a_l + chunk / b_l
        };
        let flat = 2.0 * (dp - 1.0) * round;
        let (chosen, secs) = if flat < hierarchical {
            (GradientAlgorithm::FlatRing, flat)
        } else {
            (GradientAlgorithm::Hierarchical, hierarchical)
        };
        Gradient {
            supernodes: self.gpus / size,
            local_members: size / tp,
            grad_bytes_per_gpu: g,
            egress_bytes: v_out,
            egress_bytes_per_sec: b_out,
            local_secs: local,
            remote_startup_secs: remote_startup,
            nic_secs: nic,
            egress_secs: egress,
            hierarchical_secs: hierarchical,
            flat_ring_secs: flat,
            chosen,
            secs,
        }
    }

    /// ε ≈ C/I + λ(I/2 + R), R = restart + S × state per card / read bandwidth.
    pub fn recovery_row(&self, r: &RecoveryInput, size: u64, tokens_per_sec: f64) -> RecoveryRow {
        let state = self.state_bytes_per_param * self.params / self.tp as f64;
        let recovery = r.restart_secs + size as f64 * state / r.read_bytes_per_sec;
        let lambda = self.gpus as f64 / (r.job_mtbf_secs * r.mtbf_gpus as f64);
        let overhead = r.checkpoint_secs / r.interval_secs + lambda * (r.interval_secs / 2.0 + recovery);
        RecoveryRow {
            supernode_gpus: size,
            recovery_secs: recovery,
            interruptions_per_sec: lambda,
            overhead,
            tokens_per_sec,
            effective_tokens_per_sec: tokens_per_sec / (1.0 + overhead),
            // seed 001 §7.6.4: the estimate holds while failures are rare within an interval.
            first_order_valid: overhead <= 0.1 && lambda * (r.interval_secs + recovery) <= 0.1,
        }
    }
}

pub fn evaluate(input: &SupernodeInput) -> Result<SupernodeReport, PlannerError> {
    input.validate()?;
    let mut networks = Vec::with_capacity(input.network.len());
    for n in &input.network {
        let mut rows = Vec::with_capacity(input.supernode_gpus.len());
        for (i, &s) in input.supernode_gpus.iter().enumerate() {
            rows.push(input.point(n, s, input.tp, &format!("supernode.supernode_gpus[{i}]"), "supernode.tp")?);
        }
        networks.push(NetworkRows { name: n.name.clone(), rows });
    }
    let reference = &input.network[0];
    let mut tp_candidates = Vec::new();
    if !input.tp_candidates.is_empty() {
        let size = input
            .tp_candidates_supernode_gpus
            .ok_or_else(|| PlannerError::bad("supernode.tp_candidates_supernode_gpus", "needed with tp_candidates"))?;
        for (i, &tp) in input.tp_candidates.iter().enumerate() {
            tp_candidates.push(input.point(
                reference,
                size,
                tp,
                "supernode.tp_candidates_supernode_gpus",
                &format!("supernode.tp_candidates[{i}]"),
            )?);
        }
    }
    let mut recovery = Vec::new();
    if let Some(r) = &input.recovery {
        for (i, &s) in r.supernode_gpus.iter().enumerate() {
            let p = input.point(
                reference,
                s,
                input.tp,
                &format!("supernode.recovery.supernode_gpus[{i}]"),
                "supernode.tp",
            )?;
            recovery.push(input.recovery_row(r, s, p.tokens_per_sec));
        }
    }
    Ok(SupernodeReport {
        state_bytes_per_gpu: input.state_bytes_per_param * input.params / input.tp as f64,
        networks,
        tp_candidates,
        recovery,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::{CommInput, Engine};

    fn bundled() -> SupernodeInput {
        crate::Scenario::parse(crate::BUNDLED_SCENARIO).unwrap().supernode.unwrap()
    }

    #[test]
    fn the_flat_ring_formula_is_the_per_round_model_of_a_ring() {
        // At S = 8 every DP ring edge leaves its server on that card's own NIC: the ring
        // all-reduce of G = 8 GB over 128 ranks, one per server, on a rail fabric.
        let input = bundled();
        let p = input.point(&input.network[0], 8, 8, "s", "t").unwrap();
        let comm = CommInput {
            topo: Some("rail:servers=128,gpus=1,alpha=0.83us".into()),
            algo: Some("ring".into()),
            size_bytes: Some(8e9),
            elem_bytes: Some(2),
            ..CommInput::default()
        };
        let model = crate::comm::Coster::new(Engine::Model).time(&comm, "t").unwrap().secs;
        assert!((p.gradient.flat_ring_secs - model).abs() / model < 1e-6, "{} vs {model}", p.gradient.flat_ring_secs);
        assert!((model - 0.3177).abs() < 0.0001, "{model}");
    }

    #[test]
    fn limits_are_named() {
        let mut input = bundled();
        input.tp_allreduces_per_layer = u64::MAX;
        assert!(evaluate(&input).unwrap_err().to_string().contains("tp_allreduces_per_layer"));
        let mut input = bundled();
        input.tp = 0;
        assert!(evaluate(&input).unwrap_err().to_string().contains("supernode.tp"));
        let mut input = bundled();
        input.supernode_gpus = vec![1024 * 3];
        assert!(evaluate(&input).unwrap_err().to_string().contains("supernode.supernode_gpus[0]"));
    }
}

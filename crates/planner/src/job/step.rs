//! One training step of a job under a layout: compute from FLOPs at the GPU's
//! sustained share of peak, each communication a schedule costed on the topology
//! (`comms.rs`), and what of it the step hides.
//!
//! - Pipeline (Narayanan et al. 2021, arXiv 2104.04473 §2.2): m micro-batches through
//!   p stages in 1F1B order take (m + (p−1)/v)·t, t one micro-batch's forward and
//!   backward on the busiest stage (the last, which also computes the logits), v
//!   virtual stages per GPU.
//! - Tensor parallelism (Megatron-LM with sequence parallelism, Korthikanti et al.
//!   2022): per layer and micro-batch two all-reduce-sized exchanges of s·b·h forward,
//!   two backward (two more when the forward is recomputed); exposed unless the job
//!   says what share is overlapped.
//! - Context parallelism (ring attention, Liu et al. 2023): each layer gathers the
//!   other ranks' keys and values forward and reduce-scatters their gradients backward,
//!   hidden behind the attention core as far as it lasts.
//! - Experts: dispatch and combine all-to-all per MoE layer, forward and backward;
//!   exposed unless the job says what share is overlapped.
//! - Point to point between stages: an activation forward and a gradient backward per
//!   micro-batch and virtual stage, on the critical path.
//! - Data parallelism: gradients reduce-scattered (ZeRO 1) or all-reduced (ZeRO 0)
//!   behind the last micro-batch's backward (Megatron-LM's overlapped gradient
//!   reduction), by ZeRO-2 after every micro-batch behind its own backward; ZeRO's
//!   weight all-gather behind the first forward; ZeRO-3 gathers and reduces weights
//!   every micro-batch, behind that micro-batch's compute. Dense and expert reductions
//!   share one window.
//! - The kernels that are not matrix multiplies (norms, residual adds and dropout, the
//!   MLP's activation, an unfused attention's softmax and dropout, the loss over the
//!   vocabulary) run at the GPU's memory bandwidth, each reading its inputs and writing
//!   its output once (the roofline of Williams et al. 2009): a small share of a large
//!   model's step, a fifth of a 1.7B model's on an A100 with unfused attention.
//! - The optimizer reads and writes its state once, at the GPU's memory bandwidth.

use railyard_schedule::Collective;
use serde::Serialize;

use super::comms::Comms;
use super::layout::{Dim, Layout};
use super::memory::params_per_gpu;
use super::shape::ModelShape;
use super::{Attention, Job, Precision, Recompute};
use crate::error::PlannerError;

/// One kind of communication in a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommLine {
    pub name: String,
    /// Where in the step it runs: inside each micro-batch's slot, or after the pipeline.
    pub phase: CommPhase,
    pub collective: String,
    pub ranks: usize,
    pub bytes: f64,
    /// One call's time, and the algorithm that gave it.
    pub secs: f64,
    pub algorithm: String,
    /// Calls per step on the critical path.
    pub calls: f64,
    /// What of their time the step waits for.
    pub exposed_secs: f64,
}

/// Where a communication line runs in the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommPhase {
    /// Each micro-batch's exchanges (TP, CP, EP, PP), inside its slot.
    PerMicroBatch,
    /// Data parallelism's reductions and ZeRO's gathers, around the pipeline.
    DataParallel,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub micro_batches: u64,
    /// One micro-batch on the busiest stage.
    pub forward_secs: f64,
    pub backward_secs: f64,
    pub recompute_secs: f64,
    /// Compute of all micro-batches on the busiest stage.
    pub compute_secs: f64,
    /// The pipeline's fill and drain.
    pub bubble_secs: f64,
    pub comms: Vec<CommLine>,
    pub exposed_comm_secs: f64,
    pub optimizer_secs: f64,
    pub step_secs: f64,
    pub tokens_per_sec: f64,
    /// Model FLOPs (no recomputation) per second per GPU, and their share of peak.
    pub model_tflops_per_gpu: f64,
    pub mfu: f64,
    /// Executed FLOPs (recomputation included), as Megatron-LM reports them.
    pub hardware_tflops_per_gpu: f64,
}

struct Compute {
    /// Forward and backward of one micro-batch on the busiest stage, its attention
    /// core, and the part the backward pass recomputes.
    forward: f64,
    backward: f64,
    core: f64,
    recompute: f64,
}

/// Bytes per element: BF16 activations, one-byte dropout masks, FP32 loss.
const ACT: f64 = 2.0;
const MASK: f64 = 1.0;
const FP32: f64 = 4.0;
/// A backward element-wise kernel reads its saved input and its output's gradient and
/// writes its input's gradient: three tensors to the forward's two.
const BACKWARD_TRAFFIC: f64 = 1.5;

/// Bytes the forward pass of one layer moves through memory per token in kernels that
/// are not matrix multiplies, on one GPU of a tensor-parallel group of one. The tensors
/// are those Korthikanti et al. 2022 (arXiv 2205.05198 §4.1) count in a layer: two
/// norms (each reads and writes h), two residual adds with dropout (read the branch
/// and the residual, write the sum and a mask), the MLP's activation (reads its ffn-wide
/// input, two with a gated MLP, writes ffn) for each expert a token visits, and with
/// unfused attention the scores of every head (a·s per token), soft-maxed (read, write)
/// and dropped out (read, write, mask).
fn elementwise_bytes_per_token(shape: &ModelShape, attention: Attention, moe_layer: bool) -> f64 {
    let h = shape.hidden as f64;
    let norms = 2.0 * 2.0 * h * ACT;
    let residuals = 2.0 * (3.0 * h * ACT + h * MASK);
    let (width, copies) = if moe_layer {
        (shape.expert_ffn.unwrap_or(shape.ffn) as f64, (shape.top_k + shape.shared_experts) as f64)
    } else {
        (shape.ffn as f64, 1.0)
    };
    let inputs = if shape.gated_mlp { 2.0 } else { 1.0 };
    let activation = copies * (inputs + 1.0) * width * ACT;
    norms + residuals + activation + scores_bytes_per_token(shape, attention)
}

/// Of those, an unfused attention's: the scores of every head (a·s per token),
/// soft-maxed (read, write) and dropped out (read, write, mask); none when fused.
fn scores_bytes_per_token(shape: &ModelShape, attention: Attention) -> f64 {
    match attention {
        Attention::Fused => 0.0,
        Attention::Unfused => shape.heads as f64 * shape.seq_len as f64 * (2.0 * ACT + 2.0 * ACT + MASK),
    }
}

/// The loss over the vocabulary per token: the forward reads the BF16 logits, writes
/// their FP32 softmax and reads it again for the sum; the backward reads it and writes
/// the logits' gradient (Megatron-LM's vocabulary-parallel cross entropy).
fn loss_bytes_per_token(shape: &ModelShape) -> (f64, f64) {
    let v = shape.vocab as f64;
    (v * (ACT + FP32 + FP32), v * (FP32 + ACT))
}

fn compute(shape: &ModelShape, l: &Layout, job: &Job) -> Compute {
    let tokens = (l.micro_batch * shape.seq_len) as f64;
    let split = (l.tp * l.cp) as f64;
    let seq = shape.seq_len as f64;
    let (dm, dc) = shape.layer_flops(false, seq);
    let (mm, mc) = shape.layer_flops(true, seq);
    let share = l.stage_share(shape.layers);
    let dense_layers = (shape.layers - shape.moe_layers()) as f64 * share;
    let moe_layers = shape.moe_layers() as f64 * share;
    let matrix_peak = match job.precision {
        Precision::Bf16 => job.gpu.bf16_flops_per_sec,
        Precision::Fp8 => job.gpu.fp8_flops_per_sec,
    } * job.compute_efficiency;
    let core_peak = job.gpu.bf16_flops_per_sec * job.compute_efficiency;
    // A fused causal attention kernel skips the masked half of the scores; an unfused
    // one computes them all.
    let causal = match job.attention {
        Attention::Unfused => 1.0,
        Attention::Fused => 0.5,
    };
    let logits = 2.0 * shape.hidden as f64 * shape.vocab as f64;
    let matrices = tokens * (dense_layers * dm + moe_layers * mm + logits) / split / matrix_peak;
    let core = tokens * (dense_layers * dc + moe_layers * mc) * causal / split / core_peak;
    let bandwidth = job.gpu.memory_bytes_per_sec;
    let layers_bytes = dense_layers * elementwise_bytes_per_token(shape, job.attention, false)
        + moe_layers * elementwise_bytes_per_token(shape, job.attention, true);
    let elementwise = tokens * layers_bytes / split / bandwidth;
    // Selective recomputation runs the attention core again, with an unfused one's
    // softmax and dropout over the scores.
    let scores_bytes = scores_bytes_per_token(shape, job.attention);
    let scores = tokens * (dense_layers + moe_layers) * scores_bytes / split / bandwidth;
    let (loss_forward, loss_backward) = loss_bytes_per_token(shape);
    let loss = tokens / split / bandwidth;
    let recompute = match job.recompute {
        Recompute::None => 0.0,
        Recompute::Selective => core + scores,
        Recompute::Full => matrices - tokens * logits / split / matrix_peak + core + elementwise,
    };
    Compute {
        forward: matrices + core + elementwise + loss * loss_forward,
        backward: 2.0 * (matrices + core) + BACKWARD_TRAFFIC * elementwise + loss * loss_backward,
        core,
        recompute,
    }
}

pub fn step(shape: &ModelShape, l: &Layout, job: &Job, comms: &Comms, global_batch: u64) -> Result<Step, PlannerError> {
    let c = compute(shape, l, job);
    let m = l.micro_batches(global_batch) as f64;
    let (forward, backward) = (c.forward, c.backward);
    let act_bytes = 2.0; // BF16 activations on the wire
    let s = shape.seq_len as f64 / l.cp as f64;
    let b = l.micro_batch as f64;
    let h = shape.hidden as f64;
    let layers = shape.layers as f64 * l.stage_share(shape.layers);
    let moe_layers = shape.moe_layers() as f64 * l.stage_share(shape.layers);
    let mut lines = Vec::new();
    // Which part of the step the lines costed now belong to.
    let phase = std::cell::Cell::new(CommPhase::PerMicroBatch);
    // Cost `calls` calls among `ranks` (while every group of `groups` runs them too),
    // `hide` seconds of them behind compute, `share` of the rest exposed: (exposed,
    // total) seconds.
    let mut line = |name: &str,
                    ranks: Vec<u64>,
                    groups: &dyn Fn() -> Vec<Vec<u64>>,
                    coll: Collective,
                    bytes: f64,
                    calls: f64,
                    hide: f64,
                    share: f64| {
        let t = comms.time(&ranks, groups, coll, bytes)?;
        let exposed = (t.secs * calls - hide).max(0.0) * share;
        lines.push(CommLine {
            name: name.into(),
            phase: phase.get(),
            collective: coll.as_str().into(),
            ranks: ranks.len(),
            bytes,
            secs: t.secs,
            algorithm: t.algorithm,
            calls,
            exposed_secs: exposed,
        });
        Ok::<(f64, f64), PlannerError>((exposed, t.secs * calls))
    };
    // Per micro-batch on the critical path.
    let mut per_micro_batch = 0.0;
    if l.tp > 1 {
        let passes = if job.recompute == Recompute::Full { 6.0 } else { 4.0 };
        let calls = passes * layers * m;
        let bytes = s * b * h * act_bytes;
        per_micro_batch += line(
            "TP exchange per layer",
            l.group(Dim::Tp),
            &|| l.groups(Dim::Tp),
            Collective::AllReduce,
            bytes,
            calls,
            0.0,
            1.0 - job.tp_overlap,
        )?
        .0 / m;
    }
    if l.cp > 1 {
        // Keys and values of the whole sequence gathered; their gradients scattered back.
        let kv = 2.0 * shape.seq_len as f64 * b * shape.kv_dim() * act_bytes / l.tp as f64;
        let gathers = if job.recompute == Recompute::Full { 3.0 } else { 2.0 };
        let hide = c.core * 3.0 * m;
        per_micro_batch += line(
            "CP key/value exchange per layer",
            l.group(Dim::Cp),
            &|| l.groups(Dim::Cp),
            Collective::AllGather,
            kv,
            gathers * layers * m,
            hide,
            1.0,
        )?
        .0 / m;
    }
    if l.ep > 1 && shape.is_moe() {
        // Each GPU sends its tokens' copies (one per chosen expert) and gets them back.
        let tokens = s * b * shape.top_k as f64 * h * act_bytes / l.tp as f64;
        let passes = if job.recompute == Recompute::Full { 6.0 } else { 4.0 };
        per_micro_batch += line(
            "EP dispatch/combine per MoE layer",
            l.group(Dim::Ep),
            &|| l.groups(Dim::Ep),
            Collective::AllToAll,
            tokens,
            passes * moe_layers * m,
            0.0,
            1.0 - job.ep_overlap,
        )?
        .0 / m;
    }
    if l.pp > 1 {
        // Interleaving sends each micro-batch through v stages per GPU (Narayanan et
        // al. 2021 §2.2.2): v activations forward and v gradients back per micro-batch.
        // The bubble's share of them is in the bubble (the slot below includes them).
        let activation = s * b * h * act_bytes / l.tp as f64;
        // The slowest hop between neighbouring stages sets the pace: one that leaves a
        // server if any does (all such hops cross alike: rank order places every
        // stage's GPUs the same way), else the first.
        let stages = l.group(Dim::Pp);
        let hop = stages.windows(2).find(|w| !comms.same_server(w[0], w[1])).unwrap_or(&stages[..2]);
        let pair = hop.to_vec();
        // Every pipeline makes the same hop at once.
        let at = stages.iter().position(|&r| r == hop[0]).unwrap_or(0);
        let pairs = || l.groups(Dim::Pp).into_iter().filter_map(|g| g.get(at..at + 2).map(<[u64]>::to_vec)).collect();
        let vpp = l.vpp as f64;
        let calls = 2.0 * vpp * m;
        let (_, total) = line(
            "PP activation/gradient per micro-batch",
            pair,
            &pairs,
            Collective::SendRecv,
            activation,
            calls,
            0.0,
            1.0,
        )?;
        per_micro_batch += total / m;
    }
    let slot = forward + backward + c.recompute + per_micro_batch;
    let pipeline = (m + (l.pp - 1) as f64 / l.vpp as f64) * slot;
    let bubble_secs = pipeline - m * slot;
    // Data parallelism over the dense and the expert weights' replicas. The compute
    // that hides them is one budget, spent by the dense reduction first, then the
    // experts'.
    let (dense, experts) = params_per_gpu(shape, l);
    phase.set(CommPhase::DataParallel);
    let mut dp_exposed = 0.0;
    let mut grad_window = match (job.overlap_grad_reduce, job.zero) {
        (false, _) => 0.0,
        // ZeRO-2 keeps only its shard of the gradients: each micro-batch's are
        // reduce-scattered behind its own backward pass.
        (true, 2) => m * backward,
        (true, _) => backward,
    };
    let mut gather_window = if job.overlap_param_gather { forward } else { 0.0 };
    let mut zero3_window = m * slot;
    for (what, params, dim) in [("dense", dense, Dim::DenseDp), ("expert", experts, Dim::ExpertDp)] {
        if params <= 0.0 || l.group(dim).len() < 2 {
            continue;
        }
        let grads = params * job.grad_reduce_bytes;
        let weights = params * job.weight_bytes;
        let spend = |window: &mut f64, (exposed, total): (f64, f64)| {
            *window = (*window - (total - exposed)).max(0.0);
            exposed
        };
        // Every call of this dimension runs among its group, beside its other groups.
        let mut call = |name: String, coll: Collective, bytes: f64, calls: f64, window: &mut f64| {
            let r = line(&name, l.group(dim), &|| l.groups(dim), coll, bytes, calls, *window, 1.0)?;
            Ok::<f64, PlannerError>(spend(window, r))
        };
        match job.zero {
            0 => {
                let name = format!("DP {what} gradient all-reduce");
                dp_exposed += call(name, Collective::AllReduce, grads, 1.0, &mut grad_window)?;
            }
            1 | 2 => {
                let calls = if job.zero == 2 { m } else { 1.0 };
                let name = format!("DP {what} gradient reduce-scatter");
                dp_exposed += call(name, Collective::ReduceScatter, grads, calls, &mut grad_window)?;
                let name = format!("DP {what} weight all-gather");
                dp_exposed += call(name, Collective::AllGather, weights, 1.0, &mut gather_window)?;
            }
            _ => {
                // ZeRO-3: every micro-batch gathers the weights (forward, backward) and
                // reduce-scatters the gradients, behind its compute.
                let name = format!("ZeRO-3 {what} weight all-gather");
                dp_exposed += call(name, Collective::AllGather, weights, 2.0 * m, &mut zero3_window)?;
                let name = format!("ZeRO-3 {what} gradient reduce-scatter");
                dp_exposed += call(name, Collective::ReduceScatter, grads, m, &mut zero3_window)?;
            }
        }
    }
    // Adam reads and writes weights, gradients and its state once (of this GPU's
    // shard: dense state over DP × CP replicas, experts' over DP × CP / EP).
    let shard = |dp: f64| if job.zero >= 1 { dp } else { 1.0 };
    let dense_dp = (l.dp * l.cp) as f64;
    let state_bytes = job.weight_bytes + job.grad_bytes + job.optimizer_bytes;
    let state = state_bytes * (dense / shard(dense_dp) + experts / shard(dense_dp / l.ep as f64));
    let optimizer_secs = 2.0 * state / job.gpu.memory_bytes_per_sec;
    let step_secs = pipeline + dp_exposed + optimizer_secs;
    let tokens = (global_batch * shape.seq_len) as f64;
    let gpus = l.gpus() as f64;
    let model_flops = shape.model_flops_per_token() * tokens;
    let tokens_per_sec = tokens / step_secs;
    let model_tflops_per_gpu = model_flops / step_secs / gpus / 1e12;
    let peak = match job.precision {
        Precision::Bf16 => job.gpu.bf16_flops_per_sec,
        Precision::Fp8 => job.gpu.fp8_flops_per_sec,
    };
    let recompute_flops = match job.recompute {
        Recompute::None => 0.0,
        // Megatron-LM's counts: the attention core again (Korthikanti's s/6h → s/3h),
        // or the whole forward but the logits.
        Recompute::Selective => shape.forward_flops_per_token() - forward_matrices_per_token(shape),
        Recompute::Full => shape.forward_flops_per_token() - 2.0 * shape.hidden as f64 * shape.vocab as f64,
    } * tokens;
    let exposed_comm_secs = lines.iter().map(|x| x.exposed_secs).sum::<f64>();
    Ok(Step {
        micro_batches: m as u64,
        forward_secs: forward,
        backward_secs: backward,
        recompute_secs: c.recompute,
        compute_secs: m * (forward + backward + c.recompute),
        bubble_secs,
        comms: lines,
        exposed_comm_secs,
        optimizer_secs,
        step_secs,
        tokens_per_sec,
        model_tflops_per_gpu,
        mfu: model_tflops_per_gpu * 1e12 / peak,
        hardware_tflops_per_gpu: (model_flops + recompute_flops) / step_secs / gpus / 1e12,
    })
}

/// Forward FLOPs of one token through the matrices alone (no attention core).
fn forward_matrices_per_token(shape: &ModelShape) -> f64 {
    let seq = shape.seq_len as f64;
    let dense = (shape.layers - shape.moe_layers()) as f64;
    let (dm, _) = shape.layer_flops(false, seq);
    let (mm, _) = shape.layer_flops(true, seq);
    dense * dm + shape.moe_layers() as f64 * mm + 2.0 * shape.hidden as f64 * shape.vocab as f64
}

#[cfg(test)]
mod tests {
    use super::super::{evaluate, JobInput};

    /// A step is its parts: compute, the bubble, every exposed communication and the
    /// optimizer add up to the step time (nothing counted twice, nothing left out), for
    /// every layout of a small job and every ZeRO stage.
    #[test]
    fn a_step_is_the_sum_of_its_phases() {
        let topology = railyard_topology::load("dgx-h100:nodes=4").unwrap();
        for zero in 0..=3 {
            let text = format!(
                "model = \"mixtral-8x7b\"\ntopo = \"dgx-h100:nodes=4\"\nglobal_batch = 64\nzero = {zero}\nlayout = \"search\"\nshow = 100\n"
            );
            let input: JobInput = toml::from_str(&text).unwrap();
            let report = evaluate(&input, &topology).unwrap();
            assert!(!report.ranked.is_empty());
            for e in &report.ranked {
                let s = e.step.as_ref().unwrap();
                let exposed: f64 = s.comms.iter().map(|c| c.exposed_secs).sum();
                let parts = s.compute_secs + s.bubble_secs + exposed + s.optimizer_secs;
                assert!(
                    (parts - s.step_secs).abs() < 1e-9 * s.step_secs,
                    "{} ZeRO-{zero}: {parts} vs {}",
                    e.layout,
                    s.step_secs
                );
                assert!(s.mfu > 0.0 && s.mfu < 1.0, "{}", s.mfu);
            }
        }
    }
}

#[cfg(test)]
mod elementwise_tests {
    use super::super::shape::ModelShape;
    use super::super::Attention;
    use super::elementwise_bytes_per_token;

    fn shape(gated: bool) -> ModelShape {
        ModelShape { gated_mlp: gated, ..super::super::shape::megatron(2, 1024, 16) }
    }

    /// The accounting by hand: norms 2·2·h·2, residual adds 2·(3·h·2 + h), GeLU
    /// (1 + 1)·ffn·2, and unfused scores a·s·(2·2 + 2·2 + 1) bytes per token.
    #[test]
    fn a_layer_moves_its_tensors_once() {
        let h = 1024.0;
        let base = 8.0 * h + 14.0 * h;
        assert_eq!(elementwise_bytes_per_token(&shape(false), Attention::Fused, false), base + 4.0 * 4096.0);
        assert_eq!(
            elementwise_bytes_per_token(&shape(false), Attention::Unfused, false),
            base + 4.0 * 4096.0 + 16.0 * 2048.0 * 9.0
        );
        // SwiGLU reads two ffn-wide inputs.
        assert_eq!(elementwise_bytes_per_token(&shape(true), Attention::Fused, false), base + 6.0 * 4096.0);
    }
}

//! Memory per GPU of a training job under a layout: weights, gradients and optimizer
//! state as ZeRO shards them (Rajbhandari et al. 2020, arXiv 1910.02054 §3: 2 bytes of
//! BF16 weights, 12 of FP32 master weights and Adam moments per parameter; gradients as
//! the job keeps them, Megatron-LM's FP32 main gradients by default), activations of the
//! micro-batches a pipeline stage holds (Korthikanti et al. 2022, arXiv 2205.05198
//! §4: s·b·h·(34 + 5·a·s/h)/t bytes per layer with tensor and sequence parallelism, the
//! s² term gone when attention is recomputed or fused; 2·s·b·h/t with full
//! recomputation), the communicators' buffers and a stated reserve.

use serde::Serialize;

use super::layout::Layout;
use super::shape::ModelShape;
use super::{Attention, Job, Recompute};

/// NCCL's buffer per channel, peer and direction (NCCL_BUFFSIZE, 4 MiB: nccl-facts.md).
const NCCL_BUFFER_BYTES: f64 = 4.0 * 1024.0 * 1024.0;
/// Channels a communicator sets up on these machines (NCCL's default on NVSwitch
/// systems; nccl-facts.md).
const NCCL_CHANNELS: f64 = 16.0;

/// The memory of one GPU of the busiest pipeline stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    pub weights_bytes: f64,
    pub gradients_bytes: f64,
    pub optimizer_bytes: f64,
    pub activations_bytes: f64,
    /// Micro-batches whose activations the first stage holds at once (1F1B).
    pub in_flight_micro_batches: f64,
    pub buffers_bytes: f64,
    pub reserve_bytes: f64,
    pub total_bytes: f64,
    pub capacity_bytes: f64,
}

impl Memory {
    pub fn fits(&self) -> bool {
        self.total_bytes <= self.capacity_bytes
    }
}

/// Parameters one GPU of a stage holds: (dense and embeddings, experts).
pub fn params_per_gpu(shape: &ModelShape, l: &Layout) -> (f64, f64) {
    let p = shape.params();
    let tp = l.tp as f64;
    // The first stage holds the input embedding, the last the output layer (a copy of
    // it when they are tied); with one stage, both. Vocabulary-parallel over TP.
    let embeddings = if l.pp == 1 || shape.tied_embeddings { p.embeddings } else { p.embeddings / 2.0 };
    let share = l.stage_share(shape.layers);
    let dense = p.dense * share / tp + embeddings / tp;
    let experts = p.experts * share / (l.ep as f64 * tp);
    (dense, experts)
}

/// Activation bytes of one layer for one micro-batch, on one GPU.
fn layer_activation_bytes(shape: &ModelShape, l: &Layout, job: &Job, moe_layer: bool) -> f64 {
    let s = shape.seq_len as f64 / l.cp as f64;
    let b = l.micro_batch as f64;
    let h = shape.hidden as f64;
    let t = l.tp as f64;
    if job.recompute == Recompute::Full {
        return 2.0 * s * b * h / t;
    }
    // Korthikanti et al.'s 34·s·b·h for a 4h MLP, split by part: attention 11 (with
    // grouped keys and values: 7 + 4·kv/h), norms 4, MLP 3 + 4·ffn/h (+2·ffn/h gated).
    let attention = 7.0 + 4.0 * shape.kv_dim() / h;
    let per_ffn = if shape.gated_mlp { 6.0 } else { 4.0 };
    let mlp = if moe_layer {
        let width = shape.expert_ffn.unwrap_or(shape.ffn) as f64;
        (shape.top_k + shape.shared_experts) as f64 * (3.0 + per_ffn * width / h)
    } else {
        3.0 + per_ffn * shape.ffn as f64 / h
    };
    let kept = job.recompute == Recompute::None && job.attention == Attention::Unfused;
    // Each local query's scores span the whole sequence's keys (gathered or passed
    // round the context-parallel ring): a·(s/cp)·S, not a·(s/cp)².
    let scores = if kept { 5.0 * shape.heads as f64 * shape.seq_len as f64 / h } else { 0.0 };
    s * b * h * (attention + 4.0 + mlp + scores) / t
}

pub fn memory(shape: &ModelShape, l: &Layout, job: &Job, global_batch: u64) -> Memory {
    let (dense, experts) = params_per_gpu(shape, l);
    let dense_dp = (l.dp * l.cp) as f64;
    let expert_dp = dense_dp / l.ep as f64;
    let shard = |stage: u8, dp: f64| if job.zero >= stage { dp } else { 1.0 };
    let held = |bytes_per_param: f64, stage: u8| {
        bytes_per_param * (dense / shard(stage, dense_dp) + experts / shard(stage, expert_dp))
    };
    let weights_bytes = held(job.weight_bytes, 3);
    let gradients_bytes = held(job.grad_bytes, 2);
    let optimizer_bytes = held(job.optimizer_bytes, 1);
    // The first stage holds its layers' activations for min(PP, m) micro-batches, more
    // with interleaving (Narayanan et al. 2021 §2.2.2: 1 + (p−1)/(p·v) of a stage's).
    let m = l.micro_batches(global_batch) as f64;
    let (pp, vpp) = (l.pp as f64, l.vpp as f64);
    let interleaving = if l.vpp > 1 { 1.0 + (pp - 1.0) / (pp * vpp) } else { 1.0 };
    let in_flight = if l.pp == 1 { 1.0 } else { m.min(pp) * interleaving };
    let layers = shape.layers as f64 * l.stage_share(shape.layers);
    let moe_share = shape.moe_layers() as f64 / shape.layers as f64;
    let per_layer = layer_activation_bytes(shape, l, job, false) * (1.0 - moe_share)
        + layer_activation_bytes(shape, l, job, true) * moe_share;
    // The last stage's FP32 logits for one micro-batch.
    let logits = 4.0 * shape.seq_len as f64 / l.cp as f64 * l.micro_batch as f64 * shape.vocab as f64 / l.tp as f64;
    let activations_bytes = per_layer * layers * in_flight + if l.pp == 1 { logits } else { 0.0 };
    let communicators = [l.tp, l.cp, l.pp, l.dp * l.cp, l.ep].iter().filter(|&&d| d > 1).count() as f64;
    // Two peers (a ring's), both directions.
    let buffers_bytes = communicators * NCCL_CHANNELS * 2.0 * 2.0 * NCCL_BUFFER_BYTES;
    let reserve_bytes = job.reserve_bytes;
    let total_bytes =
        weights_bytes + gradients_bytes + optimizer_bytes + activations_bytes + buffers_bytes + reserve_bytes;
    Memory {
        weights_bytes,
        gradients_bytes,
        optimizer_bytes,
        activations_bytes,
        in_flight_micro_batches: in_flight,
        buffers_bytes,
        reserve_bytes,
        total_bytes,
        capacity_bytes: job.gpu.memory_bytes,
    }
}

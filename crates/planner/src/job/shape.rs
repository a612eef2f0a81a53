//! A transformer's shape, its parameters and its FLOPs per token, and the public model
//! shapes railyard knows by name (every number from the model's paper or released
//! config; docs/training-sources.md names each).
//!
//! Parameter and FLOP counts follow Narayanan et al. 2021 (arXiv 2104.04473, §3 and
//! Appendix): a layer's matrix multiplications cost 2 FLOPs per weight per token
//! forward, the attention core 2·2·s·d_attn per token (QKᵀ and the weighted sum of V,
//! over the whole sequence, as that paper counts it), backward twice the forward.

use serde::{Deserialize, Serialize};

use crate::error::{within, PlannerError};

/// The largest dimension a shape may give (2^24): keeps every product finite in f64.
pub const MAX_DIM: f64 = 16_777_216.0;
/// The most layers (2^14).
pub const MAX_LAYERS: u64 = 16_384;
/// The most experts per MoE layer.
pub const MAX_EXPERTS: u64 = 4096;

/// A decoder-only transformer.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelShape {
    pub name: String,
    pub layers: u64,
    pub hidden: u64,
    /// Width of a dense layer's MLP.
    pub ffn: u64,
    pub heads: u64,
    /// Key/value heads (grouped-query attention); `heads` when left out.
    #[serde(default)]
    pub kv_heads: Option<u64>,
    pub vocab: u64,
    /// Sequence length trained at.
    pub seq_len: u64,
    /// A gated MLP (SwiGLU: three matrices) rather than two.
    #[serde(default)]
    pub gated_mlp: bool,
    /// Input and output embeddings shared.
    #[serde(default)]
    pub tied_embeddings: bool,
    /// Routed experts per MoE layer (0: dense).
    #[serde(default)]
    pub experts: u64,
    /// Routed experts each token goes to.
    #[serde(default)]
    pub top_k: u64,
    /// Experts every token goes to besides (DeepSeek's shared experts).
    #[serde(default)]
    pub shared_experts: u64,
    /// Width of one expert's MLP (`ffn` when left out).
    #[serde(default)]
    pub expert_ffn: Option<u64>,
    /// The first layers that stay dense in an MoE model.
    #[serde(default)]
    pub dense_layers: u64,
}

/// Parameters, split as the layouts shard them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Params {
    /// Attention and dense-MLP weights of all layers (split by tensor parallelism).
    pub dense: f64,
    /// Routed experts' weights of all layers (split by expert and tensor parallelism).
    pub experts: f64,
    /// Input and output embeddings.
    pub embeddings: f64,
    /// Weights one token uses (dense, its experts, the output layer).
    pub active: f64,
}

impl Params {
    pub fn total(&self) -> f64 {
        self.dense + self.experts + self.embeddings
    }
}

impl ModelShape {
    pub fn kv_heads(&self) -> u64 {
        self.kv_heads.unwrap_or(self.heads)
    }

    pub fn is_moe(&self) -> bool {
        self.experts > 0
    }

    fn expert_ffn(&self) -> u64 {
        self.expert_ffn.unwrap_or(self.ffn)
    }

    /// Layers with routed experts.
    pub fn moe_layers(&self) -> u64 {
        if self.is_moe() {
            self.layers - self.dense_layers
        } else {
            0
        }
    }

    /// Width of the keys and values of one token.
    pub fn kv_dim(&self) -> f64 {
        self.hidden as f64 / self.heads as f64 * self.kv_heads() as f64
    }

    fn mlp_matrices(&self) -> f64 {
        if self.gated_mlp {
            3.0
        } else {
            2.0
        }
    }

    /// Weights of one layer's attention: Q and O are h×h, K and V h×kv_dim.
    fn attention_params(&self) -> f64 {
        let h = self.hidden as f64;
        2.0 * h * h + 2.0 * h * self.kv_dim()
    }

    fn expert_params(&self) -> f64 {
        self.mlp_matrices() * self.hidden as f64 * self.expert_ffn() as f64
    }

    pub fn params(&self) -> Params {
        let h = self.hidden as f64;
        let layers = self.layers as f64;
        let moe = self.moe_layers() as f64;
        let dense_mlp = self.mlp_matrices() * h * self.ffn as f64;
        // Shared experts and the router stay with the dense weights (every token uses them).
        let moe_dense = self.shared_experts as f64 * self.expert_params() + h * self.experts as f64;
        let dense = layers * self.attention_params() + (layers - moe) * dense_mlp + moe * moe_dense;
        let experts = moe * self.experts as f64 * self.expert_params();
        let embeddings = h * self.vocab as f64 * if self.tied_embeddings { 1.0 } else { 2.0 };
        let active = dense + moe * self.top_k as f64 * self.expert_params() + h * self.vocab as f64;
        Params { dense, experts, embeddings, active }
    }

    /// Forward FLOPs of one token through one layer's matrices (its experts' share for
    /// an MoE layer), and of its attention core at sequence length `seq`.
    pub fn layer_flops(&self, moe_layer: bool, seq: f64) -> (f64, f64) {
        let h = self.hidden as f64;
        let mlp = if moe_layer {
            (self.top_k + self.shared_experts) as f64 * self.expert_params() + h * self.experts as f64
        } else {
            self.mlp_matrices() * h * self.ffn as f64
        };
        let matrices = 2.0 * (self.attention_params() + mlp);
        let core = 4.0 * seq * h;
        (matrices, core)
    }

    /// Forward FLOPs of one token through the whole model (the logits included).
    pub fn forward_flops_per_token(&self) -> f64 {
        let seq = self.seq_len as f64;
        let dense = (self.layers - self.moe_layers()) as f64;
        let (dm, dc) = self.layer_flops(false, seq);
        let (mm, mc) = self.layer_flops(true, seq);
        dense * (dm + dc) + self.moe_layers() as f64 * (mm + mc) + 2.0 * self.hidden as f64 * self.vocab as f64
    }

    /// Model FLOPs of training on one token (forward and backward, no recomputation):
    /// what MFU counts (Chowdhery et al. 2022, PaLM, Appendix B).
    pub fn model_flops_per_token(&self) -> f64 {
        3.0 * self.forward_flops_per_token()
    }

    /// Check every field against its limit; errors name `field.<name>`.
    pub fn check(&self, field: &str) -> Result<(), PlannerError> {
        let f = |name: &str| format!("{field}.{name}");
        let dim = |name: &str, v: u64| within(&f(name), v as f64, 1.0, MAX_DIM).map(|_| ());
        within(&f("layers"), self.layers as f64, 1.0, MAX_LAYERS as f64)?;
        dim("hidden", self.hidden)?;
        dim("ffn", self.ffn)?;
        dim("heads", self.heads)?;
        dim("vocab", self.vocab)?;
        dim("seq_len", self.seq_len)?;
        if !self.hidden.is_multiple_of(self.heads) {
            return Err(PlannerError::bad(
                f("heads"),
                format!("{} heads do not divide hidden {}", self.heads, self.hidden),
            ));
        }
        let kv = self.kv_heads();
        if kv == 0 || kv > self.heads || !self.heads.is_multiple_of(kv) {
            return Err(PlannerError::bad(f("kv_heads"), format!("{kv} must divide the {} heads", self.heads)));
        }
        if self.is_moe() {
            within(&f("experts"), self.experts as f64, 1.0, MAX_EXPERTS as f64)?;
            within(&f("top_k"), self.top_k as f64, 1.0, self.experts as f64)?;
            dim("expert_ffn", self.expert_ffn())?;
            if self.dense_layers >= self.layers {
                return Err(PlannerError::bad(
                    f("dense_layers"),
                    format!("{} of {} layers dense leaves no MoE layer", self.dense_layers, self.layers),
                ));
            }
            within(&f("shared_experts"), self.shared_experts as f64, 0.0, MAX_EXPERTS as f64)?;
        } else if self.top_k != 0 || self.shared_experts != 0 || self.dense_layers != 0 {
            return Err(PlannerError::bad(
                f("experts"),
                "top_k, shared_experts and dense_layers need experts (an MoE model)",
            ));
        }
        Ok(())
    }
}

/// Public model shapes, each from its paper or released configuration
/// (docs/training-sources.md).
pub fn preset(name: &str) -> Option<ModelShape> {
    let dense = |name: &str, layers, hidden, ffn, heads, kv, vocab, seq, gated| ModelShape {
        name: name.to_string(),
        layers,
        hidden,
        ffn,
        heads,
        kv_heads: Some(kv),
        vocab,
        seq_len: seq,
        gated_mlp: gated,
        tied_embeddings: false,
        experts: 0,
        top_k: 0,
        shared_experts: 0,
        expert_ffn: None,
        dense_layers: 0,
    };
    Some(match name {
        // GPT-3 paper (arXiv 2005.14165) Table 2.1; GPT-2's 50,257-token vocabulary.
        "gpt3-175b" => dense(name, 96, 12288, 4 * 12288, 96, 96, 50257, 2048, false),
        // Llama 3 paper (arXiv 2407.21783) Table 3; vocabulary of the released config.
        "llama3-8b" => dense(name, 32, 4096, 14336, 32, 8, 128_256, 8192, true),
        "llama3-70b" => dense(name, 80, 8192, 28672, 64, 8, 128_256, 8192, true),
        "llama3-405b" => dense(name, 126, 16384, 53248, 128, 8, 128_256, 8192, true),
        // Mixtral 8x7B: transformers' MixtralConfig defaults (mistralai/Mixtral-8x7B-v0.1).
        "mixtral-8x7b" => ModelShape { experts: 8, top_k: 2, ..dense(name, 32, 4096, 14336, 32, 8, 32000, 4096, true) },
        // DeepSeek-V3 (arXiv 2412.19437 §4.2; config_671B.json): 61 layers, the first 3
        // dense (FFN 18,432), then 256 routed experts of width 2,048, top-8, and one
        // shared. Its multi-head latent attention is counted as 128 full heads of 56
        // (the same weights within 10%).
        "deepseek-v3" => ModelShape {
            experts: 256,
            top_k: 8,
            shared_experts: 1,
            expert_ffn: Some(2048),
            dense_layers: 3,
            ..dense(name, 61, 7168, 18432, 128, 128, 129_280, 4096, true)
        },
        _ => return None,
    })
}

/// The names [`preset`] knows.
pub const PRESETS: &[&str] = &["gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b", "deepseek-v3"];

/// A GPT of Megatron-LM's Table 1 (4h MLP, vocabulary 51,200, sequence 2,048), for tests.
#[cfg(test)]
pub(crate) fn megatron(layers: u64, hidden: u64, heads: u64) -> ModelShape {
    ModelShape {
        name: "gpt".into(),
        layers,
        hidden,
        ffn: 4 * hidden,
        heads,
        kv_heads: None,
        vocab: 51200,
        seq_len: 2048,
        gated_mlp: false,
        tied_embeddings: true,
        experts: 0,
        top_k: 0,
        shared_experts: 0,
        expert_ffn: None,
        dense_layers: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Narayanan et al. 2021, Eq. 2: P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)) gives
    /// Table 1's counts (it counts biases, layer norms and position embeddings, which
    /// are below 0.2% here); and Eq. 3's FLOPs, 96·B·s·l·h²·(1 + s/6h + V/16lh), are
    /// ours with the layers' forward run twice (the recomputation; the logits are not
    /// recomputed).
    #[test]
    fn megatron_table_1_parameters_and_flops() {
        for (layers, hidden, heads, billions) in [(24, 2304, 24, 1.7), (48, 8192, 64, 39.1), (128, 25600, 160, 1008.0)]
        {
            let m = megatron(layers, hidden, heads);
            let (l, h, s, v) = (layers as f64, hidden as f64, 2048.0, 51200.0);
            let eq2 = 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (v + s) / (12.0 * l * h));
            let p = m.params().total();
            // Within Eq. 2's biases, norms and position embeddings, and Table 1's rounding.
            assert!((p - eq2).abs() / eq2 < 0.01, "{layers} layers: {p} vs Eq. 2's {eq2}");
            assert!((eq2 / 1e9 - billions).abs() / billions < 0.03, "{eq2} vs Table 1's {billions}B");
            let eq3 = 96.0 * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
            let logits = 2.0 * h * v;
            let ours = (4.0 * (m.forward_flops_per_token() - logits) + 3.0 * logits) * s;
            assert!((ours - eq3).abs() / eq3 < 1e-9, "{ours} vs {eq3}");
        }
    }

    /// Llama 3 405B and DeepSeek-V3 come out at their published sizes.
    #[test]
    fn presets_have_their_published_sizes() {
        let p = preset("llama3-405b").unwrap().params();
        assert!((p.total() / 1e9 - 405.0).abs() < 5.0, "{}", p.total());
        let d = preset("deepseek-v3").unwrap().params();
        assert!((d.total() / 1e9 - 671.0).abs() / 671.0 < 0.03, "{}", d.total() / 1e9);
        assert!((d.active / 1e9 - 37.0).abs() / 37.0 < 0.05, "{}", d.active / 1e9);
        let x = preset("mixtral-8x7b").unwrap().params();
        assert!((x.total() / 1e9 - 46.7).abs() < 1.0, "{}", x.total() / 1e9);
        for name in PRESETS {
            preset(name).unwrap().check("job.model").unwrap();
        }
    }
}

//! A user's training job (`[job]` in a scenario): a model, a batch, a precision and
//! optimizer sharding, a cluster, and a layout or a search over layouts. Each layout is
//! checked against the GPU's memory and timed step by step (`step.rs`), its
//! communication costed as schedules on the cluster's topology.

pub mod comms;
pub mod gpu;
pub mod layout;
pub mod memory;
pub mod report;
pub mod shape;
pub mod solve;
pub mod step;
pub mod timeline;
pub mod validation;

use serde::{Deserialize, Serialize};

use railyard_units::quantity;
use railyard_units::units::format_bytes;

use crate::comm::Engine;
use crate::error::{within, PlannerError};
use comms::Comms;
use gpu::Gpu;
use layout::Layout;
use memory::Memory;
use shape::ModelShape;
use step::Step;

/// The most rows a search report lists.
pub const MAX_SHOWN: usize = 100;
/// The most GPUs a job may have (a search over them costs groups of up to this many).
pub const MAX_JOB_GPUS: u64 = 1 << 15;
/// The largest global batch (sequences).
pub const MAX_GLOBAL_BATCH: u64 = 1 << 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    Bf16,
    /// FP8 matrix multiplies (attention core and weights kept in BF16).
    Fp8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    /// Every activation kept; attention unfused (its scores stored).
    None,
    /// The attention core recomputed (or fused: FlashAttention), nothing else.
    #[default]
    Selective,
    /// Only each layer's input kept; the forward run again in the backward pass.
    Full,
}

/// How the attention core runs: fused (FlashAttention: the scores never leave the
/// kernel, and its causal form skips the masked half) or unfused (the score matrix of
/// every head written to memory, soft-maxed and dropped out by their own kernels, as in
/// Megatron-LM before FlashAttention, 2022).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Attention {
    Fused,
    Unfused,
}

/// A named model or one written out.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ModelSpec {
    Preset(String),
    Shape(Box<ModelShape>),
}

/// A layout (its unstated virtual stages and micro-batch searched), or `"search"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum LayoutSpec {
    Search(String),
    Fixed(layout::LayoutInput),
}

// A string or a table, each read with its own errors: serde's untagged enums say only
// "did not match any variant", which hides the key that was wrong.
impl<'de> Deserialize<'de> for ModelSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::String(name) => Ok(ModelSpec::Preset(name)),
            v @ toml::Value::Table(_) => {
                ModelShape::deserialize(v).map(|s| ModelSpec::Shape(Box::new(s))).map_err(D::Error::custom)
            }
            other => Err(D::Error::custom(format!("expected a preset name or a table, got {}", other.type_str()))),
        }
    }
}

impl<'de> Deserialize<'de> for LayoutSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::String(word) => Ok(LayoutSpec::Search(word)),
            v @ toml::Value::Table(_) => {
                layout::LayoutInput::deserialize(v).map(LayoutSpec::Fixed).map_err(D::Error::custom)
            }
            other => Err(D::Error::custom(format!(
                "expected \"search\" or a table {{ tp = 8, pp = 4, dp = 32 }}, got {}",
                other.type_str()
            ))),
        }
    }
}

/// `[job]`, as a user writes it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JobInput {
    /// A preset name (`gpt3-175b`, `llama3-8b`, `llama3-70b`, `llama3-405b`,
    /// `mixtral-8x7b`, `deepseek-v3`) or a `[job.model]` table.
    pub model: ModelSpec,
    /// A machine preset (`dgx-h100:nodes=128`) or a topology file.
    pub topo: String,
    /// The GPU (`a100`, `h100`, `h200`, `b200`, `gb200`); the machine preset's when left out.
    #[serde(default)]
    pub gpu: Option<String>,
    /// Sequences per step.
    pub global_batch: u64,
    /// Overrides the model's sequence length.
    #[serde(default)]
    pub seq_len: Option<u64>,
    #[serde(default)]
    pub precision: Precision,
    /// ZeRO stage of the data-parallel sharding: 0 none, 1 optimizer state (Megatron's
    /// distributed optimizer), 2 and gradients, 3 and weights (FSDP).
    #[serde(default = "default_zero")]
    pub zero: u8,
    #[serde(default)]
    pub recompute: Recompute,
    /// The attention kernel; unfused when nothing is recomputed, fused otherwise, when
    /// left out.
    #[serde(default)]
    pub attention: Option<Attention>,
    pub layout: LayoutSpec,
    /// The share of peak the GPU's kernels sustain (the GPU's own when left out).
    #[serde(default)]
    pub compute_efficiency: Option<f64>,
    /// Bytes per gradient element reduced across data-parallel ranks (4: FP32, as
    /// Megatron-LM and Llama 3 reduce them).
    #[serde(default = "four")]
    pub grad_reduce_bytes: f64,
    /// Bytes per gradient element kept (4: Megatron-LM's FP32 main gradients).
    #[serde(default = "four")]
    pub grad_bytes: f64,
    /// Gradient reduction overlapped with the backward pass (Megatron-LM's
    /// --overlap-grad-reduce).
    #[serde(default = "yes")]
    pub overlap_grad_reduce: bool,
    /// ZeRO's weight all-gather overlapped with the next forward pass.
    #[serde(default = "yes")]
    pub overlap_param_gather: bool,
    /// Share of tensor-parallel communication hidden behind compute (0: none, as in
    /// Megatron-LM without its communication-overlap user buffers).
    #[serde(default)]
    pub tp_overlap: f64,
    /// Share of expert-parallel all-to-all hidden behind compute (0: none; DeepSeek-V3's
    /// DualPipe hides most of it).
    #[serde(default)]
    pub ep_overlap: f64,
    /// Kept free on every GPU: CUDA context, allocator slack, workspaces.
    #[serde(default = "default_reserve", deserialize_with = "quantity::bytes")]
    pub reserve_bytes: f64,
    /// Tokens per second the job should reach: `--solve` answers the fewest nodes and
    /// the slowest NIC that reach it.
    #[serde(default)]
    pub target_tokens_per_sec: Option<f64>,
    /// Rows of a search's table.
    #[serde(default = "default_show")]
    pub show: usize,
}

fn default_zero() -> u8 {
    1
}
fn four() -> f64 {
    4.0
}
fn yes() -> bool {
    true
}
fn default_reserve() -> f64 {
    2.0 * 1024.0 * 1024.0 * 1024.0
}
fn default_show() -> usize {
    10
}

/// A job resolved: its shape, GPU and every setting checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub shape: ModelShape,
    pub gpu: Gpu,
    pub precision: Precision,
    pub zero: u8,
    pub recompute: Recompute,
    pub attention: Attention,
    pub compute_efficiency: f64,
    pub weight_bytes: f64,
    pub grad_bytes: f64,
    pub optimizer_bytes: f64,
    pub grad_reduce_bytes: f64,
    pub overlap_grad_reduce: bool,
    pub overlap_param_gather: bool,
    pub tp_overlap: f64,
    pub ep_overlap: f64,
    pub reserve_bytes: f64,
}

/// One layout's memory and step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluated {
    pub layout: Layout,
    pub memory: Memory,
    /// `None` when it does not fit.
    pub step: Option<Step>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobReport {
    pub model: ModelShape,
    pub params: shape::Params,
    pub topo: String,
    pub gpus: u64,
    pub gpu: Gpu,
    pub global_batch: u64,
    pub precision: Precision,
    pub zero: u8,
    pub recompute: Recompute,
    pub attention: Attention,
    pub compute_efficiency: f64,
    /// Layouts that run the job, and how many were weighed and did not fit.
    pub layouts_weighed: usize,
    pub layouts_refused_for_memory: usize,
    /// Fastest first (a fixed layout: the one).
    pub ranked: Vec<Evaluated>,
    /// Why the fastest beats the runner-up.
    pub why: Option<String>,
    /// Collectives costed on the topology.
    pub costings: usize,
    /// What timed them.
    pub engine: Engine,
    /// Under `Engine::Sim`: those over the simulator's group size, timed by the model.
    pub timed_by_model: usize,
    /// Under `Engine::Sim`: those simulated without some of the groups that share their
    /// servers (more ranks together than the simulator's group size).
    pub simulated_without_all_neighbours: usize,
}

impl JobInput {
    pub fn resolve(&self) -> Result<(Job, u64), PlannerError> {
        let mut shape = match &self.model {
            ModelSpec::Preset(name) => shape::preset(name).ok_or_else(|| {
                PlannerError::bad(
                    "job.model",
                    format!(
                        "unknown model \"{name}\" (presets: {}; or give a [job.model] table)",
                        shape::PRESETS.join(", ")
                    ),
                )
            })?,
            ModelSpec::Shape(s) => (**s).clone(),
        };
        if let Some(seq) = self.seq_len {
            shape.seq_len = seq;
        }
        shape.check("job.model")?;
        let gpu = match &self.gpu {
            Some(name) => gpu::by_name(name).ok_or_else(|| {
                let names: Vec<&str> = gpu::GPUS.iter().map(|g| g.name).collect();
                PlannerError::bad("job.gpu", format!("unknown GPU \"{name}\" (known: {})", names.join(", ")))
            })?,
            None => gpu::of_topology(&self.topo).ok_or_else(|| {
                PlannerError::bad(
                    "job.gpu",
                    format!("{} is not a machine preset; say which GPU (gpu = \"h100\")", self.topo),
                )
            })?,
        };
        if self.precision == Precision::Fp8 && gpu.fp8_flops_per_sec == 0.0 {
            return Err(PlannerError::bad("job.precision", format!("the {} has no FP8 tensor cores", gpu.name)));
        }
        within("job.global_batch", self.global_batch as f64, 1.0, MAX_GLOBAL_BATCH as f64)?;
        if self.zero > 3 {
            return Err(PlannerError::bad("job.zero", format!("ZeRO stages are 0..=3 (got {})", self.zero)));
        }
        let compute_efficiency = self.compute_efficiency.unwrap_or(gpu.compute_efficiency);
        within("job.compute_efficiency", compute_efficiency, 0.01, 1.0)?;
        within("job.grad_reduce_bytes", self.grad_reduce_bytes, 1.0, 8.0)?;
        within("job.grad_bytes", self.grad_bytes, 1.0, 8.0)?;
        within("job.tp_overlap", self.tp_overlap, 0.0, 1.0)?;
        within("job.ep_overlap", self.ep_overlap, 0.0, 1.0)?;
        within("job.reserve_bytes", self.reserve_bytes, 0.0, gpu.memory_bytes)?;
        within("job.show", self.show as f64, 1.0, MAX_SHOWN as f64)?;
        if let Some(t) = self.target_tokens_per_sec {
            within("job.target_tokens_per_sec", t, 1.0, 1e15)?;
        }
        if let LayoutSpec::Search(word) = &self.layout {
            if word != "search" {
                return Err(PlannerError::bad(
                    "job.layout",
                    format!("\"{word}\": give \"search\" or a table {{ tp = 8, pp = 4, dp = 32 }}"),
                ));
            }
        }
        let job = Job {
            shape,
            gpu,
            precision: self.precision,
            zero: self.zero,
            recompute: self.recompute,
            attention: self.attention.unwrap_or(match self.recompute {
                Recompute::None => Attention::Unfused,
                _ => Attention::Fused,
            }),
            compute_efficiency,
            weight_bytes: 2.0,
            grad_bytes: self.grad_bytes,
            optimizer_bytes: 12.0,
            grad_reduce_bytes: self.grad_reduce_bytes,
            overlap_grad_reduce: self.overlap_grad_reduce,
            overlap_param_gather: self.overlap_param_gather,
            tp_overlap: self.tp_overlap,
            ep_overlap: self.ep_overlap,
            reserve_bytes: self.reserve_bytes,
        };
        Ok((job, self.global_batch))
    }
}

/// GPUs of one NVLink domain of `topology` (the largest server).
fn domain(topology: &railyard_topology::Topology) -> u64 {
    let placement = railyard_topology::Placement { devices: topology.default_ranks.clone() };
    placement.ranks_by_server(topology).iter().map(Vec::len).max().unwrap_or(1) as u64
}

/// Plan `input`: every layout it allows (one, or a search), each checked against
/// memory and timed; fastest first.
pub fn evaluate(input: &JobInput, topology: &railyard_topology::Topology) -> Result<JobReport, PlannerError> {
    evaluate_with(input, topology, true, Engine::Model)
}

/// [`evaluate`], with layouts that do not fit in memory refused (`memory_limits`) or
/// timed anyway (a published run that ran: its time is compared, its memory reported),
/// and the collectives timed by `engine` (`comms`).
pub fn evaluate_with(
    input: &JobInput,
    topology: &railyard_topology::Topology,
    memory_limits: bool,
    engine: Engine,
) -> Result<JobReport, PlannerError> {
    let (job, global_batch) = input.resolve()?;
    let gpus = topology.default_ranks.len() as u64;
    if gpus > MAX_JOB_GPUS {
        return Err(PlannerError::bad(
            "job.topo",
            format!("{gpus} GPUs: a job plans at most {MAX_JOB_GPUS} (its groups are costed as schedules)"),
        ));
    }
    let domain = domain(topology);
    let layouts = match &input.layout {
        LayoutSpec::Fixed(given) => {
            let all = given.layouts();
            let runnable: Vec<Layout> =
                all.iter().copied().filter(|l| l.problem(&job.shape, gpus, global_batch, domain).is_none()).collect();
            if runnable.is_empty() {
                let problem = all[0].problem(&job.shape, gpus, global_batch, domain).unwrap_or_default();
                return Err(PlannerError::bad("job.layout", format!("{}: {problem}", all[0])));
            }
            runnable
        }
        LayoutSpec::Search(_) => {
            let (count, all) = layout::enumerate(&job.shape, gpus, global_batch, domain);
            if count > all.len() {
                return Err(PlannerError::bad(
                    "job.layout",
                    format!(
                        "{count} layouts to weigh, more than the {} a search takes; fix part of the layout",
                        layout::MAX_LAYOUTS
                    ),
                ));
            }
            if all.is_empty() {
                return Err(PlannerError::bad(
                    "job.layout",
                    format!(
                        "no layout splits {} ({} layers, {} heads) over {gpus} GPUs with a batch of {global_batch}",
                        job.shape.name, job.shape.layers, job.shape.heads
                    ),
                ));
            }
            all
        }
    };
    let comms = Comms::new(topology, engine);
    let mut fit = Vec::new();
    let mut refused = Vec::new();
    for l in &layouts {
        let memory = memory::memory(&job.shape, l, &job, global_batch);
        if memory.fits() || !memory_limits {
            fit.push(Evaluated { layout: *l, memory, step: None });
        } else {
            refused.push(Evaluated { layout: *l, memory, step: None });
        }
    }
    if fit.is_empty() {
        let tightest = refused
            .iter()
            .min_by(|a, b| a.memory.total_bytes.total_cmp(&b.memory.total_bytes))
            .map(|e| format!("{}: {}", e.layout, describe_memory(&e.memory)))
            .unwrap_or_default();
        return Err(PlannerError::bad(
            "job.layout",
            format!(
                "no layout fits in the {}'s {} (the tightest, {tightest})",
                job.gpu.name,
                format_bytes(job.gpu.memory_bytes)
            ),
        ));
    }
    for e in &mut fit {
        e.step = Some(step::step(&job.shape, &e.layout, &job, &comms, global_batch)?);
    }
    let secs = |e: &Evaluated| e.step.as_ref().map_or(f64::INFINITY, |s| s.step_secs);
    fit.sort_by(|a, b| secs(a).total_cmp(&secs(b)));
    let why = (fit.len() > 1).then(|| why_fastest(&fit[0], &fit[1]));
    let weighed = layouts.len();
    let refused_count = refused.len();
    fit.truncate(input.show);
    Ok(JobReport {
        params: job.shape.params(),
        model: job.shape.clone(),
        topo: input.topo.clone(),
        gpus,
        gpu: job.gpu,
        global_batch,
        precision: job.precision,
        zero: job.zero,
        recompute: job.recompute,
        attention: job.attention,
        compute_efficiency: job.compute_efficiency,
        layouts_weighed: weighed,
        layouts_refused_for_memory: refused_count,
        ranked: fit,
        why,
        costings: comms.costings(),
        engine,
        timed_by_model: comms.simulated_by_model(),
        simulated_without_all_neighbours: comms.simulated_without_all_neighbours(),
    })
}

/// A memory breakdown in words.
pub fn describe_memory(m: &Memory) -> String {
    format!(
        "{} of weights, {} of gradients, {} of optimizer state, {} of activations ({:.1} micro-batches in flight), \
         {} of communication buffers and {} reserved: {} of {}",
        format_bytes(m.weights_bytes),
        format_bytes(m.gradients_bytes),
        format_bytes(m.optimizer_bytes),
        format_bytes(m.activations_bytes),
        m.in_flight_micro_batches,
        format_bytes(m.buffers_bytes),
        format_bytes(m.reserve_bytes),
        format_bytes(m.total_bytes),
        format_bytes(m.capacity_bytes)
    )
}

/// Why `best` is faster than `next`: the phase that differs most.
fn why_fastest(best: &Evaluated, next: &Evaluated) -> String {
    let (Some(a), Some(b)) = (&best.step, &next.step) else { return String::new() };
    let phases = |s: &Step| {
        let mut v = vec![("compute".to_string(), s.compute_secs), ("pipeline bubble".to_string(), s.bubble_secs)];
        for c in &s.comms {
            v.push((c.name.clone(), c.exposed_secs));
        }
        v.push(("optimizer".to_string(), s.optimizer_secs));
        v
    };
    let (pa, pb) = (phases(a), phases(b));
    let mut diffs: Vec<(String, f64)> = pb
        .iter()
        .map(|(name, t)| (name.clone(), t - pa.iter().find(|(n, _)| n == name).map_or(0.0, |x| x.1)))
        .collect();
    for (name, t) in &pa {
        if !pb.iter().any(|(n, _)| n == name) {
            diffs.push((name.clone(), -t));
        }
    }
    diffs.sort_by(|x, y| y.1.total_cmp(&x.1));
    let gain = diffs.first().cloned().unwrap_or_default();
    format!(
        "{} beats {} by {:.1}%: its {} is {:.1} ms shorter",
        best.layout,
        next.layout,
        (b.step_secs / a.step_secs - 1.0) * 100.0,
        gain.0,
        gain.1 * 1e3
    )
}

//! What a training job needs to know of a GPU: its dense peak, its memory and the
//! bandwidth of that memory (each from the vendor's datasheet, docs/training-sources.md),
//! and the share of peak a transformer layer's kernels sustain on it.

use serde::Serialize;

/// One GPU model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gpu {
    pub name: &'static str,
    /// Dense (no sparsity) BF16 tensor-core peak.
    pub bf16_flops_per_sec: f64,
    /// Dense FP8 peak (0: none).
    pub fp8_flops_per_sec: f64,
    /// HBM capacity: the datasheet's figure, read in binary units as HBM stacks are
    /// built (80 GB is five 16 GiB stacks).
    pub memory_bytes: f64,
    pub memory_bytes_per_sec: f64,
    /// The share of peak a transformer layer's matrix multiplies and attention core
    /// sustain (the element-wise kernels are timed at the memory bandwidth, `step.rs`):
    /// one number per generation, stated, settable per job (`compute_efficiency`),
    /// never fitted per run: the published share of peak of the largest compute-bound
    /// run of each generation in docs/validation.md with its pipeline bubble taken out
    /// (Megatron-LM's 530B and 1T runs at 52% of A100 peak, Megatron-Core's 16B at 49% of
    /// H100 peak). Their element-wise kernels (2% and 3% of those steps) are not taken
    /// out, so the shares are that much conservative. Blackwell has no published run
    /// here and takes Hopper's.
    pub compute_efficiency: f64,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const AMPERE: f64 = 0.56;
const HOPPER: f64 = 0.52;

/// Datasheets: NVIDIA A100 (80 GB SXM: 312 TFLOPS BF16, 2,039 GB/s), H100 SXM (989
/// TFLOPS BF16 and 1,979 FP8 dense, 80 GB, 3.35 TB/s), H200 SXM (141 GB, 4.8 TB/s), HGX
/// B200 (2.25 PFLOPS BF16 and 4.5 FP8 dense per GPU, 180 GB, 7.7 TB/s), GB200 NVL72
/// (2.5 / 5 PFLOPS dense per GPU, 186 GB, 8 TB/s).
pub const GPUS: &[Gpu] = &[
    Gpu {
        name: "a100",
        bf16_flops_per_sec: 312e12,
        fp8_flops_per_sec: 0.0,
        memory_bytes: 80.0 * GIB,
        memory_bytes_per_sec: 2039e9,
        compute_efficiency: AMPERE,
    },
    Gpu {
        name: "h100",
        bf16_flops_per_sec: 989e12,
        fp8_flops_per_sec: 1979e12,
        memory_bytes: 80.0 * GIB,
        memory_bytes_per_sec: 3.35e12,
        compute_efficiency: HOPPER,
    },
    Gpu {
        name: "h200",
        bf16_flops_per_sec: 989e12,
        fp8_flops_per_sec: 1979e12,
        memory_bytes: 141.0 * GIB,
        memory_bytes_per_sec: 4.8e12,
        compute_efficiency: HOPPER,
    },
    Gpu {
        name: "b200",
        bf16_flops_per_sec: 2.25e15,
        fp8_flops_per_sec: 4.5e15,
        memory_bytes: 180.0 * GIB,
        memory_bytes_per_sec: 7.7e12,
        compute_efficiency: HOPPER,
    },
    Gpu {
        name: "gb200",
        bf16_flops_per_sec: 2.5e15,
        fp8_flops_per_sec: 5e15,
        memory_bytes: 186.0 * GIB,
        memory_bytes_per_sec: 8e12,
        compute_efficiency: HOPPER,
    },
];

pub fn by_name(name: &str) -> Option<Gpu> {
    GPUS.iter().find(|g| g.name == name).copied()
}

/// The GPU of a machine preset's topology name (`dgx-h100:nodes=4` is an H100).
pub fn of_topology(topo: &str) -> Option<Gpu> {
    let machine = topo.split(':').next().unwrap_or(topo);
    let gpu = match machine {
        "dgx-a100" => "a100",
        "dgx-h100" | "hgx-h100" => "h100",
        "hgx-h200" => "h200",
        "hgx-b200" => "b200",
        "gb200-nvl72" => "gb200",
        _ => return None,
    };
    by_name(gpu)
}

//! Memory and placement arithmetic (seed 001 §7.1.1, exercise 7-1): bytes of training
//! state or inference weights, the cards and servers that hold them, with a per-card
//! reserve for activations, KV and workspace.

use railyard_units::quantity;
use serde::{Deserialize, Serialize};

use crate::error::{positive, within, PlannerError};

pub const MAX_MODELS: usize = 64;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryInput {
    #[serde(deserialize_with = "quantity::bytes")]
    pub gpu_memory_bytes: f64,
    pub gpus_per_server: u64,
    /// Kept free on every card (activations, KV, workspace).
    #[serde(default, deserialize_with = "quantity::bytes")]
    pub reserve_per_gpu_bytes: f64,
    pub model: Vec<ModelInput>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelInput {
    pub name: String,
    pub params: f64,
    /// Mixed-precision Adam training: 16 (parameters, gradients, FP32 master weights,
    /// two moments); inference weights: the storage format's bytes (0.5 for 4-bit).
    pub bytes_per_param: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryRow {
    pub name: String,
    pub bytes: f64,
    /// Cards to hold the bytes alone, and what that leaves free.
    pub gpus: u64,
    pub free_bytes: f64,
    pub servers: u64,
    /// Cards and servers with the reserve kept free on each card.
    pub gpus_with_reserve: u64,
    pub servers_with_reserve: u64,
}

/// Whole cards of `per_gpu` bytes to hold `bytes`.
fn cards(bytes: f64, per_gpu: f64) -> u64 {
    // A hair below a whole number is that number: 128 GB over 80 GB cards is 2 cards.
    (bytes / per_gpu - 1e-9).ceil().max(1.0) as u64
}

pub fn evaluate(input: &MemoryInput) -> Result<Vec<MemoryRow>, PlannerError> {
    positive("memory.gpu_memory_bytes", input.gpu_memory_bytes)?;
    if input.gpus_per_server == 0 || input.gpus_per_server > 1 << 16 {
        return Err(PlannerError::bad("memory.gpus_per_server", "must be 1..=65536"));
    }
    let usable = input.gpu_memory_bytes - input.reserve_per_gpu_bytes;
    if usable <= 0.0 {
        return Err(PlannerError::bad("memory.reserve_per_gpu_bytes", "leaves nothing of the card's memory"));
    }
    if input.model.is_empty() || input.model.len() > MAX_MODELS {
        return Err(PlannerError::bad("memory.model", format!("give 1..={MAX_MODELS} models")));
    }
    let mut rows = Vec::new();
    for (i, m) in input.model.iter().enumerate() {
        within(&format!("memory.model[{i}].params"), m.params, 1.0, 1e16)?;
        within(&format!("memory.model[{i}].bytes_per_param"), m.bytes_per_param, 1e-3, 1e3)?;
        let bytes = m.params * m.bytes_per_param;
        if bytes / usable > 1e12 {
            return Err(PlannerError::bad(format!("memory.model[{i}]"), "needs more than 10^12 cards"));
        }
        let gpus = cards(bytes, input.gpu_memory_bytes);
        let gpus_with_reserve = cards(bytes, usable);
        rows.push(MemoryRow {
            name: m.name.clone(),
            bytes,
            gpus,
            free_bytes: gpus as f64 * input.gpu_memory_bytes - bytes,
            servers: gpus.div_ceil(input.gpus_per_server),
            gpus_with_reserve,
            servers_with_reserve: gpus_with_reserve.div_ceil(input.gpus_per_server),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_models() {
        let model = |name: &str, params: f64, b: f64| ModelInput { name: name.into(), params, bytes_per_param: b };
        let input = MemoryInput {
            gpu_memory_bytes: 80e9,
            gpus_per_server: 8,
            reserve_per_gpu_bytes: 8e9,
            model: vec![model("8B", 8e9, 16.0), model("V4-Pro", 1.6e12, 0.5), model("K3", 2.8e12, 0.5)],
        };
        let rows = evaluate(&input).unwrap();
        // seed 001 §7.1.1: 128 GB on two 80 GB cards leaves 32 GB; 800 GB and 1.4 TB of
        // weights need 2 and 3 servers of 640 GB.
        assert_eq!((rows[0].bytes, rows[0].gpus, rows[0].free_bytes), (128e9, 2, 32e9));
        assert_eq!((rows[1].servers, rows[2].servers), (2, 3));
        assert_eq!((rows[1].servers_with_reserve, rows[2].servers_with_reserve), (2, 3));
    }
}

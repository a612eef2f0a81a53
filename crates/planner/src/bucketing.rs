//! Gradient bucketing (seed 000 §8.6.2, §8.6.7): layers finish their backward pass one
//! after another; their gradients fill buckets, a full bucket's all-reduce starts when
//! its last gradient is ready and the previous bucket's is done (one communication
//! stream), and the step's exposed communication is what runs past the backward pass.
//! Overlap ratio = (T_comm + T_comp − T_total) / T_comm.

use railyard_netmodels::quantity;
use serde::{Deserialize, Serialize};

use crate::comm::{CommInput, Engine};
use crate::error::{positive, PlannerError};

pub const MAX_LAYERS: usize = 4096;
pub const MAX_BUCKET_SIZES: usize = 32;
/// The most distinct bucket sizes costed in one section (each is a schedule costed).
pub const MAX_DISTINCT_BUCKETS: usize = 1024;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketingInput {
    /// Backward time of each layer, in the order the backward pass runs (last layer first).
    #[serde(default, deserialize_with = "quantity::secs_list")]
    pub backward_secs: Vec<f64>,
    /// Gradient bytes of each layer, same order.
    #[serde(default, deserialize_with = "quantity::bytes_list")]
    pub grad_bytes: Vec<f64>,
    /// Or: `layers` alike, each `layer_backward_secs` and `layer_grad_bytes`.
    #[serde(default)]
    pub layers: Option<usize>,
    #[serde(default, deserialize_with = "quantity::optional_secs")]
    pub layer_backward_secs: Option<f64>,
    #[serde(default, deserialize_with = "quantity::optional_bytes")]
    pub layer_grad_bytes: Option<f64>,
    /// Bucket caps to compare (PyTorch DDP's default is 25 MiB).
    #[serde(deserialize_with = "quantity::bytes_list")]
    pub bucket_bytes: Vec<f64>,
    /// The all-reduce of one bucket (`size_bytes` is set per bucket).
    pub comm: CommInput,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bucket {
    pub layers: usize,
    pub bytes: f64,
    pub ready_secs: f64,
    pub start_secs: f64,
    pub end_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketPlan {
    pub bucket_cap_bytes: f64,
    pub buckets: Vec<Bucket>,
    pub backward_secs: f64,
    pub comm_secs: f64,
    pub total_secs: f64,
    pub exposed_comm_secs: f64,
    pub overlap_ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketingReport {
    pub source: String,
    pub plans: Vec<BucketPlan>,
    /// The cap with the least exposed communication.
    pub best_bucket_cap_bytes: f64,
}

/// Overlap ratio of seed 000 §8.6.7: (T_comm + T_comp − T_total) / T_comm.
pub fn overlap_ratio(comm_secs: f64, comp_secs: f64, total_secs: f64) -> f64 {
    if comm_secs > 0.0 {
        (comm_secs + comp_secs - total_secs) / comm_secs
    } else {
        1.0
    }
}

pub fn evaluate(input: &BucketingInput, engine: Engine) -> Result<BucketingReport, PlannerError> {
    let (backward, grads) = match (input.layers, input.layer_backward_secs, input.layer_grad_bytes) {
        (Some(n), Some(t), Some(g)) if input.backward_secs.is_empty() && input.grad_bytes.is_empty() => {
            if n == 0 || n > MAX_LAYERS {
                return Err(PlannerError::bad("bucketing.layers", format!("must be 1..={MAX_LAYERS}")));
            }
            (vec![t; n], vec![g; n])
        }
        (None, None, None) => (input.backward_secs.clone(), input.grad_bytes.clone()),
        _ => return Err(PlannerError::bad(
            "bucketing",
            "give either backward_secs and grad_bytes lists, or layers with layer_backward_secs and layer_grad_bytes",
        )),
    };
    if backward.is_empty() || backward.len() > MAX_LAYERS || backward.len() != grads.len() {
        return Err(PlannerError::bad(
            "bucketing.backward_secs",
            format!("give 1..={MAX_LAYERS} layers, as many as grad_bytes ({} vs {})", backward.len(), grads.len()),
        ));
    }
    if input.bucket_bytes.is_empty() || input.bucket_bytes.len() > MAX_BUCKET_SIZES {
        return Err(PlannerError::bad("bucketing.bucket_bytes", format!("give 1..={MAX_BUCKET_SIZES} caps")));
    }
    let mut source = String::new();
    let mut cache: Vec<(f64, f64)> = Vec::new();
    let mut plans = Vec::new();
    for (c, &cap) in input.bucket_bytes.iter().enumerate() {
        positive(&format!("bucketing.bucket_bytes[{c}]"), cap)?;
        let mut buckets = Vec::new();
        let (mut t, mut bytes, mut layers, mut comm_free, mut comm_total) = (0.0, 0.0, 0, 0.0f64, 0.0);
        for i in 0..backward.len() {
            t += backward[i];
            bytes += grads[i];
            layers += 1;
            if bytes >= cap || i + 1 == backward.len() {
                let secs = match cache.iter().find(|(b, _)| *b == bytes) {
                    Some(&(_, s)) => s,
                    None => {
                        if cache.len() >= MAX_DISTINCT_BUCKETS {
                            return Err(PlannerError::bad(
                                "bucketing",
                                format!("more than {MAX_DISTINCT_BUCKETS} distinct bucket sizes to cost; use fewer caps or alike layers"),
                            ));
                        }
                        let time = input.comm.with_size(bytes.round().max(1.0)).time("bucketing.comm", engine)?;
                        if source.is_empty() {
                            source = time.source.clone();
                        }
                        cache.push((bytes, time.secs));
                        time.secs
                    }
                };
                let start = comm_free.max(t);
                comm_free = start + secs;
                comm_total += secs;
                buckets.push(Bucket { layers, bytes, ready_secs: t, start_secs: start, end_secs: comm_free });
                bytes = 0.0;
                layers = 0;
            }
        }
        let total = comm_free.max(t);
        plans.push(BucketPlan {
            bucket_cap_bytes: cap,
            buckets,
            backward_secs: t,
            comm_secs: comm_total,
            total_secs: total,
            exposed_comm_secs: total - t,
            overlap_ratio: overlap_ratio(comm_total, t, total),
        });
    }
    let best = plans
        .iter()
        .min_by(|a, b| a.exposed_comm_secs.total_cmp(&b.exposed_comm_secs))
        .map_or(0.0, |p| p.bucket_cap_bytes);
    Ok(BucketingReport { source, plans, best_bucket_cap_bytes: best })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_ratio_bounds() {
        // Fully hidden: T_total = max; none: T_total = sum.
        assert_eq!(overlap_ratio(2.0, 5.0, 5.0), 1.0);
        assert_eq!(overlap_ratio(2.0, 5.0, 7.0), 0.0);
    }

    #[test]
    fn buckets_wait_for_their_last_gradient_and_for_each_other() {
        let input = BucketingInput {
            backward_secs: Vec::new(),
            grad_bytes: Vec::new(),
            layers: Some(4),
            layer_backward_secs: Some(1e-3),
            layer_grad_bytes: Some(10.0),
            bucket_bytes: vec![20.0, 40.0],
            comm: CommInput { secs: Some(1.5e-3), ..CommInput::default() },
        };
        let r = evaluate(&input, Engine::Model).unwrap();
        // Two buckets: ready at 2 and 4 ms; the second starts at 4, ends at 5.5.
        let p = &r.plans[0];
        assert_eq!(p.buckets.len(), 2);
        assert!((p.total_secs - 5.5e-3).abs() < 1e-12 && (p.exposed_comm_secs - 1.5e-3).abs() < 1e-12);
        assert!((p.overlap_ratio - 0.5).abs() < 1e-9);
        // One bucket: 4 + 1.5 ms, nothing overlapped.
        assert!((r.plans[1].overlap_ratio).abs() < 1e-9);
        assert_eq!(r.best_bucket_cap_bytes, 20.0);
    }
}

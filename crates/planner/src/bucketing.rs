//! Gradient bucketing (seed 000 §8.6.2, §8.6.7): layers finish their backward pass one
//! after another; their gradients fill buckets, a full bucket's all-reduce starts when
//! its last gradient is ready and the previous bucket's is done (one communication
//! stream), and the step's exposed communication is what runs past the backward pass.
//! Overlap ratio = (T_comm + T_comp − T_total) / T_comm.

use railyard_units::quantity;
use serde::{Deserialize, Serialize};

use crate::comm::{CommInput, Coster, Engine};
use crate::error::{positive, secs, PlannerError};

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

/// The layers' backward times and gradient sizes, from either form of the input.
fn layers(input: &BucketingInput) -> Result<(Vec<f64>, Vec<f64>), PlannerError> {
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
    for (i, &t) in backward.iter().enumerate() {
        secs(&format!("bucketing.backward_secs[{i}]"), t)?;
    }
    if grads.iter().sum::<f64>() > crate::comm::MAX_COMM_BYTES {
        return Err(PlannerError::bad("bucketing.grad_bytes", "sum past the 2^50 bytes one all-reduce may carry"));
    }
    if grads.iter().all(|&g| g == 0.0) {
        return Err(PlannerError::bad("bucketing.grad_bytes", "no layer has a gradient"));
    }
    Ok((backward, grads))
}

/// Bucket all-reduce times by size, each costed once.
struct Costs<'a> {
    comm: &'a CommInput,
    coster: &'a Coster,
    known: Vec<(f64, f64)>,
}

impl Costs<'_> {
    fn secs(&mut self, bytes: f64) -> Result<f64, PlannerError> {
        if let Some(&(_, s)) = self.known.iter().find(|(b, _)| *b == bytes) {
            return Ok(s);
        }
        if self.known.len() >= MAX_DISTINCT_BUCKETS {
            return Err(PlannerError::bad(
                "bucketing",
                format!(
                    "more than {MAX_DISTINCT_BUCKETS} distinct bucket sizes to cost; use fewer caps or alike layers"
                ),
            ));
        }
        let time = self.coster.time(&self.comm.with_size(bytes), "bucketing.comm")?;
        self.known.push((bytes, time.secs));
        Ok(time.secs)
    }
}

/// The buckets of one cap against the backward pass (seed 000 §8.6.2): a bucket closes
/// when it holds `cap` bytes or the last layer is done, and its all-reduce waits for the
/// previous one (one communication stream).
fn plan_cap(cap: f64, backward: &[f64], grads: &[f64], costs: &mut Costs) -> Result<BucketPlan, PlannerError> {
    let mut buckets = Vec::new();
    let (mut t, mut bytes, mut layers, mut comm_free, mut comm_total) = (0.0, 0.0, 0, 0.0f64, 0.0);
    for i in 0..backward.len() {
        t += backward[i];
        bytes += grads[i];
        layers += 1;
        if (bytes >= cap || i + 1 == backward.len()) && bytes > 0.0 {
            let secs = costs.secs(bytes)?;
            let start = comm_free.max(t);
            comm_free = start + secs;
            comm_total += secs;
            buckets.push(Bucket { layers, bytes, ready_secs: t, start_secs: start, end_secs: comm_free });
            bytes = 0.0;
            layers = 0;
        }
    }
    let total = comm_free.max(t);
    Ok(BucketPlan {
        bucket_cap_bytes: cap,
        buckets,
        backward_secs: t,
        comm_secs: comm_total,
        total_secs: total,
        exposed_comm_secs: total - t,
        overlap_ratio: overlap_ratio(comm_total, t, total),
    })
}

pub fn evaluate(input: &BucketingInput, coster: &Coster) -> Result<BucketingReport, PlannerError> {
    let (backward, grads) = layers(input)?;
    if input.bucket_bytes.is_empty() || input.bucket_bytes.len() > MAX_BUCKET_SIZES {
        return Err(PlannerError::bad("bucketing.bucket_bytes", format!("give 1..={MAX_BUCKET_SIZES} caps")));
    }
    // A bucket's time depends on its size: only a schedule knows how.
    if input.comm.topo.is_none()
        || input.comm.algo.is_none()
        || input.comm.secs.is_some()
        || input.comm.cut_bytes.is_some()
    {
        return Err(PlannerError::bad(
            "bucketing.comm",
            "give topo and algo (a schedule): each bucket's all-reduce is costed at its own size",
        ));
    }
    if input.comm.size_bytes.is_some() {
        return Err(PlannerError::bad("bucketing.comm.size_bytes", "is set per bucket; leave it out"));
    }
    let mut costs = Costs { comm: &input.comm, coster, known: Vec::new() };
    let mut plans = Vec::new();
    for (c, &cap) in input.bucket_bytes.iter().enumerate() {
        positive(&format!("bucketing.bucket_bytes[{c}]"), cap)?;
        plans.push(plan_cap(cap, &backward, &grads, &mut costs)?);
    }
    let best = plans
        .iter()
        .min_by(|a, b| a.exposed_comm_secs.total_cmp(&b.exposed_comm_secs))
        .map_or(0.0, |p| p.bucket_cap_bytes);
    let source = format!(
        "{}, {} at each bucket's size on {} ({})",
        input.comm.algo.as_deref().unwrap_or_default(),
        input.comm.collective.as_deref().unwrap_or("allreduce"),
        input.comm.topo.as_deref().unwrap_or_default(),
        match coster.engine {
            Engine::Model => "per-round model",
            Engine::Sim => "flow-level simulator",
        }
    );
    Ok(BucketingReport { source, plans, best_bucket_cap_bytes: best })
}

/// The cap with the least exposed communication among the caps given and the caps of
/// the first 1, 2, … layers' gradients (with alike layers every cap falls between two of
/// these and makes the same buckets as the lower one; with uneven layers it is a search
/// over these candidates, not every cap).
pub fn best_cap(input: &BucketingInput, coster: &Coster) -> Result<BucketPlan, PlannerError> {
    let (backward, grads) = layers(input)?;
    let mut costs = Costs { comm: &input.comm, coster, known: Vec::new() };
    let mut best: Option<BucketPlan> = None;
    let mut candidates: Vec<f64> = input.bucket_bytes.iter().copied().filter(|&c| c > 0.0).collect();
    let mut sum = 0.0;
    for &g in &grads {
        sum += g;
        if g > 0.0 {
            candidates.push(sum);
        }
    }
    for cap in candidates {
        let p = plan_cap(cap, &backward, &grads, &mut costs)?;
        if best.as_ref().is_none_or(|b| p.exposed_comm_secs < b.exposed_comm_secs) {
            best = Some(p);
        }
    }
    best.ok_or_else(|| PlannerError::bad("bucketing.grad_bytes", "no layer has a gradient"))
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
        // A fixed time for every bucket whatever its size is refused: the cap would not matter.
        assert!(evaluate(&input, &Coster::new(Engine::Model)).unwrap_err().to_string().contains("bucketing.comm"));
        let coster = Coster::new(Engine::Model);
        let mut costs = Costs { comm: &input.comm, coster: &coster, known: Vec::new() };
        let (b, g) = layers(&input).unwrap();
        let plans = [plan_cap(20.0, &b, &g, &mut costs).unwrap(), plan_cap(40.0, &b, &g, &mut costs).unwrap()];
        // Two buckets: ready at 2 and 4 ms; the second starts at 4, ends at 5.5.
        let p = &plans[0];
        assert_eq!(p.buckets.len(), 2);
        assert!((p.total_secs - 5.5e-3).abs() < 1e-12 && (p.exposed_comm_secs - 1.5e-3).abs() < 1e-12);
        assert!((p.overlap_ratio - 0.5).abs() < 1e-9);
        // One bucket: 4 + 1.5 ms, nothing overlapped.
        assert!((plans[1].overlap_ratio).abs() < 1e-9);
    }

    #[test]
    fn the_best_cap_balances_start_ups_against_the_tail() {
        // 16 layers of 2 MiB, 0.1 ms each, on two HGX H100: one bucket exposes the whole
        // all-reduce; per-layer buckets pay 16 start-up sets; the search finds a cap at
        // least as good as every cap it was given.
        let input = BucketingInput {
            backward_secs: Vec::new(),
            grad_bytes: Vec::new(),
            layers: Some(16),
            layer_backward_secs: Some(1e-4),
            layer_grad_bytes: Some(2.0 * 1048576.0),
            bucket_bytes: vec![2.0 * 1048576.0, 8.0 * 1048576.0, 32.0 * 1048576.0],
            comm: CommInput { topo: Some("hgx-h100x2".into()), algo: Some("ring".into()), ..CommInput::default() },
        };
        let coster = Coster::new(Engine::Model);
        let r = evaluate(&input, &coster).unwrap();
        let best = best_cap(&input, &coster).unwrap();
        for p in &r.plans {
            assert!(best.exposed_comm_secs <= p.exposed_comm_secs + 1e-15);
        }
        let one = &r.plans[2];
        assert_eq!(one.buckets.len(), 1);
        assert!((one.exposed_comm_secs - one.comm_secs).abs() < 1e-15);
    }
}

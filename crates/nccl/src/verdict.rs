//! Is a measured nccl-tests curve normal on a given topology? For every size, railyard's
//! per-round model of NCCL's algorithms as schedules (rail-aligned rings, trees, NVLS,
//! CollNet) gives two times: the **bound** — the fastest of all railyard's algorithms at
//! line rate, which no run can beat — and the **expected** time — the fastest of NCCL's
//! algorithms at the rates NCCL-class software reaches (`railyard_topology::Achievable`).
//! NCCL's own tuner estimate (`tuner.rs`, on the shape `shape.rs` derives) is shown
//! beside them. The verdict per size:
//! - **faster than the model allows** — measured below the bound: the topology given is
//!   slower than the machine measured (wrong bandwidths, or fewer links);
//! - **as expected** — within `SLOW_RATIO` of railyard's expected time;
//! - **faster than expected** — more than `SLOW_RATIO` below it (but above the bound);
//! - **slow** — more than `SLOW_RATIO` above it;
//! - **wrong results** — the row's `#wrong` is not 0, whatever its time.

use serde::Serialize;

use railyard_model::nccl_family::nccl_inter_stage;
use railyard_model::{
    algorithm_ref, plan_with_routes, AlgorithmRef, AlgorithmSpec, Breakdown, CollectiveRequest, ModelError, Plan,
};
use railyard_schedule::Algorithm;
use railyard_topology::{Placement, Protocol, RouteTable, Topology};

use crate::error::NcclError;
use crate::nccl_tests::TestsOutput;
use crate::shape::Shape;
use crate::tuner::{self, Algo, Coll, Proto};

/// Measured over railyard's expected time above which a size is slow (and below whose
/// inverse it is faster than expected).
pub const SLOW_RATIO: f64 = 1.25;
/// Measured under railyard's bound below which the topology must be wrong (the bound
/// leaves out nothing a run could save, so only rounding is allowed).
pub const BOUND_RATIO: f64 = 0.97;
/// Sizes up to this are latency-bound, where every model here is far below what healthy
/// clusters measure (docs/validation.md's small sizes; `validation` counts them so too).
pub const SMALL_BYTES: u64 = 1 << 20;
/// Sizes compared against a topology in one run: every one plans every algorithm (a
/// sweep has tens; 20,000 rows once took 71 s).
pub const MAX_ANALYZED_ROWS: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    AsExpected,
    FasterThanExpected,
    Slow,
    FasterThanTheModelAllows,
    WrongResults,
    /// No algorithm railyard models runs here (each skipped, the notes say why).
    NotJudged,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::AsExpected => "as expected",
            Verdict::FasterThanExpected => "faster than expected",
            Verdict::Slow => "slow",
            Verdict::WrongResults => {
                "wrong results (#wrong above 0, or the old error column above nccl-tests' tolerance)"
            }
            Verdict::NotJudged => "not judged: no algorithm railyard models runs here",
            Verdict::FasterThanTheModelAllows => "faster than the model allows: the topology is wrong",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeVerdict {
    pub bytes: u64,
    /// The better of the out-of-place and in-place times.
    pub measured_us: f64,
    pub measured_busbw_gb_per_s: f64,
    pub nccl_algo: Algo,
    pub nccl_proto: Proto,
    pub nccl_channels: usize,
    pub nccl_expected_us: f64,
    pub nccl_expected_busbw_gb_per_s: f64,
    /// The fastest railyard algorithm and its time: the bound (None where none is claimed).
    pub railyard_algorithm: String,
    pub railyard_bound_us: Option<f64>,
    /// NCCL's algorithm with the least expected time (at achievable rates) and that time.
    pub railyard_expected_algorithm: String,
    pub railyard_expected_us: f64,
    pub railyard_expected_busbw_gb_per_s: f64,
    /// The protocol the expected time assumes.
    pub railyard_protocol: &'static str,
    /// measured / railyard's expected.
    pub ratio: f64,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub sizes: Vec<SizeVerdict>,
    /// The first size from which every larger size is no longer as expected, after one
    /// that was: where the measured curve leaves the model's.
    pub leaves_model_at_bytes: Option<u64>,
    pub notes: Vec<String>,
}

/// NCCL's algorithms as railyard schedules: a ring is rail-aligned channels; a tree is
/// NCCL's double binary tree, which across nodes moves what railyard's pipelined
/// hierarchical all-reduce does (a chain inside each node, a tree between them), so both
/// stand for it; NVLS and NVLSTree are railyard's (NVLS across servers reduces in the
/// network switches too, NCCL's NVLS with CollNet: `in-network` stands for it, as in
/// `nccl_algorithms`); CollNet Direct is in-network, CollNet Chain in-network-chain;
/// PAT only where every rank has a node of its own (NCCL runs it nowhere else; elsewhere
/// its rings stand in, as NCCL falls back to them).
pub fn railyard_of(algos: &[Algo], spread: Spread) -> Vec<Algorithm> {
    let mut out = Vec::new();
    for a in algos {
        let these: &[Algorithm] = match a {
            Algo::Ring => &[Algorithm::RailRing],
            Algo::Tree => &[Algorithm::DoubleTree, Algorithm::Hierarchical],
            Algo::Nvls if spread.servers > 1 => &[Algorithm::InNetwork],
            Algo::Nvls => &[Algorithm::Nvls],
            Algo::NvlsTree => &[Algorithm::NvlsTree],
            Algo::CollNetDirect => &[Algorithm::InNetwork],
            Algo::CollNetChain => &[Algorithm::InNetworkChain],
            Algo::Pat if spread.one_per_server() => &[Algorithm::Pat],
            Algo::Pat => &[Algorithm::RailRing],
        };
        for &x in these {
            if !out.contains(&x) {
                out.push(x);
            }
        }
    }
    out
}

pub use railyard_model::nccl_family::{nccl_algorithms, Spread};

/// What a run of NCCL takes, costed by railyard: a schedule and its expected time under
/// a protocol.
#[derive(Debug, Clone, Copy)]
pub struct NcclRun<'a> {
    pub breakdown: &'a Breakdown,
    pub secs: f64,
    pub protocol: Protocol,
}

/// The expected time of what NCCL runs: of NCCL's algorithms as costed schedules
/// (`family`), those standing for the algorithm NCCL's tuner picks (`choice`) — NCCL runs
/// its tuner's choice, not whatever would be fastest (`ncclTopoGetAlgoInfo`; `railyard
/// explain-nccl` replays it) — each under the fastest protocol of those NCCL_PROTO leaves
/// (`protocols`; None: all). The protocol is railyard's pick, not the tuner's: railyard's
/// per-protocol costs are not NCCL's, and charging the tuner's would make the expected
/// busbw fall where the tuner switches protocol. Where no choice is known (a collective
/// the tuner does not model) or the pick has no schedule here, the fastest of `family`.
pub fn nccl_run<'a>(
    family: &'a [Breakdown],
    choice: Option<&tuner::Choice>,
    spread: Spread,
    protocols: Option<&[Proto]>,
) -> Option<NcclRun<'a>> {
    // `b` under its fastest allowed protocol; its own choice where none of those runs it
    // (an in-switch reduction runs Simple only).
    let run = |b: &'a Breakdown| -> NcclRun<'a> {
        let own = NcclRun { breakdown: b, secs: b.expected_secs, protocol: b.protocol };
        protocols
            .and_then(|allowed| {
                allowed
                    .iter()
                    .filter_map(|p| b.expected_secs_under(p.protocol()).map(|secs| (secs, p.protocol())))
                    .min_by(|x, y| x.0.total_cmp(&y.0))
            })
            .map_or(own, |(secs, protocol)| NcclRun { breakdown: b, secs, protocol })
    };
    let fastest = |runs: &mut dyn Iterator<Item = NcclRun<'a>>| runs.min_by(|a, b| a.secs.total_cmp(&b.secs));
    let picked = choice.and_then(|c| {
        let stands = railyard_of(&[c.algo], spread);
        fastest(&mut family.iter().filter(|b| stands.iter().any(|&a| b.algorithm == AlgorithmRef::Builtin(a))).map(run))
    });
    picked.or_else(|| fastest(&mut family.iter().map(run)))
}

/// The algorithms NCCL would weigh for `collective` on `placement`: those `NCCL_ALGO`
/// names (`algos`), else its own. The in-network ones across servers — CollNet's, and
/// NVLS across nodes, which rides on CollNet — only where CollNet is enabled (`collnet`;
/// NCCL_COLLNET_ENABLE defaults to 0). An error when `algos` leaves nothing else: NCCL
/// (2.24 and later) then refuses to run.
pub fn nccl_family(
    collective: railyard_schedule::Collective,
    algos: Option<&[Algo]>,
    topology: &Topology,
    placement: &Placement,
    collnet: bool,
) -> Result<Vec<Algorithm>, NcclError> {
    let spread = Spread::of(topology, placement);
    let named = match algos {
        Some(algos) => railyard_of(algos, spread),
        None => nccl_algorithms(collective, spread),
    };
    let family: Vec<Algorithm> = named
        .into_iter()
        .filter(|a| collnet || !matches!(a, Algorithm::InNetwork | Algorithm::InNetworkChain))
        .collect();
    if family.is_empty() {
        return Err(NcclError::BadInput {
            field: "NCCL_ALGO".into(),
            message: "leaves only algorithms that need CollNet (CollNetDirect, CollNetChain, NVLS across nodes), \
                      which NCCL runs only with NCCL_COLLNET_ENABLE=1"
                .into(),
        });
    }
    Ok(family)
}

/// Ranks from which an all-to-all's plans are costed once and scaled to every size
/// (its schedules list ranks² transfers: 4.7 M at 2,160 ranks, seconds per plan).
pub const SCALED_ALL_TO_ALL_RANKS: usize = 256;

/// The plan of an all-to-all at one element per pair, for `scaled_plan`. (NCCL's
/// algorithms for it, `direct`, are taken from the scaled plan itself.)
struct ScaledReference {
    elem_bytes: u64,
    plan: Option<Plan>,
}

/// `plan` with every transfer `k` times longer: each algorithm's bound, expected time,
/// transfer time and byte totals scaled (`Breakdown::scaled`); its per-round, per-stage
/// and per-resource detail is dropped rather than left at the reference size. None if
/// one cannot be scaled (host costs), or was pipelined (its chunks depend on the size).
fn scaled_plan(plan: &Plan, k: f64) -> Option<Plan> {
    let mut out = plan.clone();
    out.bytes = (plan.bytes as f64 * k) as u64;
    for b in &mut out.algorithms {
        if b.pipeline_chunks.is_some_and(|c| c > 1) {
            return None;
        }
        let (total, expected, protocol) = b.scaled(k)?;
        b.total_secs = total;
        b.expected_secs = expected;
        b.protocol = protocol;
        b.transfer_secs *= k;
        b.bytes_sent_total *= k;
        b.cross_server_bytes *= k;
        b.spine_bytes *= k;
        for v in b.cross_server_bytes_by_direction.values_mut().chain(b.spine_bytes_by_direction.values_mut()) {
            *v *= k;
        }
        (b.bottleneck, b.expected_limit) = (None, None);
        b.per_round.clear();
        b.stages.clear();
        b.resources.clear();
    }
    Some(out)
}

pub fn analyze(
    output: &TestsOutput,
    topology: &Topology,
    placement: &Placement,
    shape: &Shape,
) -> Result<Analysis, NcclError> {
    let bad = |message: String| NcclError::BadInput { field: "collective".into(), message };
    if output.rows.len() > MAX_ANALYZED_ROWS {
        return Err(NcclError::BadInput {
            field: "--topo".into(),
            message: format!(
                "{} sizes; at most {MAX_ANALYZED_ROWS} are compared with a topology in one run (without --topo every row is read)",
                output.rows.len()
            ),
        });
    }
    let railyard_collective =
        output.kind.railyard().ok_or_else(|| bad(format!("{} has no railyard model", output.kind.binary())))?;
    let coll = Coll::from_railyard(railyard_collective);
    let table = match coll {
        Some(c) => Some(tuner::table(&shape.input, c)?),
        None => None,
    };
    let mut notes = Vec::new();
    let reducing_switch = topology.devices.iter().any(|d| d.in_network_reduction);
    if !reducing_switch {
        notes.push(
            "no switch of the topology reduces in the network: where NCCL picks NVLS or CollNet, railyard claims no bound"
                .to_string(),
        );
    }
    if coll.is_none() {
        notes.push(format!(
            "NCCL's tuner does not model {} (it runs point-to-point); expected times are railyard's bound",
            output.kind.binary()
        ));
    }
    let spread = Spread::of(topology, placement);
    // NCCL's algorithms (those NCCL_ALGO leaves it, else its own): the same at every size.
    let family =
        nccl_family(railyard_collective, shape.input.algos.as_deref(), topology, placement, shape.input.collnet)?;
    let mut sizes = Vec::with_capacity(output.rows.len());
    // One route table for every size: routes on a large fabric cost more than a plan.
    let mut routes = RouteTable::new(topology);
    let mut scaled_reference: Option<ScaledReference> = None;
    // Algorithms skipped at some size for being over a limit (too many transfers to
    // list), said once; those that do not apply here (NVLS without one) are not news.
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut nothing_runs_said = false;
    let mut family_missing_said = false;
    for row in &output.rows {
        let best = if row.out_of_place.time_us.value <= row.in_place.time_us.value {
            &row.out_of_place
        } else {
            &row.in_place
        };
        let elem_bytes = if row.count > 0 && row.bytes % row.count == 0 { row.bytes / row.count } else { 1 };
        let elem_bytes = match output.kind {
            // all-gather and reduce-scatter count per rank; the size is the whole buffer.
            crate::nccl_tests::TestKind::AllGather
            | crate::nccl_tests::TestKind::ReduceScatter
            | crate::nccl_tests::TestKind::AllToAll => elem_bytes / (output.ranks.max(1) as u64),
            _ => elem_bytes,
        }
        .max(1);
        let choice = table.as_ref().and_then(|t| tuner::choose(&shape.input, t, row.bytes));
        // Every algorithm, for the bound; pipelines cut as NCCL cuts them.
        let request = CollectiveRequest {
            chunks: railyard_model::ChunkPolicy::SearchAll,
            ..CollectiveRequest::all(railyard_collective, row.bytes - row.bytes % elem_bytes, elem_bytes)
        };
        // A large all-to-all's schedules list a transfer per pair of ranks: they are
        // costed once, one element per pair, and scaled to each size's elements per pair
        // (exact in the per-round model: `Breakdown::scaled`).
        let per_pair = elem_bytes * output.ranks as u64;
        let scale = (railyard_collective == railyard_schedule::Collective::AllToAll
            && output.ranks >= SCALED_ALL_TO_ALL_RANKS
            && row.bytes >= per_pair
            && row.bytes % per_pair == 0)
            .then(|| row.bytes / per_pair);
        let plan = |routes: &mut RouteTable, request: &CollectiveRequest| -> Result<Option<Plan>, NcclError> {
            match plan_with_routes(routes, placement, request) {
                Err(ModelError::NothingRuns { .. }) => Ok(None),
                p => Ok(Some(p.map_err(|e| bad(e.to_string()))?)),
            }
        };
        let scaled = match scale {
            Some(k) => {
                if scaled_reference.as_ref().is_none_or(|r: &ScaledReference| r.elem_bytes != elem_bytes) {
                    let one = CollectiveRequest { bytes: per_pair, ..request.clone() };
                    scaled_reference = Some(ScaledReference { elem_bytes, plan: plan(&mut routes, &one)? });
                }
                scaled_reference.as_ref().and_then(|r| r.plan.as_ref()).and_then(|p| scaled_plan(p, k as f64))
            }
            None => None,
        };
        let costed = match scaled {
            Some(p) => Some(p),
            None => plan(&mut routes, &request)?,
        };
        if costed.is_none() && !nothing_runs_said {
            notes.push(format!(
                "no algorithm railyard models runs {} over {} ranks on this topology (each is over a limit or does \
                 not apply): those sizes are not judged",
                railyard_collective.as_str(),
                output.ranks
            ));
            nothing_runs_said = true;
        }
        // With an algorithm left out, the fastest costed is no bound on the hardware.
        let partial = costed.as_ref().is_some_and(|p| p.skipped.iter().any(|s| s.over_a_limit));
        for s in costed.iter().flat_map(|p| &p.skipped).filter(|s| s.over_a_limit) {
            if !skipped.iter().any(|(name, _)| *name == s.name) && skipped.len() < 16 {
                skipped.push((s.name.clone(), s.reason.clone()));
            }
        }
        let algorithms = costed.as_ref().map_or(&[][..], |p| &p.algorithms[..]);
        // NCCL's algorithms at achievable rates, costed as NCCL runs them: its trees cross
        // servers by a tree.
        let family_request = CollectiveRequest {
            algorithms: family.iter().map(|&a| AlgorithmSpec::Builtin(a)).collect(),
            strict: false,
            inter_stage: nccl_inter_stage(railyard_collective, &family),
            ..request.clone()
        };
        // Where NCCL's algorithms are costed as the main plan costs them (same crossing
        // of servers), they are taken from it rather than costed again.
        let from_main = (family_request.inter_stage == request.inter_stage)
            .then_some(costed.as_ref())
            .flatten()
            .map(|p| {
                let mut p = p.clone();
                p.algorithms.retain(|b| family.iter().any(|&a| b.algorithm == AlgorithmRef::Builtin(a)));
                p
            })
            .filter(|p| p.algorithms.len() == family.len());
        let family_plan = match from_main {
            Some(p) => Some(p),
            None => plan(&mut routes, &family_request)?,
        };
        // A plan with nothing costed is None (`plan` above).
        if shape.input.algos.is_some() && !family_missing_said && family_plan.is_none() {
            notes.push(format!(
                "none of the algorithms NCCL_ALGO leaves ({}) runs on this topology: the expected time is railyard's \
                 fastest instead",
                family.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ")
            ));
            family_missing_said = true;
        }
        // The bound: the fastest of every schedule costed at line rate, NCCL's family as it
        // crosses servers (a tree, pipelined) among them — a run of those schedules is no
        // faster than their own line-rate time, whichever crossing the main plan took.
        let fastest = algorithms
            .iter()
            .chain(family_plan.iter().flat_map(|p| &p.algorithms))
            .min_by(|a, b| a.total_secs.total_cmp(&b.total_secs));
        let in_switch = choice
            .as_ref()
            .is_some_and(|c| matches!(c.algo, Algo::Nvls | Algo::NvlsTree | Algo::CollNetDirect | Algo::CollNetChain));
        // What NCCL runs at this size, else the fastest railyard costs.
        let expected = family_plan
            .as_ref()
            .and_then(|p| nccl_run(&p.algorithms, choice.as_ref(), spread, shape.input.protos.as_deref()))
            .or_else(|| nccl_run(algorithms, None, spread, shape.input.protos.as_deref()));
        // No expected time is under its schedule's bound (`ExpectedSums::parts`), so the
        // fastest bound is never above the expected time either.
        let shaped = |b: &Breakdown| algorithm_ref::shaped_name(&b.name, b.pipeline_chunks, b.channels);
        let (algorithm_name, bound_us) = match fastest {
            Some(b) if !in_switch || reducing_switch => (shaped(b), Some(b.total_secs * 1e6)),
            Some(b) => (shaped(b), None),
            None => ("-".to_string(), None),
        };
        let (algo, proto, channels, nccl_us) = match &choice {
            Some(c) => (c.algo, c.proto, c.channels, c.time_us),
            None => (Algo::Ring, Proto::Simple, shape.input.channels, f64::NAN),
        };
        let expected_us = expected.map_or(f64::NAN, |e| e.secs * 1e6);
        let factor = output.kind.bus_factor(output.ranks.max(2));
        let measured = best.time_us.value;
        let ratio = measured / expected_us;
        let wrong = [&row.out_of_place.wrong, &row.in_place.wrong]
            .iter()
            .any(|w| crate::nccl_tests::wrong_results(w, &row.dtype));
        let verdict = if wrong {
            Verdict::WrongResults
        } else if !expected_us.is_finite() && bound_us.is_none() {
            Verdict::NotJudged
        } else if !partial && bound_us.is_some_and(|b| measured < b * BOUND_RATIO) {
            Verdict::FasterThanTheModelAllows
        } else if ratio > SLOW_RATIO {
            Verdict::Slow
        } else if ratio < 1.0 / SLOW_RATIO {
            Verdict::FasterThanExpected
        } else {
            Verdict::AsExpected
        };
        sizes.push(SizeVerdict {
            bytes: row.bytes,
            measured_us: measured,
            measured_busbw_gb_per_s: best.busbw_recomputed,
            nccl_algo: algo,
            nccl_proto: proto,
            nccl_channels: channels,
            nccl_expected_us: nccl_us,
            nccl_expected_busbw_gb_per_s: row.bytes as f64 / (nccl_us * 1e3) * factor,
            railyard_algorithm: algorithm_name,
            railyard_bound_us: bound_us,
            railyard_expected_algorithm: expected.map_or_else(|| "-".to_string(), |e| e.breakdown.name.clone()),
            railyard_expected_us: expected_us,
            railyard_expected_busbw_gb_per_s: row.bytes as f64 / (expected_us * 1e3) * factor,
            railyard_protocol: expected.map_or("-", |e| e.protocol.as_str()),
            ratio,
            verdict,
        });
    }
    let leaves_model_at_bytes = (1..sizes.len())
        .find(|&i| {
            sizes[..i].iter().any(|s| s.verdict == Verdict::AsExpected)
                && sizes[i..].iter().all(|s| s.verdict != Verdict::AsExpected)
        })
        .map(|i| sizes[i].bytes);
    for (name, reason) in skipped {
        notes.push(format!("{name} not costed: {reason}"));
    }
    let small_slow = sizes.iter().filter(|s| s.verdict == Verdict::Slow && s.bytes <= SMALL_BYTES).count();
    if small_slow > 0 {
        let which = match small_slow {
            1 => "1 size judged slow is".to_string(),
            n => format!("{n} sizes judged slow are"),
        };
        notes.push(format!(
            "{which} at most 1 MiB, where railyard's expected times, like NCCL's tuner, sit well \
             below what healthy clusters measure (per-call costs the models leave out; docs/validation.md): a \
             calibration on a healthy run of your own judges them (docs/nccl-artifacts.md)"
        ));
        if let Some(g) = output.gpus_per_thread.filter(|&g| g > 1) {
            notes.push(format!(
                "The run drives {g} GPUs from each thread (nccl-tests -g {g}): NVIDIA recommends one GPU per \
                 process, as single-process runs add CUDA launch latency to every call (NVIDIA/nccl-tests#333); \
                 small sizes of a run with -g 1 show the fabric's own latency"
            ));
        }
    }
    Ok(Analysis { sizes, leaves_model_at_bytes, notes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_topology::{presets::preset, PlacementPolicy};

    /// An all-to-all costed once at one element per pair and scaled is the all-to-all
    /// costed at the size itself: bound, expected time and protocol, every algorithm.
    #[test]
    fn a_scaled_all_to_all_plan_is_the_plan_at_that_size() {
        let t = preset("dgx-h100:nodes=2").unwrap();
        let p = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
        let request = |bytes: u64| CollectiveRequest {
            chunks: railyard_model::ChunkPolicy::SearchAll,
            ..CollectiveRequest::all(railyard_schedule::Collective::AllToAll, bytes, 4)
        };
        let mut routes = RouteTable::new(&t);
        let one = plan_with_routes(&mut routes, &p, &request(16 * 4)).unwrap();
        for k in [1u64, 3, 1000, 1 << 20] {
            let exact = plan_with_routes(&mut routes, &p, &request(16 * 4 * k)).unwrap();
            let scaled = scaled_plan(&one, k as f64).unwrap();
            assert_eq!(exact.algorithms.len(), scaled.algorithms.len());
            for (e, s) in exact.algorithms.iter().zip(&scaled.algorithms) {
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1e-12);
                assert!(close(e.total_secs, s.total_secs), "{} x{k}: {} vs {}", e.name, e.total_secs, s.total_secs);
                assert!(
                    close(e.expected_secs, s.expected_secs),
                    "{} x{k}: {} vs {}",
                    e.name,
                    e.expected_secs,
                    s.expected_secs
                );
                assert_eq!(e.protocol, s.protocol, "{} x{k}", e.name);
            }
        }
    }

    /// CollNet's algorithms are NCCL's only with CollNet enabled, named by NCCL_ALGO or
    /// not; named alone with it off, NCCL has nothing to run, and neither does railyard.
    #[test]
    fn collnet_is_weighed_only_where_enabled() {
        let t = preset("dgx-h100:nodes=2,sharp=on").unwrap();
        let p = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
        let collective = railyard_schedule::Collective::AllReduce;
        let family = |algos: &[Algo], collnet| nccl_family(collective, Some(algos), &t, &p, collnet);
        assert_eq!(family(&[Algo::CollNetChain], true).unwrap(), [Algorithm::InNetworkChain]);
        assert_eq!(family(&[Algo::CollNetChain, Algo::Ring], false).unwrap(), [Algorithm::RailRing]);
        let err = family(&[Algo::CollNetChain, Algo::CollNetDirect], false).unwrap_err().to_string();
        assert!(err.contains("NCCL_COLLNET_ENABLE"), "{err}");
        // NVLS across servers rides on CollNet: off with it.
        assert!(family(&[Algo::Nvls], false).is_err());
        assert_eq!(family(&[Algo::Nvls], true).unwrap(), [Algorithm::InNetwork]);
        let own = nccl_family(collective, None, &t, &p, false).unwrap();
        assert!(!own.contains(&Algorithm::InNetworkChain) && !own.is_empty(), "{own:?}");
        assert!(nccl_family(collective, None, &t, &p, true).unwrap().contains(&Algorithm::InNetworkChain));
    }

    /// The expected time is that of the algorithm NCCL's tuner picks, under railyard's
    /// fastest protocol of those allowed, even where another of NCCL's algorithms costs
    /// less in railyard's model; with no pick known it is the fastest.
    #[test]
    fn the_expected_run_is_nccls_pick() {
        let t = preset("dgx-h100").unwrap();
        let p = Placement::new(&t, &PlacementPolicy::Contiguous, None).unwrap();
        let collective = railyard_schedule::Collective::AllReduce;
        let family = nccl_family(collective, None, &t, &p, false).unwrap();
        let shape = crate::shape::shape(&t, &p, &crate::shape::Overrides::default()).unwrap();
        let table = tuner::table(&shape.input, Coll::AllReduce).unwrap();
        let mut routes = RouteTable::new(&t);
        let mut differed = false;
        for bytes in [4u64 << 10, 256 << 10, 64 << 20] {
            let request = CollectiveRequest {
                algorithms: family.iter().map(|&a| AlgorithmSpec::Builtin(a)).collect(),
                strict: false,
                chunks: railyard_model::ChunkPolicy::SearchAll,
                inter_stage: nccl_inter_stage(collective, &family),
                ..CollectiveRequest::new(collective, bytes, 1, Vec::new())
            };
            let plan = plan_with_routes(&mut routes, &p, &request).unwrap();
            let choice = tuner::choose(&shape.input, &table, bytes).unwrap();
            let spread = Spread::of(&t, &p);
            let run = nccl_run(&plan.algorithms, Some(&choice), spread, None).unwrap();
            let stands = railyard_of(&[choice.algo], spread);
            assert!(stands.iter().any(|&a| run.breakdown.algorithm == AlgorithmRef::Builtin(a)), "{bytes}");
            assert_eq!((run.secs, run.protocol), (run.breakdown.expected_secs, run.breakdown.protocol));
            // NCCL_PROTO=Simple: the same algorithm under Simple.
            let simple = nccl_run(&plan.algorithms, Some(&choice), spread, Some(&[Proto::Simple])).unwrap();
            assert_eq!(simple.protocol, Protocol::Simple);
            assert_eq!(Some(simple.secs), simple.breakdown.expected_secs_under(Protocol::Simple));
            let fastest = nccl_run(&plan.algorithms, None, spread, None).unwrap();
            let min = plan.algorithms.iter().map(|b| b.expected_secs).fold(f64::INFINITY, f64::min);
            assert_eq!(fastest.secs, min);
            assert!(run.secs >= fastest.secs);
            differed |= run.secs > fastest.secs;
        }
        // At 4 KiB NCCL runs its ring where railyard's double tree costs less.
        assert!(differed);
    }
}

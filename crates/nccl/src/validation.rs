//! railyard's expected times against nccl-tests runs others published
//! (`corpus/validation.toml`, `docs/validation.md`): per case and size, the measured
//! busbw beside railyard's expected busbw and bound for NCCL's algorithms as schedules
//! (`verdict::nccl_algorithms`, or those the run forced with `NCCL_ALGO`) and NCCL's own
//! tuner estimate (`tuner.rs`); the error of each, and their median and worst over the
//! large sizes (at least `LARGE_BYTES`) and the small ones (at most `SMALL_BYTES`).

use serde::{Deserialize, Serialize};

use railyard_model::nccl_family::nccl_inter_stage;
use railyard_model::{plan_on, AlgorithmSpec, CollectiveRequest, ModelError};
use railyard_topology::{Placement, PlacementPolicy, Topology};
use railyard_units::stats::median_of_sorted;

use crate::error::NcclError;
use crate::nccl_tests::TestsOutput;
use crate::shape::{self, Overrides};
use crate::tuner::{self, Coll};
use crate::verdict::{nccl_family, nccl_run, Spread};

/// Sizes from which a row counts as large, and up to which as small (the sizes `analyze`
/// says every model here is far off at).
pub const LARGE_BYTES: u64 = 64 << 20;
pub use crate::verdict::SMALL_BYTES;
/// Rows of a case compared: the largest `MAX_LARGE` large ones and every small one from
/// `MIN_SMALL_BYTES` (below it a run measures launch overheads no model here has).
pub const MAX_LARGE: usize = 8;
pub const MIN_SMALL_BYTES: u64 = 4 << 10;
/// Cases in one file.
pub const MAX_CASES: usize = 256;

/// One published run and the topology that describes its machines.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// The nccl-tests output, relative to the cases file.
    pub file: String,
    /// A preset spec or topology file for the machines it ran on.
    pub topology: String,
    /// Ranks, where the output does not list them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<usize>,
    /// Rank placement (`contiguous`, `interleaved`, ...), default contiguous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// NCCL_ALGO of the run, as NCCL reads it (`Ring`, `^NVLS`), if it set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_algo: Option<String>,
    /// NCCL_PROTO of the run (`LL128`, `^LL`), if it set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_proto: Option<String>,
    /// False where the run set one of railyard's constants (it is shown, not counted).
    #[serde(default = "yes")]
    pub independent: bool,
    /// Why the topology fits the run (hardware, what was inferred).
    pub why: String,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CasesFile {
    case: Vec<Case>,
}

/// Read a cases file (`[[case]]` tables).
pub fn parse_cases(text: &str) -> Result<Vec<Case>, NcclError> {
    let file: CasesFile = toml::from_str(text)
        .map_err(|e| NcclError::BadInput { field: "cases".into(), message: e.to_string().trim_end().to_string() })?;
    if file.case.len() > MAX_CASES {
        return Err(NcclError::BadInput {
            field: "cases".into(),
            message: format!("{} cases; at most {MAX_CASES}", file.case.len()),
        });
    }
    Ok(file.case)
}

/// One size of one case. Bandwidths are nccl-tests' busbw, GB/s.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    pub bytes: u64,
    pub measured: f64,
    /// railyard's expected busbw: the algorithm NCCL's tuner picks, as railyard's schedule
    /// at achievable rates (`verdict::nccl_run`).
    pub expected: f64,
    pub algorithm: String,
    pub protocol: &'static str,
    /// railyard's bound: the fastest of them at line rate; nothing measured may beat it.
    pub bound: f64,
    /// NCCL's tuner estimate (none for the tests it does not model).
    pub nccl: Option<f64>,
    /// The achievable rate (`Achievable` field: nvlink, pcie, nic, fabric, nvls, sharp)
    /// that sets the expected time at sizes of at least `LARGE_BYTES` (none below: the
    /// start-up sets those).
    pub limited_by: Option<&'static str>,
}

impl Point {
    /// expected / measured − 1: positive where railyard expects more than was measured.
    pub fn error(&self) -> f64 {
        self.expected / self.measured - 1.0
    }

    pub fn nccl_error(&self) -> Option<f64> {
        self.nccl.map(|n| n / self.measured - 1.0)
    }
}

/// A case's compared sizes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    pub case: Case,
    pub test: &'static str,
    pub ranks: usize,
    pub points: Vec<Point>,
}

/// The rows of `output` compared (see `MAX_LARGE`, `MIN_SMALL_BYTES`).
fn compared_rows(output: &TestsOutput) -> Vec<usize> {
    let mut large: Vec<usize> = (0..output.rows.len()).filter(|&i| output.rows[i].bytes >= LARGE_BYTES).collect();
    large.sort_by_key(|&i| std::cmp::Reverse(output.rows[i].bytes));
    large.truncate(MAX_LARGE);
    let small = (0..output.rows.len()).filter(|&i| (MIN_SMALL_BYTES..=SMALL_BYTES).contains(&output.rows[i].bytes));
    let mut rows: Vec<usize> = small.chain(large).collect();
    rows.sort_by_key(|&i| output.rows[i].bytes);
    rows.dedup();
    rows
}

/// Compare `case`'s run (`output`) with railyard on `topology`.
pub fn evaluate(case: &Case, output: &TestsOutput, topology: &Topology) -> Result<CaseResult, NcclError> {
    let bad = |field: &str, message: String| NcclError::BadInput { field: field.into(), message };
    let collective =
        output.kind.railyard().ok_or_else(|| bad("file", format!("{} has no railyard model", output.kind.binary())))?;
    let ranks = case.ranks.unwrap_or(output.ranks);
    let policy: PlacementPolicy = match &case.placement {
        Some(p) => p.parse().map_err(|e: String| bad("placement", e))?,
        None => PlacementPolicy::Contiguous,
    };
    let placement = Placement::new(topology, &policy, Some(ranks)).map_err(|e| bad("ranks", e.to_string()))?;
    let function = shape::nccl_function_name(collective);
    let algos = case.nccl_algo.as_deref().map(|s| shape::parse_algo_env(s, function)).transpose()?;
    let protos = case.nccl_proto.as_deref().map(|s| shape::parse_proto_env(s, function)).transpose()?;
    // NCCL_COLLNET_ENABLE is off in every run compared (its default).
    let family = nccl_family(collective, algos.as_deref(), topology, &placement, false)?;
    let spread = Spread::of(topology, &placement);
    let coll = Coll::from_railyard(collective);
    let tuner = match (coll, ranks >= 2) {
        (Some(c), true) => {
            let shape = shape::shape(
                topology,
                &placement,
                &Overrides { algos: algos.clone(), protos: protos.clone(), ..Overrides::default() },
            )?;
            let table = tuner::table(&shape.input, c)?;
            Some((shape, table))
        }
        _ => None,
    };
    let factor = output.kind.bus_factor(ranks.max(2));
    let busbw = |bytes: u64, secs: f64| bytes as f64 / secs / 1e9 * factor;
    let mut points = Vec::new();
    for i in compared_rows(output) {
        let row = &output.rows[i];
        let measured = row.out_of_place.busbw_recomputed.max(row.in_place.busbw_recomputed);
        // One-byte elements: the size as measured (a count of the run's dtype divides it).
        let request = CollectiveRequest {
            algorithms: family.iter().map(|&a| AlgorithmSpec::Builtin(a)).collect(),
            strict: false,
            chunks: railyard_model::ChunkPolicy::SearchAll,
            inter_stage: nccl_inter_stage(collective, &family),
            ..CollectiveRequest::new(collective, row.bytes, 1, Vec::new())
        };
        let plan = match plan_on(topology, &placement, &request) {
            Ok(p) => p,
            Err(ModelError::NothingRuns { skipped }) => {
                let why: Vec<String> = skipped.into_iter().map(|(a, w)| format!("{a}: {w}")).collect();
                return Err(bad("topology", format!("none of NCCL's algorithms runs here: {}", why.join("; "))));
            }
            Err(e) => return Err(bad("topology", e.to_string())),
        };
        let choice = tuner.as_ref().and_then(|(shape, table)| tuner::choose(&shape.input, table, row.bytes));
        // What NCCL runs (its tuner's algorithm), costed by railyard.
        let Some(run) = nccl_run(&plan.algorithms, choice.as_ref(), spread, protos.as_deref()) else {
            continue;
        };
        let expected = run.breakdown;
        // Never above the expected time (where the topology's α is above the protocols'
        // latencies, the expected time is the lower), as `analyze` takes it.
        let bound = plan.algorithms.iter().map(|b| b.total_secs).fold(f64::INFINITY, f64::min).min(run.secs);
        let nccl = choice.as_ref().map(|c| busbw(row.bytes, c.time_us * 1e-6));
        points.push(Point {
            bytes: row.bytes,
            measured,
            expected: busbw(row.bytes, run.secs),
            algorithm: railyard_model::algorithm_ref::shaped_name(
                &expected.name,
                expected.pipeline_chunks,
                expected.channels,
            ),
            protocol: run.protocol.as_str(),
            bound: busbw(row.bytes, bound),
            nccl,
            limited_by: limited_by(expected, row.bytes),
        });
    }
    Ok(CaseResult { case: case.clone(), test: output.kind.binary(), ranks, points })
}

/// Which achievable rate sets `b`'s expected time (the per-round model's slowest
/// resource at achievable rates), for the large sizes, where rates set it; none below.
fn limited_by(b: &railyard_model::Breakdown, bytes: u64) -> Option<&'static str> {
    (bytes >= LARGE_BYTES).then_some(())?;
    b.expected_limit.as_ref().map(|l| l.rate)
}

/// Median and worst |error| of some points.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Errors {
    pub points: usize,
    pub median: f64,
    pub worst: f64,
}

impl Errors {
    pub fn of(mut errors: Vec<f64>) -> Option<Errors> {
        if errors.is_empty() {
            return None;
        }
        errors.iter_mut().for_each(|e| *e = e.abs());
        errors.sort_by(f64::total_cmp);
        let n = errors.len();
        Some(Errors { points: n, median: median_of_sorted(&errors), worst: errors[n - 1] })
    }
}

/// The table's errors over its independent cases.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub large: Option<Errors>,
    pub small: Option<Errors>,
    pub nccl_large: Option<Errors>,
    pub nccl_small: Option<Errors>,
    /// Points measured faster than railyard's bound (case file, bytes).
    pub beats_bound: Vec<(String, u64)>,
}

/// Median and worst |error| of `points`' large (at least `LARGE_BYTES`) or small (at
/// most `SMALL_BYTES`) sizes, the error of each as `error` gives it (none: not counted).
pub fn size_errors<'a>(
    points: impl Iterator<Item = &'a Point>,
    large: bool,
    error: impl Fn(&Point) -> Option<f64>,
) -> Option<Errors> {
    Errors::of(
        points
            .filter(|p| if large { p.bytes >= LARGE_BYTES } else { p.bytes <= SMALL_BYTES })
            .filter_map(error)
            .collect(),
    )
}

pub fn summarize(results: &[CaseResult]) -> Summary {
    let independent = || results.iter().filter(|r| r.case.independent).flat_map(|r| &r.points);
    let errors = |large: bool, nccl: bool| {
        size_errors(independent(), large, |p| if nccl { p.nccl_error() } else { Some(p.error()) })
    };
    let beats_bound = results
        .iter()
        .flat_map(|r| r.points.iter().map(move |p| (r, p)))
        .filter(|(_, p)| p.measured > p.bound * (1.0 + 1e-9))
        .map(|(r, p)| (r.case.file.clone(), p.bytes))
        .collect();
    Summary {
        large: errors(true, false),
        small: errors(false, false),
        nccl_large: errors(true, true),
        nccl_small: errors(false, true),
        beats_bound,
    }
}

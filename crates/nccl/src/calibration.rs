//! Fit a machine class's achievable rates and per-call start-up to what a user measured
//! with nccl-tests: the `[achievable]` numbers railyard's expected times use
//! (`railyard_topology::achievable`), so the next prediction on the same machines —
//! another node count (the topology written is the one asked for, e.g. 16 nodes, while
//! each run is placed on as many nodes as it had), another collective, another
//! algorithm — starts from their cluster, not from NCCL's defaults.
//!
//! The fit has two parts, each a median so one odd row moves nothing:
//!
//! - **Rates.** At sizes of at least `LARGE_BYTES` a collective is bandwidth-bound, and
//!   its expected time is set by its slowest resource at achievable rates (line rate ×
//!   fraction). Each such row names the fraction that limits it (`Point::limited_by`:
//!   nvlink, nic, nvls, …); every fraction is scaled by the median of measured /
//!   expected busbw over its rows. The algorithm the model picks, and so the limiting
//!   resource, can change with the rates, so this repeats (`RATE_PASSES`).
//! - **Start-up.** At sizes from `validation::MIN_SMALL_BYTES` (4 KiB; nothing smaller
//!   is compared) up to `STARTUP_BYTES` the time is start-up: the per-call latency of
//!   every protocol moves by the median of measured − expected time (never below zero).
//!   nccl-tests' 20–40 µs per call is launch and the test's own synchronisation as much
//!   as NCCL's base latency; the fit takes it as it is.
//!
//! Rows are the ones validation compares (`validation::evaluate`). A fraction no row is
//! limited by keeps its default, and the report says which were fitted. A fraction that
//! fits at `MIN_FRACTION` is refused (a broken run), and so is a run measured faster than
//! railyard's bound at line rate (the topology undercounts the hardware).

use serde::Serialize;

use railyard_topology::{Achievable, Protocol, Topology};
use railyard_units::stats::median;

use crate::error::NcclError;
use crate::nccl_tests::{TestKind, TestsOutput};
use crate::validation::{self, Case, CaseResult, Errors, LARGE_BYTES, MIN_SMALL_BYTES};

/// Rows up to this size fit the start-up (from `validation::MIN_SMALL_BYTES`: below it
/// nothing is compared).
pub const STARTUP_BYTES: u64 = 64 << 10;
/// Passes of the rate fit (the limiting resource can move once the rates change).
pub const RATE_PASSES: usize = 3;
/// Rounds of rates then start-up.
pub const ROUNDS: usize = 2;
/// Files in one calibration, fitted and checked together.
pub const MAX_FILES: usize = 64;
/// Ranks of one run: each is planned (every NCCL algorithm, every chunk count) about ten
/// times over, and a 1,024-rank run takes seconds.
pub const MAX_RANKS: usize = 1024;
/// Fitted fractions stay in this range: at the floor they are broken runs, not a machine
/// class (refused); at line rate the report says so.
pub const MIN_FRACTION: f64 = 0.02;
pub const MAX_FRACTION: f64 = 1.0;

/// One user run: the nccl-tests output and the topology of the machines it ran on.
pub struct Run {
    pub case: Case,
    pub output: TestsOutput,
    pub topology: Topology,
}

/// One fitted number: its default and its fitted value, and how many rows set it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fitted {
    pub field: &'static str,
    pub default: f64,
    pub fitted: f64,
    pub rows: usize,
}

/// A calibration: the achievable rates fitted, and every compared row before and after.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub achievable: Achievable,
    pub fitted: Vec<Fitted>,
    /// Per run, the rows at the defaults (`before`) and at the fitted rates (`after`).
    pub before: Vec<CaseResult>,
    pub after: Vec<CaseResult>,
    /// What the reader should know (a rate that fits at line rate).
    pub notes: Vec<String>,
}

/// Whether a run of `kind` can be fitted: the collectives NCCL runs by the algorithms
/// railyard has as schedules (its all-to-all through PXN and point-to-point are not).
pub fn fits(kind: TestKind) -> bool {
    matches!(
        kind,
        TestKind::AllReduce | TestKind::AllGather | TestKind::ReduceScatter | TestKind::Broadcast | TestKind::Reduce
    )
}

/// A run's rank count within `MAX_RANKS` and its test one that can be fitted.
pub fn check_run(file: &str, output: &TestsOutput) -> Result<(), NcclError> {
    let bad = |message: String| NcclError::BadInput { field: file.to_string(), message };
    if !fits(output.kind) {
        return Err(bad(format!(
            "{} cannot be fitted: railyard has no schedule of how NCCL runs it (calibrate from all_reduce, \
             all_gather, reduce_scatter, broadcast or reduce runs)",
            output.kind.binary()
        )));
    }
    if output.ranks > MAX_RANKS {
        return Err(bad(format!("{} ranks; a calibration reads runs of at most {MAX_RANKS}", output.ranks)));
    }
    Ok(())
}

/// Every run evaluated with `achievable` in place of its topology's.
pub fn evaluate_with<'a>(
    runs: impl IntoIterator<Item = &'a Run>,
    achievable: &Achievable,
) -> Result<Vec<CaseResult>, NcclError> {
    runs.into_iter()
        .map(|run| {
            let mut topology = run.topology.clone();
            topology.achievable = achievable.clone();
            validation::evaluate(&run.case, &run.output, &topology)
        })
        .collect()
}

/// The fraction of `a` named `field` (the names `Point::limited_by` gives).
fn fraction_mut<'a>(a: &'a mut Achievable, field: &str) -> Option<&'a mut f64> {
    Some(match field {
        "nvlink" => &mut a.nvlink,
        "pcie" => &mut a.pcie,
        "nic" => &mut a.nic,
        "fabric" => &mut a.fabric,
        "nvls" => &mut a.nvls,
        "sharp" => &mut a.sharp,
        _ => return None,
    })
}

const FRACTIONS: [&str; 6] = ["nvlink", "pcie", "nic", "fabric", "nvls", "sharp"];

/// measured / expected busbw of the large rows limited by `field`.
fn ratios(results: &[CaseResult], field: &str) -> Vec<f64> {
    results
        .iter()
        .flat_map(|r| &r.points)
        .filter(|p| p.bytes >= LARGE_BYTES && p.limited_by == Some(field))
        .map(|p| p.measured / p.expected)
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect()
}

/// Fit `base` (the topology's achievable rates) to `runs`.
pub fn calibrate(runs: &[Run], base: &Achievable) -> Result<Calibration, NcclError> {
    let bad = |message: String| NcclError::BadInput { field: "nccl-tests".into(), message };
    if runs.is_empty() {
        return Err(bad("no runs to calibrate from".into()));
    }
    if runs.len() > MAX_FILES {
        return Err(bad(format!("{} files; at most {MAX_FILES}", runs.len())));
    }
    for run in runs {
        check_run(&run.case.file, &run.output)?;
    }
    let before = evaluate_with(runs, base)?;
    let mut a = base.clone();
    let mut results = before.clone();
    let mut startup_rows = 0;
    for _ in 0..ROUNDS {
        for _ in 0..RATE_PASSES {
            for field in FRACTIONS {
                if let (Some(ratio), Some(value)) = (median(ratios(&results, field)), fraction_mut(&mut a, field)) {
                    *value = (*value * ratio).clamp(MIN_FRACTION, MAX_FRACTION);
                }
            }
            results = evaluate_with(runs, &a)?;
        }
        // Measured − expected seconds of the start-up rows (busbw back to time: the
        // test's bus factor over both).
        let gaps: Vec<f64> = runs
            .iter()
            .zip(&results)
            .flat_map(|(run, r)| {
                let factor = run.output.kind.bus_factor(r.ranks.max(2));
                r.points.iter().filter(|p| p.bytes <= STARTUP_BYTES).map(move |p| {
                    let secs = |busbw: f64| p.bytes as f64 * factor / (busbw * 1e9);
                    secs(p.measured) - secs(p.expected)
                })
            })
            .filter(|g| g.is_finite())
            .collect();
        startup_rows = gaps.len();
        if let Some(gap) = median(gaps) {
            for call in &mut a.call_secs {
                *call = (*call + gap).clamp(0.0, 1.0);
            }
            results = evaluate_with(runs, &a)?;
        }
    }
    let rows: usize = results.iter().map(|r| r.points.len()).sum();
    a.source = format!(
        "fitted by `railyard calibrate --nccl-tests` to {} ({rows} rows)",
        runs.iter().map(|r| r.case.file.as_str()).collect::<Vec<_>>().join(", "),
    );
    a.validate().map_err(|e| bad(e.to_string()))?;
    // Rows counted on the final results: the rate that limits each now.
    let mut fitted: Vec<Fitted> = Vec::new();
    for field in FRACTIONS {
        let n = ratios(&results, field).len();
        let (Some(&mut default), Some(&mut value)) =
            (fraction_mut(&mut base.clone(), field), fraction_mut(&mut a, field))
        else {
            continue;
        };
        if n == 0 && value == default {
            continue;
        }
        if value <= MIN_FRACTION {
            return Err(bad(format!(
                "the {field} rate fits at {value:.3} of line rate: the runs are too slow for a working machine"
            )));
        }
        fitted.push(Fitted { field, default, fitted: value, rows: n });
    }
    let simple = Protocol::Simple.index();
    if startup_rows > 0 {
        fitted.push(Fitted {
            field: "call (Simple)",
            default: base.call_secs[simple],
            fitted: a.call_secs[simple],
            rows: startup_rows,
        });
    }
    if fitted.is_empty() {
        return Err(bad(format!(
            "nothing to fit: no size of at least {} (rates) or from {} to {} (start-up) in the runs",
            railyard_units::units::format_bytes(LARGE_BYTES as f64),
            railyard_units::units::format_bytes(MIN_SMALL_BYTES as f64),
            railyard_units::units::format_bytes(STARTUP_BYTES as f64),
        )));
    }
    let mut notes = Vec::new();
    for f in fitted.iter().filter(|f| f.fitted >= MAX_FRACTION) {
        notes.push(format!("the {} rate fits at line rate: the runs reach all the hardware has there", f.field));
    }
    let mut beaten = Vec::new();
    for r in &results {
        let beats: Vec<u64> =
            r.points.iter().filter(|p| p.measured > p.bound * (1.0 + 1e-9)).map(|p| p.bytes).collect();
        if !beats.is_empty() {
            beaten.push(format!(
                "{}: measured faster than railyard's bound at {} of its sizes (from {}): the topology, or railyard's \
                 schedule for how NCCL runs it, undercounts the hardware there",
                r.case.file,
                beats.len(),
                railyard_units::units::format_bytes(beats[0] as f64)
            ));
        }
    }
    // Faster than the bound is not a rate to fit: the topology is wrong.
    if !beaten.is_empty() {
        return Err(bad(format!("{} (give --topo the machines as they are)", beaten.join("; "))));
    }
    Ok(Calibration { achievable: a, fitted, before, after: results, notes })
}

/// A topology spec's preset and its parameters other than `nodes=`.
pub fn without_nodes(spec: &str) -> (&str, Vec<&str>) {
    let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
    (name, params.split(',').filter(|p| !p.is_empty() && !p.starts_with("nodes=")).collect())
}

/// Fitted on one run of a machine class, the other runs of the class predicted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrossCheck {
    /// The machine class: the runs' topology without its node count.
    pub class: String,
    pub fitted_on: String,
    /// The other runs of the class, predicted with the fitted numbers.
    pub predicted: usize,
    /// Their errors at the defaults and fitted, at large and at small sizes.
    pub default_large: Option<Errors>,
    pub fitted_large: Option<Errors>,
    pub default_small: Option<Errors>,
    pub fitted_small: Option<Errors>,
    /// Why the calibration on this run was refused (then nothing is predicted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// A run's machine class: its topology spec without `nodes=`.
pub fn machine_class(topology: &str) -> String {
    let (name, kept) = without_nodes(topology);
    if kept.is_empty() {
        name.to_string()
    } else {
        format!("{name}:{}", kept.join(","))
    }
}

/// Median and worst |error| of `results`' large (at least `LARGE_BYTES`) or small (at
/// most `SMALL_BYTES`) sizes.
pub fn errors_of(results: &[CaseResult], large: bool) -> Option<Errors> {
    validation::size_errors(results.iter().flat_map(|r| &r.points), large, |p| Some(p.error()))
}

/// Leave-one-out across each machine class: for every run of a class of at least two
/// (of the collectives a calibration fits), calibrate on that run alone and predict the class's other runs (each on its own
/// topology, the fitted numbers in place of the defaults).
pub fn leave_one_out(runs: &[Run]) -> Result<Vec<CrossCheck>, NcclError> {
    let mut classes: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    // Runs a calibration cannot fit (`fits`) are neither fitted on nor predicted.
    for (i, run) in runs.iter().enumerate().filter(|(_, r)| fits(r.output.kind)) {
        classes.entry(machine_class(&run.case.topology)).or_default().push(i);
    }
    let mut out = Vec::new();
    for (class, members) in classes.into_iter().filter(|(_, m)| m.len() >= 2) {
        let defaults: Vec<CaseResult> = members
            .iter()
            .map(|&i| validation::evaluate(&runs[i].case, &runs[i].output, &runs[i].topology))
            .collect::<Result<_, _>>()?;
        for (k, &i) in members.iter().enumerate() {
            let others: Vec<usize> = members.iter().copied().filter(|&j| j != i).collect();
            let before: Vec<CaseResult> =
                defaults.iter().enumerate().filter(|&(m, _)| m != k).map(|(_, r)| r.clone()).collect();
            let fitted = match calibrate(std::slice::from_ref(&runs[i]), &runs[i].topology.achievable) {
                Ok(f) => f,
                // A refused calibration is a result too: the run cannot stand for its class.
                Err(NcclError::BadInput { message, .. }) => {
                    out.push(CrossCheck {
                        class: class.clone(),
                        fitted_on: runs[i].case.file.clone(),
                        predicted: 0,
                        default_large: errors_of(&before, true),
                        fitted_large: None,
                        default_small: errors_of(&before, false),
                        fitted_small: None,
                        refused: Some(message),
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            let predicted = evaluate_with(others.iter().map(|&j| &runs[j]), &fitted.achievable)?;
            out.push(CrossCheck {
                class: class.clone(),
                fitted_on: runs[i].case.file.clone(),
                predicted: others.len(),
                default_large: errors_of(&before, true),
                fitted_large: errors_of(&predicted, true),
                default_small: errors_of(&before, false),
                fitted_small: errors_of(&predicted, false),
                refused: None,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_class_is_its_topology_without_the_node_count() {
        assert_eq!(machine_class("dgx-h100"), "dgx-h100");
        assert_eq!(machine_class("dgx-h100:nodes=8"), "dgx-h100");
        assert_eq!(machine_class("hgx-h200:nodes=2,fabric=roce"), "hgx-h200:fabric=roce");
        assert_eq!(machine_class("dgx-a100:fabric=roce,nodes=2,nic=25GB/s"), "dgx-a100:fabric=roce,nic=25GB/s");
    }
}

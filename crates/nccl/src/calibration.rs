//! Fit a machine class's achievable rates and per-call start-up to what a user measured
//! with nccl-tests: the `[achievable]` numbers railyard's expected times use
//! (`railyard_topology::achievable`), so the next prediction on the same machines — a
//! larger run, another collective, another algorithm — starts from their cluster, not
//! from NCCL's defaults.
//!
//! The fit has two parts, each a median so one odd row moves nothing:
//!
//! - **Rates.** At sizes of at least `LARGE_BYTES` a collective is bandwidth-bound, and
//!   its expected time is the bytes on its slowest resource over that resource's line
//!   rate × achievable fraction. Each such row names the fraction that limits it
//!   (`Point::limited_by`: nvlink, nic, nvls, …); every fraction is scaled by the median
//!   of measured / expected busbw over its rows. The algorithm the model picks, and so
//!   the limiting resource, can change with the rates, so this repeats (`RATE_PASSES`).
//! - **Start-up.** At sizes up to `STARTUP_BYTES` the time is start-up: the per-call
//!   latency of every protocol moves by the median of measured − expected time (never
//!   below zero). nccl-tests' 20–40 µs at 8 bytes is launch and the test's own
//!   synchronisation as much as NCCL's base latency; the fit takes it as it is.
//!
//! Rows are the ones validation compares (`validation::evaluate`). A fraction no row is
//! limited by keeps its default, and the report says which were fitted.

use serde::Serialize;

use railyard_topology::{Achievable, Topology};
use railyard_units::stats::median_of_sorted;

use crate::error::NcclError;
use crate::nccl_tests::TestsOutput;
use crate::validation::{self, Case, CaseResult, Errors, LARGE_BYTES, SMALL_BYTES};

/// Rows up to this size fit the start-up.
pub const STARTUP_BYTES: u64 = 64 << 10;
/// Passes of the rate fit (the limiting resource can move once the rates change).
pub const RATE_PASSES: usize = 3;
/// Rounds of rates then start-up.
pub const ROUNDS: usize = 2;
/// Files in one calibration.
pub const MAX_FILES: usize = 64;
/// No fitted fraction goes below this (a run this slow is broken, not a machine class).
pub const MIN_FRACTION: f64 = 0.02;

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
}

/// Every run evaluated with `achievable` in place of its topology's.
pub fn evaluate_with(runs: &[Run], achievable: &Achievable) -> Result<Vec<CaseResult>, NcclError> {
    runs.iter()
        .map(|run| {
            let mut topology = run.topology.clone();
            topology.achievable = achievable.clone();
            validation::evaluate(&run.case, &run.output, &topology)
        })
        .collect()
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(median_of_sorted(&values))
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

/// Fit `base` (the topology's achievable rates) to `runs`.
pub fn calibrate(runs: &[Run], base: &Achievable) -> Result<Calibration, NcclError> {
    if runs.is_empty() {
        return Err(NcclError::BadInput { field: "nccl-tests".into(), message: "no runs to calibrate from".into() });
    }
    if runs.len() > MAX_FILES {
        return Err(NcclError::BadInput {
            field: "nccl-tests".into(),
            message: format!("{} files; at most {MAX_FILES}", runs.len()),
        });
    }
    let before = evaluate_with(runs, base)?;
    let mut a = base.clone();
    let mut rows_of: std::collections::BTreeMap<&'static str, usize> = Default::default();
    let mut startup_rows = 0;
    let mut results = before.clone();
    for _ in 0..ROUNDS {
        for _ in 0..RATE_PASSES {
            for field in FRACTIONS {
                let ratios: Vec<f64> = results
                    .iter()
                    .flat_map(|r| &r.points)
                    .filter(|p| p.bytes >= LARGE_BYTES && p.limited_by == Some(field))
                    .map(|p| p.measured / p.expected)
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .collect();
                let n = ratios.len();
                if let (Some(ratio), Some(value)) = (median(ratios), fraction_mut(&mut a, field)) {
                    *value = (*value * ratio).clamp(MIN_FRACTION, 1.0);
                    rows_of.insert(field, n);
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
    a.source = format!(
        "fitted by `railyard calibrate --nccl-tests` to {} ({} rows)",
        runs.iter().map(|r| r.case.file.as_str()).collect::<Vec<_>>().join(", "),
        results.iter().map(|r| r.points.len()).sum::<usize>()
    );
    a.validate().map_err(|e| NcclError::BadInput { field: "nccl-tests".into(), message: e.to_string() })?;
    let mut fitted: Vec<Fitted> = FRACTIONS
        .iter()
        .filter_map(|&field| {
            let rows = *rows_of.get(field)?;
            let default = *fraction_mut(&mut base.clone(), field)?;
            let value = *fraction_mut(&mut a, field)?;
            Some(Fitted { field, default, fitted: value, rows })
        })
        .collect();
    if startup_rows > 0 {
        fitted.push(Fitted {
            field: "call (Simple)",
            default: base.call_secs[2],
            fitted: a.call_secs[2],
            rows: startup_rows,
        });
    }
    Ok(Calibration { achievable: a, fitted, before, after: results })
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
}

/// A run's machine class: its topology spec without `nodes=`.
pub fn machine_class(topology: &str) -> String {
    let (name, params) = topology.split_once(':').unwrap_or((topology, ""));
    let kept: Vec<&str> = params.split(',').filter(|p| !p.is_empty() && !p.starts_with("nodes=")).collect();
    if kept.is_empty() {
        name.to_string()
    } else {
        format!("{name}:{}", kept.join(","))
    }
}

fn errors_of(results: &[CaseResult], large: bool) -> Option<Errors> {
    Errors::of(
        results
            .iter()
            .flat_map(|r| &r.points)
            .filter(|p| if large { p.bytes >= LARGE_BYTES } else { p.bytes <= SMALL_BYTES })
            .map(|p| p.error())
            .collect(),
    )
}

/// Leave-one-out across each machine class: for every run of a class of at least two,
/// calibrate on that run alone and predict the class's other runs (each on its own
/// topology, the fitted numbers in place of the defaults).
pub fn leave_one_out(runs: &[Run]) -> Result<Vec<CrossCheck>, NcclError> {
    let mut classes: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for (i, run) in runs.iter().enumerate() {
        classes.entry(machine_class(&run.case.topology)).or_default().push(i);
    }
    let mut out = Vec::new();
    for (class, members) in classes.into_iter().filter(|(_, m)| m.len() >= 2) {
        let defaults: Vec<CaseResult> = members
            .iter()
            .map(|&i| validation::evaluate(&runs[i].case, &runs[i].output, &runs[i].topology))
            .collect::<Result<_, _>>()?;
        for (k, &i) in members.iter().enumerate() {
            let fitted = calibrate(std::slice::from_ref(&runs[i]), &runs[i].topology.achievable)?;
            let others: Vec<usize> = members.iter().copied().filter(|&j| j != i).collect();
            let predicted: Vec<CaseResult> = others
                .iter()
                .map(|&j| {
                    let mut topology = runs[j].topology.clone();
                    topology.achievable = fitted.achievable.clone();
                    validation::evaluate(&runs[j].case, &runs[j].output, &topology)
                })
                .collect::<Result<_, _>>()?;
            let before: Vec<CaseResult> =
                defaults.iter().enumerate().filter(|&(m, _)| m != k).map(|(_, r)| r.clone()).collect();
            out.push(CrossCheck {
                class: class.clone(),
                fitted_on: runs[i].case.file.clone(),
                predicted: others.len(),
                default_large: errors_of(&before, true),
                fitted_large: errors_of(&predicted, true),
                default_small: errors_of(&before, false),
                fitted_small: errors_of(&predicted, false),
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

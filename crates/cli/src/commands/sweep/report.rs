//! A sweep's results read back: each point's headline number (the fastest algorithm's
//! time for `plan`, the makespan for `sim`, the best layout's step for
//! `plan-training`), the best points, and per axis the best value found at each of its
//! values — as a table, and for numeric axes as line charts.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use railyard_units::chart::{stack, LineChart, Series};
use railyard_units::units::format_secs;
use railyard_units::Table;

use super::store::{self, Record};

/// A record's headline time in seconds (lower is better), where its command gives one:
/// for plan-training the best step's time per million tokens, so batches compare.
pub fn metric(r: &Record) -> Option<f64> {
    let o = &r.output;
    let min = |xs: Vec<f64>| xs.into_iter().filter(|x| x.is_finite()).min_by(f64::total_cmp);
    if let Some(algorithms) = o.get("algorithms").and_then(|a| a.as_array()) {
        // The expected time (achievable rates, per-call latencies) where the plan has one:
        // the bound's single α per round makes a 1,023-message round look free.
        return min(algorithms
            .iter()
            .filter_map(|a| a.get("expected_secs").or_else(|| a.get("total_secs"))?.as_f64())
            .collect());
    }
    if let Some(runs) = o.get("runs").and_then(|a| a.as_array()) {
        return min(runs.iter().filter_map(|r| r.get("report")?.get("makespan_secs")?.as_f64()).collect());
    }
    let job = o.get("job")?;
    let tokens_per_sec = job.get("ranked")?.get(0)?.get("step")?.get("tokens_per_sec")?.as_f64()?;
    (tokens_per_sec > 0.0).then(|| 1e6 / tokens_per_sec)
}

fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn report(results: &Path, svg: Option<&Path>, top: usize) -> Result<String> {
    let records = store::read(results, false)?;
    if records.is_empty() {
        anyhow::bail!("{}: no records", results.display());
    }
    let failed = records.values().filter(|r| r.error.is_some()).count();
    let mut scored: Vec<(&Record, f64)> = records.values().filter_map(|r| Some((r, metric(r)?))).collect();
    scored.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut out = format!(
        "# Sweep {}\n\n{} points recorded, {failed} failed, {} with a time (plan: the fastest \
         algorithm's expected time; sim: the makespan; plan-training: the best layout's time per million tokens).\n\n## Best points\n\n",
        results.display(),
        records.len(),
        scored.len()
    );
    let mut t = Table::new(["point", "inputs", "time"]);
    for (r, m) in scored.iter().take(top.max(1)) {
        let inputs = r.inputs.as_object().map_or(String::new(), |m| {
            m.iter().map(|(k, v)| format!("{k}={}", value_text(v))).collect::<Vec<_>>().join(" ")
        });
        t.row([r.point.to_string(), inputs, format_secs(*m)]);
    }
    out += &t.render();
    // Per axis: the best time at each of its values (over every other axis).
    let mut axes: BTreeMap<String, BTreeMap<String, (f64, Option<f64>)>> = BTreeMap::new();
    for (r, m) in &scored {
        for (k, v) in r.inputs.as_object().into_iter().flatten() {
            let x = v
                .as_f64()
                .or_else(|| v.as_str().and_then(|s| railyard_units::units::parse_bytes(s).ok()).map(|b| b as f64));
            let entry = axes.entry(k.clone()).or_default().entry(value_text(v)).or_insert((f64::INFINITY, x));
            entry.0 = entry.0.min(*m);
        }
    }
    let mut charts = Vec::new();
    for (axis, values) in &axes {
        out += &format!("\n## Best time by {axis}\n\n");
        let mut t = Table::new([axis.as_str(), "best time"]);
        let mut ordered: Vec<(&String, &(f64, Option<f64>))> = values.iter().collect();
        ordered.sort_by(|a, b| match (a.1 .1, b.1 .1) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            _ => a.0.cmp(b.0),
        });
        for (v, (best, _)) in &ordered {
            t.row([(*v).clone(), format_secs(*best)]);
        }
        out += &t.render();
        if ordered.len() > 1 && ordered.iter().all(|(_, (_, x))| x.is_some_and(|x| x > 0.0)) {
            let points: Vec<(f64, f64)> = ordered.iter().filter_map(|(_, (b, x))| Some(((*x)?, b * 1e3))).collect();
            charts.push(
                LineChart {
                    title: format!("Best time by {axis}"),
                    x_label: axis.clone(),
                    y_label: "time (ms)".into(),
                    log_x: true,
                    series: vec![Series { name: "best over the other axes".into(), points }],
                    marks: vec![],
                }
                .svg(),
            );
        }
    }
    if let Some(path) = svg {
        if charts.is_empty() {
            out += "\n(--svg: no numeric axis with two or more values to chart; nothing written)\n";
        } else {
            std::fs::write(path, stack(&charts)).with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(out)
}

//! A sweep's results read back: each point's headline number (the fastest algorithm's
//! time for `plan`, the makespan for `sim`, the best layout's step for
//! `plan-training`), the best points, per axis the best value found at each of its
//! values (a table, and for numeric axes a line chart), the best over two axes (a
//! table and a heatmap), and where the records count hardware (`plan`: GPUs, NICs,
//! switches) the Pareto front of time against cost.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use railyard_units::chart::{stack, Heatmap, LineChart, Mark, Series, MAX_HEATMAP_SIDE};
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

/// An input's value as the report shows it (a size axis in binary units).
fn value_text(axis: &str, v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Number(n) if axis == "size" && n.is_u64() => {
            railyard_units::units::format_bytes(n.as_u64().unwrap_or(0) as f64)
        }
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An axis's values (each with its best time and its number, if it reads as one) in the
/// order tables and charts show them: numbers ascending, else by name.
fn in_axis_order(values: &BTreeMap<String, (f64, Option<f64>)>) -> Vec<(&String, &(f64, Option<f64>))> {
    let mut ordered: Vec<(&String, &(f64, Option<f64>))> = values.iter().collect();
    ordered.sort_by(|a, b| match (a.1 .1, b.1 .1) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        _ => a.0.cmp(b.0),
    });
    ordered
}

/// What `report` is asked for beyond the results.
pub struct Options<'a> {
    pub svg: Option<&'a Path>,
    /// Rows of the best-points table.
    pub top: usize,
    /// The heatmap's axes (columns, rows); default the two with the most values.
    pub heatmap: Option<(String, String)>,
    /// Price per part (`gpus`, `nics`, `switches`, ...); default one per NIC and switch.
    pub prices: Vec<(String, f64)>,
}

/// The parts `--price` may name: the fields of a plan's `hardware`.
pub const PRICED_PARTS: [&str; 6] = ["gpus", "servers", "nics", "switches", "nvswitches", "pcie_switches"];

/// A record's cost: its hardware counts times their prices (None without counts).
fn cost(r: &Record, prices: &[(String, f64)]) -> Option<f64> {
    let h = r.output.get("hardware")?;
    let mut total = 0.0;
    for (part, price) in prices {
        total += h.get(part)?.as_f64()? * price;
    }
    Some(total)
}

pub fn report(results: &Path, options: &Options<'_>) -> Result<String> {
    let (svg, top) = (options.svg, options.top);
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
            m.iter().map(|(k, v)| format!("{k}={}", value_text(k, v))).collect::<Vec<_>>().join(" ")
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
            let entry = axes.entry(k.clone()).or_default().entry(value_text(k, v)).or_insert((f64::INFINITY, x));
            entry.0 = entry.0.min(*m);
        }
    }
    let mut charts = Vec::new();
    for (axis, values) in &axes {
        out += &format!("\n## Best time by {axis}\n\n");
        let mut t = Table::new([axis.as_str(), "best time"]);
        let ordered = in_axis_order(values);
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
    out += &heatmap(&scored, &axes, options, &mut charts)?;
    out += &pareto(&scored, options, &mut charts);
    if let Some(path) = svg {
        if charts.is_empty() {
            out += "\n(--svg: no numeric axis with two or more values to chart; nothing written)\n";
        } else {
            std::fs::write(path, stack(&charts)).with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(out)
}

/// The best time over two axes: a table, and a heatmap chart.
fn heatmap(
    scored: &[(&Record, f64)],
    axes: &BTreeMap<String, BTreeMap<String, (f64, Option<f64>)>>,
    options: &Options<'_>,
    charts: &mut Vec<String>,
) -> Result<String> {
    // An axis's values in the order its table shows them.
    let ordered = |axis: &str| -> Vec<String> {
        axes.get(axis).map_or(vec![], |values| in_axis_order(values).into_iter().map(|(k, _)| k.clone()).collect())
    };
    let (x, y) = match &options.heatmap {
        Some((x, y)) => {
            for a in [x, y] {
                if !axes.contains_key(a) {
                    let names: Vec<&str> = axes.keys().map(String::as_str).collect();
                    anyhow::bail!("--heatmap: {a} is not an axis of these results (axes: {})", names.join(", "));
                }
            }
            if x == y {
                anyhow::bail!("--heatmap: give two different axes");
            }
            (x.clone(), y.clone())
        }
        None => {
            // The two axes whose values combine in the most ways (zipped axes, which
            // only pair along a diagonal, lose to independent ones); ties by the more
            // values, then by name.
            let many: Vec<&String> = axes.iter().filter(|(_, v)| v.len() > 1).map(|(k, _)| k).collect();
            let mut best: Option<(usize, usize, &String, &String)> = None;
            for (i, a) in many.iter().enumerate() {
                for b in &many[i + 1..] {
                    let pairs: std::collections::BTreeSet<(String, String)> = scored
                        .iter()
                        .filter_map(|(r, _)| {
                            Some((r.inputs.get(a.as_str())?.to_string(), r.inputs.get(b.as_str())?.to_string()))
                        })
                        .collect();
                    let score = (pairs.len(), axes[*a].len() + axes[*b].len());
                    if best.is_none_or(|(p, n, _, _)| score > (p, n)) {
                        best = Some((score.0, score.1, a, b));
                    }
                }
            }
            match best {
                // Columns: the axis with more values.
                Some((_, _, a, b)) if axes[a].len() >= axes[b].len() => (a.clone(), b.clone()),
                Some((_, _, a, b)) => (b.clone(), a.clone()),
                None => return Ok(String::new()),
            }
        }
    };
    let (columns, rows) = (ordered(&x), ordered(&y));
    let mut best: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (r, m) in scored {
        let (Some(vx), Some(vy)) = (r.inputs.get(&x), r.inputs.get(&y)) else { continue };
        let cell = best.entry((value_text(&x, vx), value_text(&y, vy))).or_insert(f64::INFINITY);
        *cell = cell.min(*m);
    }
    let values: Vec<Vec<Option<f64>>> =
        rows.iter().map(|ry| columns.iter().map(|cx| best.get(&(cx.clone(), ry.clone())).copied()).collect()).collect();
    let mut out = format!("\n## Best time by {y} (rows) and {x} (columns)\n\n");
    let shown = columns.len().min(16);
    let mut header = vec![format!("{y} \\ {x}")];
    header.extend(columns.iter().take(shown).cloned());
    let mut t = Table::new(header);
    for (ry, row) in rows.iter().zip(&values).take(MAX_HEATMAP_SIDE) {
        let mut cells = vec![ry.clone()];
        cells.extend(row.iter().take(shown).map(|v| v.map_or("-".into(), format_secs)));
        t.row(cells);
    }
    out += &t.render();
    if columns.len() > shown {
        out += &format!("({} more columns in the --svg heatmap)\n", columns.len() - shown);
    }
    if columns.len() > MAX_HEATMAP_SIDE || rows.len() > MAX_HEATMAP_SIDE {
        out += &format!("(the heatmap draws the first {MAX_HEATMAP_SIDE} values of each axis)\n");
    }
    charts.push(
        Heatmap {
            title: format!("Best time by {y} and {x}"),
            x_label: x.clone(),
            y_label: y.clone(),
            columns,
            rows,
            values,
            format: format_secs,
        }
        .svg(),
    );
    Ok(out)
}

/// Axis values, `(axis, value)`: a fabric's name or a workload.
type Key = Vec<(String, String)>;

/// A fabric on a Pareto front: its name, cost and slowdown.
type Fabric = (Key, f64, f64);

/// The fabrics no other beats on both cost and time, cheapest first, among clusters of
/// one GPU count (a smaller cluster is not a cheaper way to run the same job). A fabric
/// is the topology a point ran on — its `topo` input (or the output's topology name) —
/// named by the axes with one value per topology (`topo`, and axes zipped with it); its
/// time is its slowdown against the best fabric on each workload (the other axes'
/// values), geometric mean over the workloads every fabric of its GPU count ran, so a
/// 4 KiB all-reduce and a 1 GiB one weigh alike.
fn pareto(scored: &[(&Record, f64)], options: &Options<'_>, charts: &mut Vec<String>) -> String {
    let default_prices = [("nics".to_string(), 1.0), ("switches".to_string(), 1.0)];
    let prices: &[(String, f64)] = if options.prices.is_empty() { &default_prices } else { &options.prices };
    let costed: Vec<(&Record, f64, f64)> =
        scored.iter().filter_map(|(r, m)| Some((*r, cost(r, prices)?, *m))).collect();
    let fabric_of = |r: &Record| -> String {
        let topo = r.inputs.as_object().into_iter().flatten().find(|(k, _)| super::grid::names_topology(k));
        match (topo, r.output.get("topology")) {
            (Some((_, v)), _) => value_text("topo", v),
            (None, Some(serde_json::Value::String(t))) => t.clone(),
            _ => r.output["hardware"].to_string(),
        }
    };
    let key = |r: &Record, keep: &dyn Fn(&str) -> bool| -> Key {
        r.inputs
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (k.clone(), value_text(k, v)))
            .collect()
    };
    // Each axis's values on each fabric: an axis with one value per fabric names it.
    let mut values: BTreeMap<String, BTreeMap<String, std::collections::BTreeSet<String>>> = BTreeMap::new();
    for (r, _, _) in &costed {
        for (k, v) in r.inputs.as_object().into_iter().flatten() {
            values.entry(k.clone()).or_default().entry(fabric_of(r)).or_default().insert(value_text(k, v));
        }
    }
    let fabric_axes: Vec<&String> = values
        .iter()
        .filter(|(_, by_fabric)| {
            let all: std::collections::BTreeSet<&String> = by_fabric.values().flatten().collect();
            all.len() > 1 && by_fabric.values().all(|v| v.len() == 1)
        })
        .map(|(k, _)| k)
        .collect();
    if fabric_axes.is_empty() {
        return String::new();
    }
    let is_fabric = |k: &str| fabric_axes.iter().any(|a| a.as_str() == k);
    // By GPU count: time by fabric and workload, and each fabric's cost.
    type Times = BTreeMap<Key, BTreeMap<Key, f64>>;
    let mut groups: BTreeMap<u64, (Times, BTreeMap<Key, f64>)> = BTreeMap::new();
    for (r, c, m) in &costed {
        let gpus = r.output["hardware"]["gpus"].as_u64().unwrap_or(0);
        let (times, costs) = groups.entry(gpus).or_default();
        let f = key(r, &is_fabric);
        costs.insert(f.clone(), *c);
        times.entry(f).or_default().insert(key(r, &|k| !is_fabric(k)), *m);
    }
    let fabric_names = fabric_axes.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ");
    let what = if options.prices.is_empty() {
        "NICs + switches, counted (--price nics=1500,switches=30000,gpus=25000 weighs them)".to_string()
    } else {
        prices.iter().map(|(p, x)| format!("{x} x {p}")).collect::<Vec<_>>().join(" + ")
    };
    let mut out = format!(
        "\n## Pareto front: time against cost\n\nFabrics are the values of {fabric_names} (the axes with one value per topology), compared among clusters of one GPU count; cost = {what}. Time is each fabric's slowdown against the best fabric on each workload (the other axes' values) every fabric of its GPU count ran, geometric mean: 1.000 = the best everywhere. On the front, each fabric is faster than every cheaper one.\n"
    );
    let mut series = Vec::new();
    let mut marks = Vec::new();
    for (gpus, (times, costs)) in &groups {
        let gpus_text = format!("{} GPUs", railyard_units::units::trim_float(*gpus as f64, 6));
        let heading = if groups.len() > 1 { format!("\n### {gpus_text}\n\n") } else { "\n".to_string() };
        if times.len() < 2 {
            out += &format!("{heading}One fabric with {gpus_text}: nothing to compare.\n");
            continue;
        }
        let Some((common, fabrics, front)) = front_of(times, costs) else {
            out += &format!("{heading}No workload ran on every fabric with {gpus_text}: nothing to compare.\n");
            continue;
        };
        out += &format!(
            "{heading}{} of {} fabrics on the front, over {common} workloads.\n\n",
            front.len(),
            fabrics.len()
        );
        let mut t = Table::new(["no.", "cost", "slowdown", "fabric"]);
        for (i, (f, c, x)) in front.iter().enumerate() {
            let words: Vec<String> = f.iter().map(|(k, v)| format!("{k}={v}")).collect();
            t.row([(i + 1).to_string(), railyard_units::units::trim_float(*c, 6), format!("{x:.3}"), words.join(" ")]);
            marks.push(Mark { x: *c, y: *x, label: format!("{}", i + 1) });
        }
        out += &t.render();
        series.push(Series { name: gpus_text, points: front.iter().map(|f| (f.1, f.2)).collect() });
    }
    if !series.is_empty() {
        charts.push(
            LineChart {
                title: "Pareto front: slowdown against cost".into(),
                x_label: "cost".into(),
                y_label: "slowdown against the best fabric (geometric mean)".into(),
                log_x: false,
                series,
                marks,
            }
            .svg(),
        );
    }
    out
}

/// The workloads every fabric ran, the fabrics scored, and the front (cheapest first);
/// None when no workload ran on every fabric.
fn front_of(
    times: &BTreeMap<Key, BTreeMap<Key, f64>>,
    costs: &BTreeMap<Key, f64>,
) -> Option<(usize, Vec<Fabric>, Vec<Fabric>)> {
    let first = times.values().next()?;
    let common: Vec<&Key> = first.keys().filter(|w| times.values().all(|t| t.contains_key(*w))).collect();
    if common.is_empty() {
        return None;
    }
    let best: Vec<f64> = common.iter().map(|w| times.values().map(|t| t[*w]).fold(f64::INFINITY, f64::min)).collect();
    let mut fabrics: Vec<Fabric> = times
        .iter()
        .map(|(f, t)| {
            let log_mean = common.iter().zip(&best).map(|(w, b)| (t[*w] / b).ln()).sum::<f64>() / common.len() as f64;
            (f.clone(), costs[f], log_mean.exp())
        })
        .collect();
    fabrics.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.2.total_cmp(&b.2)));
    let mut front: Vec<Fabric> = Vec::new();
    for f in &fabrics {
        if front.last().is_none_or(|last| f.2 < last.2) {
            front.push(f.clone());
        }
    }
    Some((common.len(), fabrics, front))
}

//! Latency-bound vs bandwidth-bound collectives (seed 001 §7.6.3): a ring all-reduce
//! costs rounds × α plus a payload term linear in the size, so a 3× bandwidth helps
//! large messages and a smaller α helps small ones. The crossover is the size where the
//! two terms are equal. Also: the tail of a set of communications (mean and the
//! ⌈qN⌉-th smallest), and state-migration transfer times.

use railyard_units::quantity;
use serde::{Deserialize, Serialize};

use crate::comm::{CommInput, Coster, Engine};
use crate::error::{secs, within, PlannerError};

pub const MAX_SIZES: usize = 64;
pub const MAX_VARIANTS: usize = 16;
/// The most cases a tail or migration section may list.
pub const MAX_CASES: usize = 64;
/// The most communications one tail case may count.
pub const MAX_TAIL_COUNT: u64 = 1 << 24;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyInput {
    /// A collective on a topology (`size_bytes` is set per size).
    pub comm: CommInput,
    #[serde(deserialize_with = "quantity::bytes_list")]
    pub sizes_bytes: Vec<f64>,
    /// Bandwidth what-ifs: every link's bandwidth times each factor.
    #[serde(default)]
    pub bandwidth_factors: Vec<f64>,
    /// Start-up what-ifs: α per round.
    #[serde(default, deserialize_with = "quantity::secs_list")]
    pub startup_secs: Vec<f64>,
    /// Collectives run one after another (e.g. 36 layers × 2), at the smallest size.
    #[serde(default = "one")]
    pub repeats: u64,
}

fn one() -> u64 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyVariant {
    pub name: String,
    pub startup_secs: f64,
    /// Seconds of payload per byte (the slope of T(M)).
    pub secs_per_byte: f64,
    /// The size where payload equals start-up (`None` without a payload term).
    pub crossover_bytes: Option<f64>,
    /// Per size, the collective's time.
    pub secs: Vec<f64>,
    /// `repeats` collectives of the smallest size.
    pub repeated_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyReport {
    pub source: String,
    pub sizes_bytes: Vec<f64>,
    pub repeats: u64,
    pub variants: Vec<LatencyVariant>,
}

pub fn evaluate(input: &LatencyInput, coster: &Coster) -> Result<LatencyReport, PlannerError> {
    if input.sizes_bytes.is_empty() || input.sizes_bytes.len() > MAX_SIZES {
        return Err(PlannerError::bad("latency.sizes_bytes", format!("give 1..={MAX_SIZES} sizes")));
    }
    if input.bandwidth_factors.len() + input.startup_secs.len() > MAX_VARIANTS {
        return Err(PlannerError::bad("latency", format!("at most {MAX_VARIANTS} what-ifs")));
    }
    if input.repeats == 0 || input.repeats > 1 << 32 {
        return Err(PlannerError::bad("latency.repeats", format!("must be 1..=2^32 (got {})", input.repeats)));
    }
    let topo = input.comm.topo.clone().ok_or_else(|| PlannerError::bad("latency.comm.topo", "missing"))?;
    if input.comm.algo.is_none() {
        return Err(PlannerError::bad(
            "latency.comm.algo",
            "missing: the sizes are costed as this algorithm's schedule",
        ));
    }
    if input.comm.size_bytes.is_some() || input.comm.secs.is_some() || input.comm.cut_bytes.is_some() {
        return Err(PlannerError::bad("latency.comm", "give topo and algo only: the sizes come from sizes_bytes"));
    }
    for (i, &m) in input.sizes_bytes.iter().enumerate() {
        if !((1.0..=crate::comm::MAX_COMM_BYTES).contains(&m) && m.fract() == 0.0) {
            return Err(PlannerError::bad(
                format!("latency.sizes_bytes[{i}]"),
                format!("must be a whole number of bytes in 1..=2^50 (got {m})"),
            ));
        }
    }
    let elem = input.comm.elem_bytes.unwrap_or(4) as f64;
    for (i, &m) in input.sizes_bytes.iter().enumerate() {
        if m % elem != 0.0 {
            return Err(PlannerError::bad(
                format!("latency.sizes_bytes[{i}]"),
                format!("{m} B is not a whole number of {elem}-byte elements"),
            ));
        }
    }
    // What-ifs: checked first, built one at a time (a large topology is held once).
    enum WhatIf {
        AsGiven,
        Bandwidth(f64),
        Startup(f64),
    }
    let mut what_ifs = vec![WhatIf::AsGiven];
    for (i, &f) in input.bandwidth_factors.iter().enumerate() {
        within(&format!("latency.bandwidth_factors[{i}]"), f, 1e-3, 1e3)?;
        what_ifs.push(WhatIf::Bandwidth(f));
    }
    for (i, &a) in input.startup_secs.iter().enumerate() {
        within(&format!("latency.startup_secs[{i}]"), a, 0.0, 1.0)?;
        what_ifs.push(WhatIf::Startup(a));
    }
    let base = coster.load(&topo, "latency.comm")?;
    if base.default_ranks.len() < 2 {
        return Err(PlannerError::bad("latency.comm.topo", "has one rank: a collective needs two"));
    }
    let own_model;
    let model = match coster.engine {
        Engine::Model => coster,
        Engine::Sim => {
            own_model = Coster::new(Engine::Model);
            &own_model
        }
    };
    let smallest = input.sizes_bytes.iter().copied().fold(f64::INFINITY, f64::min);
    let largest = input.sizes_bytes.iter().copied().fold(0.0, f64::max);
    let mut out = Vec::new();
    let mut source = String::new();
    for (v, what_if) in what_ifs.iter().enumerate() {
        let (name, field, variant) = match *what_if {
            WhatIf::AsGiven => ("as given".to_string(), "latency.comm.topo".to_string(), None),
            WhatIf::Bandwidth(f) => (
                format!("bandwidth x{f}"),
                format!("latency.bandwidth_factors[{}]", v - 1),
                Some(base.with_bandwidth_scaled(f)),
            ),
            WhatIf::Startup(a) => (
                format!("start-up {} per round", railyard_units::units::format_secs(a)),
                format!("latency.startup_secs[{}]", v - 1 - input.bandwidth_factors.len()),
                Some(base.with_round_startup(a)),
            ),
        };
        let variant = variant.transpose().map_err(|cause| PlannerError::Topology { field, cause })?;
        let topology = variant.as_ref().unwrap_or(&base);
        let mut secs = Vec::with_capacity(input.sizes_bytes.len());
        for (i, &m) in input.sizes_bytes.iter().enumerate() {
            let field = format!("latency.sizes_bytes[{i}]");
            let t = coster.time_on(&input.comm.with_size(m), &field, topology)?;
            if source.is_empty() {
                source = t.source.clone();
            }
            secs.push(t.secs);
        }
        // The model's two terms, read at the largest size: start-up and payload per byte.
        let at_largest = model.time_on(&input.comm.with_size(largest), "latency", topology)?;
        let startup = at_largest.startup_secs.unwrap_or(0.0);
        let per_byte = (at_largest.secs - startup) / largest;
        let at_smallest = input.sizes_bytes.iter().position(|&m| m == smallest).unwrap_or(0);
        out.push(LatencyVariant {
            name,
            startup_secs: startup,
            secs_per_byte: per_byte,
            crossover_bytes: (per_byte > 0.0).then(|| startup / per_byte),
            repeated_secs: secs[at_smallest] * input.repeats as f64,
            secs,
        });
    }
    Ok(LatencyReport { source, sizes_bytes: input.sizes_bytes.clone(), repeats: input.repeats, variants: out })
}

/// One set of communications: `count` in all, each `normal_secs` plus the extra of the
/// events that hit it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TailCase {
    pub name: String,
    pub count: u64,
    #[serde(deserialize_with = "quantity::secs")]
    pub normal_secs: f64,
    #[serde(default)]
    pub events: Vec<TailEvent>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TailEvent {
    pub name: String,
    #[serde(deserialize_with = "quantity::secs")]
    pub extra_secs: f64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TailInput {
    /// The quantile reported: the ⌈qN⌉-th smallest.
    #[serde(default = "p99")]
    pub quantile: f64,
    pub case: Vec<TailCase>,
}

fn p99() -> f64 {
    0.99
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TailRow {
    pub name: String,
    pub count: u64,
    pub mean_secs: f64,
    pub quantile_secs: f64,
    /// Which one it is: ⌈qN⌉.
    pub quantile_rank: u64,
}

/// Mean and the ⌈qN⌉-th smallest of a set of communications (seed 001 §7.6.3).
pub fn tail(input: &TailInput) -> Result<Vec<TailRow>, PlannerError> {
    within("tail.quantile", input.quantile, 1e-9, 1.0)?;
    if input.case.is_empty() || input.case.len() > MAX_CASES {
        return Err(PlannerError::bad("tail.case", format!("give 1..={MAX_CASES} cases")));
    }
    let mut rows = Vec::new();
    for (i, c) in input.case.iter().enumerate() {
        let field = format!("tail.case[{i}]");
        if c.count == 0 || c.count > MAX_TAIL_COUNT {
            return Err(PlannerError::bad(format!("{field}.count"), format!("must be 1..={MAX_TAIL_COUNT}")));
        }
        secs(&format!("{field}.normal_secs"), c.normal_secs)?;
        for (j, e) in c.events.iter().enumerate() {
            secs(&format!("{field}.events[{j}].extra_secs"), e.extra_secs)?;
        }
        let hit: u64 = c.events.iter().map(|e| e.count.min(MAX_TAIL_COUNT + 1)).sum();
        if hit > c.count {
            return Err(PlannerError::bad(
                format!("{field}.events"),
                format!("the events hit more than the {} communications", c.count),
            ));
        }
        // Sorted values: the normal ones, then each event's, smallest extra first.
        let mut groups: Vec<(f64, u64)> = vec![(c.normal_secs, c.count - hit)];
        groups.extend(c.events.iter().map(|e| (c.normal_secs + e.extra_secs, e.count)));
        groups.sort_by(|a, b| a.0.total_cmp(&b.0));
        let k = ((input.quantile * c.count as f64) - 1e-9).ceil().max(1.0) as u64;
        let mut seen = 0;
        let mut q = c.normal_secs;
        for &(v, n) in &groups {
            seen += n;
            if seen >= k {
                q = v;
                break;
            }
        }
        let mean = groups.iter().map(|&(v, n)| v * n as f64).sum::<f64>() / c.count as f64;
        rows.push(TailRow {
            name: c.name.clone(),
            count: c.count,
            mean_secs: mean,
            quantile_secs: q,
            quantile_rank: k,
        });
    }
    Ok(rows)
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrationCase {
    pub name: String,
    #[serde(deserialize_with = "quantity::bytes")]
    pub bytes: f64,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub bytes_per_sec: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrationInput {
    pub case: Vec<MigrationCase>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigrationRow {
    pub name: String,
    pub bytes: f64,
    pub secs: f64,
    /// Saved against the first case.
    pub saved_secs: f64,
}

/// State migration's transfer term (seed 001 §7.6.3): bytes / bandwidth.
pub fn migration(input: &MigrationInput) -> Result<Vec<MigrationRow>, PlannerError> {
    if input.case.is_empty() || input.case.len() > MAX_CASES {
        return Err(PlannerError::bad("migration.case", format!("give 1..={MAX_CASES} cases")));
    }
    let mut rows: Vec<MigrationRow> = Vec::new();
    for (i, c) in input.case.iter().enumerate() {
        within(&format!("migration.case[{i}].bytes_per_sec"), c.bytes_per_sec, 1.0, 1e16)?;
        within(&format!("migration.case[{i}].bytes"), c.bytes, 0.0, (1u64 << 60) as f64)?;
        let secs = c.bytes / c.bytes_per_sec;
        let saved = rows.first().map_or(0.0, |f| f.secs - secs);
        rows.push(MigrationRow { name: c.name.clone(), bytes: c.bytes, secs, saved_secs: saved });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, normal: f64, events: &[(f64, u64)]) -> TailCase {
        TailCase {
            name: name.into(),
            count: 100,
            normal_secs: normal,
            events: events.iter().map(|&(x, n)| TailEvent { name: "e".into(), extra_secs: x, count: n }).collect(),
        }
    }

    #[test]
    fn the_seeds_tail() {
        // seed 001 §7.6.3: 98 x 0.4 ms, one +2 ms, one +10 ms.
        let input = TailInput {
            quantile: 0.99,
            case: vec![
                case("a", 0.4e-3, &[(2e-3, 1), (10e-3, 1)]),
                case("b", 0.2e-3, &[(2e-3, 1), (10e-3, 1)]),
                case("c", 0.4e-3, &[(2e-3, 1), (10e-3, 2)]),
            ],
        };
        let rows = tail(&input).unwrap();
        let ms = |x: f64| (x * 1e5).round() / 100.0;
        assert_eq!(ms(rows[0].mean_secs), 0.52);
        assert_eq!(rows.iter().map(|r| ms(r.quantile_secs)).collect::<Vec<_>>(), vec![2.4, 2.2, 10.4]);
        assert_eq!(rows[0].quantile_rank, 99);
    }

    #[test]
    fn more_events_than_communications_are_refused() {
        let input = TailInput { quantile: 0.99, case: vec![case("a", 1.0, &[(1.0, 101)])] };
        assert!(tail(&input).unwrap_err().to_string().contains("tail.case[0].events"));
    }
}

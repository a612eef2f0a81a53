//! A sweep's grid: a base request of one command (`plan`, `sim` or `plan-training`) and
//! axes, each a list or a geometric range; axes may be zipped (they advance together,
//! one value of each per point) and points filtered (`where`, see `filter.rs`). Points
//! are numbered in mixed radix over the dimensions (an axis, or a zipped group; the
//! last fastest) and built one at a time from their number, so a grid is never held in
//! memory and its size is known, and checked, before any work.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// The most points one sweep may have.
pub const MAX_POINTS: u64 = 1_000_000;
/// The most values one range may give.
pub const MAX_RANGE_VALUES: usize = 4096;
/// The most axes.
pub const MAX_AXES: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SweptCommand {
    Plan,
    Sim,
    PlanTraining,
}

impl SweptCommand {
    pub fn name(self) -> &'static str {
        match self {
            SweptCommand::Plan => "plan",
            SweptCommand::Sim => "sim",
            SweptCommand::PlanTraining => "plan-training",
        }
    }
}

/// An axis: its values, or a geometric range (`from` to `to`, times `factor`; sizes
/// may be written with units, `"1MiB"`).
#[derive(Debug, Clone, PartialEq)]
pub enum AxisInput {
    Values(Vec<toml::Value>),
    Range(RangeInput),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeInput {
    from: toml::Value,
    to: toml::Value,
    factor: u64,
}

// A list or a table, each read with its own errors (an untagged enum would say only
// "did not match any variant").
impl<'de> Deserialize<'de> for AxisInput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::Array(values) => Ok(AxisInput::Values(values)),
            v @ toml::Value::Table(_) => RangeInput::deserialize(v).map(AxisInput::Range).map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "expected a list of values or a range {{ from, to, factor }}, got {}",
                other.type_str()
            ))),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct GridFile {
    command: SweptCommand,
    /// The command's options every point shares: flags of `plan`/`sim` by name
    /// (`collective = "allreduce"`), or for `plan-training` the scenario's tables.
    #[serde(default)]
    base: toml::Table,
    axes: BTreeMap<String, AxisInput>,
    /// Conditions every point run must meet (one text or a list, all must hold).
    #[serde(default, rename = "where")]
    filters: Filters,
    /// Groups of axes that advance together: one value of each per point (equal lengths).
    #[serde(default)]
    zip: Vec<Vec<String>>,
}

#[derive(Debug, Clone, Default)]
enum Filters {
    #[default]
    None,
    One(String),
    All(Vec<String>),
}

// A text or a list of texts, said so when it is neither (an untagged enum would say only
// "did not match any variant").
impl<'de> Deserialize<'de> for Filters {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let want = "a condition in quotes, or a list of them";
        match toml::Value::deserialize(d)? {
            toml::Value::String(s) => Ok(Filters::One(s)),
            toml::Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s),
                    other => {
                        Err(D::Error::custom(format!("where: expected {want}, got {} in the list", other.type_str())))
                    }
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Filters::All),
            other => Err(D::Error::custom(format!("where: expected {want}, got {}", other.type_str()))),
        }
    }
}

/// The most `where` conditions.
pub const MAX_FILTERS: usize = 64;
/// The most comparisons the filters may evaluate over the whole grid (comparisons in
/// the conditions times points): seconds of work, before any point runs.
pub const MAX_FILTER_WORK: u64 = 20_000_000;

#[derive(Debug, Clone)]
pub struct Grid {
    pub command: SweptCommand,
    pub base: toml::Table,
    /// Axis names and their values, sorted by name.
    pub axes: Vec<(String, Vec<toml::Value>)>,
    /// The dimensions points are numbered over: indices into `axes`, one axis or a
    /// zipped group, ordered by their first axis.
    dims: Vec<Vec<usize>>,
    filters: Vec<super::filter::Expr>,
    /// Axes written into [base]'s strings as `{name}` (a preset's parameters:
    /// `topo = "dgx-h100:nodes={nodes}"`), not passed as options of their own.
    templated: Vec<bool>,
}

fn number(v: &toml::Value, what: &str) -> Result<u64> {
    match v {
        toml::Value::Integer(i) if *i > 0 => Ok(*i as u64),
        toml::Value::String(s) => railyard_units::units::parse_bytes(s)
            .map_err(|e| anyhow::anyhow!("{what}: {e}"))
            .and_then(|b| if b > 0 { Ok(b) } else { bail!("{what}: must be above 0") }),
        other => bail!("{what}: expected a positive whole number or a size such as \"1MiB\", got {other}"),
    }
}

fn range(name: &str, from: &toml::Value, to: &toml::Value, factor: u64) -> Result<Vec<toml::Value>> {
    let (lo, hi) = (number(from, &format!("axes.{name}.from"))?, number(to, &format!("axes.{name}.to"))?);
    if factor < 2 {
        bail!("axes.{name}.factor: {factor}; a range multiplies by a whole factor of at least 2");
    }
    if lo > hi {
        bail!("axes.{name}: from {lo} is above to {hi}");
    }
    let mut out = Vec::new();
    let mut x = lo;
    while x <= hi {
        if out.len() == MAX_RANGE_VALUES {
            bail!("axes.{name}: more than {MAX_RANGE_VALUES} values");
        }
        out.push(toml::Value::Integer(x.min(i64::MAX as u64) as i64));
        match x.checked_mul(factor) {
            Some(next) => x = next,
            None => break,
        }
    }
    Ok(out)
}

/// Whether an option or scenario field names the topology (`topo`, plan-training's
/// `job.topo`): what the grid builds before any work and the report tells fabrics by.
pub fn names_topology(name: &str) -> bool {
    name == "topo" || name.ends_with(".topo")
}

/// The placeholders `{name}` in a text.
fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { break };
        out.push(&rest[open + 1..open + close]);
        rest = &rest[open + close + 1..];
    }
    out
}

/// A table's values by dotted name (`job.topo`), tables descended into.
fn flattened(table: &toml::Table) -> Vec<(String, toml::Value)> {
    fn walk(prefix: &str, table: &toml::Table, out: &mut Vec<(String, toml::Value)>) {
        for (k, v) in table {
            let name = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            match v {
                toml::Value::Table(t) => walk(&name, t, out),
                other => out.push((name, other.clone())),
            }
        }
    }
    let mut out = Vec::new();
    walk("", table, &mut out);
    out
}

/// Which axes [base]'s strings name as `{axis}`; a placeholder naming no axis is an error.
fn templated_axes(base: &toml::Table, axes: &[(String, Vec<toml::Value>)]) -> Result<Vec<bool>> {
    let mut templated = vec![false; axes.len()];
    for (key, value) in flattened(base) {
        let toml::Value::String(text) = value else { continue };
        for name in placeholders(&text) {
            let Some(a) = axes.iter().position(|(n, _)| n == name) else {
                let all: Vec<&str> = axes.iter().map(|(n, _)| n.as_str()).collect();
                bail!("base.{key}: {{{name}}} names no axis (axes: {})", all.join(", "));
            };
            templated[a] = true;
        }
    }
    Ok(templated)
}

/// The dimensions of `axes` (sorted by name) under `zip`: each zipped group one
/// dimension at its first axis's place, every other axis its own.
fn dimensions(axes: &[(String, Vec<toml::Value>)], zip: &[Vec<String>]) -> Result<Vec<Vec<usize>>> {
    let index = |name: &str| axes.iter().position(|(n, _)| n == name);
    let mut group_of: Vec<Option<usize>> = vec![None; axes.len()];
    for (g, names) in zip.iter().enumerate() {
        if names.len() < 2 {
            bail!("zip[{g}]: give two or more axes that advance together");
        }
        for name in names {
            let Some(a) = index(name) else {
                let all: Vec<&str> = axes.iter().map(|(n, _)| n.as_str()).collect();
                bail!("zip[{g}]: {name} is not an axis (axes: {})", all.join(", "))
            };
            if group_of[a].is_some() {
                bail!("zip[{g}]: {name} is zipped twice");
            }
            group_of[a] = Some(g);
            let (first, len) = (&names[0], axes[a].1.len());
            let first_len = index(first).map_or(len, |f| axes[f].1.len());
            if len != first_len {
                bail!(
                    "zip[{g}]: {name} has {len} values and {first} {first_len}; zipped axes need as many values each"
                );
            }
        }
    }
    let mut dims: Vec<Vec<usize>> = Vec::new();
    let mut placed: Vec<Option<usize>> = vec![None; zip.len()];
    for (a, group) in group_of.iter().enumerate() {
        match *group {
            None => dims.push(vec![a]),
            Some(g) => match placed[g] {
                Some(d) => dims[d].push(a),
                None => {
                    placed[g] = Some(dims.len());
                    dims.push(vec![a]);
                }
            },
        }
    }
    Ok(dims)
}

impl Grid {
    pub fn parse(text: &str) -> Result<Grid> {
        let file: GridFile = toml::from_str(text).context("grid file")?;
        if file.axes.is_empty() || file.axes.len() > MAX_AXES {
            bail!("axes: give 1..={MAX_AXES} axes (got {})", file.axes.len());
        }
        let mut axes = Vec::new();
        for (name, axis) in file.axes {
            let values = match axis {
                AxisInput::Values(v) => v,
                AxisInput::Range(r) => range(&name, &r.from, &r.to, r.factor)?,
            };
            if values.is_empty() {
                bail!("axes.{name}: no values");
            }
            if name.is_empty() || name == "format" {
                bail!("axes.{name:?}: not an option a sweep can vary");
            }
            if let Some(v) = values.iter().find(|v| {
                !matches!(
                    v,
                    toml::Value::String(_) | toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_)
                )
            }) {
                bail!("axes.{name}: {} is not a value of an option (strings, numbers, true/false)", v.type_str());
            }
            let flag = |k: &str| k.replace('_', "-");
            if file.base.keys().any(|k| flag(k) == flag(&name)) {
                bail!("axes.{name}: also in [base]; give it in one place");
            }
            axes.push((name, values));
        }
        if file.command != SweptCommand::PlanTraining && file.base.contains_key("format") {
            bail!("base.format: a sweep records each point's JSON; leave format out");
        }
        let dims = dimensions(&axes, &file.zip)?;
        let names: Vec<&str> = axes.iter().map(|(n, _)| n.as_str()).collect();
        let texts = match file.filters {
            Filters::None => vec![],
            Filters::One(t) => vec![t],
            Filters::All(ts) => ts,
        };
        if texts.len() > MAX_FILTERS {
            bail!("where: more than {MAX_FILTERS} conditions");
        }
        let filters = texts
            .iter()
            .enumerate()
            .map(|(i, t)| super::filter::parse(t, &names).with_context(|| format!("where[{i}] {t:?}")))
            .collect::<Result<Vec<_>>>()?;
        let templated = templated_axes(&file.base, &axes)?;
        let grid = Grid { command: file.command, base: file.base, axes, dims, filters, templated };
        grid.points_checked()?;
        Ok(grid)
    }

    /// The numbers of the points that pass the `where` filters (all points without
    /// any), in order; a filter that cannot be evaluated on a point fails the grid.
    pub fn selected(&self) -> Result<Vec<u64>> {
        let comparisons: u64 = self.filters.iter().map(super::filter::comparisons).sum();
        let work = comparisons.saturating_mul(self.points());
        if work > MAX_FILTER_WORK {
            bail!(
                "where: {comparisons} comparisons over {} points is {work} evaluations, more than {MAX_FILTER_WORK}; thin the grid or the conditions (or zip axes)",
                self.points()
            );
        }
        let mut out = Vec::new();
        for p in 0..self.points() {
            if self.passes(&self.point(p)).with_context(|| format!("where, at point {p}"))? {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// Whether point `index` passes the `where` filters.
    pub fn is_selected(&self, index: u64) -> Result<bool> {
        self.passes(&self.point(index))
    }

    fn passes(&self, point: &[(String, toml::Value)]) -> Result<bool> {
        let value = |axis: &str| point.iter().find(|(k, _)| k == axis).map(|(_, v)| super::filter::value_text(v));
        for f in &self.filters {
            if !super::filter::eval(f, &value)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn dim_len(&self, dim: &[usize]) -> u64 {
        self.axes[dim[0]].1.len() as u64
    }

    fn dim_name(&self, dim: &[usize]) -> String {
        dim.iter().map(|&a| self.axes[a].0.as_str()).collect::<Vec<_>>().join("+")
    }

    /// How many points (before filters), refused past `MAX_POINTS` with the numbers.
    pub fn points_checked(&self) -> Result<u64> {
        let mut n: u64 = 1;
        for dim in &self.dims {
            n = n.saturating_mul(self.dim_len(dim));
            if n > MAX_POINTS {
                let sizes: Vec<String> =
                    self.dims.iter().map(|d| format!("{} {}", self.dim_name(d), self.dim_len(d))).collect();
                bail!(
                    "the grid has more than {MAX_POINTS} points (axes: {}; at {} already {n}); split it, thin an axis or zip axes that go together",
                    sizes.join(" x "),
                    self.dim_name(dim)
                );
            }
        }
        Ok(n)
    }

    /// Points in the full product (before filters).
    pub fn points(&self) -> u64 {
        self.dims.iter().map(|d| self.dim_len(d)).product()
    }

    /// Point `index`'s value on each axis, axes by name (the last dimension varies fastest).
    pub fn point(&self, index: u64) -> Vec<(String, toml::Value)> {
        let mut rest = index;
        let mut out = vec![(String::new(), toml::Value::Boolean(false)); self.axes.len()];
        for dim in self.dims.iter().rev() {
            let n = self.dim_len(dim);
            let at = (rest % n) as usize;
            for &a in dim {
                out[a] = (self.axes[a].0.clone(), self.axes[a].1[at].clone());
            }
            rest /= n;
        }
        out
    }

    /// Build, without running it, a request for every value of every axis that a
    /// selected point uses (at the first selected point with that value), and build every
    /// topology those values name: an unknown flag, a value the command cannot parse or
    /// a topology past its limits fails the grid before any work, naming the point.
    /// Values the `where` filters leave out are not checked.
    pub fn check_values(&self, selected: &[u64]) -> Result<()> {
        // For each dimension, the first selected point at each of its values.
        let mut first: Vec<Vec<Option<u64>>> = self.dims.iter().map(|d| vec![None; self.dim_len(d) as usize]).collect();
        for &p in selected {
            let mut rest = p;
            for (d, dim) in self.dims.iter().enumerate().rev() {
                let n = self.dim_len(dim);
                first[d][(rest % n) as usize].get_or_insert(p);
                rest /= n;
            }
        }
        let mut checked = std::collections::BTreeSet::new();
        let mut seen_topologies = std::collections::BTreeSet::new();
        for p in first.into_iter().flatten().flatten() {
            if !checked.insert(p) {
                continue;
            }
            self.check_point(p)?;
            let point = self.point(p);
            let values = self.base_values(&point).into_iter().chain(self.own_values(&point).cloned());
            for (name, value) in values {
                if let (true, toml::Value::String(spec)) = (names_topology(&name), value) {
                    if seen_topologies.insert(spec.clone()) {
                        railyard_topology::load(&spec).with_context(|| format!("point {p}: {name} {spec}"))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// [base]'s values at a point by name (dotted paths into a training scenario's tables).
    fn base_values(&self, point: &[(String, toml::Value)]) -> Vec<(String, toml::Value)> {
        flattened(&self.base_at(point))
    }

    fn check_point(&self, index: u64) -> Result<()> {
        let point = self.point(index);
        match self.command {
            SweptCommand::Plan | SweptCommand::Sim => crate::parse_args(&self.args(&point)?).map(|_| ()),
            SweptCommand::PlanTraining => {
                railyard_planner::Scenario::parse(&self.scenario(&point)?).map(|_| ()).map_err(Into::into)
            }
        }
        .with_context(|| {
            let desc: Vec<String> = point.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("point {index} ({}) cannot be run", desc.join(" "))
        })
    }

    /// [base] with the point's values written into its `{axis}` placeholders.
    fn base_at(&self, point: &[(String, toml::Value)]) -> toml::Table {
        fn fill(table: &mut toml::Table, point: &[(String, toml::Value)]) {
            for (_, v) in table.iter_mut() {
                match v {
                    toml::Value::Table(t) => fill(t, point),
                    toml::Value::String(s) if s.contains('{') => {
                        for (name, value) in point {
                            *s = s.replace(&format!("{{{name}}}"), &super::filter::value_text(value));
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut base = self.base.clone();
        fill(&mut base, point);
        base
    }

    /// The point's values that are options (or scenario fields) of their own, not
    /// written into [base].
    fn own_values<'a>(&self, point: &'a [(String, toml::Value)]) -> impl Iterator<Item = &'a (String, toml::Value)> {
        let templated = self.templated.clone();
        point.iter().enumerate().filter(move |(i, _)| !templated.get(*i).copied().unwrap_or(false)).map(|(_, p)| p)
    }

    /// The command line of a `plan` or `sim` point (without the program name).
    pub fn args(&self, point: &[(String, toml::Value)]) -> Result<Vec<String>> {
        let mut args = vec![self.command.name().to_string()];
        let base = self.base_at(point);
        for (name, value) in base.iter().chain(self.own_values(point).map(|(k, v)| (k, v))) {
            let flag = format!("--{}", name.replace('_', "-"));
            match value {
                toml::Value::Boolean(true) => args.push(flag),
                toml::Value::Boolean(false) => {}
                toml::Value::String(s) => args.push(format!("{flag}={s}")),
                toml::Value::Integer(i) => args.push(format!("{flag}={i}")),
                toml::Value::Float(f) => args.push(format!("{flag}={f}")),
                other => bail!("{name}: {other} is not a command-line value"),
            }
        }
        args.extend(["--format".to_string(), "json".to_string()]);
        Ok(args)
    }

    /// The scenario of a `plan-training` point: [base] with each axis (a dotted path,
    /// `job.global_batch`) set.
    pub fn scenario(&self, point: &[(String, toml::Value)]) -> Result<String> {
        let mut table = self.base_at(point);
        for (path, value) in self.own_values(point) {
            let mut parts: Vec<&str> = path.split('.').collect();
            let last = parts.pop().unwrap_or_default();
            let mut at = &mut table;
            for p in parts {
                at = at
                    .entry(p.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                    .as_table_mut()
                    .with_context(|| format!("axes.{path}: {p} is not a table in [base]"))?;
            }
            at.insert(last.to_string(), value.clone());
        }
        Ok(toml::to_string(&table)?)
    }

    /// The point's inputs as JSON (axis -> value), as records keep them.
    pub fn inputs_json(point: &[(String, toml::Value)]) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for (k, v) in point {
            map.insert(k.clone(), serde_json::to_value(v).unwrap_or(serde_json::Value::Null));
        }
        serde_json::Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_fill_placeholders_in_base() {
        let g = Grid::parse(
            "command = \"plan\"\n[base]\ntopo = \"dgx-h100:nodes={nodes},over={over}\"\n[axes]\nnodes = [2, 4]\nover = [\"1:1\", \"2:1\"]\nsize = [\"1MiB\"]\n",
        )
        .unwrap();
        let args = g.args(&g.point(3)).unwrap();
        assert_eq!(args, ["plan", "--topo=dgx-h100:nodes=4,over=2:1", "--size=1MiB", "--format", "json"]);
        let e = Grid::parse("command = \"plan\"\n[base]\ntopo = \"rail:servers={n}\"\n[axes]\nsize = [1]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("base.topo: {n} names no axis (axes: size)"), "{e}");
    }

    #[test]
    fn a_where_that_is_not_text_is_said() {
        let e = Grid::parse("command = \"plan\"\nwhere = 5\n[axes]\nsize = [1]\n").unwrap_err();
        assert!(
            format!("{e:#}").contains("where: expected a condition in quotes, or a list of them, got integer"),
            "{e:#}"
        );
        let e = Grid::parse("command = \"plan\"\nwhere = [\"size > 1\", 2]\n[axes]\nsize = [1]\n").unwrap_err();
        assert!(format!("{e:#}").contains("got integer in the list"), "{e:#}");
    }

    #[test]
    fn zipped_axes_advance_together_and_filters_skip_points() {
        let g = Grid::parse(
            "command = \"plan\"\nwhere = \"size <= 4KiB or topo contains 'b'\"\nzip = [[\"topo\", \"channels\"]]\n[axes]\n\
             topo = [\"a\", \"b\", \"c\"]\nchannels = [1, 2, 3]\nsize = { from = \"1KiB\", to = \"16KiB\", factor = 4 }\n",
        )
        .unwrap();
        // channels+topo (3) x size (3): the zipped pair is one dimension at "channels".
        assert_eq!(g.points(), 9);
        let p = g.point(4);
        assert_eq!(p[0], ("channels".into(), toml::Value::Integer(2)));
        assert_eq!(p[2], ("topo".into(), toml::Value::String("b".into())));
        assert_eq!(p[1], ("size".into(), toml::Value::Integer(4096)));
        // Sizes 1 KiB and 4 KiB everywhere, 16 KiB only on b.
        assert_eq!(g.selected().unwrap(), vec![0, 1, 3, 4, 5, 6, 7]);
        let bad = |zip: &str| {
            Grid::parse(&format!("command = \"plan\"\nzip = {zip}\n[axes]\na = [1, 2]\nb = [1]\nc = [1, 2]\n"))
                .unwrap_err()
                .to_string()
        };
        assert!(bad("[[\"a\", \"b\"]]").contains("b has 1 values and a 2"));
        assert!(bad("[[\"a\", \"x\"]]").contains("x is not an axis"));
        assert!(bad("[[\"a\"]]").contains("two or more"));
        assert!(bad("[[\"a\", \"c\"], [\"c\", \"a\"]]").contains("zipped twice"));
    }

    #[test]
    fn points_count_in_mixed_radix_and_ranges_multiply() {
        let g = Grid::parse(
            "command = \"plan\"\n[base]\ncollective = \"allreduce\"\n[axes]\ntopo = [\"a\", \"b\"]\nsize = { from = \"1KiB\", to = \"1MiB\", factor = 4 }\n",
        )
        .unwrap();
        assert_eq!(g.points(), 12);
        let p = g.point(7);
        assert_eq!(p[0].1, toml::Value::Integer(65536));
        assert_eq!(p[1].1, toml::Value::String("b".into()));
        let args = g.args(&p).unwrap();
        assert_eq!(args, ["plan", "--collective=allreduce", "--size=65536", "--topo=b", "--format", "json"]);
    }

    #[test]
    fn a_billion_points_are_refused_before_any_work() {
        let axes: String = (0..9).map(|i| format!("a{i} = {{ from = 1, to = 512, factor = 2 }}\n")).collect();
        let e = Grid::parse(&format!("command = \"plan\"\n[axes]\n{axes}")).unwrap_err().to_string();
        assert!(e.contains("more than 1000000 points") && e.contains("a0 10"), "{e}");
    }

    #[test]
    fn training_axes_set_dotted_fields() {
        let g = Grid::parse(
            "command = \"plan-training\"\n[base.job]\nmodel = \"llama3-8b\"\n[axes]\n\"job.global_batch\" = [8, 16]\n",
        )
        .unwrap();
        let s = g.scenario(&g.point(1)).unwrap();
        assert!(s.contains("global_batch = 16") && s.contains("model = \"llama3-8b\""), "{s}");
    }
}

//! A sweep's records as one table for analysis tools (pandas, Polars, DuckDB,
//! spreadsheets): a row per point in point order, a column per input, the headline
//! metric, wall time and error, then every scalar of the command's output by its path
//! (`output.algorithms.0.expected_secs`; arrays by position). CSV or Parquet.
//!
//! Built in two passes over the results file so memory holds one record and, for
//! Parquet, one row group: the first pass finds the columns and their types and where
//! each point's line is, the second reads the lines in point order and writes rows
//! (Parquet: a row group per `CELLS_PER_GROUP` cells, about 100 MB).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use parquet::basic::{LogicalType, Repetition, Type as PhysicalType};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use serde_json::Value;

use super::store::{self, Record};

/// The most columns a table gets (a point's output flattened; `plan --algo all` gives
/// about 1,200 per point); past it, refused.
pub const MAX_COLUMNS: usize = 32_768;
/// Cells held before a Parquet row group is written (a row group is as many rows as fit).
const CELLS_PER_GROUP: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Float,
    Bool,
    Text,
}

fn kind_of(v: &Value) -> Option<Kind> {
    match v {
        Value::Null => None,
        Value::Bool(_) => Some(Kind::Bool),
        Value::Number(n) if n.is_i64() => Some(Kind::Int),
        Value::Number(_) => Some(Kind::Float),
        _ => Some(Kind::Text),
    }
}

fn widen(a: Option<Kind>, b: Option<Kind>) -> Option<Kind> {
    match (a, b) {
        (None, k) | (k, None) => k,
        (Some(x), Some(y)) if x == y => Some(x),
        (Some(Kind::Int), Some(Kind::Float)) | (Some(Kind::Float), Some(Kind::Int)) => Some(Kind::Float),
        _ => Some(Kind::Text),
    }
}

/// A record's row: column name -> scalar.
fn row(r: &Record, metric: &dyn Fn(&Record) -> Option<f64>) -> Vec<(String, Value)> {
    let mut out = vec![("point".to_string(), Value::from(r.point))];
    for (k, v) in r.inputs.as_object().into_iter().flatten() {
        out.push((k.clone(), v.clone()));
    }
    out.push(("metric".into(), metric(r).map_or(Value::Null, Value::from)));
    out.push(("wall_secs".into(), Value::from(r.wall_secs)));
    out.push(("error".into(), r.error.clone().map_or(Value::Null, Value::from)));
    if !r.output.is_null() {
        flatten("output", &r.output, &mut out);
    }
    out
}

fn flatten(path: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, x)| flatten(&format!("{path}.{k}"), x, out)),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| flatten(&format!("{path}.{i}"), x, out)),
        scalar => out.push((path.to_string(), scalar.clone())),
    }
}

/// The first pass: columns in order of first appearance, their kinds, and each point's
/// line (byte offset) in the file.
struct Layout {
    names: Vec<String>,
    kinds: Vec<Option<Kind>>,
    lines: BTreeMap<u64, u64>,
}

fn layout(path: &Path, metric: &dyn Fn(&Record) -> Option<f64>) -> Result<Layout> {
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut l = Layout { names: vec![], kinds: vec![], lines: BTreeMap::new() };
    store::each(path, |offset, r| {
        if l.lines.contains_key(&r.point) {
            return Ok(()); // recorded twice (the same, as `each` checked): once in the table
        }
        l.lines.insert(r.point, offset);
        for (name, v) in row(&r, metric) {
            let i = match at.get(&name) {
                Some(&i) => i,
                None => {
                    if l.names.len() == MAX_COLUMNS {
                        bail!("point {}: more than {MAX_COLUMNS} columns in the table", r.point);
                    }
                    at.insert(name.clone(), l.names.len());
                    l.names.push(name);
                    l.kinds.push(None);
                    l.names.len() - 1
                }
            };
            l.kinds[i] = widen(l.kinds[i], kind_of(&v));
        }
        Ok(())
    })?;
    if l.lines.is_empty() {
        bail!("{}: no records", path.display());
    }
    Ok(l)
}

/// Every point's row, in point order, with each cell in its column.
fn rows(
    path: &Path,
    l: &Layout,
    metric: &dyn Fn(&Record) -> Option<f64>,
    mut each: impl FnMut(Vec<Value>) -> Result<()>,
) -> Result<()> {
    let at: HashMap<&str, usize> = l.names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
    let mut file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    for (&point, &offset) in &l.lines {
        file.seek(SeekFrom::Start(offset))?;
        let r = store::read_line(&mut file).with_context(|| format!("{}: point {point}", path.display()))?;
        let mut cells = vec![Value::Null; l.names.len()];
        for (name, v) in row(&r, metric) {
            if let Some(&i) = at.get(name.as_str()) {
                cells[i] = v;
            }
        }
        each(cells)?;
    }
    Ok(())
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The records of `results` as CSV, written to `out`.
pub fn write_csv(results: &Path, out: &Path, metric: &dyn Fn(&Record) -> Option<f64>) -> Result<usize> {
    let l = layout(results, metric)?;
    let mut w = BufWriter::new(File::create(out).with_context(|| format!("cannot write {}", out.display()))?);
    let quote = |s: &str| {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    writeln!(w, "{}", l.names.iter().map(|n| quote(n)).collect::<Vec<_>>().join(","))?;
    rows(results, &l, metric, |cells| {
        writeln!(w, "{}", cells.iter().map(|c| quote(&text(c))).collect::<Vec<_>>().join(","))?;
        Ok(())
    })?;
    w.flush()?;
    Ok(l.lines.len())
}

/// The records of `results` as Parquet, written to `out`: integers INT64, other numbers
/// DOUBLE, true/false BOOLEAN, the rest UTF-8 strings; every column optional but `point`.
pub fn write_parquet(results: &Path, out: &Path, metric: &dyn Fn(&Record) -> Option<f64>) -> Result<usize> {
    let l = layout(results, metric)?;
    let mut fields = Vec::new();
    for (i, name) in l.names.iter().enumerate() {
        let kind = l.kinds[i].unwrap_or(Kind::Text);
        let physical = match kind {
            Kind::Int => PhysicalType::INT64,
            Kind::Float => PhysicalType::DOUBLE,
            Kind::Bool => PhysicalType::BOOLEAN,
            Kind::Text => PhysicalType::BYTE_ARRAY,
        };
        let mut b = Type::primitive_type_builder(name, physical).with_repetition(if i == 0 {
            Repetition::REQUIRED
        } else {
            Repetition::OPTIONAL
        });
        if kind == Kind::Text {
            b = b.with_logical_type(Some(LogicalType::String));
        }
        fields.push(Arc::new(b.build()?));
    }
    let schema = Arc::new(Type::group_type_builder("sweep").with_fields(fields).build()?);
    let file = File::create(out).with_context(|| format!("cannot write {}", out.display()))?;
    let mut writer = SerializedFileWriter::new(file, schema, Arc::new(WriterProperties::builder().build()))?;
    let kinds: Vec<Kind> = l.kinds.iter().map(|k| k.unwrap_or(Kind::Text)).collect();
    let mut held: Vec<Vec<Value>> = Vec::new();
    let mut flush = |held: &mut Vec<Vec<Value>>| -> Result<()> {
        if held.is_empty() {
            return Ok(());
        }
        let mut group = writer.next_row_group()?;
        let mut column = 0;
        while let Some(mut col) = group.next_column()? {
            let cells = held.iter().map(|r| &r[column]);
            let levels: Vec<i16> = cells.clone().map(|c| i16::from(!c.is_null())).collect();
            let def = (column > 0).then_some(levels.as_slice());
            match (col.untyped(), kinds[column]) {
                (ColumnWriter::Int64ColumnWriter(w), Kind::Int) => {
                    let v: Vec<i64> = cells.filter_map(Value::as_i64).collect();
                    w.write_batch(&v, def, None)?;
                }
                (ColumnWriter::DoubleColumnWriter(w), Kind::Float) => {
                    let v: Vec<f64> = cells.filter_map(Value::as_f64).collect();
                    w.write_batch(&v, def, None)?;
                }
                (ColumnWriter::BoolColumnWriter(w), Kind::Bool) => {
                    let v: Vec<bool> = cells.filter_map(Value::as_bool).collect();
                    w.write_batch(&v, def, None)?;
                }
                (ColumnWriter::ByteArrayColumnWriter(w), Kind::Text) => {
                    let v: Vec<ByteArray> =
                        cells.filter(|c| !c.is_null()).map(|c| ByteArray::from(text(c).into_bytes())).collect();
                    w.write_batch(&v, def, None)?;
                }
                _ => bail!("column {}: its writer does not match its type (a bug)", l.names[column]),
            }
            col.close()?;
            column += 1;
        }
        group.close()?;
        held.clear();
        Ok(())
    };
    rows(results, &l, metric, |cells| {
        held.push(cells);
        if held.len() * l.names.len() >= CELLS_PER_GROUP {
            flush(&mut held)?;
        }
        Ok(())
    })?;
    flush(&mut held)?;
    writer.close()?;
    Ok(l.lines.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    fn record(point: u64, output: Value, error: Option<&str>) -> Record {
        Record {
            point,
            grid: "g".into(),
            inputs: serde_json::json!({ "size": 1024 * (point + 1), "topo": format!("t{point}") }),
            output,
            error: error.map(String::from),
            wall_secs: 0.5,
        }
    }

    #[test]
    fn every_output_scalar_is_a_typed_column_and_parquet_reads_back() {
        let d = std::env::temp_dir().join(format!("railyard-table-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let results = d.join("r.jsonl");
        let _ = std::fs::remove_file(&results);
        let mut w = store::Writer::append(&results).unwrap();
        // Out of point order (as a Ray sweep finishes them), one failed, one with a field
        // the others lack, and a column that is an integer in one row and a float in another.
        w.write(&record(2, serde_json::json!({ "a": { "x": 2.5, "ok": true }, "list": [1, 2] }), None)).unwrap();
        w.write(&record(0, serde_json::json!({ "a": { "x": 1, "ok": false }, "extra": "s,\"q\"" }), None)).unwrap();
        w.write(&record(1, Value::Null, Some("no algorithm can run"))).unwrap();
        let metric = |r: &Record| r.output.get("a").and_then(|a| a.get("x")).and_then(Value::as_f64);
        let csv = d.join("r.csv");
        assert_eq!(write_csv(&results, &csv, &metric).unwrap(), 3);
        let text = std::fs::read_to_string(&csv).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "point,size,topo,metric,wall_secs,error,output.a.ok,output.a.x,output.list.0,output.list.1,output.extra"
        );
        assert_eq!(lines[1], "0,1024,t0,1.0,0.5,,false,1,,,\"s,\"\"q\"\"\"");
        assert_eq!(lines[2], "1,2048,t1,,0.5,no algorithm can run,,,,,");
        assert_eq!(lines[3], "2,3072,t2,2.5,0.5,,true,2.5,1,2,");

        let pq = d.join("r.parquet");
        assert_eq!(write_parquet(&results, &pq, &metric).unwrap(), 3);
        let reader = SerializedFileReader::new(File::open(&pq).unwrap()).unwrap();
        let rows: Vec<_> = reader.get_row_iter(None).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(rows.len(), 3);
        let cols: Vec<(String, Field)> = rows[0].get_column_iter().map(|(n, f)| (n.clone(), f.clone())).collect();
        assert_eq!(cols[0], ("point".into(), Field::Long(0)));
        assert_eq!(cols[2], ("topo".into(), Field::Str("t0".into())));
        assert_eq!(cols[6], ("output.a.ok".into(), Field::Bool(false)));
        // 1 in one row and 2.5 in another: a DOUBLE column.
        assert_eq!(cols[7], ("output.a.x".into(), Field::Double(1.0)));
        assert_eq!(cols[8], ("output.list.0".into(), Field::Null));
        let failed: Vec<(String, Field)> = rows[1].get_column_iter().map(|(n, f)| (n.clone(), f.clone())).collect();
        assert_eq!(failed[5], ("error".into(), Field::Str("no algorithm can run".into())));
        std::fs::remove_dir_all(&d).ok();
    }
}

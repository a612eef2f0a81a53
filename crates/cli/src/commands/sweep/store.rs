//! A sweep's results: one JSON record per point, appended to a JSONL file as each point
//! finishes and flushed, so a killed sweep loses no finished point. Resuming reads the
//! points already recorded (a torn last line, from a kill mid-write, is cut off) and
//! skips them; shards' files merge into one, each point once.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The longest record line written or read back.
pub const MAX_RECORD_BYTES: usize = 1 << 20;
/// Arrays longer than this in a command's output are left out of its record (a plan's
/// per-round list at 1,024 GPUs is megabytes per point); their length is kept.
pub const MAX_KEPT_ARRAY: usize = 64;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub point: u64,
    /// A hash of the grid file the point came from: resuming with another grid is refused.
    pub grid: String,
    pub inputs: serde_json::Value,
    /// The command's JSON output (null when it failed).
    pub output: serde_json::Value,
    /// The command's error, when it failed.
    pub error: Option<String>,
    pub wall_secs: f64,
}

/// A command's output as a record keeps it: every field, but arrays of more than
/// `MAX_KEPT_ARRAY` items, and maps of more keys (per-link and per-round detail that
/// grows with the ranks), replaced by their size (`"rounds": {"items": 1022}`).
pub fn summarize(v: &mut serde_json::Value) {
    let big = |x: &serde_json::Value| match x {
        serde_json::Value::Array(a) => a.len() > MAX_KEPT_ARRAY,
        serde_json::Value::Object(m) => m.len() > MAX_KEPT_ARRAY,
        _ => false,
    };
    match v {
        serde_json::Value::Object(m) => {
            for x in m.values_mut() {
                if big(x) {
                    let n = x.as_array().map_or_else(|| x.as_object().map_or(0, |m| m.len()), Vec::len);
                    *x = serde_json::json!({ "items": n });
                } else {
                    summarize(x);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(summarize),
        _ => {}
    }
}

/// FNV-1a of `text`, as hex: a grid's identity in its records (stable across builds).
pub fn grid_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The records of `path`, by point. With `cut_torn`, a torn last line (a kill
/// mid-write) is cut off the file so appending goes on cleanly; otherwise it is
/// ignored and the file left alone. A point recorded twice differently is an error.
pub fn read(path: &Path, cut_torn: bool) -> Result<BTreeMap<u64, Record>> {
    let mut out = BTreeMap::new();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut reader = BufReader::new(file);
    let mut good_bytes: u64 = 0;
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        let n = Read::by_ref(&mut reader).take(MAX_RECORD_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        number += 1;
        if line.last() != Some(&b'\n') {
            if n > MAX_RECORD_BYTES {
                bail!("{} line {number}: longer than {MAX_RECORD_BYTES} bytes", path.display());
            }
            // A line cut short by a kill: dropped (and cut off when resuming).
            if cut_torn {
                OpenOptions::new().write(true).open(path)?.set_len(good_bytes)?;
            }
            break;
        }
        let record: Record = serde_json::from_slice(&line)
            .with_context(|| format!("{} line {number}: not a sweep record", path.display()))?;
        if let Some(old) = out.get(&record.point) {
            if !same(old, &record) {
                bail!("{} line {number}: point {} is recorded twice, differently", path.display(), record.point);
            }
        }
        out.insert(record.point, record);
        good_bytes += n as u64;
    }
    Ok(out)
}

/// Appends records, one line each, flushed as written.
pub struct Writer {
    file: File,
}

impl Writer {
    pub fn append(path: &Path) -> Result<Writer> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(Writer { file })
    }

    pub fn write(&mut self, record: &Record) -> Result<()> {
        let mut line = serde_json::to_vec(record)?;
        if line.len() >= MAX_RECORD_BYTES {
            let mut small = record.clone();
            small.output = serde_json::Value::Null;
            small.error = Some(format!("its record ({} bytes) is larger than {MAX_RECORD_BYTES} bytes", line.len()));
            line = serde_json::to_vec(&small)?;
        }
        line.push(b'\n');
        // One write per record: a kill leaves whole lines and at most one torn one.
        self.file.write_all(&line)?;
        self.file.flush()?;
        Ok(())
    }
}

/// The records of several files (shards), each point once; two different records of
/// one point (other than their wall time) are an error.
pub fn merge(paths: &[&Path]) -> Result<BTreeMap<u64, Record>> {
    let mut all: BTreeMap<u64, Record> = BTreeMap::new();
    for path in paths {
        for (point, r) in read(path, false)? {
            if let Some(old) = all.get(&point) {
                if !same(old, &r) {
                    bail!("point {point} is recorded twice with different results ({})", path.display());
                }
                continue;
            }
            all.insert(point, r);
        }
    }
    Ok(all)
}

/// Two records of one point say the same (their wall times aside).
fn same(a: &Record, b: &Record) -> bool {
    a.grid == b.grid && a.inputs == b.inputs && a.output == b.output && a.error == b.error
}

/// Records as CSV: point, each input, the record's headline metric, wall time, error.
pub fn csv(records: &BTreeMap<u64, Record>, metric: impl Fn(&Record) -> Option<f64>) -> String {
    let mut names: Vec<String> = Vec::new();
    for r in records.values() {
        if let Some(m) = r.inputs.as_object() {
            for k in m.keys() {
                if !names.contains(k) {
                    names.push(k.clone());
                }
            }
        }
    }
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut out =
        format!("point,{},metric,wall_secs,error\n", names.iter().map(|n| quote(n)).collect::<Vec<_>>().join(","));
    for r in records.values() {
        let inputs: Vec<String> = names
            .iter()
            .map(|n| match r.inputs.get(n) {
                Some(serde_json::Value::String(s)) => quote(s),
                Some(v) => quote(&v.to_string()),
                None => String::new(),
            })
            .collect();
        out += &format!(
            "{},{},{},{},{}\n",
            r.point,
            inputs.join(","),
            metric(r).map_or(String::new(), |m| m.to_string()),
            r.wall_secs,
            quote(r.error.as_deref().unwrap_or(""))
        );
    }
    out
}

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

/// The longest record line read back (a point's whole JSON output).
pub const MAX_RECORD_BYTES: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub point: u64,
    pub inputs: serde_json::Value,
    /// The command's JSON output (null when it failed).
    pub output: serde_json::Value,
    /// The command's error, when it failed.
    pub error: Option<String>,
    pub wall_secs: f64,
}

/// The records of `path`, by point; a torn last line is cut off the file.
pub fn read(path: &Path) -> Result<BTreeMap<u64, Record>> {
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
            // A line cut short by a kill: dropped, and cut off so appending goes on cleanly.
            OpenOptions::new().write(true).open(path)?.set_len(good_bytes)?;
            break;
        }
        let record: Record = serde_json::from_slice(&line)
            .with_context(|| format!("{} line {number}: not a sweep record", path.display()))?;
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
        for (point, r) in read(path)? {
            if let Some(old) = all.get(&point) {
                if old.inputs != r.inputs || old.output != r.output || old.error != r.error {
                    bail!("point {point} is recorded twice with different results ({})", path.display());
                }
                continue;
            }
            all.insert(point, r);
        }
    }
    Ok(all)
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

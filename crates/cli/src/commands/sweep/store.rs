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
    let mut out: BTreeMap<u64, Record> = BTreeMap::new();
    let whole = each(path, |_, record| {
        if let Some(old) = out.get(&record.point) {
            if !same(old, &record) {
                bail!("{}: point {} is recorded twice, differently", path.display(), record.point);
            }
        }
        out.insert(record.point, record);
        Ok(())
    })?;
    if let (true, Some(whole)) = (cut_torn, whole) {
        let file = OpenOptions::new().write(true).open(path)?;
        if file.metadata()?.len() > whole {
            file.set_len(whole)?;
        }
    }
    Ok(out)
}

/// Each whole record of `path` with the byte offset of its line, in file order; the
/// bytes the whole lines take (a torn last line after them is skipped), or None when
/// there is no file.
pub fn each(path: &Path, mut f: impl FnMut(u64, Record) -> Result<()>) -> Result<Option<u64>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut reader = BufReader::new(file);
    let mut good_bytes: u64 = 0;
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        number += 1;
        let n = match next_line(&mut reader, &mut line)? {
            Line::Whole(n) => n,
            // A line cut short by a kill: not a record.
            Line::End | Line::Torn => break,
            Line::TooLong => bail!("{} line {number}: longer than {MAX_RECORD_BYTES} bytes", path.display()),
        };
        let record: Record = serde_json::from_slice(&line)
            .with_context(|| format!("{} line {number}: not a sweep record", path.display()))?;
        f(good_bytes, record)?;
        good_bytes += n as u64;
    }
    Ok(Some(good_bytes))
}

/// What `next_line` read.
pub enum Line {
    /// Nothing: the input ended.
    End,
    /// A line and its newline, this many bytes.
    Whole(usize),
    /// The input ended inside a line (a write cut short).
    Torn,
    /// A line longer than `MAX_RECORD_BYTES`.
    TooLong,
}

/// The next line of `reader` into `line` (cleared first), reading no more than
/// `MAX_RECORD_BYTES` and its newline: the one bounded reader of records, from a
/// results file or from the Ray driver.
pub fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Line> {
    line.clear();
    let n = Read::by_ref(reader).take(MAX_RECORD_BYTES as u64 + 1).read_until(b'\n', line)?;
    Ok(match (n, line.last() == Some(&b'\n')) {
        (0, _) => Line::End,
        (n, true) => Line::Whole(n),
        (n, false) if n > MAX_RECORD_BYTES => Line::TooLong,
        _ => Line::Torn,
    })
}

/// The record on the line `file` is at.
pub fn read_line(file: &mut File) -> Result<Record> {
    let mut line = Vec::new();
    match next_line(&mut BufReader::new(file), &mut line)? {
        Line::Whole(_) => Ok(serde_json::from_slice(&line)?),
        _ => bail!("a record line cut short, or longer than {MAX_RECORD_BYTES} bytes"),
    }
}

/// Appends records, one line each, flushed as written. The file is opened at the first
/// record, so a sweep that fails before any point finishes leaves no empty file behind.
pub struct Writer {
    path: std::path::PathBuf,
    file: Option<File>,
}

impl Writer {
    pub fn append(path: &Path) -> Result<Writer> {
        Ok(Writer { path: path.to_path_buf(), file: None })
    }

    pub fn write(&mut self, record: &Record) -> Result<()> {
        let mut line = line(record)?;
        line.push(b'\n');
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)
                    .with_context(|| format!("cannot write {}", self.path.display()))?,
            ),
        };
        // One write per record: a kill leaves whole lines and at most one torn one.
        file.write_all(&line)?;
        file.flush()?;
        Ok(())
    }
}

/// A record as one JSON line (without its newline); one too long keeps its inputs and
/// says so in its error.
pub fn line(record: &Record) -> Result<Vec<u8>> {
    let line = serde_json::to_vec(record)?;
    if line.len() < MAX_RECORD_BYTES {
        return Ok(line);
    }
    let mut small = record.clone();
    small.output = serde_json::Value::Null;
    small.error = Some(format!("its record ({} bytes) is larger than {MAX_RECORD_BYTES} bytes", line.len()));
    Ok(serde_json::to_vec(&small)?)
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

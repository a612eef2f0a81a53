//! PyTorch's Flight Recorder dumps: the per-rank record of the last collectives each
//! process group issued, which torch writes for NCCL (and gloo) jobs when a collective
//! times out or on request (`TORCH_FR_BUFFER_SIZE`, `TORCH_FR_DUMP_TEMP_FILE` + rank;
//! pickle, or JSON from `_dump_fr_trace_json`). Read into typed entries here; the
//! analysis (who is behind, the first call ranks disagree on) is triage's.
//!
//! The format is torch's `FlightRecorder::dump` (torch/csrc/distributed/c10d/
//! FlightRecorder.cpp, read by torch/distributed/flight_recorder/components): a dict of
//! `version`, `pg_config` (group name → name, desc, ranks) and `entries`, each with
//! `process_group` (name, desc), `collective_seq_id`, `p2p_seq_id`, `profiling_name`
//! ("nccl:all_reduce", "gloo:send 0->1"), `input_sizes`, `input_dtypes`, `state`
//! ("scheduled", "started", "completed") and times. Fields a version lacks are left at
//! their defaults; an entry without a name or a group is refused with its index.

use serde_json::Value;

use crate::error::NcclError;

/// Largest dump read (torch's default buffer holds 2,000 entries: a few hundred KiB).
pub const MAX_DUMP_BYTES: usize = 64 << 20;
/// Entries and groups read from one dump at most.
pub const MAX_ENTRIES: usize = 1 << 20;
/// Ranks a group may list.
pub const MAX_GROUP_RANKS: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct FrDump {
    /// The global rank that wrote it (the dump's `rank`, else the file name's number).
    pub rank: usize,
    pub version: String,
    pub groups: Vec<FrGroup>,
    /// Oldest first.
    pub entries: Vec<FrEntry>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FrGroup {
    pub name: String,
    pub desc: String,
    /// Global ranks, in group-rank order.
    pub ranks: Vec<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrState {
    Scheduled,
    Started,
    Completed,
}

impl FrState {
    pub fn as_str(self) -> &'static str {
        match self {
            FrState::Scheduled => "scheduled",
            FrState::Started => "started",
            FrState::Completed => "completed",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FrEntry {
    pub record_id: u64,
    /// The process group's name (the key of `pg_config`) and description.
    pub group: String,
    pub group_desc: String,
    pub collective_seq_id: u64,
    pub p2p_seq_id: u64,
    /// The library that ran it ("nccl", "gloo") and the operation ("all_reduce", "send").
    pub library: String,
    pub op: String,
    /// A send's or receive's (source, destination) group ranks; None for collectives or
    /// a receive from any source.
    pub p2p: Option<(Option<usize>, usize)>,
    /// The entry's own `is_p2p` (a batch of sends and receives ends in a "coalesced"
    /// entry that has it).
    pub p2p_flag: bool,
    pub input_sizes: Vec<Vec<u64>>,
    pub input_dtypes: Vec<String>,
    pub output_sizes: Vec<Vec<u64>>,
    pub state: FrState,
    pub time_created_ns: u64,
    pub timeout_ms: Option<u64>,
}

impl FrEntry {
    pub fn is_p2p(&self) -> bool {
        self.p2p_flag || self.p2p.is_some() || matches!(self.op.as_str(), "send" | "recv")
    }

    /// A collective of its group's sequence: not a send or receive, and not torch's
    /// "coalesced" marker that ends a batch under one sequence number.
    pub fn is_collective(&self) -> bool {
        !self.is_p2p() && self.op != "coalesced"
    }

    /// Elements of the input tensors together (saturating: the shapes come from a file).
    pub fn input_elements(&self) -> u64 {
        elements(&self.input_sizes)
    }
}

/// Elements of tensors of these shapes together, saturating at u64::MAX.
pub fn elements(shapes: &[Vec<u64>]) -> u64 {
    shapes.iter().fold(0u64, |sum, shape| sum.saturating_add(shape.iter().fold(1u64, |p, &d| p.saturating_mul(d))))
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> NcclError {
    NcclError::BadInput { field: field.into(), message: message.into() }
}

/// Whether `bytes` look like a Flight Recorder dump (a pickle, or JSON with `entries`).
pub fn looks_like_dump(bytes: &[u8]) -> bool {
    match bytes.first() {
        Some(0x80) => true, // a pickle's PROTO opcode
        Some(b'{') => {
            let head = &bytes[..bytes.len().min(1 << 16)];
            let text = String::from_utf8_lossy(head);
            text.contains("\"entries\"") || text.contains("\"pg_config\"")
        }
        _ => false,
    }
}

/// Read one dump; `file_rank` is the rank a file's name gives (torch names them
/// `<prefix><rank>`), used when the dump does not say.
pub fn parse(bytes: &[u8], file_rank: Option<usize>) -> Result<FrDump, NcclError> {
    if bytes.len() > MAX_DUMP_BYTES {
        return Err(bad("dump", format!("{} bytes, more than a dump can be ({MAX_DUMP_BYTES})", bytes.len())));
    }
    let value = match bytes.first() {
        Some(0x80) => {
            // What the pickle would build is bounded first (serde-pickle builds it whole,
            // recursively, and copies every memo reference).
            check_pickle(bytes)?;
            // Torch's pickler writes plain dicts, lists, tuples, strings and numbers; a
            // global it may add (a typed-list builder) is read as None, never called.
            let options = serde_pickle::DeOptions::new().replace_unresolved_globals().replace_recursive_structures();
            let v = serde_pickle::value_from_slice(bytes, options)
                .map_err(|e| bad("dump", format!("not a readable pickle: {e}")))?;
            pickle_to_json(v, 0)?
        }
        _ => serde_json::from_slice(bytes).map_err(|e| bad("dump", format!("neither a pickle nor JSON: {e}")))?,
    };
    from_value(&value, file_rank)
}

/// Nesting a dump has at most (entries hold lists of shapes of lists).
const MAX_DEPTH: usize = 64;
/// What a pickle may build, counted as it would be built (every value once, a string as
/// one value per 8 bytes, each memo read a copy): a dump of 2,000 entries weighs about
/// 100,000.
const MAX_PICKLE_WEIGHT: u64 = 8 << 20;
/// Longest string (a group's rank list as text is the longest a dump holds) and number.
const MAX_PICKLE_STRING_BYTES: u64 = 1 << 20;
const MAX_PICKLE_NUMBER_BYTES: u64 = 64;
/// Memo entries at most.
const MAX_PICKLE_MEMO: usize = 1 << 20;

/// One item on the simulated pickle stack.
#[derive(Clone, Copy)]
enum Item {
    Mark,
    /// A string or number: what a memo read may copy.
    Scalar {
        weight: u64,
    },
    /// A list, dict, tuple or set, and how deep it nests.
    Container {
        depth: usize,
    },
}

/// Check `bytes` against what torch's pickler writes before serde-pickle builds it (which
/// it does recursively, copying every memo reference): dicts, lists, tuples and sets of
/// strings and numbers, with memo reads of strings and numbers only (torch memoizes
/// strings; a memo read of a container is how a few bytes become 10^9 values), nesting
/// at most MAX_DEPTH deep, at most MAX_PICKLE_WEIGHT built in all. Opcodes a dump has no
/// use for (DUP, objects, persistent ids, extensions, out-of-band buffers) are refused.
/// Linear in the file: every opcode is visited once and every item popped once.
pub fn check_pickle(bytes: &[u8]) -> Result<(), NcclError> {
    let err = |at: usize, m: String| bad("dump", format!("pickle at byte {at}: {m}"));
    let mut stack: Vec<Item> = Vec::new();
    let mut marks = 0usize;
    let mut memo: std::collections::HashMap<u64, Option<u64>> = std::collections::HashMap::new();
    let mut built = 0u64;
    let mut i = 0usize;
    let take = |i: &mut usize, n: u64| -> Result<&[u8], NcclError> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| i.checked_add(n))
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| err(*i, "truncated".into()))?;
        let out = &bytes[*i..end];
        *i = end;
        Ok(out)
    };
    let len_le = |b: &[u8]| b.iter().rev().fold(0u64, |a, &x| (a << 8) | u64::from(x));
    let line = |i: &mut usize, limit: u64| -> Result<&[u8], NcclError> {
        let rest = &bytes[*i..];
        let n = rest.iter().position(|&b| b == b'\n').ok_or_else(|| err(*i, "a line without its end".into()))?;
        if n as u64 > limit {
            return Err(err(*i, format!("a line of {n} bytes, more than {limit}")));
        }
        let out = &rest[..n];
        *i += n + 1;
        Ok(out)
    };
    let number = |s: &[u8]| std::str::from_utf8(s).ok().and_then(|t| t.trim().parse::<u64>().ok());
    let pop = |stack: &mut Vec<Item>, at: usize| stack.pop().ok_or_else(|| err(at, "the stack is empty".into()));
    // The depth of a container holding `items` (a mark among them is an error).
    let holding = |at: usize, base: usize, items: &[Item]| -> Result<Item, NcclError> {
        let mut depth = base.max(1);
        for it in items {
            match it {
                Item::Mark => return Err(err(at, "a mark where a value belongs".into())),
                Item::Scalar { .. } => depth = depth.max(1),
                Item::Container { depth: d } => depth = depth.max(d + 1),
            }
        }
        if depth > MAX_DEPTH {
            return Err(err(at, format!("nests deeper than {MAX_DEPTH} levels")));
        }
        Ok(Item::Container { depth })
    };
    // Items from the last mark up, the mark removed.
    let to_mark = |stack: &mut Vec<Item>, marks: &mut usize, at: usize| -> Result<Vec<Item>, NcclError> {
        let m = stack.iter().rposition(|x| matches!(x, Item::Mark)).ok_or_else(|| err(at, "no mark".into()))?;
        let items = stack.split_off(m + 1);
        stack.pop();
        *marks -= 1;
        Ok(items)
    };
    while i < bytes.len() {
        let at = i;
        let op = bytes[i];
        i += 1;
        let mut pushed: Option<Item> = None;
        match op {
            b'.' => return Ok(()),          // STOP
            0x80 => drop(take(&mut i, 1)?), // PROTO
            0x95 => drop(take(&mut i, 8)?), // FRAME
            b'(' => {
                marks += 1;
                if marks > MAX_DEPTH {
                    return Err(err(at, format!("more than {MAX_DEPTH} open marks")));
                }
                stack.push(Item::Mark);
            }
            b'N' | 0x88 | 0x89 => pushed = Some(Item::Scalar { weight: 1 }), // NONE, NEWTRUE, NEWFALSE
            b'J' | b'K' | b'M' | b'G' => {
                let n = match op {
                    b'J' => 4,
                    b'K' => 1,
                    b'M' => 2,
                    _ => 8,
                };
                take(&mut i, n)?;
                pushed = Some(Item::Scalar { weight: 1 });
            }
            b'F' | b'I' | b'L' => {
                line(&mut i, MAX_PICKLE_NUMBER_BYTES)?;
                pushed = Some(Item::Scalar { weight: 1 });
            }
            b'S' | b'V' => {
                let n = line(&mut i, MAX_PICKLE_STRING_BYTES)?.len() as u64;
                pushed = Some(Item::Scalar { weight: 1 + n / 8 });
            }
            b'c' => {
                line(&mut i, 256)?;
                line(&mut i, 256)?;
                pushed = Some(Item::Scalar { weight: 1 });
            }
            // LONG1, LONG4: little-endian integers.
            0x8a | 0x8b => {
                let n = len_le(take(&mut i, if op == 0x8a { 1 } else { 4 })?);
                if n > MAX_PICKLE_NUMBER_BYTES {
                    return Err(err(at, format!("an integer of {n} bytes")));
                }
                take(&mut i, n)?;
                pushed = Some(Item::Scalar { weight: 1 });
            }
            // Strings and bytes: SHORT_BINSTRING, SHORT_BINUNICODE, SHORT_BINBYTES (1-byte
            // length); BINSTRING, BINUNICODE, BINBYTES (4); BINUNICODE8, BINBYTES8,
            // BYTEARRAY8 (8).
            b'U' | 0x8c | b'C' | b'T' | b'X' | b'B' | 0x8d | 0x8e | 0x96 => {
                let width = match op {
                    b'U' | 0x8c | b'C' => 1,
                    b'T' | b'X' | b'B' => 4,
                    _ => 8,
                };
                let n = len_le(take(&mut i, width)?);
                if n > MAX_PICKLE_STRING_BYTES {
                    return Err(err(at, format!("a string of {n} bytes, more than {MAX_PICKLE_STRING_BYTES}")));
                }
                take(&mut i, n)?;
                pushed = Some(Item::Scalar { weight: 1 + n / 8 });
            }
            b']' | b'}' | b')' | 0x8f => pushed = Some(Item::Container { depth: 1 }), // EMPTY_*
            b'a' => {
                let x = pop(&mut stack, at)?;
                let target = pop(&mut stack, at)?;
                let Item::Container { depth } = target else { return Err(err(at, "APPEND to a non-list".into())) };
                stack.push(holding(at, depth, &[x])?);
            }
            b'e' | b'u' | 0x90 | b's' => {
                let items = if op == b's' {
                    let v = pop(&mut stack, at)?;
                    let k = pop(&mut stack, at)?;
                    vec![k, v]
                } else {
                    to_mark(&mut stack, &mut marks, at)?
                };
                let target = pop(&mut stack, at)?;
                let Item::Container { depth } = target else {
                    return Err(err(at, "items added to a non-container".into()));
                };
                stack.push(holding(at, depth, &items)?);
            }
            b'l' | b't' | b'd' | 0x91 => {
                let items = to_mark(&mut stack, &mut marks, at)?;
                built += 1;
                stack.push(holding(at, 1, &items)?);
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if stack.len() < n {
                    return Err(err(at, "the stack is empty".into()));
                }
                let items = stack.split_off(stack.len() - n);
                built += 1;
                stack.push(holding(at, 1, &items)?);
            }
            b'0' => {
                if matches!(pop(&mut stack, at)?, Item::Mark) {
                    marks -= 1;
                }
            }
            b'1' => drop(to_mark(&mut stack, &mut marks, at)?),
            b'p' | b'q' | b'r' | 0x94 => {
                let key = match op {
                    b'p' => number(line(&mut i, MAX_PICKLE_NUMBER_BYTES)?).unwrap_or(u64::MAX),
                    b'q' => len_le(take(&mut i, 1)?),
                    b'r' => len_le(take(&mut i, 4)?),
                    _ => memo.len() as u64,
                };
                if memo.len() >= MAX_PICKLE_MEMO {
                    return Err(err(at, format!("more than {MAX_PICKLE_MEMO} memo entries")));
                }
                let stored = match stack.last() {
                    Some(Item::Scalar { weight }) => Some(*weight),
                    Some(Item::Container { .. }) => None,
                    _ => return Err(err(at, "nothing to store".into())),
                };
                if memo.insert(key, stored).is_some() {
                    return Err(err(at, format!("memo {key} stored twice")));
                }
            }
            b'g' | b'h' | b'j' => {
                let key = match op {
                    b'g' => number(line(&mut i, MAX_PICKLE_NUMBER_BYTES)?).unwrap_or(u64::MAX),
                    b'h' => len_le(take(&mut i, 1)?),
                    _ => len_le(take(&mut i, 4)?),
                };
                match memo.get(&key) {
                    None => return Err(err(at, format!("memo {key} was never stored"))),
                    Some(None) => return Err(err(at, format!("memo {key} is a container: a dump copies none"))),
                    Some(Some(weight)) => pushed = Some(Item::Scalar { weight: *weight }),
                }
            }
            0x93 => {
                pop(&mut stack, at)?;
                pop(&mut stack, at)?;
                pushed = Some(Item::Scalar { weight: 1 });
            }
            // REDUCE of a global (torch's typed-list builders): what it builds holds its
            // arguments, moved, not copied.
            b'R' => {
                let args = pop(&mut stack, at)?;
                pop(&mut stack, at)?;
                built += 1;
                stack.push(holding(at, 1, &[args])?);
            }
            other => return Err(err(at, format!("opcode 0x{other:02x} has no place in a dump"))),
        }
        if let Some(item) = pushed {
            built = built.saturating_add(match item {
                Item::Scalar { weight } => weight,
                _ => 1,
            });
            stack.push(item);
        }
        if built > MAX_PICKLE_WEIGHT {
            return Err(err(at, format!("builds more than {MAX_PICKLE_WEIGHT} values")));
        }
    }
    Err(err(bytes.len(), "no STOP: the file ends early".into()))
}

fn pickle_to_json(v: serde_pickle::Value, depth: usize) -> Result<Value, NcclError> {
    use serde_pickle::Value as P;
    if depth > MAX_DEPTH {
        return Err(bad("dump", format!("nested deeper than {MAX_DEPTH} levels")));
    }
    Ok(match v {
        P::None => Value::Null,
        P::Bool(b) => Value::Bool(b),
        P::I64(i) => Value::from(i),
        P::Int(i) => Value::String(i.to_string()),
        P::F64(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        P::Bytes(b) => Value::String(String::from_utf8_lossy(&b).into_owned()),
        P::String(s) => Value::String(s),
        P::List(items) | P::Tuple(items) => {
            if items.len() > MAX_ENTRIES {
                return Err(bad("dump", format!("a list of {} items, more than {MAX_ENTRIES}", items.len())));
            }
            Value::Array(items.into_iter().map(|x| pickle_to_json(x, depth + 1)).collect::<Result<_, _>>()?)
        }
        P::Set(items) | P::FrozenSet(items) => Value::Array(
            items.into_iter().map(|h| pickle_to_json(h.into_value(), depth + 1)).collect::<Result<_, _>>()?,
        ),
        P::Dict(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = match k.into_value() {
                    P::String(s) => s,
                    P::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                    P::I64(i) => i.to_string(),
                    other => format!("{other:?}"),
                };
                out.insert(key, pickle_to_json(v, depth + 1)?);
            }
            Value::Object(out)
        }
    })
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn uint(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => {
            n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A list of ranks as torch writes it: a list, or its text ("[0, 1, 2]").
fn ranks(v: Option<&Value>) -> Result<Vec<usize>, String> {
    let items: Vec<Value> = match v {
        Some(Value::Array(items)) if items.len() > MAX_GROUP_RANKS => {
            return Err(format!("{} ranks, more than {MAX_GROUP_RANKS}", items.len()))
        }
        Some(Value::Array(items)) => items.clone(),
        Some(Value::String(s)) => {
            let inner = s.trim().trim_start_matches('[').trim_end_matches(']');
            if inner.trim().is_empty() {
                vec![]
            } else {
                inner.split(',').map(|p| Value::String(p.trim().to_string())).collect()
            }
        }
        _ => return Err("no ranks".into()),
    };
    if items.len() > MAX_GROUP_RANKS {
        return Err(format!("{} ranks, more than {MAX_GROUP_RANKS}", items.len()));
    }
    let ranks: Vec<usize> = items
        .iter()
        .map(|x| {
            uint(Some(x))
                .filter(|&r| r < MAX_GROUP_RANKS as u64)
                .map(|r| r as usize)
                .ok_or_else(|| format!("{x} is not a rank below {MAX_GROUP_RANKS}"))
        })
        .collect::<Result<_, _>>()?;
    let mut sorted = ranks.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("rank {} is listed twice", w[0]));
    }
    Ok(ranks)
}

fn shapes(v: Option<&Value>) -> Vec<Vec<u64>> {
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .map(|s| match s {
                Value::Array(dims) => dims.iter().filter_map(|d| uint(Some(d))).collect(),
                _ => vec![],
            })
            .collect(),
        _ => vec![],
    }
}

fn from_value(v: &Value, file_rank: Option<usize>) -> Result<FrDump, NcclError> {
    let top = v.as_object().ok_or_else(|| bad("dump", "not a dict of version, pg_config and entries"))?;
    let entries = match top.get("entries") {
        Some(Value::Array(items)) => items,
        Some(_) => return Err(bad("entries", "not a list")),
        None => return Err(bad("dump", "no entries: is it a Flight Recorder dump?")),
    };
    if entries.len() > MAX_ENTRIES {
        return Err(bad("entries", format!("{} entries, more than {MAX_ENTRIES}", entries.len())));
    }
    let rank = uint(top.get("rank")).map(|r| r as usize).or(file_rank).ok_or_else(|| {
        bad("rank", "the dump names no rank and neither does its file name (torch writes <prefix><rank>)")
    })?;
    let mut groups = Vec::new();
    if let Some(Value::Object(config)) = top.get("pg_config") {
        for (key, g) in config {
            let ranks = ranks(g.get("ranks")).map_err(|e| bad(format!("pg_config.{key}.ranks"), e))?;
            groups.push(FrGroup {
                name: text(g.get("name")).unwrap_or_else(|| key.clone()),
                desc: text(g.get("desc")).unwrap_or_default(),
                ranks,
            });
        }
    }
    let mut out = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let field = |f: &str| format!("entries[{i}].{f}");
        let name = text(e.get("profiling_name")).ok_or_else(|| bad(field("profiling_name"), "missing"))?;
        let (library, op) = name.rsplit_once(':').unwrap_or(("", name.as_str()));
        let mut parts = op.split_whitespace();
        let op_name = parts.next().unwrap_or("").to_string();
        let p2p = match (op_name.as_str(), parts.next()) {
            ("send", Some(meta)) => meta.split_once("->").and_then(|(s, d)| Some((s.parse().ok(), d.parse().ok()?))),
            ("recv", Some(meta)) => meta.split_once("<-").and_then(|(d, s)| Some((s.parse().ok(), d.parse().ok()?))),
            _ => None,
        };
        let (group, group_desc) = match e.get("process_group") {
            Some(Value::Array(pair)) => (text(pair.first()), text(pair.get(1)).unwrap_or_default()),
            Some(other) => (text(Some(other)), String::new()),
            None => (uint(e.get("pg_id")).map(|id| id.to_string()), String::new()),
        };
        let group = group.ok_or_else(|| bad(field("process_group"), "missing"))?;
        let state = match text(e.get("state")).as_deref() {
            Some("completed") => FrState::Completed,
            Some("started") => FrState::Started,
            Some("scheduled") | None => FrState::Scheduled,
            Some(other) => {
                return Err(bad(field("state"), format!("\"{other}\" is not scheduled, started or completed")))
            }
        };
        let dtypes = match e.get("input_dtypes") {
            Some(Value::Array(d)) => d.iter().filter_map(|x| text(Some(x))).collect(),
            _ => vec![],
        };
        out.push(FrEntry {
            record_id: uint(e.get("record_id")).unwrap_or(i as u64),
            group,
            group_desc,
            collective_seq_id: uint(e.get("collective_seq_id")).unwrap_or(0),
            p2p_seq_id: uint(e.get("p2p_seq_id")).unwrap_or(0),
            library: library.to_string(),
            op: op_name,
            p2p,
            p2p_flag: e.get("is_p2p").and_then(Value::as_bool).unwrap_or(false),
            input_sizes: shapes(e.get("input_sizes")),
            input_dtypes: dtypes,
            output_sizes: shapes(e.get("output_sizes")),
            state,
            time_created_ns: uint(e.get("time_created_ns")).unwrap_or(0),
            timeout_ms: uint(e.get("timeout_ms")),
        });
    }
    out.sort_by_key(|e| e.record_id);
    Ok(FrDump { rank, version: text(top.get("version")).unwrap_or_default(), groups, entries: out })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump as torch's JSON dumper writes it (fields of torch 2.15), written here.
    fn json_dump() -> String {
        r#"{"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
            "entries": [
              {"record_id": 0, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 1,
               "p2p_seq_id": 0, "op_id": 1, "profiling_name": "nccl:all_reduce", "time_created_ns": 5,
               "input_sizes": [[4, 2]], "input_dtypes": ["Float"], "output_sizes": [[4, 2]],
               "output_dtypes": ["Float"], "state": "completed", "timeout_ms": 600000, "is_p2p": false},
              {"record_id": 1, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 1,
               "p2p_seq_id": 1, "op_id": 2, "profiling_name": "nccl:send 0->1", "time_created_ns": 6,
               "input_sizes": [[3]], "input_dtypes": ["Float"], "output_sizes": [[3]], "state": "started"}
            ]}"#
        .to_string()
    }

    #[test]
    fn reads_groups_entries_and_peers() {
        let d = parse(json_dump().as_bytes(), Some(0)).unwrap();
        assert_eq!((d.rank, d.version.as_str()), (0, "2.10"));
        assert_eq!(d.groups, vec![FrGroup { name: "0".into(), desc: "default_pg".into(), ranks: vec![0, 1] }]);
        assert_eq!(d.entries[0].op, "all_reduce");
        assert_eq!(d.entries[0].library, "nccl");
        assert_eq!(d.entries[0].input_elements(), 8);
        assert_eq!(d.entries[0].state, FrState::Completed);
        assert!(!d.entries[0].is_p2p());
        assert_eq!(d.entries[1].p2p, Some((Some(0), 1)));
        assert_eq!(d.entries[1].state, FrState::Started);
    }

    /// The same dump as a pickle (protocol 2, torch's), made here with serde-pickle.
    #[test]
    fn reads_a_pickled_dump() {
        use serde_pickle::{HashableValue as H, Value as P};
        let s = |x: &str| P::String(x.into());
        let hs = |x: &str| H::String(x.into());
        let entry = P::Dict(
            [
                (hs("record_id"), P::I64(0)),
                (hs("process_group"), P::Tuple(vec![s("0"), s("default_pg")])),
                (hs("collective_seq_id"), P::I64(3)),
                (hs("p2p_seq_id"), P::I64(0)),
                (hs("profiling_name"), s("gloo:broadcast")),
                (hs("input_sizes"), P::List(vec![P::List(vec![P::I64(5)])])),
                (hs("input_dtypes"), P::List(vec![s("Long")])),
                (hs("state"), s("started")),
            ]
            .into_iter()
            .collect(),
        );
        let group = P::Dict(
            [(hs("name"), s("0")), (hs("desc"), s("default_pg")), (hs("ranks"), s("[0, 1, 2]"))].into_iter().collect(),
        );
        let dump = P::Dict(
            [
                (hs("version"), s("2.10")),
                (hs("rank"), P::I64(2)),
                (hs("pg_config"), P::Dict([(hs("0"), group)].into_iter().collect())),
                (hs("entries"), P::List(vec![entry])),
            ]
            .into_iter()
            .collect(),
        );
        let bytes = serde_pickle::value_to_vec(&dump, serde_pickle::SerOptions::new()).unwrap();
        let d = parse(&bytes, None).unwrap();
        assert_eq!(d.rank, 2);
        assert_eq!(d.groups[0].ranks, vec![0, 1, 2]);
        let e = &d.entries[0];
        assert_eq!((e.op.as_str(), e.library.as_str(), e.collective_seq_id), ("broadcast", "gloo", 3));
        assert_eq!(
            (e.input_elements(), e.input_dtypes.clone(), e.state),
            (5, vec!["Long".to_string()], FrState::Started)
        );
    }

    /// Nested memo references (3 levels of 1,000 gets: 10^9 values once copied) and deep
    /// nesting are refused before anything is built.
    #[test]
    fn refuses_pickles_that_would_build_too_much() {
        // [x]*1000 as memo gets, three levels deep, each level memoized.
        let mut p = vec![0x80, 2, b']', b'q', 0];
        for level in 0..3u8 {
            p.push(b']');
            p.push(b'(');
            for _ in 0..1000 {
                p.extend([b'h', level]);
            }
            p.push(b'e');
            p.extend([b'q', level + 1]);
        }
        p.push(b'.');
        let e = parse(&p, Some(0)).unwrap_err().to_string();
        assert!(e.contains("is a container"), "{e}");
        // A list referenced, then grown: never copied, as memo reads of lists are refused.
        let mut p = vec![0x80, 2, b']', b'q', 0, b'h', 0, b'.'];
        let e = parse(&p, Some(0)).unwrap_err().to_string();
        assert!(e.contains("is a container"), "{e}");
        // 2,000 reads of a 1 MiB string: 2,000 copies.
        p = vec![0x80, 2, b'X'];
        p.extend((1u32 << 20).to_le_bytes());
        p.extend(std::iter::repeat_n(b'a', 1 << 20));
        p.extend([b'q', 0, b']', b'(']);
        for _ in 0..2000 {
            p.extend([b'h', 0]);
        }
        p.extend([b'e', b'.']);
        let e = parse(&p, Some(0)).unwrap_err().to_string();
        assert!(e.contains("builds more than"), "{e}");
        // 100,000 marks.
        let mut p = vec![0x80, 2];
        p.extend(std::iter::repeat_n(b'(', 100_000));
        let e = parse(&p, Some(0)).unwrap_err().to_string();
        assert!(e.contains("open marks"), "{e}");
        // 100,000 nested lists.
        let mut p = vec![0x80, 2];
        p.extend(std::iter::repeat_n(b']', 100_000));
        p.extend(std::iter::repeat_n(b'a', 99_999));
        p.push(b'.');
        let e = parse(&p, Some(0)).unwrap_err().to_string();
        assert!(e.contains("nests deeper than"), "{e}");
        // A persistent id (a reference to an object outside the pickle).
        let e = parse(&[0x80, 2, b'N', b'Q', b'.'], Some(0)).unwrap_err().to_string();
        assert!(e.contains("opcode 0x51"), "{e}");
    }

    #[test]
    fn refuses_what_is_not_a_dump_by_name() {
        let e = parse(b"{\"version\": 1}", Some(0)).unwrap_err().to_string();
        assert!(e.contains("no entries"), "{e}");
        let e = parse(json_dump().as_bytes(), None).map(|_| ()).map_or_else(|e| e.to_string(), |_| String::new());
        assert!(e.contains("names no rank"), "{e}");
        let e = parse(b"\x80\x02garbage", Some(0)).unwrap_err().to_string();
        assert!(e.contains("pickle"), "{e}");
        let no_name = json_dump().replace("\"profiling_name\": \"nccl:all_reduce\", ", "");
        let e = parse(no_name.as_bytes(), Some(0)).unwrap_err().to_string();
        assert!(e.contains("entries[0].profiling_name"), "{e}");
        assert!(looks_like_dump(json_dump().as_bytes()) && !looks_like_dump(b"NCCL INFO"));
    }
}

//! The standard output of nccl-tests (`all_reduce_perf` and the rest; docs/sources.md#nccl-tests):
//! its header (test, threads, GPUs, iterations), the devices of every rank, and the rows
//! of sizes with out-of-place and in-place time, algbw, busbw and #wrong — in the
//! current layout (a `root` column, `#wrong`) and the old one (no `root`, `error`).
//! Each row's printed algbw and busbw are recomputed from its size and time with
//! nccl-tests' own definitions (§2.2) and flagged when they disagree by more than the
//! printed digits allow.

use serde::Serialize;

use crate::error::NcclError;

/// What nccl-tests binary produced the output; sets the busbw factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TestKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    AllToAll,
    SendRecv,
}

impl TestKind {
    /// The test a binary's name (`all_reduce_perf`, `./build/all_gather_perf`) or a
    /// collective's (`allreduce`, `all-reduce`) names.
    pub fn from_binary(name: &str) -> Option<TestKind> {
        let base = name.rsplit('/').next().unwrap_or(name);
        // The MPI builds are `all_reduce_perf_mpi`; `_perf` may be gone from a name.
        let base = base.strip_suffix("_mpi").unwrap_or(base);
        let base = base.strip_suffix("_perf").unwrap_or(base);
        Some(match base.to_ascii_lowercase().replace(['_', '-'], "").as_str() {
            "allreduce" => TestKind::AllReduce,
            "allgather" => TestKind::AllGather,
            "reducescatter" => TestKind::ReduceScatter,
            "broadcast" => TestKind::Broadcast,
            "reduce" => TestKind::Reduce,
            "alltoall" => TestKind::AllToAll,
            "sendrecv" => TestKind::SendRecv,
            _ => return None,
        })
    }

    pub fn binary(self) -> &'static str {
        match self {
            TestKind::AllReduce => "all_reduce_perf",
            TestKind::AllGather => "all_gather_perf",
            TestKind::ReduceScatter => "reduce_scatter_perf",
            TestKind::Broadcast => "broadcast_perf",
            TestKind::Reduce => "reduce_perf",
            TestKind::AllToAll => "alltoall_perf",
            TestKind::SendRecv => "sendrecv_perf",
        }
    }

    /// busbw = algbw × this (nccl-tests `doc/PERFORMANCE.md`, docs/sources.md#nccl-tests).
    pub fn bus_factor(self, ranks: usize) -> f64 {
        let n = ranks as f64;
        match self {
            TestKind::AllReduce => 2.0 * (n - 1.0) / n,
            TestKind::AllGather | TestKind::ReduceScatter | TestKind::AllToAll => (n - 1.0) / n,
            TestKind::Broadcast | TestKind::Reduce | TestKind::SendRecv => 1.0,
        }
    }

    /// The ranks whose bus factor is `factor`, where the factor depends on them.
    fn ranks_from_factor(self, factor: f64) -> Option<usize> {
        let n = match self {
            TestKind::AllReduce if factor < 2.0 => 2.0 / (2.0 - factor),
            TestKind::AllGather | TestKind::ReduceScatter | TestKind::AllToAll if factor < 1.0 => 1.0 / (1.0 - factor),
            _ => return None,
        };
        (n.is_finite() && (1.5..1e7).contains(&n)).then(|| n.round() as usize)
    }

    pub fn railyard(self) -> Option<railyard_schedule::Collective> {
        use railyard_schedule::Collective as C;
        Some(match self {
            TestKind::AllReduce => C::AllReduce,
            TestKind::AllGather => C::AllGather,
            TestKind::ReduceScatter => C::ReduceScatter,
            TestKind::Broadcast => C::Broadcast,
            TestKind::Reduce => C::Reduce,
            TestKind::AllToAll => C::AllToAll,
            TestKind::SendRecv => C::SendRecv,
        })
    }
}

/// A printed number and the half-unit of its last printed digit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Printed {
    pub value: f64,
    pub resolution: f64,
}

fn printed(token: &str) -> Option<Printed> {
    let value: f64 = token.parse().ok().filter(|v: &f64| v.is_finite())?;
    let (mantissa, exponent) = match token.find(['e', 'E']) {
        Some(i) => (&token[..i], token[i + 1..].parse::<i32>().ok()?),
        None => (token, 0),
    };
    let decimals = mantissa.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    Some(Printed { value, resolution: 0.5 * 10f64.powi(exponent - decimals) })
}

/// The largest relative error nccl-tests' old `error` column accepted (`DeltaMaxValue`
/// in its common.cu, releases before `#wrong`: half 1e-2 and later 5e-2 — the larger is
/// taken —, bfloat16 1e-2, float 1e-5, double 1e-12, integers exact).
fn error_tolerance(dtype: &str) -> f64 {
    match dtype {
        "half" | "float16" => 5e-2,
        "bfloat16" => 1e-2,
        "float" | "float32" => 1e-5,
        "double" | "float64" => 1e-12,
        _ => 0.0,
    }
}

/// Whether a half's check column says its results were wrong: a `#wrong` count above 0,
/// or an old `error` (a relative error, printed as a float) above what nccl-tests
/// accepted for `dtype`; `N/A` is no check.
pub fn wrong_results(wrong: &str, dtype: &str) -> bool {
    if let Ok(count) = wrong.parse::<u64>() {
        return count > 0;
    }
    // A NaN error (the check itself failed) is wrong too.
    wrong.parse::<f64>().is_ok_and(|e| e.is_nan() || e.abs() > error_tolerance(dtype))
}

/// One half of a row: out-of-place or in-place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Half {
    pub time_us: Printed,
    pub algbw_gb_per_s: Printed,
    pub busbw_gb_per_s: Printed,
    /// `#wrong` (or the old `error`) as printed; "N/A" when not checked.
    pub wrong: String,
    /// size / time.
    pub algbw_recomputed: f64,
    /// algbw_recomputed × the bus factor.
    pub busbw_recomputed: f64,
    /// Whether the printed algbw and busbw agree with the time within their digits.
    pub consistent: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// 1-based line of the input.
    pub line: usize,
    pub bytes: u64,
    pub count: u64,
    pub dtype: String,
    pub redop: String,
    pub root: Option<i64>,
    pub out_of_place: Half,
    pub in_place: Half,
    /// Whether the count of the dtype makes the size (per rank for all-gather,
    /// reduce-scatter and all-to-all); None where the dtype or the ranks are unknown.
    pub count_agrees: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankDevice {
    pub rank: usize,
    /// NCCL_TESTS_SPLIT's group (0 without a split); only group 0's ranks are counted.
    pub group: usize,
    pub host: String,
    pub device: usize,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestsOutput {
    pub kind: TestKind,
    /// Where the kind came from: the header, the caller, or the columns (and how).
    pub kind_from: String,
    pub ranks: usize,
    /// How the ranks were found: "rank lines", "given", or from busbw/algbw.
    pub ranks_from: String,
    pub hosts: Vec<String>,
    pub devices: Vec<RankDevice>,
    pub version: Option<String>,
    /// GPUs each thread of the test drives (the header's `nGpus`, nccl-tests' `-g`):
    /// above 1, one process launches for several GPUs. None when it does not divide the
    /// ranks.
    pub gpus_per_thread: Option<usize>,
    pub rows: Vec<Row>,
    /// The footer's average busbw, and the mean of the printed busbw of every half.
    pub avg_busbw_printed: Option<f64>,
    pub avg_busbw_of_rows: f64,
    pub out_of_bounds: Option<String>,
    /// Lines that are neither header, comment nor row, with their numbers (at most 100 kept).
    pub unread_lines: Vec<usize>,
    pub unread_count: usize,
}

/// Largest input read: 16 MiB (a sweep of every size and dtype is a few hundred KiB).
pub const MAX_INPUT_BYTES: u64 = 16 << 20;
/// Times read, µs: nccl-tests prints two decimals, and no run lasts 11 days.
pub const MIN_TIME_US: f64 = 1e-3;
pub const MAX_TIME_US: f64 = 1e12;
/// Most rows read.
pub const MAX_ROWS: usize = 100_000;
/// Most ranks a test may have (the schedules' own limit).
pub const MAX_RANKS: usize = 1 << 18;

/// Most tests read from one file.
pub const MAX_TESTS: usize = 256;

/// Whether a line (launcher tags stripped, trimmed) is a result row: a size in bytes
/// and at least 10 more columns (the oldest layout has 11 in all).
fn looks_like_row(t: &str) -> bool {
    !t.starts_with('#')
        && t.split_whitespace().count() >= 11
        && t.split_whitespace().next().is_some_and(|w| w.parse::<u64>().is_ok())
}

/// The tests of a file that holds several, one after another (what cluster scripts
/// write). After result rows, a new test begins at a header line (`# Collective test
/// starting`, `# nThread`, `# Using devices`, the column line, `# nccl-tests version`:
/// the run of comment lines it is in goes with it) or at a row whose size is below the
/// last one's (nccl-tests' sizes only grow). Each part is the line number it starts at
/// (from 0) and its text; lines before the first test go with it.
pub fn split_tests(text: &str) -> Vec<(usize, &str)> {
    let mut parts: Vec<(usize, usize)> = vec![(0, 0)];
    let (mut offset, mut rows_seen, mut last_size) = (0usize, false, None::<u64>);
    // Where the run of comment lines the current line is in began.
    let mut comments_from: Option<(usize, usize)> = None;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let cleaned = strip_launcher_tags(line);
        let t = cleaned.trim();
        if t.starts_with('#') {
            comments_from.get_or_insert((i, offset));
            let c = t.trim_start_matches('#').trim_start();
            let header = c.starts_with("Collective test starting:")
                || c.starts_with("nThread")
                || c.starts_with("Using devices")
                || c.starts_with("nccl-tests version")
                || matches!(c.split_whitespace().next(), Some("size" | "bytes"));
            if header && rows_seen {
                parts.push(comments_from.unwrap_or((i, offset)));
                (rows_seen, last_size) = (false, None);
            }
        } else if looks_like_row(t) {
            let size = t.split_whitespace().next().and_then(|w| w.parse::<u64>().ok());
            if rows_seen && size < last_size {
                parts.push(comments_from.unwrap_or((i, offset)));
            }
            (rows_seen, last_size, comments_from) = (true, size, None);
        } else if !t.is_empty() {
            comments_from = None;
        }
        offset += line.len();
    }
    let ends: Vec<usize> = parts.iter().skip(1).map(|&(_, o)| o).chain([text.len()]).collect();
    parts.iter().zip(ends).map(|(&(line, start), end)| (line, &text[start..end])).collect()
}

/// The tests of a file: those that read, and those that did not (each its number from
/// 1, its first line and why).
#[derive(Debug)]
pub struct Tests {
    pub read: Vec<TestsOutput>,
    pub failed: Vec<(usize, usize, String)>,
}

/// Every test of a file (see `split_tests`), each parsed as `parse` does, with the
/// file's own line numbers; a test that does not read is said, not fatal, unless none
/// does. At most `MAX_TESTS` tests and `MAX_ROWS` rows in all.
pub fn parse_all(text: &str, kind: Option<TestKind>, ranks: Option<usize>) -> Result<Tests, NcclError> {
    let parts = split_tests(text);
    if parts.len() > MAX_TESTS {
        return Err(NcclError::BadInput {
            field: "input".into(),
            message: format!("{} tests in one file; at most {MAX_TESTS} are read", parts.len()),
        });
    }
    let several = parts.len() > 1;
    let mut tests = Tests { read: Vec::new(), failed: Vec::new() };
    let mut rows = 0usize;
    for (n, (first_line, part)) in parts.into_iter().enumerate() {
        match parse_at(part, first_line, kind, ranks) {
            Ok(t) => {
                rows += t.rows.len();
                if rows > MAX_ROWS {
                    return Err(NcclError::BadInput {
                        field: "input".into(),
                        message: format!("more than {MAX_ROWS} rows in the file's tests"),
                    });
                }
                tests.read.push(t);
            }
            Err(e) if several => tests.failed.push((n + 1, first_line + 1, e.to_string())),
            Err(e) => return Err(e),
        }
    }
    if tests.read.is_empty() {
        let (n, line, why) = &tests.failed[0];
        return Err(NcclError::BadInput {
            field: "input".into(),
            message: format!("no test reads; test {n} (from line {line}): {why}"),
        });
    }
    Ok(tests)
}

/// Parse nccl-tests output of one test. `kind` and `ranks` say what the output may not
/// (the seeds' excerpts have no header); given, they win over what the header says.
pub fn parse(text: &str, kind: Option<TestKind>, ranks: Option<usize>) -> Result<TestsOutput, NcclError> {
    parse_at(text, 0, kind, ranks)
}

/// `parse` of a part of a file that starts at line `first_line` (from 0).
fn parse_at(
    text: &str,
    first_line: usize,
    kind: Option<TestKind>,
    ranks: Option<usize>,
) -> Result<TestsOutput, NcclError> {
    let scan = Scan::of(text, first_line)?;
    if scan.rows.is_empty() {
        return Err(NcclError::BadInput {
            field: "input".into(),
            message: "no result rows (lines starting with a size in bytes followed by 10 or more columns)".into(),
        });
    }
    let parsed = scan
        .rows
        .iter()
        .map(|(line, tokens)| {
            let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
            RawRow::read(*line, &tokens, scan.leading)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (kind, kind_from) = match (kind, scan.kind) {
        (Some(k), _) => (k, "given (--collective)".to_string()),
        (None, Some(k)) => (k, "from the header".to_string()),
        (None, None) => infer_kind(&parsed).ok_or_else(|| NcclError::BadInput {
            field: "collective".into(),
            message: "the output names no test (no \"# Collective test starting\" line) and its columns do not \
                      say which; say which with --collective"
                .into(),
        })?,
    };
    let (ranks, ranks_from) = ranks_of(ranks, &scan.devices, &parsed, kind)?;
    let factor = if ranks >= 1 { kind.bus_factor(ranks) } else { 1.0 };
    let per_rank = matches!(kind, TestKind::AllGather | TestKind::ReduceScatter | TestKind::AllToAll);
    let rows: Vec<Row> = parsed
        .into_iter()
        .map(|r| {
            let mut row = r.recomputed(factor);
            let copies = if per_rank { ranks as u64 } else { 1 };
            row.count_agrees = dtype_bytes(&row.dtype)
                .filter(|_| ranks >= 1)
                .map(|e| row.count.checked_mul(e).and_then(|b| b.checked_mul(copies)) == Some(row.bytes));
            row
        })
        .collect();
    let busbw_sum: f64 =
        rows.iter().map(|r| r.out_of_place.busbw_gb_per_s.value + r.in_place.busbw_gb_per_s.value).sum();
    // In first-seen order, each once (a set finds repeats: thousands of hosts).
    let mut seen = std::collections::HashSet::new();
    let hosts: Vec<String> =
        scan.devices.iter().filter(|d| seen.insert(d.host.as_str())).map(|d| d.host.clone()).collect();
    let avg_busbw_of_rows = busbw_sum / (2 * rows.len()) as f64;
    Ok(TestsOutput {
        kind,
        kind_from,
        ranks,
        ranks_from,
        hosts,
        devices: scan.devices,
        version: scan.version,
        // Every thread drives nGpus ranks, so nGpus divides the ranks; a header that says
        // otherwise (17 on 16 ranks) is not taken at its word.
        gpus_per_thread: scan.gpus_per_thread.filter(|&g| ranks % g == 0),
        rows,
        avg_busbw_printed: scan.avg_busbw_printed,
        avg_busbw_of_rows,
        out_of_bounds: scan.out_of_bounds,
        unread_lines: scan.unread_lines,
        unread_count: scan.unread_count,
    })
}

/// The output's lines sorted: the header's facts, the result rows (line number and
/// columns), and the lines read as neither.
struct Scan {
    kind: Option<TestKind>,
    version: Option<String>,
    gpus_per_thread: Option<usize>,
    devices: Vec<RankDevice>,
    /// The ranks `devices` holds, so a rank listed twice is found without a scan.
    ranks_listed: std::collections::HashSet<usize>,
    /// How many columns come before the times, as the header's column line says.
    leading: Option<usize>,
    rows: Vec<(usize, Vec<String>)>,
    avg_busbw_printed: Option<f64>,
    out_of_bounds: Option<String>,
    unread_lines: Vec<usize>,
    unread_count: usize,
}

impl Scan {
    fn of(text: &str, first_line: usize) -> Result<Self, NcclError> {
        let mut scan = Scan {
            kind: None,
            version: None,
            gpus_per_thread: None,
            devices: Vec::new(),
            ranks_listed: std::collections::HashSet::new(),
            leading: None,
            rows: Vec::new(),
            avg_busbw_printed: None,
            out_of_bounds: None,
            unread_lines: Vec::new(),
            unread_count: 0,
        };
        let mut starts = 0;
        for (i, line) in text.lines().enumerate() {
            let n = first_line + i + 1;
            let cleaned = strip_launcher_tags(line);
            let t = cleaned.trim();
            if t.is_empty() {
                continue;
            }
            // A command line naming the test binary (`./build/sendrecv_perf -b 8 ...`).
            if scan.kind.is_none() && !t.starts_with('#') {
                let binary = |w: &&str| w.ends_with("_perf") || w.ends_with("_perf_mpi");
                if let Some(kind) = t.split_whitespace().next().filter(binary) {
                    scan.kind = TestKind::from_binary(kind);
                    continue;
                }
            }
            if let Some(comment) = t.strip_prefix('#') {
                let c = comment.trim();
                if let Some(name) = c.strip_prefix("Collective test starting:") {
                    starts += 1;
                    if starts > 1 {
                        return Err(NcclError::Line {
                            line: n,
                            message: "a second test starts here before the first printed a result row".into(),
                        });
                    }
                    scan.kind = TestKind::from_binary(name.trim());
                } else {
                    scan.header(c);
                }
                continue;
            }
            let tokens: Vec<&str> = t.split_whitespace().collect();
            if looks_like_row(t) {
                if scan.rows.len() == MAX_ROWS {
                    return Err(NcclError::Line { line: n, message: format!("more than {MAX_ROWS} rows") });
                }
                scan.rows.push((n, tokens.into_iter().map(str::to_string).collect()));
            } else {
                scan.unread_count += 1;
                if scan.unread_lines.len() < 100 {
                    scan.unread_lines.push(n);
                }
            }
        }
        Ok(scan)
    }

    /// A comment line of the header (`c` without its `#`).
    fn header(&mut self, c: &str) {
        if let Some(v) = c.strip_prefix("nccl-tests version") {
            self.version = v.split_whitespace().next().map(str::to_string);
        } else if c.starts_with("nThread") {
            // `nThread 1 nGpus 8 minBytes 8 …`: the value after `nGpus`, if it reads as one.
            let words: Vec<&str> = c.split_whitespace().collect();
            self.gpus_per_thread = words
                .windows(2)
                .find(|w| w[0] == "nGpus")
                .and_then(|w| w[1].parse::<usize>().ok())
                .filter(|&g| (1..=MAX_RANKS).contains(&g));
        } else if let Some(rest) = c.strip_prefix("Rank") {
            if let Some(d) = rank_line(rest) {
                // With NCCL_TESTS_SPLIT the ranks form groups, each its own collective. A
                // rank listed twice (concatenated or duplicated output) counts once.
                if d.group == 0 && self.devices.len() < MAX_RANKS && self.ranks_listed.insert(d.rank) {
                    self.devices.push(d);
                }
            }
        } else if matches!(c.split_whitespace().next(), Some("size" | "bytes")) {
            // The columns before the first `time`: size count type [redop] [root].
            self.leading = c.split_whitespace().position(|w| w == "time");
        } else if let Some(v) = c.strip_prefix("Avg bus bandwidth") {
            self.avg_busbw_printed = v.trim_start_matches([' ', ':']).trim().parse().ok();
        } else if let Some(v) = c.strip_prefix("Out of bounds values") {
            self.out_of_bounds = Some(v.trim_start_matches([' ', ':']).trim().to_string());
        }
    }
}

/// A line without what launchers add: mpirun --tag-output's `[job,rank]<stdout>:` (at
/// the start, or in the middle where ranks' writes interleave), srun --label's `12: `,
/// and a bare `[0] `.
fn strip_launcher_tags(line: &str) -> std::borrow::Cow<'_, str> {
    let mut out = std::borrow::Cow::Borrowed(line);
    while let Some(end) = out.find("]<stdout>:").or_else(|| out.find("]<stderr>:")) {
        let Some(start) = out[..end].rfind('[') else { break };
        let mut owned = out.into_owned();
        owned.replace_range(start..end + "]<stdout>:".len(), " ");
        out = std::borrow::Cow::Owned(owned);
    }
    let t = out.trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let label = if digits > 0 && t[digits..].starts_with(": ") {
        Some(digits + 2)
    } else if t.starts_with('[') {
        t.find("] ").filter(|&i| t[1..i].bytes().all(|b| b.is_ascii_digit() || b == b',')).map(|i| i + 2)
    } else {
        None
    };
    match label {
        Some(skip) => std::borrow::Cow::Owned(t[skip..].to_string()),
        None => out,
    }
}

impl RawRow {
    /// A result row's columns: size count type [redop] [root] then time algbw busbw wrong,
    /// twice (out of place, in place). `leading` is how many columns come before the
    /// times, where the header's column line says; else the row's length does (the
    /// oldest outputs have neither redop nor root, later ones redop, current ones both).
    fn read(line: usize, tokens: &[&str], leading: Option<usize>) -> Result<RawRow, NcclError> {
        let first = match leading {
            Some(l) if (3..=5).contains(&l) => l,
            // Eleven columns are the oldest layout only if the fourth is a time: else
            // a current row cut short.
            _ if tokens.len() == 11 && tokens[3].parse::<f64>().is_err() => 5,
            _ => tokens.len().saturating_sub(8).clamp(3, 5),
        };
        let (has_redop, root) = (first >= 4, first == 5);
        if tokens.len() != first + 8 {
            return Err(NcclError::Line {
                line,
                message: format!(
                    "{} columns; a row has {} (size count type{}{} then time algbw busbw #wrong for out-of-place \
                     and in-place; -I per-iteration columns are not read)",
                    tokens.len(),
                    first + 8,
                    if has_redop { " redop" } else { "" },
                    if root { " root" } else { "" }
                ),
            });
        }
        let number = |k: usize, what: &str| -> Result<Printed, NcclError> {
            printed(tokens[k])
                .ok_or_else(|| NcclError::Line { line, message: format!("{what} \"{}\" is not a number", tokens[k]) })
        };
        let whole = |k: usize, what: &str| -> Result<u64, NcclError> {
            tokens[k].parse().map_err(|_| NcclError::Line {
                line,
                message: format!("{what} \"{}\" is not a whole number", tokens[k]),
            })
        };
        let bytes = whole(0, "size")?;
        let count = whole(1, "count")?;
        let root_value =
            if root {
                Some(tokens[4].parse::<i64>().map_err(|_| NcclError::Line {
                    line,
                    message: format!("root \"{}\" is not a number", tokens[4]),
                })?)
            } else {
                None
            };
        let mut halves = [[Printed { value: 0.0, resolution: 0.0 }; 3]; 2];
        let mut wrong = [String::new(), String::new()];
        for h in 0..2 {
            let base = first + 4 * h;
            halves[h] = [number(base, "time")?, number(base + 1, "algbw")?, number(base + 2, "busbw")?];
            if !(MIN_TIME_US..=MAX_TIME_US).contains(&halves[h][0].value) {
                return Err(NcclError::Line {
                    line,
                    message: format!(
                        "time {} us is outside {MIN_TIME_US} us to {MAX_TIME_US:e} us (nccl-tests prints 0.01 us at the finest)",
                        tokens[base]
                    ),
                });
            }
            wrong[h] = tokens[base + 3].to_string();
        }
        Ok(RawRow {
            line,
            bytes,
            count,
            dtype: tokens[2].to_string(),
            // The oldest outputs print no reduction: unknown.
            redop: if has_redop { tokens[3].to_string() } else { String::new() },
            root: root_value,
            halves,
            wrong,
        })
    }

    /// The row with algbw and busbw recomputed from its size and times (`factor`: the
    /// collective's bus factor), and whether the printed ones agree to their rounding.
    fn recomputed(self, factor: f64) -> Row {
        let RawRow { line, bytes, count, dtype, redop, root, halves, wrong } = self;
        let half = |h: [Printed; 3], wrong: String| {
            let [time, algbw, busbw] = h;
            let alg = bytes as f64 / (time.value * 1e3);
            let bus = alg * factor;
            // The time's own rounding moves algbw by up to alg × resolution / time.
            let slack = |x: f64| x * time.resolution / time.value + 1e-12;
            let consistent = (algbw.value - alg).abs() <= algbw.resolution + slack(alg)
                && (busbw.value - bus).abs() <= busbw.resolution + slack(bus);
            Half {
                time_us: time,
                algbw_gb_per_s: algbw,
                busbw_gb_per_s: busbw,
                wrong,
                algbw_recomputed: alg,
                busbw_recomputed: bus,
                consistent,
            }
        };
        let [w0, w1] = wrong;
        let out_of_place = half(halves[0], w0);
        let in_place = half(halves[1], w1);
        Row { line, bytes, count, dtype, redop, root, out_of_place, in_place, count_agrees: None }
    }
}

/// The test an output that does not name one ran, from its columns (nccl-tests'
/// definitions, docs/sources.md#nccl-tests): the reduction (`none` for the tests that
/// only move data), the root (-1 for the unrooted), and busbw/algbw — 2(n−1)/n for
/// all-reduce, (n−1)/n for all-gather, reduce-scatter and all-to-all, 1 for the rest. An
/// all-gather and an all-to-all have the same columns but for the in-place check, which
/// all-to-all does not run (`N/A`). The row of the largest size with algbw of at least
/// 1 GB/s decides (two printed decimals leave its ratio exact enough).
fn infer_kind(rows: &[RawRow]) -> Option<(TestKind, String)> {
    let row = rows.iter().filter(|r| r.halves[0][1].value >= 1.0).max_by_key(|r| r.bytes)?;
    let ratio = row.halves[0][2].value / row.halves[0][1].value;
    // Without a redop column only all-reduce's busbw above algbw says what ran.
    if row.redop.is_empty() && ratio <= 1.0 + 1e-3 {
        return None;
    }
    let reduces = row.redop != "none";
    let rooted = row.root.is_some_and(|r| r >= 0);
    // A per-rank count (all-gather, reduce-scatter, all-to-all) is the size over the
    // ranks; the others count the whole buffer. Where the dtype is unknown, the ratio says.
    let per_rank = match dtype_bytes(&row.dtype) {
        Some(e) => row.count.saturating_mul(e) < row.bytes,
        None => ratio < 1.0 - 1e-3,
    };
    // A test that checks out of place but not in place (`N/A`) cannot run in place.
    let in_place_unchecked = row.wrong[1] == "N/A" && row.wrong[0] != "N/A";
    let kind = match (reduces, rooted) {
        (true, true) => TestKind::Reduce,
        (false, true) => TestKind::Broadcast,
        (true, false) if per_rank => TestKind::ReduceScatter,
        (true, false) if ratio > 1.0 + 1e-3 => TestKind::AllReduce,
        // sendrecv prints `sum` too, and checks out of place only (with -c 0 nothing is
        // checked and the two read alike: an all-reduce of 2 ranks is taken).
        (true, false) if in_place_unchecked => TestKind::SendRecv,
        (true, false) => TestKind::AllReduce,
        (false, false) if !per_rank => TestKind::SendRecv,
        (false, false) if in_place_unchecked => TestKind::AllToAll,
        (false, false) => TestKind::AllGather,
    };
    let how = format!(
        "from the columns: redop {}, root {}, busbw/algbw {ratio:.3}{} (no \"# Collective test starting\" line)",
        if row.redop.is_empty() { "absent" } else { &row.redop },
        row.root.map_or("absent".to_string(), |r| r.to_string()),
        if kind == TestKind::AllToAll { ", in-place not checked" } else { "" }
    );
    Some((kind, how))
}

/// Bytes of an nccl-tests type name (`-d`), where it is one.
fn dtype_bytes(name: &str) -> Option<u64> {
    Some(match name {
        "int8" | "uint8" | "char" | "f8e4m3" | "f8e5m2" => 1,
        "half" | "bfloat16" | "float16" => 2,
        "float" | "int32" | "uint32" | "int" => 4,
        "double" | "int64" | "uint64" => 8,
        _ => return None,
    })
}

/// Ranks: given, from the rank lines, or from the printed busbw/algbw (their median).
fn ranks_of(
    given: Option<usize>,
    devices: &[RankDevice],
    parsed: &[RawRow],
    kind: TestKind,
) -> Result<(usize, String), NcclError> {
    // The printed busbw/algbw (their median over rows of at least 1 GB/s) says how many
    // ranks a collective whose bus factor depends on them had.
    let mut ratios: Vec<f64> = parsed
        .iter()
        .flat_map(|p| p.halves.iter().map(|h| (h[1], h[2])))
        .filter(|(a, b)| a.value >= 1.0 && b.value > 0.0)
        .map(|(a, b)| b.value / a.value)
        .collect();
    ratios.sort_by(f64::total_cmp);
    let factor = ratios.get(ratios.len() / 2).copied();
    let from_ratio = factor.and_then(|f| kind.ranks_from_factor(f).map(|n| (n, f)));
    // All-gather, reduce-scatter and all-to-all print a count per rank: the size over
    // it says the ranks exactly (busbw/algbw = (n−1)/n cannot tell 2,159 from 2,160).
    let per_rank = matches!(kind, TestKind::AllGather | TestKind::ReduceScatter | TestKind::AllToAll);
    let counted: Vec<u64> = parsed
        .iter()
        .filter(|_| per_rank)
        .filter_map(|p| {
            let per = p.count.checked_mul(dtype_bytes(&p.dtype)?)?;
            (per > 0 && p.bytes % per == 0).then(|| p.bytes / per)
        })
        .collect();
    let from_count = match counted.first() {
        Some(&n) if n >= 1 && counted.iter().all(|&m| m == n) && counted.len() == parsed.len() => Some(n),
        _ => None,
    };
    if let Some(n) = from_count.filter(|&n| n > MAX_RANKS as u64) {
        return Err(NcclError::BadInput {
            field: "ranks".into(),
            message: format!("size / (count × type size) = {n} ranks in every row; at most {MAX_RANKS} are read"),
        });
    }
    let from_count = from_count.map(|n| n as usize);
    let (ranks, ranks_from) = match given {
        Some(0) => return Err(NcclError::BadInput { field: "ranks".into(), message: "0: at least 1".into() }),
        Some(r) if r > MAX_RANKS => {
            return Err(NcclError::BadInput { field: "ranks".into(), message: format!("{r}: at most {MAX_RANKS}") })
        }
        Some(r) => (r, "given".to_string()),
        // An excerpt may list some ranks only: the highest index says at least how many,
        // and busbw/algbw more where the lines were cut short.
        None if !devices.is_empty() => {
            let highest = devices.iter().map(|d| d.rank).max().unwrap_or(0) + 1;
            let listed = devices.len();
            match from_count.map(|n| (n, 0.0)).or(from_ratio) {
                Some((n, _)) if from_count.is_some() && n != listed => (
                    n,
                    format!("size / (count × type size) = {n} in every row (the rank lines list {listed}, up to rank {})", highest - 1),
                ),
                Some((n, f)) if n as f64 > highest as f64 * 1.05 => (
                    n,
                    format!("busbw/algbw = {f:.4} in the rows: about {n} ranks (the rank lines list {listed}, up to rank {})", highest - 1),
                ),
                _ if highest > listed => {
                    (highest, format!("rank lines (the highest is rank {}; {listed} listed)", highest - 1))
                }
                _ => (listed, "rank lines".to_string()),
            }
        }
        None => match (from_count, from_ratio) {
            (Some(n), _) => (n, format!("size / (count × type size) = {n} in every row (no rank lines)")),
            (None, Some((n, f))) => (n, format!("busbw/algbw = {f:.3} in the rows (no rank lines)")),
            (None, None) if kind.bus_factor(2) == 1.0 => (0, "not needed (busbw = algbw)".into()),
            (None, None) => {
                return Err(NcclError::BadInput {
                    field: "ranks".into(),
                    message: "the output lists no ranks and its busbw/algbw does not say how many; give --ranks".into(),
                })
            }
        },
    };
    if kind.bus_factor(2) != 1.0 && ranks < 2 {
        return Err(NcclError::BadInput { field: "ranks".into(), message: format!("{ranks}: at least 2") });
    }
    Ok((ranks, ranks_from))
}

/// A row as read, before the ranks (and so the bus factor) are known.
struct RawRow {
    line: usize,
    bytes: u64,
    count: u64,
    dtype: String,
    redop: String,
    root: Option<i64>,
    /// [out-of-place, in-place] × [time, algbw, busbw]
    halves: [[Printed; 3]; 2],
    wrong: [String; 2],
}

/// `#  Rank  0 Group  0 Pid  12345 on   host1 device  0 [0x07] NVIDIA H100` (the text
/// after "Rank"); older releases have no Group.
fn rank_line(rest: &str) -> Option<RankDevice> {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let rank = words.first()?.parse().ok()?;
    let at = |key: &str| words.iter().position(|w| *w == key);
    let group = at("Group").and_then(|i| words.get(i + 1)).and_then(|w| w.parse().ok()).unwrap_or(0);
    let host = words.get(at("on")? + 1)?.to_string();
    let d = at("device")?;
    let device = words.get(d + 1)?.parse().ok()?;
    let name = words.get(d + 3..).map(|w| w.join(" ")).unwrap_or_default();
    Some(RankDevice { rank, group, host, device, name })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 000 §8.8.1's sample: `mpirun -np 8 all_reduce_perf -b 8 -e 2G -f 2 -g 1`,
    /// the old layout (no root, `error`), no header or rank lines.
    pub const SEED_SAMPLE: &str = "\
#                                                       out-of-place                       in-place
#         size        count    type    redop     time  algbw   busbw   error     time  algbw   busbw   error
#          (B)   (elements)                    (us) (GB/s) (GB/s)              (us) (GB/s) (GB/s)
     1048576       262144   float     sum    153.2   6.84   11.97  0.00    152.1   6.89   12.06  0.00
   134217728     33554432   float     sum   3184.2  42.15   73.67  0.00   3180.8  42.20   73.75  0.00
  1073741824    268435456   float     sum    17145  62.66  109.63  0.00    17125  62.70  109.72  0.00
";

    #[test]
    fn the_seed_sample_reads_and_its_inconsistent_figures_are_found() {
        let o = parse(SEED_SAMPLE, Some(TestKind::AllReduce), None).unwrap();
        // 11.97 / 6.84 = 1.750 = 2(n−1)/n: n = 8, as `mpirun -np 8` says.
        assert_eq!(o.ranks, 8);
        assert_eq!(o.rows.len(), 3);
        let r = &o.rows[0];
        assert_eq!((r.bytes, r.count, r.dtype.as_str(), r.root), (1048576, 262144, "float", None));
        // 1048576 B / 153.2 us = 6.8445 GB/s; × 1.75 = 11.978: printed 6.84 and 11.97 agree
        // within their digits and the time's (±0.05 us).
        assert!((r.out_of_place.algbw_recomputed - 6.8445).abs() < 1e-4);
        assert!(r.out_of_place.consistent && r.in_place.consistent);
        // 134217728 / 3184.2 = 42.151 GB/s, × 1.75 = 73.76: the printed 73.67 is off by 0.09.
        let r = &o.rows[1];
        assert!((r.out_of_place.busbw_recomputed - 73.765).abs() < 1e-3);
        assert!(!r.out_of_place.consistent);
        // 1073741824 / 17145 = 62.627 (±0.002 for a time printed to 1 us); printed 62.66.
        let r = &o.rows[2];
        assert!((r.out_of_place.algbw_recomputed - 62.627).abs() < 1e-3);
        assert!(!r.out_of_place.consistent);
        // 1073741824 / 17125 = 62.700 and × 1.75 = 109.73: printed 62.70, 109.72 agree.
        assert!(r.in_place.consistent);
    }

    #[test]
    fn bad_rows_name_their_line() {
        let e = parse(
            "# Collective test starting: all_reduce_perf\n 8 2 float sum -1 1.0 0.0 0.0 0 1.0 0.0\n",
            None,
            Some(2),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 2: 11 columns; a row has 13"), "{e}");
        let text = "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n\
                    8 2 float sum -1 x 0.00 0.00 0 1.0 0.00 0.00 0\n";
        let e = parse(text, Some(TestKind::AllReduce), Some(2)).unwrap_err().to_string();
        assert!(e.starts_with("line 2: time \"x\""), "{e}");
        // No test named: the columns say which (redop sum, no per-rank count, busbw/algbw 1.75).
        let o = parse(SEED_SAMPLE, None, None).unwrap();
        assert_eq!((o.kind, o.ranks), (TestKind::AllReduce, 8));
        assert!(o.kind_from.contains("columns"), "{}", o.kind_from);
    }

    /// Outputs as users paste them: launcher tags at the start and in the middle of lines,
    /// no header, an excerpt of the rank lines; each test told from its columns.
    #[test]
    fn pasted_outputs_without_a_header_are_read_from_their_columns() {
        let row = |size: u64, count: u64, redop: &str, algbw: f64, busbw: f64, in_place_wrong: &str| {
            let t = size as f64 / (algbw * 1e3);
            format!("{size} {count} float {redop} -1 {t:.1} {algbw:.2} {busbw:.2} 0 {t:.1} {algbw:.2} {busbw:.2} {in_place_wrong}\n")
        };
        let g = 1u64 << 30;
        let cases = [
            (row(g, g / 4, "sum", 200.0, 375.0, "0"), TestKind::AllReduce),
            (row(g, g / 64, "sum", 200.0, 187.5, "0"), TestKind::ReduceScatter),
            (row(g, g / 64, "none", 200.0, 187.5, "0"), TestKind::AllGather),
            (row(g, g / 64, "none", 200.0, 187.5, "N/A"), TestKind::AllToAll),
            (row(g, g / 4, "sum", 20.0, 20.0, "N/A"), TestKind::SendRecv),
        ];
        for (text, kind) in cases {
            assert_eq!(parse(&text, None, None).unwrap().kind, kind, "{text}");
            let tagged: String = text.split(' ').collect::<Vec<_>>().join("[1,0]<stdout>: ");
            assert_eq!(parse(&format!("[1,0]<stdout>:{tagged}"), None, None).unwrap().kind, kind, "{tagged}");
            assert_eq!(parse(&format!(" 3: {text}"), None, None).unwrap().kind, kind);
        }
        // Rank lines of ranks 0 and 71 only: 72 ranks at least, not 2.
        let text = format!(
            "#  Rank  0 Group  0 Pid 1 on h0 device  0 [0x01] NVIDIA B200\n\
             #  Rank 71 Group  0 Pid 2 on h9 device  7 [0x01] NVIDIA B200\n{}",
            row(g, g / 4, "sum", 400.0, 400.0 * 2.0 * 71.0 / 72.0, "0")
        );
        assert_eq!(parse(&text, None, None).unwrap().ranks, 72);
    }

    #[test]
    fn printed_resolution_follows_the_digits() {
        assert_eq!(printed("153.2").unwrap().resolution, 0.05);
        assert_eq!(printed("17145").unwrap().resolution, 0.5);
        assert!((printed("1.5e+03").unwrap().resolution - 50.0).abs() < 1e-9);
        assert!(printed("N/A").is_none() && printed("inf").is_none());
    }

    const COLUMNS: &str = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";

    /// The header's `nGpus` is how many GPUs one thread drives; absent, unreadable or not
    /// dividing the ranks, none.
    #[test]
    fn the_gpus_per_thread_come_from_the_header() {
        let row = "1048576 262144 float sum -1 20.00 52.43 91.75 0 20.00 52.43 91.75 0";
        let with = |header: &str| {
            parse(&format!("# Collective test starting: all_reduce_perf\n{header}\n{COLUMNS}{row}\n"), None, None)
                .unwrap()
                .gpus_per_thread
        };
        assert_eq!(with("# nThread 1 nGpus 8 minBytes 8 maxBytes 8"), Some(8));
        assert_eq!(with("# nThread 4 nGpus 1 minBytes 8"), Some(1));
        assert_eq!(with("# nThread 1 nGpus eight"), None);
        assert_eq!(with("# nThread 1 nGpus 0"), None);
        // The row's busbw / algbw says 8 ranks: 3 GPUs per thread cannot make them.
        assert_eq!(with("# nThread 1 nGpus 3 minBytes 8"), None);
        assert_eq!(with("# nThread 1 nGpus"), None);
        assert_eq!(with("#"), None);
    }

    /// Cluster scripts concatenate tests: each is read as its own, with the file's line
    /// numbers; with no start line, a second `# nThread` header after rows starts one.
    #[test]
    fn several_tests_in_one_file_are_read_as_several() {
        let test = |name: &str, row: &str| {
            format!("# Collective test starting: {name}\n# nThread 1 nGpus 1 minBytes 8\n{COLUMNS}{row}\n")
        };
        let text = test("all_reduce_perf_mpi", "1048576 262144 float sum -1 20.00 52.43 91.75 0 20.00 52.43 91.75 0")
            + &test("all_gather_perf", "1048576 32768 float none -1 20.00 52.43 45.88 0 20.00 52.43 45.88 0");
        let tests = parse_all(&text, None, None).unwrap().read;
        assert_eq!(
            tests.iter().map(|t| (t.kind, t.ranks)).collect::<Vec<_>>(),
            [(TestKind::AllReduce, 8), (TestKind::AllGather, 8)]
        );
        assert_eq!(tests[1].rows[0].line, 8, "line numbers are the file's");
        // No start lines: the second header after rows splits.
        let bare = text.lines().filter(|l| !l.contains("starting")).collect::<Vec<_>>().join("\n");
        assert_eq!(split_tests(&bare).len(), 2);
        // One test is one part, whatever its header says.
        assert_eq!(split_tests(&test("all_reduce_perf", "8 2 float sum -1 1.0 0.0 0.0 0 1.0 0.0 0.0 0")).len(), 1);
    }

    /// The oldest layout (no redop, no root, an `error` column) and the old relative
    /// error read by nccl-tests' own tolerance, not as a count of wrong elements.
    #[test]
    fn old_layouts_and_the_error_column() {
        let oldest =
            "#      bytes             N    type      time  algbw  busbw    res      time  algbw  busbw    res\n\
                      134217728 33554432 float 1544.3 86.91 152.10 1e-07 1543.7 86.95 152.16 0e+00\n";
        let o = parse(oldest, None, None).unwrap();
        assert_eq!((o.kind, o.ranks), (TestKind::AllReduce, 8));
        assert_eq!(o.rows[0].redop, "");
        assert!(!wrong_results(&o.rows[0].out_of_place.wrong, "float"), "1e-07 is within float's 1e-5");
        assert!(wrong_results("2e-03", "float") && !wrong_results("2e-03", "half"));
        assert!(wrong_results("1", "float") && !wrong_results("0", "int32") && !wrong_results("N/A", "float"));
        assert!(wrong_results("1e-300", "int32"), "integers are exact");
        // Without a redop column only an all-reduce's busbw tells what ran.
        let gather = "#  bytes N type time algbw busbw res time algbw busbw res\n\
                      1048576 32768 float 20.00 52.43 45.88 0e+00 20.00 52.43 45.88 0e+00\n";
        assert!(parse(gather, None, None).unwrap_err().to_string().contains("--collective"));
        assert_eq!(parse(gather, Some(TestKind::AllGather), None).unwrap().ranks, 8);
    }

    /// An all-to-all's per-rank count gives the rank count exactly where busbw/algbw
    /// ((n−1)/n) cannot; it overrides rank lines that list fewer.
    #[test]
    fn per_rank_counts_give_the_ranks_exactly() {
        let n = 2160u64;
        let row = |k: u64| {
            let bytes = k * n * 4;
            let t = bytes as f64 / 20e3;
            format!("{bytes} {k} float none -1 {t:.1} 20.00 19.99 N/A {t:.1} 20.00 19.99 N/A\n")
        };
        let text = format!("# Collective test starting: alltoall_perf\n{COLUMNS}{}{}", row(1024), row(4096));
        let o = parse(&text, None, None).unwrap();
        assert_eq!(o.ranks, 2160, "{}", o.ranks_from);
        let excerpt = format!("#  Rank  0 Group  0 Pid 1 on h0 device  0 [0x18] H100\n{text}");
        let o = parse(&excerpt, None, None).unwrap();
        assert_eq!(o.ranks, 2160, "{}", o.ranks_from);
        assert!(o.ranks_from.contains("count"), "{}", o.ranks_from);
    }
}

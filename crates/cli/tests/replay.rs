//! The guard for refactors: every invocation in `replay/cases.txt` (plan, sim,
//! plan-training, model, topo, analyze, explain-nccl, schedule; markdown and JSON; good
//! and bad input) prints what `replay/expected/` recorded, byte for byte: exit code,
//! standard output, standard error when it fails, and the file a `{OUT}` argument named.
//! Wall-clock fields (the simulator's `wall`) are masked. A change of behaviour that is
//! meant records them again with `RAILYARD_BLESS=1` and shows up, case by case, in the
//! diff. Outputs over `WHOLE_LIMIT` bytes are kept as a digest and their first lines.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Longer outputs are recorded as their length, digest and first `HEAD_LINES` lines.
const WHOLE_LIMIT: usize = 96 << 10;
const HEAD_LINES: usize = 60;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/replay")
}

/// FNV-1a, 64 bits: a stable digest for names and long outputs (not a security measure).
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A file name for a case: its words, then a digest of the whole line.
fn file_name(line: &str) -> String {
    let words: String =
        line.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.=".contains(c) { c } else { '_' }).take(72).collect();
    format!("{words}-{:08x}.txt", fnv(line.as_bytes()) as u32)
}

/// The simulator's wall-clock time: its JSON field and its table's last column.
fn mask_wall(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_wall_table = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        if let Some(at) = body.find("\"wall_secs\": ") {
            let start = at + "\"wall_secs\": ".len();
            let end = body[start..].find(',').map_or(body.len(), |e| start + e);
            out.push_str(&body[..start]);
            out.push_str("\"*\"");
            out.push_str(&body[end..]);
            out.push_str(&line[body.len()..]);
            continue;
        }
        let cells: Vec<&str> = body.split('|').collect();
        let table_row = body.starts_with('|') && body.ends_with('|') && cells.len() >= 3;
        if table_row && cells[cells.len() - 2].trim() == "wall" {
            in_wall_table = true;
        } else if !table_row {
            in_wall_table = false;
        }
        if in_wall_table && table_row {
            out.push_str(&cells[..cells.len() - 2].join("|"));
            out.push_str("| * |");
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
    }
    out
}

/// What one invocation printed, as recorded.
fn record(line: &str, scratch: &Path, index: usize) -> String {
    let out_path = scratch.join(format!("out-{index}"));
    let out_text = out_path.to_string_lossy().into_owned();
    let args: Vec<String> = line.split_whitespace().map(|a| a.replace("{OUT}", &out_text)).collect();
    let run = Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(&args)
        .current_dir(root())
        .output()
        .expect("the railyard binary runs");
    let mut text = format!("$ railyard {line}\nexit {}\n", run.status.code().unwrap_or(-1));
    text.push_str(&section("stdout", &run.stdout));
    if !run.status.success() {
        text.push_str(&section("stderr", &run.stderr));
    }
    if let Ok(file) = std::fs::read(&out_path) {
        text.push_str(&section("{OUT}", &file));
        let _ = std::fs::remove_file(&out_path);
    }
    mask_wall(&text.replace(&out_text, "{OUT}"))
}

fn section(name: &str, bytes: &[u8]) -> String {
    let body = String::from_utf8_lossy(bytes);
    if bytes.len() <= WHOLE_LIMIT {
        return format!("--- {name}\n{body}\n");
    }
    let masked = mask_wall(&body);
    let head: Vec<&str> = masked.lines().take(HEAD_LINES).collect();
    format!(
        "--- {name}: {} bytes (wall-clock fields masked), fnv1a64 {:016x}; the first {HEAD_LINES} lines:\n{}\n",
        masked.len(),
        fnv(masked.as_bytes()),
        head.join("\n")
    )
}

/// The first line where two records differ, with both versions.
fn first_difference(want: &str, got: &str) -> String {
    for (i, (w, g)) in want.lines().zip(got.lines()).enumerate() {
        if w != g {
            return format!("line {}:\n  recorded: {w}\n  now:      {g}", i + 1);
        }
    }
    format!("lengths differ: {} recorded lines, {} now", want.lines().count(), got.lines().count())
}

#[test]
fn every_recorded_invocation_prints_what_it_printed() {
    let cases_text = std::fs::read_to_string(here().join("cases.txt")).expect("cases.txt");
    let cases: Vec<&str> = cases_text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    assert!(cases.len() >= 300, "{} cases", cases.len());
    let names: std::collections::HashSet<String> = cases.iter().map(|c| file_name(c)).collect();
    assert_eq!(names.len(), cases.len(), "a case is listed twice");
    let scratch = std::env::temp_dir().join(format!("railyard-replay-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let workers = 2;
    let records: Vec<(usize, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (cases, scratch) = (&cases, &scratch);
                s.spawn(move || {
                    (w..cases.len()).step_by(workers).map(|i| (i, record(cases[i], scratch, i))).collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a replay worker")).collect()
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let expected = here().join("expected");
    if std::env::var_os("RAILYARD_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&expected);
        std::fs::create_dir_all(&expected).unwrap();
        for (i, text) in &records {
            std::fs::write(expected.join(file_name(cases[*i])), text).unwrap();
        }
        return;
    }
    let mut failures = Vec::new();
    for (i, got) in &records {
        let path = expected.join(file_name(cases[*i]));
        match std::fs::read_to_string(&path) {
            Ok(want) if want == *got => {}
            Ok(want) => failures.push(format!("{}: {}", cases[*i], first_difference(&want, got))),
            Err(_) => failures.push(format!("{}: nothing recorded ({})", cases[*i], path.display())),
        }
    }
    let recorded = std::fs::read_dir(&expected).map(|d| d.count()).unwrap_or(0);
    assert_eq!(recorded, cases.len(), "expected/ holds files of no case: RAILYARD_BLESS=1 records them again");
    assert!(
        failures.is_empty(),
        "{} of {} invocations print something else (RAILYARD_BLESS=1 records them again if that is meant):\n\n{}",
        failures.len(),
        cases.len(),
        failures.iter().take(12).cloned().collect::<Vec<_>>().join("\n\n")
    );
}

#[test]
fn wall_clock_fields_are_masked() {
    let json = "  {\n      \"wall_secs\": 0.000129282,\n      \"x\": 1\n";
    assert_eq!(mask_wall(json), "  {\n      \"wall_secs\": \"*\",\n      \"x\": 1\n");
    let md = "| algorithm | model | wall   |\n|-----------|-------|--------|\n| ring      | 1 ms  | 0.01 s |\n\nafter | x |\n";
    assert_eq!(
        mask_wall(md),
        "| algorithm | model | * |\n|-----------|-------| * |\n| ring      | 1 ms  | * |\n\nafter | x |\n"
    );
}

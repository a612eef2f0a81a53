//! Every `railyard` command the README and the docs show is run. Where the docs show its
//! output, every line of it (all but the "…" that mark cuts) is found, in order, in what
//! the command prints today; where they do not, the command must succeed. The docs cannot
//! drift from the tool.
//!
//! Commands run in a scratch directory holding copies of the repository's sample files
//! (a documented `-o` writes there, not into the tree), following the block's `cd` and
//! `\` continuations. Left out, each for its reason: `perf` and `launch` (their output is
//! measured on this machine), `sweep` and `validate` (minutes of work that tests of their
//! own cover), commands on placeholder files the reader supplies (`topo.txt`, `GRID.toml`,
//! `train.py`, ...); tables' `wall` columns are masked (measured).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A ```sh block: its command lines (continuations joined) and the plain ``` block that
/// follows it, if any.
struct Example {
    lines: Vec<String>,
    shown: Vec<String>,
}

fn examples(doc: &str) -> Vec<Example> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "```sh" {
            i += 1;
            continue;
        }
        let mut joined: Vec<String> = Vec::new();
        let mut pending = String::new();
        i += 1;
        while i < lines.len() && lines[i].trim() != "```" {
            let line = lines[i].trim();
            match line.strip_suffix('\\') {
                Some(head) => pending += &format!("{head} "),
                None => joined.push(std::mem::take(&mut pending) + line),
            }
            i += 1;
        }
        i += 1;
        let mut shown = Vec::new();
        if i < lines.len() && lines[i].trim() == "```" {
            i += 1;
            while i < lines.len() && lines[i].trim() != "```" {
                shown.push(lines[i].to_string());
                i += 1;
            }
            i += 1;
        }
        out.push(Example { lines: joined, shown });
    }
    out
}

/// Shell words: whitespace-separated, '…' and "…" quoting; a trailing "  # comment" cut.
fn words(line: &str) -> Vec<String> {
    let line = line.split("  #").next().unwrap_or(line);
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

/// Placeholders the reader supplies, and commands left out (see the module comment).
fn left_out(args: &[String]) -> bool {
    const PLACEHOLDERS: [&str; 8] =
        ["topo.txt", "GRID", "nccl_topo.xml", "./my_program", "train.py", "/tmp/fr", "...", "FILE"];
    matches!(args.first().map(String::as_str), Some("perf" | "launch" | "sweep" | "validate"))
        || args.iter().any(|a| PLACEHOLDERS.iter().any(|p| a.contains(p)))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().filter_map(Result::ok) {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("railyard-docs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for shared in ["topologies", "corpus", "examples", "samples", "scenarios"] {
        copy_dir(&repo().join(shared), &dir.join(shared));
    }
    dir
}

fn run(dir: &Path, args: &[String], what: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the railyard binary runs");
    assert!(out.status.success(), "{what}: railyard {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A table row with the cells of columns named "wall" (measured seconds) blanked.
fn masked(line: &str, wall: &[usize]) -> String {
    if !line.starts_with('|') || wall.is_empty() {
        return line.to_string();
    }
    line.split('|').enumerate().map(|(i, c)| if wall.contains(&i) { "*" } else { c }).collect::<Vec<_>>().join("|")
}

/// The columns named "wall" of a table header line.
fn wall_columns(line: &str) -> Vec<usize> {
    line.split('|').enumerate().filter(|(_, c)| c.trim() == "wall").map(|(i, _)| i).collect()
}

fn documents() -> Vec<PathBuf> {
    let mut docs = vec![repo().join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    docs.extend(pages);
    docs
}

#[test]
fn every_documented_command_runs_and_prints_what_the_docs_show() {
    let root = scratch();
    let (mut checked, mut ran) = (0, 0);
    for path in documents() {
        let doc = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for example in examples(&doc) {
            let mut dir = root.clone();
            let mut commands = Vec::new();
            for line in &example.lines {
                let w = words(line);
                match w.first().map(String::as_str) {
                    Some("cd") if w.len() == 2 => dir = dir.join(&w[1]),
                    Some("railyard") => commands.push(w[1..].to_vec()),
                    _ => {}
                }
            }
            if commands.is_empty() || commands.iter().any(|c| left_out(c)) {
                continue;
            }
            let printed: String = commands.iter().map(|c| run(&dir, c, &name)).collect();
            ran += commands.len();
            if example.shown.is_empty() {
                continue;
            }
            let printed: Vec<&str> = printed.lines().map(str::trim_end).collect();
            let mut at = 0;
            let mut wall = Vec::new();
            for line in example.shown.iter().map(|l| l.trim_end()).filter(|l| *l != "…") {
                if line.starts_with('|') && !wall_columns(line).is_empty() {
                    wall = wall_columns(line);
                }
                let line = masked(line, &wall);
                match printed[at..].iter().position(|p| masked(p, &wall) == line) {
                    Some(k) => at += k + 1,
                    None => {
                        let shown: Vec<String> = commands.iter().map(|c| c.join(" ")).collect();
                        panic!("{name}: `railyard {}` no longer prints, in order:\n{line}", shown.join("; railyard "))
                    }
                }
            }
            checked += commands.len();
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    assert!(checked >= 15 && ran >= 30, "only {ran} documented commands ran, {checked} with their output");
}

#[test]
fn shell_words_follow_quotes_and_cut_comments() {
    assert_eq!(
        words("launch -n 2 -- sh -c 'echo \"rank $RANK\"'  # a note"),
        ["launch", "-n", "2", "--", "sh", "-c", "echo \"rank $RANK\""]
    );
    assert_eq!(words("plan --size 1GiB"), ["plan", "--size", "1GiB"]);
}

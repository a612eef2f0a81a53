//! Every `railyard` command the README and the docs show with its output is run, and
//! every line of the output shown (all but the "…" that mark cuts) is found, in order, in
//! what the command prints today: the docs cannot drift from the tool. Commands run in a
//! scratch directory that sees the repository's sample files, so the files they write
//! stay out of the tree. `perf` and `launch` are left out, and tables' `wall` columns
//! masked: they are measured on this machine.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (commands of a ```sh block, the plain ``` block that follows it).
fn examples(doc: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "```sh" {
            i += 1;
            continue;
        }
        let mut commands = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim() != "```" {
            if let Some(args) = lines[i].trim().strip_prefix("railyard ") {
                // A comment after the command ("  # what it shows").
                let args = args.split("  #").next().unwrap_or(args).trim();
                commands.push(args.to_string());
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
        if !commands.is_empty() {
            out.push((commands, shown));
        }
    }
    out
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("railyard-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for shared in ["topologies", "corpus", "examples", "samples", "scenarios"] {
        std::os::unix::fs::symlink(repo().join(shared), dir.join(shared)).unwrap();
    }
    dir
}

fn run(dir: &Path, args: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(args.split_whitespace())
        .current_dir(dir)
        .output()
        .expect("the railyard binary runs");
    assert!(out.status.success(), "railyard {args}: {}", String::from_utf8_lossy(&out.stderr));
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
fn every_documented_command_prints_what_the_docs_show() {
    let dir = scratch();
    let mut ran = 0;
    for path in documents() {
        let doc = std::fs::read_to_string(&path).unwrap();
        for (commands, shown) in examples(&doc) {
            if shown.is_empty() || commands.iter().any(|c| c.starts_with("perf ") || c.starts_with("launch ")) {
                continue;
            }
            let printed: String = commands.iter().map(|c| run(&dir, c)).collect();
            let printed: Vec<&str> = printed.lines().map(str::trim_end).collect();
            let mut at = 0;
            let mut wall = Vec::new();
            for line in shown.iter().map(|l| l.trim_end()).filter(|l| *l != "…") {
                if line.starts_with('|') && !wall_columns(line).is_empty() {
                    wall = wall_columns(line);
                }
                let line = masked(line, &wall);
                match printed[at..].iter().position(|p| masked(p, &wall) == line) {
                    Some(k) => at += k + 1,
                    None => panic!(
                        "{}: `railyard {}` no longer prints, in order:\n{line}",
                        path.display(),
                        commands.join("; railyard ")
                    ),
                }
            }
            ran += commands.len();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ran >= 15, "only {ran} documented commands found");
}

//! Helpers shared by the CLI tests: run the built `railyard` binary.
// Each test file uses a different subset of these helpers.
#![allow(dead_code)]

use std::process::Command;

pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn railyard(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_railyard")).args(args).output().expect("the railyard binary runs");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run and parse stdout as JSON; panics with stderr when the command fails.
pub fn json(args: &[&str]) -> serde_json::Value {
    let out = railyard(args);
    assert_eq!(out.code, 0, "railyard {args:?} failed: {}", out.stderr);
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("railyard {args:?} printed no JSON ({e}): {}", out.stdout))
}

pub const MIB: f64 = 1024.0 * 1024.0;

/// Every scenario model of `railyard model`, by name.
pub fn models() -> Vec<&'static str> {
    railyard_netmodels::registry::MODELS.iter().map(|m| m.name).collect()
}

/// Check that the block of `path` between the line holding `begin` and `end` is `body`
/// (a document section the tool writes); with RAILYARD_BLESS set, rewrite it instead and
/// return true. Rewrites of one file are serialised: several tests keep blocks in it.
pub fn generated_block(path: &std::path::Path, begin: &str, end: &str, body: &str) -> bool {
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let doc = std::fs::read_to_string(path).unwrap();
    let at = doc.find(begin).unwrap_or_else(|| panic!("{} has no {begin} block", path.display()));
    let body_start = at + doc[at..].find('\n').unwrap() + 1;
    let stop = doc.find(end).unwrap_or_else(|| panic!("{} does not close the {begin} block", path.display()));
    if std::env::var_os("RAILYARD_BLESS").is_some() {
        std::fs::write(path, format!("{}{body}{}", &doc[..body_start], &doc[stop..])).unwrap();
        return true;
    }
    assert_eq!(&doc[body_start..stop], body, "{} is stale ({begin}): run with RAILYARD_BLESS=1", path.display());
    false
}

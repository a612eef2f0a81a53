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

//! The README shows what `railyard plan` prints on its defaults; it is the tool's own
//! output, checked here, not a copy that drifts (it once showed 4 algorithms and
//! "5760 MiB" while the tool printed 8 and "5.625 GiB"). `RAILYARD_BLESS=1` rewrites it.

mod common;
use common::{generated_block, railyard};
use std::path::PathBuf;

const BEGIN: &str = "<!-- plan:begin";
const END: &str = "<!-- plan:end -->";

/// The table of `plan` and the lines that explain it (up to the chosen algorithm).
fn plan_table() -> String {
    let out = railyard(&["plan"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let start = out.stdout.find("| algorithm").expect("plan prints a table");
    let end = out.stdout[start..].find("\nChosen:").map_or(out.stdout.len(), |e| start + e);
    out.stdout[start..end].trim_end().to_string()
}

#[test]
fn the_readme_plan_table_is_the_tools_output() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    generated_block(&path, BEGIN, END, &format!("```\n{}\n```\n", plan_table()));
}

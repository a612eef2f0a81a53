//! The README shows what `railyard plan` prints on its defaults; it is the tool's own
//! output, checked here, not a copy that drifts (it once showed 4 algorithms and
//! "5760 MiB" while the tool printed 8 and "5.625 GiB"). `RAILYARD_BLESS=1` rewrites it.

mod common;
use common::railyard;
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
    let readme = std::fs::read_to_string(&path).unwrap();
    let begin = readme.find(BEGIN).expect("README has the plan block");
    let body_start = begin + readme[begin..].find('\n').unwrap() + 1;
    let end = readme.find(END).expect("README closes the plan block");
    let block = format!("```\n{}\n```\n", plan_table());
    if std::env::var_os("RAILYARD_BLESS").is_some() {
        std::fs::write(&path, format!("{}{block}{}", &readme[..body_start], &readme[end..])).unwrap();
        return;
    }
    assert_eq!(&readme[body_start..end], block, "README's plan table is stale: run with RAILYARD_BLESS=1");
}

//! Default outputs speak the user's words: no citation of the book chapters railyard
//! reproduces ("seed 001 §7.2.1"), no section signs and no CJK characters, on every
//! subcommand run as a newcomer first runs it. Sources live in docs/sources.md; the
//! chapters' worked examples (`plan-training --examples`) keep theirs.

mod common;
use common::{models, railyard};

fn jargon(text: &str) -> Option<String> {
    text.lines()
        .find(|l| {
            l.to_lowercase().contains("seed")
                || l.contains('§')
                || l.chars()
                    .any(|c| matches!(c, '\u{3000}'..='\u{9fff}' | '\u{ac00}'..='\u{d7af}' | '\u{f900}'..='\u{faff}'))
        })
        .map(str::to_string)
}

#[test]
fn default_outputs_have_no_chapter_citations() {
    let mut runs: Vec<Vec<String>> = [
        "plan",
        "sim",
        "topo list",
        "topo show dgx-h100",
        "topo show hgx-h100x2",
        "plan-training",
        "explain-nccl",
        "model",
        "model clos-cut",
        "schedule show --algo ring",
        "schedule check --algo ring --ranks 2-4",
        "--help",
        concat!(
            "analyze nccl-tests ",
            env!("CARGO_MANIFEST_DIR"),
            "/../../corpus/nccl-tests/hopper/h100-2n-ib-allreduce-default-nccl-tests-290.txt --topo dgx-h100:nodes=2"
        ),
    ]
    .iter()
    .map(|c| c.split_whitespace().map(String::from).collect())
    .collect();
    runs.extend(models().into_iter().map(|m| vec!["model".to_string(), m.to_string()]));
    for args in runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = railyard(&args);
        // `model` alone prints its list of models as usage (exit 2).
        let text = if out.stdout.is_empty() { out.stderr } else { out.stdout };
        assert!(!text.is_empty(), "railyard {args:?} printed nothing");
        if let Some(line) = jargon(&text) {
            panic!("railyard {}: {line}", args.join(" "));
        }
    }
}

//! Every MSCCL program of corpus/msccl (msccl-tools' example scripts, its solver and
//! autosynth plans, and deliberately broken copies; corpus/msccl/SOURCES.toml) read and
//! checked: railyard certifies exactly the programs an independent interpreter of
//! MSCCL's executor semantics (scripts/msccl_interp.py, its verdict recorded as
//! `interp`) finds correct — no wrong program certified, no correct one refused.

use std::path::PathBuf;

use railyard_schedule::{check, msccl};
use serde::Deserialize;

#[derive(Deserialize)]
struct Sources {
    file: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    name: String,
    interp: String,
}

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus/msccl")
}

/// railyard's verdict: Ok when the program reads and proves correct on one element per
/// chunk in every mode it runs in, else what refused it.
fn verdict(text: &str) -> Result<(), String> {
    let program = msccl::Program::parse(text).map_err(|e| e.to_string())?;
    for in_place in program.modes() {
        let schedule = program.schedule_mode(program.info.chunks, 4, in_place).map_err(|e| e.to_string())?;
        check(&schedule.expand()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[test]
fn railyard_certifies_exactly_the_programs_the_interpreter_finds_correct() {
    let sources: Sources =
        toml::from_str(&std::fs::read_to_string(corpus().join("SOURCES.toml")).expect("SOURCES.toml")).expect("parses");
    assert!(sources.file.len() >= 100, "{} programs", sources.file.len());
    let (mut certified, mut refused) = (0, 0);
    let mut disagree = Vec::new();
    for entry in &sources.file {
        let text = std::fs::read_to_string(corpus().join(&entry.name)).expect("the program is there");
        let ours = verdict(&text);
        match (&ours, entry.interp.as_str()) {
            (Ok(()), "correct") => certified += 1,
            (Err(_), verdict) if verdict != "correct" => refused += 1,
            (ours, interp) => disagree.push(format!("{}: interpreter {interp}, railyard {ours:?}", entry.name)),
        }
    }
    assert!(disagree.is_empty(), "{} disagreements:\n{}", disagree.len(), disagree.join("\n"));
    assert!(certified >= 80 && refused >= 20, "certified {certified}, refused {refused}");
}

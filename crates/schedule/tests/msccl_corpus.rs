//! Every MSCCL program of corpus/msccl (msccl-tools' example scripts, its solver and
//! autosynth plans, and deliberately broken copies; corpus/msccl/SOURCES.toml) read and
//! checked: railyard certifies exactly the programs an independent interpreter of
//! MSCCL's executor semantics (scripts/msccl_interp.py, its verdict recorded as
//! `interp`) finds correct — no wrong program certified, no correct one refused.

use std::path::PathBuf;

use railyard_schedule::{check, msccl, Collective};
use serde::Deserialize;

#[derive(Deserialize)]
struct Sources {
    file: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    name: String,
    interp: String,
    /// For a coll="custom" program: the collective the interpreter was told it is
    /// (`["--coll", NAME]`), and its verdict so.
    #[serde(default)]
    interp_args: Vec<String>,
    interp_with_args: Option<String>,
}

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus/msccl")
}

/// railyard's verdict: Ok when the program reads and proves correct on one element per
/// chunk in every mode it runs in, else what refused it; a custom program read as `as_`.
fn verdict(text: &str, as_: Option<Collective>) -> Result<(), String> {
    let program =
        msccl::Program::parse_as(text, msccl::ReadAs { custom: as_, root: None }).map_err(|e| e.to_string())?;
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
    let (mut certified, mut refused, mut read_as) = (0, 0, 0);
    let mut disagree = Vec::new();
    for entry in &sources.file {
        let text = std::fs::read_to_string(corpus().join(&entry.name)).expect("the program is there");
        let mut cases = vec![(verdict(&text, None), entry.interp.as_str())];
        // A custom program read as the collective the interpreter was told it is.
        let args: Vec<&str> = entry.interp_args.iter().map(String::as_str).collect();
        if let (["--coll", name], Some(with)) = (args.as_slice(), entry.interp_with_args.as_deref()) {
            let collective: Collective = name.parse().expect("a collective");
            cases.push((verdict(&text, Some(collective)), with));
            read_as += 1;
        }
        for (ours, interp) in cases {
            match (&ours, interp) {
                (Ok(()), "correct") => certified += 1,
                (Err(_), verdict) if verdict != "correct" => refused += 1,
                (ours, interp) => disagree.push(format!("{}: interpreter {interp}, railyard {ours:?}", entry.name)),
            }
        }
    }
    assert!(disagree.is_empty(), "{} disagreements:\n{}", disagree.len(), disagree.join("\n"));
    assert!(certified >= 80 && refused >= 20, "certified {certified}, refused {refused}");
    // The solver's broadcasts and reduces (coll="custom") were read as what they are.
    assert!(read_as >= 3, "{read_as} custom programs read as a collective");
}

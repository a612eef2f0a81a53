//! `railyard triage DIR`: read every rank's flight-recorder dump (RAILYARD_DUMP_DIR,
//! `railyard-trace-rank*.json`) and say which rank is behind, the first call where ranks
//! disagree (a desync: a different collective, size, dtype, op, root or algorithm at the
//! same sequence number, or calls in a different order), and the schedule step the
//! unfinished call waits on. The analysis is a pure function of the dumps (`triage`).
//! PyTorch's Flight Recorder dumps get the same analysis per process group
//! (`flight_recorder`).

mod flight_recorder;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use railyard_runtime::recorder::{CallRecord, CallState, Dump};
use serde::Serialize;

use crate::args::Format;

#[derive(Debug, Args)]
pub struct TriageArgs {
    /// The directory the ranks dumped to: railyard's (RAILYARD_DUMP_DIR), or PyTorch's
    /// Flight Recorder files (TORCH_FR_DUMP_TEMP_FILE's directory: <prefix><rank>, pickle or JSON)
    pub dir: PathBuf,
    /// For Flight Recorder dumps: the machine NCCL's tuner picks the stalled collective's
    /// algorithm on (a preset or topology file; default DGX H100 nodes of 8 GPUs)
    #[arg(long)]
    pub topo: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

/// Dump files read at most, and bytes per file (a bound on what triage loads).
const MAX_DUMPS: usize = 4096;
const MAX_DUMP_BYTES: u64 = 256 << 20;

/// What triage found.
#[derive(Debug, Serialize, PartialEq)]
pub struct Findings {
    pub ranks: Vec<usize>,
    /// Ranks of the job (from the dumps) with no dump.
    pub missing: Vec<usize>,
    /// Per rank: the last call it started, and its state.
    pub last_calls: Vec<(usize, u64, String)>,
    /// The ranks whose last call is the lowest, when not all are equal; else, while the
    /// others wait, the ranks that left no dump.
    pub behind: Option<Behind>,
    pub desync: Option<Desync>,
    /// The unfinished calls: who waits where.
    pub waiting: Vec<Waiting>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Behind {
    pub ranks: Vec<usize>,
    /// Their last call (absent: they left no dump).
    pub their_last_call: Option<u64>,
    pub others_reached: u64,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Desync {
    pub seq: u64,
    pub field: String,
    /// (rank, value, the call described) per distinct value.
    pub values: Vec<(usize, String, String)>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Waiting {
    pub rank: usize,
    pub seq: u64,
    pub call: String,
    pub round: u32,
    pub rounds: u32,
    pub state: String,
    pub error: Option<String>,
}

fn state_name(s: CallState) -> &'static str {
    match s {
        CallState::Running => "running",
        CallState::Done => "done",
        CallState::Failed => "failed",
    }
}

/// Analyse dumps (one per rank).
pub fn triage(dumps: &[Dump]) -> Findings {
    let mut ranks: Vec<usize> = dumps.iter().map(|d| d.rank).collect();
    ranks.sort_unstable();
    let size = dumps.iter().map(|d| d.size).max().unwrap_or(0);
    let missing: Vec<usize> = (0..size).filter(|r| !ranks.contains(r)).collect();
    let last = |d: &Dump| d.calls.last().map_or(0, |c| c.seq);
    let mut last_calls: Vec<(usize, u64, String)> = dumps
        .iter()
        .map(|d| (d.rank, last(d), d.calls.last().map_or("none".to_string(), |c| state_name(c.state).to_string())))
        .collect();
    last_calls.sort();
    let lowest = last_calls.iter().map(|l| l.1).min().unwrap_or(0);
    let highest = last_calls.iter().map(|l| l.1).max().unwrap_or(0);
    // A rank that wrote no dump while the others wait in a call is the one they wait on:
    // stopped, hung or killed before it could write (a rank that failed writes one).
    let others_wait = dumps.iter().any(|d| d.calls.last().is_some_and(|c| c.state != CallState::Done));
    let behind = if lowest < highest {
        Some(Behind {
            ranks: last_calls.iter().filter(|l| l.1 == lowest).map(|l| l.0).collect(),
            their_last_call: Some(lowest),
            others_reached: highest,
        })
    } else if others_wait && !missing.is_empty() {
        Some(Behind { ranks: missing.clone(), their_last_call: None, others_reached: highest })
    } else {
        None
    };
    // The first sequence number at which two ranks' records differ.
    let mut by_seq: BTreeMap<u64, Vec<(usize, &CallRecord)>> = BTreeMap::new();
    for d in dumps {
        for c in &d.calls {
            by_seq.entry(c.seq).or_default().push((d.rank, c));
        }
    }
    let mut desync = None;
    'seqs: for (&seq, calls) in &by_seq {
        for field in 0..7 {
            let mut values: Vec<(usize, String, String)> = Vec::new();
            for (rank, c) in calls {
                let v = c.fields()[field].1.clone();
                if !values.iter().any(|x| x.1 == v) {
                    values.push((*rank, v, c.describe()));
                }
            }
            if values.len() > 1 {
                desync = Some(Desync { seq, field: calls[0].1.fields()[field].0.to_string(), values });
                break 'seqs;
            }
        }
    }
    let mut waiting: Vec<Waiting> = dumps
        .iter()
        .filter_map(|d| d.calls.last().filter(|c| c.state != CallState::Done).map(|c| (d.rank, c)))
        .map(|(rank, c)| Waiting {
            rank,
            seq: c.seq,
            call: c.describe(),
            round: c.round_reached,
            rounds: c.rounds,
            state: state_name(c.state).to_string(),
            error: c.error.clone(),
        })
        .collect();
    waiting.sort_by_key(|w| w.rank);
    Findings { ranks, missing, last_calls, behind, desync, waiting }
}

fn load(dir: &Path) -> Result<Option<Vec<Dump>>> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let mut dumps = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("railyard-trace-rank") && name.ends_with(".json")) {
            continue;
        }
        if dumps.len() == MAX_DUMPS {
            bail!("more than {MAX_DUMPS} dumps in {}", dir.display());
        }
        let path = e.path();
        let text = read_bounded(&e, MAX_DUMP_BYTES)?;
        let dump: Dump =
            serde_json::from_slice(&text).with_context(|| format!("{} is not a railyard dump", path.display()))?;
        dumps.push(dump);
    }
    if dumps.is_empty() {
        return Ok(None);
    }
    sort_by_rank(&mut dumps, |d| d.rank, "dumps")?;
    Ok(Some(dumps))
}

/// A dump file's bytes, refused past `max_bytes` (a bound on what triage loads).
fn read_bounded(e: &std::fs::DirEntry, max_bytes: u64) -> Result<Vec<u8>> {
    let path = e.path();
    let len = e.metadata().map(|m| m.len()).unwrap_or(0);
    if len > max_bytes {
        bail!("{} is {len} bytes, more than a dump can be ({max_bytes})", path.display());
    }
    std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
}

/// Sort dumps by rank; two of one rank are refused (`what` names them).
fn sort_by_rank<T>(dumps: &mut [T], rank: impl Fn(&T) -> usize, what: &str) -> Result<()> {
    dumps.sort_by_key(&rank);
    if let Some(w) = dumps.windows(2).find(|w| rank(&w[0]) == rank(&w[1])) {
        bail!("two {what} claim rank {}", rank(&w[0]));
    }
    Ok(())
}

fn text(f: &Findings, dumps: &[Dump]) -> String {
    let mut out = format!("dumps of ranks {:?}", f.ranks);
    if !f.missing.is_empty() {
        out += &format!("; no dump from ranks {:?} (killed before writing, or never started)", f.missing);
    }
    out += "\n";
    for d in dumps {
        out += &format!(
            "  rank {} (pid {} on {}): {} calls kept; written because: {}\n",
            d.rank,
            d.pid,
            d.host,
            d.calls.len(),
            d.reason
        );
    }
    let plural = |b: &Behind| if b.ranks.len() > 1 { "s" } else { "" };
    match &f.behind {
        Some(b @ Behind { their_last_call: Some(last), .. }) => {
            out += &format!(
                "behind: rank{} {:?} last started call #{last}; the others reached #{}\n",
                plural(b),
                b.ranks,
                b.others_reached
            )
        }
        Some(b) => {
            out += &format!(
                "behind: rank{} {:?}, which left no dump while the others wait in call #{} (stopped, hung or \
                 killed before it could write one; a rank that fails writes one)\n",
                plural(b),
                b.ranks,
                b.others_reached
            )
        }
        None => out += "behind: no rank; every rank's last call is the same\n",
    }
    match &f.desync {
        Some(d) => {
            out += &format!("desync: call #{} is the first where ranks disagree, on {}:\n", d.seq, d.field);
            for (rank, v, call) in &d.values {
                out += &format!("  rank {rank}: {v} ({call})\n");
            }
        }
        None => out += "desync: none; every call seen by several ranks matches\n",
    }
    if f.waiting.is_empty() {
        out += "waiting: every rank's last call finished\n";
    }
    for w in &f.waiting {
        out += &format!(
            "waiting: rank {} in call #{} ({}), {} at round {} of {}{}\n",
            w.rank,
            w.seq,
            w.call,
            w.state,
            w.round,
            w.rounds,
            w.error.as_ref().map_or(String::new(), |e| format!(": {e}"))
        );
    }
    out
}

pub fn run(args: &TriageArgs) -> Result<String> {
    let Some(dumps) = load(&args.dir)? else {
        let Some((dumps, unreadable)) =
            flight_recorder::load(&args.dir, railyard_nccl::flight_recorder::MAX_DUMP_BYTES as u64)?
        else {
            bail!(
                "no dumps in {dir}: neither railyard's (railyard-trace-rank*.json: run the job with RAILYARD_DUMP_DIR={dir}; \
                 they are written on the first error, on SIGUSR1 and on request) nor PyTorch's Flight Recorder's \
                 (<prefix><rank>: TORCH_FR_BUFFER_SIZE=2000 TORCH_FR_DUMP_TEMP_FILE={dir}/rank)",
                dir = args.dir.display()
            );
        };
        let report = flight_recorder::FrReport { unreadable, ..flight_recorder::analyse(&dumps, args.topo.as_deref()) };
        return Ok(match args.format {
            Format::Json => serde_json::to_string_pretty(&report)?,
            Format::Md => flight_recorder::text(&report, &args.dir),
        });
    };
    if args.topo.is_some() {
        bail!("--topo is for PyTorch Flight Recorder dumps; railyard's own name their algorithm");
    }
    let findings = triage(&dumps);
    Ok(match args.format {
        Format::Json => serde_json::to_string_pretty(&findings)?,
        Format::Md => text(&findings, &dumps),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(seq: u64, collective: &str, count: u64, state: CallState) -> CallRecord {
        CallRecord {
            seq,
            collective: collective.into(),
            count,
            dtype: "f32".into(),
            op: "sum".into(),
            root: 0,
            peer: 0,
            algorithm: "ring".into(),
            rounds: 2,
            round_reached: if state == CallState::Done { 2 } else { 1 },
            peers: vec![],
            start_secs: seq as f64,
            end_secs: None,
            state,
            error: None,
        }
    }

    fn dump(rank: usize, calls: Vec<CallRecord>) -> Dump {
        Dump { rank, size: 3, host: "h".into(), pid: 1, reason: "test".into(), unix_secs: 0.0, at_secs: 0.0, calls }
    }

    #[test]
    fn names_the_rank_behind_the_first_desync_and_the_step() {
        use CallState::*;
        let dumps = vec![
            dump(
                0,
                vec![call(1, "allreduce", 8, Done), call(2, "allreduce", 8, Done), call(3, "broadcast", 8, Running)],
            ),
            dump(1, vec![call(1, "allreduce", 8, Done), call(2, "allreduce", 16, Running)]),
        ];
        let f = triage(&dumps);
        assert_eq!(f.missing, vec![2]);
        assert_eq!(f.behind, Some(Behind { ranks: vec![1], their_last_call: Some(2), others_reached: 3 }));
        let d = f.desync.expect("a desync");
        assert_eq!((d.seq, d.field.as_str()), (2, "size"));
        assert_eq!(
            d.values.iter().map(|v| (v.0, v.1.as_str())).collect::<Vec<_>>(),
            vec![(0, "8 elements"), (1, "16 elements")]
        );
        assert_eq!(f.waiting.iter().map(|w| (w.rank, w.seq, w.round)).collect::<Vec<_>>(), vec![(0, 3, 1), (1, 2, 1)]);
        // In step: nothing behind, no desync.
        let same = vec![dump(0, vec![call(1, "allreduce", 8, Done)]), dump(1, vec![call(1, "allreduce", 8, Done)])];
        let f = triage(&same);
        assert!(f.behind.is_none() && f.desync.is_none() && f.waiting.is_empty());
    }

    /// Issue 41: rank 1 was stopped (SIGSTOP) and wrote no dump; ranks 0 and 2 wait in
    /// the same call. The rank that left no dump while the others wait is the one behind.
    #[test]
    fn a_rank_that_left_no_dump_while_the_others_wait_is_behind() {
        use CallState::*;
        let waiting = |rank| dump(rank, vec![call(1, "allreduce", 8, Done), call(2, "allreduce", 8, Failed)]);
        let f = triage(&[waiting(0), waiting(2)]);
        assert_eq!(f.behind, Some(Behind { ranks: vec![1], their_last_call: None, others_reached: 2 }));
        let words = text(&f, &[waiting(0), waiting(2)]);
        assert!(words.contains("behind: rank [1], which left no dump while the others wait in call #2"), "{words}");
        // Everyone done: a missing dump is no one behind.
        let done = |rank| dump(rank, vec![call(1, "allreduce", 8, Done)]);
        assert!(triage(&[done(0), done(2)]).behind.is_none());
    }
}

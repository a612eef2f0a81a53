//! The Ray executor: points run as Ray tasks by the Python package
//! (`python -m railyard.ray_sweep`), each calling the native library's `sweep_point` —
//! the same code the local executor runs, so the records are the same. This side hands
//! the points to run on the driver's stdin and reads their records back, one JSON line
//! each, in the order they finish; it checks each (a point asked for, once, of this
//! grid) before the store appends it, so a broken driver cannot write a wrong record.

use std::collections::BTreeSet;
use std::io::{BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::Scope;

use anyhow::{bail, Context, Result};

use super::store::{next_line, Line, Record, MAX_RECORD_BYTES};

pub struct Options<'a> {
    pub grid: &'a Path,
    pub address: Option<&'a str>,
    pub python: Option<&'a Path>,
    /// Ray workers of a local cluster (ignored with an address).
    pub workers: usize,
}

/// The running driver: its process and the first thing that went wrong reading it. A
/// driver not waited for (the sweep failed while it ran) is killed when dropped.
pub struct Driver {
    child: Option<Child>,
    problem: Arc<Mutex<Option<String>>>,
    python: String,
}

fn note(problem: &Mutex<Option<String>>, what: String) {
    if let Ok(mut p) = problem.lock() {
        p.get_or_insert(what);
    }
}

/// Start the driver on `todo`, its records sent on `tx` as they arrive.
pub fn start<'scope>(
    scope: &'scope Scope<'scope, '_>,
    options: &Options<'_>,
    todo: &[u64],
    grid_hash: String,
    tx: Sender<Record>,
) -> Result<Driver> {
    let python = options
        .python
        .map(|p| p.display().to_string())
        .or_else(|| std::env::var("RAILYARD_PYTHON").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "python3".into());
    let mut command = Command::new(&python);
    command.args(["-m", "railyard.ray_sweep", "--grid"]).arg(options.grid);
    match options.address {
        Some(a) => command.args(["--address", a]),
        None => command.args(["--workers", &options.workers.to_string()]),
    };
    let mut child =
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().with_context(|| {
            format!("--executor ray: cannot start {python} (give --python, or set RAILYARD_PYTHON)")
        })?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        bail!("--executor ray: no pipes to {python}");
    };
    let problem = Arc::new(Mutex::new(None));
    let points: Vec<u64> = todo.to_vec();
    let asked: BTreeSet<u64> = todo.iter().copied().collect();
    let p = problem.clone();
    scope.spawn(move || {
        let text: String = points.iter().map(|p| format!("{p}\n")).collect();
        // A driver that fails at once closes its stdin; its exit status says why.
        if let Err(e) = stdin.write_all(text.as_bytes()) {
            note(&p, format!("cannot hand the points to the driver: {e}"));
        }
    });
    let p = problem.clone();
    scope.spawn(move || {
        let mut seen = BTreeSet::new();
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            match next_line(&mut reader, &mut line) {
                Ok(Line::End) => break,
                Ok(Line::Whole(_)) => {}
                Ok(Line::Torn | Line::TooLong) => {
                    return note(
                        &p,
                        format!("a line from the driver longer than {MAX_RECORD_BYTES} bytes, or cut short"),
                    )
                }
                Err(e) => return note(&p, format!("reading the driver: {e}")),
            }
            let record: Record = match serde_json::from_slice(&line) {
                Ok(r) => r,
                Err(e) => {
                    let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).trim_end().to_string();
                    return note(&p, format!("the driver printed {shown:?}, not a record: {e}"));
                }
            };
            if !asked.contains(&record.point) || !seen.insert(record.point) || record.grid != grid_hash {
                return note(
                    &p,
                    format!("the driver returned point {} twice, unasked, or of another grid", record.point),
                );
            }
            if tx.send(record).is_err() {
                break;
            }
        }
    });
    Ok(Driver { child: Some(child), problem, python })
}

impl Driver {
    /// Wait for the driver; an error if it failed or fewer than `asked` points came back
    /// (those recorded stay recorded: `--resume` runs the rest).
    pub fn finish(mut self, got: u64, asked: u64) -> Result<()> {
        let Some(mut child) = self.child.take() else { bail!("the Ray driver was already waited for") };
        let status = child.wait().context("waiting for the Ray driver")?;
        if let Some(p) = self.problem.lock().ok().and_then(|mut p| p.take()) {
            bail!("--executor ray: {p}; {got} of {asked} points recorded (--resume runs the rest)");
        }
        if !status.success() {
            bail!(
                "--executor ray: {} -m railyard.ray_sweep failed ({status}; its error is above); {got} of {asked} points recorded (--resume runs the rest)",
                self.python
            );
        }
        if got != asked {
            bail!("--executor ray: {got} of {asked} points came back (--resume runs the rest)");
        }
        Ok(())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

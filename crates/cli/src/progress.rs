//! A progress line on stderr for runs longer than a second: shown only on a terminal
//! and for markdown output (a script reading JSON, or a log, never sees it), rewritten
//! in place, and erased when the run ends.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use railyard_sim::Progress;
use railyard_units::units::format_secs;

const DELAY: Duration = Duration::from_secs(1);
const EVERY: Duration = Duration::from_millis(200);

pub struct ProgressLine {
    label: String,
    enabled: bool,
    started: Instant,
    last: Option<Instant>,
}

impl ProgressLine {
    /// `wanted`: the output is for people (markdown); the line shows only if stderr is a terminal too.
    pub fn new(label: impl Into<String>, wanted: bool) -> Self {
        ProgressLine {
            label: label.into(),
            enabled: wanted && std::io::stderr().is_terminal(),
            started: Instant::now(),
            last: None,
        }
    }

    pub fn update(&mut self, p: &Progress) {
        if !self.enabled || self.started.elapsed() < DELAY || self.last.is_some_and(|l| l.elapsed() < EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        let percent = if p.rounds > 0 { 100.0 * p.rounds_done as f64 / p.rounds as f64 } else { 0.0 };
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2K{}: round {} of {} ({percent:.0}%), {} simulated, {} events, {:.0} s",
            self.label,
            p.rounds_done,
            p.rounds,
            format_secs(p.simulated_secs),
            p.events,
            self.started.elapsed().as_secs_f64()
        );
        let _ = err.flush();
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        if self.last.is_some() {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

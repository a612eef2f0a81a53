use thiserror::Error;

/// A schedule that cannot be generated for the given arguments.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScheduleError {
    #[error("bad ring order: {message}")]
    BadOrder { message: String },
    #[error("line {line}: {message}")]
    Import { line: usize, message: String },
    #[error("bad server groups: {message}")]
    BadGroups { message: String },
    #[error("bad tree: {message}")]
    BadTree { message: String },
    #[error("algorithm {algorithm} does not implement {collective}")]
    Unsupported { algorithm: String, collective: &'static str },
    #[error("{message}")]
    BadSpec { message: String },
    /// `why` (may be empty) says what grows; `fewer` what a request can have fewer of.
    #[error("{algorithm}: {value} {what} is more than the limit of {limit}; {}{}", if why.is_empty() { String::new() } else { format!("{why}; ") }, fewer_words(fewer, |f| f.as_str().to_string()))]
    TooLarge {
        algorithm: &'static str,
        what: &'static str,
        value: u128,
        limit: u128,
        why: &'static str,
        fewer: &'static [Fewer],
    },
}

/// Where and why the symbolic checker rejected a schedule.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{at}: {message}")]
pub struct CheckError {
    /// The step in words ("reduce-scatter step 3 of 15: rank 2 -> rank 3", "prologue", "postcondition").
    pub at: String,
    pub message: String,
}

impl ScheduleError {
    /// `algorithm` does not implement `collective`.
    pub fn unsupported(algorithm: impl std::fmt::Display, collective: crate::collective::Collective) -> Self {
        ScheduleError::Unsupported { algorithm: algorithm.to_string(), collective: collective.as_str() }
    }
}

/// What a request can have fewer of to fit the limits (a front end names its option for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fewer {
    Ranks,
    Channels,
    PipelineChunks,
}

impl Fewer {
    pub fn as_str(self) -> &'static str {
        match self {
            Fewer::Ranks => "ranks",
            Fewer::Channels => "channels",
            Fewer::PipelineChunks => "pipeline chunks",
        }
    }
}

/// "use fewer ranks, channels or pipeline chunks", each named by `name`.
pub fn fewer_words(fewer: &[Fewer], name: impl Fn(Fewer) -> String) -> String {
    let names: Vec<String> = fewer.iter().map(|&f| name(f)).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => format!("use fewer {last}"),
        Some((last, rest)) => format!("use fewer {} or {last}", rest.join(", ")),
    }
}

//! What a cost, a simulation or a run names its algorithm by: one of railyard's, or a
//! schedule from elsewhere (an MSCCL program, an NCCL log's ring).

use railyard_schedule::Algorithm;
use serde::{Serialize, Serializer};

/// What a cost, a simulation or a run names its algorithm by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AlgorithmRef {
    Builtin(Algorithm),
    /// A schedule from elsewhere: "msccl:NAME", an NCCL log's ring.
    Named(String),
}

impl AlgorithmRef {
    /// The algorithm of a schedule named `name` (railyard's generators name theirs).
    pub fn from_name(name: &str) -> AlgorithmRef {
        name.parse().map_or_else(|_| AlgorithmRef::Named(name.to_string()), AlgorithmRef::Builtin)
    }

    pub fn builtin(&self) -> Option<Algorithm> {
        match self {
            AlgorithmRef::Builtin(a) => Some(*a),
            AlgorithmRef::Named(_) => None,
        }
    }
}

/// An algorithm's name with the options that shaped it, as every table shows it:
/// "tree (8 chunks)", "ring (2 channels)", "halving-doubling"; an MSCCL program's
/// pieces are its executor's passes over the buffer ("msccl:ring (64 passes)"), not the
/// chunks the program names.
pub fn shaped_name(name: &str, pipeline_chunks: Option<usize>, channels: usize) -> String {
    match (pipeline_chunks, channels) {
        (Some(c), _) if c > 1 && name.starts_with("msccl:") => format!("{name} ({c} passes)"),
        (Some(c), _) if c > 1 => format!("{name} ({c} chunks)"),
        (_, k) if k > 1 => format!("{name} ({k} channels)"),
        _ => name.to_string(),
    }
}

impl std::fmt::Display for AlgorithmRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AlgorithmRef::Builtin(a) => f.write_str(a.as_str()),
            AlgorithmRef::Named(n) => f.write_str(n),
        }
    }
}

impl Serialize for AlgorithmRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

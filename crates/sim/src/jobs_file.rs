//! The jobs file: several collectives sharing one network, each on its own ranks, from
//! its own start, optionally repeated every period (seed 001 §7.5.1's periodic jobs).
//!
//! ```toml
//! [[job]]
//! name = "dp"               # optional (default "job N")
//! collective = "allreduce"
//! size = "1GiB"
//! algorithm = "ring"
//! dtype = "f32"             # optional
//! placement = "contiguous"  # optional: contiguous, interleaved, rail-aligned, list:DEV,...
//! skip = 0                  # optional: GPUs of the placement order left to other jobs first
//! ranks = 8                 # optional (default: every GPU left after `skip`)
//! start = "0ms"             # optional
//! period = "20ms"           # optional, with count: start + i * period for i < count
//! count = 3                 # optional (default 1)
//! ready = ["0ms", "2ms"]    # optional: each rank's readiness after the start
//! channels = 1              # optional: parallel rings
//! pipeline_chunks = 1       # optional: chain, trees and hierarchical all-reduce (default: chain
//!                           # and trees as fast as the per-round model finds, hierarchical uncut)
//! inter_stage = "ring"      # optional: hierarchical all-reduce across servers, ring, rhd or tree
//! root = 0                  # optional: rooted collectives
//! compute = "5ms"           # optional: the ranks compute this long before communicating
//! after = ["fwd"]           # optional: start (plus `start`) when these jobs have finished
//! ```
//!
//! `collective = "none"` is a compute task (no size, no algorithm): with `after`, jobs
//! form a step's DAG of compute and collectives (seed 001 §7.4).

use railyard_model::{resolve_on, ChunkPolicy, CollectiveRequest, ModelError};
use railyard_schedule::{Algorithm, Collective, CollectiveSpec, CompactSchedule, Dtype, InterStage, ScheduleBuilder};
use railyard_topology::{Placement, PlacementPolicy, Topology};
use railyard_units::units::{parse_bytes, parse_secs};
use serde::Deserialize;
use thiserror::Error;

use crate::engine::{on_cycle, MAX_JOBS};
use crate::job_spec::JobSpec;

/// A jobs file larger than this is refused before it is parsed.
pub const MAX_FILE_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum JobsFileError {
    #[error("jobs file: {0}")]
    Parse(String),
    #[error("jobs file is {bytes} bytes, more than the limit of {limit}")]
    TooLarge { bytes: usize, limit: usize },
    #[error("jobs file lists no [[job]]")]
    Empty,
    #[error("job {index} ({name}): {field}: {message}")]
    Field { index: usize, name: String, field: &'static str, message: String },
    #[error("the jobs file makes {instances} job runs (counts included), more than the limit of {limit}")]
    TooManyRuns { instances: usize, limit: usize },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    job: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: Option<String>,
    collective: String,
    size: Option<String>,
    algorithm: Option<String>,
    compute: Option<String>,
    after: Option<Vec<String>>,
    dtype: Option<String>,
    placement: Option<String>,
    #[serde(default)]
    skip: usize,
    ranks: Option<usize>,
    start: Option<String>,
    period: Option<String>,
    count: Option<usize>,
    ready: Option<Vec<String>>,
    channels: Option<usize>,
    pipeline_chunks: Option<usize>,
    inter_stage: Option<String>,
    #[serde(default)]
    root: usize,
}

/// One job of the file, generated: its schedule, ranks and start times.
#[derive(Debug)]
pub struct PlannedJob {
    pub name: String,
    pub schedule: CompactSchedule,
    pub placement: Placement,
    /// Start of every run (one per `count`).
    pub starts_secs: Vec<f64>,
    pub ready_secs: Vec<f64>,
    pub compute_secs: f64,
    /// Names of the jobs it waits for (every run of each).
    pub after: Vec<String>,
}

/// Read and generate every job of a jobs file's text on `topology`.
pub fn parse_jobs(text: &str, topology: &Topology) -> Result<Vec<PlannedJob>, JobsFileError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(JobsFileError::TooLarge { bytes: text.len(), limit: MAX_FILE_BYTES });
    }
    let file: File = toml::from_str(text).map_err(|e| JobsFileError::Parse(e.to_string()))?;
    if file.job.is_empty() {
        return Err(JobsFileError::Empty);
    }
    let mut runs = 0usize;
    let mut jobs = Vec::with_capacity(file.job.len());
    for (index, entry) in file.job.into_iter().enumerate() {
        let name = entry.name.clone().unwrap_or_else(|| format!("job {index}"));
        if name.is_empty() || name.len() > 64 || name.chars().any(|c| c.is_control() || c == '|') {
            return Err(JobsFileError::Field {
                index,
                name: name.escape_default().to_string(),
                field: "name",
                message: "1 to 64 printable characters, no '|'".into(),
            });
        }
        let field =
            |field: &'static str, message: String| JobsFileError::Field { index, name: name.clone(), field, message };
        let compute_only = entry.collective == "none";
        let collective: Collective = if compute_only {
            Collective::Barrier
        } else {
            entry.collective.parse().map_err(|e: String| field("collective", e))?
        };
        let algorithm: Algorithm = match (&entry.algorithm, compute_only) {
            (Some(a), false) => a.parse().map_err(|e: String| field("algorithm", e))?,
            (None, false) => return Err(field("algorithm", "missing (only collective = \"none\" has none)".into())),
            (Some(_), true) => {
                return Err(field("algorithm", "a compute task (collective = \"none\") has none".into()))
            }
            (None, true) => Algorithm::Direct,
        };
        let dtype: Dtype = match &entry.dtype {
            Some(d) => d.parse().map_err(|e: String| field("dtype", e))?,
            None => Dtype::F32,
        };
        let bytes = match (&entry.size, compute_only) {
            (Some(s), false) => parse_bytes(s).map_err(|e| field("size", e.to_string()))?,
            (None, false) => return Err(field("size", "missing".into())),
            (Some(_), true) => return Err(field("size", "a compute task (collective = \"none\") has none".into())),
            (None, true) => 0,
        };
        let elem_bytes = dtype.size_bytes();
        if !bytes.is_multiple_of(elem_bytes) {
            return Err(field("size", format!("{bytes} bytes is not a whole number of {elem_bytes}-byte elements")));
        }
        let policy: PlacementPolicy = match &entry.placement {
            Some(p) => p.parse().map_err(|e: String| field("placement", e))?,
            None => PlacementPolicy::Contiguous,
        };
        let all = Placement::new(topology, &policy, None).map_err(|e| field("placement", e.to_string()))?;
        let left = all
            .len()
            .checked_sub(entry.skip)
            .ok_or_else(|| field("skip", format!("skips {} GPUs of a placement of {}", entry.skip, all.len())))?;
        let ranks = entry.ranks.unwrap_or(left);
        if ranks == 0 || ranks > left {
            return Err(field(
                "ranks",
                format!("{ranks} ranks, but {left} GPUs are left after skipping {}", entry.skip),
            ));
        }
        let placement = Placement { devices: all.devices[entry.skip..entry.skip + ranks].to_vec() };
        let start = parse_time(entry.start.as_deref(), "start", &field)?;
        let count = entry.count.unwrap_or(1);
        if count == 0 {
            return Err(field("count", "must be at least 1".into()));
        }
        runs = runs.saturating_add(count);
        if runs > MAX_JOBS {
            return Err(JobsFileError::TooManyRuns { instances: runs, limit: MAX_JOBS });
        }
        let period = match (&entry.period, count) {
            (Some(p), _) => parse_time(Some(p), "period", &field)?,
            (None, 1) => 0.0,
            (None, _) => return Err(field("period", format!("count = {count} needs a period"))),
        };
        let ready_secs = match &entry.ready {
            None => Vec::new(),
            Some(list) if list.len() != ranks => {
                return Err(field("ready", format!("{} times for {ranks} ranks (one per rank)", list.len())))
            }
            Some(list) => list.iter().map(|t| parse_time(Some(t), "ready", &field)).collect::<Result<_, _>>()?,
        };
        let inter_stage: InterStage = match &entry.inter_stage {
            Some(t) => t.parse().map_err(|e: String| field("inter_stage", e))?,
            None => InterStage::Ring,
        };
        let channels = entry.channels.unwrap_or(1);
        let schedule = if compute_only {
            let spec = CollectiveSpec::new(collective, ranks, bytes / elem_bytes).with_root(entry.root);
            ScheduleBuilder::new(spec, "compute", elem_bytes).build_compact()
        } else {
            // The job's collective as every front end asks for one (`railyard_model::request`).
            let request = CollectiveRequest {
                root: entry.root,
                channels,
                chunks: entry.pipeline_chunks.map_or(ChunkPolicy::Search, ChunkPolicy::Fixed),
                inter_stage,
                ..CollectiveRequest::new(collective, bytes, elem_bytes, vec![algorithm])
            };
            // The resolver checks the options; its complaint names the entry's key.
            let resolved = resolve_on(topology, &placement, &request).map_err(|e| match e {
                ModelError::BadInput { field: f, message } => match f.as_str() {
                    "channels" => field("channels", message),
                    "pipeline_chunks" => field("pipeline_chunks", message),
                    "root" => field("root", message),
                    _ => field("algorithm", format!("{f}: {message}")),
                },
                e => field("algorithm", e.to_string()),
            })?;
            resolved
                .variants
                .into_iter()
                .next()
                .ok_or_else(|| field("algorithm", format!("{algorithm} does not run here")))?
                .schedule
        };
        let compute_secs = parse_time(entry.compute.as_deref(), "compute", &field)?;
        let mut after = entry.after.clone().unwrap_or_default();
        after.sort();
        after.dedup();
        if after.contains(&name) {
            return Err(field("after", "a job cannot wait for itself".into()));
        }
        let starts_secs = (0..count).map(|i| start + period * i as f64).collect();
        jobs.push(PlannedJob { name, schedule, placement, starts_secs, ready_secs, compute_secs, after });
    }
    // Every name waited for is a job of the file, named once.
    for (index, job) in jobs.iter().enumerate() {
        if jobs[..index].iter().any(|j| j.name == job.name) {
            return Err(JobsFileError::Field {
                index,
                name: job.name.clone(),
                field: "name",
                message: "another job has this name".into(),
            });
        }
        if let Some(missing) = job.after.iter().find(|a| !jobs.iter().any(|j| &j.name == *a)) {
            return Err(JobsFileError::Field {
                index,
                name: job.name.clone(),
                field: "after",
                message: format!("no job is named \"{missing}\""),
            });
        }
    }
    // A cycle of waits, found on the jobs' places in the file.
    let waits: Vec<Vec<usize>> =
        jobs.iter().map(|j| j.after.iter().filter_map(|a| jobs.iter().position(|k| &k.name == a)).collect()).collect();
    if let Some(index) = on_cycle(&waits) {
        return Err(JobsFileError::Field {
            index,
            name: jobs[index].name.clone(),
            field: "after",
            message: "waits for itself through other jobs (a cycle)".into(),
        });
    }
    Ok(jobs)
}

/// Every run of every job, as the simulator takes them: a job with `count` runs gives
/// runs named `name#i`; `after` names become the places of every run of those jobs.
/// Also which job of `planned` each run comes from.
pub fn job_runs(planned: &[PlannedJob]) -> (Vec<JobSpec<'_>>, Vec<usize>) {
    let mut specs = Vec::new();
    let mut of_job = Vec::new();
    let mut runs_of: Vec<std::ops::Range<usize>> = Vec::with_capacity(planned.len());
    for (j, p) in planned.iter().enumerate() {
        runs_of.push(specs.len()..specs.len() + p.starts_secs.len());
        for (i, &start) in p.starts_secs.iter().enumerate() {
            let name = if p.starts_secs.len() > 1 { format!("{}#{i}", p.name) } else { p.name.clone() };
            specs.push(JobSpec {
                ready_secs: p.ready_secs.clone(),
                compute_secs: p.compute_secs,
                ..JobSpec::new(name, &p.schedule, p.placement.clone(), start)
            });
            of_job.push(j);
        }
    }
    for (spec, &j) in specs.iter_mut().zip(&of_job) {
        spec.after = planned[j]
            .after
            .iter()
            .filter_map(|name| planned.iter().position(|q| &q.name == name))
            .flat_map(|k| runs_of[k].clone())
            .collect();
    }
    (specs, of_job)
}

/// Read a jobs file, refusing one past `MAX_FILE_BYTES` before reading more of it (a
/// device like /dev/zero says nothing of its size).
pub fn read_jobs_file(path: &std::path::Path) -> Result<String, JobsFileError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| JobsFileError::Parse(format!("{}: {e}", path.display())))?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| JobsFileError::Parse(format!("{}: {e}", path.display())))?;
    if text.len() > MAX_FILE_BYTES {
        return Err(JobsFileError::TooLarge { bytes: text.len(), limit: MAX_FILE_BYTES });
    }
    Ok(text)
}

fn parse_time(
    text: Option<&str>,
    name: &'static str,
    field: &dyn Fn(&'static str, String) -> JobsFileError,
) -> Result<f64, JobsFileError> {
    match text {
        None => Ok(0.0),
        Some(t) => match parse_secs(t) {
            Ok(s) if s.is_finite() => Ok(s),
            Ok(s) => Err(field(name, format!("{s} is not a finite time"))),
            Err(e) => Err(field(name, e.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_topology::presets::preset;

    #[test]
    fn a_file_of_two_jobs_on_separate_ranks() {
        let t = preset("hgx-h100x2").unwrap();
        let jobs = parse_jobs(
            r#"
            [[job]]
            name = "a"
            collective = "allreduce"
            size = "64MiB"
            algorithm = "ring"
            ranks = 8
            period = "10ms"
            count = 3

            [[job]]
            collective = "allgather"
            size = "1MiB"
            algorithm = "direct"
            skip = 8
            start = "1ms"
            ready = ["0ms", "0ms", "0ms", "0ms", "0ms", "0ms", "0ms", "2ms"]
            "#,
            &t,
        )
        .unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].starts_secs, vec![0.0, 0.01, 0.02]);
        assert_eq!(jobs[1].name, "job 1");
        assert_eq!(jobs[1].placement.devices[0], t.device_id("B.gpu0").unwrap());
        assert_eq!(jobs[1].ready_secs[7], 2e-3);
    }

    #[test]
    fn errors_name_the_job_and_the_field() {
        let t = preset("hgx-h100x2").unwrap();
        for (text, expect) in [
            ("[[job]]\ncollective = \"allreduce\"\nsize = \"1MiB\"\nalgorithm = \"nope\"", "job 0 (job 0): algorithm"),
            ("[[job]]\ncollective = \"allreduce\"\nsize = \"1MiB\"\nalgorithm = \"ring\"\nstart = \"-1ms\"", "start"),
            ("[[job]]\ncollective = \"allreduce\"\nsize = \"1MiB\"\nalgorithm = \"ring\"\nranks = 17", "ranks"),
            ("[[job]]\ncollective = \"allreduce\"\nsize = \"1MiB\"\nalgorithm = \"ring\"\ncount = 2", "period"),
            ("[[job]]\ncollective = \"allreduce\"\nsize = \"1MiB\"\nalgorithm = \"ring\"\nbogus = 1", "unknown field"),
            ("[[job]]\ncollective = \"allreduce\"\nsize = \"1MiB\"\nalgorithm = \"ring\"\nready = [\"1ms\"]", "ready"),
            ("", "no [[job]]"),
            // The resolver checks these; the error still names the entry's key.
            (
                "[[job]]\ncollective = \"allreduce\"\nsize = \"1MiB\"\nalgorithm = \"ring\"\nchannels = 0",
                "channels: 0: from 1",
            ),
            (
                "[[job]]\ncollective = \"allreduce\"\nsize = \"1MiB\"\nalgorithm = \"tree\"\npipeline_chunks = 5000",
                "pipeline_chunks: 5000",
            ),
            (
                "[[job]]\ncollective = \"broadcast\"\nsize = \"1MiB\"\nalgorithm = \"tree\"\nroot = 99",
                "root: 99 is not a rank",
            ),
        ] {
            let err = parse_jobs(text, &t).unwrap_err().to_string();
            assert!(err.contains(expect), "{text}: {err}");
        }
    }
}

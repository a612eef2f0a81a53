//! Parsers for command-line values: sizes, rank lists, groups, formats.

use clap::ValueEnum;
use railyard_model::request::parse_algorithms;
use railyard_model::{ChunkPolicy, CollectiveRequest, ModelError, MscclProblem};
use railyard_schedule::error::{fewer_words, Fewer};
use railyard_schedule::{Collective, Dtype, InterStage, ScheduleError};
use railyard_topology::PlacementPolicy;
use railyard_units::units;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Markdown tables with explanations (for people)
    #[value(alias = "text")]
    Md,
    /// One JSON document (for scripts)
    Json,
}

/// Where a command's topology comes from, and how its routes are chosen.
#[derive(Debug, Clone, clap::Args)]
pub struct TopologyArgs {
    /// Topology: a preset (`railyard topo list`), optionally with parameters
    /// (`rail:servers=4`), or a TOML/JSON topology file
    #[arg(long, default_value = "hgx-h100x2")]
    pub topo: String,
    /// Routes: path-type (NCCL's order: NVLink alone, then NVLink and PCIe, then the
    /// network; the widest paths within the first that joins a pair) or widest (the
    /// widest paths over any links, as with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1).
    /// Default: the topology file's `routing`, else path-type
    #[arg(long)]
    pub routing: Option<railyard_topology::Routing>,
}

impl TopologyArgs {
    pub fn load(&self) -> anyhow::Result<railyard_topology::Topology> {
        use anyhow::Context;
        let mut t = railyard_topology::load(&self.topo).with_context(|| format!("topology {}", self.topo))?;
        if let Some(routing) = self.routing {
            t.routing = routing;
        }
        Ok(t)
    }
}

/// One collective request, as `plan`, `sim` and `explain`-style commands take it: the
/// flags every such command shares, defined once and flattened into each, turned into the
/// library's `CollectiveRequest` (which resolves it; see `railyard_model::request`).
#[derive(Debug, Clone, clap::Args)]
pub struct RequestArgs {
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Collective: allreduce, reducescatter, allgather, broadcast, reduce, gather, scatter, alltoall, barrier, sendrecv
    #[arg(long, default_value = "allreduce")]
    pub collective: Collective,
    /// Message size (binary units: 192MiB, 8KiB; the large buffer, as nccl-tests counts it)
    #[arg(long, default_value = "192MiB", value_parser = parse_size, allow_hyphen_values = true)]
    pub size: u64,
    /// Element type: f32, f64, f16, bf16, i32, i64, u8
    #[arg(long, default_value = "f32")]
    pub dtype: Dtype,
    /// Algorithms, comma-separated, or `all` (every algorithm that implements the collective):
    /// ring, interleaved-ring, rail-ring, chain, tree, double-tree, rhd, recursive-doubling, bruck,
    /// pat, pairwise, direct, hierarchical, in-network, in-network-chain, nvls, nvls-tree; an MSCCL XML
    /// file (FILE.xml) runs beside them
    #[arg(long, default_value = "all")]
    pub algo: String,
    /// Root rank of broadcast, reduce, gather, scatter (and the sender of sendrecv; the receiver is the last rank)
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// Parallel rings (channels) for the ring algorithms, each carrying 1/k of every chunk (1-64)
    #[arg(long, default_value_t = 1, value_parser = parse_channels)]
    pub channels: usize,
    /// Pipelined chunks (1-4096) for chain, trees and the hierarchical all-reduces (default:
    /// chain, trees, nvls, nvls-tree and in-network-chain try 1, 2, 4, ... 128 and keep the
    /// one the per-round model finds fastest; hierarchical and in-network run their stages
    /// one after another)
    #[arg(long, value_parser = parse_pipeline_chunks)]
    pub pipeline_chunks: Option<usize>,
    /// How the hierarchical and nvls all-reduces cross servers: ring (2(S-1) rounds), rhd
    /// (recursive halving-doubling, 2 log2 S rounds, for thousands of servers) or tree
    /// (NCCL's double binary tree, 2 log2 S levels; nvls-tree always crosses so)
    #[arg(long, default_value = "ring")]
    pub inter_stage: InterStage,
    /// Rank placement: contiguous, interleaved, rail-aligned, or list:DEV,DEV,...
    #[arg(long, default_value = "contiguous")]
    pub placement: PlacementPolicy,
    /// Number of ranks (default: every GPU of the topology)
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Rank order for `ring` and `chain`, e.g. 0,8,1,9 or 0-7,15-8
    #[arg(long, value_parser = parse_order)]
    pub order: Option<RankList>,
    /// Server groups for the hierarchical algorithms, `/`-separated (default: by server).
    /// Rank j of every group holds shard j, so the order inside groups sets the pairing.
    #[arg(long, value_parser = parse_groups)]
    pub groups: Option<Groups>,
}

impl RequestArgs {
    /// The library's request (algorithm names and MSCCL files read there).
    pub fn request(&self) -> anyhow::Result<CollectiveRequest> {
        let (algorithms, strict) = parse_algorithms(&self.algo, self.collective).map_err(model_error)?;
        Ok(CollectiveRequest {
            root: self.root,
            algorithms,
            strict,
            channels: self.channels,
            chunks: self.pipeline_chunks.map_or(ChunkPolicy::Search, ChunkPolicy::Fixed),
            inter_stage: self.inter_stage,
            placement: self.placement.clone(),
            ranks: self.ranks,
            order: self.order.as_ref().map(|o| o.0.clone()),
            groups: self.groups.as_ref().map(|g| g.0.clone()),
            ..CollectiveRequest::new(self.collective, self.size, self.dtype.size_bytes(), vec![])
        })
    }
}

/// A library error in this command line's words: the request's fields as the flags
/// that set them, with the flags that would change the outcome.
pub fn model_error(e: ModelError) -> anyhow::Error {
    let flag = |field: &str| match field {
        "algorithms" => "--algo".to_string(),
        "size" | "ranks" | "order" | "groups" | "root" | "channels" | "placement" => format!("--{field}"),
        "pipeline_chunks" => "--pipeline-chunks".to_string(),
        other => other.to_string(),
    };
    anyhow::anyhow!(match &e {
        ModelError::BadInput { field, message } => format!("{}: {message}", flag(field)),
        ModelError::SizeNotMultiple { .. } => format!("{e} (--size must be a multiple of the --dtype size)"),
        ModelError::TooManyTransfers { .. } => {
            format!(
                "{e}; use fewer ranks (--ranks), another algorithm (--algo), or for a ring a --size that splits evenly"
            )
        }
        ModelError::RoundTooLarge { .. } => format!("{e}; use fewer ranks (--ranks) or another algorithm (--algo)"),
        ModelError::Msccl { problem: MscclProblem::Ranks { .. }, .. } => format!("{e} (--ranks)"),
        ModelError::Schedule(ScheduleError::TooLarge { algorithm, what, value, limit, why, fewer }) => {
            let flagged = fewer_words(fewer, |f| {
                let flag = match f {
                    Fewer::Ranks => "--ranks",
                    Fewer::Channels => "--channels",
                    Fewer::PipelineChunks => "--pipeline-chunks",
                };
                format!("{} ({flag})", f.as_str())
            });
            let why = if why.is_empty() { String::new() } else { format!("{why}; ") };
            format!("{algorithm}: {value} {what} is more than the limit of {limit}; {why}{flagged}")
        }
        _ => e.to_string(),
    })
}

/// How a report says which routing it used.
pub fn routing_words(routing: &str) -> &'static str {
    if routing == railyard_topology::Routing::Widest.as_str() {
        "the widest paths over any links (--routing widest)"
    } else {
        "path type (NVLink, then PCIe, then the network; widest within)"
    }
}

pub fn parse_size(text: &str) -> Result<u64, String> {
    units::parse_bytes(text).map_err(|e| e.to_string())
}

/// Parallel rings: 1 to `limits::MAX_CHANNELS`.
pub fn parse_channels(text: &str) -> Result<usize, String> {
    parse_count(text, railyard_schedule::limits::MAX_CHANNELS)
}

/// Pipelined chunks: 1 to `limits::MAX_PIPELINE_CHUNKS`.
pub fn parse_pipeline_chunks(text: &str) -> Result<usize, String> {
    parse_count(text, railyard_schedule::limits::MAX_PIPELINE_CHUNKS)
}

fn parse_count(text: &str, max: usize) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from 1 to {max}")),
    }
}

pub fn parse_bandwidth(text: &str) -> Result<f64, String> {
    units::parse_bytes_per_sec(text).map_err(|e| e.to_string())
}

/// A bandwidth that may be zero ("0B/s" or "0").
pub fn parse_bandwidth_or_zero(text: &str) -> Result<f64, String> {
    match text.trim() {
        "0" | "0B/s" | "0GB/s" => Ok(0.0),
        other => parse_bandwidth(other),
    }
}

/// A list of ranks (a newtype, so clap takes it as one value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankList(pub Vec<usize>);

/// Server groups of ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Groups(pub Vec<Vec<usize>>);

pub fn parse_order(text: &str) -> Result<RankList, String> {
    parse_rank_list(text).map(RankList)
}

/// Server groups separated by `/`: `0-7/9-15,8`.
pub fn parse_groups(text: &str) -> Result<Groups, String> {
    text.split('/').map(parse_rank_list).collect::<Result<_, _>>().map(Groups)
}

/// `0,8,1,9` or ranges `0-7,9-15,8`; a range may count down (`15-8`).
pub fn parse_rank_list(text: &str) -> Result<Vec<usize>, String> {
    let mut ranks = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match item.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| format!("\"{item}\" is not a rank range like 0-7"))?;
                let b: usize = b.trim().parse().map_err(|_| format!("\"{item}\" is not a rank range like 0-7"))?;
                if a.abs_diff(b) > 1 << 20 {
                    return Err(format!("\"{item}\": more than {} ranks in one range", 1 << 20));
                }
                // `15-8` counts down, as in a ring order 0-7,15-8.
                if a <= b {
                    ranks.extend(a..=b);
                } else {
                    ranks.extend((b..=a).rev());
                }
            }
            None => ranks.push(item.parse().map_err(|_| format!("\"{item}\" is not a rank number"))?),
        }
    }
    if ranks.is_empty() {
        return Err("empty rank list".into());
    }
    Ok(ranks)
}

pub fn parse_ratio(text: &str) -> Result<(usize, usize), String> {
    railyard_topology::presets::parse_ratio(text)
        .ok_or_else(|| format!("\"{text}\" is not a ratio D:U of positive whole numbers"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_lists_and_groups() {
        assert_eq!(parse_rank_list("0,8,1,9").unwrap(), vec![0, 8, 1, 9]);
        assert_eq!(parse_rank_list("0-3,7").unwrap(), vec![0, 1, 2, 3, 7]);
        assert_eq!(parse_groups("0-1/3,2").unwrap(), Groups(vec![vec![0, 1], vec![3, 2]]));
        assert!(parse_rank_list("a").is_err());
        assert_eq!(parse_rank_list("5-2").unwrap(), vec![5, 4, 3, 2], "a range may count down");
        assert!(parse_rank_list("0-99999999").is_err());
        assert!(parse_rank_list("").is_err());
    }
}

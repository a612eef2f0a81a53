//! One collective request, resolved once. Every front end — `plan`, `sim`, the jobs
//! file, the runtime's tuner, the training planner, the NCCL readers and Python — says
//! what it wants as a [`CollectiveRequest`], and [`resolve`] turns it into the schedules
//! to cost, simulate or run: the placement, the collective's spec, and one [`Variant`]
//! per algorithm with its options (channels, pipelined chunks, ring order, server
//! groups) settled. [`gen_options`] is the one place generator options are built and
//! [`chunk_choices`] the one place the chunk policy is applied, so a new algorithm,
//! option or policy lands here once and works everywhere.

use std::path::Path;
use std::sync::Arc;

use railyard_schedule::limits::{MAX_CHANNELS, MAX_PIPELINE_CHUNKS};
use railyard_schedule::msccl;
use railyard_schedule::{
    check, generate_compact, Algorithm, Collective, CollectiveSpec, CompactSchedule, GenOptions, InterStage, Rank,
};
use railyard_topology::{DeviceKind, Placement, PlacementPolicy, RouteTable, Topology};
use serde::Serialize;

pub use crate::algorithm_ref::AlgorithmRef;
use crate::error::{ModelError, MscclProblem};
use crate::per_round::{cost_with, Breakdown};

/// Pipelined chunks (chain, trees; the hierarchical all-reduces) — one policy for every
/// front end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ChunkPolicy {
    /// This many chunks, for every algorithm that pipelines (chain, trees, hierarchical,
    /// in-network); the others are not cut.
    Fixed(usize),
    /// Chain, trees and NVLS: 1, 2, 4, … 128 chunks (no more than elements), the one the
    /// per-round model finds fastest; every other algorithm uncut (the seeds'
    /// hierarchical all-reduces run their stages one after another). NCCL's tuner picks
    /// its chunk size the same way, from its own cost tables.
    #[default]
    Search,
    /// As `Search`, and the hierarchical all-reduces searched too: their stages
    /// pipelined as NCCL pipelines its trees' intra- and inter-node parts (what a
    /// prediction of a real NCCL run wants).
    SearchAll,
}

/// The largest chunk count `ChunkPolicy::Search` tries.
pub const MAX_SEARCHED_CHUNKS: usize = 128;

/// The chunk counts an algorithm is generated with under `policy` (one for all but a
/// search, and one where its schedule of `collective` is not cut: a search would make
/// the same schedule again for every count), for a collective of `count` elements.
pub fn chunk_choices(algorithm: Algorithm, collective: Collective, policy: ChunkPolicy, count: u64) -> Vec<usize> {
    if !algorithm.takes_chunks(collective) {
        return vec![1];
    }
    match policy {
        // No more chunks than elements: the rest would be empty rounds.
        ChunkPolicy::Fixed(n) => {
            vec![n.clamp(1, count.clamp(1, usize::MAX as u64) as usize)]
        }
        // NVLS is searched too: its stages pipeline as NCCL's NVLSTree does; and CollNet's
        // chain, whose chunks stream through its hops. (The other hierarchical all-reduces
        // keep one chunk, the seeds' examples.)
        ChunkPolicy::Search
            if algorithm.pipelined()
                || matches!(algorithm, Algorithm::Nvls | Algorithm::NvlsTree | Algorithm::InNetworkChain) =>
        {
            searched(count)
        }
        ChunkPolicy::SearchAll => searched(count),
        _ => vec![1],
    }
}

/// 1, 2, 4, … `MAX_SEARCHED_CHUNKS` chunks, no more than `count` elements.
fn searched(count: u64) -> Vec<usize> {
    (0..)
        .map(|k| 1usize << k)
        .take_while(|&c| c <= MAX_SEARCHED_CHUNKS)
        .filter(|&c| c == 1 || (c as u64) <= count)
        .collect()
}

/// Whether `algorithm` can be cut into pipelined chunks for some collective: chain and
/// trees, and the hierarchical all-reduces, whose chunks overlap one stage with another.
/// Options and the unused-option check know no collective; whatever pipelines one
/// collective pipelines its all-reduce (`Algorithm::takes_chunks`).
fn may_take_chunks(algorithm: Algorithm) -> bool {
    algorithm.takes_chunks(Collective::AllReduce)
}

/// The generator options of `algorithm`: the one place they are built. Options an
/// algorithm does not take are left at their defaults (a ring order only for ring and
/// chain, channels only for the rings, chunks only where it pipelines), so two requests
/// that differ only in them give the same schedule.
pub fn gen_options(
    algorithm: Algorithm,
    channels: usize,
    pipeline_chunks: usize,
    order: Option<&[Rank]>,
    groups: Vec<Vec<Rank>>,
    inter_stage: InterStage,
) -> GenOptions {
    GenOptions {
        groups,
        order: order.filter(|_| algorithm.uses_order()).map(<[Rank]>::to_vec),
        channels: if algorithm.uses_channels() { channels.max(1) } else { 1 },
        pipeline_chunks: if may_take_chunks(algorithm) { pipeline_chunks.max(1) } else { 1 },
        inter_stage,
    }
}

/// An algorithm a request names: one of railyard's, or an MSCCL XML program.
#[derive(Debug, Clone, PartialEq)]
pub enum AlgorithmSpec {
    Builtin(Algorithm),
    /// An MSCCL program (msccl-tools' output): its text, and the file it came from, which
    /// names it in errors.
    Msccl {
        file: String,
        text: Arc<str>,
    },
}

/// The algorithms of a request: `all` or `auto` (every built-in algorithm that implements
/// the collective; those that cannot run here are skipped, and the fastest is the one to
/// run), or a comma-separated list of names and MSCCL XML files (`*.xml`, read here),
/// each of which must run. (The list, and whether it was named.)
pub fn parse_algorithms(text: &str, collective: Collective) -> Result<(Vec<AlgorithmSpec>, bool), ModelError> {
    let bad = |message: String| ModelError::BadInput { field: "algorithms".into(), message };
    let items: Vec<&str> = text.split(',').map(str::trim).collect();
    let (files, names): (Vec<&str>, Vec<&str>) = items.iter().partition(|a| a.ends_with(".xml"));
    let (builtins, strict) = if names.is_empty() && !files.is_empty() {
        (Vec::new(), true)
    } else {
        Algorithm::parse_list(&names.join(","), collective).map_err(bad)?
    };
    let mut specs: Vec<AlgorithmSpec> = builtins.into_iter().map(AlgorithmSpec::Builtin).collect();
    for file in files {
        let text = railyard_topology::file::read_text(Path::new(file), msccl::MAX_XML_BYTES as u64)?;
        specs.push(AlgorithmSpec::Msccl { file: file.to_string(), text: text.into() });
    }
    Ok((specs, strict))
}

/// One collective, as every front end asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveRequest {
    pub collective: Collective,
    /// The large buffer, as nccl-tests counts it.
    pub bytes: u64,
    pub elem_bytes: u64,
    /// Root of rooted collectives (the sender of send/recv).
    pub root: Rank,
    pub algorithms: Vec<AlgorithmSpec>,
    /// An algorithm that cannot run here is an error (named ones), not skipped (`all`).
    pub strict: bool,
    /// Parallel rings for the ring algorithms.
    pub channels: usize,
    pub chunks: ChunkPolicy,
    /// How a hierarchical all-reduce crosses servers.
    pub inter_stage: InterStage,
    pub placement: PlacementPolicy,
    /// Ranks placed (every GPU of the topology when `None`).
    pub ranks: Option<usize>,
    /// Ring and chain order (rank order when `None`).
    pub order: Option<Vec<Rank>>,
    /// Server groups of the hierarchical algorithms (the placement's servers when `None`).
    pub groups: Option<Vec<Vec<Rank>>>,
}

impl CollectiveRequest {
    /// `algorithms` (named: each must run) for `bytes` of `elem_bytes`-byte elements, every
    /// other option at its default: root 0, one channel, chunks searched, rank order,
    /// contiguous placement on every GPU, servers as groups.
    pub fn new(collective: Collective, bytes: u64, elem_bytes: u64, algorithms: Vec<Algorithm>) -> Self {
        CollectiveRequest {
            collective,
            bytes,
            elem_bytes,
            root: 0,
            algorithms: algorithms.into_iter().map(AlgorithmSpec::Builtin).collect(),
            strict: true,
            channels: 1,
            chunks: ChunkPolicy::Search,
            inter_stage: InterStage::Ring,
            placement: PlacementPolicy::Contiguous,
            ranks: None,
            order: None,
            groups: None,
        }
    }

    /// Every built-in algorithm that implements the collective, those that cannot run
    /// here skipped (`--algo all`).
    pub fn all(collective: Collective, bytes: u64, elem_bytes: u64) -> Self {
        let every = Algorithm::ALL.into_iter().filter(|a| a.supports(collective)).collect();
        CollectiveRequest { strict: false, ..CollectiveRequest::new(collective, bytes, elem_bytes, every) }
    }

    /// The built-in algorithms asked for, each once, in the order asked.
    pub fn builtins(&self) -> Vec<Algorithm> {
        let mut asked = Vec::new();
        for spec in &self.algorithms {
            if let AlgorithmSpec::Builtin(a) = spec {
                if !asked.contains(a) {
                    asked.push(*a);
                }
            }
        }
        asked
    }

    /// Whether NCCL's rule of thumb may reach for CollNet (in-network reduction): an
    /// all-reduce, switches that reduce, and in-network among the algorithms asked for.
    pub fn in_network_available(&self, topology: &Topology) -> bool {
        topology.devices.iter().any(|d| d.in_network_reduction)
            && self.collective == Collective::AllReduce
            && [Algorithm::InNetwork, Algorithm::InNetworkChain]
                .iter()
                .any(|&a| self.algorithms.contains(&AlgorithmSpec::Builtin(a)))
    }
}

/// An algorithm that could not run here (and why), when the request skips them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
    /// Whether it runs here but is over a size limit (too many transfers to list): then
    /// the fastest of the others bounds nothing.
    #[serde(skip)]
    pub over_a_limit: bool,
}

/// One algorithm of a request, ready to cost, simulate or run.
#[derive(Debug)]
pub struct Variant {
    pub algorithm: AlgorithmRef,
    pub schedule: CompactSchedule,
    /// Chunks it was cut into (algorithms that pipeline).
    pub pipeline_chunks: Option<usize>,
    /// Parallel rings (1 for algorithms that have none).
    pub channels: usize,
    /// Its cost, where resolving it costed it already (a chunk search).
    pub breakdown: Option<Breakdown>,
}

/// A request resolved on a topology.
#[derive(Debug)]
pub struct Resolved {
    pub placement: Placement,
    pub spec: CollectiveSpec,
    /// Server groups the variants were generated with.
    pub groups: Vec<Vec<Rank>>,
    pub variants: Vec<Variant>,
    pub skipped: Vec<Skipped>,
}

/// The schedules `request` asks for on `topology`: the placement, the spec, and one
/// variant per algorithm (built-ins first, each once, in the order asked; then MSCCL
/// programs), with its chunk count settled by the policy. With `strict`, an algorithm
/// that cannot run is an error; otherwise it is skipped, saying why.
pub fn resolve(topology: &Topology, request: &CollectiveRequest) -> Result<Resolved, ModelError> {
    let placement = Placement::new(topology, &request.placement, request.ranks).map_err(ModelError::Placement)?;
    resolve_on(topology, &placement, request)
}

/// [`resolve`] on a placement already made.
pub fn resolve_on(
    topology: &Topology,
    placement: &Placement,
    request: &CollectiveRequest,
) -> Result<Resolved, ModelError> {
    resolve_with(topology, placement, request, Costs::WhereSearched)
}

/// Which variants resolving costs with the per-round model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Costs {
    /// Only those whose chunk count was searched.
    WhereSearched,
    /// Every variant (`plan`): one that cannot be costed is skipped or refused as one that
    /// cannot be generated is.
    Every,
}

pub(crate) fn resolve_with(
    topology: &Topology,
    placement: &Placement,
    request: &CollectiveRequest,
    costs: Costs,
) -> Result<Resolved, ModelError> {
    // One route table for every algorithm and chunk count: they use the same pairs.
    resolve_with_routes(&mut RouteTable::new(topology), placement, request, costs)
}

/// [`resolve_with`] on a route table the caller keeps (many requests on one large
/// topology: the table's index is built once).
pub(crate) fn resolve_with_routes(
    routes: &mut RouteTable,
    placement: &Placement,
    request: &CollectiveRequest,
    costs: Costs,
) -> Result<Resolved, ModelError> {
    let topology = routes.topology();
    if request.elem_bytes == 0 || !request.bytes.is_multiple_of(request.elem_bytes) {
        return Err(ModelError::SizeNotMultiple { bytes: request.bytes, elem_bytes: request.elem_bytes });
    }
    let count = request.bytes / request.elem_bytes;
    let spec = CollectiveSpec::new(request.collective, placement.len(), count).with_root(request.root);
    // Said once for the request, not once per algorithm that would fail on it.
    if request.collective.rooted() && request.root >= placement.len() {
        return Err(ModelError::BadInput {
            field: "root".into(),
            message: format!(
                "{} is not a rank of the {} placed (0..{})",
                request.root,
                placement.len(),
                placement.len()
            ),
        });
    }
    let groups = request.groups.clone().unwrap_or_else(|| placement.ranks_by_server(topology));
    let asked = request.builtins();
    check_options(request, &asked, placement.len())?;
    let mut variants = Vec::new();
    let mut skipped = Vec::new();
    let has_programs = request.algorithms.iter().any(|a| matches!(a, AlgorithmSpec::Msccl { .. }));
    for &algorithm in &asked {
        let choices = chunk_choices(algorithm, request.collective, request.chunks, count);
        let costed = choices.len() > 1 || costs == Costs::Every;
        let mut best: Option<Result<Variant, ModelError>> = None;
        for chunks in choices {
            let options = gen_options(
                algorithm,
                request.channels,
                chunks,
                request.order.as_deref(),
                groups.clone(),
                request.inter_stage,
            );
            let made = hardware_for(algorithm, topology).and_then(|()| {
                generate_compact(algorithm, &spec, &options, request.elem_bytes).map_err(ModelError::from)
            });
            let variant = made.and_then(|schedule| {
                let breakdown = match costed {
                    true => Some(cost_with(&schedule, routes, placement)?),
                    false => None,
                };
                Ok(Variant {
                    algorithm: AlgorithmRef::Builtin(algorithm),
                    schedule,
                    pipeline_chunks: (algorithm.pipelined() || chunks > 1).then_some(chunks),
                    channels: match algorithm {
                        Algorithm::RailRing => railyard_schedule::rail_ring::rail_channels(
                            options.channels,
                            groups.first().map_or(1, Vec::len),
                        ),
                        _ => options.channels,
                    },
                    breakdown,
                })
            });
            // The fastest chunk count; the first of equals. The counts rise, and what
            // fails at one fails at every larger one (a limit grows with the chunks; the
            // hardware, the groups and the spec do not change): the search stops there.
            let failed = variant.is_err();
            best = match (best, variant) {
                (Some(Ok(a)), Ok(b)) => Some(Ok(if secs(&b) < secs(&a) { b } else { a })),
                (Some(Ok(a)), Err(_)) => Some(Ok(a)),
                (_, v) => Some(v),
            };
            if failed {
                break;
            }
        }
        let Some(result) = best else { continue };
        if !algorithm.supports(request.collective) && !request.strict {
            continue;
        }
        // Beside MSCCL programs a named algorithm is a baseline: where it does not
        // implement the collective (`ring,alltoall.xml --collective alltoall`) it is
        // skipped and said, not an error that hides the programs' results.
        let baseline = has_programs && !algorithm.supports(request.collective);
        match result {
            Ok(v) => variants.push(v),
            Err(e) if !request.strict || baseline => {
                skipped.push(Skipped { name: algorithm.to_string(), over_a_limit: e.is_limit(), reason: e.to_string() })
            }
            Err(e) => return Err(e),
        }
    }
    for spec_of in &request.algorithms {
        if let AlgorithmSpec::Msccl { file, text } = spec_of {
            // Beside other algorithms (a sweep, a comparison), a program MSCCL would not
            // run at this size (outside its minBytes..maxBytes, or less than a chunk each)
            // is skipped and said; asked for alone, that is the answer.
            let mut v = match msccl_variant(file, text, request, placement.len()) {
                Err(e @ (ModelError::MscclTooSmall { .. } | ModelError::MscclOutOfRange { .. }))
                    if request.algorithms.len() > 1 =>
                {
                    skipped.push(Skipped { name: file.clone(), over_a_limit: false, reason: e.to_string() });
                    continue;
                }
                v => v?,
            };
            if costs == Costs::Every {
                v.breakdown = Some(cost_with(&v.schedule, routes, placement)?);
            }
            variants.push(v);
        }
    }
    Ok(Resolved { placement: placement.clone(), spec, groups, variants, skipped })
}

/// An algorithm whose steps need a kind of switch is refused on a topology without one:
/// NVLS reduces in an NVSwitch, and on a switch elsewhere it would be another algorithm.
fn hardware_for(algorithm: Algorithm, topology: &Topology) -> Result<(), ModelError> {
    let nvls = |d: &railyard_topology::Device| d.kind == DeviceKind::NvSwitch && d.in_network_reduction;
    if matches!(algorithm, Algorithm::Nvls | Algorithm::NvlsTree) && !topology.devices.iter().any(nvls) {
        return Err(ModelError::NeedsHardware {
            needs: "an NVSwitch that reduces (NVLS: NVLink4 or later, e.g. dgx-h100)",
            topology: topology.name.clone(),
        });
    }
    Ok(())
}

/// A variant's time where resolving costed it (a searched one always is).
fn secs(v: &Variant) -> f64 {
    v.breakdown.as_ref().map_or(f64::INFINITY, |b| b.total_secs)
}

/// Options no algorithm asked for takes are a mistake to say, not to drop; groups must
/// hold every rank once.
fn check_options(request: &CollectiveRequest, asked: &[Algorithm], ranks: usize) -> Result<(), ModelError> {
    let bad = |field: &str, message: String| ModelError::BadInput { field: field.into(), message };
    // Checked here for every front end (flags, jobs files, Python), not by each.
    if !(1..=MAX_CHANNELS).contains(&request.channels) {
        return Err(bad("channels", format!("{}: from 1 to {MAX_CHANNELS}", request.channels)));
    }
    if let ChunkPolicy::Fixed(n) = request.chunks {
        if !(1..=MAX_PIPELINE_CHUNKS).contains(&n) {
            return Err(bad("pipeline_chunks", format!("{n}: from 1 to {MAX_PIPELINE_CHUNKS}")));
        }
    }
    if let Some(groups) = &request.groups {
        let mut seen = vec![false; ranks];
        for &r in groups.iter().flatten() {
            if r >= seen.len() {
                return Err(bad("groups", format!("rank {r} is out of range 0..{}", seen.len())));
            }
            if seen[r] {
                return Err(bad("groups", format!("rank {r} is in two groups")));
            }
            seen[r] = true;
        }
        if let Some(r) = seen.iter().position(|&s| !s) {
            return Err(bad("groups", format!("rank {r} is in no group")));
        }
    }
    let runs = |a: &&Algorithm| a.supports(request.collective);
    let names = || asked.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ");
    let unused = |option: &str, sets: &str, takes: fn(&Algorithm) -> bool| {
        let why = match asked.iter().find(|a| takes(a)) {
            Some(a) => format!("{a} takes it but does not run {}", request.collective.as_str()),
            None => format!("none of the algorithms asked ({}) is one", names()),
        };
        bad(option, format!("sets {sets}, and {why}"))
    };
    if request.order.is_some() && !asked.iter().filter(runs).any(|a| a.uses_order()) {
        return Err(unused("order", "the rank order of ring and chain", |a| a.uses_order()));
    }
    let all_reduce = request.collective == Collective::AllReduce;
    if request.inter_stage != InterStage::Ring && !(all_reduce && asked.iter().any(|a| a.uses_inter_stage())) {
        return Err(unused("inter_stage", "how hierarchical and nvls all-reduces cross servers", |a| {
            a.uses_inter_stage()
        }));
    }
    if matches!(request.chunks, ChunkPolicy::Fixed(n) if n > 1)
        && !asked.iter().filter(runs).any(|a| may_take_chunks(*a))
    {
        return Err(unused(
            "pipeline_chunks",
            "how many pipelined chunks chain, trees, hierarchical, in-network and nvls cut the data into",
            |a| may_take_chunks(*a),
        ));
    }
    if request.groups.is_some() && !asked.iter().filter(runs).any(|a| a.uses_groups()) {
        return Err(unused("groups", "the server groups of hierarchical, in-network and interleaved-ring", |a| {
            a.uses_groups()
        }));
    }
    Ok(())
}

/// An MSCCL program as a variant: read once, proved by the symbolic checker on one
/// element per chunk, then generated at the request's size rounded down to whole
/// chunks. Refused if it is not the collective asked, does not fit the ranks, or fails
/// the checker.
fn msccl_variant(file: &str, text: &str, request: &CollectiveRequest, ranks: usize) -> Result<Variant, ModelError> {
    // A custom program is read as the collective asked (it names none of its own), and a
    // root its file and steps do not tell is the one asked.
    let read_as = msccl::ReadAs { custom: Some(request.collective), root: Some(request.root) };
    let (schedule, info, problem) = msccl_program(file, text, request.bytes, request.elem_bytes, read_as)?;
    if !info.runs_at(request.bytes) {
        return Err(ModelError::MscclOutOfRange {
            bytes: request.bytes,
            min_bytes: info.min_bytes,
            max_bytes: info.max_bytes.unwrap_or(u64::MAX),
        });
    }
    let refuse = |problem| ModelError::Msccl { file: file.to_string(), problem };
    if info.collective != request.collective {
        return Err(refuse(MscclProblem::Collective { program: info.collective, asked: request.collective }));
    }
    if info.gpus != ranks {
        return Err(refuse(MscclProblem::Ranks { gpus: info.gpus, ranks }));
    }
    if info.collective.rooted() && info.root != request.root {
        return Err(refuse(MscclProblem::Root { program: info.root, asked: request.root }));
    }
    if let Some(p) = problem {
        return Err(refuse(MscclProblem::Refused { problem: p }));
    }
    Ok(Variant {
        algorithm: AlgorithmRef::Named(format!("msccl:{}", info.name)),
        // The passes of MSCCL's loop over the buffer, pipelined along the program.
        pipeline_chunks: (schedule.pipeline_chunks > 1).then_some(schedule.pipeline_chunks),
        schedule,
        channels: 1,
        breakdown: None,
    })
}

/// An MSCCL program's schedule at `bytes` (rounded down to whole chunks), what it says
/// of itself, and the symbolic checker's objection if it has one; what the file does
/// not say (a custom program's collective, a root) read as `read_as` says.
pub fn msccl_program(
    file: &str,
    text: &str,
    bytes: u64,
    elem_bytes: u64,
    read_as: msccl::ReadAs,
) -> Result<(CompactSchedule, msccl::MscclInfo, Option<String>), ModelError> {
    let unreadable = |e: railyard_schedule::ScheduleError| ModelError::MscclUnreadable {
        file: file.to_string(),
        message: e.to_string(),
    };
    let program = msccl::Program::parse_as(text, read_as).map_err(unreadable)?;
    let chunks = program.info.chunks;
    // Proved in every mode MSCCL runs it in (in place, out of place, or both).
    let mut problem = None;
    for in_place in program.modes() {
        let proof = program.schedule_mode(chunks, elem_bytes, in_place).map_err(unreadable)?;
        if let Err(e) = check(&proof.expand()) {
            let mode = if in_place { "in place" } else { "out of place" };
            // A custom program was read as the collective asked: say so, since that
            // may be what is wrong.
            let read_as = match program.info.custom {
                true => format!(" (coll=\"custom\" read as {})", program.info.collective.as_str()),
                false => String::new(),
            };
            problem = Some(format!("{mode}{read_as}: {e}"));
            break;
        }
    }
    let count = msccl_count(chunks, bytes, elem_bytes)?;
    let schedule = program.schedule(count, elem_bytes).map_err(unreadable)?;
    Ok((schedule, program.info, problem))
}

/// The elements an MSCCL program of `chunks` chunks runs on at `bytes`: a whole number
/// of its chunks, at least one.
pub fn msccl_count(chunks: u64, bytes: u64, elem_bytes: u64) -> Result<u64, ModelError> {
    let count = bytes / elem_bytes.max(1) / chunks.max(1) * chunks;
    if count == 0 {
        return Err(ModelError::MscclTooSmall { bytes, chunks });
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chunk_policy_in_one_place() {
        use Collective::{AllReduce, AllToAll};
        assert_eq!(
            chunk_choices(Algorithm::Tree, AllReduce, ChunkPolicy::Search, 1 << 20),
            vec![1, 2, 4, 8, 16, 32, 64, 128]
        );
        assert_eq!(chunk_choices(Algorithm::Chain, AllReduce, ChunkPolicy::Search, 5), vec![1, 2, 4]);
        assert_eq!(chunk_choices(Algorithm::Ring, AllReduce, ChunkPolicy::Search, 1 << 20), vec![1]);
        assert_eq!(chunk_choices(Algorithm::Hierarchical, AllReduce, ChunkPolicy::Search, 1 << 20), vec![1]);
        assert_eq!(chunk_choices(Algorithm::Hierarchical, AllReduce, ChunkPolicy::Fixed(4), 1 << 20), vec![4]);
        assert_eq!(chunk_choices(Algorithm::Rhd, AllReduce, ChunkPolicy::Fixed(4), 1 << 20), vec![1]);
        // The hierarchical all-to-all is one piece: searching chunks would build it again
        // for every count (P² transfers each).
        assert_eq!(chunk_choices(Algorithm::Hierarchical, AllToAll, ChunkPolicy::SearchAll, 1 << 20), vec![1]);
        assert_eq!(chunk_choices(Algorithm::Hierarchical, AllToAll, ChunkPolicy::Fixed(4), 1 << 20), vec![1]);
        let o = gen_options(Algorithm::Rhd, 4, 1, Some(&[1, 0]), vec![], InterStage::Ring);
        assert_eq!((o.channels, o.order), (1, None), "options rhd does not take are left out");
        let o = gen_options(Algorithm::Ring, 4, 1, Some(&[1, 0]), vec![], InterStage::Ring);
        assert_eq!((o.channels, o.order), (4, Some(vec![1, 0])));
    }

    #[test]
    fn options_are_checked_once_for_the_request() {
        let t = railyard_topology::presets::preset("hgx-h100x2").unwrap();
        let field_of = |r: CollectiveRequest| match resolve(&t, &r) {
            Err(ModelError::BadInput { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let base = || CollectiveRequest::all(Collective::Broadcast, 1 << 20, 4);
        assert_eq!(field_of(CollectiveRequest { channels: 0, ..base() }), "channels");
        // Chunks for algorithms none of which pipelines: said, not dropped.
        let rings = CollectiveRequest {
            chunks: ChunkPolicy::Fixed(4),
            algorithms: vec![AlgorithmSpec::Builtin(Algorithm::Ring), AlgorithmSpec::Builtin(Algorithm::Rhd)],
            strict: true,
            ..CollectiveRequest::all(Collective::AllReduce, 1 << 20, 4)
        };
        match resolve(&t, &rings) {
            Err(ModelError::BadInput { field, message }) => {
                assert_eq!(field, "pipeline_chunks");
                assert!(message.contains("none of the algorithms asked (ring, rhd)"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let tree = CollectiveRequest { algorithms: vec![AlgorithmSpec::Builtin(Algorithm::Tree)], ..rings };
        assert!(resolve(&t, &tree).is_ok());
        assert_eq!(field_of(CollectiveRequest { channels: MAX_CHANNELS + 1, ..base() }), "channels");
        assert_eq!(field_of(CollectiveRequest { chunks: ChunkPolicy::Fixed(0), ..base() }), "pipeline_chunks");
        // One error for the request, not one skipped algorithm each.
        assert_eq!(field_of(CollectiveRequest { root: 16, ..base() }), "root");
        assert!(resolve(&t, &CollectiveRequest { root: 15, ..base() }).is_ok());
    }

    #[test]
    fn algorithm_lists_and_names() {
        let (all, strict) = parse_algorithms("all", Collective::Broadcast).unwrap();
        assert!(
            !strict && all.iter().all(|a| matches!(a, AlgorithmSpec::Builtin(x) if x.supports(Collective::Broadcast)))
        );
        let (named, strict) = parse_algorithms("ring, rhd", Collective::AllReduce).unwrap();
        assert!(strict && named == [AlgorithmSpec::Builtin(Algorithm::Ring), AlgorithmSpec::Builtin(Algorithm::Rhd)]);
        assert!(parse_algorithms("nosuch", Collective::AllReduce).is_err());
        assert!(parse_algorithms("nosuch.xml", Collective::AllReduce).is_err());
        assert_eq!(AlgorithmRef::from_name("double-tree"), AlgorithmRef::Builtin(Algorithm::DoubleTree));
        assert_eq!(AlgorithmRef::from_name("msccl:x").to_string(), "msccl:x");
    }
}

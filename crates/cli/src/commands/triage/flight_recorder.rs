//! `railyard triage DIR` on PyTorch's Flight Recorder dumps (one file per rank,
//! `<prefix><rank>`, pickle or JSON; `railyard_nccl::flight_recorder` reads them): per
//! process group, the rank behind, the first collective the ranks disagree on, what each
//! rank last finished and who waits in what — the same analysis as railyard's own dumps
//! (`triage`), on the group's collectives. Where a rank is behind, the step of NCCL's
//! algorithm for that collective, size and group at which each waiting rank is stuck:
//! NCCL's tuner picks the algorithm on a topology (the user's `--topo`, else DGX H100
//! nodes of 8 GPUs, said so), its railyard schedule is generated, and the stall is
//! followed from the absent rank along the schedule's transfers (`waits::first_waits`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use railyard_model::request::{resolve_on, CollectiveRequest};
use railyard_nccl::flight_recorder::{self as fr, FrDump, FrEntry, FrState};
use railyard_nccl::shape::{self, Overrides};
use railyard_nccl::tuner::{self, Coll};
use railyard_runtime::recorder::{CallRecord, CallState, Dump};
use railyard_schedule::Collective;
use railyard_topology::{Placement, PlacementPolicy};
use serde::Serialize;

use super::{triage, Behind, Findings};

/// Files read at most.
const MAX_FILES: usize = 4096;
/// Ranks of a group whose schedule is followed (an expanded ring of P ranks has P² transfers).
const MAX_STEP_RANKS: usize = 1024;
/// GPUs of the job the group is placed in (the assumed topology is built that large).
const MAX_JOB_RANKS: usize = 16384;

/// One process group's analysis; ranks are the group's (0..size), `ranks` maps them to
/// the job's.
#[derive(Debug, Serialize)]
pub struct GroupReport {
    pub name: String,
    pub desc: String,
    pub ranks: Vec<usize>,
    /// Whether `ranks` come from the dumps' group table (else: only the ranks that
    /// recorded the group's calls, so one that recorded none is not among them).
    pub members_known: bool,
    pub findings: Findings,
    /// Per group rank: the last collective it finished, described.
    pub last_done: Vec<(usize, Option<String>)>,
    /// Sends and receives recorded (not compared: they are matched by pair, not by order).
    pub p2p_entries: usize,
    pub nccl: Option<NcclWait>,
    /// Why no NCCL step is given, when a rank is behind.
    pub nccl_note: Option<String>,
}

/// Where NCCL's algorithm for the stalled collective waits on the absent rank.
#[derive(Debug, Serialize)]
pub struct NcclWait {
    pub seq: u64,
    pub collective: String,
    pub bytes: u64,
    pub topology: String,
    pub topology_assumed: bool,
    pub algorithm: String,
    pub protocol: String,
    pub schedule: String,
    pub absent: usize,
    /// A rooted collective, stepped from root 0 (the recorder keeps no root).
    pub rooted: bool,
    pub rounds: usize,
    /// (group rank, round from 1, the round in words) per waiting rank, in round order.
    pub waits: Vec<(usize, usize, String)>,
}

#[derive(Debug, Serialize)]
pub struct FrReport {
    pub versions: Vec<String>,
    pub ranks: Vec<usize>,
    pub groups: Vec<GroupReport>,
    /// Files that look like dumps but could not be read (a rank that crashed while
    /// writing), with why: their ranks count as missing.
    pub unreadable: Vec<(String, String)>,
}

/// The rank a dump file's name gives: its trailing digits (`..._rank3`, `rank3.json`).
fn file_rank(name: &str) -> Option<(String, usize)> {
    let stem = [".json", ".pkl", ".pickle"].iter().find_map(|x| name.strip_suffix(x)).unwrap_or(name);
    let digits = stem.len() - stem.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 9 {
        return None;
    }
    let (prefix, rank) = stem.split_at(stem.len() - digits);
    Some((prefix.to_string(), rank.parse().ok()?))
}

/// The Flight Recorder dumps in `dir` (None: there are none), and the files that look
/// like dumps but cannot be read (with why).
pub type Loaded = (Vec<FrDump>, Vec<(String, String)>);

/// The Flight Recorder dumps in `dir` (None: there are none).
pub fn load(dir: &Path, max_bytes: u64) -> Result<Option<Loaded>> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let mut by_prefix: BTreeMap<String, Vec<FrDump>> = BTreeMap::new();
    let mut unreadable = Vec::new();
    let mut files = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((prefix, rank)) = file_rank(&name) else { continue };
        if !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        files += 1;
        if files > MAX_FILES {
            bail!("more than {MAX_FILES} files named <prefix><rank> in {}", dir.display());
        }
        let path = e.path();
        let bytes = super::read_bounded(&e, max_bytes)?;
        if !fr::looks_like_dump(&bytes) {
            continue;
        }
        match fr::parse(&bytes, Some(rank)) {
            Ok(dump) => by_prefix.entry(prefix).or_default().push(dump),
            // A rank that crashed while writing leaves a torn file: the others still tell.
            Err(e) => unreadable.push((path.display().to_string(), e.to_string())),
        }
    }
    if by_prefix.len() > 1 {
        let names: Vec<&str> = by_prefix.keys().map(|k| k.as_str()).collect();
        bail!(
            "Flight Recorder dumps of several jobs in {} (file prefixes {names:?}): give a directory of one job's dumps",
            dir.display()
        );
    }
    let Some(mut dumps) = by_prefix.into_values().next() else {
        if let Some((file, why)) = unreadable.first() {
            bail!("{file} is not a readable Flight Recorder dump: {why}");
        }
        return Ok(None);
    };
    super::sort_by_rank(&mut dumps, |d| d.rank, "Flight Recorder dumps")?;
    Ok(Some((dumps, unreadable)))
}

/// Torch's dtype names and their sizes in bytes.
fn dtype_bytes(name: &str) -> Option<u64> {
    Some(match name {
        "Double" | "Long" | "ComplexFloat" => 8,
        "Float" | "Int" => 4,
        "Half" | "BFloat16" | "Short" => 2,
        "Byte" | "Char" | "Bool" | "Float8_e4m3fn" | "Float8_e5m2" => 1,
        _ => return None,
    })
}

/// The railyard collective a torch operation name is (None: barrier, coalesced, ...).
fn collective_of(op: &str) -> Option<Collective> {
    Some(match op {
        "all_reduce" | "allreduce" | "allreduce_coalesced" | "all_reduce_coalesced" => Collective::AllReduce,
        "broadcast" | "_broadcast_oop" => Collective::Broadcast,
        "reduce" | "_reduce_oop" => Collective::Reduce,
        "all_gather"
        | "allgather"
        | "_allgather_base"
        | "_all_gather_base"
        | "all_gather_into_tensor"
        | "all_gather_single"
        | "all_gather_into_tensor_coalesced"
        | "allgather_into_tensor_coalesced"
        | "all_gather_v" => Collective::AllGather,
        "reduce_scatter"
        | "_reduce_scatter_base"
        | "reduce_scatter_tensor"
        | "reduce_scatter_single"
        | "reduce_scatter_tensor_coalesced"
        | "reduce_scatter_v" => Collective::ReduceScatter,
        "all_to_all" | "alltoall" | "alltoall_base" | "all_to_all_single" | "all_to_all_v_single" => {
            Collective::AllToAll
        }
        "gather" => Collective::Gather,
        "scatter" => Collective::Scatter,
        _ => return None,
    })
}

/// The groups' members as the dumps' `pg_config` tables give them: by name, and the
/// default group's (gloo's dumps name it "" there and "0" in the entries).
struct Configs {
    by_name: BTreeMap<String, Vec<usize>>,
    default: Option<Vec<usize>>,
}

impl Configs {
    fn new(dumps: &[FrDump]) -> Configs {
        let mut by_name = BTreeMap::new();
        for g in dumps.iter().flat_map(|d| d.groups.iter()).filter(|g| !g.ranks.is_empty()) {
            by_name.entry(g.name.clone()).or_insert_with(|| g.ranks.clone());
        }
        let default = by_name.get("").or_else(|| by_name.get("0")).cloned();
        Configs { by_name, default }
    }

    /// A group's members (job ranks in group-rank order), and whether they are known:
    /// its entry by name; for the default group the default's; else only the ranks whose
    /// dumps hold its entries (a rank that recorded none of them cannot be named).
    fn members(&self, name: &str, desc: &str, seen: &[usize]) -> (Vec<usize>, bool) {
        if let Some(r) = self.by_name.get(name) {
            return (r.clone(), true);
        }
        if desc == "default_pg" || name == "0" {
            if let Some(r) = &self.default {
                return (r.clone(), true);
            }
        }
        (seen.to_vec(), false)
    }
}

fn record(e: &FrEntry, done: bool) -> CallRecord {
    CallRecord {
        seq: e.collective_seq_id,
        collective: e.op.clone(),
        count: e.input_elements(),
        dtype: e.input_dtypes.join(","),
        op: String::new(),
        root: u32::MAX,
        peer: 0,
        algorithm: String::new(),
        rounds: 0,
        round_reached: 0,
        peers: vec![],
        start_secs: e.time_created_ns as f64 * 1e-9,
        end_secs: None,
        state: if done { CallState::Done } else { CallState::Running },
        error: None,
    }
}

/// Collectives whose ranks legitimately pass different sizes (torch's own analyser
/// exempts them too: `_UNEVEN_COLLECTIVES`).
const UNEVEN: [&str; 9] = [
    "all_to_all",
    "alltoall",
    "alltoall_base",
    "all_to_all_single",
    "all_to_all_v_single",
    "scatter",
    "gather",
    "all_gather_v",
    "reduce_scatter_v",
];

/// Every group's analysis; `topo` names the machine NCCL's step is found on.
pub fn analyse(dumps: &[FrDump], topo: Option<&str>) -> FrReport {
    let configs = Configs::new(dumps);
    // One pass over every entry: by group, then by dump (no group rescans the dumps).
    let mut by_group: BTreeMap<&str, (&str, BTreeMap<usize, Vec<&FrEntry>>)> = BTreeMap::new();
    for (i, d) in dumps.iter().enumerate() {
        for e in &d.entries {
            by_group
                .entry(e.group.as_str())
                .or_insert((e.group_desc.as_str(), BTreeMap::new()))
                .1
                .entry(i)
                .or_default()
                .push(e);
        }
    }
    let mut groups = Vec::new();
    for (name, (desc, per_dump)) in by_group {
        let seen: Vec<usize> = per_dump.keys().map(|&i| dumps[i].rank).collect();
        let (ranks, known) = configs.members(name, desc, &seen);
        let is_call = |e: &&&FrEntry| e.is_collective();
        let highest =
            per_dump.values().flat_map(|es| es.iter().filter(is_call)).map(|e| e.collective_seq_id).max().unwrap_or(0);
        let mut group_dumps = Vec::new();
        let mut p2p_entries = 0;
        for (&i, entries) in &per_dump {
            let d = &dumps[i];
            let Some(group_rank) = ranks.iter().position(|&r| r == d.rank) else { continue };
            p2p_entries += entries.iter().filter(|e| e.is_p2p()).count();
            // NCCL's records say when a call completed; gloo's stay "scheduled" to the end,
            // and there a blocking collective that any member went past has finished.
            let records_completion = !entries.iter().any(|e| e.library == "gloo");
            let records: Vec<CallRecord> = entries
                .iter()
                .filter(is_call)
                .map(|e| {
                    let done = e.state == FrState::Completed || (!records_completion && e.collective_seq_id < highest);
                    let mut r = record(e, done);
                    if UNEVEN.contains(&e.op.as_str()) {
                        // Sizes differ by design: not compared (the count stays in words).
                        r.dtype = format!("{} ({} elements here)", r.dtype, r.count);
                        r.count = 0;
                    }
                    r
                })
                .collect();
            group_dumps.push(Dump {
                rank: group_rank,
                size: ranks.len(),
                host: String::new(),
                pid: 0,
                reason: format!("Flight Recorder dump of rank {}", d.rank),
                unix_secs: 0.0,
                at_secs: 0.0,
                calls: records,
            });
        }
        let findings = triage(&group_dumps);
        let last_done = group_dumps
            .iter()
            .map(|d| {
                let last = d.calls.iter().rev().find(|c| c.state == CallState::Done);
                (d.rank, last.map(|c| format!("#{} {}", c.seq, c.describe())))
            })
            .collect();
        let (nccl, nccl_note) = match stalled_call(&findings, &group_dumps, dumps, name, &ranks) {
            Some((entry, absent)) => match nccl_wait(entry, absent, &ranks, topo) {
                Ok(w) => (Some(w), None),
                Err(e) => (None, Some(format!("{e:#}"))),
            },
            None => (None, None),
        };
        groups.push(GroupReport {
            name: name.to_string(),
            desc: desc.to_string(),
            ranks,
            members_known: known,
            findings,
            last_done,
            p2p_entries,
            nccl,
            nccl_note,
        });
    }
    let mut versions: Vec<String> = dumps.iter().map(|d| d.version.clone()).collect();
    versions.sort();
    versions.dedup();
    FrReport { versions, ranks: dumps.iter().map(|d| d.rank).collect(), groups, unreadable: vec![] }
}

/// The collective the others wait in for a rank behind, and that rank (group ranks).
fn stalled_call<'a>(
    f: &Findings,
    group_dumps: &[Dump],
    dumps: &'a [FrDump],
    name: &str,
    ranks: &[usize],
) -> Option<(&'a FrEntry, usize)> {
    let Behind { ranks: behind, their_last_call, others_reached } = f.behind.as_ref()?;
    let absent = *behind.first()?;
    // The first call the rank behind has not issued (or, with no dump from it, the last
    // the others reached).
    let seq = their_last_call.map_or(*others_reached, |last| last + 1);
    let waiting = group_dumps.iter().find(|d| !behind.contains(&d.rank))?;
    let dump = dumps.iter().find(|d| d.rank == ranks[waiting.rank])?;
    let entry = dump.entries.iter().find(|e| e.group == name && e.is_collective() && e.collective_seq_id == seq)?;
    Some((entry, absent))
}

fn nccl_wait(entry: &FrEntry, absent: usize, members: &[usize], topo: Option<&str>) -> Result<NcclWait> {
    let size = members.len();
    let collective =
        collective_of(&entry.op).with_context(|| format!("{} has no NCCL algorithm railyard models", entry.op))?;
    if size > MAX_STEP_RANKS {
        bail!("a group of {size} ranks: the step is followed for groups of at most {MAX_STEP_RANKS}");
    }
    let dtype = entry.input_dtypes.first().map(String::as_str).unwrap_or("");
    let elem_bytes = dtype_bytes(dtype).with_context(|| format!("dtype {dtype:?} has no size railyard knows"))?;
    // NCCL's nBytes, and the count railyard's spec takes: the whole buffer (all-gather:
    // the output; reduce-scatter and the rest: the input).
    let elements = match collective {
        Collective::AllGather | Collective::Gather => {
            entry.input_elements().saturating_mul(size as u64).max(fr::elements(&entry.output_sizes))
        }
        _ => entry.input_elements(),
    };
    let count = elements.max(size as u64);
    let bytes = count.checked_mul(elem_bytes).context("the collective's size overflows 64 bits")?;
    // The group's members where they are in the job: job rank r on GPU r of the job's
    // machine (a data-parallel group [0, 8, 16, 24] spans four 8-GPU nodes).
    let job_ranks = members.iter().max().map_or(size, |&m| m.saturating_add(1));
    if job_ranks > MAX_JOB_RANKS {
        bail!("the group's ranks reach {job_ranks}: the step is placed on jobs of at most {MAX_JOB_RANKS} GPUs");
    }
    let (spec, assumed) = match topo {
        Some(t) => (t.to_string(), false),
        None => (format!("dgx-h100:nodes={}", job_ranks.div_ceil(8)), true),
    };
    let topology = railyard_topology::load(&spec).with_context(|| format!("topology {spec}"))?;
    let whole = Placement::new(&topology, &PlacementPolicy::Contiguous, Some(job_ranks))
        .map_err(|e| anyhow::anyhow!("{job_ranks} ranks on {spec}: {e}"))?;
    let devices = members
        .iter()
        .map(|&r| whole.devices.get(r).copied().with_context(|| format!("rank {r} is not a GPU of {spec}")))
        .collect::<Result<Vec<_>>>()?;
    let placement = Placement { devices };
    placement.validate(&topology).map_err(|e| anyhow::anyhow!("the group on {spec}: {e}"))?;
    let coll = Coll::from_railyard(collective).with_context(|| format!("NCCL's tuner has no {}", entry.op))?;
    let shape = shape::shape(&topology, &placement, &Overrides::default())?;
    let table = tuner::table(&shape.input, coll)?;
    let choice = tuner::choose(&shape.input, &table, bytes).context("NCCL's tuner chose nothing")?;
    let algorithm = choice
        .algo
        .railyard_algorithm()
        .with_context(|| format!("NCCL would run {}, which railyard has no schedule for", choice.algo.as_str()))?;
    let request = CollectiveRequest::new(collective, bytes, elem_bytes, vec![algorithm]);
    let resolved = resolve_on(&topology, &placement, &request)?;
    let variant = resolved.variants.first().context("no schedule")?;
    let schedule = variant.schedule.expand();
    let firsts = railyard_schedule::waits::first_waits(&schedule, absent);
    let mut waits: Vec<(usize, usize, String)> =
        firsts.iter().enumerate().filter_map(|(r, w)| w.map(|i| (r, i + 1, schedule.round_label(i)))).collect();
    waits.sort_by_key(|w| (w.1, w.0));
    Ok(NcclWait {
        seq: entry.collective_seq_id,
        collective: entry.op.clone(),
        bytes,
        topology: spec,
        topology_assumed: assumed,
        algorithm: choice.algo.as_str().to_string(),
        protocol: choice.proto.as_str().to_string(),
        schedule: algorithm.to_string(),
        absent,
        rooted: collective.rooted(),
        rounds: schedule.rounds.len(),
        waits,
    })
}

/// The report in words.
pub fn text(r: &FrReport, dir: &Path) -> String {
    let mut out = format!(
        "PyTorch Flight Recorder dumps (format {}) of ranks {:?} in {}\n",
        r.versions.join(", "),
        r.ranks,
        dir.display()
    );
    for (file, why) in &r.unreadable {
        out += &format!("unreadable, its rank counted as missing: {file}: {why}\n");
    }
    for g in &r.groups {
        let job = |rank: usize| g.ranks.get(rank).copied().unwrap_or(rank);
        let list = |rs: &[usize]| rs.iter().map(|&x| job(x).to_string()).collect::<Vec<_>>().join(", ");
        let desc = if g.desc.is_empty() { String::new() } else { format!(" ({})", g.desc) };
        out += &format!("\nprocess group \"{}\"{desc}, ranks {:?}:\n", g.name, g.ranks);
        if !g.members_known {
            out += "  (the dumps' group table does not list this group: its ranks are those that recorded its calls, so a rank that recorded none cannot be named)\n";
        }
        let f = &g.findings;
        if !f.missing.is_empty() {
            out += &format!("  no dump from rank {}\n", list(&f.missing));
        }
        match &f.behind {
            Some(Behind { ranks, their_last_call: Some(last), others_reached }) => {
                out += &format!(
                    "  behind: rank {} last issued collective #{last}; the others reached #{others_reached}\n",
                    list(ranks)
                )
            }
            Some(Behind { ranks, their_last_call: None, others_reached }) => {
                out += &format!(
                    "  behind: rank {}, which left no dump while the others wait in collective #{others_reached}\n",
                    list(ranks)
                )
            }
            None => out += "  behind: no rank; every rank's last collective is the same\n",
        }
        match &f.desync {
            Some(d) => {
                out +=
                    &format!("  desync: collective #{} is the first the ranks disagree on, its {}:\n", d.seq, d.field);
                for (rank, v, call) in &d.values {
                    out += &format!("    rank {}: {v} ({call})\n", job(*rank));
                }
            }
            None => out += "  desync: none; every collective several ranks recorded matches\n",
        }
        for (rank, last) in &g.last_done {
            out += &format!("  last finished: rank {}: {}\n", job(*rank), last.as_deref().unwrap_or("none"));
        }
        for w in &f.waiting {
            out += &format!("  waiting: rank {} in collective #{} ({})\n", job(w.rank), w.seq, w.call);
        }
        if g.p2p_entries > 0 {
            out += &format!("  ({} sends and receives recorded, not compared)\n", g.p2p_entries);
        }
        if let Some(n) = &g.nccl {
            out += &format!(
                "  in NCCL's algorithm: {}{} of {} B on {} ranks runs as {}/{} (NCCL's tuner on {}{}), railyard's {} schedule of {} rounds; rank {} never joins it, so:\n",
                n.collective,
                // The recorder keeps no root: a rooted collective is stepped from rank 0.
                if n.rooted { " (root 0 assumed: the dump keeps none)" } else { "" },
                n.bytes,
                g.ranks.len(),
                n.algorithm,
                n.protocol,
                n.topology,
                if n.topology_assumed { ", assumed: --topo names yours" } else { "" },
                n.schedule,
                n.rounds,
                job(n.absent)
            );
            const SHOWN: usize = 8;
            for (rank, round, label) in n.waits.iter().take(SHOWN) {
                out += &format!("    rank {} waits at round {round} ({label})\n", job(*rank));
            }
            if n.waits.len() > SHOWN {
                out += &format!("    ... and {} more ranks, later\n", n.waits.len() - SHOWN);
            }
        }
        if let Some(note) = &g.nccl_note {
            out += &format!("  NCCL's step: not found ({note})\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_nccl::flight_recorder::FrGroup;

    fn entry(seq: u64, op: &str, elements: u64) -> FrEntry {
        FrEntry {
            record_id: seq,
            group: "0".into(),
            group_desc: "default_pg".into(),
            collective_seq_id: seq,
            p2p_seq_id: 0,
            library: "nccl".into(),
            op: op.into(),
            p2p: None,
            p2p_flag: false,
            input_sizes: vec![vec![elements]],
            input_dtypes: vec!["Float".into()],
            output_sizes: vec![vec![elements]],
            state: FrState::Scheduled,
            time_created_ns: seq,
            timeout_ms: None,
        }
    }

    fn dump(rank: usize, entries: Vec<FrEntry>) -> FrDump {
        FrDump {
            rank,
            version: "2.10".into(),
            groups: vec![FrGroup { name: "".into(), desc: "".into(), ranks: (0..4).collect() }],
            entries,
        }
    }

    /// Rank 2 stopped after collective #2; the others wait in #3, a 64 MiB all-reduce on
    /// one DGX H100 (assumed, no --topo).
    #[test]
    fn names_the_rank_behind_and_where_nccls_ring_waits() {
        // NCCL records completion: #1 and #2 completed, #3 started.
        let done = |e: FrEntry| FrEntry { state: FrState::Completed, ..e };
        let full = || {
            vec![
                done(entry(1, "all_reduce", 4)),
                done(entry(2, "broadcast", 4)),
                FrEntry { state: FrState::Started, ..entry(3, "all_reduce", 16 << 20) },
            ]
        };
        let dumps = vec![dump(0, full()), dump(1, full()), dump(2, full()[..2].to_vec()), dump(3, full())];
        let r = analyse(&dumps, None);
        let g = &r.groups[0];
        assert_eq!(g.ranks, vec![0, 1, 2, 3]);
        assert_eq!(g.findings.behind, Some(Behind { ranks: vec![2], their_last_call: Some(2), others_reached: 3 }));
        assert!(g.findings.desync.is_none());
        // What each rank last finished: #2 everywhere (#3 never finished).
        assert!(g.last_done.iter().all(|(_, l)| l.as_deref().is_some_and(|l| l.starts_with("#2 broadcast"))));
        let n = g.nccl.as_ref().expect("NCCL's step");
        assert_eq!((n.seq, n.absent, n.bytes), (3, 2, 64 << 20));
        assert!(n.topology_assumed && n.topology == "dgx-h100:nodes=1");
        // NCCL reduces 64 MiB in the NVSwitch (NVLS): every other rank waits in round 1.
        assert_eq!(n.algorithm, "NVLS");
        assert_eq!(n.waits.iter().map(|w| (w.0, w.1)).collect::<Vec<_>>(), vec![(0, 1), (1, 1), (3, 1)]);
        let words = text(&r, Path::new("d"));
        assert!(words.contains("behind: rank 2 last issued collective #2; the others reached #3"), "{words}");
        assert!(words.contains("rank 3 waits at round 1"), "{words}");
    }

    #[test]
    fn names_the_first_collective_the_ranks_disagree_on() {
        let dumps = vec![
            dump(0, vec![entry(1, "all_reduce", 4), entry(2, "all_reduce", 16)]),
            dump(1, vec![entry(1, "all_reduce", 4), entry(2, "all_gather", 8)]),
        ];
        let r = analyse(&dumps, None);
        let d = r.groups[0].findings.desync.as_ref().expect("a desync");
        assert_eq!((d.seq, d.field.as_str()), (2, "collective"));
        let words = text(&r, Path::new("d"));
        assert!(words.contains("rank 1: all_gather (all_gather of 8 elements, Float)"), "{words}");
        assert!(words.contains("no dump from rank 2, 3"), "{words}");
    }

    #[test]
    fn file_names_give_ranks() {
        assert_eq!(file_rank("nccl_trace_rank_12"), Some(("nccl_trace_rank_".into(), 12)));
        assert_eq!(file_rank("rank3.json"), Some(("rank".into(), 3)));
        assert_eq!(file_rank("notes.txt"), None);
    }
}

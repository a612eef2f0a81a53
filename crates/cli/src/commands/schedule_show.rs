//! `railyard schedule show` and `schedule check`: an algorithm as the explicit plan it
//! is — round by round, who sends which chunk to whom, copied or reduced, what the
//! switches reduce and what each rank does locally — drawn as ranks × rounds, and proved
//! by the symbolic checker and the deadlock check at each rank count asked.

use anyhow::{bail, Result};
use clap::Args;
use railyard_model::gen_options;
use railyard_schedule::{Algorithm, Collective, CollectiveSpec, Flow, Op, Region, Schedule};
use railyard_units::Table;

use crate::args::Format;

/// The most ranks `show` prints or draws (its words grow with ranks × rounds).
pub const MAX_SHOW_RANKS: usize = 64;
/// The most ranks `check` proves at (the checker follows every element of every rank).
pub const MAX_CHECK_RANKS: usize = 128;
/// The most rank counts one `check` proves at.
pub const MAX_CHECK_COUNTS: usize = 64;
/// Transfers listed per round before "… and N more".
const SHOWN_PER_ROUND: usize = 24;

/// One of railyard's algorithms at one rank count: what `schedule show` and `schedule
/// export` build.
#[derive(Debug, Args)]
pub struct ScheduleArgs {
    /// The algorithm (ring, rhd, double-tree, pairwise, chain, hierarchical, in-network, ...)
    #[arg(long)]
    pub algo: Algorithm,
    /// allreduce, allgather, reducescatter, alltoall, broadcast, reduce, gather, scatter
    #[arg(long, default_value = "allreduce")]
    pub collective: Collective,
    #[arg(long, default_value_t = 8)]
    pub ranks: usize,
    /// Chunks per rank: the buffer (an MSCCL program's nchunksperloop) is ranks x this
    #[arg(long, default_value_t = 1)]
    pub chunks_per_rank: u64,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard schedule show --algo ring --ranks 4\n  \
    railyard schedule show --algo rhd --collective allgather --ranks 8 --svg rhd.svg\n  \
    railyard schedule show --algo double-tree --ranks 8 --format json   # the schedule itself\n\n\
Chunks are the buffer's parts: the collective's buffer of ranks x --chunks-per-rank chunks.\n\
`a -> b: input[3] reduce into output[3]` is rank a sending its input chunk 3 to rank b,\n\
which adds it into its output chunk 3; `copy` overwrites. Rounds run one after another;\n\
the transfers of one round run at once.")]
pub struct ShowArgs {
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// Ranks per server, for the algorithms that work server by server (hierarchical,
    /// in-network, in-network-chain, nvls, nvls-tree, rail-ring, interleaved-ring): --ranks must be a
    /// multiple of it, at least two servers
    #[arg(long, default_value_t = 4)]
    pub per_server: usize,
    /// Also draw it (ranks x rounds, an arrow per transfer) as SVG to this file
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    railyard schedule check --algo ring --ranks 2-16\n  \
    railyard schedule check --algo rhd --collective reducescatter --ranks 2,4,8,16\n  \
    railyard schedule check --msccl samples/msccl/allreduce_ring_8gpu.xml\n\n\
Proved at each rank count: every output element holds exactly what the collective\n\
promises (followed symbolically, element by element), no two transfers of a round touch\n\
one element unordered, and no rank can deadlock with no buffering at all (a send ends only\n\
when its receive does), whether a rank posts a round's transfers together or one at a time.")]
pub struct CheckArgs {
    /// A built-in algorithm to prove at each rank count
    #[arg(long, required_unless_present = "msccl", conflicts_with = "msccl")]
    pub algo: Option<Algorithm>,
    /// Or an MSCCL XML program, proved at its own rank count in every mode MSCCL runs it
    #[arg(long)]
    pub msccl: Option<std::path::PathBuf>,
    /// The collective to prove (default: allreduce); with --msccl, the one a coll="custom"
    /// program implements (msccl-tools' solver writes broadcasts and reduces so)
    #[arg(long)]
    pub collective: Option<Collective>,
    /// Rank counts: N, A-B or a comma list (2-16, or 2,4,8)
    #[arg(long, default_value = "2-16")]
    pub ranks: String,
    /// Chunks per rank: the buffer is ranks x this many chunks
    #[arg(long, default_value_t = 1)]
    pub chunks_per_rank: u64,
    /// Ranks per server, for the algorithms that work server by server (rank counts that
    /// are not a multiple of it, or fewer than two servers, are not built)
    #[arg(long, default_value_t = 4)]
    pub per_server: usize,
}

/// What every rank count shares: checked once, before any is built.
fn check_request(algo: Algorithm, collective: Collective, chunks_per_rank: u64, per_server: usize) -> Result<()> {
    if !algo.supports(collective) {
        bail!("{algo} has no {} schedule", collective.as_str());
    }
    if !(1..=64).contains(&chunks_per_rank) {
        bail!("--chunks-per-rank is 1 to 64 (got {chunks_per_rank})");
    }
    if !(1..=MAX_SHOW_RANKS).contains(&per_server) {
        bail!("--per-server is 1 to {MAX_SHOW_RANKS} (got {per_server})");
    }
    Ok(())
}

/// The bytes of one element the schedules are built for (f32; the plan, not the bytes,
/// is what is shown and proved).
const ELEM_BYTES: u64 = 4;

fn build(
    algo: Algorithm,
    collective: Collective,
    ranks: usize,
    chunks_per_rank: u64,
    per_server: usize,
) -> Result<Schedule> {
    let spec = CollectiveSpec::new(collective, ranks, ranks as u64 * chunks_per_rank);
    // The algorithms that work server by server get servers of `per_server` ranks.
    let groups = if algo.uses_groups() {
        if !ranks.is_multiple_of(per_server) || ranks < 2 * per_server {
            bail!(
                "{algo} works server by server: {ranks} ranks are not two or more servers of --per-server {per_server}"
            );
        }
        (0..ranks).collect::<Vec<_>>().chunks(per_server).map(<[usize]>::to_vec).collect()
    } else {
        vec![]
    };
    let options = gen_options(algo, 1, 1, None, groups, Default::default());
    let compact = railyard_schedule::generate_compact(algo, &spec, &options, ELEM_BYTES)?;
    Ok(compact.expand())
}

fn region(r: &Region) -> String {
    let name = r.buffer.as_str();
    if r.len == 1 {
        format!("{name}[{}]", r.offset)
    } else {
        format!("{name}[{}..{}]", r.offset, r.end())
    }
}

fn op(o: Op) -> &'static str {
    match o {
        Op::Copy => "copy into",
        Op::Reduce => "reduce into",
    }
}

fn ranks_words(ranks: &[usize]) -> String {
    // "ranks 0-3" only for consecutive ranks in order.
    let consecutive = ranks.len() > 2 && ranks.windows(2).all(|w| w[1] == w[0] + 1);
    match (ranks.first(), ranks.last()) {
        (Some(a), Some(b)) if consecutive => format!("ranks {a}-{b}"),
        _ => format!("ranks {}", ranks.iter().map(usize::to_string).collect::<Vec<_>>().join(",")),
    }
}

/// Every step of one round in words.
fn round_words(s: &Schedule, index: usize) -> Vec<String> {
    let round = &s.rounds[index];
    let mut out: Vec<String> = round
        .transfers
        .iter()
        .map(|t| format!("{} -> {}: {} {} {}", t.from, t.to, region(&t.read), op(t.op), region(&t.write)))
        .collect();
    for n in &round.in_network {
        out.push(match n.flow {
            Flow::All => format!(
                "switch: {} send {}, reduced, into every one's {}",
                ranks_words(&n.ranks),
                region(&n.read),
                region(&n.write)
            ),
            Flow::ReduceTo(r) => format!(
                "switch: {} send {}, reduced, into rank {r}'s {}",
                ranks_words(&n.ranks),
                region(&n.read),
                region(&n.write)
            ),
            Flow::MulticastFrom(r) => format!(
                "switch: rank {r}'s {} copied into the {} of {}",
                region(&n.read),
                region(&n.write),
                ranks_words(&n.ranks)
            ),
        });
    }
    for l in &round.local {
        out.push(format!("rank {} locally: {} {} {}", l.rank, region(&l.read), op(l.op), region(&l.write)));
    }
    out
}

fn show_markdown(s: &Schedule, a: &ShowArgs) -> String {
    let phases: Vec<String> = s
        .phases
        .iter()
        .map(|p| format!("{} ({} round{})", p.name, p.rounds, if p.rounds == 1 { "" } else { "s" }))
        .collect();
    let transfers: usize = s.rounds.iter().map(|r| r.transfers.len()).sum();
    let mut out = format!(
        "# {} {} over {} ranks\n\n{} rounds: {}; {transfers} transfers; the buffer in {} chunks ({} per rank). \
         Each round's steps run at once; rounds run in order.\n\n",
        a.schedule.algo,
        a.schedule.collective.as_str(),
        a.schedule.ranks,
        s.rounds.len(),
        phases.join(", "),
        s.spec.count,
        a.schedule.chunks_per_rank
    );
    let local = |ops: &[railyard_schedule::LocalOp]| {
        ops.iter()
            .map(|l| format!("rank {}: {} {} {}", l.rank, region(&l.read), op(l.op), region(&l.write)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    if !s.prologue.is_empty() {
        out.push_str(&format!("Before the first round: {}.\n\n", local(&s.prologue)));
    }
    let mut t = Table::new(["round", "phase", "steps (from -> to: what)"]);
    for (i, r) in s.rounds.iter().enumerate() {
        let words = round_words(s, i);
        let shown = words.len().min(SHOWN_PER_ROUND);
        let mut cell = words[..shown].join("; ");
        if words.len() > shown {
            cell += &format!("; … and {} more", words.len() - shown);
        }
        let phase = &s.phases[r.phase];
        t.row([(i + 1).to_string(), format!("{} {}/{}", phase.name, r.step, phase.rounds), cell]);
    }
    out.push_str(&t.render());
    if !s.epilogue.is_empty() {
        out.push_str(&format!("\nAfter the last round: {}.\n", local(&s.epilogue)));
    }
    out.push_str(&format!(
        "\n`railyard schedule check --algo {} --collective {} --ranks {} --chunks-per-rank {}` proves it; \
         `railyard plan --algo {}` costs it on a topology.\n",
        a.schedule.algo,
        a.schedule.collective.as_str(),
        a.schedule.ranks,
        a.schedule.chunks_per_rank,
        a.schedule.algo
    ));
    out
}

/// Ranks down, rounds across: an arrow per transfer from its sender's lane at the round's
/// start to its receiver's at the round's end (red reduces, blue copies), a bar per
/// in-network step over the ranks it joins.
fn svg(s: &Schedule) -> String {
    let (lane, col, left, top) = (18.0, 56.0, 70.0, 40.0);
    let ranks = s.spec.ranks;
    let width = left + col * s.rounds.len() as f64 + 30.0;
    let height = top + lane * ranks as f64 + 20.0;
    let y = |r: usize| top + lane * r as f64;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" \
         font-size=\"11\">\n<defs><marker id=\"a\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" markerWidth=\"6\" \
         markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" fill=\"context-stroke\"/></marker></defs>\n\
         <text x=\"{left}\" y=\"16\">{} {} over {ranks} ranks: rounds across, ranks down; red reduces, blue copies</text>\n",
        s.algorithm,
        s.spec.collective.as_str()
    );
    for r in 0..ranks {
        out += &format!(
            "<text x=\"8\" y=\"{}\">rank {r}</text><line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>\n",
            y(r) + 4.0,
            y(r),
            width - 20.0,
            y(r)
        );
    }
    for (i, round) in s.rounds.iter().enumerate() {
        let (x0, x1) = (left + col * i as f64, left + col * (i as f64 + 1.0));
        for t in &round.transfers {
            let color = if t.op == Op::Reduce { "#c0392b" } else { "#2e6fba" };
            out += &format!(
                "<line x1=\"{x0}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{color}\" marker-end=\"url(#a)\"/>\n",
                y(t.from),
                x1 - 4.0,
                y(t.to)
            );
        }
        for n in &round.in_network {
            let (lo, hi) = (n.ranks.iter().min().copied().unwrap_or(0), n.ranks.iter().max().copied().unwrap_or(0));
            out += &format!(
                "<rect x=\"{}\" y=\"{}\" width=\"8\" height=\"{}\" fill=\"#8e44ad\" opacity=\"0.6\"/>\n",
                (x0 + x1) / 2.0 - 4.0,
                y(lo),
                y(hi) - y(lo) + 1.0
            );
        }
    }
    out + "</svg>\n"
}

pub fn show(a: &ShowArgs) -> Result<String> {
    if !(2..=MAX_SHOW_RANKS).contains(&a.schedule.ranks) {
        bail!("--ranks 2 to {MAX_SHOW_RANKS} for show (schedule check proves at up to {MAX_CHECK_RANKS})");
    }
    check_request(a.schedule.algo, a.schedule.collective, a.schedule.chunks_per_rank, a.per_server)?;
    let s = build(a.schedule.algo, a.schedule.collective, a.schedule.ranks, a.schedule.chunks_per_rank, a.per_server)?;
    let mut note = String::new();
    if let Some(path) = &a.svg {
        std::fs::write(path, svg(&s)).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        note = format!("\nDrawn to {}.\n", path.display());
    }
    match a.format {
        Format::Json => Ok(serde_json::to_string_pretty(&s)? + "\n"),
        Format::Md => Ok(show_markdown(&s, a) + &note),
    }
}

/// `N`, `A-B` or `A,B,C`: rank counts, each 2 to `MAX_CHECK_RANKS`.
fn rank_counts(text: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
            None => (part.parse::<usize>(), part.parse::<usize>()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else { bail!("--ranks {text}: give N, A-B or a comma list of numbers") };
        if lo < 2 || hi > MAX_CHECK_RANKS || lo > hi {
            bail!("--ranks {part}: rank counts are 2 to {MAX_CHECK_RANKS}, low to high");
        }
        if hi - lo >= MAX_CHECK_RANKS {
            bail!("--ranks {part}: at most {MAX_CHECK_COUNTS} rank counts at once");
        }
        out.extend(lo..=hi);
        out.sort_unstable();
        out.dedup();
        if out.len() > MAX_CHECK_COUNTS {
            bail!("--ranks {text}: at most {MAX_CHECK_COUNTS} rank counts at once");
        }
    }
    Ok(out)
}

/// An MSCCL program read (and proved) as `collective` where it is a coll="custom" one;
/// naming another collective than a program's own is refused. Shared by `import` and
/// `check`, so both read a program alike.
pub(crate) fn read_msccl(
    file: &str,
    text: &str,
    bytes: u64,
    collective: Option<Collective>,
) -> Result<(railyard_schedule::msccl::MscclInfo, Option<String>)> {
    let read_as = railyard_schedule::msccl::ReadAs { custom: collective, root: None };
    let (_, info, problem) =
        railyard_model::request::msccl_program(file, text, bytes, 1, read_as).map_err(crate::args::model_error)?;
    if let Some(asked) = collective.filter(|&c| !info.custom && c != info.collective) {
        bail!(
            "{file} is an MSCCL {} program, not {}: --collective names what a coll=\"custom\" program implements",
            info.collective.as_str(),
            asked.as_str()
        );
    }
    Ok((info, problem))
}

/// An MSCCL program proved as `schedule import` proves it, said in `check`'s words.
fn check_msccl(path: &std::path::Path, collective: Option<Collective>) -> Result<String> {
    let text = railyard_topology::file::read_text(path, railyard_schedule::msccl::MAX_XML_BYTES as u64)?;
    let file = path.display().to_string();
    // The proof runs on one element per chunk; the size only shapes the costed form,
    // which check does not use (any size of at least one element per chunk will do).
    let (info, problem) = read_msccl(&file, &text, 1 << 20, collective)?;
    let root = if info.collective.rooted() { format!(" from GPU {}", info.root) } else { String::new() };
    let head = format!(
        "# MSCCL {} ({file}): {}{root} over {} GPUs, {} chunks\n\n",
        info.name,
        info.collective.as_str(),
        info.gpus,
        info.chunks
    );
    match problem {
        Some(p) => bail!("{head}**Not proved**: {p}"),
        None => Ok(head
            + "Proved, in every mode MSCCL runs it (in place, out of place): every output element holds exactly what \
               the collective promises (followed symbolically, element by element); no two steps that nothing \
               orders touch one chunk; and no rank deadlocks with no buffering at all.\n"),
    }
}

pub fn check(a: &CheckArgs) -> Result<String> {
    let Some(algo) = a.algo else {
        let path = a.msccl.as_ref().ok_or_else(|| anyhow::anyhow!("give --algo or --msccl"))?;
        return check_msccl(path, a.collective);
    };
    let collective = a.collective.unwrap_or(Collective::AllReduce);
    check_request(algo, collective, a.chunks_per_rank, a.per_server)?;
    let counts = rank_counts(&a.ranks)?;
    let mut t = Table::new(["ranks", "rounds", "transfers", "elements sent", "proved"]);
    let (mut failed, mut not_built) = (Vec::new(), 0);
    for &n in &counts {
        // A rank count the algorithm does not serve is said, not a failed proof.
        let schedule = match build(algo, collective, n, a.chunks_per_rank, a.per_server) {
            Ok(s) => s,
            Err(e) => {
                t.row([n.to_string(), "-".into(), "-".into(), "-".into(), format!("not built: {e:#}")]);
                not_built += 1;
                continue;
            }
        };
        match railyard_schedule::check(&schedule) {
            Ok(r) => {
                t.row([
                    n.to_string(),
                    r.rounds.to_string(),
                    r.transfers.to_string(),
                    r.elements_sent.to_string(),
                    "yes".into(),
                ]);
            }
            Err(e) => {
                t.row([n.to_string(), "-".into(), "-".into(), "-".into(), format!("**no**: {e}")]);
                failed.push(n);
            }
        }
    }
    let mut out = format!(
        "# {} {}: proved at {} of {} rank counts\n\n",
        algo,
        collective.as_str(),
        counts.len() - failed.len() - not_built,
        counts.len()
    );
    out.push_str(
        "At each rank count, with the buffer in ranks x --chunks-per-rank chunks: every output element holds \
         exactly what the collective promises (followed symbolically, element by element); no two steps of a round \
         touch one element unordered; and no rank deadlocks with no buffering at all (a send ends only when its \
         receive does), whether a rank posts a round's transfers together or one at a time.\n\n",
    );
    out.push_str(&t.render());
    if !failed.is_empty() {
        bail!("{out}\nNot proved at {} rank count(s): {:?}", failed.len(), failed);
    }
    if not_built == counts.len() {
        bail!("{out}\nNothing proved: {} builds at none of these rank counts", algo);
    }
    Ok(out)
}

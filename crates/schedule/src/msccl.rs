//! MSCCL's XML algorithms (msccl-tools' output, read by MSCCL/NCCL): `<algo ngpus
//! nchunksperloop coll inplace>`, per GPU its thread blocks (`<tb send recv chan>`), each a
//! sequence of steps — `s` send, `r` receive, `rrs` receive-reduce-send, `rrc`
//! receive-reduce-copy, `rrcs` receive-reduce-copy-send, `rcs` receive-copy-send, `cpy`,
//! `re` (local copy and reduce), `nop` — on chunks of the buffers `i`, `o`, `s`, with
//! dependencies on steps of other thread blocks (`depid`, `deps`).
//!
//! Made into a railyard schedule with MSCCL's executor semantics: the k-th send from GPU a
//! to GPU b on a channel meets the k-th receive at b from a on that channel, and the data
//! travels through the connection: a send reads its chunks when it runs and lands them in
//! a staging slot of the receiver's scratch (the connection's buffer); the receive, when
//! it runs, takes them from there — `r` and `rcs` copy them into `dst`; `rrc` and `rrcs`
//! store `src` ⊕ them into `dst`; `rrs` reduces `src` into the slot and sends the slot on,
//! storing nothing of its own (msccl-executor's `recvReduceSend`). Local `cpy` (dst = src)
//! and `re` (dst ⊕= src) run in the order of what they wait for, not the file's. Every step
//! is placed in the first round after what it waits for (its thread block's previous step,
//! its dependency, the send it takes), so the rounds are the program's critical path. A
//! chunk is 1/nchunksperloop of the large buffer, and each buffer holds the chunks its
//! `<gpu>` declares (`i_chunks`, `o_chunks`, `s_chunks`). In-place all-reduces work on the
//! output buffer (the input copied in first), as railyard's own all-reduces do.

use std::collections::HashMap;

use roxmltree::{Document, Node};

use crate::builder::ScheduleBuilder;
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::CompactSchedule;
use crate::error::ScheduleError;
use crate::ir::{Buffer, LocalOp, Op, Region, Step, Transfer};
use crate::msccl_races::{self, Finding, StepAccess};

/// Limits on what is read (an 8-GPU ring is a few hundred steps).
pub const MAX_GPUS: usize = 1024;
pub const MAX_STEPS: usize = 1 << 18;
pub const MAX_CHUNKS: u64 = 1 << 20;
pub const MAX_XML_BYTES: usize = 16 << 20;
/// Chunks of every GPU's buffers the checker holds for a proof (one element per chunk).
pub const MAX_PROOF_ELEMENTS: u64 = 1 << 24;
/// Deepest element nesting (algo > gpu > tb > step is 4).
pub const MAX_NESTING: usize = 16;
/// Most transfers and local steps a schedule of several passes holds (see
/// [`pass_bytes`]): past it fewer passes are built, of larger pieces that carry all the
/// bytes, and the rounds of the others are added at the pace of the last built ones
/// (`CompactSchedule::unheld_rounds`).
pub const MAX_PASS_WORK: u64 = 1 << 18;

/// Bytes of each chunk MSCCL's executor moves in one pass of its loop over the buffer
/// (`runInterpreter`, msccl's `msccl_interpreter.h`: a thread block runs all its steps
/// on the first piece of every chunk, then all of them on the next piece). At NCCL's
/// default buffer sizes (nccl-facts.md): Simple, MSCCL_CHUNKSTEPS = NCCL_STEPS/2 = 4
/// steps of NCCL_BUFFSIZE/NCCL_STEPS = 512 KiB, 2 MiB; LL, one step of 4,096 lines of 8
/// data bytes (512 KiB over 8 steps of 16-byte lines), 32 KiB; LL128, one step of its
/// 4,915,200-byte buffer (120 elements × 640 threads × 8 steps × 8 B) at 15 of 16 words
/// data, 576,000 B.
pub fn pass_bytes(protocol: &str) -> u64 {
    if protocol.eq_ignore_ascii_case("LL") {
        32 << 10
    } else if protocol.eq_ignore_ascii_case("LL128") {
        576_000
    } else {
        2 << 20
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Send,
    Recv,
    RecvReduceSend,
    RecvReduceCopy,
    RecvReduceCopySend,
    RecvCopySend,
    Copy,
    Reduce,
    Nop,
}

impl Kind {
    fn parse(t: &str) -> Option<Kind> {
        Some(match t {
            "s" => Kind::Send,
            "r" => Kind::Recv,
            "rrs" => Kind::RecvReduceSend,
            "rrc" => Kind::RecvReduceCopy,
            "rrcs" => Kind::RecvReduceCopySend,
            "rcs" => Kind::RecvCopySend,
            "cpy" => Kind::Copy,
            "re" => Kind::Reduce,
            "nop" => Kind::Nop,
            _ => return None,
        })
    }
    fn receives(self) -> bool {
        matches!(
            self,
            Kind::Recv | Kind::RecvReduceSend | Kind::RecvReduceCopy | Kind::RecvReduceCopySend | Kind::RecvCopySend
        )
    }
    fn sends(self) -> bool {
        matches!(self, Kind::Send | Kind::RecvReduceSend | Kind::RecvReduceCopySend | Kind::RecvCopySend)
    }
}

#[derive(Debug, Clone)]
struct XmlStep {
    /// Byte offset in the text, made a line number only for an error.
    pos: usize,
    kind: Kind,
    src: (char, u64),
    dst: (char, u64),
    cnt: u64,
    dep: Option<(usize, usize)>,
    /// `hasdep`: whether the executor sets the flag others' dependencies wait on after
    /// this step (absent in older files: not known).
    hasdep: Option<bool>,
}

/// The chunks of a GPU's buffers as its `<gpu>` declares them (`None`: not declared).
#[derive(Debug, Clone, Copy, Default)]
struct BufferChunks {
    input: Option<u64>,
    output: Option<u64>,
    scratch: Option<u64>,
}

#[derive(Debug, Clone)]
struct Tb {
    send: Option<Rank>,
    recv: Option<Rank>,
    chan: u32,
    steps: Vec<XmlStep>,
}

/// What the XML says about itself, beside the schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct MscclInfo {
    pub name: String,
    pub collective: Collective,
    /// A broadcast's or reduce's root (`root`, else the GPU that never receives or never
    /// sends); 0 for the others.
    pub root: Rank,
    /// Whether the file says `coll="custom"` and was read as `collective`.
    pub custom: bool,
    pub gpus: usize,
    pub chunks: u64,
    pub in_place: bool,
    /// Whether MSCCL also runs it for out-of-place calls (`outofplace`; absent: the
    /// opposite of `inplace`, as older executors read it).
    pub out_of_place: bool,
    pub protocol: String,
    pub channels: usize,
    pub steps: usize,
    /// The sizes MSCCL's executor picks it for (`minBytes`, `maxBytes`; absent or 0 `maxBytes`: no limit).
    pub min_bytes: u64,
    pub max_bytes: Option<u64>,
}

impl MscclInfo {
    /// Whether MSCCL's executor runs the program for a call of `bytes`.
    pub fn runs_at(&self, bytes: u64) -> bool {
        bytes >= self.min_bytes && self.max_bytes.is_none_or(|m| bytes <= m)
    }
}

/// The 1-based line of byte `pos` of `text` (for errors only: it scans the text).
fn line_at(text: &str, pos: usize) -> u32 {
    text.get(..pos).map_or(0, |t| t.matches('\n').count() as u32 + 1)
}

fn err(line: u32, message: impl Into<String>) -> ScheduleError {
    ScheduleError::Import { line: line as usize, message: message.into() }
}

/// The line of a node, found only when an error needs it (`text_pos_at` scans the text
/// from its start, so calling it for every step would make reading quadratic).
fn line_of(n: Node) -> u32 {
    n.document().text_pos_at(n.range().start).row
}

fn attr<'a>(n: Node<'a, 'a>, name: &str) -> Result<&'a str, ScheduleError> {
    n.attribute(name).ok_or_else(|| err(line_of(n), format!("<{}> has no {name} attribute", n.tag_name().name())))
}

fn number<T: std::str::FromStr>(n: Node, name: &str) -> Result<T, ScheduleError> {
    let text = attr(n, name)?;
    text.trim().parse().map_err(|_| {
        let why = match text.trim().parse::<i64>() {
            Ok(v) if v < 0 => "is negative; it counts from 0",
            Ok(_) => "is too large",
            Err(_) => "is not a whole number",
        };
        err(line_of(n), format!("{name}=\"{text}\" {why}"))
    })
}

/// Read an MSCCL XML algorithm: what it declares, and its thread blocks per GPU.
/// A program as read: what it declares, per GPU its thread blocks and buffer sizes.
type Read = (MscclInfo, Vec<Vec<Tb>>, Vec<BufferChunks>);

/// How a program that does not say all of it is read: the collective a `coll="custom"`
/// program implements (microsoft/msccl's custom collectives name none; msccl-tools'
/// solver writes its broadcasts and reduces so), and the root of a broadcast or reduce
/// whose file names none and whose steps do not tell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadAs {
    pub custom: Option<Collective>,
    pub root: Option<Rank>,
}

/// The collectives an MSCCL program may implement, each named in a file (`coll`) as
/// railyard names it (`Collective::as_str`): what is read, what is written.
const MSCCL_COLLECTIVES: [Collective; 6] = [
    Collective::AllReduce,
    Collective::AllGather,
    Collective::ReduceScatter,
    Collective::AllToAll,
    Collective::Broadcast,
    Collective::Reduce,
];

/// "allreduce, allgather, …, broadcast or reduce", for messages.
fn msccl_collective_names() -> String {
    let names: Vec<&str> = MSCCL_COLLECTIVES.iter().map(|c| c.as_str()).collect();
    match names.split_last() {
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn read(text: &str, read_as: ReadAs) -> Result<Read, ScheduleError> {
    let custom_as = read_as.custom;
    if text.len() > MAX_XML_BYTES {
        return Err(err(0, format!("more than {MAX_XML_BYTES} bytes")));
    }
    // roxmltree recurses per level: a file nested thousands deep would overflow the stack.
    let (mut depth, mut deepest) = (0usize, 0usize);
    let bytes = text.as_bytes();
    // Inside a quoted attribute value `<` and `/>` are text, not tags.
    let (mut quote, mut in_tag): (Option<u8>, bool) = (None, false);
    for (i, &b) in bytes.iter().enumerate() {
        if let Some(q) = quote {
            if b == q {
                quote = None;
            }
            continue;
        }
        match (b, bytes.get(i + 1)) {
            (b'"' | b'\'', _) if in_tag => quote = Some(b),
            (b'<', Some(b'/')) => {
                depth = depth.saturating_sub(1);
                in_tag = true;
            }
            // Comments, declarations: no attributes, so no quotes to honour.
            (b'<', Some(b'?' | b'!')) => in_tag = false,
            (b'<', _) => {
                depth += 1;
                deepest = deepest.max(depth);
                in_tag = true;
            }
            (b'/', Some(b'>')) if in_tag => depth = depth.saturating_sub(1),
            (b'>', _) => in_tag = false,
            _ => {}
        }
    }
    if deepest > MAX_NESTING {
        return Err(err(1, format!("elements nested {deepest} deep; an MSCCL algorithm nests at most {MAX_NESTING}")));
    }
    let doc = Document::parse(text).map_err(|e| err(e.pos().row, e.to_string()))?;
    let algo = doc.root_element();
    if algo.tag_name().name() != "algo" {
        return Err(err(1, "the root element is not <algo>"));
    }
    let gpus: usize = number(algo, "ngpus")?;
    let chunks: u64 = number(algo, "nchunksperloop")?;
    if !(2..=MAX_GPUS).contains(&gpus) {
        return Err(err(line_of(algo), format!("ngpus=\"{gpus}\": 2 to {MAX_GPUS}")));
    }
    if !(1..=MAX_CHUNKS).contains(&chunks) {
        return Err(err(line_of(algo), format!("nchunksperloop=\"{chunks}\": 1 to {MAX_CHUNKS}")));
    }
    let coll = attr(algo, "coll")?;
    // msccl-tools writes `reduce_scatter`; older files `reducescatter`.
    let name = coll.to_ascii_lowercase().replace(['_', '-'], "");
    let names = msccl_collective_names();
    let collective = match (name.as_str(), custom_as) {
        ("custom", Some(c)) if MSCCL_COLLECTIVES.contains(&c) => c,
        ("custom", Some(c)) => {
            let message = format!("coll=\"custom\" read as {}: an MSCCL program implements {names}", c.as_str());
            return Err(err(1, message));
        }
        ("custom", None) => {
            let message = format!(
                "coll=\"custom\": a custom collective promises no result to prove or cost; name the collective it \
                 implements ({names}) to read it as one"
            );
            return Err(err(1, message));
        }
        (name, _) => match MSCCL_COLLECTIVES.into_iter().find(|c| c.as_str() == name) {
            Some(c) => c,
            None => return Err(err(1, format!("coll=\"{coll}\": {names}"))),
        },
    };
    let in_place = algo.attribute("inplace").is_some_and(|v| v.trim() == "1");
    let out_of_place = match algo.attribute("outofplace") {
        Some(v) => v.trim() == "1",
        None => !in_place,
    };
    let mut per_gpu: Vec<Option<Vec<Tb>>> = vec![None; gpus];
    let mut sizes = vec![BufferChunks::default(); gpus];
    let mut steps_total = 0usize;
    let mut channels = 0u32;
    for g in algo.children().filter(|c| c.has_tag_name("gpu")) {
        let line = line_of(g);
        let id: usize = number(g, "id")?;
        if id >= gpus || per_gpu[id].is_some() {
            return Err(err(line, format!("gpu id {id}: out of 0..{gpus} or given twice")));
        }
        let declared = |name: &str| -> Result<Option<u64>, ScheduleError> {
            match g.attribute(name) {
                None => Ok(None),
                Some(_) => {
                    let n: u64 = number(g, name)?;
                    if n > MAX_CHUNKS {
                        return Err(err(line, format!("{name}=\"{n}\": at most {MAX_CHUNKS}")));
                    }
                    Ok(Some(n))
                }
            }
        };
        sizes[id] = BufferChunks {
            input: declared("i_chunks")?,
            output: declared("o_chunks")?,
            scratch: declared("s_chunks")?,
        };
        let mut tbs = Vec::new();
        for (k, tb) in g.children().filter(|c| c.has_tag_name("tb")).enumerate() {
            let tline = || line_of(tb);
            let tb_id: usize = number(tb, "id")?;
            if tb_id != k {
                return Err(err(tline(), format!("tb id {tb_id} where {k} was expected (ids count from 0 in order)")));
            }
            let peer = |name: &str| -> Result<Option<Rank>, ScheduleError> {
                let v: i64 = number(tb, name)?;
                match v {
                    -1 => Ok(None),
                    v if v >= 0 && (v as usize) < gpus && v as usize != id => Ok(Some(v as usize)),
                    v => Err(err(tline(), format!("{name}=\"{v}\": a peer GPU other than {id}, or -1"))),
                }
            };
            let (send, recv) = (peer("send")?, peer("recv")?);
            // -1 marks a thread block of local steps only.
            let chan: i64 = number(tb, "chan")?;
            let chan = match u32::try_from(chan) {
                Ok(c) if c < 64 => c,
                _ if chan == -1 && send.is_none() && recv.is_none() => 0,
                _ => return Err(err(tline(), format!("chan=\"{chan}\": 0 to 63 (or -1 without peers)"))),
            };
            channels = channels.max(chan + 1);
            let mut steps = Vec::new();
            for (s, st) in tb.children().filter(|c| c.has_tag_name("step")).enumerate() {
                let sline = || line_of(st);
                steps_total += 1;
                if steps_total > MAX_STEPS {
                    return Err(err(sline(), format!("more than {MAX_STEPS} steps")));
                }
                let at: usize = number(st, "s")?;
                if at != s {
                    return Err(err(sline(), format!("step s=\"{at}\" where {s} was expected")));
                }
                let t = attr(st, "type")?;
                let kind = Kind::parse(t).ok_or_else(|| err(sline(), format!("unknown step type \"{t}\"")))?;
                let depid: i64 = number(st, "depid")?;
                let deps: i64 = number(st, "deps")?;
                let dep = if depid >= 0 && deps >= 0 { Some((depid as usize, deps as usize)) } else { None };
                let hasdep = match st.attribute("hasdep") {
                    None => None,
                    Some(_) => Some(number::<i64>(st, "hasdep")? == 1),
                };
                // A nop only orders (msccl-tools writes srcoff="-1" dstoff="-1" cnt="0"):
                // its buffers and offsets are not read.
                if kind == Kind::Nop {
                    steps.push(XmlStep {
                        pos: st.range().start,
                        kind,
                        src: ('i', 0),
                        dst: ('i', 0),
                        cnt: 0,
                        dep,
                        hasdep,
                    });
                    continue;
                }
                let buf = |name: &str| -> Result<char, ScheduleError> {
                    let b = attr(st, name)?;
                    match b {
                        "i" | "o" | "s" => Ok(b.chars().next().unwrap_or('i')),
                        _ => Err(err(sline(), format!("{name}=\"{b}\": i, o or s"))),
                    }
                };
                let cnt: u64 = number(st, "cnt")?;
                let (src_off, dst_off): (u64, u64) = (number(st, "srcoff")?, number(st, "dstoff")?);
                if cnt == 0 || cnt > MAX_CHUNKS {
                    return Err(err(sline(), format!("cnt=\"{cnt}\": 1 to {MAX_CHUNKS}")));
                }
                if kind.sends() && send.is_none() || kind.receives() && recv.is_none() {
                    return Err(err(sline(), format!("a \"{t}\" step in a thread block without that peer")));
                }
                steps.push(XmlStep {
                    pos: st.range().start,
                    kind,
                    src: (buf("srcbuf")?, src_off),
                    dst: (buf("dstbuf")?, dst_off),
                    cnt,
                    dep,
                    hasdep,
                });
            }
            // msccl-executor fuses a run of `re` steps with one destination and source
            // buffer, the later ones without a dependency, into one, with the last one's
            // count for all: a run whose counts differ does not run as written.
            for pair in steps.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                if a.kind == Kind::Reduce
                    && b.kind == Kind::Reduce
                    && b.dep.is_none()
                    && a.dst == b.dst
                    && a.src.0 == b.src.0
                    && a.cnt != b.cnt
                {
                    return Err(err(
                        line_at(text, b.pos),
                        format!(
                            "this re step and the one before share a destination, so MSCCL's executor fuses them \
                             and runs both with this one's count ({}, not {})",
                            b.cnt, a.cnt
                        ),
                    ));
                }
            }
            // One connection (peer, channel) per direction is one thread block's: two
            // would take each other's messages in an order no file states.
            for other in &tbs {
                let Tb { send: s2, recv: r2, chan: c2, .. } = other;
                let shared = (send.is_some() && send == *s2 || recv.is_some() && recv == *r2) && chan == *c2;
                if shared {
                    return Err(err(
                        tline(),
                        format!("this thread block shares a connection (peer and channel {chan}) with another of GPU {id}'s"),
                    ));
                }
            }
            tbs.push(Tb { send, recv, chan, steps });
        }
        resolve_dependencies(text, id, &mut tbs)?;
        per_gpu[id] = Some(tbs);
    }
    let per_gpu: Vec<Vec<Tb>> = per_gpu
        .into_iter()
        .enumerate()
        .map(|(g, t)| t.ok_or_else(|| err(1, format!("no <gpu id=\"{g}\">"))))
        .collect::<Result<_, _>>()?;
    // A broadcast's root is what the file says (`root`), else the one GPU that never
    // receives (a reduce's: never sends; as msccl-tools' solver writes them), else the
    // root asked for; other collectives have none (0).
    let root = match (collective.rooted(), algo.attribute("root")) {
        (false, _) => 0,
        (true, Some(_)) => number(algo, "root")?,
        (true, None) => {
            let does = |tbs: &Vec<Tb>, f: fn(Kind) -> bool| tbs.iter().flat_map(|tb| &tb.steps).any(|st| f(st.kind));
            let never = if collective == Collective::Broadcast { "receive" } else { "send" };
            let candidates: Vec<usize> = match collective {
                Collective::Broadcast => (0..gpus).filter(|&g| !does(&per_gpu[g], Kind::receives)).collect(),
                _ => (0..gpus).filter(|&g| !does(&per_gpu[g], Kind::sends)).collect(),
            };
            match (candidates.as_slice(), read_as.root) {
                ([one], _) => *one,
                (_, Some(asked)) => asked,
                (found, None) => {
                    return Err(err(
                        line_of(algo),
                        format!(
                            "a {} whose root is not told: the file names none (root=) and {} of its GPUs never \
                             {never}, where exactly one would be the root",
                            collective.as_str(),
                            found.len()
                        ),
                    ))
                }
            }
        }
    };
    if root >= gpus {
        return Err(err(line_of(algo), format!("root=\"{root}\": not one of the {gpus} GPUs")));
    }
    let info = MscclInfo {
        name: algo.attribute("name").unwrap_or("msccl").to_string(),
        collective,
        root,
        custom: custom_as.is_some() && coll.eq_ignore_ascii_case("custom"),
        gpus,
        chunks,
        in_place,
        out_of_place,
        protocol: algo.attribute("proto").unwrap_or("Simple").to_string(),
        channels: channels as usize,
        steps: steps_total,
        min_bytes: match algo.attribute("minBytes") {
            Some(_) => number(algo, "minBytes")?,
            None => 0,
        },
        max_bytes: match algo.attribute("maxBytes") {
            Some(_) => Some(number::<u64>(algo, "maxBytes")?).filter(|&m| m > 0),
            None => None,
        },
    };
    Ok((info, per_gpu, sizes))
}

/// What a dependency waits for in MSCCL's executor (msccl-executor-nccl's parser and
/// kernel): a `nop` never runs — one with a dependency hands it to the next real step
/// (which must then have one of its own), one without is skipped by the step counter —
/// and a thread block signals its counter only after steps marked `hasdep="1"`. A wait
/// on (t, k) is over once t has signalled a count of at least k. So it waits for the
/// first real step of t that signals with a count at or past k; where none does, it
/// never ends. Files without `hasdep` attributes are taken as written.
fn resolve_dependencies(text: &str, gpu: usize, tbs: &mut [Tb]) -> Result<(), ScheduleError> {
    for tb in tbs.iter() {
        // A nop's dependency goes to the next real step, which the parser requires to
        // have a dependency too.
        let mut pending_nop: Option<&XmlStep> = None;
        for st in &tb.steps {
            match (st.kind == Kind::Nop, st.dep.is_some(), pending_nop) {
                (true, true, _) => pending_nop = Some(st),
                (false, false, Some(nop)) => {
                    return Err(err(
                        line_at(text, st.pos),
                        format!(
                            "this step has no dependency but follows a nop that has one (line {}): MSCCL's executor \
                             refuses the file",
                            line_at(text, nop.pos)
                        ),
                    ))
                }
                (false, _, _) => pending_nop = None,
                _ => {}
            }
        }
    }
    // Per thread block, per step: the count a real step signals (None: it does not).
    let signals: Vec<Option<Vec<Option<usize>>>> = tbs
        .iter()
        .map(|tb| {
            if tb.steps.iter().any(|st| st.hasdep.is_none()) {
                return None;
            }
            let mut skipped = 0;
            Some(
                tb.steps
                    .iter()
                    .enumerate()
                    .map(|(k, st)| match (st.kind == Kind::Nop, st.dep.is_some()) {
                        (true, false) => {
                            skipped += 1;
                            None
                        }
                        (true, true) => None,
                        (false, _) => (st.hasdep == Some(true)).then_some(k - skipped),
                    })
                    .collect(),
            )
        })
        .collect();
    for tb in tbs.iter_mut() {
        for st in &mut tb.steps {
            let Some((dt, ds)) = st.dep else { continue };
            let Some(Some(counts)) = signals.get(dt) else { continue };
            match counts.iter().position(|c| c.is_some_and(|c| c >= ds)) {
                Some(k) => st.dep = Some((dt, k)),
                None => {
                    return Err(err(
                        line_at(text, st.pos),
                        format!(
                            "depends on tb {dt} step {ds} of GPU {gpu}, but no step of that thread block signals a \
                             count that far (hasdep=\"1\" on a step that runs; nops do not): MSCCL's executor \
                             never lets this step run"
                        ),
                    ))
                }
            }
        }
    }
    Ok(())
}

/// A step by (gpu, tb, step).
type At = msccl_races::At;

/// The MSCCL algorithm in `text` as a railyard schedule of `count` elements (a multiple of
/// the algorithm's chunks), with what the XML declares.
pub fn import(text: &str, count: u64, elem_bytes: u64) -> Result<(CompactSchedule, MscclInfo), ScheduleError> {
    let program = Program::parse(text)?;
    Ok((program.schedule(count, elem_bytes)?, program.info))
}

/// An MSCCL program read once: what it declares, its steps, which send meets which
/// receive and the order its steps run in — all independent of the size, so one
/// program makes schedules of any size (the checker's small one, the costed one).
pub struct Program<'a> {
    text: &'a str,
    pub info: MscclInfo,
    gpus: Vec<Vec<Tb>>,
    sizes: Vec<BufferChunks>,
    meets: HashMap<At, At>,
    /// Every step, in the order they run: by round, and inside a round local steps after
    /// what they wait for.
    all: Vec<At>,
    /// Transfers and local steps of one pass over pieces of every chunk (a step of `cnt`
    /// chunks is `cnt` of them): what a pass adds to a schedule.
    work: u64,
}

impl<'a> Program<'a> {
    pub fn parse(text: &'a str) -> Result<Self, ScheduleError> {
        Self::parse_as(text, ReadAs::default())
    }

    /// [`Program::parse`], what the file does not say read as `read_as` says.
    pub fn parse_as(text: &'a str, read_as: ReadAs) -> Result<Self, ScheduleError> {
        let (info, gpus, sizes) = read(text, read_as)?;
        let aliases =
            matches!(info.collective, Collective::AllReduce | Collective::AllGather | Collective::ReduceScatter);
        if info.in_place && !aliases {
            return Err(err(
                1,
                format!(
                    "in-place {} is not read (in place, all-reduce, all-gather and reduce-scatter are)",
                    info.collective.as_str()
                ),
            ));
        }
        if matches!(info.collective, Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll)
            && !info.chunks.is_multiple_of(info.gpus as u64)
        {
            return Err(err(
                1,
                format!(
                    "nchunksperloop=\"{}\" does not split into the {} GPUs' shares of a {}",
                    info.chunks,
                    info.gpus,
                    info.collective.as_str()
                ),
            ));
        }
        // The proof holds every GPU's buffers at one element per chunk: input, output,
        // its scratch and a slot per message received.
        let proof: u64 = gpus
            .iter()
            .map(|tbs| {
                let staging: u64 = tbs
                    .iter()
                    .flat_map(|tb| tb.steps.iter())
                    .filter(|st| st.kind.receives())
                    .map(|st| st.cnt)
                    .fold(0, u64::saturating_add);
                info.chunks.saturating_mul(3).saturating_add(own_scratch(tbs)).saturating_add(staging)
            })
            .fold(0, u64::saturating_add);
        if proof > MAX_PROOF_ELEMENTS {
            return Err(err(
                1,
                format!(
                    "{proof} chunks of buffers over the {} GPUs: more than the {MAX_PROOF_ELEMENTS} the checker holds",
                    info.gpus
                ),
            ));
        }
        let (meets, all) = rounds(text, &gpus)?;
        let fed_by: HashMap<At, At> = meets.iter().map(|(&s, &r)| (r, s)).collect();
        // Aliasing differs between the modes: each declared is checked.
        for in_place in [(info.in_place, true), (info.out_of_place, false)].into_iter().filter(|m| m.0).map(|m| m.1) {
            races(text, &MscclInfo { in_place, ..info.clone() }, &gpus, &sizes, &fed_by)?;
        }
        let work = gpus.iter().flatten().flat_map(|tb| &tb.steps).map(|st| st.cnt.max(1)).fold(0, u64::saturating_add);
        Ok(Program { text, info, gpus, sizes, meets, all, work })
    }

    /// The program as MSCCL runs it for in-place (`true`) and out-of-place calls, where it
    /// says it runs for them: each must be proved.
    pub fn modes(&self) -> Vec<bool> {
        [(self.info.in_place, true), (self.info.out_of_place, false)].into_iter().filter(|m| m.0).map(|m| m.1).collect()
    }

    /// The program on `count` elements laid out in place or not (see `modes`).
    pub fn schedule_mode(&self, count: u64, elem_bytes: u64, in_place: bool) -> Result<CompactSchedule, ScheduleError> {
        if count == 0 || !count.is_multiple_of(self.info.chunks) {
            let chunks = self.info.chunks;
            return Err(err(0, format!("{count} elements do not split into the algorithm's {chunks} chunks")));
        }
        build(self, count, elem_bytes, in_place, self.passes(count, elem_bytes))
    }

    /// The passes MSCCL's executor makes over `count` elements: each chunk moved
    /// [`pass_bytes`] at a time.
    pub fn passes(&self, count: u64, elem_bytes: u64) -> u64 {
        let chunk = count / self.info.chunks.max(1);
        let piece = (pass_bytes(&self.info.protocol) / elem_bytes.max(1)).max(1);
        chunk.div_ceil(piece).max(1)
    }

    /// Of `passes`, how many a schedule holds: as many as [`MAX_PASS_WORK`] allows.
    pub fn held_passes(&self, passes: u64) -> u64 {
        passes.clamp(1, (MAX_PASS_WORK / self.work.max(1)).max(1))
    }

    /// The program on `count` elements (a multiple of its chunks), as its first mode runs
    /// (in place where it says so).
    pub fn schedule(&self, count: u64, elem_bytes: u64) -> Result<CompactSchedule, ScheduleError> {
        self.schedule_mode(count, elem_bytes, self.info.in_place)
    }
}

/// Which send meets which receive, and every step in the order they run.
type Rounds = (HashMap<At, At>, Vec<At>);

/// Sends matched to receives, and every step in the order they run (by the round it is
/// done in, then after what it waits for in that round).
fn rounds(text: &str, gpus: &[Vec<Tb>]) -> Result<Rounds, ScheduleError> {
    // Match sends to receives: the k-th on (from, to, channel) meets the k-th.
    let mut sends: HashMap<(usize, usize, u32), Vec<At>> = HashMap::new();
    let mut recvs: HashMap<(usize, usize, u32), Vec<At>> = HashMap::new();
    for (g, tbs) in gpus.iter().enumerate() {
        for (t, tb) in tbs.iter().enumerate() {
            for (s, st) in tb.steps.iter().enumerate() {
                if st.kind.sends() {
                    sends.entry((g, tb.send.unwrap_or(0), tb.chan)).or_default().push((g, t, s));
                }
                if st.kind.receives() {
                    recvs.entry((tb.recv.unwrap_or(0), g, tb.chan)).or_default().push((g, t, s));
                }
            }
        }
    }
    // The receive each step's send meets, and the send each receive takes.
    let mut meets: HashMap<At, At> = HashMap::new();
    let mut fed_by: HashMap<At, At> = HashMap::new();
    for (key, list) in &sends {
        let other = recvs.get(key).map_or(&[][..], Vec::as_slice);
        if other.len() != list.len() {
            let (a, b, c) = key;
            let line = list.first().map_or(0, |&(g, t, s)| line_at(text, gpus[g][t].steps[s].pos));
            return Err(err(
                line,
                format!(
                    "GPU {a} sends {} times to GPU {b} on channel {c}, which receives {} times",
                    list.len(),
                    other.len()
                ),
            ));
        }
        for (&s, &r) in list.iter().zip(other) {
            meets.insert(s, r);
            fed_by.insert(r, s);
        }
    }
    for (key, list) in &recvs {
        if !sends.contains_key(key) {
            let (a, b, c) = key;
            let line = list.first().map_or(0, |&(g, t, s)| line_at(text, gpus[g][t].steps[s].pos));
            return Err(err(
                line,
                format!("GPU {b} receives {} times from GPU {a} on channel {c}, which never sends", list.len()),
            ));
        }
    }
    // Rounds: a step is done at the round its last transfer lands (or, for local steps,
    // the round it can run in after what it waits for); computed over the step graph.
    let all: Vec<At> = gpus
        .iter()
        .enumerate()
        .flat_map(|(g, tbs)| {
            tbs.iter().enumerate().flat_map(move |(t, tb)| (0..tb.steps.len()).map(move |s| (g, t, s)))
        })
        .collect();
    let (done, depth) = finish_all(text, &all, gpus, &fed_by)?;
    let mut all = all;
    all.sort_by_key(|at| (done[at], depth[at]));
    Ok((meets, all))
}

/// `msccl_races::check` on the program as read, its findings as errors at their lines.
fn races(
    text: &str,
    info: &MscclInfo,
    gpus: &[Vec<Tb>],
    sizes: &[BufferChunks],
    fed_by: &HashMap<At, At>,
) -> Result<(), ScheduleError> {
    let access = |st: &XmlStep| {
        let (reads, dst) = match st.kind {
            Kind::Send | Kind::RecvReduceSend => (true, None),
            Kind::Recv | Kind::RecvCopySend => (false, Some(true)),
            Kind::RecvReduceCopy | Kind::RecvReduceCopySend | Kind::Copy | Kind::Reduce => (true, Some(true)),
            Kind::Nop => (false, None),
        };
        StepAccess {
            reads: reads.then_some(st.src),
            dst: dst.map(|w| (st.dst, w)),
            cnt: st.cnt,
            dep: st.dep,
            receives: st.kind.receives(),
        }
    };
    let steps: Vec<Vec<Vec<StepAccess>>> =
        gpus.iter().map(|tbs| tbs.iter().map(|tb| tb.steps.iter().map(access).collect()).collect()).collect();
    let place = |g: usize, b: char, off: u64| {
        let (buffer, at, _, _) = place(info, sizes, g, b, off);
        (buffer, at)
    };
    let line = |(g, t, s): At| line_at(text, gpus[g][t].steps[s].pos);
    msccl_races::check(&steps, fed_by, &place).map_err(|finding| match finding {
        Finding::Cycle(at) => err(line(at), "steps wait on each other in a cycle (the program would deadlock)"),
        Finding::TooLarge { what, value, limit } => err(
            0,
            format!(
                "{value} {what}: more than the {limit} the check for unordered steps holds, so it is not certified"
            ),
        ),
        Finding::Race { first, second, gpu, buffer, chunk, both_write } => err(
            line(first),
            format!(
                "this step and the one at line {} both touch chunk {chunk} of GPU {gpu}'s {} buffer, {} writing \
                 it, and nothing orders them (thread block order, a dependency or a message): the result depends \
                 on which runs first",
                line(second),
                buffer.as_str(),
                if both_write { "both" } else { "one" }
            ),
        ),
    })
}

/// The scratch chunks a GPU's steps name (`s` buffer): one past the highest.
fn own_scratch(tbs: &[Tb]) -> u64 {
    tbs.iter()
        .flat_map(|tb| tb.steps.iter())
        .filter(|st| st.kind != Kind::Nop)
        .flat_map(|st| [st.src, st.dst].map(|b| (b, st.cnt)))
        .filter(|((b, _), _)| *b == 's')
        .map(|((_, off), cnt)| off.saturating_add(cnt))
        .max()
        .unwrap_or(0)
}

/// Chunks at the start of the scratch that stand for an in-place reduce-scatter's one
/// buffer (see `place`).
fn alias_chunks(info: &MscclInfo) -> u64 {
    match info.in_place && info.collective == Collective::ReduceScatter {
        true => info.chunks,
        false => 0,
    }
}

/// Where chunk `off` of GPU g's buffer `b` (`i`, `o`, `s`) is in the schedule's buffers:
/// the buffer, the chunk there, and how many chunks `b` holds (its bound).
///
/// Out of place each buffer holds the chunks its `<gpu>` declares, else the
/// collective's layout (an all-gather's input and a reduce-scatter's output one GPU's
/// share). In place the two buffers are one (msccl-executor finds in-place by the
/// pointers: an all-gather's input is its output's share `rank`, a reduce-scatter's
/// output its input's share `rank`): an all-reduce or all-gather works in
/// `Buffer::Output`, the input copied into it first; a reduce-scatter in a scratch copy
/// of its input at the start of the scratch, its share copied out at the end.
fn place(info: &MscclInfo, sizes: &[BufferChunks], g: usize, b: char, off: u64) -> (Buffer, u64, u64, &'static str) {
    let share = info.chunks / info.gpus as u64;
    let mine = g as u64 * share;
    let default_input = if info.collective == Collective::AllGather { share } else { info.chunks };
    let default_output = if info.collective == Collective::ReduceScatter { share } else { info.chunks };
    match (b, info.in_place, info.collective) {
        ('s', _, _) => (
            Buffer::Scratch,
            alias_chunks(info).saturating_add(off),
            sizes[g].scratch.unwrap_or(MAX_CHUNKS),
            "s_chunks",
        ),
        ('o', false, _) => (Buffer::Output, off, sizes[g].output.unwrap_or(default_output), "o_chunks"),
        (_, false, _) => (Buffer::Input, off, sizes[g].input.unwrap_or(default_input), "i_chunks"),
        ('i', true, Collective::AllGather) => (Buffer::Output, mine.saturating_add(off), share, "i_chunks"),
        ('o', true, Collective::ReduceScatter) => (Buffer::Scratch, mine.saturating_add(off), share, "o_chunks"),
        (_, true, Collective::ReduceScatter) => (Buffer::Scratch, off, info.chunks, "i_chunks"),
        (_, true, _) => (Buffer::Output, off, info.chunks, "o_chunks"),
    }
}

/// The schedule of a read program on `count` elements, in `passes` passes of MSCCL's
/// loop over the buffer (see [`pass_bytes`]), of which it holds at most
/// `Program::held_passes`.
///
/// Pass k moves the k-th piece of every chunk. A thread block runs its steps in order,
/// pass after pass, so the first step of its pass k waits for its last step of pass
/// k − 1; a dependency waits for the same pass of the step it names (the executor's
/// flags count passes). Passes therefore overlap along the program's critical path:
/// a chain of thread blocks streams its pieces as a pipeline does.
fn build(
    program: &Program,
    count: u64,
    elem_bytes: u64,
    in_place: bool,
    passes: u64,
) -> Result<CompactSchedule, ScheduleError> {
    let Program { text, info, gpus, sizes, meets, all, .. } = program;
    let info = &MscclInfo { in_place, ..info.clone() };
    let spec = CollectiveSpec::new(info.collective, info.gpus, count).with_root(info.root);
    let chunk = count / info.chunks;
    let share = info.chunks / info.gpus as u64;
    // Equal pieces, the last one shorter; no pass is left empty. Past what a schedule
    // holds, fewer and larger pieces carry the bytes; the other passes' rounds are added
    // below.
    let passes = passes.clamp(1, chunk.max(1));
    let capped = program.held_passes(passes) < passes;
    let piece = chunk.div_ceil(program.held_passes(passes));
    let held = chunk.div_ceil(piece);
    let passes = if capped { passes } else { held };
    // The first chunk of a chunk range in GPU g's buffer; `i` and `o` are one buffer in place.
    let chunks_at = |g: usize, (b, off): (char, u64), cnt: u64, pos: usize| -> Result<(Buffer, u64), ScheduleError> {
        let (buffer, at, chunks, name) = place(info, sizes, g, b, off);
        if off.checked_add(cnt).is_none_or(|end| end > chunks) {
            return Err(err(
                line_at(text, pos),
                format!(
                    "chunks {off}..{} of GPU {g}'s {b} buffer, which holds {chunks} ({name})",
                    off.saturating_add(cnt)
                ),
            ));
        }
        Ok((buffer, at))
    };
    // What pass k touches of `cnt` chunks from `at`: all of them in one pass, else each
    // chunk's k-th piece.
    let pieces = |(buffer, at): (Buffer, u64), cnt: u64, k: u64| -> Vec<Region> {
        if held == 1 {
            return vec![Region::new(buffer, at * chunk..(at + cnt) * chunk)];
        }
        (at..at + cnt)
            .map(|c| {
                let start = c * chunk + k * piece;
                Region::new(buffer, start..(start + piece).min((c + 1) * chunk))
            })
            .collect()
    };
    let mut builder = ScheduleBuilder::new(spec.clone(), info.name.clone(), elem_bytes);
    // The program's own scratch on each GPU, then a staging slot per message received
    // (the connection's buffer the message waits in until its receive runs), in chunks.
    let alias = alias_chunks(info);
    let mut scratch: Vec<u64> = gpus.iter().map(|tbs| alias.saturating_add(own_scratch(tbs))).collect();
    let mut staging: HashMap<At, (Buffer, u64)> = HashMap::new();
    for &(g, t, s) in all {
        let st = &gpus[g][t].steps[s];
        if st.kind.receives() {
            staging.insert((g, t, s), (Buffer::Scratch, scratch[g]));
            scratch[g] += st.cnt;
        }
    }
    // Every element addressed must be a u64 (a huge size of a program with a large
    // scratch would wrap).
    let declared = sizes.iter().flat_map(|s| [s.input, s.output]).flatten().max().unwrap_or(0);
    let most_chunks = scratch.iter().copied().max().unwrap_or(0).max(declared).max(info.chunks);
    if most_chunks.checked_mul(chunk).is_none() {
        return Err(err(
            0,
            format!(
                "{most_chunks} chunks of {chunk} elements: more elements than a buffer of this program can address"
            ),
        ));
    }
    for (g, &n) in scratch.iter().enumerate() {
        if n > 0 {
            builder.scratch(g, n * chunk);
        }
    }
    if info.in_place {
        let share_elements = share * chunk;
        for r in 0..info.gpus {
            let mine = r as u64 * share_elements..(r as u64 + 1) * share_elements;
            let copy = |read, write| LocalOp { rank: r, read, write, op: Op::Copy };
            match info.collective {
                Collective::AllGather => {
                    builder.prologue(copy(
                        Region::new(Buffer::Input, 0..share_elements),
                        Region::new(Buffer::Output, mine),
                    ));
                }
                Collective::ReduceScatter => {
                    builder
                        .prologue(copy(Region::new(Buffer::Input, 0..count), Region::new(Buffer::Scratch, 0..count)));
                    builder.epilogue(copy(
                        Region::new(Buffer::Scratch, mine),
                        Region::new(Buffer::Output, 0..share_elements),
                    ));
                }
                _ => {
                    builder.prologue(copy(Region::new(Buffer::Input, 0..count), Region::new(Buffer::Output, 0..count)));
                }
            }
        }
    }
    let waits = pass_waits(text, all, gpus, meets)?;
    let mut steps: Vec<Step> = Vec::new();
    let mut transfers: Vec<(usize, Transfer)> = Vec::new();
    let mut previous: Option<Vec<usize>> = None;
    // The rounds done after each pass.
    let mut ends: Vec<usize> = Vec::with_capacity(held as usize);
    for k in 0..held {
        let (done, depth) = pass_rounds(&waits, all, gpus, previous.as_deref());
        let last = done.iter().copied().max().unwrap_or(0);
        ends.push(last.max(ends.last().copied().unwrap_or(0)));
        if steps.len() < last + 1 {
            steps.resize_with(last + 1, Step::default);
        }
        // Inside a round, local steps after what they wait for.
        let mut order: Vec<usize> = (0..all.len()).collect();
        order.sort_by_key(|&i| (done[i], depth[i]));
        for i in order {
            let (g, t, s) = all[i];
            let st = &gpus[g][t].steps[s];
            let round = done[i];
            let mut local = |read: (Buffer, u64), write: (Buffer, u64), op: Op| {
                for (read, write) in pieces(read, st.cnt, k).into_iter().zip(pieces(write, st.cnt, k)) {
                    let op = LocalOp { rank: g, read, write, op };
                    // A local step after round `round` (before any round: the prologue).
                    match round.checked_sub(1) {
                        Some(r) => steps[r].local.push(op),
                        None => {
                            builder.prologue(op);
                        }
                    }
                }
            };
            let slot = || {
                staging.get(&(g, t, s)).copied().ok_or_else(|| err(line_at(text, st.pos), "a receive no send feeds"))
            };
            let src = || chunks_at(g, st.src, st.cnt, st.pos);
            let dst = || chunks_at(g, st.dst, st.cnt, st.pos);
            // What the step does on its own GPU once its message is in.
            match st.kind {
                Kind::Copy => local(src()?, dst()?, Op::Copy),
                Kind::Reduce => local(src()?, dst()?, Op::Reduce),
                // The message stays in its slot: a forwarding step sends the slot on, as the
                // executor forwards what it received (not what `dst` holds a round later).
                Kind::Recv | Kind::RecvCopySend => local(slot()?, dst()?, Op::Copy),
                // src ⊕ message, made in the slot, then stored in `dst`.
                Kind::RecvReduceCopy | Kind::RecvReduceCopySend => {
                    local(src()?, slot()?, Op::Reduce);
                    local(slot()?, dst()?, Op::Copy);
                }
                // The sum is sent on from the slot; nothing of this GPU's changes.
                Kind::RecvReduceSend => local(src()?, slot()?, Op::Reduce),
                Kind::Send | Kind::Nop => {}
            }
            if let Some(&(rg, rt, rs)) = meets.get(&(g, t, s)) {
                let rst = &gpus[rg][rt].steps[rs];
                if rst.cnt != st.cnt {
                    return Err(err(
                        line_at(text, st.pos),
                        format!(
                            "sends {} chunks to GPU {rg}, whose receive (line {}) takes {}",
                            st.cnt,
                            line_at(text, rst.pos),
                            rst.cnt
                        ),
                    ));
                }
                // A send reads its source when it runs; a forwarding step its slot, in the
                // round after its receive completed there.
                let (read, at) = match st.kind {
                    Kind::Send => (src()?, round),
                    _ => (slot()?, round + 1),
                };
                let write = staging[&(rg, rt, rs)];
                let channel = gpus[g][t].chan;
                for (read, write) in pieces(read, st.cnt, k).into_iter().zip(pieces(write, st.cnt, k)) {
                    transfers.push((at, Transfer { from: g, to: rg, read, write, op: Op::Copy, shard: None, channel }));
                }
            }
        }
        previous = Some(done);
    }
    let rounds = steps.len().saturating_sub(1);
    for (at, transfer) in transfers {
        // A transfer's round is at most its receive's (`pass_rounds`), so within the rounds.
        let round = at.checked_sub(1).and_then(|k| steps.get_mut(k));
        let Some(round) = round else {
            return Err(err(0, format!("a transfer placed in round {at} of {rounds}")));
        };
        round.transfers.push(transfer);
    }
    builder.phase("msccl", steps.into_iter().filter(|s| !s.transfers.is_empty() || !s.local.is_empty()).collect());
    let mut schedule = builder.build_compact();
    // MSCCL runs a program under the protocol it names (`proto`), never another.
    schedule.protocol = Some(info.protocol.clone());
    // Every round's latency counts (`path_rounds` stays 0): a thread block begins a pass
    // only once its previous pass has ended, so passes do not stream through a step as
    // NCCL's chunks do — what MSCCL's multiple instances of a program are for.
    schedule.pipeline_chunks = passes as usize;
    if passes > held {
        // Passes settle into a period: the rounds each of the last half of the held ones
        // added (with one held, its own: the passes in series).
        let h = ends.len();
        let half = h / 2;
        let per_pass = match half {
            0 => ends[h - 1] as f64,
            _ => (ends[h - 1] - ends[half - 1]) as f64 / (h - half) as f64,
        };
        schedule.unheld_rounds = ((passes - held) as f64 * per_pass).round() as usize;
    }
    Ok(schedule)
}

/// What each step (by its place in `all`) waits for in a pass: in the same pass, its
/// own waits and its sender's (see [`waits`]); in the pass before, its thread block's
/// last step where it is its block's first, and likewise for a plain send that feeds it.
struct PassWaits {
    own: Vec<usize>,
    own_before: Option<usize>,
    sender: Vec<usize>,
    sender_before: Option<usize>,
}

fn pass_waits(
    text: &str,
    all: &[At],
    gpus: &[Vec<Tb>],
    meets: &HashMap<At, At>,
) -> Result<Vec<PassWaits>, ScheduleError> {
    let index: HashMap<At, usize> = all.iter().enumerate().map(|(i, &at)| (at, i)).collect();
    let fed_by: HashMap<At, At> = meets.iter().map(|(&s, &r)| (r, s)).collect();
    // The block's last step, for its first (the block starts pass k after ending k − 1).
    let before = |(g, t, s): At| (s == 0).then(|| index[&(g, t, gpus[g][t].steps.len() - 1)]);
    all.iter()
        .map(|&at| {
            let (own, sender) = waits(text, at, gpus, &fed_by)?;
            let plain_send = fed_by.get(&at).filter(|&&(g, t, s)| gpus[g][t].steps[s].kind == Kind::Send);
            Ok(PassWaits {
                own: own.iter().map(|w| index[w]).collect(),
                own_before: before(at),
                sender: sender.iter().map(|w| index[w]).collect(),
                sender_before: plain_send.and_then(|&from| before(from)),
            })
        })
        .collect()
}

/// Each step's round in one pass (`previous`: the pass before's, none for the first),
/// by `finish_all`'s rule, and its depth among same-round steps. `all` lists the steps
/// in an order where each comes after what it waits for in its pass.
fn pass_rounds(
    waits: &[PassWaits],
    all: &[At],
    gpus: &[Vec<Tb>],
    previous: Option<&[usize]>,
) -> (Vec<usize>, Vec<usize>) {
    let mut done = vec![0usize; all.len()];
    let mut depth = vec![0usize; all.len()];
    let before = |w: Option<usize>| w.and_then(|j| previous.map(|p| p[j])).unwrap_or(0);
    for (i, w) in waits.iter().enumerate() {
        let ready = w.own.iter().map(|&j| done[j]).max().unwrap_or(0).max(before(w.own_before));
        let sent = w.sender.iter().map(|&j| done[j]).max().unwrap_or(0).max(before(w.sender_before));
        let (g, t, s) = all[i];
        let end = match gpus[g][t].steps[s].kind {
            k if k.receives() => ready.max(sent + 1),
            Kind::Send => ready + 1,
            _ => ready,
        };
        depth[i] = w.own.iter().chain(&w.sender).filter(|&&j| done[j] == end).map(|&j| depth[j] + 1).max().unwrap_or(0);
        done[i] = end;
    }
    (done, depth)
}

/// What step `at` waits for: its block's previous step and its dependency (`own`), and for
/// a receive what its sender waits for (a plain send: the sender's own waits; a forwarding
/// step: that step itself, whose receive must land first).
fn waits(text: &str, at: At, gpus: &[Vec<Tb>], fed_by: &HashMap<At, At>) -> Result<(Vec<At>, Vec<At>), ScheduleError> {
    let own = |(g, t, s): At| -> Result<Vec<At>, ScheduleError> {
        let st = &gpus[g][t].steps[s];
        let mut w = Vec::with_capacity(2);
        if s > 0 {
            w.push((g, t, s - 1));
        }
        if let Some((dt, ds)) = st.dep {
            if dt >= gpus[g].len() || ds >= gpus[g][dt].steps.len() {
                return Err(err(
                    line_at(text, st.pos),
                    format!("depends on tb {dt} step {ds}, which GPU {g} does not have"),
                ));
            }
            w.push((g, dt, ds));
        }
        Ok(w)
    };
    let (g, t, s) = at;
    let mut sender = Vec::new();
    if gpus[g][t].steps[s].kind.receives() {
        if let Some(&from) = fed_by.get(&at) {
            let (fg, ft, fs) = from;
            if gpus[fg][ft].steps[fs].kind == Kind::Send {
                sender = own(from)?;
            } else {
                sender.push(from);
            }
        }
    }
    Ok((own(at)?, sender))
}

/// The round (1-based) at which every step is done: a receive in the round its message
/// lands (the round after its sender's waits), or once its own waits are done if later; a
/// send the round after its data was ready (it is posted to the connection's buffer); a
/// local step once its waits are done.
/// Evaluated with an explicit stack (a long chain of steps must not exhaust the call
/// stack); a cycle of waits is a program that would deadlock.
/// A number per step: its round, or its depth among same-round steps.
type StepRounds = HashMap<At, usize>;

/// Beside the round, each step's depth among the steps it waits for that end in the same
/// round (local steps chained inside one round run in that order).
fn finish_all(
    text: &str,
    steps: &[At],
    gpus: &[Vec<Tb>],
    fed_by: &HashMap<At, At>,
) -> Result<(StepRounds, StepRounds), ScheduleError> {
    let mut done: HashMap<At, usize> = HashMap::with_capacity(steps.len());
    let mut depth: HashMap<At, usize> = HashMap::with_capacity(steps.len());
    let mut on_stack: std::collections::HashSet<At> = std::collections::HashSet::new();
    for &start in steps {
        if done.contains_key(&start) {
            continue;
        }
        let mut stack = vec![start];
        on_stack.insert(start);
        while let Some(&at) = stack.last() {
            let (own, sender) = waits(text, at, gpus, fed_by)?;
            let pending: Vec<At> = own.iter().chain(&sender).copied().filter(|w| !done.contains_key(w)).collect();
            if let Some(&next) = pending.first() {
                if !on_stack.insert(next) {
                    let (g, t, s) = at;
                    return Err(err(
                        line_at(text, gpus[g][t].steps[s].pos),
                        "steps wait on each other in a cycle (the program would deadlock)",
                    ));
                }
                stack.push(next);
                continue;
            }
            let ready = own.iter().map(|w| done[w]).max().unwrap_or(0);
            let sent = sender.iter().map(|w| done[w]).max().unwrap_or(0);
            let (g, t, s) = at;
            let end = match gpus[g][t].steps[s].kind {
                // Its message lands in the round after what the sender waited for (a
                // send posts it then); the receive takes it in that round's local work.
                k if k.receives() => ready.max(sent + 1),
                Kind::Send => ready + 1,
                // A local step runs once what it waits for is done: before any round (0,
                // the prologue) when nothing is.
                _ => ready,
            };
            let d = own.iter().chain(&sender).filter(|w| done[*w] == end).map(|w| depth[w] + 1).max().unwrap_or(0);
            done.insert(at, end);
            depth.insert(at, d);
            on_stack.remove(&at);
            stack.pop();
        }
    }
    Ok((done, depth))
}

/// Largest schedule written as MSCCL XML: one chunk per element, so elements per rank
/// and buffer are bounded, and so are elements over all ranks (each is tracked for the
/// dependencies: 1,024 ranks of 64 chunks once took 24 GB and was killed).
pub const MAX_EXPORT_ELEMENTS: u64 = 1 << 16;
pub const MAX_EXPORT_RANK_ELEMENTS: u64 = 1 << 20;

/// One step of a thread block being written.
struct OutStep {
    kind: &'static str,
    src: (char, u64),
    dst: (char, u64),
    cnt: u64,
    dep: Option<(usize, usize)>,
}

/// A thread block being written: its peers, channel and steps.
struct OutTb {
    send: i64,
    recv: i64,
    chan: u32,
    steps: Vec<OutStep>,
}

/// Per rank: its thread blocks and, per buffer element, the step that last wrote it and
/// those that read it since.
struct OutGpu {
    tbs: Vec<OutTb>,
    by_key: HashMap<(i64, i64, u32), usize>,
    writer: HashMap<(char, u64), (usize, usize)>,
    readers: HashMap<(char, u64), Vec<(usize, usize)>>,
}

impl OutGpu {
    fn tb(&mut self, send: i64, recv: i64, chan: u32) -> usize {
        let n = self.tbs.len();
        let id = *self.by_key.entry((send, recv, chan)).or_insert(n);
        if id == self.tbs.len() {
            self.tbs.push(OutTb { send, recv, chan, steps: Vec::new() });
        }
        id
    }

    /// Append a step to block `tb`, after nops for all but one of the steps it must
    /// follow in other blocks (MSCCL names one dependency per step).
    fn push(&mut self, tb: usize, mut step: OutStep, reads: (char, u64, u64), writes: Option<(char, u64, u64)>) {
        let mut waits: Vec<(usize, usize)> = Vec::new();
        for e in reads.1..reads.1 + reads.2 {
            if let Some(&w) = self.writer.get(&(reads.0, e)) {
                waits.push(w);
            }
        }
        if let Some((b, off, len)) = writes {
            for e in off..off + len {
                waits.extend(self.writer.get(&(b, e)).copied());
                waits.extend(self.readers.get(&(b, e)).into_iter().flatten().copied());
            }
        }
        waits.sort_unstable();
        waits.dedup();
        waits.retain(|&(t, _)| t != tb);
        let last = waits.pop();
        for w in waits {
            self.tbs[tb].steps.push(OutStep { kind: "nop", src: ('i', 0), dst: ('i', 0), cnt: 1, dep: Some(w) });
        }
        step.dep = last;
        self.tbs[tb].steps.push(step);
        let at = (tb, self.tbs[tb].steps.len() - 1);
        for e in reads.1..reads.1 + reads.2 {
            self.readers.entry((reads.0, e)).or_default().push(at);
        }
        if let Some((b, off, len)) = writes {
            for e in off..off + len {
                self.writer.insert((b, e), at);
                self.readers.remove(&(b, e));
            }
        }
    }
}

fn letter(b: Buffer) -> char {
    match b {
        Buffer::Input => 'i',
        Buffer::Output => 'o',
        Buffer::Scratch => 's',
    }
}

/// A railyard schedule as an MSCCL XML algorithm, one chunk per element: per rank a
/// thread block per peer, direction and channel (sends `s`; receives `r`, or `rrc` where
/// the transfer reduces), one for local copies and reductions (`cpy`, `re`); a step that
/// must follow steps of other blocks gets `nop` steps naming them (MSCCL takes one
/// dependency per step). `import` reads it back.
pub fn export(schedule: &crate::ir::Schedule) -> Result<String, ScheduleError> {
    let spec = &schedule.spec;
    if spec.count > MAX_EXPORT_ELEMENTS {
        return Err(err(
            0,
            format!("{} elements; export writes one chunk per element, at most {MAX_EXPORT_ELEMENTS}", spec.count),
        ));
    }
    // Two steps a transfer at least: a program past what `import` reads is not written.
    let transfers: usize = schedule.rounds.iter().map(|r| r.transfers.len()).sum();
    if transfers.saturating_mul(2) > MAX_STEPS {
        return Err(err(
            0,
            format!("{transfers} transfers make more than the {MAX_STEPS} steps an MSCCL file read here may hold"),
        ));
    }
    if !schedule.rounds.iter().all(|r| r.in_network.is_empty()) {
        return Err(err(0, "in-network reductions have no MSCCL form"));
    }
    if !MSCCL_COLLECTIVES.contains(&spec.collective) {
        return Err(err(0, format!("{} has no MSCCL collective name", spec.collective.as_str())));
    }
    let coll = spec.collective.as_str();
    let mut gpus: Vec<OutGpu> = (0..spec.ranks)
        .map(|_| OutGpu { tbs: Vec::new(), by_key: HashMap::new(), writer: HashMap::new(), readers: HashMap::new() })
        .collect();
    let local = |gpus: &mut Vec<OutGpu>, op: &LocalOp| {
        let g = &mut gpus[op.rank];
        let tb = g.tb(-1, -1, 0);
        let (src, dst) = ((letter(op.read.buffer), op.read.offset), (letter(op.write.buffer), op.write.offset));
        let kind = if op.op == Op::Copy { "cpy" } else { "re" };
        g.push(
            tb,
            OutStep { kind, src, dst, cnt: op.read.len, dep: None },
            (src.0, src.1, op.read.len),
            Some((dst.0, dst.1, op.write.len)),
        );
    };
    for op in &schedule.prologue {
        local(&mut gpus, op);
    }
    for round in &schedule.rounds {
        // Sends read before the round's writes land: all sends first, then the receives.
        for t in &round.transfers {
            let g = &mut gpus[t.from];
            let tb = g.tb(t.to as i64, -1, t.channel);
            let src = (letter(t.read.buffer), t.read.offset);
            let dst = (letter(t.write.buffer), t.write.offset);
            g.push(tb, OutStep { kind: "s", src, dst, cnt: t.read.len, dep: None }, (src.0, src.1, t.read.len), None);
        }
        for t in &round.transfers {
            let q = &mut gpus[t.to];
            let tb = q.tb(-1, t.from as i64, t.channel);
            let dst = (letter(t.write.buffer), t.write.offset);
            let kind = if t.op == Op::Reduce { "rrc" } else { "r" };
            // rrc reduces into its own chunk: source and destination are the same.
            let reads = if t.op == Op::Reduce { (dst.0, dst.1, t.write.len) } else { (dst.0, dst.1, 0) };
            q.push(
                tb,
                OutStep { kind, src: dst, dst, cnt: t.write.len, dep: None },
                reads,
                Some((dst.0, dst.1, t.write.len)),
            );
        }
        for op in &round.local {
            local(&mut gpus, op);
        }
    }
    for op in &schedule.epilogue {
        local(&mut gpus, op);
    }
    let channels = gpus.iter().flat_map(|g| g.tbs.iter().map(|t| t.chan + 1)).max().unwrap_or(1);
    let mut out = format!(
        // `outofplace`, `minBytes` and `maxBytes` (0: no limit) are what msccl-executor-nccl's
        // parser requires (src/misc/msccl/msccl_parser.cc); older executors ignore them.
        "<algo name=\"{}\" proto=\"Simple\" nchannels=\"{channels}\" nchunksperloop=\"{}\" ngpus=\"{}\" coll=\"{coll}\" inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\">\n",
        schedule.algorithm.replace(['"', '<', '>', '&'], "_"),
        spec.count,
        spec.ranks
    );
    for (r, g) in gpus.iter().enumerate() {
        // A step others wait on says so (hasdep), as msccl-tools writes it.
        let mut waited: std::collections::HashSet<(usize, usize)> = std::collections::HashSet::new();
        for tb in &g.tbs {
            waited.extend(tb.steps.iter().filter_map(|s| s.dep));
        }
        out += &format!(
            "  <gpu id=\"{r}\" i_chunks=\"{}\" o_chunks=\"{}\" s_chunks=\"{}\">\n",
            spec.input_len(r),
            spec.output_len(r),
            schedule.scratch_len.get(r).copied().unwrap_or(0)
        );
        for (t, tb) in g.tbs.iter().enumerate() {
            out += &format!("    <tb id=\"{t}\" send=\"{}\" recv=\"{}\" chan=\"{}\">\n", tb.send, tb.recv, tb.chan);
            for (k, st) in tb.steps.iter().enumerate() {
                let (depid, deps) = st.dep.map_or((-1, -1), |(a, b)| (a as i64, b as i64));
                out += &format!(
                    "      <step s=\"{k}\" type=\"{}\" srcbuf=\"{}\" srcoff=\"{}\" dstbuf=\"{}\" dstoff=\"{}\" cnt=\"{}\" depid=\"{depid}\" deps=\"{deps}\" hasdep=\"{}\"/>\n",
                    st.kind,
                    st.src.0,
                    st.src.1,
                    st.dst.0,
                    st.dst.1,
                    st.cnt,
                    u8::from(waited.contains(&(t, k)))
                );
            }
            out += "    </tb>\n";
        }
        out += "  </gpu>\n";
    }
    out += "</algo>\n";
    if out.len() > MAX_XML_BYTES {
        return Err(err(
            0,
            format!("the program is {} bytes of XML; MSCCL files read here hold at most {MAX_XML_BYTES}", out.len()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::check;

    const RING: &str = include_str!("../../../samples/msccl/allreduce_ring_8gpu.xml");
    const ALLPAIRS: &str = include_str!("../../../samples/msccl/allreduce_allpairs_8gpu.xml");

    /// msccl-tools' 8-GPU ring all-reduce (8 channels, one chunk each): 14 rounds, as a
    /// ring's reduce-scatter and all-gather; and its all-pairs all-reduce (scratch, local
    /// reductions with dependencies): both prove correct.
    #[test]
    fn msccl_examples_import_and_prove_correct() {
        let (ring, info) = import(RING, 8 * 4, 4).unwrap();
        assert_eq!((info.gpus, info.chunks, info.channels, info.collective), (8, 8, 8, Collective::AllReduce));
        assert_eq!(ring.rounds(), 14);
        check(&ring.expand()).unwrap();
        let (pairs, info) = import(ALLPAIRS, 8 * 2, 4).unwrap();
        assert_eq!(info.name, "allreduce_pairs");
        check(&pairs.expand()).unwrap();
    }

    /// The sizes MSCCL's executor picks a program for: `minBytes`..`maxBytes`, where a
    /// `maxBytes` of 0 (or none) is no limit; a negative one is refused.
    #[test]
    fn min_and_max_bytes_say_when_msccl_runs_a_program() {
        let (_, info) = import(RING, 8 * 4, 4).unwrap();
        assert!(info.runs_at(1) && info.runs_at(u64::MAX));
        let ranged = RING.replacen("<algo ", "<algo minBytes=\"1024\" maxBytes=\"1048576\" ", 1);
        let (_, info) = import(&ranged, 8 * 4, 4).unwrap();
        assert_eq!((info.min_bytes, info.max_bytes), (1024, Some(1 << 20)));
        assert!(!info.runs_at(512) && info.runs_at(1024) && info.runs_at(1 << 20) && !info.runs_at((1 << 20) + 1));
        let open = RING.replacen("<algo ", "<algo maxBytes=\"0\" ", 1);
        assert_eq!(import(&open, 8 * 4, 4).unwrap().1.max_bytes, None);
        let bad = RING.replacen("<algo ", "<algo minBytes=\"-1\" ", 1);
        assert!(import(&bad, 8 * 4, 4).unwrap_err().to_string().contains("minBytes=\"-1\" is negative"));
    }

    /// One step of the ring changed from receive-reduce-send to receive-copy-send drops a
    /// contribution: the checker names the element and rank that end wrong.
    #[test]
    fn a_broken_copy_fails_with_the_element_named() {
        let broken = RING.replacen(r#"type="rrs""#, r#"type="rcs""#, 1);
        assert_ne!(broken, RING);
        let (schedule, _) = import(&broken, 8, 4).unwrap();
        let e = check(&schedule.expand()).unwrap_err().to_string();
        assert!(e.contains("element") && e.contains("rank"), "{e}");
    }

    /// A 4-GPU chain broadcast of one chunk, each GPU receiving and sending it on.
    fn chain(proto: &str) -> String {
        let mut text =
            format!(r#"<algo name="chain" proto="{proto}" nchunksperloop="1" ngpus="4" coll="broadcast" inplace="0">"#);
        for g in 0..4 {
            let (send, recv) = (if g < 3 { g as i64 + 1 } else { -1 }, g as i64 - 1);
            let kind = match g {
                0 => "s",
                3 => "r",
                _ => "rcs",
            };
            let src = if g == 0 { "i" } else { "o" };
            // The root's own output is a copy of its input.
            let copy = match g {
                0 => {
                    r#"<step s="1" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>"#
                }
                _ => "",
            };
            text += &format!(
                r#"<gpu id="{g}" i_chunks="1" o_chunks="1" s_chunks="0"><tb id="0" send="{send}" recv="{recv}" chan="0"><step s="0" type="{kind}" srcbuf="{src}" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>{copy}</tb></gpu>"#
            );
        }
        text + "</algo>"
    }

    /// MSCCL's executor moves each chunk a pass at a time and a thread block starts its
    /// next pass as soon as it ends this one: a 3-hop chain of 4 passes takes 3 + 3
    /// rounds, not 3 × 4 — and every pass still delivers its piece (the checker proves
    /// the looped schedule, the all-pairs program's local steps and dependencies too).
    #[test]
    fn passes_over_the_buffer_pipeline_along_the_program() {
        let text = chain("Simple");
        let program = Program::parse(&text).unwrap();
        let one = build(&program, 8, 4, false, 1).unwrap();
        assert_eq!((one.rounds(), one.pipeline_chunks), (3, 1));
        let four = build(&program, 8, 4, false, 4).unwrap();
        assert_eq!((four.rounds(), four.pipeline_chunks), (6, 4));
        check(&four.expand()).unwrap();
        // Uneven pieces: 7 elements in 3 passes of 3, 3 and 1.
        check(&build(&program, 7, 4, false, 3).unwrap().expand()).unwrap();
        for (xml, count) in [(RING, 8 * 3), (ALLPAIRS, 8 * 2 * 2)] {
            let program = Program::parse(xml).unwrap();
            let looped = build(&program, count, 4, program.info.in_place, 2).unwrap();
            check(&looped.expand()).unwrap();
            assert!(looped.rounds() > build(&program, count, 4, program.info.in_place, 1).unwrap().rounds());
        }
    }

    /// Passes by protocol at NCCL's default buffer sizes: 2 MiB of each chunk per pass
    /// under Simple, 576,000 B under LL128, 32 KiB under LL; at most `MAX_PASS_WORK`.
    #[test]
    fn passes_follow_the_protocol_s_step() {
        let ring = Program::parse(RING).unwrap();
        // 1 GiB of floats in 8 chunks of 128 MiB: LL128 passes of 576,000 B.
        assert_eq!(ring.info.protocol, "LL128");
        assert_eq!(ring.passes(1 << 28, 4), (128u64 << 20).div_ceil(576_000));
        assert_eq!(ring.passes(8, 4), 1);
        for (proto, bytes, passes) in [("Simple", 4u64 << 20, 2), ("LL128", 1_152_000, 2), ("LL", 64 << 10, 2)] {
            let text = chain(proto);
            let program = Program::parse(&text).unwrap();
            assert_eq!(program.passes(bytes / 4, 4), passes, "{proto}");
            assert_eq!(program.passes(bytes / 4 + 1, 4), passes + 1, "{proto}");
        }
        // A huge buffer: the executor's passes, of which a schedule holds what fits.
        let most = ring.held_passes(ring.passes(u64::MAX / 8, 4));
        assert!(most >= 2 && most * ring.work <= MAX_PASS_WORK, "{most}");
    }

    /// Past what a schedule holds, fewer passes of larger pieces carry the bytes, and
    /// the others' rounds are added at the pace of the last held ones: the ring's
    /// passes run in series, so twice the passes it can hold stand for twice its rounds.
    #[test]
    fn passes_past_the_limit_add_their_rounds() {
        let ring = Program::parse(RING).unwrap();
        let most = ring.held_passes(u64::MAX);
        let count = 8 * 4 * most;
        let held = build(&ring, count, 4, true, most).unwrap();
        assert_eq!((held.unheld_rounds, held.pipeline_chunks), (0, most as usize));
        let twice = build(&ring, count, 4, true, 2 * most).unwrap();
        assert_eq!((twice.rounds(), twice.pipeline_chunks), (held.rounds(), 2 * most as usize));
        let total = (twice.rounds() + twice.unheld_rounds) as f64;
        assert!((total / (2 * held.rounds()) as f64 - 1.0).abs() < 0.02, "{total} vs {}", 2 * held.rounds());
        check(&twice.expand()).unwrap();
    }

    /// A broadcast's root: the file's, else the one GPU that never receives, else the one
    /// asked for; where none tells, it is refused. Other collectives have none, whatever
    /// the file says.
    #[test]
    fn a_broadcast_s_root_is_told_by_the_file_the_steps_or_the_asker() {
        let step = |s: usize, kind: &str, src: &str, dst: &str| {
            format!(
                r#"<step s="{s}" type="{kind}" srcbuf="{src}" srcoff="0" dstbuf="{dst}" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>"#
            )
        };
        // GPU 0 sends its chunk to GPU 1, which sends it back into GPU 0's scratch: both
        // receive, so the steps do not tell the root.
        let text = format!(
            r#"<algo name="loop" proto="Simple" nchunksperloop="1" ngpus="2" coll="broadcast" inplace="0"><gpu id="0" i_chunks="1" o_chunks="1" s_chunks="1"><tb id="0" send="1" recv="1" chan="0">{}{}{}</tb></gpu><gpu id="1" i_chunks="1" o_chunks="1" s_chunks="0"><tb id="0" send="0" recv="0" chan="0">{}{}</tb></gpu></algo>"#,
            step(0, "s", "i", "o"),
            step(1, "r", "s", "s"),
            step(2, "cpy", "i", "o"),
            step(0, "r", "o", "o"),
            step(1, "s", "o", "s"),
        );
        let e = Program::parse(&text).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("root is not told"), "{e}");
        let asked = Program::parse_as(&text, ReadAs { custom: None, root: Some(0) }).unwrap();
        assert_eq!(asked.info.root, 0);
        check(&asked.schedule(1, 4).unwrap().expand()).unwrap();
        let named = text.replacen("<algo ", r#"<algo root="1" "#, 1);
        assert_eq!(Program::parse_as(&named, ReadAs { custom: None, root: Some(0) }).unwrap().info.root, 1);
        // The chain's root never receives.
        assert_eq!(Program::parse(&chain("Simple")).unwrap().info.root, 0);
        // An all-reduce has no root, whatever its file says.
        let ring = RING.replacen("<algo ", r#"<algo root="9" "#, 1);
        assert_eq!(Program::parse(&ring).unwrap().info.root, 0);
    }

    /// A thread block of 60,000 sends and the receives that take them: evaluated without
    /// recursion, so the depth of the chain costs memory, not the call stack.
    #[test]
    fn a_very_long_chain_does_not_exhaust_the_stack() {
        let n = 60_000;
        let mut text = String::from(r#"<algo name="long" nchunksperloop="1" ngpus="2" coll="broadcast" inplace="0">"#);
        for (g, (kind, peer)) in [("s", "send=\"1\" recv=\"-1\""), ("r", "send=\"-1\" recv=\"0\"")].iter().enumerate() {
            text += &format!(r#"<gpu id="{g}"><tb id="0" {peer} chan="0">"#);
            for s in 0..n {
                let buf = if g == 0 { "i" } else { "o" };
                text += &format!(
                    r#"<step s="{s}" type="{kind}" srcbuf="{buf}" srcoff="0" dstbuf="{buf}" dstoff="0" cnt="1" depid="-1" deps="-1"/>"#
                );
            }
            text += "</tb></gpu>";
        }
        text += "</algo>";
        let (schedule, _) = import(&text, 1, 4).unwrap();
        assert_eq!(schedule.rounds(), n);
    }

    /// Railyard's own schedules written as MSCCL XML read back as programs the checker
    /// proves, with the same rounds where every round waits on the one before.
    #[test]
    fn our_schedules_round_trip_through_msccl_xml() {
        use crate::{generate_compact, Algorithm, GenOptions};
        for (algorithm, collective, ranks) in [
            (Algorithm::Ring, Collective::AllReduce, 8),
            (Algorithm::Rhd, Collective::AllReduce, 8),
            (Algorithm::DoubleTree, Collective::AllReduce, 6),
            (Algorithm::Ring, Collective::AllGather, 4),
            (Algorithm::Pairwise, Collective::AllToAll, 4),
            (Algorithm::Chain, Collective::Broadcast, 5),
        ] {
            let spec = CollectiveSpec::new(collective, ranks, 8 * ranks as u64);
            let ours = generate_compact(algorithm, &spec, &GenOptions::default(), 4).unwrap().expand();
            let xml = export(&ours).unwrap();
            let (back, info) = import(&xml, spec.count, 4).unwrap_or_else(|e| panic!("{algorithm}: {e}"));
            assert_eq!((info.gpus, info.collective), (ranks, collective));
            check(&back.expand()).unwrap_or_else(|e| panic!("{algorithm} {collective:?}: {e}"));
            if algorithm == Algorithm::Ring {
                assert_eq!(back.rounds(), ours.rounds.len(), "{algorithm}");
            }
        }
    }

    #[test]
    fn malformed_programs_name_their_line() {
        for (edit, word) in [
            ((r#"type="rrs""#, r#"type="xyz""#), "unknown step type"),
            ((r#"ngpus="8""#, r#"ngpus="1""#), "ngpus"),
            ((r#"cnt="1""#, r#"cnt="0""#), "cnt"),
            ((r#"send="1""#, r#"send="0""#), "peer"),
        ] {
            let text = RING.replacen(edit.0, edit.1, 1);
            let e = import(&text, 8, 4).unwrap_err().to_string();
            assert!(e.contains(word) && e.starts_with("line "), "{word}: {e}");
        }
        // A send with no matching receive.
        let text = RING.replacen(r#"type="r""#, r#"type="nop""#, 1);
        assert!(import(&text, 8, 4).unwrap_err().to_string().contains("receives"));
        assert!(import(RING, 12, 4).unwrap_err().to_string().contains("chunks"));
        assert!(import("<notalgo/>", 8, 4).is_err());
        let deep = format!("{}{}", "<x>".repeat(20_000), "</x>".repeat(20_000));
        assert!(import(&deep, 8, 4).unwrap_err().to_string().contains("nested 20000 deep"));
        // `/>` inside a quoted value closes nothing.
        let quoted = format!("{}{}", r#"<x a="/>">"#.repeat(20_000), "</x>".repeat(20_000));
        assert!(import(&quoted, 8, 4).unwrap_err().to_string().contains("nested 20000 deep"));
    }

    /// A 2-GPU in-place all-reduce of one chunk, each GPU's thread block given.
    fn two_gpus(gpu0: &str, gpu1: &str) -> String {
        format!(
            r#"<algo name="t" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="2" coll="allreduce" inplace="1">
<gpu id="0" i_chunks="1" o_chunks="0" s_chunks="2">{gpu0}</gpu><gpu id="1" i_chunks="1" o_chunks="0" s_chunks="2">{gpu1}</gpu></algo>"#
        )
    }

    fn step(s: usize, kind: &str, src: &str, dst: &str, dep: (i64, i64)) -> String {
        let (sb, so) = src.split_at(1);
        let (db, d) = dst.split_at(1);
        format!(
            r#"<step s="{s}" type="{kind}" srcbuf="{sb}" srcoff="{so}" dstbuf="{db}" dstoff="{d}" cnt="1" depid="{}" deps="{}" hasdep="1"/>"#,
            dep.0, dep.1
        )
    }

    fn verdict(text: &str) -> Result<(), String> {
        let (schedule, _) = import(text, 4, 4).map_err(|e| e.to_string())?;
        check(&schedule.expand()).map(|_| ()).map_err(|e| e.to_string())
    }

    /// MSCCL's `rrs` sends the sum on and stores nothing: GPU 1 ending with its own input
    /// alone is a wrong all-reduce, which the checker must not certify; `rrcs` (stores
    /// and sends) is the correct program.
    #[test]
    fn receive_reduce_send_stores_nothing() {
        let none = (-1, -1);
        let gpu0 = format!(
            r#"<tb id="0" send="1" recv="1" chan="0">{}{}</tb>"#,
            step(0, "s", "o0", "o0", none),
            step(1, "r", "o0", "o0", none)
        );
        let wrong = two_gpus(
            &gpu0,
            &format!(r#"<tb id="0" send="0" recv="0" chan="0">{}</tb>"#, step(0, "rrs", "o0", "o0", none)),
        );
        let e = verdict(&wrong).unwrap_err();
        assert!(e.contains("rank 1"), "{e}");
        let right = two_gpus(
            &gpu0,
            &format!(r#"<tb id="0" send="0" recv="0" chan="0">{}</tb>"#, step(0, "rrcs", "o0", "o0", none)),
        );
        verdict(&right).unwrap();
    }

    /// Both GPUs send their chunk, then receive-reduce the other's into it: a send reads
    /// when it runs, so the exchange is no race (it was refused as one).
    #[test]
    fn an_exchange_of_one_chunk_is_correct() {
        let none = (-1, -1);
        let tb = |peer: usize| {
            format!(
                r#"<tb id="0" send="{peer}" recv="{peer}" chan="0">{}{}</tb>"#,
                step(0, "s", "o0", "o0", none),
                step(1, "rrc", "o0", "o0", none)
            )
        };
        verdict(&two_gpus(&tb(1), &tb(0))).unwrap();
    }

    /// Local steps run in the order of what they wait for: the reduction (block 0, first
    /// in the file) waits on the copy (block 2), which waits on the receive.
    #[test]
    fn local_steps_run_in_dependency_order() {
        let none = (-1, -1);
        let gpu = |peer: usize| {
            format!(
                r#"<tb id="0" send="-1" recv="-1" chan="-1">{}</tb><tb id="1" send="{peer}" recv="{peer}" chan="0">{}{}</tb><tb id="2" send="-1" recv="-1" chan="-1">{}</tb>"#,
                step(0, "re", "s1", "o0", (2, 0)),
                step(0, "s", "o0", "o0", none),
                step(1, "r", "s0", "s0", none),
                step(0, "cpy", "s0", "s1", (1, 1)),
            )
        };
        verdict(&two_gpus(&gpu(1), &gpu(0))).unwrap();
    }

    /// What msccl-tools writes as a matter of course: nop steps with offsets -1 and no
    /// chunks, and `coll="reduce_scatter"`.
    #[test]
    fn nops_and_msccl_tools_collective_names_read() {
        let none = (-1, -1);
        let nop = r#"<step s="2" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="-1" deps="-1" hasdep="0"/>"#;
        let tb = |peer: usize| {
            format!(
                r#"<tb id="0" send="{peer}" recv="{peer}" chan="0">{}{}{nop}</tb>"#,
                step(0, "s", "o0", "o0", none),
                step(1, "rrc", "o0", "o0", none)
            )
        };
        verdict(&two_gpus(&tb(1), &tb(0))).unwrap();
        let (_, info) = import(&RING.replace(r#"coll="allreduce""#, r#"coll="all_reduce""#), 8, 4).unwrap();
        assert_eq!(info.collective, Collective::AllReduce);
    }
}

//! MSCCL's XML algorithms (msccl-tools' output, read by MSCCL/NCCL): `<algo ngpus
//! nchunksperloop coll inplace>`, per GPU its thread blocks (`<tb send recv chan>`), each a
//! sequence of steps — `s` send, `r` receive, `rrs` receive-reduce-send, `rrc`
//! receive-reduce-copy, `rrcs` receive-reduce-copy-send, `rcs` receive-copy-send, `cpy`,
//! `re` (local copy and reduce), `nop` — on chunks of the buffers `i`, `o`, `s`, with
//! dependencies on steps of other thread blocks (`depid`, `deps`).
//!
//! Made into a railyard schedule: the k-th send from GPU a to GPU b on a channel meets the
//! k-th receive at b from a on that channel; every transfer is placed in the first round
//! after what it waits for (its thread block's previous step, its dependencies, the
//! receive it forwards), so the rounds are the program's critical path. A chunk is
//! 1/nchunksperloop of the large buffer. In-place all-reduces work on the output buffer
//! (the input copied in first), as railyard's own all-reduces do.

use std::collections::HashMap;

use roxmltree::{Document, Node};

use crate::builder::ScheduleBuilder;
use crate::collective::{Collective, CollectiveSpec, Rank};
use crate::compact::CompactSchedule;
use crate::error::ScheduleError;
use crate::ir::{Buffer, LocalOp, Op, Region, Step, Transfer};

/// Limits on what is read (an 8-GPU ring is a few hundred steps).
pub const MAX_GPUS: usize = 1024;
pub const MAX_STEPS: usize = 1 << 18;
pub const MAX_CHUNKS: u64 = 1 << 20;
pub const MAX_XML_BYTES: usize = 16 << 20;
/// Deepest element nesting (algo > gpu > tb > step is 4).
pub const MAX_NESTING: usize = 16;

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
    fn reduces(self) -> bool {
        matches!(self, Kind::RecvReduceSend | Kind::RecvReduceCopy | Kind::RecvReduceCopySend)
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
    pub gpus: usize,
    pub chunks: u64,
    pub in_place: bool,
    pub protocol: String,
    pub channels: usize,
    pub steps: usize,
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
fn read(text: &str) -> Result<(MscclInfo, Vec<Vec<Tb>>), ScheduleError> {
    if text.len() > MAX_XML_BYTES {
        return Err(err(0, format!("more than {MAX_XML_BYTES} bytes")));
    }
    // roxmltree recurses per level: a file nested thousands deep would overflow the stack.
    let (mut depth, mut deepest) = (0usize, 0usize);
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match (b, bytes.get(i + 1)) {
            (b'<', Some(b'/')) => depth = depth.saturating_sub(1),
            (b'<', Some(b'?' | b'!')) => {}
            (b'<', _) => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (b'/', Some(b'>')) => depth = depth.saturating_sub(1),
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
    let collective = match coll.to_ascii_lowercase().as_str() {
        "allreduce" => Collective::AllReduce,
        "allgather" => Collective::AllGather,
        "reducescatter" => Collective::ReduceScatter,
        "alltoall" => Collective::AllToAll,
        "broadcast" => Collective::Broadcast,
        "reduce" => Collective::Reduce,
        _ => {
            return Err(err(
                1,
                format!("coll=\"{coll}\": allreduce, allgather, reducescatter, alltoall, broadcast or reduce"),
            ))
        }
    };
    let in_place = algo.attribute("inplace").is_some_and(|v| v.trim() == "1");
    let mut per_gpu: Vec<Option<Vec<Tb>>> = vec![None; gpus];
    let mut steps_total = 0usize;
    let mut channels = 0u32;
    for g in algo.children().filter(|c| c.has_tag_name("gpu")) {
        let line = line_of(g);
        let id: usize = number(g, "id")?;
        if id >= gpus || per_gpu[id].is_some() {
            return Err(err(line, format!("gpu id {id}: out of 0..{gpus} or given twice")));
        }
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
                let buf = |name: &str| -> Result<char, ScheduleError> {
                    let b = attr(st, name)?;
                    match b {
                        "i" | "o" | "s" => Ok(b.chars().next().unwrap_or('i')),
                        _ => Err(err(sline(), format!("{name}=\"{b}\": i, o or s"))),
                    }
                };
                let cnt: u64 = number(st, "cnt")?;
                let (src_off, dst_off): (u64, u64) = (number(st, "srcoff")?, number(st, "dstoff")?);
                let depid: i64 = number(st, "depid")?;
                let deps: i64 = number(st, "deps")?;
                let dep = if depid >= 0 && deps >= 0 { Some((depid as usize, deps as usize)) } else { None };
                if cnt == 0 || cnt > chunks {
                    return Err(err(sline(), format!("cnt=\"{cnt}\": 1 to nchunksperloop ({chunks})")));
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
                });
            }
            tbs.push(Tb { send, recv, chan, steps });
        }
        per_gpu[id] = Some(tbs);
    }
    let per_gpu: Vec<Vec<Tb>> = per_gpu
        .into_iter()
        .enumerate()
        .map(|(g, t)| t.ok_or_else(|| err(1, format!("no <gpu id=\"{g}\">"))))
        .collect::<Result<_, _>>()?;
    let info = MscclInfo {
        name: algo.attribute("name").unwrap_or("msccl").to_string(),
        collective,
        gpus,
        chunks,
        in_place,
        protocol: algo.attribute("proto").unwrap_or("Simple").to_string(),
        channels: channels as usize,
        steps: steps_total,
    };
    Ok((info, per_gpu))
}

/// A step by (gpu, tb, step).
type At = (usize, usize, usize);

/// The MSCCL algorithm in `text` as a railyard schedule of `count` elements (a multiple of
/// the algorithm's chunks), with what the XML declares.
pub fn import(text: &str, count: u64, elem_bytes: u64) -> Result<(CompactSchedule, MscclInfo), ScheduleError> {
    let program = Program::parse(text)?;
    Ok((program.schedule(count, elem_bytes)?, program.info))
}

/// An MSCCL program read once: what it declares, its steps, which send meets which
/// receive and the round each step is done in — all independent of the size, so one
/// program makes schedules of any size (the checker's small one, the costed one).
pub struct Program<'a> {
    text: &'a str,
    pub info: MscclInfo,
    gpus: Vec<Vec<Tb>>,
    meets: HashMap<At, At>,
    done: HashMap<At, usize>,
    /// Every step, GPU by GPU, block by block, in order.
    all: Vec<At>,
}

impl<'a> Program<'a> {
    pub fn parse(text: &'a str) -> Result<Self, ScheduleError> {
        let (info, gpus) = read(text)?;
        if info.in_place && info.collective != Collective::AllReduce {
            return Err(err(1, "in-place algorithms other than all-reduce are not read yet (their buffers alias)"));
        }
        let (meets, done, all) = rounds(text, &gpus)?;
        Ok(Program { text, info, gpus, meets, done, all })
    }

    /// The program on `count` elements (a multiple of its chunks).
    pub fn schedule(&self, count: u64, elem_bytes: u64) -> Result<CompactSchedule, ScheduleError> {
        if count == 0 || !count.is_multiple_of(self.info.chunks) {
            let chunks = self.info.chunks;
            return Err(err(0, format!("{count} elements do not split into the algorithm's {chunks} chunks")));
        }
        build(self, count, elem_bytes)
    }
}

/// Which send meets which receive, the round each step is done in, and every step.
type Rounds = (HashMap<At, At>, HashMap<At, usize>, Vec<At>);

/// Sends matched to receives, and the round each step is done in.
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
    let done = finish_all(text, &all, gpus, &fed_by)?;
    Ok((meets, done, all))
}

/// The schedule of a read program on `count` elements.
fn build(program: &Program, count: u64, elem_bytes: u64) -> Result<CompactSchedule, ScheduleError> {
    let Program { text, info, gpus, meets, done, all } = program;
    let spec = CollectiveSpec::new(info.collective, info.gpus, count);
    let chunk = count / info.chunks;
    // Region of a chunk range in a buffer; `i` and `o` are one buffer in place.
    let region = |(b, off): (char, u64), cnt: u64, pos: usize| -> Result<Region, ScheduleError> {
        let buffer = match (b, info.in_place) {
            ('s', _) => Buffer::Scratch,
            (_, true) | ('o', false) => Buffer::Output,
            _ => Buffer::Input,
        };
        if off.checked_add(cnt).is_none_or(|end| end > info.chunks) {
            return Err(err(
                line_at(text, pos),
                format!("chunks {off}..{} beyond the {} chunks", off + cnt, info.chunks),
            ));
        }
        Ok(Region::new(buffer, off * chunk..(off + cnt) * chunk))
    };
    let rounds = done.values().copied().max().unwrap_or(0);
    let mut steps: Vec<Step> = (0..rounds).map(|_| Step::default()).collect();
    let mut builder = ScheduleBuilder::new(spec.clone(), info.name.clone(), elem_bytes);
    for (g, tbs) in gpus.iter().enumerate() {
        // s_chunks: the scratch each GPU declares.
        let scratch: u64 = tbs
            .iter()
            .flat_map(|tb| tb.steps.iter())
            .flat_map(|st| [st.src, st.dst].into_iter().map(move |b| (b, st.cnt)))
            .filter(|((b, _), _)| *b == 's')
            .map(|((_, off), cnt)| (off + cnt) * chunk)
            .max()
            .unwrap_or(0);
        if scratch > 0 {
            builder.scratch(g, scratch);
        }
    }
    if info.in_place {
        for r in 0..info.gpus {
            let all = 0..count;
            builder.prologue(LocalOp {
                rank: r,
                read: Region::new(Buffer::Input, all.clone()),
                write: Region::new(Buffer::Output, all),
                op: Op::Copy,
            });
        }
    }
    for &(g, t, s) in all {
        let st = &gpus[g][t].steps[s];
        let round = done[&(g, t, s)];
        match st.kind {
            Kind::Copy | Kind::Reduce => {
                let op = if st.kind == Kind::Copy { Op::Copy } else { Op::Reduce };
                let local = LocalOp {
                    rank: g,
                    read: region(st.src, st.cnt, st.pos)?,
                    write: region(st.dst, st.cnt, st.pos)?,
                    op,
                };
                match round.checked_sub(1) {
                    Some(k) => steps[k].local.push(local),
                    None => {
                        builder.prologue(local);
                    }
                }
            }
            Kind::Nop => {}
            _ => {}
        }
        if let Some(&(rg, rt, rs)) = meets.get(&(g, t, s)) {
            let rst = &gpus[rg][rt].steps[rs];
            // What the sender reads: its source, or where its own receive landed.
            let read = match st.kind {
                Kind::Send | Kind::RecvReduceSend => region(st.src, st.cnt, st.pos)?,
                _ => region(st.dst, st.cnt, st.pos)?,
            };
            // Where the receiver puts it: reductions land on its own chunk.
            let (write, op) = if rst.kind.reduces() {
                if rst.kind != Kind::RecvReduceSend && (rst.src != rst.dst) {
                    return Err(err(
                        line_at(text, rst.pos),
                        "a receive-reduce whose source and destination chunks differ is not read yet",
                    ));
                }
                (region(rst.src, rst.cnt, rst.pos)?, Op::Reduce)
            } else {
                (region(rst.dst, rst.cnt, rst.pos)?, Op::Copy)
            };
            if read.len != write.len {
                return Err(err(
                    line_at(text, rst.pos),
                    format!("receives {} chunks where {} are sent (line {})", rst.cnt, st.cnt, line_at(text, st.pos)),
                ));
            }
            let landing = done[&(rg, rt, rs)];
            steps[landing - 1].transfers.push(Transfer {
                from: g,
                to: rg,
                read,
                write,
                op,
                shard: None,
                channel: gpus[g][t].chan,
            });
        }
    }
    builder.phase("msccl", steps.into_iter().filter(|s| !s.transfers.is_empty() || !s.local.is_empty()).collect());
    Ok(builder.build_compact())
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

/// The round (1-based) at which every step is done: a receive when its transfer lands (the
/// round after both its own waits and its sender's), a send the round after its data was
/// ready (it is posted to the connection's buffer), a local step once its waits are done.
/// Evaluated with an explicit stack (a long chain of steps must not exhaust the call
/// stack); a cycle of waits is a program that would deadlock.
fn finish_all(
    text: &str,
    steps: &[At],
    gpus: &[Vec<Tb>],
    fed_by: &HashMap<At, At>,
) -> Result<HashMap<At, usize>, ScheduleError> {
    let mut done: HashMap<At, usize> = HashMap::with_capacity(steps.len());
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
                k if k.receives() => ready.max(sent) + 1,
                Kind::Send => ready + 1,
                // A local step runs once what it waits for is done: before any round (0,
                // the prologue) when nothing is.
                _ => ready,
            };
            done.insert(at, end);
            on_stack.remove(&at);
            stack.pop();
        }
    }
    Ok(done)
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
    let coll = match spec.collective {
        Collective::AllReduce => "allreduce",
        Collective::AllGather => "allgather",
        Collective::ReduceScatter => "reducescatter",
        Collective::AllToAll => "alltoall",
        Collective::Broadcast => "broadcast",
        Collective::Reduce => "reduce",
        other => return Err(err(0, format!("{} has no MSCCL collective name", other.as_str()))),
    };
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
        "<algo name=\"{}\" proto=\"Simple\" nchannels=\"{channels}\" nchunksperloop=\"{}\" ngpus=\"{}\" coll=\"{coll}\" inplace=\"0\">\n",
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
    }
}

//! Data races in an MSCCL program: two steps that touch the same chunk of a GPU's
//! buffer, at least one writing it, with nothing ordering them. MSCCL's executor runs
//! thread blocks concurrently and orders steps only by their thread block's sequence,
//! their `depid`/`deps` dependency and the messages between them (a receive completes
//! after the send that feeds it); whatever else happens first is timing. railyard's
//! rounds are one such timing (every step as early as it can be), so a schedule that
//! proves correct may still hold a race the executor would lose: the checker refuses
//! what this finds.
//!
//! Happens-before by vector clocks: a clock per step with an entry per thread block (the
//! number of that block's steps known to be done), the maximum over what the step waits
//! for, plus itself. Steps x and y are ordered when one's entry for the other's block
//! covers it. Accesses are per chunk, as the program names them (in-place buffers
//! placed where they alias, as the reader says).

use std::collections::{HashMap, HashSet};

use crate::ir::Buffer;

/// A step by (gpu, thread block, step).
pub type At = (usize, usize, usize);

/// Clock entries held (steps × thread blocks: 64 MiB of clocks) and chunk accesses
/// tracked, at most: a program past either is refused as too large to check, not
/// certified unchecked.
pub const MAX_CLOCK_ENTRIES: usize = 1 << 24;
pub const MAX_ACCESSES: u64 = 1 << 24;

/// What one step touches and waits for, as the executor runs it.
#[derive(Debug, Clone, Copy)]
pub struct StepAccess {
    /// The chunks it reads from its source buffer (`i`, `o`, `s`, first chunk).
    pub reads: Option<(char, u64)>,
    /// The chunks of its destination it touches, and whether it writes them (a local
    /// reduction also reads them).
    pub dst: Option<((char, u64), bool)>,
    pub cnt: u64,
    /// Its `depid`/`deps` dependency on a step of the same GPU.
    pub dep: Option<(usize, usize)>,
    /// Whether it completes after the send that feeds it (`fed_by`).
    pub receives: bool,
}

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Two steps touch chunk `chunk` of GPU `gpu`'s `buffer`, one (or both) writing it,
    /// and nothing orders them.
    Race { first: At, second: At, gpu: usize, buffer: Buffer, chunk: u64, both_write: bool },
    /// The steps wait on each other in a cycle (at this step).
    Cycle(At),
    /// Too large to check: what, how many, and the limit.
    TooLarge { what: &'static str, value: u64, limit: u64 },
}

/// Look for a race in `gpus` (per GPU, per thread block, its steps; `fed_by`: each
/// receive's send; `place`: where chunk `off` of a GPU's buffer `b` is, so aliased
/// in-place buffers meet).
pub fn check(
    gpus: &[Vec<Vec<StepAccess>>],
    fed_by: &HashMap<At, At>,
    place: &dyn Fn(usize, char, u64) -> (Buffer, u64),
) -> Result<(), Finding> {
    // A global index per thread block.
    let mut block_base = Vec::with_capacity(gpus.len());
    let mut blocks = 0usize;
    for tbs in gpus {
        block_base.push(blocks);
        blocks += tbs.len();
    }
    let block_of = |(g, t, _): At| block_base[g] + t;
    let steps: usize = gpus.iter().flatten().map(Vec::len).sum();
    if steps.saturating_mul(blocks) > MAX_CLOCK_ENTRIES {
        let value = steps.saturating_mul(blocks) as u64;
        return Err(Finding::TooLarge { what: "steps x thread blocks", value, limit: MAX_CLOCK_ENTRIES as u64 });
    }
    let accesses: u64 = gpus.iter().flatten().flatten().map(|st| st.cnt.saturating_mul(2)).fold(0, u64::saturating_add);
    if accesses > MAX_ACCESSES {
        return Err(Finding::TooLarge { what: "chunk accesses", value: accesses, limit: MAX_ACCESSES });
    }
    // What step `at` waits for, as the executor orders it.
    let waits = |at: At| -> Vec<At> {
        let (g, t, s) = at;
        let st = &gpus[g][t][s];
        let mut w = Vec::with_capacity(3);
        if s > 0 {
            w.push((g, t, s - 1));
        }
        if let Some((dt, ds)) = st.dep {
            if dt < gpus[g].len() && ds < gpus[g][dt].len() {
                w.push((g, dt, ds));
            }
        }
        if st.receives {
            if let Some(&from) = fed_by.get(&at) {
                w.push(from);
            }
        }
        w
    };
    // Clocks in a topological order (an explicit stack: chains can be long), and that
    // order: every step after what it waits for.
    let mut clock: HashMap<At, Vec<u32>> = HashMap::with_capacity(steps);
    let mut order: Vec<At> = Vec::with_capacity(steps);
    for (g, tbs) in gpus.iter().enumerate() {
        for (t, tb) in tbs.iter().enumerate() {
            for s in 0..tb.len() {
                if clock.contains_key(&(g, t, s)) {
                    continue;
                }
                let mut stack = vec![(g, t, s)];
                let mut on_stack: HashSet<At> = HashSet::from([(g, t, s)]);
                while let Some(&at) = stack.last() {
                    let w = waits(at);
                    if let Some(&next) = w.iter().find(|x| !clock.contains_key(x)) {
                        if !on_stack.insert(next) {
                            return Err(Finding::Cycle(at));
                        }
                        stack.push(next);
                        continue;
                    }
                    let mut c = vec![0u32; blocks];
                    for x in &w {
                        for (a, b) in c.iter_mut().zip(&clock[x]) {
                            *a = (*a).max(*b);
                        }
                    }
                    c[block_of(at)] = at.2 as u32 + 1;
                    clock.insert(at, c);
                    order.push(at);
                    on_stack.remove(&at);
                    stack.pop();
                }
            }
        }
    }
    let before = |x: At, y: At| clock[&y][block_of(x)] > x.2 as u32;
    // In that order, per chunk the last step that wrote it and the readers since: a read
    // must come after the last write, a write after it and after those readers. (Earlier
    // accesses are ordered before these, or their race was found already.)
    #[derive(Default)]
    struct Seen {
        writer: Option<At>,
        readers: Vec<At>,
    }
    let mut seen: HashMap<(usize, Buffer, u64), Seen> = HashMap::new();
    for &at in &order {
        let (g, t, s) = at;
        let st = &gpus[g][t][s];
        let mut visit = |(b, off): (char, u64), write: bool| -> Result<(), Finding> {
            for c in off..off.saturating_add(st.cnt) {
                let (buffer, chunk) = place(g, b, c);
                let state = seen.entry((g, buffer, chunk)).or_default();
                let unordered = |x: At| x != at && !before(x, at);
                let clash = state.writer.filter(|&w| unordered(w)).map(|w| (w, true)).or_else(|| {
                    if write {
                        state.readers.iter().copied().find(|&r| unordered(r)).map(|r| (r, false))
                    } else {
                        None
                    }
                });
                if let Some((other, other_writes)) = clash {
                    return Err(Finding::Race {
                        first: other,
                        second: at,
                        gpu: g,
                        buffer,
                        chunk,
                        both_write: write && other_writes,
                    });
                }
                if write {
                    state.writer = Some(at);
                    state.readers.clear();
                } else {
                    state.readers.push(at);
                }
            }
            Ok(())
        };
        if let Some(src) = st.reads {
            visit(src, false)?;
        }
        if let Some((dst, write)) = st.dst {
            visit(dst, write)?;
        }
    }
    Ok(())
}

//! The communicator: executes a schedule for this rank. Per round it sends what the
//! schedule says this rank sends (from a snapshot of the round's sources, on a helper
//! thread, so two ranks sending to each other never block on full socket buffers) and
//! receives, in schedule order, what it receives, copying or reducing into place. Every
//! frame carries the call's signature, so ranks running different calls fail loudly;
//! every read has the configured timeout; the first error breaks the communicator.

use std::collections::HashMap;
use std::io::{BufWriter, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use railyard_schedule::{
    generate, Algorithm, Buffer, Collective, CollectiveSpec, Dtype, GenOptions, Op, Region, Schedule,
};

use crate::bootstrap::{rendezvous, UniqueId};
use crate::element::Element;
use crate::error::CommError;
use crate::frame::{read_frame_apply, read_frame_into, write_frame, Header, HEADER_BYTES, MAX_FRAME_BYTES};
use crate::reduce::{divide, reduce_into, RedOp};

/// Everything configurable, read once (from the environment by `Config::from_env`).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Every wait for a peer gives up after this.
    pub timeout: Duration,
    /// Force an algorithm (RAILYARD_ALGO), else the default per collective.
    pub algorithm: Option<Algorithm>,
    /// Parallel rings (RAILYARD_NCHANNELS).
    pub channels: usize,
    /// Pipelined chunks for chain and trees (RAILYARD_PIPELINE_CHUNKS).
    pub pipeline_chunks: usize,
    /// RAILYARD_DEBUG=INFO: log the links and every call's algorithm to standard error.
    pub debug: bool,
    /// Use shared memory between ranks on one host (RAILYARD_SHM=0 turns it off).
    pub shm: bool,
    /// Bytes of each shared-memory ring, a power of two (RAILYARD_SHM_BYTES).
    pub shm_ring_bytes: usize,
    /// A topology file the tuner costs algorithms on (RAILYARD_TOPO), else the job's hosts.
    pub topology_file: Option<String>,
    /// Bytes per pipelined chunk of chain and tree algorithms (RAILYARD_CHUNK_BYTES);
    /// overrides the pipeline chunk count when set.
    pub chunk_bytes: Option<u64>,
    /// Pin each rank to a core when its host's ranks fit the cores (RAILYARD_PIN=1).
    pub pin: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            timeout: Duration::from_secs(30),
            algorithm: None,
            channels: 1,
            pipeline_chunks: 1,
            debug: false,
            shm: true,
            shm_ring_bytes: 4 << 20,
            topology_file: None,
            chunk_bytes: None,
            pin: false,
        }
    }
}

impl Config {
    /// RAILYARD_TIMEOUT_SECS, RAILYARD_ALGO, RAILYARD_NCHANNELS, RAILYARD_PIPELINE_CHUNKS.
    pub fn from_env() -> Result<Config, CommError> {
        Config::from_vars(&std::env::vars().collect())
    }

    /// The same from a set of variables (so it can be tested without touching the process's).
    pub fn from_vars(vars: &std::collections::HashMap<String, String>) -> Result<Config, CommError> {
        let mut c = Config::default();
        let var = |k: &str| vars.get(k).cloned().filter(|v| !v.is_empty());
        let bad = |k: &str, v: &str| CommError::BadArgs { message: format!("{k}={v} is not valid") };
        if let Some(v) = var("RAILYARD_TIMEOUT_SECS") {
            let secs: f64 = v.parse().map_err(|_| bad("RAILYARD_TIMEOUT_SECS", &v))?;
            if !(secs > 0.0 && secs < 1e6) {
                return Err(bad("RAILYARD_TIMEOUT_SECS", &v));
            }
            c.timeout = Duration::from_secs_f64(secs);
        }
        if let Some(v) = var("RAILYARD_ALGO") {
            c.algorithm =
                Some(v.parse().map_err(|e: String| CommError::BadArgs { message: format!("RAILYARD_ALGO: {e}") })?);
        }
        if let Some(v) = var("RAILYARD_NCHANNELS") {
            c.channels =
                v.parse().ok().filter(|&n| (1..=64).contains(&n)).ok_or_else(|| bad("RAILYARD_NCHANNELS", &v))?;
        }
        if let Some(v) = var("RAILYARD_PIPELINE_CHUNKS") {
            c.pipeline_chunks = v
                .parse()
                .ok()
                .filter(|&n| (1..=1024).contains(&n))
                .ok_or_else(|| bad("RAILYARD_PIPELINE_CHUNKS", &v))?;
        }
        if let Some(v) = var("RAILYARD_CHUNK_BYTES") {
            c.chunk_bytes = Some(
                v.parse()
                    .ok()
                    .filter(|&n: &u64| n >= 64)
                    .ok_or_else(|| bad("RAILYARD_CHUNK_BYTES (at least 64)", &v))?,
            );
        }
        if let Some(v) = var("RAILYARD_SHM") {
            c.shm = !(v == "0" || v.eq_ignore_ascii_case("false") || v.eq_ignore_ascii_case("off"));
        }
        if let Some(v) = var("RAILYARD_SHM_BYTES") {
            c.shm_ring_bytes = v
                .parse()
                .ok()
                .filter(|&n: &usize| {
                    n.is_power_of_two() && (crate::shm::MIN_RING_BYTES..=crate::shm::MAX_RING_BYTES).contains(&n)
                })
                .ok_or_else(|| bad("RAILYARD_SHM_BYTES (a power of two, 4096..=1073741824)", &v))?;
        }
        if let Some(v) = var("RAILYARD_PIN") {
            c.pin = match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "on" => true,
                "0" | "false" | "off" => false,
                _ => return Err(bad("RAILYARD_PIN (1 or 0)", &v)),
            };
        }
        c.topology_file = var("RAILYARD_TOPO");
        c.debug =
            var("RAILYARD_DEBUG").is_some_and(|v| v.eq_ignore_ascii_case("INFO") || v.eq_ignore_ascii_case("TRACE"));
        Ok(c)
    }
}

/// The algorithm a call uses when none is forced: a ring where a ring exists, else the
/// first algorithm implementing the collective.
pub fn default_algorithm(c: Collective) -> Algorithm {
    match c {
        Collective::AllReduce | Collective::ReduceScatter | Collective::AllGather => Algorithm::Ring,
        Collective::Broadcast | Collective::Reduce => Algorithm::Chain,
        Collective::Barrier => Algorithm::Bruck,
        Collective::AllToAll | Collective::AllToAllv => Algorithm::Pairwise,
        _ => Algorithm::Direct,
    }
}

type Reader = Box<dyn Read + Send>;
type Writer = Box<dyn Write + Send>;

pub struct Communicator {
    rank: usize,
    size: usize,
    readers: Vec<Option<Reader>>,
    writers: Vec<Option<Writer>>,
    /// Per peer: "shm" or "tcp".
    transports: Vec<&'static str>,
    /// Ranks of each host.
    groups: Vec<Vec<usize>>,
    /// Chooses algorithms by the model when none is forced (built on first use).
    tuner: Option<crate::tuner::Tuner>,
    config: Config,
    calls: u64,
    /// Calls that exchanged data with each peer: the call number on the wire, so ranks
    /// that skip a point-to-point call between two others stay in step.
    calls_with: Vec<u64>,
    broken: Option<CommError>,
    /// Schedules already generated, so a training loop's repeated calls skip generation.
    schedules: HashMap<ScheduleKey, Arc<Schedule>>,
    /// The reduction slice buffer, allocated once (zeroing it per call cost more than an
    /// 8-byte all-reduce).
    reduce_buf: Vec<u8>,
    /// The schedule's scratch buffer, kept between calls.
    scratch: Vec<u8>,
}

type ScheduleKey = (Algorithm, CollectiveSpec, GenOptions, u64);

/// At most this many cached schedules; the cache is emptied when full.
const SCHEDULE_CACHE_ENTRIES: usize = 64;

/// A round whose sends to each TCP peer add up to at most this many bytes writes them
/// before reading: well under the smallest default TCP socket buffers.
const INLINE_TCP_SEND_BYTES: usize = 32 << 10;

/// Received data is reduced into place in slices of this many bytes.
const REDUCE_SLICE_BYTES: usize = 256 << 10;

/// This host: its name and boot id, hashed (ranks with equal ids share /dev/shm).
fn host_id() -> u64 {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    // A network namespace is a host of its own (emulated clusters put "hosts" in namespaces).
    let netns = std::fs::read_link("/proc/self/ns/net").map(|p| p.display().to_string()).unwrap_or_default();
    let text = format!("{}/{}/{netns}", hostname(), boot.trim());
    fnv(&text.bytes().map(u64::from).collect::<Vec<_>>())
}

/// Ranks grouped by host, hosts in order of their lowest rank: the hierarchical
/// algorithms' servers. Every rank sees the same grouping.
fn group_by_host(hosts: &[u64]) -> Vec<Vec<usize>> {
    let mut by_host: Vec<(u64, Vec<usize>)> = Vec::new();
    for (r, &h) in hosts.iter().enumerate() {
        match by_host.iter_mut().find(|g| g.0 == h) {
            Some(g) => g.1.push(r),
            None => by_host.push((h, vec![r])),
        }
    }
    by_host.into_iter().map(|g| g.1).collect()
}

/// The two ends of a shared-memory pair.
type Rings = (crate::shm::ShmReader, crate::shm::ShmWriter);

/// Agree with `peer` over their TCP link whether to talk through shared memory, and set
/// the rings up: the lower rank creates both files, the higher opens them, then the lower
/// removes the names (the mappings stay). Any failure falls back to TCP on both sides.
fn upgrade_to_shm(
    s: &mut TcpStream,
    me: usize,
    peer: usize,
    tag: u64,
    config: &Config,
) -> Result<(u64, Option<Rings>), CommError> {
    let io = |e| CommError::io(peer, "transport setup", e);
    let mut hello = [0u8; 9];
    hello[..8].copy_from_slice(&host_id().to_le_bytes());
    hello[8] = u8::from(config.shm);
    s.write_all(&hello).map_err(io)?;
    let mut theirs = [0u8; 9];
    s.read_exact(&mut theirs).map_err(io)?;
    let peer_host = u64::from_le_bytes(theirs[..8].try_into().unwrap_or_default());
    if theirs[..8] != hello[..8] || theirs[8] == 0 || !config.shm {
        return Ok((peer_host, None));
    }
    let dir = std::path::Path::new("/dev/shm");
    let (lo, hi) = (me.min(peer), me.max(peer));
    let (lo_hi, hi_lo) = crate::shm::pair_paths(dir, tag, lo, hi);
    let (to_peer, from_peer) = if me == lo { (&lo_hi, &hi_lo) } else { (&hi_lo, &lo_hi) };
    let cap = config.shm_ring_bytes;
    let open = || -> std::io::Result<(crate::shm::ShmReader, crate::shm::ShmWriter)> {
        Ok((crate::shm::reader(from_peer, cap, config.timeout)?, crate::shm::writer(to_peer, cap, config.timeout)?))
    };
    let mut flag = [0u8; 1];
    if me == lo {
        let created = crate::shm::create(&lo_hi, cap).and_then(|_| crate::shm::create(&hi_lo, cap)).is_ok();
        let mine = if created { open().ok() } else { None };
        s.write_all(&[u8::from(mine.is_some())]).map_err(io)?;
        s.read_exact(&mut flag).map_err(io)?;
        let _ = std::fs::remove_file(&lo_hi);
        let _ = std::fs::remove_file(&hi_lo);
        Ok((peer_host, if flag[0] == 1 { mine } else { None }))
    } else {
        s.read_exact(&mut flag).map_err(io)?;
        let mine = if flag[0] == 1 { open().ok() } else { None };
        s.write_all(&[u8::from(mine.is_some())]).map_err(io)?;
        Ok((peer_host, mine))
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

fn fnv(parts: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn region_bytes(r: &Region, elem: usize) -> std::ops::Range<usize> {
    r.offset as usize * elem..(r.offset + r.len) as usize * elem
}

impl Communicator {
    /// Join the rendezvous of `id` as `rank` of `size`.
    pub fn init(id: &UniqueId, rank: usize, size: usize, config: Config) -> Result<Communicator, CommError> {
        let links = rendezvous(id, rank, size, config.timeout)?;
        let mut readers: Vec<Option<Reader>> = Vec::with_capacity(size);
        let mut writers: Vec<Option<Writer>> = Vec::with_capacity(size);
        let mut transports = Vec::with_capacity(size);
        let tag = fnv(&[id.secret as u64, (id.secret >> 64) as u64, id.addr.port() as u64]);
        let mut hosts = vec![host_id(); size];
        for (peer, link) in links.into_iter().enumerate() {
            let Some(mut s) = link else {
                readers.push(None);
                writers.push(None);
                transports.push("self");
                continue;
            };
            s.set_read_timeout(Some(config.timeout)).map_err(|e| CommError::io(peer, "configure", e))?;
            s.set_write_timeout(Some(config.timeout)).map_err(|e| CommError::io(peer, "configure", e))?;
            let (peer_host, rings) = upgrade_to_shm(&mut s, rank, peer, tag, &config)?;
            hosts[peer] = peer_host;
            match rings {
                Some((r, w)) => {
                    readers.push(Some(Box::new(r)));
                    writers.push(Some(Box::new(w)));
                    transports.push("shm");
                }
                None => {
                    writers.push(Some(Box::new(s.try_clone().map_err(|e| CommError::io(peer, "configure", e))?)));
                    readers.push(Some(Box::new(s)));
                    transports.push("tcp");
                }
            }
        }
        let groups = group_by_host(&hosts);
        let pinned = match (config.pin, groups.iter().find(|g| g.contains(&rank))) {
            (true, Some(g)) => g.iter().position(|&r| r == rank).and_then(|local| crate::affinity::pin(local, g.len())),
            _ => None,
        };
        if config.debug {
            let shm = transports.iter().filter(|&&t| t == "shm").count();
            eprintln!(
                "{}:{} [{rank}] RAILYARD INFO hosts (ranks per host): {groups:?}; pinned to core {}",
                hostname(),
                std::process::id(),
                pinned.map_or("none".to_string(), |c| c.to_string())
            );
            eprintln!(
                "{}:{} [{rank}] RAILYARD INFO rank {rank} of {size}: {shm} shared-memory and {} tcp links (TCP_NODELAY), timeout {:?}, channels {}",
                hostname(),
                std::process::id(),
                size - 1 - shm,
                config.timeout,
                config.channels
            );
        }
        Ok(Communicator {
            rank,
            size,
            readers,
            writers,
            transports,
            groups,
            tuner: None,
            config,
            calls: 0,
            calls_with: vec![0; size],
            broken: None,
            schedules: HashMap::new(),
            reduce_buf: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// Per peer, "shm", "tcp" or "self".
    pub fn transports(&self) -> &[&'static str] {
        &self.transports
    }

    /// The ranks of each host (hosts by their lowest rank).
    pub fn groups(&self) -> &[Vec<usize>] {
        &self.groups
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The first error, if any call failed.
    pub fn error(&self) -> Option<&CommError> {
        self.broken.as_ref()
    }

    /// Run `spec` with `algorithm` on byte buffers of `dtype` elements.
    pub fn run(
        &mut self,
        spec: &CollectiveSpec,
        algorithm: Option<Algorithm>,
        input: &[u8],
        output: &mut [u8],
        dtype: Dtype,
        op: RedOp,
    ) -> Result<(), CommError> {
        if let Some(e) = &self.broken {
            return Err(CommError::Broken(Box::new(e.clone())));
        }
        let result = self.run_inner(spec, algorithm, input, output, dtype, op);
        if let Err(e) = &result {
            let e = match e {
                CommError::Timeout { peer, .. } => {
                    CommError::Timeout { peer: *peer, secs: self.config.timeout.as_secs() }
                }
                other => other.clone(),
            };
            self.broken = Some(e.clone());
            return Err(e);
        }
        result
    }

    fn run_inner(
        &mut self,
        spec: &CollectiveSpec,
        algorithm: Option<Algorithm>,
        input: &[u8],
        output: &mut [u8],
        dtype: Dtype,
        op: RedOp,
    ) -> Result<(), CommError> {
        if spec.ranks != self.size {
            return Err(CommError::BadArgs {
                message: format!("the call names {} ranks, the communicator has {}", spec.ranks, self.size),
            });
        }
        let elem = dtype.size_bytes() as usize;
        let (want_in, want_out) =
            (spec.input_len(self.rank) as usize * elem, spec.output_len(self.rank) as usize * elem);
        if input.len() != want_in || output.len() != want_out {
            return Err(CommError::BadArgs {
                message: format!(
                    "{} needs {want_in} input and {want_out} output bytes on rank {}, got {} and {}",
                    spec.collective.as_str(),
                    self.rank,
                    input.len(),
                    output.len()
                ),
            });
        }
        // Forced (argument, then RAILYARD_ALGO), else chosen by the model, else the default.
        let forced =
            algorithm.or(self.config.algorithm).filter(|a| a.supports(spec.collective) && *a != Algorithm::InNetwork);
        // The hierarchical algorithms' servers are the hosts (they need equal hosts; with
        // unequal ones every rank is one server).
        let equal = self.groups.iter().all(|g| g.len() == self.groups[0].len());
        let groups = if equal { self.groups.clone() } else { Vec::new() };
        let mut pipeline_chunks = self.config.pipeline_chunks;
        let algorithm = match forced {
            Some(a) => a,
            None => {
                if self.tuner.is_none() {
                    self.tuner = Some(crate::tuner::Tuner::new(&self.groups, self.config.topology_file.as_deref())?);
                }
                let tuned =
                    self.tuner.as_mut().and_then(|t| t.choose(spec, elem as u64, &groups, self.config.channels));
                match tuned {
                    Some(c) => {
                        pipeline_chunks = c.pipeline_chunks;
                        c.algorithm
                    }
                    None => default_algorithm(spec.collective),
                }
            }
        };
        if let (Some(chunk), true) = (self.config.chunk_bytes, algorithm.pipelined()) {
            pipeline_chunks = (spec.count * elem as u64).div_ceil(chunk).clamp(1, 1024) as usize;
        }
        let options = GenOptions { channels: self.config.channels, pipeline_chunks, groups, order: None };
        let key = (algorithm, spec.clone(), options, elem as u64);
        let schedule = match self.schedules.get(&key) {
            Some(s) => Arc::clone(s),
            None => {
                let s = Arc::new(
                    generate(algorithm, spec, &key.2, elem as u64)
                        .map_err(|e| CommError::BadArgs { message: e.to_string() })?,
                );
                if self.schedules.len() >= SCHEDULE_CACHE_ENTRIES {
                    self.schedules.clear();
                }
                self.schedules.insert(key, Arc::clone(&s));
                s
            }
        };
        self.calls += 1;
        if self.config.debug {
            eprintln!(
                "{}:{} [{}] RAILYARD INFO call {}: {} of {} x {} ({}) with {algorithm}, {} rounds",
                hostname(),
                std::process::id(),
                self.rank,
                self.calls,
                spec.collective.as_str(),
                spec.count,
                dtype,
                op.as_str(),
                schedule.rounds.len()
            );
        }
        let signature = fnv(&[
            spec.collective as u64,
            spec.count,
            spec.root as u64,
            spec.peer as u64,
            dtype as u64,
            op.code() as u64,
            Algorithm::ALL.iter().position(|a| *a == algorithm).unwrap_or(99) as u64,
        ]);
        self.execute(&schedule, signature, input, output, dtype, op)?;
        if op == RedOp::Avg && spec.collective.reduces() {
            divide(dtype, output, self.size);
        }
        Ok(())
    }

    fn execute(
        &mut self,
        s: &Schedule,
        signature: u64,
        input: &[u8],
        output: &mut [u8],
        dtype: Dtype,
        op: RedOp,
    ) -> Result<(), CommError> {
        let me = self.rank;
        let elem = s.elem_bytes as usize;
        // Reused across calls: a fresh multi-MiB buffer per call costs page faults on every call.
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.resize(s.scratch_len[me] as usize * elem, 0);
        // This call's number with every peer it exchanges data with.
        let mut talks = vec![false; self.size];
        for t in s.rounds.iter().flat_map(|r| &r.transfers) {
            if t.from == me {
                talks[t.to] = true;
            }
            if t.to == me {
                talks[t.from] = true;
            }
        }
        for (peer, &t) in talks.iter().enumerate() {
            if t {
                self.calls_with[peer] += 1;
            }
        }
        let calls_with = self.calls_with.clone();
        // A local copy or reduction between this rank's buffers, without a temporary
        // unless the two regions overlap in one buffer.
        let local = |read: &Region, write: &Region, op_kind: Op, output: &mut [u8], scratch: &mut [u8]| {
            let (r, w) = (region_bytes(read, elem), region_bytes(write, elem));
            let apply = |dst: &mut [u8], src: &[u8]| match op_kind {
                Op::Copy => dst.copy_from_slice(src),
                Op::Reduce => reduce_into(dtype, op, dst, src),
            };
            let within = |buf: &mut [u8]| {
                if r.end <= w.start {
                    let (a, b) = buf.split_at_mut(w.start);
                    apply(&mut b[..w.len()], &a[r.clone()]);
                } else if w.end <= r.start {
                    let (a, b) = buf.split_at_mut(r.start);
                    apply(&mut a[w.clone()], &b[..r.len()]);
                } else {
                    let src = buf[r.clone()].to_vec();
                    apply(&mut buf[w.clone()], &src);
                }
            };
            match (read.buffer, write.buffer) {
                (_, Buffer::Input) => {
                    return Err(CommError::BadArgs { message: "a schedule wrote to an input buffer".into() })
                }
                (Buffer::Input, Buffer::Output) => apply(&mut output[w.clone()], &input[r.clone()]),
                (Buffer::Input, Buffer::Scratch) => apply(&mut scratch[w.clone()], &input[r.clone()]),
                (Buffer::Output, Buffer::Scratch) => apply(&mut scratch[w.clone()], &output[r.clone()]),
                (Buffer::Scratch, Buffer::Output) => apply(&mut output[w.clone()], &scratch[r.clone()]),
                (Buffer::Output, Buffer::Output) => within(output),
                (Buffer::Scratch, Buffer::Scratch) => within(scratch),
            }
            Ok(())
        };
        for l in s.prologue.iter().filter(|l| l.rank == me) {
            local(&l.read, &l.write, l.op, output, &mut scratch)?;
        }
        // Received bytes are reduced in slices of this size, while they are in cache; a
        // multiple of every element size.
        let link_bytes = self.link_buffer_bytes();
        if self.reduce_buf.len() != REDUCE_SLICE_BYTES {
            self.reduce_buf = vec![0u8; REDUCE_SLICE_BYTES];
        }
        let buf = &mut self.reduce_buf;
        // Every access during the rounds goes through these raw bases, so the send thread
        // and the receiving thread never hold overlapping references.
        let bases =
            Bases { input: input.as_ptr() as *mut u8, output: output.as_mut_ptr(), scratch: scratch.as_mut_ptr() };
        for round in &s.rounds {
            if !round.in_network.is_empty() {
                return Err(CommError::BadArgs {
                    message: "in-network steps need a reducing switch; the runtime cannot run them".into(),
                });
            }
            let receives: Vec<&railyard_schedule::Transfer> = round.transfers.iter().filter(|t| t.to == me).collect();
            // What this rank sends, as raw byte ranges of its buffers. The schedule promises
            // (and the symbolic checker proves for every generator) that no byte a rank
            // sends in a round is written by that round's receives; it is checked here
            // anyway, and the sources are copied first if it does not hold.
            let mut owned: Vec<Vec<u8>> = Vec::new();
            let mut sends: Vec<(usize, Raw)> = Vec::new();
            for t in round.transfers.iter().filter(|t| t.from == me) {
                let r = region_bytes(&t.read, elem);
                let clash = receives
                    .iter()
                    .any(|x| x.write.buffer == t.read.buffer && overlaps(&region_bytes(&x.write, elem), &r));
                let base = bases.get(t.read.buffer);
                if clash {
                    // SAFETY: `r` lies inside the buffer (the schedule's regions are bounded by its lengths).
                    owned.push(unsafe { std::slice::from_raw_parts(base.add(r.start), r.len()) }.to_vec());
                    let v = owned.last().map_or((std::ptr::null(), 0), |v| (v.as_ptr(), v.len()));
                    sends.push((t.to, Raw(v.0, v.1)));
                } else {
                    // SAFETY: as above.
                    sends.push((t.to, Raw(unsafe { base.add(r.start) }, r.len())));
                }
            }
            let writers = &mut self.writers;
            let calls_with = &calls_with;
            // Sends that fit in the links' buffers go inline; larger ones from a helper
            // thread, so two ranks sending to each other never block on full buffers.
            let inline = sends_fit_links(&sends, &link_bytes);
            let mut send_all = move || -> Result<(), CommError> {
                // Pieces are numbered from 0 in each round over this rank's sends in schedule order.
                let mut p = 0u64;
                for (to, data) in &sends {
                    // SAFETY: the range is inside a live buffer (or an owned copy) that no
                    // receive of this round writes (checked above).
                    let data = unsafe { data.slice() };
                    let stream = writers[*to]
                        .as_mut()
                        .ok_or_else(|| CommError::BadArgs { message: format!("no link to rank {to}") })?;
                    let mut w = BufWriter::with_capacity(1 << 16, stream);
                    for chunk in data.chunks(MAX_FRAME_BYTES) {
                        let h = Header { call: calls_with[*to], signature, piece: p, len: chunk.len() as u64 };
                        write_frame(&mut w, &h, chunk, *to)?;
                        p += 1;
                    }
                    std::io::Write::flush(&mut w).map_err(|e| CommError::io(*to, "send", e))?;
                }
                Ok(())
            };
            let readers = &mut self.readers;
            let mut receive_all = || -> Result<(), CommError> {
                // Receive in schedule order, each piece straight into place.
                for t in &receives {
                    let from = t.from;
                    let stream = readers[from]
                        .as_mut()
                        .ok_or_else(|| CommError::BadArgs { message: format!("no link to rank {from}") })?;
                    if t.write.buffer == Buffer::Input {
                        return Err(CommError::BadArgs { message: "a schedule wrote to an input buffer".into() });
                    }
                    let r = region_bytes(&t.write, elem);
                    // SAFETY: inside the output or scratch buffer; no send of this round reads
                    // it (checked above) and receives of one round write disjoint ranges or
                    // run one after another here.
                    let dst =
                        unsafe { std::slice::from_raw_parts_mut(bases.get(t.write.buffer).add(r.start), r.len()) };
                    for (p, piece) in (first_piece_of(round, t, elem)..).zip(dst.chunks_mut(MAX_FRAME_BYTES)) {
                        let expect = Header { call: calls_with[from], signature, piece: p, len: piece.len() as u64 };
                        match t.op {
                            Op::Copy => read_frame_into(stream, &expect, piece, from)?,
                            Op::Reduce => read_frame_apply(stream, &expect, piece, buf, from, |d, s| {
                                reduce_into(dtype, op, d, s)
                            })?,
                        }
                    }
                }
                Ok(())
            };
            if inline {
                send_all()?;
                receive_all()?;
            } else {
                std::thread::scope(|scope| -> Result<(), CommError> {
                    let sender = scope.spawn(send_all);
                    let received = receive_all();
                    let sent =
                        sender.join().map_err(|_| CommError::BadArgs { message: "the send thread panicked".into() })?;
                    received.and(sent)
                })?;
            }
            drop(owned);
        }
        for l in s.epilogue.iter().filter(|l| l.rank == me) {
            local(&l.read, &l.write, l.op, output, &mut scratch)?;
        }
        self.scratch = scratch;
        Ok(())
    }
}

impl Communicator {
    /// Per peer, the bytes its link buffers without a reader: the shared-memory ring, or
    /// a safe lower bound on TCP socket buffers.
    fn link_buffer_bytes(&self) -> Vec<usize> {
        self.transports
            .iter()
            .map(|t| if *t == "shm" { self.config.shm_ring_bytes } else { INLINE_TCP_SEND_BYTES })
            .collect()
    }
}

/// Whether a round's sends fit, peer by peer, in the links' buffers (frame headers
/// included). Then writing them all before reading cannot deadlock: a peer in this round
/// has read everything of earlier rounds, so this round's bytes find room.
fn sends_fit_links(sends: &[(usize, Raw)], link_bytes: &[usize]) -> bool {
    let mut per_peer = vec![0usize; link_bytes.len()];
    for (to, data) in sends {
        let frames = data.1.div_ceil(MAX_FRAME_BYTES).max(1);
        per_peer[*to] += data.1 + frames * HEADER_BYTES;
    }
    per_peer.iter().zip(link_bytes).all(|(bytes, limit)| bytes <= limit)
}

/// A byte range of a buffer, handed to the send thread.
struct Raw(*const u8, usize);

// SAFETY: the bytes stay alive for the round (the buffers outlive it) and no one writes
// them during the round (see the disjointness check in `execute`).
unsafe impl Send for Raw {}

impl Raw {
    /// SAFETY: the caller guarantees the range is alive and not written meanwhile.
    unsafe fn slice<'a>(&self) -> &'a [u8] {
        if self.1 == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(self.0, self.1)
        }
    }
}

#[derive(Clone, Copy)]
struct Bases {
    input: *mut u8,
    output: *mut u8,
    scratch: *mut u8,
}

// SAFETY: see `Raw`; the pointers are only dereferenced on the disjoint ranges of a round.
unsafe impl Send for Bases {}
unsafe impl Sync for Bases {}

impl Bases {
    fn get(&self, b: Buffer) -> *mut u8 {
        match b {
            Buffer::Input => self.input,
            Buffer::Output => self.output,
            Buffer::Scratch => self.scratch,
        }
    }
}

fn overlaps(a: &std::ops::Range<usize>, b: &std::ops::Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

/// The piece number the sender of `t` used for its first frame of `t`: senders number
/// pieces from 0 in each round, over all their sends in schedule order.
fn first_piece_of(round: &railyard_schedule::Round, t: &railyard_schedule::Transfer, elem: usize) -> u64 {
    let mut p = 0u64;
    for x in &round.transfers {
        if std::ptr::eq(x, t) {
            return p;
        }
        if x.from == t.from {
            let len = x.read.len as usize * elem;
            p += (len.div_ceil(MAX_FRAME_BYTES)).max(1) as u64;
        }
    }
    p
}

/// Typed collectives.
impl Communicator {
    fn bytes<T: Element>(v: &[T]) -> &[u8] {
        T::as_bytes(v)
    }

    /// Run `spec` on typed buffers with the default algorithm choice.
    fn typed<T: Element>(
        &mut self,
        spec: CollectiveSpec,
        send: &[T],
        recv: &mut [T],
        op: RedOp,
    ) -> Result<(), CommError> {
        self.run(&spec, None, T::as_bytes(send), T::as_bytes_mut(recv), T::DTYPE, op)
    }

    pub fn all_reduce<T: Element>(&mut self, send: &[T], recv: &mut [T], op: RedOp) -> Result<(), CommError> {
        self.typed(CollectiveSpec::new(Collective::AllReduce, self.size, send.len() as u64), send, recv, op)
    }

    pub fn all_reduce_in_place<T: Element>(&mut self, buf: &mut [T], op: RedOp) -> Result<(), CommError> {
        let send = buf.to_vec();
        self.all_reduce(&send, buf, op)
    }

    pub fn reduce_scatter<T: Element>(&mut self, send: &[T], recv: &mut [T], op: RedOp) -> Result<(), CommError> {
        self.typed(CollectiveSpec::new(Collective::ReduceScatter, self.size, send.len() as u64), send, recv, op)
    }

    /// `recv` holds every rank's chunk; `send` is this rank's chunk of the balanced partition of `recv.len()`.
    pub fn all_gather<T: Element>(&mut self, send: &[T], recv: &mut [T]) -> Result<(), CommError> {
        self.typed(CollectiveSpec::new(Collective::AllGather, self.size, recv.len() as u64), send, recv, RedOp::Sum)
    }

    pub fn broadcast<T: Element>(&mut self, buf: &mut [T], root: usize) -> Result<(), CommError> {
        let spec = CollectiveSpec::new(Collective::Broadcast, self.size, buf.len() as u64).with_root(root);
        let send = if self.rank == root { buf.to_vec() } else { Vec::new() };
        self.run(&spec, None, Self::bytes(&send), T::as_bytes_mut(buf), T::DTYPE, RedOp::Sum)
    }

    /// `recv` must be `send.len()` long on the root and empty elsewhere.
    pub fn reduce<T: Element>(&mut self, send: &[T], recv: &mut [T], op: RedOp, root: usize) -> Result<(), CommError> {
        self.typed(
            CollectiveSpec::new(Collective::Reduce, self.size, send.len() as u64).with_root(root),
            send,
            recv,
            op,
        )
    }

    pub fn all_to_all<T: Element>(&mut self, send: &[T], recv: &mut [T]) -> Result<(), CommError> {
        self.typed(CollectiveSpec::new(Collective::AllToAll, self.size, send.len() as u64), send, recv, RedOp::Sum)
    }

    /// `recv` holds every rank's chunk on the root (empty elsewhere); `send` is this
    /// rank's chunk of the balanced partition of the total.
    pub fn gather<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        total: usize,
        root: usize,
    ) -> Result<(), CommError> {
        self.typed(
            CollectiveSpec::new(Collective::Gather, self.size, total as u64).with_root(root),
            send,
            recv,
            RedOp::Sum,
        )
    }

    /// `send` is the whole vector on the root (empty elsewhere); `recv` this rank's chunk.
    pub fn scatter<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        total: usize,
        root: usize,
    ) -> Result<(), CommError> {
        self.typed(
            CollectiveSpec::new(Collective::Scatter, self.size, total as u64).with_root(root),
            send,
            recv,
            RedOp::Sum,
        )
    }

    /// `counts[i][j]` elements from rank i to rank j; every rank passes the same matrix.
    pub fn all_to_allv<T: Element>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        counts: Vec<Vec<u64>>,
    ) -> Result<(), CommError> {
        self.typed(CollectiveSpec::new(Collective::AllToAllv, self.size, 0).with_counts(counts), send, recv, RedOp::Sum)
    }

    /// Point to point: only this rank and `peer` take part.
    pub fn send<T: Element>(&mut self, buf: &[T], peer: usize) -> Result<(), CommError> {
        let spec =
            CollectiveSpec::new(Collective::SendRecv, self.size, buf.len() as u64).with_root(self.rank).with_peer(peer);
        self.run(&spec, None, Self::bytes(buf), &mut [], T::DTYPE, RedOp::Sum)
    }

    pub fn recv<T: Element>(&mut self, buf: &mut [T], peer: usize) -> Result<(), CommError> {
        let spec =
            CollectiveSpec::new(Collective::SendRecv, self.size, buf.len() as u64).with_root(peer).with_peer(self.rank);
        self.run(&spec, None, &[], T::as_bytes_mut(buf), T::DTYPE, RedOp::Sum)
    }

    pub fn barrier(&mut self) -> Result<(), CommError> {
        let spec = CollectiveSpec::new(Collective::Barrier, self.size, 0);
        let mut out = vec![0u8; self.size];
        self.run(&spec, None, &[self.rank as u8], &mut out, Dtype::U8, RedOp::Sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_goes_inline_only_when_every_peer_link_holds_its_bytes() {
        let data = vec![0u8; 5000];
        let send = |to: usize, n: usize| (to, Raw(data.as_ptr(), n));
        // Peer 1 over shared memory (8 KiB ring), peer 2 over TCP (32 KiB).
        let links = [0, 8192, INLINE_TCP_SEND_BYTES];
        assert!(sends_fit_links(&[send(1, 4000), send(1, 4000)], &links));
        // 8120 bytes plus two 40-byte headers overflow the 8 KiB ring (8192).
        assert!(!sends_fit_links(&[send(1, 4000), send(1, 4120)], &links));
        assert!(sends_fit_links(&[send(1, 5000), send(2, 5000)], &links));
        // An empty send still carries a header.
        assert!(!sends_fit_links(&[send(0, 0)], &links));
        assert!(sends_fit_links(&[send(2, INLINE_TCP_SEND_BYTES - HEADER_BYTES)], &links));
        assert!(!sends_fit_links(&[send(2, INLINE_TCP_SEND_BYTES - HEADER_BYTES + 1)], &links));
    }

    #[test]
    fn configuration_from_variables() {
        let vars = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let c = Config::from_vars(&vars(&[
            ("RAILYARD_TIMEOUT_SECS", "2.5"),
            ("RAILYARD_ALGO", "rhd"),
            ("RAILYARD_NCHANNELS", "4"),
            ("RAILYARD_PIPELINE_CHUNKS", "8"),
            ("RAILYARD_CHUNK_BYTES", "65536"),
            ("RAILYARD_SHM", "0"),
            ("RAILYARD_SHM_BYTES", "1048576"),
            ("RAILYARD_TOPO", "cluster.toml"),
            ("RAILYARD_DEBUG", "INFO"),
            ("RAILYARD_PIN", "on"),
        ]))
        .unwrap();
        assert!(c.pin);
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(
            (c.algorithm, c.channels, c.pipeline_chunks, c.chunk_bytes),
            (Some(Algorithm::Rhd), 4, 8, Some(65536))
        );
        assert_eq!(
            (c.shm, c.shm_ring_bytes, c.topology_file.as_deref(), c.debug),
            (false, 1 << 20, Some("cluster.toml"), true)
        );
        assert_eq!(Config::from_vars(&vars(&[])).unwrap(), Config::default());
        for (k, v) in [
            ("RAILYARD_TIMEOUT_SECS", "-1"),
            ("RAILYARD_ALGO", "fast"),
            ("RAILYARD_NCHANNELS", "0"),
            ("RAILYARD_SHM_BYTES", "1000"),
            ("RAILYARD_CHUNK_BYTES", "x"),
            ("RAILYARD_PIN", "yes please"),
        ] {
            assert!(Config::from_vars(&vars(&[(k, v)])).is_err(), "{k}={v}");
        }
    }
}

//! The communicator: executes a schedule for this rank. Per round it queues on each
//! peer's link what the schedule says this rank sends and receives (in schedule order,
//! received bytes copied or reduced straight into place), and the progress engine
//! (`progress.rs`) moves them all without blocking. Every frame carries the call's
//! signature, so ranks running different calls fail loudly; every wait has the configured
//! timeout; the first error breaks the communicator.

use std::collections::HashMap;
use std::sync::Arc;

use railyard_model::request::chunk_choices;
use railyard_model::{gen_options, ChunkPolicy};
use railyard_schedule::{
    generate_compact, Algorithm, Buffer, Collective, CollectiveSpec, Dtype, GenOptions, InterStage, Op,
};

use crate::bootstrap::{rendezvous, UniqueId};
use crate::config::Config;
use crate::element::Element;
use crate::error::CommError;
use crate::frame::CallSig;
use crate::lane_io::Transport;
use crate::link::{establish, hostname, Whereabouts};
use crate::prepared::{Bases, LocalStep, Prepared, RoundSteps};
use crate::progress::Link;
use crate::progress::{begin_round, drive, kick, queue_receive, queue_send, Call, Drive, Idle, Reduction};
use crate::recorder::Recorder;
use crate::reduce::{divide, reduce_into, RedOp};
use crate::slip::{Streak, POLICY as SLIP_POLICY};

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

pub struct Communicator {
    rank: usize,
    size: usize,
    /// Per peer (None for this rank).
    links: Vec<Option<Link>>,
    /// Per peer: "shm", "tcp" or "self".
    transports: Vec<&'static str>,
    /// How the engine waits with nothing to move.
    idle: Idle,
    /// Rounds of small receive-only calls that waited briefly since the last slip
    /// (`slip.rs`).
    streak: Streak,
    /// Ranks of each host.
    groups: Vec<Vec<usize>>,
    /// Chooses algorithms by the model when none is forced (built on first use).
    tuner: Option<crate::tuner::Tuner>,
    /// `job_is_crowded`: the same on every rank (the tuner's choices depend on it).
    crowded: bool,
    config: Config,
    calls: u64,
    /// Calls that exchanged data with each peer: the call number on the wire, so ranks
    /// that skip a point-to-point call between two others stay in step.
    calls_with: Vec<u64>,
    broken: Option<CommError>,
    /// Schedules already generated (and whether this rank can run them in place), so a
    /// training loop's repeated calls skip generation.
    schedules: HashMap<ScheduleKey, Arc<Prepared>>,
    /// The schedule's scratch buffer, kept between calls.
    scratch: Vec<u8>,
    /// A copy of the input for in-place calls whose schedule cannot alias (kept between calls).
    staging: Vec<u8>,
    /// The last calls, for the flight recorder (`recorder.rs`).
    recorder: Recorder,
    /// The algorithm the last call ran.
    last_algorithm: Option<Algorithm>,
    /// The last call's preparation, reused when the next call is the same (boxed: it is
    /// moved out and back on every call, and a pointer is cheaper to move than the struct).
    last_call: Option<Box<LastCall>>,
}

/// What `Communicator::prepare` worked out for the last call.
struct LastCall {
    spec: CollectiveSpec,
    asked: Option<Algorithm>,
    dtype: Dtype,
    op: RedOp,
    algorithm: Algorithm,
    prepared: Arc<Prepared>,
    sig: CallSig,
}

type ScheduleKey = (Algorithm, CollectiveSpec, GenOptions, u64);

/// At most this many cached schedules; the cache is emptied when full.
const SCHEDULE_CACHE_ENTRIES: usize = 64;

/// The ranks that share `rank`'s machine (its cores), itself included, in rank order.
fn same_machine(whereabouts: &[Whereabouts], rank: usize) -> Vec<usize> {
    let mine = whereabouts.get(rank).map(|w| w.machine);
    (0..whereabouts.len()).filter(|&r| Some(whereabouts[r].machine) == mine).collect()
}

/// Whether the tuner sends broadcasts direct (`Tuner::crowded`): the whole job is one
/// host (not an emulated cluster's namespaces, whose links are slow) and has more ranks
/// than the fewest cores any of them may run on. Worked out from what every rank told
/// every other at setup, so all ranks agree.
fn job_is_crowded(whereabouts: &[Whereabouts], hosts: usize) -> bool {
    let fewest = whereabouts.iter().map(|w| w.cores as usize).min().unwrap_or(usize::MAX);
    hosts == 1 && whereabouts.len() > fewest
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

impl Communicator {
    /// Join the rendezvous of `id` as `rank` of `size`.
    pub fn init(id: &UniqueId, rank: usize, size: usize, config: Config) -> Result<Communicator, CommError> {
        let listen_ip = match &config.socket_ifname {
            Some(spec) => Some(crate::interface::select(spec, &crate::interface::interfaces())?),
            None => None,
        };
        let sockets = rendezvous(id, rank, size, config.sockets_per_peer, listen_ip, config.timeout)?;
        let tag = id.tag();
        let here = Whereabouts::here();
        let mut whereabouts = vec![here; size];
        let mut links = Vec::with_capacity(size);
        let mut transports = Vec::with_capacity(size);
        for (peer, lanes) in sockets.into_iter().enumerate() {
            if peer == rank {
                links.push(None);
                transports.push("self");
                continue;
            }
            let (peer_at, link) = establish(lanes, rank, peer, tag, here, &config, size)?;
            whereabouts[peer] = peer_at;
            transports.push(link.transport.as_str());
            links.push(Some(link));
        }
        let groups = group_by_host(&whereabouts.iter().map(|w| w.host).collect::<Vec<_>>());
        // Cores are the machine's, shared by every rank on it, whatever host (network
        // namespace) each is: an emulated cluster's two "hosts" of 2 ranks on 2 cores are
        // 4 ranks on 2 cores (pinning both hosts' first ranks to core 0 made calibration
        // measure 450 µs round trips).
        let machine = same_machine(&whereabouts, rank);
        let cores = here.cores as usize;
        let idle = Idle::for_machine(machine.len(), cores);
        let crowded = job_is_crowded(&whereabouts, groups.len());
        let pinned = match config.pin {
            true => {
                machine.iter().position(|&r| r == rank).and_then(|local| crate::affinity::pin(local, machine.len()))
            }
            false => None,
        };
        if config.debug {
            let count = |t: Transport| links.iter().flatten().filter(|l| l.transport == t).count();
            let cma = links.iter().flatten().filter(|l| l.cma).count();
            eprintln!(
                "{}:{} [{rank}] RAILYARD INFO hosts (ranks per host): {groups:?}; {} ranks on this machine's {cores} cores; pinned to core {}; {}",
                hostname(),
                std::process::id(),
                machine.len(),
                pinned.map_or("none".to_string(), |c| c.to_string()),
                match (idle.spins == 0, crowded) {
                    (true, true) => "ranks outnumber cores: waits yield at once, broadcasts go direct",
                    (true, false) => "ranks outnumber cores: waits yield at once",
                    _ => "waits spin first",
                }
            );
            eprintln!(
                "{}:{} [{rank}] RAILYARD INFO rank {rank} of {size}: {} shared-memory links ({cma} single-copy), {} tcp links x {} sockets (TCP_NODELAY){}, timeout {:?}, channels {}",
                hostname(),
                std::process::id(),
                count(Transport::Shm),
                count(Transport::Tcp),
                config.sockets_per_peer,
                listen_ip.map_or(String::new(), |ip| format!(" on {ip}")),
                config.timeout,
                config.channels
            );
        }
        if config.dump_dir.is_some() {
            crate::recorder::install_sigusr1();
        }
        let config_trace = config.trace_buffer;
        Ok(Communicator {
            rank,
            size,
            links,
            transports,
            idle,
            streak: Streak::default(),
            groups,
            tuner: None,
            crowded,
            config,
            calls: 0,
            calls_with: vec![0; size],
            broken: None,
            schedules: HashMap::new(),
            scratch: Vec::new(),
            staging: Vec::new(),
            recorder: Recorder::new(config_trace),
            last_algorithm: None,
            last_call: None,
        })
    }

    /// Per peer, "shm", "tcp" or "self".
    pub fn transports(&self) -> &[&'static str] {
        &self.transports
    }

    /// Per peer, its streams: 1 for shared memory, the sockets for TCP, 0 for this rank.
    pub fn lanes(&self) -> Vec<usize> {
        self.links.iter().map(|l| l.as_ref().map_or(0, |l| l.lanes.len())).collect()
    }

    /// Per peer, whether large messages are pulled in one copy (`cma.rs`).
    pub fn single_copy(&self) -> Vec<bool> {
        self.links.iter().map(|l| l.as_ref().is_some_and(|l| l.cma)).collect()
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

    /// The algorithm the last call ran (chosen, forced or the default).
    pub fn last_algorithm(&self) -> Option<Algorithm> {
        self.last_algorithm
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
        self.sticky(|c| c.run_inner(spec, algorithm, Buffers::Separate { input, output }, dtype, op))
    }

    /// Run `spec` in place: `buf` holds the input and the output as
    /// `CollectiveSpec::in_place_offset` lays them out (all-reduce, broadcast: the same
    /// bytes; all-gather: the input is this rank's chunk of the output; reduce-scatter: the
    /// output is this rank's chunk of the input). Schedules that would read input bytes
    /// after overwriting them (`in_place_hazard`), and collectives without an in-place
    /// form (all-to-all: `buf` is input and output), run on a copy of the input instead.
    pub fn run_in_place(
        &mut self,
        spec: &CollectiveSpec,
        algorithm: Option<Algorithm>,
        buf: &mut [u8],
        dtype: Dtype,
        op: RedOp,
    ) -> Result<(), CommError> {
        self.sticky(|c| c.run_inner(spec, algorithm, Buffers::InPlace(buf), dtype, op))
    }

    /// Run `f` unless the communicator is broken; its first error breaks it for good
    /// (sticky, as Gloo's).
    fn sticky(&mut self, f: impl FnOnce(&mut Self) -> Result<(), CommError>) -> Result<(), CommError> {
        if let Some(e) = &self.broken {
            return Err(CommError::Broken(Box::new(e.clone())));
        }
        let result = f(self);
        if let Err(e) = &result {
            let e = match e {
                CommError::Timeout { peer, .. } => {
                    CommError::Timeout { peer: *peer, secs: self.config.timeout.as_secs() }
                }
                // A peer that gave up first said why: one diagnosis for the whole job.
                CommError::Stalled { peer, secs, waiting } => match crate::progress::any_abort(&mut self.links) {
                    Some(abort) => abort,
                    None => self.diagnose(*peer, *secs, waiting),
                },
                other => other.clone(),
            };
            self.recorder.end(Some(&e.to_string()));
            // The first error reaches every peer (one diagnosis, not one timeout per
            // rank); a peer's own abort needs no echo.
            if !matches!(e, CommError::Aborted { .. }) {
                // Peers read it as theirs: "this rank" must say which.
                let text = e.to_string().replace("this rank", &format!("rank {}", self.rank));
                crate::progress::abort_all(&mut self.links, &text);
            }
            self.broken = Some(e.clone());
            if self.config.dump_dir.is_some() {
                let _ = self.dump_trace(&e.to_string());
            }
            return Err(e);
        }
        self.recorder.end(None);
        result
    }

    /// A stall on `peer`, traced to the rank that does not move (`stuck.rs`), with this
    /// rank's call and step.
    fn diagnose(&self, peer: usize, secs: u64, waiting: &str) -> CommError {
        let (rank, why) = crate::stuck::find_stuck(&self.links, self.rank, peer);
        let here = match self.recorder.last() {
            Some(c) => format!(
                "rank {} waited {secs} s in call #{} ({}) at round {} of {}, for rank {peer}: {waiting}",
                self.rank,
                c.seq,
                c.describe(),
                c.round_reached,
                c.rounds
            ),
            None => format!("rank {} waited {secs} s for rank {peer}: {waiting}", self.rank),
        };
        CommError::Stuck { rank, message: format!("{why}; {here}") }
    }

    /// Write the flight recorder's calls to RAILYARD_DUMP_DIR (`recorder.rs`), saying
    /// why; the file written.
    pub fn dump_trace(&self, reason: &str) -> Result<std::path::PathBuf, CommError> {
        let dir = self
            .config
            .dump_dir
            .as_ref()
            .ok_or_else(|| CommError::BadArgs { message: "no dump directory: set RAILYARD_DUMP_DIR".into() })?;
        let dump = self.recorder.dump(self.rank, self.size, reason);
        crate::recorder::write_dump(dir, &dump).map_err(|e| CommError::Io {
            peer: self.rank,
            what: "writing the flight recorder",
            message: format!("{}: {e}", dir.display()),
        })
    }

    /// The algorithm, this rank's prepared schedule and the call's signature for `spec`:
    /// the last call's when this one is the same (a training loop's repeated call skips the
    /// tuner, the option building and the cache's hashing), else looked up or generated.
    /// Handed out by move and put back by `run_inner`, so a repeated call touches no
    /// reference count (each touch is a locked instruction).
    fn prepare(
        &mut self,
        spec: &CollectiveSpec,
        algorithm: Option<Algorithm>,
        dtype: Dtype,
        op: RedOp,
    ) -> Result<Box<LastCall>, CommError> {
        if let Some(l) =
            self.last_call.take_if(|l| l.spec == *spec && l.asked == algorithm && l.dtype == dtype && l.op == op)
        {
            return Ok(l);
        }
        let elem = dtype.size_bytes() as usize;
        let algorithm_asked = algorithm;
        // Forced (argument, then RAILYARD_ALGO), else chosen by the model, else the default.
        // An algorithm asked for by the call is honoured or refused, never replaced;
        // RAILYARD_ALGO (one for all calls) applies where it implements the collective.
        if let Some(a) = algorithm.filter(|a| !a.supports(spec.collective) || a.in_switch()) {
            return Err(CommError::BadArgs {
                message: format!("algorithm {a} does not implement {} in the runtime", spec.collective.as_str()),
            });
        }
        let forced = algorithm.or(self.config.algorithm).filter(|a| a.supports(spec.collective) && !a.in_switch());
        // The hierarchical algorithms' servers are the hosts (they need equal hosts; with
        // unequal ones every rank is one server).
        let equal = self.groups.iter().all(|g| g.len() == self.groups[0].len());
        let groups = if equal { self.groups.clone() } else { Vec::new() };
        let policy = self.config.chunk_policy(spec.count * elem as u64);
        // The model chooses what is not forced: the algorithm, and the chunks unless a
        // count or size is set (`railyard_model::request`'s one chunk policy).
        let tuned = match (forced, policy) {
            (Some(_), ChunkPolicy::Fixed(_)) => None,
            _ => {
                if self.tuner.is_none() {
                    self.tuner = Some(
                        crate::tuner::Tuner::new(&self.groups, self.config.topology_file.as_deref())?
                            .crowded(self.crowded),
                    );
                }
                self.tuner
                    .as_mut()
                    .and_then(|t| t.choose(spec, elem as u64, &groups, self.config.channels, policy, forced))
            }
        };
        let (algorithm, pipeline_chunks) = match tuned {
            Some(c) => (c.algorithm, c.pipeline_chunks),
            None => {
                let a = forced.unwrap_or_else(|| default_algorithm(spec.collective));
                let n = match policy {
                    ChunkPolicy::Fixed(n) => n,
                    ChunkPolicy::Search | ChunkPolicy::SearchAll => 1,
                };
                (a, chunk_choices(a, spec.collective, ChunkPolicy::Fixed(n), spec.count)[0])
            }
        };
        // RAILYARD_PIPELINE_CHUNKS and RAILYARD_CHUNK_BYTES pipeline chain and trees here:
        // the runtime's hierarchical stages run one after the other, so cutting them into
        // chunks would add rounds and overlap nothing.
        let pipeline_chunks = if algorithm.pipelined() { pipeline_chunks } else { 1 };
        let options = gen_options(algorithm, self.config.channels, pipeline_chunks, None, groups, InterStage::Ring);
        let channels = if algorithm.uses_channels() { options.channels } else { 0 };
        let sig = CallSig::new(spec.collective, spec.count, spec.root, spec.peer, dtype, op, algorithm).with_shape(
            channels,
            options.pipeline_chunks,
            crate::agreement::counts_digest(spec),
        );
        let key = (algorithm, spec.clone(), options, elem as u64);
        let prepared = match self.schedules.get(&key) {
            Some(p) => Arc::clone(p),
            None => {
                let s = generate_compact(algorithm, spec, &key.2, elem as u64)
                    .map_err(|e| CommError::BadArgs { message: e.to_string() })?;
                // Only this rank's part is made and kept: no other rank's transfers, so a
                // ring costs O(P) here, not O(P²).
                let p = Arc::new(Prepared::new(&s.for_rank(self.rank), self.rank, elem)?);
                if self.schedules.len() >= SCHEDULE_CACHE_ENTRIES {
                    self.schedules.clear();
                }
                self.schedules.insert(key, Arc::clone(&p));
                p
            }
        };
        Ok(Box::new(LastCall { spec: spec.clone(), asked: algorithm_asked, dtype, op, algorithm, prepared, sig }))
    }

    fn run_inner(
        &mut self,
        spec: &CollectiveSpec,
        algorithm: Option<Algorithm>,
        buffers: Buffers,
        dtype: Dtype,
        op: RedOp,
    ) -> Result<(), CommError> {
        if spec.ranks != self.size {
            return Err(CommError::BadArgs {
                message: format!("the call names {} ranks, the communicator has {}", spec.ranks, self.size),
            });
        }
        let last = self.prepare(spec, algorithm, dtype, op)?;
        let result = self.run_prepared(&last, buffers);
        self.last_call = Some(last);
        result
    }

    /// One call with its preparation (`prepare`), which holds the call's spec, dtype and op.
    fn run_prepared(&mut self, last: &LastCall, buffers: Buffers) -> Result<(), CommError> {
        let (spec, dtype, op) = (&last.spec, last.dtype, last.op);
        let (algorithm, prepared, sig) = (last.algorithm, &*last.prepared, last.sig);
        let elem = dtype.size_bytes() as usize;
        let (want_in, want_out) = (prepared.lens.input, prepared.lens.output);
        let in_place = matches!(buffers, Buffers::InPlace(_));
        let layout = prepared.layout;
        let want_in_place = layout.len as usize * elem;
        // Where input and output lie in an in-place buffer.
        let (in_at, out_at) = (layout.input_at as usize * elem, layout.output_at as usize * elem);
        match &buffers {
            Buffers::Separate { input, output } if input.len() != want_in || output.len() != want_out => {
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
            Buffers::InPlace(buf) if buf.len() != want_in_place => {
                return Err(CommError::BadArgs {
                    message: format!(
                        "{} in place needs a {want_in_place}-byte buffer on rank {}, got {}",
                        spec.collective.as_str(),
                        self.rank,
                        buf.len()
                    ),
                });
            }
            // Refused before the call counts (and before the flight recorder sees it).
            Buffers::InPlace(buf) if in_at + want_in > buf.len() || out_at + want_out > buf.len() => {
                return Err(CommError::BadArgs {
                    message: format!("{} in place: the layout does not fit the buffer", spec.collective.as_str()),
                });
            }
            _ => {}
        }
        let aliasable = prepared.aliasable;
        self.calls += 1;
        self.last_algorithm = Some(algorithm);
        if self.config.debug {
            eprintln!(
                "{}:{} [{}] RAILYARD INFO call {}: {} of {} x {} ({}) with {algorithm}, {} rounds{}",
                hostname(),
                std::process::id(),
                self.rank,
                self.calls,
                spec.collective.as_str(),
                spec.count,
                dtype,
                op.as_str(),
                prepared.rounds.len(),
                match (in_place, aliasable) {
                    (false, _) => "",
                    (true, true) => ", in place",
                    (true, false) => ", in place on a copy of the input",
                }
            );
        }
        if self.config.dump_dir.is_some() && crate::recorder::take_dump_request() {
            let _ = self.dump_trace("SIGUSR1");
        }
        // The call's buffers as raw views: in place, input and output alias. The staging
        // copy is taken (and put back) only by the in-place calls that need it.
        let stages = matches!(buffers, Buffers::InPlace(_)) && !aliasable;
        let mut staging = if stages { std::mem::take(&mut self.staging) } else { Vec::new() };
        let views = match buffers {
            Buffers::Separate { input, output } => Views {
                input: input.as_ptr(),
                input_len: input.len(),
                output: output.as_mut_ptr(),
                output_len: output.len(),
            },
            Buffers::InPlace(buf) => {
                // Not aliasable includes collectives without an in-place form.
                if !aliasable {
                    if staging.capacity() < want_in {
                        staging = crate::memory::zeroed(want_in);
                    }
                    staging.clear();
                    staging.extend_from_slice(&buf[in_at..in_at + want_in]);
                }
                // Both views come from one pointer: two reborrows of `buf` (one shared, one
                // mutable) would invalidate each other under Rust's aliasing rules.
                let base = buf.as_mut_ptr();
                // SAFETY: `in_at + want_in` and `out_at + want_out` are within `buf` (checked
                // before the call counted).
                let (input, output) = unsafe { (base.add(in_at) as *const u8, base.add(out_at)) };
                let input = if aliasable { input } else { staging.as_ptr() };
                Views { input, input_len: want_in, output, output_len: want_out }
            }
        };
        let result = self.execute(prepared, sig, views, dtype, op);
        // Whatever way the call ended, no frame may stay queued: the queues hold raw
        // pointers into this call's buffers (see `Lane`'s Send).
        if result.is_err() {
            crate::progress::clear_all(&mut self.links);
        }
        debug_assert!(crate::progress::all_idle(&self.links), "queues empty after a call");
        if stages {
            self.staging = staging;
        }
        result?;
        if op == RedOp::Avg && spec.collective.reduces() {
            // SAFETY: `views.output` is the caller's output, `output_len` bytes, alive for this call.
            divide(dtype, unsafe { std::slice::from_raw_parts_mut(views.output, views.output_len) }, self.size);
        }
        Ok(())
    }

    fn execute(
        &mut self,
        prepared: &Prepared,
        sig: CallSig,
        views: Views,
        dtype: Dtype,
        op: RedOp,
    ) -> Result<(), CommError> {
        let elem = dtype.size_bytes() as usize;
        debug_assert_eq!((views.input_len, views.output_len), (prepared.lens.input, prepared.lens.output));
        // Reused across calls: a fresh multi-MiB buffer per call costs page faults on every
        // call. Taken (and put back) only by calls that use one.
        let uses_scratch = prepared.lens.scratch > 0;
        let mut scratch = Vec::new();
        if uses_scratch {
            scratch = std::mem::take(&mut self.scratch);
            if scratch.capacity() < prepared.lens.scratch {
                scratch = crate::memory::zeroed(prepared.lens.scratch);
            }
            scratch.resize(prepared.lens.scratch, 0);
        }
        // This call's number with every peer it exchanges data with.
        for &peer in &prepared.peers {
            self.calls_with[peer] += 1;
        }
        // SAFETY: input and output are the call's buffers of the lengths `prepared` was
        // made for (validated by `run_prepared`, asserted above), scratch is `lens.scratch`
        // bytes; all outlive this function.
        let bases = unsafe { Bases::new(views.input as *mut u8, views.output, scratch.as_mut_ptr(), prepared.lens) };
        let mut owned: Vec<Vec<u8>> = Vec::new();
        // Round 0's sends go out first when they can: a small call's frame leaves before
        // anything else of the call is done (the flight recorder's entry included), so the
        // peer's wait is as short as it can be. Its receives wait for the prologue, which may
        // write what they land on.
        let mut early = None;
        if let (true, Some(first)) = (prepared.early, prepared.rounds.first()) {
            match self.start_round(first, bases, sig, elem, &mut owned, prepared.send_only) {
                Ok(queued) => early = Some(queued),
                Err(e) => {
                    // The flight recorder still sees the call that failed.
                    self.recorder.begin(self.calls, sig, prepared.rounds.len(), &prepared.peer_bytes);
                    return Err(e);
                }
            }
        }
        self.recorder.begin(self.calls, sig, prepared.rounds.len(), &prepared.peer_bytes);
        for l in &prepared.prologue {
            local_step(bases, l, dtype, op);
        }
        let reduction = Reduction { dtype, op };
        // Only a rank that only receives slips behind its producer, and only where it
        // spins (with a core of its own) rather than giving the core away.
        let may_slip = SLIP_POLICY.applies(prepared.receive_only, prepared.received_bytes)
            && !prepared.lockstep
            && self.config.slip
            && self.idle.spins > 0;
        for (i, round) in prepared.rounds.iter().enumerate() {
            let mut queued = match early {
                Some(queued) if i == 0 => queued,
                _ => self.start_round(round, bases, sig, elem, &mut owned, prepared.send_only)?,
            };
            // A rank that only receives shares its pulls with the root from 128 KiB: the
            // root would only wait. Not where ranks share cores: there the root's pushes
            // take a core a receiver pulls on (N = 4 on 2 cores, direct broadcast of
            // 128 KiB: 18.5 µs a call unshared against 26.2 shared, 512 KiB 47 against 62),
            // and only an exchange's 2 MiB threshold pays (2 MiB: 391 shared, 527 not).
            let one_way = prepared.receive_only && !self.crowded;
            queued |= self.queue_receives(round, bases, sig, reduction, one_way)?;
            self.recorder.reached(i);
            let slipped = self.streak.before_round(may_slip, queued, &SLIP_POLICY);
            if slipped {
                crate::progress::slip(&mut self.links, &SLIP_POLICY)?;
            }
            if queued {
                let how = Drive {
                    dtype,
                    op,
                    idle: self.idle,
                    timeout: self.config.timeout,
                    call: self.calls,
                    round: i as u32,
                    deferred: false,
                };
                let empty_polls = drive(&mut self.links, how)?;
                // How long a round that may slip waited says whether its producer streams.
                if may_slip && !slipped {
                    self.streak.after_wait(empty_polls, &SLIP_POLICY);
                }
            }
            owned.clear();
            // The round's local steps, once what it received has landed.
            for l in &round.local {
                local_step(bases, l, dtype, op);
            }
        }
        // The agreement frames no round waited for (`agreement.rs`).
        if crate::progress::deferred_pending(&self.links) {
            let how = Drive {
                dtype,
                op,
                idle: self.idle,
                timeout: self.config.timeout,
                call: self.calls,
                round: prepared.rounds.len() as u32,
                deferred: true,
            };
            drive(&mut self.links, how)?;
        }
        for l in &prepared.epilogue {
            local_step(bases, l, dtype, op);
        }
        if uses_scratch {
            self.scratch = scratch;
        }
        Ok(())
    }
}

/// A local copy or reduction between this rank's buffers. A copy onto itself (in place)
/// is skipped; overlapping spans go through a temporary.
fn local_step(bases: Bases, l: &LocalStep, dtype: Dtype, op: RedOp) {
    debug_assert_ne!(l.write.buffer, Buffer::Input, "Prepared::new refuses writes to the input");
    let (src, dst) = (bases.at(&l.read), bases.at(&l.write));
    if l.op == Op::Copy && src == dst {
        return;
    }
    let overlap = (src as usize) < dst as usize + l.write.len && (dst as usize) < src as usize + l.read.len;
    // SAFETY: both spans lie inside their live buffers (`Bases::at`); when they overlap
    // the source is copied out first, so the two slices never alias.
    unsafe {
        let tmp;
        let from: &[u8] = if overlap {
            tmp = std::slice::from_raw_parts(src, l.read.len).to_vec();
            &tmp
        } else {
            std::slice::from_raw_parts(src, l.read.len)
        };
        let to = std::slice::from_raw_parts_mut(dst, l.write.len);
        match l.op {
            Op::Copy if l.stream => crate::copy::copy_bytes(to, from),
            Op::Copy => to.copy_from_slice(from),
            Op::Reduce => reduce_into(dtype, op, to, from),
        }
    }
}

impl Communicator {
    /// Queue what this rank sends in `round` (started by `start_round`) and push what the
    /// links take now (`kick`: large sends leave before the round's receives are copied
    /// in). The schedule promises (and the symbolic checker proves for every generator)
    /// that no byte a rank sends in a round is written by that round's receives;
    /// `Prepared` checks it anyway, and such sources are copied into `owned` first.
    /// Whether anything was left for `drive` (small frames go out at once when their ring
    /// or socket takes them). Not inlined: `start_round` stays small for a round without
    /// sends.
    #[inline(never)]
    fn queue_sends(
        &mut self,
        round: &RoundSteps,
        bases: Bases,
        sig: CallSig,
        elem: usize,
        owned: &mut Vec<Vec<u8>>,
        one_way: bool,
    ) -> Result<bool, CommError> {
        let mut queued = false;
        for s in &round.sends {
            // SAFETY: the span lies inside its buffer (`Bases::at`) and no receive of this
            // round writes it unless `clash` says so, in which case it is copied first.
            let data = unsafe { std::slice::from_raw_parts(bases.at(&s.read), s.read.len) };
            let data = if s.clash {
                owned.push(data.to_vec());
                owned.last().map_or(&[][..], |v| &v[..])
            } else {
                data
            };
            let call = Call { number: self.calls_with[s.to], sig };
            let link = self.links[s.to].as_mut().ok_or_else(|| no_link(s.to))?;
            queued |= queue_send(link, call, data, elem, s.to, one_way)?;
        }
        if queued {
            kick(&mut self.links, &round.peers)?;
        }
        Ok(queued)
    }

    /// Start `round` on its links (`begin_round`) and queue its sends, if it has any (a
    /// rank that only receives in it does no more). Whether anything was left for `drive`.
    fn start_round(
        &mut self,
        round: &RoundSteps,
        bases: Bases,
        sig: CallSig,
        elem: usize,
        owned: &mut Vec<Vec<u8>>,
        one_way: bool,
    ) -> Result<bool, CommError> {
        for &peer in &round.peers {
            begin_round(self.links.get_mut(peer).and_then(Option::as_mut).ok_or_else(|| no_link(peer))?);
        }
        if round.sends.is_empty() {
            return Ok(false);
        }
        self.queue_sends(round, bases, sig, elem, owned, one_way)
    }

    /// Queue what this rank receives in `round` (after `start_round` started the round), in
    /// schedule order, each straight into place; a small frame already whole in its ring
    /// lands at once (`queue_receive`). Whether anything was left for `drive`: when
    /// nothing was, the round needs no pass over the links.
    fn queue_receives(
        &mut self,
        round: &RoundSteps,
        bases: Bases,
        sig: CallSig,
        reduction: Reduction,
        one_way: bool,
    ) -> Result<bool, CommError> {
        let mut queued = false;
        for r in &round.receives {
            if r.deferred {
                let call = Call { number: self.calls_with[r.from], sig };
                let link = self.links[r.from].as_mut().ok_or_else(|| no_link(r.from))?;
                crate::progress::queue_deferred_receive(link, call, r.from)?;
                continue;
            }
            debug_assert_ne!(r.write.buffer, Buffer::Input, "Prepared::new refuses writes to the input");
            // SAFETY: inside the output or scratch buffer (`Prepared::new` refuses a receive
            // into the input); no send of this round reads it (`clash`) and receives of one
            // round write disjoint ranges.
            let dst = unsafe { std::slice::from_raw_parts_mut(bases.at(&r.write), r.write.len) };
            let call = Call { number: self.calls_with[r.from], sig };
            let link = self.links[r.from].as_mut().ok_or_else(|| no_link(r.from))?;
            queued |= queue_receive(link, call, dst, r.op, reduction, r.from, one_way)?;
        }
        Ok(queued)
    }
}

fn no_link(peer: usize) -> CommError {
    CommError::BadArgs { message: format!("no link to rank {peer}") }
}

/// The caller's buffers for one call.
enum Buffers<'a> {
    Separate { input: &'a [u8], output: &'a mut [u8] },
    InPlace(&'a mut [u8]),
}

/// Raw views of a call's input and output (they alias when in place).
#[derive(Clone, Copy)]
struct Views {
    input: *const u8,
    input_len: usize,
    output: *mut u8,
    output_len: usize,
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
        let spec = CollectiveSpec::new(Collective::AllReduce, self.size, buf.len() as u64);
        self.run_in_place(&spec, None, T::as_bytes_mut(buf), T::DTYPE, op)
    }

    pub fn reduce_scatter<T: Element>(&mut self, send: &[T], recv: &mut [T], op: RedOp) -> Result<(), CommError> {
        self.typed(CollectiveSpec::new(Collective::ReduceScatter, self.size, send.len() as u64), send, recv, op)
    }

    /// `recv` holds every rank's chunk; `send` is this rank's chunk of the balanced partition of `recv.len()`.
    pub fn all_gather<T: Element>(&mut self, send: &[T], recv: &mut [T]) -> Result<(), CommError> {
        self.typed(CollectiveSpec::new(Collective::AllGather, self.size, recv.len() as u64), send, recv, RedOp::Sum)
    }

    /// In place: `buf` holds every rank's chunk; this rank's chunk (of the balanced
    /// partition) is its input.
    pub fn all_gather_in_place<T: Element>(&mut self, buf: &mut [T]) -> Result<(), CommError> {
        let spec = CollectiveSpec::new(Collective::AllGather, self.size, buf.len() as u64);
        self.run_in_place(&spec, None, T::as_bytes_mut(buf), T::DTYPE, RedOp::Sum)
    }

    /// In place: `buf` is the whole input; afterwards this rank's chunk of it (of the
    /// balanced partition) holds the reduction of that chunk.
    pub fn reduce_scatter_in_place<T: Element>(&mut self, buf: &mut [T], op: RedOp) -> Result<(), CommError> {
        let spec = CollectiveSpec::new(Collective::ReduceScatter, self.size, buf.len() as u64);
        self.run_in_place(&spec, None, T::as_bytes_mut(buf), T::DTYPE, op)
    }

    pub fn broadcast<T: Element>(&mut self, buf: &mut [T], root: usize) -> Result<(), CommError> {
        let spec = CollectiveSpec::new(Collective::Broadcast, self.size, buf.len() as u64).with_root(root);
        self.run_in_place(&spec, None, T::as_bytes_mut(buf), T::DTYPE, RedOp::Sum)
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
    fn ranks_of_other_hosts_on_this_machine_share_its_cores() {
        // An emulated cluster: hosts 1 and 2 (namespaces) on machine 7; host 3 elsewhere.
        let at = |host, machine| Whereabouts { host, machine, cores: 2 };
        let w = [at(1, 7), at(1, 7), at(2, 7), at(2, 7), at(3, 9)];
        assert_eq!(same_machine(&w, 2), vec![0, 1, 2, 3]);
        assert_eq!(same_machine(&w, 4), vec![4]);
        assert_eq!(group_by_host(&w.iter().map(|w| w.host).collect::<Vec<_>>()), vec![vec![0, 1], vec![2, 3], vec![4]]);
    }

    #[test]
    fn a_job_is_crowded_on_one_host_with_more_ranks_than_the_fewest_cores() {
        let at = |cores| Whereabouts { host: 1, machine: 7, cores };
        assert!(job_is_crowded(&[at(2), at(2), at(2), at(2)], 1));
        assert!(!job_is_crowded(&[at(2), at(2)], 1));
        // One rank confined to a single core (a cpuset) decides for all.
        assert!(job_is_crowded(&[at(8), at(1), at(8)], 1));
        // Namespaces as hosts (an emulated cluster): never.
        assert!(!job_is_crowded(&[at(2), at(2), at(2), at(2)], 2));
    }
}

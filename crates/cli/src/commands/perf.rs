//! `railyard perf COLLECTIVE`: run collectives for real and report like nccl-tests
//! (docs/sources.md#nccl-tests): size, count, type, redop, root, then time (µs), algbw and busbw
//! (GB/s) and #wrong for out-of-place and in-place. `--np N` starts N local ranks as
//! processes; under a launcher (torchrun, mpirun, srun, `railyard launch`) each process
//! is one rank. Rank 0 prints.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use railyard_runtime::HugePageBuffer;
use railyard_runtime::{from_env, Communicator, Config, RedOp, UniqueId};
use railyard_schedule::{Algorithm, Collective, CollectiveSpec, Contributors, Dtype};
use serde::Serialize;

use crate::args::{parse_size, Format};

#[derive(Debug, Args, Clone)]
#[command(after_help = "Examples:\n  \
    railyard perf all_reduce --np 2 -b 8 -e 128M -f 2\n  \
    railyard perf all_gather --np 4 -b 1K -e 1M -f 4 -d half\n  \
    torchrun --nproc-per-node 2 $(which railyard) perf all_reduce -b 1M -e 64M -f 2\n\n\
    Sizes take K, M, G (binary, as nccl-tests). RAILYARD_ALGO, RAILYARD_NCHANNELS, RAILYARD_TIMEOUT_SECS\n\
    and RAILYARD_DEBUG=INFO are read once at start. With --np, ranks are pinned to cores when they fit\n\
    (RAILYARD_PIN=0 turns that off).")]
pub struct PerfArgs {
    /// all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, gather,
    /// scatter or sendrecv (each rank sends to the next and receives from the previous, as
    /// nccl-tests' sendrecv_perf)
    pub collective: String,
    /// Smallest size
    #[arg(short = 'b', long = "minbytes", default_value = "32M")]
    pub minbytes: String,
    /// Largest size
    #[arg(short = 'e', long = "maxbytes", default_value = "32M")]
    pub maxbytes: String,
    /// Step between sizes when no --stepfactor
    #[arg(short = 'i', long = "stepbytes", default_value = "1M")]
    pub stepbytes: String,
    /// Multiply the size by this each step
    #[arg(short = 'f', long = "stepfactor")]
    pub stepfactor: Option<u64>,
    /// Timed iterations per size
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: u32,
    /// Untimed iterations: at the largest size, then the smallest (as nccl-tests), then before each size
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 1)]
    pub warmup: u32,
    /// Verify every element (0: skip, #wrong shows N/A)
    #[arg(short = 'c', long = "check", default_value_t = 1)]
    pub check: u32,
    /// sum, prod, min, max, avg
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: String,
    /// float, double, half, bfloat16, int32, int64, uint8 (or f32, f64, f16, bf16, i32, i64, u8)
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub datatype: String,
    /// Root of broadcast and reduce
    #[arg(short = 'r', long = "root", default_value_t = 0)]
    pub root: usize,
    /// Accepted for nccl-tests compatibility; every call blocks
    #[arg(short = 'z', long = "blocking", default_value_t = 0)]
    pub blocking: u32,
    /// Start this many local ranks as processes
    #[arg(long)]
    pub np: Option<usize>,
    /// Force an algorithm (else RAILYARD_ALGO, else the model's choice); refused when it
    /// does not implement the collective. The `algo` column says what ran.
    #[arg(long)]
    pub algo: Option<Algorithm>,
    /// nccl-tests' GPUs per thread: railyard moves host memory, so only 1
    #[arg(short = 'g', long = "ngpus", default_value_t = 1)]
    pub ngpus: u32,
    /// nccl-tests' threads per process: one rank per process here, so only 1
    #[arg(short = 't', long = "nthreads", default_value_t = 1)]
    pub nthreads: u32,
    /// Time reported: 0 rank 0's, 1 the average over ranks, 2 the minimum, 3 the maximum
    #[arg(short = 'a', long = "average", default_value_t = 1)]
    pub average: u32,
    /// Calls per timed iteration (the time shown is per call, as nccl-tests')
    #[arg(short = 'm', long = "agg_iters", default_value_t = 1)]
    pub agg_iters: u32,
    /// Run the whole sweep this many times, printing each
    #[arg(short = 'N', long = "run_cycles", default_value_t = 1)]
    pub run_cycles: u32,
    /// 1: report the process's CPU time per call instead of wall time (column "cputime")
    #[arg(short = 'C', long = "report_cputime", default_value_t = 0)]
    pub report_cputime: u32,
    /// A call that waits longer than this many seconds fails (else RAILYARD_TIMEOUT_SECS, 30)
    #[arg(short = 'T', long = "timeout", value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Time out-of-place only (in-place columns print N/A, JSON null); halves a long benchmark
    #[arg(long)]
    pub out_of_place_only: bool,
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
}

fn collective(name: &str) -> Result<Collective> {
    let c: Collective = name.replace('_', "").parse().map_err(anyhow::Error::msg)?;
    if matches!(c, Collective::AllToAllv | Collective::Barrier) {
        bail!("perf runs all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, gather, scatter and sendrecv");
    }
    Ok(c)
}

#[derive(Debug, Clone, Serialize)]
struct Half {
    time_us: f64,
    algbw_gb_per_sec: f64,
    busbw_gb_per_sec: f64,
    wrong: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
struct Row {
    size: u64,
    count: u64,
    #[serde(rename = "type")]
    dtype: String,
    redop: String,
    root: i64,
    out_of_place: Half,
    in_place: Option<Half>,
    /// The algorithm that ran (the last call's).
    algo: String,
}

fn value(r: usize, i: u64) -> f64 {
    ((r as u64 * 7 + i * 3) % 5) as f64 + 1.0
}

fn encode(dtype: Dtype, v: f64, out: &mut Vec<u8>) {
    match dtype {
        Dtype::F32 => out.extend_from_slice(&(v as f32).to_ne_bytes()),
        Dtype::F64 => out.extend_from_slice(&v.to_ne_bytes()),
        Dtype::F16 => out.extend_from_slice(&half::f16::from_f64(v).to_ne_bytes()),
        Dtype::Bf16 => out.extend_from_slice(&half::bf16::from_f64(v).to_ne_bytes()),
        Dtype::I32 => out.extend_from_slice(&(v as i32).to_ne_bytes()),
        Dtype::I64 => out.extend_from_slice(&(v as i64).to_ne_bytes()),
        Dtype::U8 => out.push(v as u8),
    }
}

fn decode(dtype: Dtype, c: &[u8]) -> f64 {
    let a = |n: usize| -> &[u8] { &c[..n] };
    match dtype {
        Dtype::F32 => f32::from_ne_bytes(a(4).try_into().unwrap_or_default()) as f64,
        Dtype::F64 => f64::from_ne_bytes(a(8).try_into().unwrap_or_default()),
        Dtype::F16 => half::f16::from_ne_bytes(a(2).try_into().unwrap_or_default()).to_f64(),
        Dtype::Bf16 => half::bf16::from_ne_bytes(a(2).try_into().unwrap_or_default()).to_f64(),
        Dtype::I32 => i32::from_ne_bytes(a(4).try_into().unwrap_or_default()) as f64,
        Dtype::I64 => i64::from_ne_bytes(a(8).try_into().unwrap_or_default()) as f64,
        Dtype::U8 => c[0] as f64,
    }
}

/// What one output element must hold. Integer reductions are computed as the runtime
/// computes them, in the type's width (sums and products wrap; avg divides the wrapped
/// sum, truncating), and compared exactly; float ones in f64, rounded to the dtype, and
/// compared within its rounding.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    Int(i128),
    Float(f64),
}

fn is_int(dtype: Dtype) -> bool {
    matches!(dtype, Dtype::I32 | Dtype::I64 | Dtype::U8)
}

/// `x` wrapped to `dtype`'s width (integers), as the runtime's arithmetic leaves it.
fn wrap(dtype: Dtype, x: i128) -> i128 {
    match dtype {
        Dtype::U8 => i128::from(x as u8),
        Dtype::I32 => i128::from(x as i32),
        _ => i128::from(x as i64),
    }
}

fn expected(spec: &CollectiveSpec, dtype: Dtype, op: RedOp, index: u64, who: Contributors) -> Want {
    let ranks: Vec<usize> = match who {
        Contributors::One(q) => vec![q],
        Contributors::All => (0..spec.ranks).collect(),
    };
    let one = matches!(who, Contributors::One(_));
    if is_int(dtype) {
        let vals: Vec<i128> = ranks.iter().map(|&q| value(q, index) as i128).collect();
        let sum = || vals.iter().fold(0i128, |a, &b| wrap(dtype, a + b));
        let v = match op {
            _ if one => vals[0],
            RedOp::Sum => sum(),
            RedOp::Prod => vals.iter().fold(1i128, |a, &b| wrap(dtype, a * b)),
            RedOp::Min => vals.iter().copied().min().unwrap_or(0),
            RedOp::Max => vals.iter().copied().max().unwrap_or(0),
            RedOp::Avg => sum() / spec.ranks as i128,
        };
        return Want::Int(wrap(dtype, v));
    }
    let vals: Vec<f64> = ranks.iter().map(|&q| value(q, index)).collect();
    let r = match op {
        _ if one => vals[0],
        RedOp::Sum => vals.iter().sum(),
        RedOp::Prod => vals.iter().product(),
        RedOp::Min => vals.iter().copied().fold(f64::INFINITY, f64::min),
        RedOp::Max => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        RedOp::Avg => vals.iter().sum::<f64>() / spec.ranks as f64,
    };
    let mut b = Vec::new();
    encode(dtype, r, &mut b);
    Want::Float(decode(dtype, &b))
}

/// An integer element as the runtime left it.
fn decode_int(dtype: Dtype, c: &[u8]) -> i128 {
    match dtype {
        Dtype::U8 => i128::from(c[0]),
        Dtype::I32 => i128::from(i32::from_ne_bytes(c[..4].try_into().unwrap_or_default())),
        _ => i128::from(i64::from_ne_bytes(c[..8].try_into().unwrap_or_default())),
    }
}

fn wrong(spec: &CollectiveSpec, rank: usize, dtype: Dtype, op: RedOp, output: &[u8]) -> u64 {
    let e = dtype.size_bytes() as usize;
    let tol = match dtype {
        Dtype::F16 | Dtype::Bf16 => 1e-2,
        _ => 1e-6,
    };
    // Inputs of all-gather and gather ranks are their chunk of the global index space.
    let parts = spec.parts();
    spec.expected_output(rank)
        .into_iter()
        .enumerate()
        .filter(|(i, (index, who))| {
            let index = match (spec.collective, who) {
                (Collective::AllGather | Collective::Gather, Contributors::One(q)) => index + parts[*q].start,
                _ => *index,
            };
            let got = &output[i * e..(i + 1) * e];
            match expected(spec, dtype, op, index, *who) {
                Want::Int(want) => decode_int(dtype, got) != want,
                Want::Float(want) => (decode(dtype, got) - want).abs() > tol * want.abs().max(1.0),
            }
        })
        .count() as u64
}

/// nccl-tests' getFloatStr: %.2f, then %.1f, %.0f, then an exponent, to fit `width`.
fn fit(v: f64, width: usize) -> String {
    for p in [2, 1, 0] {
        let s = format!("{v:.p$}");
        if s.len() <= width {
            return format!("{s:>width$}");
        }
    }
    format!("{:>width$}", format!("{v:.1e}"))
}

fn spec_for(c: Collective, size: u64, elem: u64, ranks: usize, root: usize) -> (CollectiveSpec, u64, u64) {
    let p = ranks as u64;
    match c {
        // size = the total; count = per-rank elements, as nccl-tests prints them.
        Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => {
            let count = size / elem / p;
            (CollectiveSpec::new(c, ranks, count * p), count * p * elem, count)
        }
        Collective::Gather | Collective::Scatter => {
            let count = size / elem / p;
            (CollectiveSpec::new(c, ranks, count * p).with_root(root), count * p * elem, count)
        }
        // Every rank sends `size` bytes to the next and receives as many from the previous:
        // an all-to-allv whose only blocks are the shift (one schedule, all moving at once).
        Collective::SendRecv => {
            let count = size / elem;
            let counts = (0..ranks)
                .map(|i| (0..ranks).map(|j| if j == (i + 1) % ranks { count } else { 0 }).collect())
                .collect();
            (CollectiveSpec::new(Collective::AllToAllv, ranks, 0).with_counts(counts), count * elem, count)
        }
        _ => {
            let count = size / elem;
            (CollectiveSpec::new(c, ranks, count).with_root(root), count * elem, count)
        }
    }
}

/// Where input and output sit in one in-place buffer and its length, in bytes.
fn in_place_layout(spec: &CollectiveSpec, rank: usize, elem: u64) -> (usize, usize, usize) {
    let l = spec.in_place_layout(rank);
    let bytes = |n: u64| (n * elem) as usize;
    (bytes(l.input_at), bytes(l.output_at), bytes(l.len))
}

fn rank_body(args: &PerfArgs, comm: &mut Communicator) -> Result<Vec<Row>> {
    let c = collective(&args.collective)?;
    let dtype: Dtype = args.datatype.parse().map_err(anyhow::Error::msg)?;
    let op: RedOp = args.op.parse().map_err(anyhow::Error::msg)?;
    let (min, max) = (
        parse_size(&args.minbytes).map_err(anyhow::Error::msg)?,
        parse_size(&args.maxbytes).map_err(anyhow::Error::msg)?,
    );
    let step = parse_size(&args.stepbytes).map_err(anyhow::Error::msg)?;
    if min > max
        || args.iters == 0
        || args.stepfactor.is_some_and(|f| f < 2)
        || (args.stepfactor.is_none() && step == 0)
    {
        bail!("need minbytes <= maxbytes, iters >= 1, and a step factor >= 2 or a step > 0");
    }
    let rooted = c.rooted() && c != Collective::SendRecv;
    if rooted && args.root >= comm.size() {
        bail!("root {} is not a rank (0..{})", args.root, comm.size());
    }
    let (rank, p, elem) = (comm.rank(), comm.size(), dtype.size_bytes());
    let mut rows = Vec::new();
    // Buffers for the largest size, allocated once and used by prefix, as nccl-tests does.
    // Fresh multi-MiB buffers per size made the calls right after each allocation up to
    // 1.7x slower here (fresh huge pages on both sides), a cost of the allocator, not of
    // the call. Large buffers ask for huge pages, as numpy's arrays (the peers') do, from
    // a 2 MiB boundary on, so a small size's prefix is huge pages too (`HugePageBuffer`).
    let largest = spec_for(c, max, elem, p, args.root).0;
    let bytes = |n: u64| n as usize * elem as usize;
    let (max_in, max_out) = (bytes(largest.input_len(rank)), bytes(largest.output_len(rank)));
    let mut input_pool = HugePageBuffer::zeroed(max_in);
    let mut output_pool = HugePageBuffer::zeroed(max_out);
    // In place, a gather's non-root still holds its chunk where the output would put it.
    let max_buf = in_place_layout(&largest, rank, elem).2.max(max_in + max_out);
    let mut buf_pool = HugePageBuffer::zeroed(if args.out_of_place_only { 0 } else { max_buf });
    // As nccl-tests: warm up at the largest size, then at the smallest, before timing any
    // size (the first calls on fresh memory ran up to 2x slower here), then per size too.
    for warm in [max, min] {
        let spec = spec_for(c, warm, elem, p, args.root).0;
        let (in_len, out_len) = (bytes(spec.input_len(rank)), bytes(spec.output_len(rank)));
        for _ in 0..args.warmup {
            comm.run(&spec, args.algo, &input_pool[..in_len], &mut output_pool[..out_len], dtype, op)?;
            if !args.out_of_place_only {
                let (_, _, len) = in_place_layout(&spec, rank, elem);
                comm.run_in_place(&spec, args.algo, &mut buf_pool[..len], dtype, op)?;
            }
        }
    }
    let mut size = min;
    while size <= max {
        let (spec, shown, count) = spec_for(c, size, elem, p, args.root);
        let (in_len, out_len) = (bytes(spec.input_len(rank)), bytes(spec.output_len(rank)));
        if input_pool.len() < in_len {
            input_pool = HugePageBuffer::zeroed(in_len);
        }
        let base = if matches!(c, Collective::AllGather | Collective::Gather) { spec.chunk(rank).start } else { 0 };
        let mut element = Vec::with_capacity(8);
        for (i, at) in input_pool[..in_len].chunks_exact_mut(elem as usize).enumerate() {
            element.clear();
            encode(dtype, value(rank, base + i as u64), &mut element);
            at.copy_from_slice(&element);
        }
        let input = &input_pool[..in_len];
        if output_pool.len() < out_len {
            output_pool = HugePageBuffer::zeroed(out_len);
        }
        let output = &mut output_pool[..out_len];
        let mut halves: Vec<Half> = Vec::new();
        let mut algo = None;
        for in_place in [false, true] {
            if in_place && args.out_of_place_only {
                continue;
            }
            // In place (like nccl-tests' recvbuff == sendbuff): one buffer holding input and
            // output as the spec lays them out; iterations reuse it without restoring it.
            let (in_at, out_at, in_place_len) = in_place_layout(&spec, rank, elem);
            let buf_len = if in_place { in_place_len } else { 0 };
            if buf_pool.len() < buf_len {
                buf_pool = HugePageBuffer::zeroed(buf_len);
            }
            let buf = &mut buf_pool[..buf_len];
            let reset = |buf: &mut [u8]| {
                buf.fill(0);
                buf[in_at..in_at + in_len].copy_from_slice(input);
            };
            if in_place {
                reset(buf);
            }
            let once = |comm: &mut Communicator, buf: &mut [u8], output: &mut [u8]| {
                if in_place {
                    comm.run_in_place(&spec, args.algo, buf, dtype, op)
                } else {
                    comm.run(&spec, args.algo, input, output, dtype, op)
                }
            };
            for _ in 0..args.warmup {
                once(comm, buf, output)?;
            }
            comm.barrier()?;
            let calls = args.iters as u64 * args.agg_iters as u64;
            // Process CPU time only when asked for (-C): reading it is a system call that
            // took 4.9-7.6 µs here right before the first timed call (a 20-call window of
            // a 128 KiB exchange, 8 µs a call, lost about 4% to it), where the peers read
            // only a wall clock.
            let cputime = args.report_cputime > 0;
            let (t0, cpu0) = (Instant::now(), if cputime { cpu_secs() } else { 0.0 });
            for _ in 0..calls {
                once(comm, buf, output)?;
            }
            let mine = if cputime { cpu_secs() - cpu0 } else { t0.elapsed().as_secs_f64() } / calls as f64;
            // What ran, before the reporting calls below run their own.
            algo = comm.last_algorithm().or(algo);
            let t = [reported(comm, mine, args.average)?];
            let wrong_count = if args.check > 0 {
                output.fill(0);
                if in_place {
                    reset(buf);
                }
                once(comm, buf, output)?;
                let result = if in_place { &buf[out_at..out_at + out_len] } else { &output[..] };
                let mut w = [wrong(&spec, rank, dtype, op, result) as i64];
                comm.all_reduce_in_place(&mut w, RedOp::Sum)?;
                Some(w[0] as u64)
            } else {
                None
            };
            let algbw = if t[0] > 0.0 { shown as f64 / t[0] / 1e9 } else { 0.0 };
            halves.push(Half {
                time_us: t[0] * 1e6,
                algbw_gb_per_sec: algbw,
                busbw_gb_per_sec: algbw * c.bus_bandwidth_factor(p),
                wrong: wrong_count,
            });
        }
        let mut halves = halves.into_iter();
        let out_of_place = halves.next().context("out-of-place half")?;
        let in_place = halves.next();
        rows.push(Row {
            size: shown,
            count,
            dtype: nccl_type(dtype).into(),
            redop: if c.reduces() { op.as_str().into() } else { "none".into() },
            root: if rooted { args.root as i64 } else { -1 },
            out_of_place,
            in_place,
            algo: algo.map_or("none".into(), |a: Algorithm| a.as_str().to_string()),
        });
        size = match args.stepfactor {
            Some(f) => size.saturating_mul(f),
            None => size.saturating_add(step),
        };
        if size == 0 {
            break;
        }
    }
    Ok(rows)
}

/// The process's CPU time (user and system, all threads), in seconds.
fn cpu_secs() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `t` is.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// The time every rank reports (`-a`, as nccl-tests): rank 0's, the mean, the minimum
/// or the maximum over ranks.
fn reported(comm: &mut Communicator, mine: f64, average: u32) -> Result<f64> {
    let (mut t, op) = match average {
        0 => ([if comm.rank() == 0 { mine } else { 0.0 }], RedOp::Sum),
        1 => ([mine], RedOp::Avg),
        2 => ([mine], RedOp::Min),
        _ => ([mine], RedOp::Max),
    };
    comm.all_reduce_in_place(&mut t, op)?;
    Ok(t[0])
}

/// C's `%g` (six significant digits, trailing zeros dropped), as nccl-tests prints the
/// average bus bandwidth.
pub fn format_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { format!("{v}") };
    }
    let exp = v.abs().log10().floor() as i32;
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..6).contains(&exp) {
        let s = format!("{v:.5e}");
        let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!("{}e{}{:02}", trim(mantissa.to_string()), if e < 0 { '-' } else { '+' }, e.abs())
    } else {
        let decimals = (5 - exp).max(0) as usize;
        trim(format!("{v:.decimals$}"))
    }
}

fn nccl_type(d: Dtype) -> &'static str {
    match d {
        Dtype::F32 => "float",
        Dtype::F64 => "double",
        Dtype::F16 => "half",
        Dtype::Bf16 => "bfloat16",
        Dtype::I32 => "int32",
        Dtype::I64 => "int64",
        Dtype::U8 => "uint8",
    }
}

fn report(args: &PerfArgs, rows: &[Row], ranks: usize) -> Result<String> {
    if args.format == Format::Json {
        return Ok(serde_json::to_string_pretty(rows)? + "\n");
    }
    let time_label = if args.report_cputime > 0 { "cputime" } else { "time" };
    let mut out = format!(
        "# railyard perf {}\n# nRanks {ranks} minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} validation: {}\n#\n",
        args.collective,
        args.minbytes,
        args.maxbytes,
        args.stepfactor.map_or(format!("{}(bytes)", args.stepbytes), |f| format!("{f}(factor)")),
        args.warmup,
        args.iters,
        args.check
    );
    out.push_str(&format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          \n",
        "", "", "", "", ""
    ));
    out.push_str(&format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  algo\n",
        "size",
        "count",
        "type",
        "redop",
        "root",
        time_label,
        "algbw",
        "busbw",
        "#wrong",
        time_label,
        "algbw",
        "busbw",
        "#wrong"
    ));
    out.push_str(&format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}\n",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""
    ));
    let mut busbw_sum = 0.0;
    let mut measured = 0usize;
    let mut wrong_total = 0;
    for r in rows {
        out.push_str(&format!("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", r.size, r.count, r.dtype, r.redop, r.root));
        for h in [Some(&r.out_of_place), r.in_place.as_ref()] {
            let Some(h) = h else {
                out.push_str(&format!("  {:>7}  {:>6}  {:>6}  {:>6}", "N/A", "N/A", "N/A", "N/A"));
                continue;
            };
            measured += 1;
            let w = h.wrong.map_or("   N/A".to_string(), |w| format!("{w:>6}"));
            out.push_str(&format!(
                "  {}  {}  {}  {w}",
                fit(h.time_us, 7),
                fit(h.algbw_gb_per_sec, 6),
                fit(h.busbw_gb_per_sec, 6)
            ));
            busbw_sum += h.busbw_gb_per_sec;
            wrong_total += h.wrong.unwrap_or(0);
        }
        out.push_str(&format!("  {}\n", r.algo));
    }
    let avg = if measured == 0 { 0.0 } else { busbw_sum / measured as f64 };
    let avg = format_g(avg);
    out.push_str(&format!(
        "# Out of bounds values : {wrong_total} {}\n# Avg bus bandwidth    : {avg}\n#\n",
        if wrong_total == 0 { "OK" } else { "FAILED" }
    ));
    if wrong_total > 0 {
        bail!("{out}{wrong_total} wrong elements");
    }
    Ok(out)
}

/// The nccl-tests flags that have no meaning here are refused, saying why; the others
/// are checked before any rank starts.
fn check_flags(args: &PerfArgs, c: Collective) -> Result<()> {
    if args.ngpus != 1 {
        bail!(
            "-g {}: railyard drives no GPUs (ranks move host memory); start more ranks with --np or a launcher",
            args.ngpus
        );
    }
    if args.nthreads != 1 {
        bail!("-t {}: one rank per process here; start more ranks with --np or a launcher", args.nthreads);
    }
    if args.average > 3 {
        bail!("-a {}: 0 (rank 0), 1 (average), 2 (minimum) or 3 (maximum)", args.average);
    }
    if args.agg_iters == 0 || args.agg_iters > 1 << 20 {
        bail!("-m {}: 1..=1048576 calls per iteration", args.agg_iters);
    }
    if args.run_cycles == 0 || args.run_cycles > 1 << 20 {
        bail!("-N {}: give a number of cycles, 1..=1048576 (nccl-tests' 0 runs forever; stop a job with a count or --timeout instead)", args.run_cycles);
    }
    if let Some(t) = args.timeout {
        if !(t > 0.0 && t <= 86_400.0) {
            bail!("-T {t}: a timeout of 0..=86400 seconds");
        }
    }
    if let Some(a) = args.algo {
        let runs = if c == Collective::SendRecv { Collective::AllToAllv } else { c };
        if !a.supports(runs) || a.in_switch() {
            let can: Vec<&str> =
                Algorithm::ALL.iter().filter(|x| x.supports(runs) && !x.in_switch()).map(|x| x.as_str()).collect();
            bail!("--algo {a} does not implement {} here; it runs with {}", c.as_str(), can.join(", "));
        }
    }
    Ok(())
}

pub fn run(args: &PerfArgs) -> Result<String> {
    let c = collective(&args.collective)?;
    check_flags(args, c)?;
    let mut config = Config::from_env()?;
    if let Some(t) = args.timeout {
        config.timeout = std::time::Duration::from_secs_f64(t);
    }
    let cycles = |comm: &mut Communicator, ranks: usize| -> Result<String> {
        let mut out = String::new();
        for _ in 0..args.run_cycles {
            let rows = rank_body(args, comm)?;
            if comm.rank() == 0 {
                out += &report(args, &rows, ranks)?;
            }
        }
        Ok(out)
    };
    if let Some(launch) = from_env()? {
        let mut comm = Communicator::init(&launch.id, launch.rank, launch.size, config)?;
        return cycles(&mut comm, launch.size);
    }
    let np = args.np.unwrap_or(1);
    if np == 0 || np > 64 {
        bail!("--np must be 1..=64 local ranks");
    }
    if np == 1 {
        let id = UniqueId::new("127.0.0.1:0".parse()?)?;
        let mut comm = Communicator::init(&id, 0, 1, config)?;
        return cycles(&mut comm, 1);
    }
    crate::ranks::spawn_ranks(np, &crate::ranks::strip_np(std::env::args().skip(1).collect()))
}

#[cfg(test)]
mod tests {
    use super::format_g;

    /// printf("%g") for the values a summary line holds.
    #[test]
    fn summary_numbers_are_formatted_as_c_does() {
        for (v, want) in [
            (0.0, "0"),
            (12.0, "12"),
            (0.209396123, "0.209396"),
            (382.99, "382.99"),
            (123456.7, "123457"),
            (1234567.0, "1.23457e+06"),
            (0.00001234, "1.234e-05"),
            (0.0001, "0.0001"),
            (20.5, "20.5"),
        ] {
            assert_eq!(format_g(v), want, "{v}");
        }
    }
}

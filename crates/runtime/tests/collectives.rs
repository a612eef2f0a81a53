//! Ranks as threads over shared-memory rings and over real TCP sockets on loopback:
//! every collective x every algorithm
//! the schedule crate offers for it (but in-network) x rank counts 1, 2, 3, 4, 5, 8 x each
//! dtype x each op, on sizes 0, 1, P+1 and 37 elements. Integer results must be exact
//! (with wrapping, as NCCL's), float results within 1e-2 relative (f16 / bf16 rounding).

use std::time::Duration;

use half::{bf16, f16};
use railyard_runtime::{CommError, Communicator, Config, RedOp, UniqueId};
use railyard_schedule::{Algorithm, Collective, CollectiveSpec, Dtype};

mod common;
use common::{free_addr, with_ranks};

fn value(r: usize, i: usize) -> i64 {
    ((r * 7 + i * 3) % 3) as i64 + 1
}

fn encode(dtype: Dtype, vals: &[i64]) -> Vec<u8> {
    vals.iter()
        .flat_map(|&v| match dtype {
            Dtype::F32 => (v as f32).to_ne_bytes().to_vec(),
            Dtype::F64 => (v as f64).to_ne_bytes().to_vec(),
            Dtype::F16 => f16::from_f64(v as f64).to_ne_bytes().to_vec(),
            Dtype::Bf16 => bf16::from_f64(v as f64).to_ne_bytes().to_vec(),
            Dtype::I32 => (v as i32).to_ne_bytes().to_vec(),
            Dtype::I64 => v.to_ne_bytes().to_vec(),
            Dtype::U8 => vec![v as u8],
        })
        .collect()
}

fn decode(dtype: Dtype, bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(dtype.size_bytes() as usize)
        .map(|c| match dtype {
            Dtype::F32 => f32::from_ne_bytes(c.try_into().unwrap()) as f64,
            Dtype::F64 => f64::from_ne_bytes(c.try_into().unwrap()),
            Dtype::F16 => f16::from_ne_bytes(c.try_into().unwrap()).to_f64(),
            Dtype::Bf16 => bf16::from_ne_bytes(c.try_into().unwrap()).to_f64(),
            Dtype::I32 => i32::from_ne_bytes(c.try_into().unwrap()) as f64,
            Dtype::I64 => i64::from_ne_bytes(c.try_into().unwrap()) as f64,
            Dtype::U8 => c[0] as f64,
        })
        .collect()
}

/// The reduction of `vals` as `dtype` computes it (integers wrap; avg truncates for integers).
fn reference(dtype: Dtype, op: RedOp, vals: &[i64], p: usize) -> f64 {
    let int = !matches!(dtype, Dtype::F32 | Dtype::F64 | Dtype::F16 | Dtype::Bf16);
    let wrap = |x: i64| match dtype {
        Dtype::I32 => x as i32 as i64,
        Dtype::U8 => x as u8 as i64,
        _ => x,
    };
    match op {
        RedOp::Sum => vals.iter().fold(0i64, |a, &b| wrap(a.wrapping_add(b))) as f64,
        RedOp::Prod => vals.iter().fold(1i64, |a, &b| wrap(a.wrapping_mul(b))) as f64,
        RedOp::Min => *vals.iter().min().unwrap() as f64,
        RedOp::Max => *vals.iter().max().unwrap() as f64,
        RedOp::Avg => {
            let s = vals.iter().fold(0i64, |a, &b| wrap(a.wrapping_add(b)));
            if int {
                (s / p as i64) as f64
            } else {
                s as f64 / p as f64
            }
        }
    }
}

fn close(dtype: Dtype, got: f64, want: f64) -> bool {
    match dtype {
        Dtype::F16 | Dtype::Bf16 => (got - want).abs() <= 1e-2 * want.abs().max(1.0),
        Dtype::F32 | Dtype::F64 => (got - want).abs() <= 1e-6 * want.abs().max(1.0),
        _ => got == want,
    }
}

/// Every (collective, algorithm) pair the runtime runs.
fn pairs() -> Vec<(Collective, Algorithm)> {
    let mut v = Vec::new();
    for c in Collective::ALL {
        for a in Algorithm::ALL {
            if a.supports(c) && !a.in_switch() && c != Collective::AllToAllv {
                v.push((c, a));
            }
        }
    }
    v
}

/// One call on one rank: inputs from `value`, checked against the reference.
fn one_call(
    comm: &mut Communicator,
    c: Collective,
    a: Algorithm,
    dtype: Dtype,
    op: RedOp,
    count: u64,
    in_place: bool,
) -> Result<(), String> {
    let (r, p) = (comm.rank(), comm.size());
    let spec = CollectiveSpec::new(c, p, count).with_root(p / 2).with_peer(p - 1);
    let input_len = spec.input_len(r) as usize;
    let input_offset = |q: usize| -> usize {
        // What a rank's input element i is, as a global index: for all-gather and gather
        // the rank's chunk offset; otherwise i.
        match c {
            Collective::AllGather | Collective::Gather => spec.parts()[q].start as usize,
            _ => 0,
        }
    };
    let vals: Vec<i64> = (0..input_len).map(|i| value(r, i + input_offset(r))).collect();
    let input = encode(dtype, &vals);
    let elem = dtype.size_bytes() as usize;
    let out_len = spec.output_len(r) as usize * elem;
    let got = if in_place {
        // One buffer laid out as the spec says: the input inside the output or the other way round.
        let layout = spec.in_place_layout(r);
        let (in_at, out_at) = (layout.input_at as usize * elem, layout.output_at as usize * elem);
        let mut buf = vec![0u8; layout.len as usize * elem];
        buf[in_at..in_at + input.len()].copy_from_slice(&input);
        comm.run_in_place(&spec, Some(a), &mut buf, dtype, op).map_err(|e| e.to_string())?;
        decode(dtype, &buf[out_at..out_at + out_len])
    } else {
        let mut output = vec![0u8; out_len];
        comm.run(&spec, Some(a), &input, &mut output, dtype, op).map_err(|e| e.to_string())?;
        decode(dtype, &output)
    };
    for (i, (index, who)) in spec.expected_output(r).into_iter().enumerate() {
        let want = match who {
            railyard_schedule::Contributors::All => {
                let all: Vec<i64> = (0..p).map(|q| value(q, index as usize)).collect();
                reference(dtype, op, &all, p)
            }
            railyard_schedule::Contributors::One(q) => {
                let v = value(q, index as usize + input_offset(q));
                decode(dtype, &encode(dtype, &[v]))[0]
            }
        };
        if !close(dtype, got[i], want) {
            return Err(format!(
                "{c:?} {a} {dtype} {op:?} P={p} count={count} in place {in_place}: rank {r} element {i} is {} not {want}",
                got[i]
            ));
        }
    }
    Ok(())
}

#[test]
fn every_collective_algorithm_dtype_and_op_over_shm_and_tcp() {
    for (p, shm) in [1usize, 2, 3, 4, 5, 8].into_iter().flat_map(|p| [(p, true), (p, false)]) {
        let results = with_ranks(p, Config { shm, ..Config::default() }, move |comm| -> Result<usize, String> {
            let mut comm = comm.map_err(|e| e.to_string())?;
            let mut calls = 0;
            for (c, a) in pairs() {
                let ops: &[RedOp] = if c.reduces() { &RedOp::ALL } else { &[RedOp::Sum] };
                for dtype in Dtype::ALL {
                    for &op in ops {
                        for (count, in_place) in
                            [0, 1, p as u64 + 1, 37].into_iter().flat_map(|n| [(n, false), (n, true)])
                        {
                            match one_call(&mut comm, c, a, dtype, op, count, in_place) {
                                Ok(()) => calls += 1,
                                // rhd refuses reduce-scatter / all-gather off powers of two, on every rank alike.
                                Err(e) if e.contains("power of two") => {}
                                Err(e) => return Err(e),
                            }
                        }
                    }
                }
            }
            Ok(calls)
        });
        for r in results {
            let calls = r.unwrap_or_else(|e| panic!("P={p}: {e}"));
            assert!(calls > 100, "P={p}: only {calls} calls");
        }
    }
}

/// Chain and trees cut into pipelined chunks (what the tuner may pick for broadcasts and
/// reduces on a roomy machine; the matrix above forces one chunk): every element right,
/// counts that do and do not divide into the chunks, in and out of place.
#[test]
fn pipelined_chain_and_tree_broadcasts_and_reduces() {
    for p in [3usize, 4] {
        let results = with_ranks(p, Config { pipeline_chunks: Some(4), ..Config::default() }, move |comm| {
            let mut comm = comm.map_err(|e| e.to_string())?;
            for a in [Algorithm::Chain, Algorithm::Tree] {
                for c in [Collective::Broadcast, Collective::Reduce] {
                    for (count, in_place) in [3u64, 4, 37, 4099].into_iter().flat_map(|n| [(n, false), (n, true)]) {
                        one_call(&mut comm, c, a, Dtype::F32, RedOp::Sum, count, in_place)?;
                    }
                }
            }
            Ok::<(), String>(())
        });
        for r in results {
            r.unwrap_or_else(|e| panic!("P={p}: {e}"));
        }
    }
}

/// Shared-memory frames that fit in a cache line are padded to end on one: frames of
/// every payload length modulo 64 (3 ranks, byte elements: the ring algorithms' chunks
/// are a third of the count) and some longer than the ring (read byte-wise) go round a
/// one-page ring in order.
#[test]
fn frames_of_every_length_go_round_a_one_page_ring() {
    let config = Config { shm: true, cma: false, shm_ring_bytes: 4096, ..Config::default() };
    let results = with_ranks(3, config, |comm| -> Result<usize, String> {
        let mut comm = comm.map_err(|e| e.to_string())?;
        let mut calls = 0;
        let counts = (0..70u64).map(|k| 3 * k).chain([3 * 4095, 3 * 4096 + 1, 3 * 5000]);
        for count in counts {
            for (c, a) in [(Collective::AllGather, Algorithm::Ring), (Collective::AllReduce, Algorithm::Ring)] {
                one_call(&mut comm, c, a, Dtype::U8, RedOp::Sum, count, count % 2 == 0)?;
                calls += 1;
            }
        }
        Ok(calls)
    });
    for r in results {
        assert_eq!(r.unwrap_or_else(|e| panic!("{e}")), 2 * 73);
    }
}

#[test]
fn typed_api_and_in_place() {
    let results = with_ranks(3, Config::default(), |comm| {
        let mut comm = comm.unwrap();
        let r = comm.rank() as f32;
        let mut buf = vec![r; 5];
        comm.all_reduce_in_place(&mut buf, RedOp::Sum).unwrap();
        let mut b = if comm.rank() == 1 { vec![7i32; 4] } else { vec![0i32; 4] };
        comm.broadcast(&mut b, 1).unwrap();
        comm.barrier().unwrap();
        // 7 elements over 3 ranks: chunks [0,3) [3,5) [5,7) (the balanced partition).
        let chunk = [0..3, 3..5, 5..7][comm.rank()].clone();
        let mut g = vec![-1i64; 7];
        g[chunk.clone()].iter_mut().for_each(|x| *x = 10 + comm.rank() as i64);
        comm.all_gather_in_place(&mut g).unwrap();
        let mut rs: Vec<i32> = (0..7).map(|i| i * (comm.rank() as i32 + 1)).collect();
        comm.reduce_scatter_in_place(&mut rs, RedOp::Sum).unwrap();
        (buf, b, g, rs[chunk.clone()].to_vec(), chunk)
    });
    for (buf, b, g, rs, chunk) in results {
        assert_eq!(buf, vec![3.0; 5]);
        assert_eq!(b, vec![7; 4]);
        assert_eq!(g, vec![10, 10, 10, 11, 11, 12, 12]);
        // Sum over ranks of i*(r+1) = 6i.
        assert_eq!(rs, chunk.map(|i| 6 * i as i32).collect::<Vec<_>>());
    }
}

/// A mismatched call: what each rank runs, given its rank.
type Mismatched = fn(&mut Communicator) -> Result<(), CommError>;

fn all_reduce_of(comm: &mut Communicator, n: usize, dtype: Dtype, op: RedOp, algo: Algorithm) -> Result<(), CommError> {
    let spec = CollectiveSpec::new(Collective::AllReduce, comm.size(), n as u64);
    let bytes = n * dtype.size_bytes() as usize;
    comm.run(&spec, Some(algo), &vec![0u8; bytes], &mut vec![0u8; bytes], dtype, op)
}

/// Each field of a call, mismatched on one rank, fails every rank in that call long
/// before the timeout (the detecting rank's abort reaches the others; see
/// `agreement.rs` for why no rank can finish it), and every message names the field
/// with both values. A wrong frame count or a timeout would not name them.
#[test]
fn each_mismatched_field_fails_every_rank_naming_the_field_and_both_values() {
    let cases: [(&str, usize, Mismatched, [&str; 2]); 8] = [
        // Matrices with the same largest row (the size field) that differ in rank 0's row.
        (
            "all-to-allv counts",
            2,
            |c| {
                let counts = if c.rank() == 0 { vec![vec![1, 2], vec![3, 4]] } else { vec![vec![2, 1], vec![3, 4]] };
                let (sent, got) =
                    (counts[c.rank()].iter().sum::<u64>(), counts.iter().map(|r| r[c.rank()]).sum::<u64>());
                c.all_to_allv(&vec![1.0f32; sent as usize], &mut vec![0.0f32; got as usize], counts)
            },
            ["digest", "digest"],
        ),
        (
            "size",
            2,
            |c| all_reduce_of(c, 8 + 8 * c.rank(), Dtype::F32, RedOp::Sum, Algorithm::Ring),
            ["8 elements", "16 elements"],
        ),
        (
            "dtype",
            2,
            |c| all_reduce_of(c, 8, [Dtype::F32, Dtype::I32][c.rank()], RedOp::Sum, Algorithm::Ring),
            ["f32", "i32"],
        ),
        (
            "op",
            2,
            |c| all_reduce_of(c, 8, Dtype::F32, [RedOp::Sum, RedOp::Max][c.rank()], Algorithm::Ring),
            ["sum", "max"],
        ),
        (
            "algorithm",
            2,
            |c| all_reduce_of(c, 8, Dtype::F32, RedOp::Sum, [Algorithm::Ring, Algorithm::Rhd][c.rank()]),
            ["ring", "rhd"],
        ),
        (
            "root",
            3,
            |c| {
                let spec = CollectiveSpec::new(Collective::Broadcast, 3, 8).with_root(usize::from(c.rank() == 2));
                let mut buf = vec![0u8; 32];
                c.run_in_place(&spec, Some(Algorithm::Chain), &mut buf, Dtype::F32, RedOp::Sum)
            },
            ["0", "1"],
        ),
        (
            "collective",
            2,
            |c| {
                if c.rank() == 0 {
                    all_reduce_of(c, 8, Dtype::F32, RedOp::Sum, Algorithm::Ring)
                } else {
                    let mut out = vec![0.0f32; 16];
                    c.all_gather(&[1.0f32; 8], &mut out)
                }
            },
            ["allreduce", "allgather"],
        ),
        // Calls in a different order: the first call already differs.
        (
            "collective",
            2,
            |c| {
                let mut buf = vec![1.0f32; 8];
                if c.rank() == 0 {
                    all_reduce_of(c, 8, Dtype::F32, RedOp::Sum, Algorithm::Ring)?;
                    c.broadcast(&mut buf, 0)
                } else {
                    c.broadcast(&mut buf, 0)?;
                    all_reduce_of(c, 8, Dtype::F32, RedOp::Sum, Algorithm::Ring)
                }
            },
            ["allreduce", "broadcast"],
        ),
    ];
    let timeout = Duration::from_secs(20);
    for (field, p, call, values) in cases {
        let config = Config { timeout, ..Config::default() };
        let results = with_ranks(p, config, move |comm| {
            let mut comm = comm.unwrap();
            let start = std::time::Instant::now();
            let first = call(&mut comm);
            // The error is sticky.
            let second = comm.barrier();
            (first.err().map(|e| e.to_string()), matches!(second, Err(CommError::Broken(_))), start.elapsed())
        });
        for (rank, (err, sticky, took)) in results.into_iter().enumerate() {
            let err = err.unwrap_or_else(|| panic!("{field}: rank {rank} saw no error"));
            eprintln!("{field}, rank {rank}, {took:?}: {err}");
            assert!(sticky, "{field}: rank {rank}'s error is not sticky");
            assert!(err.contains(&format!("{field} differs")), "{field}: rank {rank}: {err}");
            for v in values {
                assert!(err.contains(v), "{field}: rank {rank} does not name {v}: {err}");
            }
            // Found by the frames, not by the 20 s timeout.
            assert!(took < timeout / 4, "{field}: rank {rank} took {took:?}: {err}");
        }
    }
}

/// A broadcast on a 3-rank call: every rank's buffer starts as 10 + rank.
fn broadcast_from(c: &mut Communicator, root: usize, algo: Algorithm) -> Result<Vec<f32>, CommError> {
    let spec = CollectiveSpec::new(Collective::Broadcast, c.size(), 8).with_root(root);
    let mut buf: Vec<f32> = vec![10.0 + c.rank() as f32; 8];
    let bytes: &mut [u8] = bytemuck_f32(&mut buf);
    c.run_in_place(&spec, Some(algo), bytes, Dtype::F32, RedOp::Sum).map(|()| buf)
}

fn bytemuck_f32(v: &mut [f32]) -> &mut [u8] {
    // SAFETY: f32 has no padding and any bytes are a valid u8; the length is in bytes.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

/// Issue 41: ranks that disagree on a call's root, collective or algorithm all fail in
/// that call (no barrier after it, no rank returns its result), within a second, each
/// error naming the field and both values. Over shared memory and TCP, with each
/// disagreeing rank in turn, and the broadcast on its chain, direct and tree forms.
#[test]
fn a_call_that_ranks_disagree_on_fails_on_every_rank_in_that_call() {
    type Case = (&'static str, fn(&mut Communicator) -> Result<Vec<f32>, CommError>, [&'static str; 2]);
    let cases: [Case; 7] = [
        // The trial: rank 0 on root 0, ranks 1 and 2 on root 1.
        ("root", |c| broadcast_from(c, usize::from(c.rank() != 0), Algorithm::Chain), ["0", "1"]),
        ("root", |c| broadcast_from(c, usize::from(c.rank() != 0), Algorithm::Direct), ["0", "1"]),
        ("root", |c| broadcast_from(c, usize::from(c.rank() == 2), Algorithm::Tree), ["0", "1"]),
        (
            "collective",
            |c| match c.rank() {
                0 => all_reduce_of(c, 8, Dtype::F32, RedOp::Sum, Algorithm::Ring).map(|()| vec![]),
                _ => broadcast_from(c, 0, Algorithm::Direct),
            },
            ["allreduce", "broadcast"],
        ),
        (
            "collective",
            |c| match c.rank() {
                2 => all_reduce_of(c, 8, Dtype::F32, RedOp::Sum, Algorithm::Ring).map(|()| vec![]),
                _ => broadcast_from(c, 0, Algorithm::Chain),
            },
            ["allreduce", "broadcast"],
        ),
        (
            "algorithm",
            |c| {
                let a = if c.rank() == 1 { Algorithm::Rhd } else { Algorithm::Ring };
                all_reduce_of(c, 8, Dtype::F32, RedOp::Sum, a).map(|()| vec![])
            },
            ["ring", "rhd"],
        ),
        (
            "algorithm",
            |c| broadcast_from(c, 0, if c.rank() == 0 { Algorithm::Direct } else { Algorithm::Chain }),
            ["direct", "chain"],
        ),
    ];
    let timeout = Duration::from_secs(20);
    for shm in [true, false] {
        for (field, call, values) in cases {
            for run in 0..20 {
                let config = Config { timeout, shm, ..Config::default() };
                let results = with_ranks(3, config, move |comm| {
                    let mut comm = comm.unwrap();
                    let start = std::time::Instant::now();
                    let got = call(&mut comm);
                    (got, start.elapsed())
                });
                for (rank, (got, took)) in results.into_iter().enumerate() {
                    let what = format!("{field} (shm {shm}, run {run}), rank {rank}");
                    let err = match got {
                        Ok(data) => panic!("{what} returned {data:?}"),
                        Err(e) => e.to_string(),
                    };
                    assert!(err.contains(&format!("{field} differs")), "{what}: {err}");
                    for v in values {
                        assert!(err.contains(v), "{what} does not name {v}: {err}");
                    }
                    assert!(took < Duration::from_secs(1), "{what} took {took:?}: {err}");
                }
            }
        }
    }
}

#[test]
fn a_connection_without_the_secret_is_refused() {
    let addr = free_addr();
    let id = UniqueId::new(addr).unwrap();
    let handles: Vec<_> = (0..2)
        .map(|r| {
            let id = id.clone();
            std::thread::spawn(move || {
                Communicator::init(&id, r, 2, Config { timeout: Duration::from_secs(10), ..Config::default() })
                    .map(|c| c.rank())
            })
        })
        .collect();
    // An intruder that knows the address but not the secret.
    std::thread::sleep(Duration::from_millis(50));
    if let Ok(mut s) = std::net::TcpStream::connect(addr) {
        use std::io::Write;
        let _ = s.write_all(&[0x42; 46]);
    }
    for h in handles {
        assert!(h.join().unwrap().is_ok());
    }
}

/// Issue 41: a joiner with another job's secret is told so (it read "failed to fill whole
/// buffer" before), and the job it tried to join still forms; so is a joiner that counts
/// another number of ranks.
#[test]
fn a_joiner_with_the_wrong_secret_or_size_is_told_why() {
    let addr = free_addr();
    let id = UniqueId::new(addr).unwrap();
    let config = Config { timeout: Duration::from_secs(10), ..Config::default() };
    let join = |r: usize| {
        let (id, config) = (id.clone(), config.clone());
        std::thread::spawn(move || Communicator::init(&id, r, 2, config).map(|c| c.rank()))
    };
    // Rank 0 waits for its rank 1; the wrong ones come first.
    let rank0 = join(0);
    let short = Config { timeout: Duration::from_secs(5), ..Config::default() };
    let wrong_secret = UniqueId { secret: id.secret ^ 1, ..id.clone() };
    let err = Communicator::init(&wrong_secret, 1, 2, short.clone()).err().expect("refused").to_string();
    assert!(err.contains("secret does not match"), "{err}");
    let err = Communicator::init(&id, 1, 3, short).err().expect("refused").to_string();
    assert!(err.contains("does not have 3 ranks"), "{err}");
    let rank1 = join(1);
    for h in [rank0, rank1] {
        assert!(h.join().unwrap().is_ok());
    }
}

/// Issue 41: a connection to the rendezvous port that says nothing does not hold the job
/// up (it delayed the start by about 2 s: rank 0 read each connection to the end first).
#[test]
fn an_idle_connection_does_not_delay_the_job() {
    let addr = free_addr();
    let id = UniqueId::new(addr).unwrap();
    let join = |r: usize| {
        let id = id.clone();
        std::thread::spawn(move || {
            let c = Communicator::init(&id, r, 3, Config { timeout: Duration::from_secs(20), ..Config::default() });
            (c.map(|c| c.rank()), std::time::Instant::now())
        })
    };
    let rank0 = join(0);
    // An idle connection, made once rank 0 listens and before the others join.
    let idle = (0..500)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(2));
            std::net::TcpStream::connect(addr).ok()
        })
        .expect("rank 0 listens");
    let start = std::time::Instant::now();
    let others = [join(1), join(2)];
    for h in std::iter::once(rank0).chain(others) {
        let (c, done) = h.join().unwrap();
        assert!(c.is_ok(), "{c:?}");
        let took = done.duration_since(start);
        assert!(took < Duration::from_secs(1), "the job took {took:?} to form after the others joined");
    }
    drop(idle);
}

#[test]
fn a_rank_that_disappears_makes_the_others_fail_not_hang() {
    let config = Config { timeout: Duration::from_secs(3), ..Config::default() };
    let started = std::time::Instant::now();
    let results = with_ranks(3, config, |comm| {
        let mut comm = comm.unwrap();
        if comm.rank() == 2 {
            drop(comm); // closes every socket, like a killed process
            return None;
        }
        let send = vec![1.0f64; 1 << 16];
        let mut recv = vec![0.0f64; 1 << 16];
        Some(comm.all_reduce(&send, &mut recv, RedOp::Sum))
    });
    assert!(started.elapsed() < Duration::from_secs(3 + 5));
    for r in results.into_iter().flatten() {
        assert!(r.is_err());
    }
}

#[test]
fn async_handles_point_to_point_and_rooted_calls() {
    use railyard_runtime::AsyncCommunicator;
    let results = with_ranks(3, Config::default(), |comm| {
        let mut comm = comm.unwrap();
        let r = comm.rank();
        // Point to point between 0 and 2; rank 1 skips it and stays in step.
        if r == 0 {
            comm.send(&[1u8, 2, 3], 2).unwrap();
        } else if r == 2 {
            let mut b = [0u8; 3];
            comm.recv(&mut b, 0).unwrap();
            assert_eq!(b, [1, 2, 3]);
        }
        // Gather / scatter of 7 elements (chunks 3, 2, 2).
        let parts = [0..3usize, 3..5, 5..7];
        let mine: Vec<i64> = parts[r].clone().map(|i| i as i64 * 10).collect();
        let mut all = if r == 1 { vec![0i64; 7] } else { Vec::new() };
        comm.gather(&mine, &mut all, 7, 1).unwrap();
        if r == 1 {
            assert_eq!(all, (0..7).map(|i| i * 10).collect::<Vec<i64>>());
        }
        let whole: Vec<i64> = if r == 0 { (100..107).collect() } else { Vec::new() };
        let mut part = vec![0i64; parts[r].len()];
        comm.scatter(&whole, &mut part, 7, 0).unwrap();
        assert_eq!(part, parts[r].clone().map(|i| 100 + i as i64).collect::<Vec<i64>>());
        // All-to-allv: rank i sends i + j + 1 elements to rank j.
        let counts: Vec<Vec<u64>> = (0..3).map(|i| (0..3).map(|j| (i + j + 1) as u64).collect()).collect();
        let send: Vec<i32> = (0..3).flat_map(|j| std::iter::repeat_n((r * 10 + j) as i32, r + j + 1)).collect();
        let mut recv = vec![0i32; (0..3).map(|i| i + r + 1).sum()];
        comm.all_to_allv(&send, &mut recv, counts).unwrap();
        let want: Vec<i32> = (0..3).flat_map(|i| std::iter::repeat_n((i * 10 + r) as i32, i + r + 1)).collect();
        assert_eq!(recv, want);
        // Two queued all-reduces, waited for out of order.
        let a = AsyncCommunicator::new(comm);
        let spec = railyard_schedule::CollectiveSpec::new(Collective::AllReduce, 3, 2);
        let input = |v: f32| [v, v].iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let mut h1 = a.start(spec.clone(), None, input(1.0), Dtype::F32, RedOp::Sum);
        let h2 = a.start(spec, None, input(r as f32), Dtype::F32, RedOp::Max);
        let second = h2.wait().unwrap();
        assert!(h1.test());
        let first = h1.wait().unwrap();
        (f32::from_ne_bytes(first[..4].try_into().unwrap()), f32::from_ne_bytes(second[..4].try_into().unwrap()))
    });
    for (sum, max) in results {
        assert_eq!((sum, max), (3.0, 2.0));
    }
}

/// Large messages through every path of the progress engine: shared memory with
/// single-copy pulls, shared memory through the rings only, and TCP striped over several
/// sockets per peer on the interface RAILYARD_SOCKET_IFNAME names — including sizes that
/// do not divide by the ranks or the sockets.
#[test]
fn large_messages_over_single_copy_rings_and_striped_sockets() {
    for (shm, cma, sockets) in [(true, true, 1), (true, false, 1), (false, false, 3)] {
        let config =
            Config { shm, cma, sockets_per_peer: sockets, socket_ifname: Some("lo".into()), ..Config::default() };
        let results = with_ranks(3, config, move |comm| -> Result<(Vec<usize>, Vec<bool>), String> {
            let mut comm = comm.map_err(|e| e.to_string())?;
            let (r, p, n) = (comm.rank(), comm.size(), 300_001usize);
            let send: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 + r as f32).collect();
            let mut sum = vec![0f32; n];
            comm.all_reduce(&send, &mut sum, RedOp::Sum).map_err(|e| e.to_string())?;
            let want = |i: usize| 3.0 * (i % 1000) as f32 + 3.0;
            if let Some(i) = (0..n).find(|&i| sum[i] != want(i)) {
                return Err(format!("all-reduce element {i}: {} != {}", sum[i], want(i)));
            }
            // All-gather of uneven chunks (n does not divide by 3): chunk of rank q holds q.
            let spec = CollectiveSpec::new(Collective::AllGather, p, n as u64);
            let mine = vec![r as i64; spec.chunk(r).end as usize - spec.chunk(r).start as usize];
            let mut all = vec![-1i64; n];
            comm.all_gather(&mine, &mut all).map_err(|e| e.to_string())?;
            for q in 0..p {
                let c = spec.chunk(q);
                if all[c.start as usize..c.end as usize].iter().any(|&v| v != q as i64) {
                    return Err(format!("all-gather chunk {q} wrong"));
                }
            }
            let mut b: Vec<u8> = if r == 2 { (0..n).map(|i| (i % 251) as u8).collect() } else { vec![0; n] };
            comm.broadcast(&mut b, 2).map_err(|e| e.to_string())?;
            if (0..n).any(|i| b[i] != (i % 251) as u8) {
                return Err("broadcast wrong".into());
            }
            // All-to-all: block j of rank r's send is r*10+j everywhere; received block q is q*10+r.
            let block = 70_001usize;
            let send: Vec<i32> = (0..p * block).map(|i| (r * 10 + i / block) as i32).collect();
            let mut got = vec![0i32; p * block];
            comm.all_to_all(&send, &mut got).map_err(|e| e.to_string())?;
            if (0..p * block).any(|i| got[i] != ((i / block) * 10 + r) as i32) {
                return Err("all-to-all wrong".into());
            }
            // All-gather with chunks past STREAM_MIN_BYTES: the own chunk's copy into the
            // output streams (copy.rs); every element keeps its place.
            let m = railyard_runtime::STREAM_MIN_BYTES / 4 + 5;
            let mine: Vec<i32> = (0..m).map(|i| (r * 1_000_000 + i % 999_983) as i32).collect();
            let mut all = vec![-1i32; m * p];
            comm.all_gather(&mine, &mut all).map_err(|e| e.to_string())?;
            if let Some(i) = (0..m * p).find(|&i| all[i] != ((i / m) * 1_000_000 + (i % m) % 999_983) as i32) {
                return Err(format!("large all-gather element {i}: {}", all[i]));
            }
            Ok((comm.lanes(), comm.single_copy()))
        });
        for (rank, res) in results.into_iter().enumerate() {
            let (lanes, single) = res.unwrap_or_else(|e| panic!("shm {shm} cma {cma} sockets {sockets}: {e}"));
            for peer in (0..3).filter(|&q| q != rank) {
                assert_eq!(lanes[peer], if shm { 1 } else { sockets }, "rank {rank} peer {peer}");
                // Where the kernel refuses cross-memory attach, the probe falls back to rings.
                assert!(!single[peer] || (shm && cma));
            }
        }
    }
}

#[test]
fn an_interface_that_does_not_exist_is_named_in_the_error() {
    let config = Config { socket_ifname: Some("=no-such-if0".into()), ..Config::default() };
    let results = with_ranks(2, config, |comm| comm.err().map(|e| e.to_string()));
    for e in results {
        let e = e.expect("init must fail");
        assert!(e.contains("RAILYARD_SOCKET_IFNAME==no-such-if0") && e.contains("lo"), "{e}");
    }
}

mod random_sizes {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]
        /// Random sizes, collectives, algorithms, dtypes, ops and in/out-of-place on 2–5
        /// ranks: results match the reference. (A communicator per case: each case is its own job.)
        #[test]
        fn random_calls_match_the_reference(p in 2usize..6, seed in any::<u64>(), calls in 1usize..6) {
            let all = pairs();
            let results = with_ranks(p, Config::default(), move |comm| -> Result<(), String> {
                let mut comm = comm.map_err(|e| e.to_string())?;
                let mut x = seed;
                for _ in 0..calls {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let (c, a) = all[(x >> 33) as usize % all.len()];
                    let dtype = Dtype::ALL[(x >> 20) as usize % Dtype::ALL.len()];
                    let op = RedOp::ALL[(x >> 12) as usize % RedOp::ALL.len()];
                    let count = (x >> 40) % 3000;
                    let in_place = (x >> 8) & 1 == 1;
                    match one_call(&mut comm, c, a, dtype, op, count, in_place) {
                        Ok(()) => {}
                        Err(e) if e.contains("power of two") => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            });
            for r in results {
                prop_assert!(r.is_ok(), "{:?}", r);
            }
        }
    }
}

/// Rank r's element i: magnitudes from 1e-3 to 1e3, so the order of additions shows.
fn mixed(r: usize, i: usize) -> f32 {
    ((i * 31 + r * 17) % 97) as f32 * 10f32.powi((r as i32 + i as i32) % 7 - 3)
}

/// Recursive doubling's partners add the same two values each round, so all ranks end
/// with the same bits even where float addition's order matters (values of mixed
/// magnitude), folded ranks (P = 3, 5, 6) included, in place too.
#[test]
fn recursive_doubling_gives_every_rank_the_same_bits() {
    for p in [2usize, 3, 4, 5, 6, 8] {
        let results = with_ranks(p, Config::default(), move |comm| -> Result<Vec<u32>, String> {
            let mut comm = comm.map_err(|e| e.to_string())?;
            let r = comm.rank();
            let n = 1000;
            let vals: Vec<f32> = (0..n).map(|i| mixed(r, i)).collect();
            let spec = CollectiveSpec::new(Collective::AllReduce, p, n as u64);
            let input: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
            let mut out = vec![0u8; input.len()];
            comm.run(&spec, Some(Algorithm::RecursiveDoubling), &input, &mut out, Dtype::F32, RedOp::Sum)
                .map_err(|e| e.to_string())?;
            // In place (round 0 sends the input, which the prologue's copy leaves as it is):
            // the same bits.
            let mut buf = input.clone();
            comm.run_in_place(&spec, Some(Algorithm::RecursiveDoubling), &mut buf, Dtype::F32, RedOp::Sum)
                .map_err(|e| e.to_string())?;
            if buf != out {
                return Err(format!("rank {r}: in place differs from out of place"));
            }
            Ok(out.chunks_exact(4).map(|c| u32::from_ne_bytes(c.try_into().unwrap())).collect())
        });
        let results: Vec<Vec<u32>> = results.into_iter().map(|r| r.unwrap_or_else(|e| panic!("P={p}: {e}"))).collect();
        for (rank, bits) in results.iter().enumerate() {
            assert!(bits == &results[0], "P={p}: rank {rank} differs from rank 0");
        }
        // And the sum is right to float precision.
        let want: f32 = (0..p).map(|r| mixed(r, 1)).sum();
        let got = f32::from_bits(results[0][1]);
        assert!((got - want).abs() <= 1e-5 * want.abs(), "P={p}: element 1 is {got}, not {want}");
    }
}

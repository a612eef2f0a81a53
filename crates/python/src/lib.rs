//! The native half of the `railyard` Python package (python/railyard): planning and the
//! models as JSON the Python side turns into objects, and a communicator that runs
//! collectives on buffers the Python side has checked (C-contiguous, alive, writable
//! where written, of the stated byte length). Bad arguments raise `ValueError` naming the
//! argument; a failed collective raises `railyard.CommError`; the GIL is released while
//! a collective runs.

mod buffer;

use std::sync::Mutex;

use buffer::{buffer, Buffer, Raw};

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use railyard_model::request::parse_algorithms;
use railyard_model::{plan, CollectiveRequest, ModelError};
use railyard_runtime::{from_env, Communicator, Config, RedOp};
use railyard_schedule::{Collective, CollectiveSpec, Dtype};

create_exception!(_native, CommError, PyRuntimeError, "A collective failed (a peer died, timed out or disagreed).");

fn value_error(field: &str, message: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{field}: {message}"))
}

/// `railyard plan --format json` for one collective on a topology.
#[pyfunction]
#[pyo3(signature = (topo, collective, size_bytes, dtype, algo, root, channels, ranks=None))]
#[allow(clippy::too_many_arguments)]
fn plan_json(
    topo: &str,
    collective: &str,
    size_bytes: u64,
    dtype: &str,
    algo: &str,
    root: usize,
    channels: usize,
    ranks: Option<usize>,
) -> PyResult<String> {
    let topology = railyard_topology::load(topo).map_err(|e| value_error("topo", e))?;
    let collective: Collective = collective.parse().map_err(|e: String| value_error("collective", e))?;
    let dtype: Dtype = dtype.parse().map_err(|e: String| value_error("dtype", e))?;
    let (algorithms, strict) = parse_algorithms(algo, collective).map_err(|e| value_error("algo", e))?;
    let request = CollectiveRequest {
        root,
        channels,
        ranks,
        algorithms,
        strict,
        ..CollectiveRequest::new(collective, size_bytes, dtype.size_bytes(), vec![])
    };
    let result = plan(&topology, &request).map_err(|e| match e {
        ModelError::Placement(e) => value_error("ranks", e),
        ModelError::NothingRuns { skipped } => {
            let reasons: Vec<String> = skipped.iter().map(|(a, why)| format!("{a}: {why}")).collect();
            value_error("algo", format!("no algorithm can run here: {}", reasons.join("; ")))
        }
        // The resolver's field names, as this function's arguments name them.
        ModelError::BadInput { field, message } => match field.as_str() {
            "algorithms" => value_error("algo", message),
            "size" => value_error("size", message),
            f => value_error(f, message),
        },
        e @ ModelError::SizeNotMultiple { .. } => value_error("size", e),
        e => value_error("plan", e),
    })?;
    serde_json::to_string(&result).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Model `name` with `overrides_json` (an object of input fields, dotted keys descending
/// into objects and arrays): `{"inputs", "output"}`.
#[pyfunction]
fn model_json(name: &str, overrides_json: &str) -> PyResult<String> {
    let overrides: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(overrides_json).map_err(|e| value_error("overrides", e))?;
    let model = railyard_netmodels::registry::find(name).map_err(|e| value_error(name, e))?;
    let changes: Vec<(String, serde_json::Value)> = overrides.into_iter().collect();
    let inputs = railyard_netmodels::registry::Inputs { scenario: None, changes: &changes };
    let run = model.evaluate(&inputs, false).map_err(|e| value_error(name, e))?;
    Ok(format!("{{\"inputs\": {}, \"output\": {}}}", run.inputs_json, run.output_json))
}

/// The models `model_json` knows.
#[pyfunction]
fn models() -> Vec<&'static str> {
    railyard_netmodels::registry::MODELS.iter().map(|m| m.name).collect()
}

/// Run `command` as `np` local ranks under railyard's job supervisor (as `railyard launch`
/// does; the GIL released meanwhile): (the job's exit code, why it failed if it did).
/// SIGINT and SIGTERM go to the ranks while it runs and to Python's handlers after;
/// this process stays no reaper of what the ranks leave behind (its own children are
/// Python's to wait for).
#[pyfunction]
#[pyo3(signature = (command, np, timeout_secs=None, prefix=false))]
fn launch(
    py: Python<'_>,
    command: Vec<String>,
    np: usize,
    timeout_secs: Option<f64>,
    prefix: bool,
) -> PyResult<(i32, Option<String>)> {
    let (program, args) = command.split_first().ok_or_else(|| value_error("command", "nothing to launch"))?;
    let timeout = match timeout_secs {
        Some(t) if !(t > 0.0 && t <= 1e7) => return Err(value_error("timeout", format!("0..=1e7 seconds (got {t})"))),
        t => t.map(std::time::Duration::from_secs_f64),
    };
    let job = railyard_launch::Job {
        timeout,
        stdout: railyard_launch::Output::Lines { prefix },
        adopt_leftovers: false,
        ..railyard_launch::Job::new(np, std::ffi::OsStr::new(program), args)
    };
    let outcome = py.allow_threads(|| railyard_launch::run_job(&job)).map_err(|e| match e {
        railyard_launch::LaunchError::Ranks { .. } => value_error("np", e),
        e => PyRuntimeError::new_err(e.to_string()),
    })?;
    Ok(match outcome.failure {
        Some((reason, code)) => (code, Some(reason)),
        None => (0, None),
    })
}

/// `railyard plan-training` on a scenario's text (TOML: a `[job]` and any of the
/// chapter's sections); `engine` "model" or "sim"; `solve` as `--solve`. Its report as
/// JSON.
#[pyfunction]
#[pyo3(signature = (scenario, engine="model", solve=false))]
fn plan_training_json(py: Python<'_>, scenario: &str, engine: &str, solve: bool) -> PyResult<String> {
    let engine = match engine {
        "model" => railyard_planner::Engine::Model,
        "sim" => railyard_planner::Engine::Sim,
        other => return Err(value_error("engine", format!("\"{other}\": expected model or sim"))),
    };
    let parsed = railyard_planner::Scenario::parse(scenario).map_err(|e| value_error("scenario", e))?;
    let report = py.allow_threads(|| parsed.run(engine, solve)).map_err(|e| value_error("scenario", e))?;
    serde_json::to_string(&report).map_err(|e| value_error("scenario", e))
}

/// Point `point` of the sweep grid `grid_text` (a grid file's text; a plan-training
/// scenario's relative paths start at `grid_dir`): its record, one JSON line, as
/// `railyard sweep` writes it. What the Ray executor's tasks run.
#[pyfunction]
fn sweep_point(py: Python<'_>, grid_text: &str, grid_dir: &str, point: u64) -> PyResult<String> {
    py.allow_threads(|| railyard_cli::sweep_point(grid_text, std::path::Path::new(grid_dir), point))
        .map_err(|e| value_error("grid", format!("{e:#}")))
}

/// `railyard sim`, `analyze` or `explain-nccl` on a command line (without the program
/// name), run in this process: what the CLI prints. A bad argument is a ValueError with
/// the CLI's message, which names it.
#[pyfunction]
fn cli_json(py: Python<'_>, argv: Vec<String>) -> PyResult<String> {
    py.allow_threads(|| railyard_cli::run_report(&argv)).map_err(|e| value_error("argv", format!("{e:#}")))
}

/// A topology (preset spec or file) in the topology file format (JSON).
#[pyfunction]
fn topology_json(spec: &str) -> PyResult<String> {
    let topology = railyard_topology::load(spec).map_err(|e| value_error("topo", e))?;
    railyard_topology::file::write(&topology, railyard_topology::file::FileFormat::Json)
        .map_err(|e| value_error("topo", e))
}

/// A fresh rendezvous id for rank 0 to listen at and publish (`HOST:PORT#SECRET`): on the
/// interface RAILYARD_SOCKET_IFNAME names, else the one that routes towards `towards`
/// (the host the other ranks reach), else loopback.
#[pyfunction]
#[pyo3(signature = (towards=None))]
fn rendezvous_id(py: Python<'_>, towards: Option<&str>) -> PyResult<String> {
    let config = Config::from_env().map_err(|e| value_error("environment", e))?;
    // Resolving `towards` may wait on DNS: without the GIL.
    let addr = py
        .allow_threads(|| railyard_runtime::rendezvous_addr(&config, towards))
        .map_err(|e| value_error("towards", e))?;
    let id = railyard_runtime::UniqueId::new(addr).map_err(|e| CommError::new_err(e.to_string()))?;
    Ok(id.to_string())
}

#[pyfunction]
fn parse_bytes(text: &str) -> PyResult<u64> {
    railyard_units::units::parse_bytes(text).map_err(|e| value_error("size", e))
}

#[pyfunction]
fn parse_bytes_per_sec(text: &str) -> PyResult<f64> {
    railyard_units::units::parse_bytes_per_sec(text).map_err(|e| value_error("bandwidth", e))
}

#[pyfunction]
fn parse_secs(text: &str) -> PyResult<f64> {
    railyard_units::units::parse_secs(text).map_err(|e| value_error("time", e))
}

/// The longest wait `Comm.join` sets (about 115 days; longer asks are taken as this).
const MAX_JOIN_TIMEOUT_SECS: f64 = 1e7;

/// A communicator joined from the launcher's environment.
#[pyclass(module = "railyard._native")]
struct Comm {
    inner: Mutex<Option<Communicator>>,
    rank: usize,
    size: usize,
}

/// The collectives `Comm.call` runs, by index into `Collective::ALL`, and the reduction
/// operators by index into `RedOp::ALL` (python/railyard builds its codes from `codes()`).
const COLLECTIVES: [Collective; 11] = Collective::ALL;
const OPS: [RedOp; 5] = RedOp::ALL;

/// The names of both tables, for the Python side to build its codes from.
#[pyfunction]
fn codes() -> (Vec<&'static str>, Vec<&'static str>) {
    (COLLECTIVES.iter().map(|c| c.as_str()).collect(), OPS.iter().map(|o| o.as_str()).collect())
}

#[pymethods]
impl Comm {
    /// Join from torchrun, Open MPI, Slurm or `railyard launch` variables.
    #[staticmethod]
    fn from_env(py: Python<'_>) -> PyResult<Comm> {
        let config = Config::from_env().map_err(|e| value_error("environment", e))?;
        let launch = from_env().map_err(|e| value_error("environment", e))?.ok_or_else(|| {
            value_error(
                "environment",
                "no launcher variables (RAILYARD_RANK/WORLD_SIZE, RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_*)",
            )
        })?;
        let (rank, size) = (launch.rank, launch.size);
        let comm = py
            .allow_threads(|| Communicator::init(&launch.id, rank, size, config))
            .map_err(|e| CommError::new_err(e.to_string()))?;
        Ok(Comm { inner: Mutex::new(Some(comm)), rank, size })
    }

    /// Join the rendezvous `id` (`HOST:PORT#SECRET`, from `rendezvous_id` on rank 0) as
    /// `rank` of `size`, every wait bounded by `timeout_secs`; the rest of the settings
    /// from RAILYARD_* variables. What the torch backend calls with the ranks of its group.
    #[staticmethod]
    fn join(py: Python<'_>, id: &str, rank: usize, size: usize, timeout_secs: f64) -> PyResult<Comm> {
        let mut config = Config::from_env().map_err(|e| value_error("environment", e))?;
        if timeout_secs.is_nan() || timeout_secs <= 0.0 {
            return Err(value_error("timeout", format!("{timeout_secs} s: must be more than 0")));
        }
        // A timeout of a year means "never" (torch users write timedelta(days=365)):
        // waits are bounded at MAX_JOIN_TIMEOUT_SECS.
        config.timeout = std::time::Duration::from_secs_f64(timeout_secs.min(MAX_JOIN_TIMEOUT_SECS));
        let id: railyard_runtime::UniqueId = id.parse().map_err(|e| value_error("id", e))?;
        if size == 0 || rank >= size {
            return Err(value_error("rank", format!("{rank} is not a rank of {size}")));
        }
        let comm = py
            .allow_threads(|| Communicator::init(&id, rank, size, config))
            .map_err(|e| CommError::new_err(e.to_string()))?;
        Ok(Comm { inner: Mutex::new(Some(comm)), rank, size })
    }

    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    #[getter]
    fn size(&self) -> usize {
        self.size
    }

    /// Run one collective on numpy arrays. `collective` and `op` are indices into
    /// `COLLECTIVES` and `OPS`; `count` is the collective's element count as
    /// `CollectiveSpec` takes it. With `in_place`, `send` is the one buffer. Arrays are
    /// checked here: C-contiguous, native byte order, a supported dtype, the same dtype
    /// when both are given, writable where written, not overlapping.
    #[pyo3(signature = (collective, send, recv, count, op=0, root=0, peer=0, counts=None, in_place=false))]
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        py: Python<'_>,
        collective: usize,
        send: Option<Bound<'_, PyAny>>,
        recv: Option<Bound<'_, PyAny>>,
        count: u64,
        op: usize,
        root: usize,
        peer: usize,
        counts: Option<Vec<Vec<u64>>>,
        in_place: bool,
    ) -> PyResult<()> {
        let collective = *COLLECTIVES.get(collective).ok_or_else(|| value_error("collective", "unknown code"))?;
        let send_buf = send.as_ref().map(|a| buffer(a, "send", in_place)).transpose()?;
        let recv_buf = recv.as_ref().map(|a| buffer(a, "recv", true)).transpose()?;
        // `send` and `recv` stay borrowed (alive) until `run` returns.
        self.run(py, collective, send_buf, recv_buf, count, op, root, peer, counts, in_place)
    }

    /// An in-place all-reduce of `buf`'s every element: `call`'s commonest form, with the
    /// count taken from the buffer (one Python call less per collective).
    fn all_reduce_in_place(&self, py: Python<'_>, buf: Bound<'_, PyAny>, op: usize) -> PyResult<()> {
        let b = buffer(&buf, "send", true)?;
        let count = (b.raw.bytes as u64) / b.dtype.size_bytes();
        // `buf` stays borrowed (alive) until `run` returns.
        self.run(py, Collective::AllReduce, Some(b), None, count, op, 0, 0, None, true)
    }

    /// Tear the communicator down (also done when it is garbage-collected).
    fn close(&self, py: Python<'_>) {
        // Waits (GIL released) for a collective another thread is running.
        let inner = &self.inner;
        let comm = py.allow_threads(|| inner.lock().ok().and_then(|mut g| g.take()));
        drop(comm);
    }
}

impl Comm {
    /// Run one collective on checked buffers, whose Python objects the caller holds.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        collective: Collective,
        send_buf: Option<Buffer>,
        recv_buf: Option<Buffer>,
        count: u64,
        op: usize,
        root: usize,
        peer: usize,
        counts: Option<Vec<Vec<u64>>>,
        in_place: bool,
    ) -> PyResult<()> {
        let op = *OPS.get(op).ok_or_else(|| value_error("op", "unknown code"))?;
        let dtype = match (send_buf, recv_buf) {
            (Some(s), Some(r)) if s.dtype != r.dtype => {
                return Err(PyTypeError::new_err(format!(
                    "recv: dtype {} differs from the input's {}",
                    r.dtype.as_str(),
                    s.dtype.as_str()
                )))
            }
            (Some(s), _) => s.dtype,
            (None, Some(r)) => r.dtype,
            (None, None) => Dtype::U8,
        };
        let send = send_buf.map_or(Raw::EMPTY, |b| b.raw);
        let recv = recv_buf.map_or(Raw::EMPTY, |b| b.raw);
        if !in_place && send.overlaps(recv) {
            return Err(value_error("recv", "overlaps the input; call the in-place form for one buffer"));
        }
        if root >= self.size {
            return Err(value_error("root", format!("{root} is not a rank of {}", self.size)));
        }
        let mut spec = CollectiveSpec::new(collective, self.size, count).with_root(root);
        if collective == Collective::SendRecv {
            if peer >= self.size || peer == root {
                return Err(value_error("peer", format!("{peer} is not another rank of {}", self.size)));
            }
            spec = spec.with_peer(peer);
        }
        if let Some(c) = counts {
            spec = spec.with_counts(c);
        }
        let inner = &self.inner;
        // The lock is taken with the GIL released: a thread holding the GIL while it
        // waits for the lock would keep the collective's thread from ever returning.
        let result = py.allow_threads(|| {
            let mut guard = inner.lock().map_err(|_| "the communicator was poisoned".to_string())?;
            let comm = guard.as_mut().ok_or_else(|| "the communicator is closed".to_string())?;
            // SAFETY: `send` and `recv` are the data of numpy arrays or plain CPU torch
            // tensors (`buffer.rs`: read from numpy's C struct, or from torch's own C
            // methods, never a subclass's) that the caller holds references to (the GIL is
            // released, the references are not), checked contiguous with the byte length
            // of their elements, numpy's `recv` (and `send` in place) writable; out of
            // place they do not overlap (checked above). The
            // contract, as for every extension that releases the GIL around a buffer
            // (and as for NCCL and MPI with theirs): no other thread touches the arrays
            // until the call returns — writing to them, or freeing them with numpy's
            // `resize(..., refcheck=False)`, is undefined behaviour (docs/python.md says so).
            // Zero-length buffers are never dereferenced.
            let input: &[u8] = if send.bytes == 0 {
                &[]
            } else {
                // SAFETY: the contract above, for `send`.
                unsafe { std::slice::from_raw_parts(send.addr as *const u8, send.bytes) }
            };
            if in_place {
                // SAFETY: as above; in place the one buffer is `send`, checked writable.
                let buf: &mut [u8] = if send.bytes == 0 {
                    &mut []
                } else {
                    // SAFETY: the contract above; `send` is writable in place.
                    unsafe { std::slice::from_raw_parts_mut(send.addr as *mut u8, send.bytes) }
                };
                return comm.run_in_place(&spec, None, buf, dtype, op).map_err(|e| e.to_string());
            }
            // SAFETY: as above; `recv` is writable and overlaps nothing handed over here.
            let output: &mut [u8] = if recv.bytes == 0 {
                &mut []
            } else {
                // SAFETY: the contract above, for `recv`.
                unsafe { std::slice::from_raw_parts_mut(recv.addr as *mut u8, recv.bytes) }
            };
            comm.run(&spec, None, input, output, dtype, op).map_err(|e| e.to_string())
        });
        result.map_err(CommError::new_err)
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plan_json, m)?)?;
    m.add_function(wrap_pyfunction!(model_json, m)?)?;
    m.add_function(wrap_pyfunction!(models, m)?)?;
    m.add_function(wrap_pyfunction!(topology_json, m)?)?;
    m.add_function(wrap_pyfunction!(plan_training_json, m)?)?;
    m.add_function(wrap_pyfunction!(cli_json, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bytes_per_sec, m)?)?;
    m.add_function(wrap_pyfunction!(parse_secs, m)?)?;
    m.add_function(wrap_pyfunction!(codes, m)?)?;
    m.add_function(wrap_pyfunction!(launch, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_point, m)?)?;
    m.add_function(wrap_pyfunction!(rendezvous_id, m)?)?;
    m.add_class::<Comm>()?;
    m.add("CommError", m.py().get_type::<CommError>())?;
    Ok(())
}

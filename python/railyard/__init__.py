"""railyard from Python: plan, model and run collectives on numpy arrays.

Planning and the models return the same data as the CLI's ``--format json``, as plain
Python objects (dicts whose keys the ``TypedDict`` classes below document)::

    import railyard
    p = railyard.plan(topo="hgx-h100x2", collective="allreduce", size="192MiB")
    p["fastest"], p["algorithms"][0]["total_secs"]
    railyard.model("ecmp", flows=32, uplinks=32)["output"]

The runtime joins from the launcher's environment (``railyard launch``, torchrun,
Open MPI, Slurm) and runs collectives on C-contiguous numpy arrays (or CPU torch
tensors, through a zero-copy numpy view), releasing the GIL while it communicates::

    comm = railyard.init()
    x = np.ones(1024, dtype=np.float32)
    comm.all_reduce(x)              # in place
    h = comm.all_reduce_async(x)    # a handle; h.wait() returns the result

Sizes and bandwidths accept the CLI's unit strings ("192MiB", "50GB/s") or numbers.
Bad arguments raise ``ValueError`` (or ``TypeError``) naming the argument; a failed
collective raises ``railyard.CommError`` (a ``RuntimeError``).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError, wait
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

try:  # Python 3.8+ has TypedDict in typing
    from typing import TypedDict
except ImportError:  # pragma: no cover
    from typing_extensions import TypedDict  # type: ignore

import numpy as np

from . import _native
from ._native import CommError

__all__ = [
    "CommError",
    "Communicator",
    "Handle",
    "Plan",
    "Breakdown",
    "ModelResult",
    "init",
    "launch",
    "plan_training",
    "model",
    "models",
    "plan",
    "topology",
    "sim",
    "analyze_nccl_tests",
    "analyze_nccl_log",
    "explain_nccl",
]

Size = Union[int, str]


class Breakdown(TypedDict, total=False):
    """One algorithm's cost by the per-round model (seed 001 §7.2.1)."""

    name: str
    total_secs: float  # the whole collective
    rounds: int
    alpha_secs: float  # rounds x start-up
    transfer_secs: float  # sum over rounds of the slowest resource's bytes / bandwidth
    bytes_sent_total: float
    cross_server_bytes: float
    nics_idle: int
    bottleneck: Optional[Dict[str, Any]]


class Plan(TypedDict, total=False):
    """What ``railyard plan --format json`` prints."""

    topology: str
    collective: str
    bytes: int
    elem_bytes: int
    ranks: int
    round_startup_secs: float
    routing: str
    algorithms: List[Breakdown]
    skipped: List[Dict[str, str]]  # name, reason
    fastest: Optional[str]
    choice: Optional[Dict[str, Any]]  # the chosen algorithm, its runner-up and NCCL's rule
    hardware: Dict[str, int]  # gpus, servers, nics, switches, nvswitches, pcie_switches


class ModelResult(TypedDict):
    """A model's inputs (defaults with the overrides applied) and its output."""

    inputs: Dict[str, Any]
    output: Dict[str, Any]


def _size(value: Size, field: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{field}: expected a size (bytes or a string like '192MiB'), got a bool")
    if isinstance(value, (int, np.integer)):
        if value < 0:
            raise ValueError(f"{field}: a size cannot be negative (got {value})")
        return int(value)
    if isinstance(value, str):
        return _native.parse_bytes(value)
    raise TypeError(f"{field}: expected a size (bytes or a string like '192MiB'), got {type(value).__name__}")


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{field}: expected an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{field}: must be {lo}..={hi} (got {value})")
    return int(value)


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{field}: expected a string, got {type(value).__name__}")
    return value


# numpy dtypes by the runtime's names, for plan(dtype=np.float32).
_DTYPE_NAMES = {"float32": "f32", "float64": "f64", "float16": "f16", "int32": "i32", "int64": "i64", "uint8": "u8"}


def plan_training(scenario: Union[str, dict], engine: str = "model", solve: bool = False) -> dict:
    """Plan a training job (``railyard plan-training``): ``scenario`` is the scenario's
    TOML text, or a dict with a ``job`` table (model, topo, global_batch, layout, ...).
    Returns the report (memory, step time, the ranked layouts) as a dict. ``solve=True``
    is ``--solve``: ``report["solved"]["job"]`` holds the job's best layout on other node
    counts and NIC rates, and the fewest nodes and slowest NIC that reach the job's
    ``target_tokens_per_sec``."""
    if isinstance(scenario, dict):
        scenario = _toml(scenario)
    if not isinstance(solve, bool):
        raise TypeError(f"solve: expected a bool, got {type(solve).__name__}")
    return json.loads(_native.plan_training_json(_text(scenario, "scenario"), _text(engine, "engine"), solve))


def _toml(tables: dict) -> str:
    """A dict of tables (``{"job": {...}}``) as TOML: strings, numbers, booleans and
    inline tables, as plan-training's scenario reads them."""

    def value(v, where):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x, where + '.' + k)}" for k, x in v.items()) + " }"
        raise TypeError(f"{where}: {type(v).__name__} is not a scenario value")

    lines = []
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise TypeError(f"{name}: expected a table (dict), got {type(table).__name__}")
        lines.append(f"[{name}]")
        lines.extend(f"{k} = {value(v, name + '.' + k)}" for k, v in table.items())
    return "\n".join(lines) + "\n"


def plan(
    topo: str = "hgx-h100x2",
    collective: str = "allreduce",
    size: Size = "192MiB",
    dtype: str = "f32",
    algo: Union[str, Sequence[str]] = "all",
    root: int = 0,
    channels: int = 1,
    ranks: Optional[int] = None,
) -> Plan:
    """Compare algorithms for one collective on a topology (``railyard plan``)."""
    if not isinstance(algo, str):
        if isinstance(algo, (bytes, bytearray)) or not isinstance(algo, (list, tuple)):
            raise TypeError(f"algo: expected a string or a list of strings, got {type(algo).__name__}")
        algo = ",".join(_text(a, "algo") for a in algo)
    if not algo or any(not part.strip() for part in algo.split(",")):
        raise ValueError(f"algo: {algo!r} names an empty algorithm")
    if not isinstance(dtype, str):
        try:
            dtype = _DTYPE_NAMES[np.dtype(dtype).name]
        except (TypeError, KeyError):
            raise TypeError(f"dtype: {dtype!r} is not one of {', '.join(_DTYPE_NAMES)} (or f32, bf16, ...)") from None
    root = _int(root, "root", 0, 1 << 31)
    channels = _int(channels, "channels", 0, 1 << 31)  # the range is the resolver's to check
    ranks = None if ranks is None else _int(ranks, "ranks", 1, 1 << 31)
    nbytes = _size(size, "size")
    if nbytes >= 1 << 63:
        raise ValueError(f"size: {nbytes} B is more than the largest size (2^63 - 1)")
    text = _native.plan_json(_text(topo, "topo"), _text(collective, "collective"), nbytes, dtype, algo, root, channels, ranks)
    return json.loads(text)


def _flags(options: Dict[str, Any]) -> List[str]:
    """Keyword options as the CLI's flags: ``pipeline_chunks=8`` is ``--pipeline-chunks=8``
    (one word, so a value starting with ``-`` stays a value), ``True`` a bare flag,
    ``False``/``None`` left out, a list or tuple comma-joined. The CLI checks names and
    values, so an unknown option raises ``ValueError`` naming it; ``format`` is always
    JSON here."""
    argv: List[str] = []
    for key, value in options.items():
        if key == "format":
            raise TypeError("format: these functions always return the JSON document")
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv.append(flag + "=" + ",".join(_plain_word(v, key) for v in value))
        else:
            argv.append(flag + "=" + _plain_word(value, key))
    return argv


def _plain_word(value: Any, field: str) -> str:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (str, int, float, np.integer, np.floating)):
        raise TypeError(f"{field}: expected a string or a number, got {type(value).__name__}")
    return str(value)


def _cli(argv: List[str], positional: Optional[str] = None) -> Dict[str, Any]:
    # The positional path after `--`: a file named "-run.log" is a file, not a flag.
    tail = ["--", positional] if positional is not None else []
    return json.loads(_native.cli_json(argv + ["--format=json"] + tail))


def sim(topo: str = "hgx-h100x2", **options: Any) -> Dict[str, Any]:
    """Simulate collectives flow by flow beside the per-round model (``railyard sim``).
    ``options`` are sim's flags by their Python names: ``collective``, ``size``, ``algo``,
    ``ecmp``, ``ready``, ``fail``, ``jobs``, ``barriers`` ... (``railyard sim --help``).
    Returns sim's ``--format json`` document as a dict."""
    return _cli(["sim", "--topo=" + _text(topo, "topo")] + _flags(options))


def analyze_nccl_tests(path: str, topo: Optional[str] = None, **options: Any) -> Dict[str, Any]:
    """Read an nccl-tests output (``railyard analyze nccl-tests``): its rows checked and,
    with ``topo``, each size against railyard's expected time and bound with a verdict.
    ``options``: ``ranks``, ``nccl_algo``, ``arch``, ``collective`` ... Returns the
    ``--format json`` document as a dict; a file of several tests one after another gives
    ``{"tests": [one such dict per test], "failed": [[n, line, why], ...]}``."""
    argv = ["analyze", "nccl-tests"]
    if topo is not None:
        argv.append("--topo=" + _text(topo, "topo"))
    return _cli(argv + _flags(options), _text(path, "path"))


def analyze_nccl_log(path: str, **options: Any) -> Dict[str, Any]:
    """Read an NCCL INFO log (``railyard analyze nccl-log``): rings, trees, channels,
    transports and NCCL's tuner on the log's own graph. Returns the ``--format json``
    document as a dict."""
    return _cli(["analyze", "nccl-log"] + _flags(options), _text(path, "path"))


def explain_nccl(**options: Any) -> Dict[str, Any]:
    """NCCL's own choice for a collective, its tuner's tables and times, beside railyard's
    (``railyard explain-nccl``). ``options``: ``topo``, ``collective``, ``size``, ``ranks``,
    ``nccl_algo`` ... Returns the ``--format json`` document as a dict."""
    return _cli(["explain-nccl"] + _flags(options))


def models() -> List[str]:
    """The models ``model`` runs (``railyard model --help``)."""
    return list(_native.models())


def model(name: str, **inputs: Any) -> ModelResult:
    """Run a network model on its defaults (the chapter's worked example) with ``inputs``
    overriding fields, e.g. ``model("concurrency", slot_secs="4us")``."""
    # The seed's wording for one ECMP case: `flows` over `uplinks`.
    if name == "ecmp" and ("flows" in inputs or "uplinks" in inputs):
        if "cases" in inputs or "flows" not in inputs or "uplinks" not in inputs:
            raise ValueError("ecmp: give flows and uplinks together, or cases=[[flows, uplinks], ...]")
        inputs = dict(inputs)
        inputs["cases"] = [[inputs.pop("flows"), inputs.pop("uplinks")]]
    _text(name, "name")
    try:
        overrides = json.dumps(inputs, allow_nan=False, default=_plain)
    except TypeError as e:
        raise TypeError(f"{name}: inputs must be numbers, strings, lists or dicts ({e})") from None
    except ValueError:
        bad = [k for k, v in inputs.items() if isinstance(v, float) and v != v or v in (float("inf"), float("-inf"))]
        raise ValueError(f"{', '.join(bad) or name}: NaN and infinity are not inputs") from None
    return json.loads(_native.model_json(name, overrides))


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers in model inputs."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not a number, string, list or dict")


class LaunchResult(TypedDict):
    """How a job of ``launch`` ended: its exit code (the first failing rank's, 124 past
    the timeout) and why it failed, if it did."""

    code: int
    reason: Optional[str]


def launch(command: Sequence[str], np: int, timeout: Optional[float] = None, prefix: bool = False) -> LaunchResult:
    """Run ``command`` as ``np`` local ranks, as ``railyard launch -n NP -- COMMAND``:
    launcher variables set (RANK, WORLD_SIZE, MASTER_ADDR, RAILYARD_ID, ...), the first
    rank to fail stops the others, Ctrl-C reaches every rank, each output line whole
    (``prefix``: standard output's lines start ``[rank N]`` too, as standard error's do)."""
    if isinstance(command, (str, bytes)) or not isinstance(command, (list, tuple)):
        raise TypeError(f"command: expected a list of strings, got {type(command).__name__}")
    argv = [_text(a, "command") for a in command]
    np_ = _int(np, "np", 1, 256)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        raise TypeError(f"timeout: expected seconds, got {type(timeout).__name__}")
    code, reason = _native.launch(argv, np_, None if timeout is None else float(timeout), bool(prefix))
    return {"code": code, "reason": reason}


def topology(spec: str) -> Dict[str, Any]:
    """A preset (``rail:servers=4``) or topology file, as the topology file format's JSON."""
    return json.loads(_native.topology_json(_text(spec, "spec")))


_COLLECTIVE_NAMES, _OP_NAMES = _native.codes()
_CODE = {name: i for i, name in enumerate(_COLLECTIVE_NAMES)}
assert _CODE["allreduce"] == 0, "the all-reduce fast path passes code 0"
_OP = {name: i for i, name in enumerate(_OP_NAMES)}


def _op(op: str) -> int:
    try:
        return _OP[op]
    except (KeyError, TypeError):
        raise ValueError(f"op: {op!r} is not one of {', '.join(_OP_NAMES)}") from None


def _array(x: Any, field: str, writable: bool) -> np.ndarray:
    """A numpy view of ``x`` (an array or a CPU torch tensor), checked for the runtime."""
    if not isinstance(x, np.ndarray):
        numpy_view = getattr(x, "numpy", None)  # torch.Tensor: a zero-copy view for CPU tensors
        if numpy_view is None:
            raise TypeError(f"{field}: expected a numpy array or a CPU torch tensor, got {type(x).__name__}")
        if getattr(x, "requires_grad", False):
            x = x.detach()
        try:
            x = x.numpy()
        except (RuntimeError, TypeError) as e:
            raise TypeError(f"{field}: cannot view it as a numpy array ({e})") from None
    # dtype, contiguity, byte order and writability are checked by the native call.
    return x


def _chunks(count: int, parts: int) -> List[int]:
    """The balanced partition: the first count % parts chunks get one more element."""
    base, extra = divmod(count, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class Handle:
    """An asynchronous collective: ``wait()`` blocks and returns its result (or raises)."""

    def __init__(self, future: "Future[Any]", keep: Tuple[Any, ...]):
        self._future = future
        self._keep = keep  # the arrays stay alive until the call ends
        self._observed = False

    def wait(self, timeout: Optional[float] = None) -> Any:
        try:
            result = self._future.result(timeout)
        except TimeoutError:
            raise TimeoutError(f"the collective did not finish within {timeout} s (it is still running)") from None
        except BaseException:
            self._observed = True
            raise
        self._observed = True
        return result

    def done(self) -> bool:
        return self._future.done()


class Communicator:
    """Collectives among the ranks of one job. Calls are in rank order on every rank (the
    same sequence of collectives with the same sizes), like NCCL and MPI."""

    def __init__(self, native: "_native.Comm"):
        self._native = native
        # One worker runs the async calls, one after another, in issue order; a blocking
        # call first waits for them, so every rank issues collectives in one order.
        self._worker: Optional[ThreadPoolExecutor] = None
        self._pending: Optional[Handle] = None
        self._worker_thread: Optional[threading.Thread] = None

    @property
    def rank(self) -> int:
        return self._native.rank

    @property
    def size(self) -> int:
        return self._native.size

    def close(self) -> None:
        if self._pending is not None:
            wait([self._pending._future])
            self._pending = None
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None
        self._native.close()

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------------

    def _run(self, collective, send, recv, count, op=0, root=0, peer=0, counts=None, in_place=False):
        if self._pending is not None and threading.current_thread() is not self._worker_thread:
            self._settle()
        self._native.call(_CODE[collective], send, recv, count, op, root, peer, counts, in_place)

    def _settle(self) -> None:
        """Wait for the async calls issued before this blocking one (so every rank issues
        collectives in one order); raise an async failure nobody has seen through wait()."""
        pending = self._pending
        if pending is None:
            return
        wait([pending._future])
        if self._pending is pending:
            self._pending = None
        error = pending._future.exception()
        if error is not None and not pending._observed:
            pending._observed = True
            raise error

    def _root(self, root: int) -> int:
        if not isinstance(root, (int, np.integer)) or isinstance(root, bool) or not 0 <= root < self.size:
            raise ValueError(f"root: {root!r} is not a rank of {self.size}")
        return int(root)

    @staticmethod
    def _same_dtype(a: np.ndarray, b: np.ndarray) -> None:
        if a.dtype != b.dtype:
            raise TypeError(f"recv: dtype {b.dtype} differs from the input's {a.dtype}")

    def _async(self, fn, *args, **kwargs) -> Handle:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="railyard")

            def remember() -> None:
                self._worker_thread = threading.current_thread()

            self._worker.submit(remember).result()
        keep = tuple(a for a in list(args) + list(kwargs.values()) if a is not None)
        handle = Handle(self._worker.submit(fn, *args, **kwargs), keep)
        self._pending = handle
        return handle

    # -- collectives ----------------------------------------------------------------

    def all_reduce(self, send: Any, recv: Any = None, op: str = "sum") -> np.ndarray:
        """Every rank gets the reduction (sum, prod, min, max, avg). In place without ``recv``."""
        code = _OP.get(op) if type(op) is str else None
        if code is None:
            code = _op(op)
        # The common call (in place, nothing pending) goes straight to the native call,
        # which reads a numpy array's or a CPU torch tensor's memory and checks it: this
        # is the per-call cost bench/python_overhead.py measures.
        if recv is None:
            if self._pending is not None and threading.current_thread() is not self._worker_thread:
                self._settle()
            self._native.all_reduce_in_place(send, code)
            return send
        s = send if type(send) is np.ndarray else _array(send, "send", writable=recv is None)
        if recv is None:
            self._run("allreduce", s, None, s.size, code, in_place=True)
            return s
        r = recv if type(recv) is np.ndarray else _array(recv, "recv", writable=True)
        if r.size != s.size:
            raise ValueError(f"recv: {r.size} elements, the input has {s.size}")
        self._run("allreduce", s, r, s.size, code)
        return r

    def reduce_scatter(self, send: Any, recv: Any = None, op: str = "sum") -> np.ndarray:
        """Rank r gets chunk r of the reduction. In place without ``recv``: the result is
        the rank's chunk of ``send`` (returned as a view)."""
        s = _array(send, "send", writable=recv is None)
        mine = _chunks(s.size, self.size)
        start = sum(mine[: self.rank])
        if recv is None:
            self._run("reducescatter", s, None, s.size, _op(op), in_place=True)
            return s.reshape(-1)[start : start + mine[self.rank]]
        r = _array(recv, "recv", writable=True)
        self._same_dtype(s, r)
        if r.size != mine[self.rank]:
            raise ValueError(
                f"recv: {r.size} elements, but send's {s.size} elements split over {self.size} ranks give "
                f"rank {self.rank} {mine[self.rank]}: recv must hold this rank's share of send"
            )
        self._run("reducescatter", s, r, s.size, _op(op))
        return r

    def all_gather(self, send: Any, recv: Any = None) -> np.ndarray:
        """Every rank gets every rank's chunk. With ``recv=None``, ``send`` is the whole
        buffer and this rank's chunk of it is the input (in place)."""
        if recv is None:
            b = _array(send, "send", writable=True)
            self._run("allgather", b, None, b.size, in_place=True)
            return b
        s = _array(send, "send", writable=False)
        r = _array(recv, "recv", writable=True)
        self._same_dtype(s, r)
        mine = _chunks(r.size, self.size)[self.rank]
        if s.size != mine:
            raise ValueError(
                f"send: {s.size} elements, but recv's {r.size} elements split over {self.size} ranks give "
                f"rank {self.rank} {mine}: send must hold this rank's share of recv"
            )
        self._run("allgather", s, r, r.size)
        return r

    def broadcast(self, buf: Any, root: int = 0) -> np.ndarray:
        """Every rank gets the root's ``buf`` (in place)."""
        b = _array(buf, "buf", writable=True)
        self._run("broadcast", b, None, b.size, root=self._root(root), in_place=True)
        return b

    def reduce(self, send: Any, recv: Any = None, op: str = "sum", root: int = 0) -> Optional[np.ndarray]:
        """The root gets the reduction (in ``recv``, allocated when not given); others get None."""
        root = self._root(root)
        s = _array(send, "send", writable=False)
        r = None
        if self.rank == root:
            r = np.empty_like(s) if recv is None else _array(recv, "recv", writable=True)
            self._same_dtype(s, r)
            if r.size != s.size:
                raise ValueError(f"recv: {r.size} elements, the input has {s.size}")
        self._run("reduce", s, r, s.size, _op(op), root=root)
        return r

    def gather(self, send: Any, recv: Any = None, root: int = 0) -> Optional[np.ndarray]:
        """The root gets every rank's ``send`` (all the same size) in rank order, in
        ``recv`` (allocated when not given); other ranks get None."""
        root = self._root(root)
        s = _array(send, "send", writable=False)
        total = self.size * s.size
        r = None
        if self.rank == root:
            r = np.empty(total, dtype=s.dtype) if recv is None else _array(recv, "recv", writable=True)
            self._same_dtype(s, r)
            if r.size != total:
                raise ValueError(f"recv: {r.size} elements, {self.size} ranks x {s.size} make {total}")
        self._run("gather", s, r, total, root=root)
        return r

    def scatter(self, send: Any, recv: Any, root: int = 0) -> np.ndarray:
        """Rank r gets chunk r of the root's ``send`` (ignored on other ranks) in ``recv``."""
        root = self._root(root)
        r = _array(recv, "recv", writable=True)
        total = self._total_from_chunk(r.size, "recv")
        s = None
        if self.rank == root:
            s = _array(send, "send", writable=False)
            self._same_dtype(s, r)
            if s.size != total:
                raise ValueError(f"send: {s.size} elements, the chunks of the ranks add up to {total}")
        self._run("scatter", s, r, total, root=root)
        return r

    def _total_from_chunk(self, mine: int, field: str) -> int:
        # Every rank's chunk is the same size (each rank knows only its own).
        return mine * self.size

    def all_to_all(self, send: Any, recv: Any = None) -> np.ndarray:
        """Rank i's chunk j (balanced partition of ``send``) goes to rank j, which gets
        ``size`` chunks of its own chunk's size, in rank order (allocated when not given)."""
        s = _array(send, "send", writable=False)
        want = self.size * _chunks(s.size, self.size)[self.rank]
        if recv is None:
            recv = np.empty(want, dtype=s.dtype)
        r = _array(recv, "recv", writable=True)
        self._same_dtype(s, r)
        if r.size != want:
            raise ValueError(f"recv: {r.size} elements, {self.size} chunks of rank {self.rank}'s chunk make {want}")
        if np.shares_memory(s, r):
            s = s.copy()  # no in-place form: run on a copy of the input
        self._run("alltoall", s, r, s.size)
        return r

    def all_to_allv(self, send: Any, recv: Any, counts: Sequence[Sequence[int]]) -> np.ndarray:
        """``counts[i][j]`` elements from rank i to rank j; every rank passes the same matrix."""
        s = _array(send, "send", writable=False)
        r = _array(recv, "recv", writable=True)
        self._same_dtype(s, r)
        try:
            matrix = [[_int(c, "counts", 0, 1 << 62) for c in row] for row in counts]
        except TypeError:
            raise ValueError("counts: expected a size x size matrix of integers") from None
        if len(matrix) != self.size or any(len(row) != self.size for row in matrix):
            raise ValueError(f"counts: expected a {self.size} x {self.size} matrix")
        if any(c < 0 for row in matrix for c in row):
            raise ValueError("counts: negative count")
        if s.size != sum(matrix[self.rank]):
            raise ValueError(f"send: {s.size} elements, row {self.rank} of counts sums to {sum(matrix[self.rank])}")
        incoming = sum(row[self.rank] for row in matrix)
        if r.size != incoming:
            raise ValueError(f"recv: {r.size} elements, column {self.rank} of counts sums to {incoming}")
        self._run("alltoallv", s, r, 0, counts=matrix)
        return r

    def send(self, buf: Any, peer: int) -> None:
        """Point to point: ``peer`` must call ``recv`` with the same size."""
        b = _array(buf, "buf", writable=False)
        peer = self._root(peer)
        if peer == self.rank:
            raise ValueError(f"peer: {peer} is this rank")
        self._run("sendrecv", b, None, b.size, root=self.rank, peer=peer)

    def recv(self, buf: Any, peer: int) -> np.ndarray:
        b = _array(buf, "buf", writable=True)
        peer = self._root(peer)
        if peer == self.rank:
            raise ValueError(f"peer: {peer} is this rank")
        self._run("sendrecv", None, b, b.size, root=peer, peer=self.rank)
        return b

    def barrier(self) -> None:
        marker = np.array([self.rank % 256], dtype=np.uint8)
        out = np.empty(self.size, dtype=np.uint8)
        self._run("barrier", marker, out, 0)

    # -- async variants: the same calls on the communicator's worker thread ----------

    def all_reduce_async(self, send: Any, recv: Any = None, op: str = "sum") -> Handle:
        return self._async(self.all_reduce, send, recv, op)

    def reduce_scatter_async(self, send: Any, recv: Any = None, op: str = "sum") -> Handle:
        return self._async(self.reduce_scatter, send, recv, op)

    def all_gather_async(self, send: Any, recv: Any = None) -> Handle:
        return self._async(self.all_gather, send, recv)

    def broadcast_async(self, buf: Any, root: int = 0) -> Handle:
        return self._async(self.broadcast, buf, root)

    def reduce_async(self, send: Any, recv: Any = None, op: str = "sum", root: int = 0) -> Handle:
        return self._async(self.reduce, send, recv, op, root)

    def all_to_all_async(self, send: Any, recv: Any = None) -> Handle:
        return self._async(self.all_to_all, send, recv)

    def all_to_allv_async(self, send: Any, recv: Any, counts: Sequence[Sequence[int]]) -> Handle:
        return self._async(self.all_to_allv, send, recv, counts)

    def gather_async(self, send: Any, recv: Any = None, root: int = 0) -> Handle:
        return self._async(self.gather, send, recv, root)

    def scatter_async(self, send: Any, recv: Any, root: int = 0) -> Handle:
        return self._async(self.scatter, send, recv, root)

    def send_async(self, buf: Any, peer: int) -> Handle:
        return self._async(self.send, buf, peer)

    def recv_async(self, buf: Any, peer: int) -> Handle:
        return self._async(self.recv, buf, peer)

    def barrier_async(self) -> Handle:
        return self._async(self.barrier)


def init() -> Communicator:
    """Join the job from the launcher's environment (``railyard launch``, torchrun,
    Open MPI, Slurm), like the Rust runtime's ``from_env``."""
    return Communicator(_native.Comm.from_env())

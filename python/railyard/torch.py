"""railyard as a ``torch.distributed`` backend for CPU tensors.

::

    import torch.distributed as dist
    dist.init_process_group(backend="railyard")        # under torchrun, mpirun, Slurm, railyard launch
    dist.all_reduce(torch.ones(4))

Installing the package registers the backend with torch (the ``torch.distributed.backends``
entry point), so no import is needed; ``import railyard.torch`` registers it on torch
versions without that entry point group. GPU tensors need NCCL in a group of its own
(``dist.new_group(backend="nccl")``): a railyard group is one backend for its one device,
so ``backend="cpu:railyard,cuda:nccl"`` does not split a group between the two.

Rendezvous goes through the store torch passes in: rank 0 of each group publishes where it
listens and a fresh secret there, so there is no port or secret to set. Every wait is
bounded by the group's ``timeout``. The backend is a Python ``ProcessGroup`` subclass (the
route torch's own threaded backend takes), tested with torch 2.15.

How calls run (the contract differs from gloo's in one way, said here):

- Collectives run when issued, on the caller's thread, and return a completed ``Work``:
  ``async_op=True`` gives a handle whose ``wait()`` returns at once, so a collective does
  not overlap the caller's compute as gloo's background threads let it.
- ``isend``/``irecv`` are queued and run when one of them is waited on or completed is
  asked, or a collective is issued: every group's queue of this process, groups by name,
  peers in increasing rank order and, of a pair, the lower rank's sends first. A batch
  that every rank posts and then waits on (``batch_isend_irecv``, exchanges, ring shifts)
  runs in an order where no pair waits on each other. A rank that waits on one receive
  before posting what its peers need from it first (a relay across three ranks) can wait
  until the group's timeout, which then names the peer: a queued send starts only when
  run. Sends and receives are matched in issue order; tags other than 0 are refused
  (railyard does not match by tag).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import os
import socket
import sys
import threading
import time
import weakref
from datetime import timedelta
from typing import Any, List, Optional, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch.futures import Future

from . import _native
from ._native import CommError

__all__ = ["ProcessGroupRailyard", "register", "init_process_group", "BACKEND"]

BACKEND = "railyard"

_COLLECTIVE_NAMES, _OP_NAMES = _native.codes()
_CODE = {name: i for i, name in enumerate(_COLLECTIVE_NAMES)}
_OP = {name: i for i, name in enumerate(_OP_NAMES)}
assert _OP["sum"] == 0 and _CODE["allreduce"] == 0, "the fast paths pass codes 0"
_AVG = _OP["avg"]

# torch's reduction operators by railyard's names (AVG is railyard's own: gloo has none).
_TORCH_OPS = [
    (dist.ReduceOp.SUM, "sum"),
    (dist.ReduceOp.PRODUCT, "prod"),
    (dist.ReduceOp.MIN, "min"),
    (dist.ReduceOp.MAX, "max"),
    (dist.ReduceOp.AVG, "avg"),
]


_SUM = dist.ReduceOp.SUM


def _op(reduce_op: Any) -> int:
    if reduce_op == _SUM:  # the common case first: one comparison
        return 0
    for torch_op, name in _TORCH_OPS:
        if reduce_op == torch_op:
            return _OP[name]
    raise ValueError(f"railyard: reduction {reduce_op} is not supported (SUM, PRODUCT, MIN, MAX, AVG)")


# Scratch kept per group and role (see ProcessGroupRailyard._scratch).
_SCRATCH_BYTES = 256 << 20
# Parts of a list gather or scatter at least this large go one message each.
_DIRECT_BYTES = 1 << 20


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1)


def _row(t: torch.Tensor) -> int:
    """Elements per row (dim 0), as split sizes count them; 1 for a 0-d tensor."""
    return math.prod(t.shape[1:]) if t.dim() else 1


_INTEGERS = (torch.int32, torch.int64, torch.uint8)


def _no_integer_avg(tensors: Sequence[torch.Tensor]) -> None:
    for t in tensors:
        if t.dtype in _INTEGERS:
            raise ValueError(f"railyard: AVG of {t.dtype}: integer sums wrap before they divide; reduce with SUM and divide")


def _is_loopback(host: str) -> bool:
    """Whether `host` resolves to this machine's loopback (Debian's /etc/hosts maps a
    host's own name to 127.0.1.1)."""
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def _master_addr(size: int) -> Optional[str]:
    """Where the other ranks reach rank 0's host: MASTER_ADDR (torchrun, railyard launch).
    Refused for a job across hosts without one (loopback would be unreachable)."""
    addr = os.environ.get("MASTER_ADDR") or None
    local = os.environ.get("LOCAL_WORLD_SIZE")
    spans_hosts = local is not None and local.isdigit() and int(local) < int(os.environ.get("WORLD_SIZE", size))
    if spans_hosts and (addr is None or _is_loopback(addr)):
        raise ValueError(
            "railyard: the job spans hosts (LOCAL_WORLD_SIZE < WORLD_SIZE) and MASTER_ADDR does not name rank 0's "
            "host: set it, or RAILYARD_SOCKET_IFNAME to the interface the ranks reach each other on"
        )
    return addr


def _inside(part: torch.Tensor, whole: torch.Tensor, rank: int) -> str:
    """Whether ``part``'s memory is ``whole``'s chunk ``rank`` ("chunk"), overlaps
    ``whole`` otherwise ("overlaps"), or is apart from it ("apart")."""
    p, w = part.data_ptr(), whole.data_ptr()
    pn, wn = part.numel() * part.element_size(), whole.numel() * whole.element_size()
    if pn == 0 or wn == 0 or p + pn <= w or w + wn <= p:
        return "apart"
    same = part.dtype == whole.dtype and part.is_contiguous() and whole.is_contiguous()
    return "chunk" if same and p == w + rank * pn else "overlaps"


class _Done(dist.Work):
    """A call that has finished: ``wait()`` returns at once; the future (made only when
    asked for) holds the call's output tensors, as DDP's communication hooks read them."""

    def __init__(self, result: Any):
        super().__init__()
        self._result = result

    def wait(self, timeout: Optional[timedelta] = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def exception(self) -> Any:
        return None

    def result(self) -> Any:
        return self._result

    def get_future(self) -> Future:
        future: Future = Future()
        future.set_result(self._result)
        return future


class _Queued(dist.Work):
    """An ``isend`` or ``irecv`` waiting in its group's queue: asking for it runs the
    queues (another thread may be running them: then it waits for that)."""

    def __init__(self, result: List[torch.Tensor]):
        super().__init__()
        self._result = result
        self._done = threading.Event()
        self._error: Optional[BaseException] = None

    def _finish(self, error: Optional[BaseException]) -> None:
        self._error = error
        self._done.set()

    def _settle(self) -> None:
        if not self._done.is_set():
            _flush_all()
            self._done.wait()
        if self._error is not None:
            raise self._error

    def wait(self, timeout: Optional[timedelta] = None) -> bool:
        self._settle()
        return True

    def is_completed(self) -> bool:
        # Polling is how a caller waits for a queued call: it runs the queues.
        try:
            self._settle()
        except Exception:  # noqa: BLE001 - failure is completion; wait() raises it
            pass
        return True

    def is_success(self) -> bool:
        return self.is_completed() and self._error is None

    def exception(self) -> Any:
        self.is_completed()
        return self._error

    def result(self) -> Any:
        self._settle()
        return self._result

    def get_future(self) -> Future:
        future: Future = Future()
        try:
            self._settle()
            future.set_result(self._result)
        except Exception as e:  # noqa: BLE001 - handed to the future
            future.set_exception(e)
        return future


# Every railyard group of this process, for `_flush_all`.
_GROUPS: "weakref.WeakSet[ProcessGroupRailyard]" = weakref.WeakSet()
# One flush at a time in a process: queued calls of every group, run in one order.
_FLUSH = threading.Lock()
# Queued sends and receives in all groups (a collective in any group runs them first).
_QUEUED = [0]


def _flush_all() -> None:
    """Run every group's queued sends and receives: groups in name order (the same on
    every rank), each group's queue in `ProcessGroupRailyard._flush`'s order."""
    with _FLUSH:
        for group in sorted(list(_GROUPS), key=lambda g: g.group_name):
            group._flush()
        _QUEUED[0] = 0


class ProcessGroupRailyard(dist.ProcessGroup):
    """One group's communicator. torch creates it through ``init_process_group`` and
    ``new_group``; its methods are what ``torch.distributed``'s functions call."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)
        self._rank = rank
        self._size = size
        self._store = store
        self._timeout = timeout
        secs = timeout.total_seconds()
        if rank == 0:
            rendezvous = _native.rendezvous_id(_master_addr(size))
            store.set("railyard/id", rendezvous)
        else:
            rendezvous = store.get("railyard/id").decode()
        self._comm = _native.Comm.join(rendezvous, rank, size, secs)
        if rank == 0 and size > 1:
            # Every rank has read it (they all joined): a group created again under this
            # name (torch names groups by count, reset by destroy_process_group) must not
            # find this one's.
            store.delete_key("railyard/id")
        # Store keys of this group's monitored barriers: unique to this rendezvous.
        self._keys = "railyard/" + hashlib.sha256(rendezvous.encode()).hexdigest()[:16]
        self._queue: List[Any] = []  # (kind, tensor, peer, work) of isend/irecv not yet run
        self._scratches: dict = {}
        self._lock = threading.Lock()
        self._barriers = 0
        _GROUPS.add(self)

    # -- what torch asks of any backend ---------------------------------------------

    def getBackendName(self) -> str:
        return BACKEND

    def name(self) -> str:
        return BACKEND

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank

    @property
    def _device_types(self) -> List[torch.device]:
        # A Python group registers no C++ backend per device, so torch's own answer is
        # empty; monitored_barrier and the object collectives ask for it. The one asker
        # told "none" is torch's flight-recorder hook, which needs the C++ group name a
        # Python group cannot have (torch's own comment in _maybe_attach_flight_recorder):
        # with "cpu" it fails the group's creation.
        if sys._getframe(1).f_code.co_name == "_maybe_attach_flight_recorder":
            return []
        return [torch.device("cpu")]

    # torch names every group after creating it; a Python group keeps the name itself
    # (the C++ group keeps it on its per-device backends, which a Python group has none of).
    def _set_group_name(self, name: str) -> None:
        self._group_name = name

    @property
    def group_name(self) -> str:
        return getattr(self, "_group_name", "")

    def _set_group_desc(self, desc: str) -> None:
        self._group_desc = desc

    @property
    def group_desc(self) -> str:
        return getattr(self, "_group_desc", "")

    def _get_backend(self, device: Any) -> "ProcessGroupRailyard":
        # The group is its own backend on its one device (torch asks, e.g. whether the
        # backend coalesces point-to-point calls: it does not, it queues them).
        return self

    # torch asks these of a backend: railyard splits no communicator and coalesces no
    # calls (it queues point-to-point ones, see _flush).
    supports_splitting = False
    supports_coalescing = False

    def shutdown(self) -> None:
        """Close the communicator (torch's destroy_process_group calls it)."""
        with _FLUSH:
            self._flush()
        self._comm.close()

    def abort(self) -> None:
        self._comm.close()

    def __repr__(self) -> str:
        return f"ProcessGroupRailyard(rank={self._rank}, size={self._size})"

    # -- plumbing ----------------------------------------------------------------------

    def _call(self, collective: str, send, recv, count: int, op: int = 0, root: int = 0, peer: int = 0, counts=None, in_place: bool = False) -> None:
        if _QUEUED[0]:
            _flush_all()
        self._comm.call(_CODE[collective], send, recv, count, op, root, peer, counts, in_place)

    def _scratch(self, role: str, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """A flat buffer for the list forms (all_gather, gather, scatter, all_to_all), kept
        between calls up to _SCRATCH_BYTES per role: a fresh 64 MiB tensor per call costs
        its page faults (a scatter of 64 MiB took 39 ms with one, 10 ms without). numpy
        allocates it, which asks the kernel for huge pages as for railyard's own arrays."""
        nbytes = numel * torch.empty(0, dtype=dtype).element_size()
        if nbytes > _SCRATCH_BYTES:
            return torch.empty(numel, dtype=dtype)
        have = self._scratches.get(role)
        if have is None or have.numel() < nbytes:
            have = torch.from_numpy(np.empty(max(nbytes, 4096), dtype=np.uint8))
            self._scratches[role] = have
        return have[:nbytes].view(dtype)

    def _joined(self, parts: Sequence[torch.Tensor]) -> torch.Tensor:
        """``parts`` end to end as one flat tensor: a view when they already lie so in
        memory (chunks of one tensor), else a copy into the send scratch buffer."""
        dtype = parts[0].dtype
        total = sum(p.numel() for p in parts)
        first = parts[0]
        if all(p.is_contiguous() and p.dtype == dtype for p in parts):
            storage = first.untyped_storage()
            at, adjacent = first.data_ptr(), True
            for p in parts:
                if p.data_ptr() != at or p.untyped_storage().data_ptr() != storage.data_ptr():
                    adjacent = False
                    break
                at += p.numel() * p.element_size()
            if adjacent:  # one storage, end to end: a view of it, never a resize
                return torch.empty(0, dtype=dtype).set_(storage, first.storage_offset(), (total,))
        flat = self._scratch("send", total, dtype)
        offset = 0
        for p in parts:
            flat[offset : offset + p.numel()].copy_(_flat(p))
            offset += p.numel()
        return flat

    def _root(self, root: int, what: str = "root") -> int:
        if not 0 <= root < self._size:
            raise ValueError(f"railyard: {what} {root} is not a rank of this group of {self._size}")
        return root

    @staticmethod
    def _one(tensors: Sequence[torch.Tensor], what: str) -> torch.Tensor:
        if len(tensors) != 1:
            raise ValueError(f"railyard: {what} takes one tensor per rank (got {len(tensors)})")
        return tensors[0]

    def _equal_parts(self, parts: Sequence[torch.Tensor], like: torch.Tensor, what: str) -> None:
        if len(parts) != self._size:
            raise ValueError(f"railyard: {what}: {len(parts)} tensors for a group of {self._size}")
        for i, p in enumerate(parts):
            if p.numel() != like.numel() or p.dtype != like.dtype:
                raise ValueError(
                    f"railyard: {what}: tensor {i} has {p.numel()} {p.dtype} elements, the input {like.numel()} {like.dtype}"
                )

    # -- collectives -------------------------------------------------------------------

    def allreduce(self, tensors: List[torch.Tensor], opts: Any = None) -> dist.Work:
        op = _op(opts.reduceOp) if opts is not None else 0
        if _QUEUED[0]:
            _flush_all()
        if op == _AVG:
            _no_integer_avg(tensors)
        call = self._comm.all_reduce_in_place
        for t in tensors:
            call(t, op)
        return _Done(tensors)

    def allreduce_coalesced(self, tensors: List[torch.Tensor], opts: Any = None) -> dist.Work:
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors: List[torch.Tensor], opts: Any) -> dist.Work:
        root = self._root(opts.rootRank)
        for t in tensors:
            self._call("broadcast", t, None, t.numel(), root=root, in_place=True)
        return _Done(tensors)

    def reduce(self, tensors: List[torch.Tensor], opts: Any) -> dist.Work:
        root = self._root(opts.rootRank)
        op = _op(opts.reduceOp)
        if op == _AVG:
            _no_integer_avg(tensors)
        for t in tensors:  # in place: the root's tensor gets the reduction
            self._call("reduce", t, None, t.numel(), op, root=root, in_place=True)
        return _Done(tensors)

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> dist.Work:
        if output.numel() != input.numel() * self._size or output.dtype != input.dtype:
            raise ValueError(
                f"railyard: all_gather_into_tensor: the output has {output.numel()} {output.dtype} elements; "
                f"{self._size} ranks x {input.numel()} {input.dtype} make {input.numel() * self._size}"
            )
        where = _inside(input, output, self._rank)
        if where == "chunk":  # FSDP's form: the input is this rank's chunk of the output
            self._call("allgather", output, None, output.numel(), in_place=True)
        else:
            self._call("allgather", input.clone() if where == "overlaps" else input, output, output.numel())
        return _Done([output])

    all_gather_single = _allgather_base

    def allgather(self, outputs: List[List[torch.Tensor]], inputs: List[torch.Tensor], opts: Any = None) -> dist.Work:
        for parts, t in zip(outputs, inputs):
            self._equal_parts(parts, t, "all_gather")
            flat = self._scratch("recv", self._size * t.numel(), t.dtype)
            self._call("allgather", t, flat, flat.numel())
            for part, chunk in zip(parts, flat.chunk(self._size)):
                part.copy_(chunk.view_as(part))
        return _Done(outputs)

    def allgather_coalesced(self, outputs: List[List[torch.Tensor]], inputs: List[torch.Tensor], opts: Any = None) -> dist.Work:
        for parts, t in zip(outputs, inputs):
            self.allgather([parts], [t], opts)
        return _Done(outputs)

    def allgather_into_tensor_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor], opts: Any = None) -> dist.Work:
        for out, t in zip(outputs, inputs):
            self._allgather_base(out, t, opts)
        return _Done(outputs)

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> dist.Work:
        op = _op(opts.reduceOp) if opts is not None else _OP["sum"]
        if op == _AVG:
            _no_integer_avg([input])
        if input.numel() != output.numel() * self._size or output.dtype != input.dtype:
            raise ValueError(
                f"railyard: reduce_scatter_tensor: the input has {input.numel()} {input.dtype} elements; "
                f"{self._size} ranks x {output.numel()} {output.dtype} make {output.numel() * self._size}"
            )
        where = _inside(output, input, self._rank)
        if where == "chunk":  # the output is this rank's chunk of the input: in place
            self._call("reducescatter", input, None, input.numel(), op, in_place=True)
        else:
            self._call("reducescatter", input.clone() if where == "overlaps" else input, output, input.numel(), op)
        return _Done([output])

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter(self, outputs: List[torch.Tensor], inputs: List[List[torch.Tensor]], opts: Any = None) -> dist.Work:
        for out, parts in zip(outputs, inputs):
            self._equal_parts(parts, out, "reduce_scatter")
            self._reduce_scatter_base(out, self._joined(parts), opts)
        return _Done(outputs)

    def reduce_scatter_tensor_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor], opts: Any = None) -> dist.Work:
        for out, t in zip(outputs, inputs):
            self._reduce_scatter_base(out, t, opts)
        return _Done(outputs)

    def gather(self, outputs: List[List[torch.Tensor]], inputs: List[torch.Tensor], opts: Any) -> dist.Work:
        root = self._root(opts.rootRank)
        t = self._one(inputs, "gather")
        parts = None
        if self._rank == root:
            parts = self._one(outputs, "gather")
            self._equal_parts(parts, t, "gather")
        if t.numel() * t.element_size() >= _DIRECT_BYTES:
            # Large parts go straight into the root's list, one message each (the
            # collective would land them in one buffer to be copied out).
            if self._rank != root:
                self._call("sendrecv", t.contiguous(), None, t.numel(), root=self._rank, peer=root)
                return _Done(outputs)
            for r, part in enumerate(parts):
                if r == root:
                    part.copy_(t.reshape(part.shape))
                    continue
                into = part if part.is_contiguous() else torch.empty(part.shape, dtype=part.dtype)
                self._call("sendrecv", None, into, into.numel(), root=r, peer=root)
                if into is not part:
                    part.copy_(into)
            return _Done(outputs)
        flat = None
        if self._rank == root:
            flat = self._scratch("recv", self._size * t.numel(), t.dtype)
        self._call("gather", t, flat, self._size * t.numel(), root=root)
        if flat is not None:
            for part, chunk in zip(outputs[0], flat.chunk(self._size)):
                part.copy_(chunk.view_as(part))
        return _Done(outputs)

    def scatter(self, outputs: List[torch.Tensor], inputs: List[List[torch.Tensor]], opts: Any) -> dist.Work:
        root = self._root(opts.rootRank)
        out = self._one(outputs, "scatter")
        parts = None
        if self._rank == root:
            parts = self._one(inputs, "scatter")
            self._equal_parts(parts, out, "scatter")
        if out.numel() * out.element_size() >= _DIRECT_BYTES:
            # Large parts leave the root's list one message each, with no copy into one
            # buffer first (at 4 ranks on 2 cores that copy put a 64 MiB scatter above gloo).
            if self._rank != root:
                into = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype)
                self._call("sendrecv", None, into, into.numel(), root=root, peer=self._rank)
                if into is not out:
                    out.copy_(into)
                return _Done(outputs)
            for r, part in enumerate(parts):
                if r == root:
                    out.copy_(part.reshape(out.shape))
                else:
                    self._call("sendrecv", part.contiguous(), None, part.numel(), root=root, peer=r)
            return _Done(outputs)
        flat = None
        if self._rank == root:
            flat = self._joined(parts)
        self._call("scatter", flat, out, self._size * out.numel(), root=root)
        return _Done(outputs)

    def alltoall_base(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        output_split_sizes: List[int],
        input_split_sizes: List[int],
        opts: Any = None,
    ) -> dist.Work:
        if output.dtype != input.dtype:
            raise ValueError(f"railyard: all_to_all_single: output {output.dtype}, input {input.dtype}")
        if not output_split_sizes and not input_split_sizes:
            if input.numel() % self._size or output.numel() != input.numel():
                raise ValueError(
                    f"railyard: all_to_all_single: without split sizes the input ({input.numel()} elements) must split "
                    f"evenly over {self._size} ranks and the output be as large (it has {output.numel()})"
                )
            self._call("alltoall", input, output, input.numel())
            return _Done([output])
        send_counts = self._splits(input_split_sizes, input, _row(input), "input_split_sizes")
        recv_counts = self._splits(output_split_sizes, output, _row(output), "output_split_sizes")
        self._alltoallv(input, output, send_counts, recv_counts)
        return _Done([output])

    def _splits(self, splits: List[int], t: torch.Tensor, row: int, what: str) -> List[int]:
        if not splits:  # an even split of this side
            if t.dim() == 0 or t.shape[0] % self._size:
                raise ValueError(f"railyard: {what} not given and {t.shape[0] if t.dim() else 0} rows do not split over {self._size} ranks")
            splits = [t.shape[0] // self._size] * self._size
        if len(splits) != self._size or any(s < 0 for s in splits) or sum(splits) * row != t.numel():
            raise ValueError(f"railyard: {what} {list(splits)} do not split {t.numel()} elements ({row} per row) over {self._size} ranks")
        return [s * row for s in splits]

    def _alltoallv(self, send: torch.Tensor, recv: torch.Tensor, send_counts: List[int], recv_counts: List[int]) -> None:
        # railyard's all-to-allv takes the whole count matrix on every rank (its schedule
        # is built from it; P² counts, as its own signature check needs); torch hands each
        # rank its row of sends and its column of receives, so both are gathered, and
        # every rank checks every column: all refuse a mismatch together, none waits.
        n = self._size
        mine = torch.tensor(list(send_counts) + list(recv_counts), dtype=torch.int64)
        both = torch.empty(2 * n * n, dtype=torch.int64)
        self._call("allgather", mine, both, both.numel())
        table = both.view(n, 2, n)
        sends, recvs = table[:, 0, :], table[:, 1, :]
        if not torch.equal(sends.t(), recvs):
            bad = int((sends.t() != recvs).any(dim=1).nonzero()[0])
            raise ValueError(
                f"railyard: all_to_all: rank {bad} expects {recvs[bad].tolist()} elements from the ranks, "
                f"they send {sends[:, bad].tolist()}"
            )
        self._call("alltoallv", send, recv, 0, counts=sends.tolist())

    def alltoall(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor], opts: Any = None) -> dist.Work:
        if len(outputs) != self._size or len(inputs) != self._size:
            raise ValueError(f"railyard: all_to_all: {len(inputs)} inputs and {len(outputs)} outputs for a group of {self._size}")
        dtype = inputs[0].dtype
        if any(t.dtype != dtype for t in list(inputs) + list(outputs)):
            raise ValueError("railyard: all_to_all: the tensors must have one dtype")
        send = self._joined(inputs)
        recv = self._scratch("recv", sum(t.numel() for t in outputs), dtype)
        self._alltoallv(send, recv, [t.numel() for t in inputs], [t.numel() for t in outputs])
        offset = 0
        for t in outputs:
            t.copy_(recv[offset : offset + t.numel()].view_as(t))
            offset += t.numel()
        return _Done(outputs)

    def barrier(self, opts: Any = None) -> dist.Work:
        marker = np.array([self._rank % 256], dtype=np.uint8)
        out = np.empty(self._size, dtype=np.uint8)
        self._call("barrier", marker, out, 0)
        return _Done([])

    def monitored_barrier(self, timeout: Optional[timedelta] = None, wait_all_ranks: bool = False) -> None:
        """A barrier through the store that names the ranks that did not arrive in
        ``timeout`` (rank 0 waits for each; with ``wait_all_ranks`` all are named)."""
        if _QUEUED[0]:
            _flush_all()
        secs = (timeout or self._timeout).total_seconds()
        self._barriers += 1
        key = f"{self._keys}/monitored/{self._barriers}"
        self._store.set(f"{key}/{self._rank}", "1")
        if self._rank == 0:
            # One deadline for the whole barrier, as gloo's: not a timeout per rank.
            deadline = time.monotonic() + secs
            missing = []
            for r in range(1, self._size):
                left = max(deadline - time.monotonic(), 0.001)
                try:
                    self._store.wait([f"{key}/{r}"], timedelta(seconds=left))
                except Exception:  # noqa: BLE001 - the store's timeout, reported below
                    missing.append(r)
                    if not wait_all_ranks:
                        break
            # Every rank passed the previous barrier (none is missing from this one): its
            # keys can go.
            if self._barriers > 1 and not missing:
                old = f"{self._keys}/monitored/{self._barriers - 1}"
                for k in [f"{old}/{r}" for r in range(self._size)] + [f"{old}/done", f"{old}/failed"]:
                    self._store.delete_key(k)
            if missing:
                self._store.set(f"{key}/failed", ",".join(map(str, missing)))
                self._store.set(f"{key}/done", "failed")
                raise RuntimeError(
                    f"railyard: monitored_barrier: rank{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(map(str, missing))} did not arrive within {secs:g} s"
                )
            self._store.set(f"{key}/done", "ok")
        else:
            # Rank 0 may use its whole timeout before it says who is missing: wait a
            # little longer for its word than it waits for the ranks.
            try:
                self._store.wait([f"{key}/done"], timedelta(seconds=secs * 1.5 + 1.0))
            except Exception:  # noqa: BLE001 - rank 0 names who was missing
                raise RuntimeError(f"railyard: monitored_barrier: rank 0 did not release the barrier within {secs:g} s") from None
            if self._store.get(f"{key}/done") != b"ok":
                missing = self._store.get(f"{key}/failed").decode()
                raise RuntimeError(f"railyard: monitored_barrier: rank(s) {missing} did not arrive within {secs:g} s (rank 0 says)")

    # -- point to point ------------------------------------------------------------------

    def send(self, tensors: List[torch.Tensor], dst: int, tag: int = 0) -> dist.Work:
        return self._enqueue("send", tensors, dst, tag)

    def recv(self, tensors: List[torch.Tensor], src: int, tag: int = 0) -> dist.Work:
        return self._enqueue("recv", tensors, src, tag)

    def recv_anysource(self, tensors: List[torch.Tensor], tag: int = 0) -> dist.Work:
        raise ValueError("railyard: recv from any source is not supported; name the sending rank")

    def _enqueue(self, kind: str, tensors: List[torch.Tensor], peer: int, tag: int) -> dist.Work:
        if tag != 0:
            raise ValueError(f"railyard: tag {tag}: railyard matches sends and receives in issue order; tags other than 0 are not supported")
        self._root(peer, "peer")
        if peer == self._rank:
            raise ValueError(f"railyard: {kind} to or from rank {peer}, this rank")
        t = self._one(tensors, kind)
        work = _Queued(tensors)
        with self._lock:
            self._queue.append((kind, t, peer, work))
            _QUEUED[0] += 1
        return work

    def _flush(self) -> None:
        """Run the queued sends and receives: peers in increasing rank order and, with one
        peer, the lower rank's sends first, the order in which every pair's first pending
        call is the first of both its ranks (so none waits on the other); the order among
        sends to one peer, and among receives from it, is the issue order."""
        with self._lock:
            queue, self._queue = self._queue, []
        order = sorted(queue, key=lambda q: (q[2], (q[0] == "send") != (self._rank < q[2])))
        failed: Optional[BaseException] = None
        try:
            for kind, t, peer, work in order:
                if failed is None:
                    try:
                        if kind == "send":
                            self._comm.call(_CODE["sendrecv"], t, None, t.numel(), 0, self._rank, peer, None, False)
                        else:
                            self._comm.call(_CODE["sendrecv"], None, t, t.numel(), 0, peer, self._rank, None, False)
                    except Exception as e:  # noqa: BLE001 - this and every later call fail with it
                        failed = e
                work._finish(failed)
        finally:
            # Interrupted (Ctrl-C): what did not run fails, rather than reporting success.
            for *_, work in order:
                if not work._done.is_set():
                    work._finish(RuntimeError("railyard: interrupted before this send or receive ran"))


# Rank, world size, local rank and ranks on this host by launcher, in the order
# railyard's runtime reads them (crates/runtime/src/env.rs); torchrun and
# `railyard launch` set torch's own variables.
_LAUNCHERS = [
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("open-mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", None),
]
# A job id every rank of one job sees, to derive a common store port from.
_JOB_IDS = ["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID", "PMI_JOBID"]


def _launcher_env(environ: dict) -> dict:
    """The torch variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) a
    launcher other than torchrun implies: what ``init_process_group`` adds."""
    for name, rank, size, local, local_size in _LAUNCHERS:
        if rank in environ and size in environ:
            break
    else:
        raise ValueError(
            "railyard: no launcher variables (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, PMI_*, SLURM_*): "
            "start the job with torchrun, mpirun, srun or railyard launch"
        )
    out = {"RANK": environ[rank], "WORLD_SIZE": environ[size], "LOCAL_RANK": environ.get(local, environ[rank])}
    one_host = (local_size is not None and environ.get(local_size) == environ[size]) or environ.get("SLURM_NNODES") == "1"
    if "MASTER_ADDR" not in environ:
        if not one_host:
            raise ValueError(f"railyard: the ranks ({name}) span hosts: set MASTER_ADDR to rank 0's host")
        out["MASTER_ADDR"] = "127.0.0.1"
    if "MASTER_PORT" not in environ:
        job = next((environ[k] for k in _JOB_IDS if environ.get(k)), None)
        if job is None:
            raise ValueError(f"railyard: no MASTER_PORT and no job id ({', '.join(_JOB_IDS)}) to derive one from")
        step = environ.get("SLURM_STEP_ID", "")
        digest = 2166136261
        for byte in f"{job}.{step}".encode():  # FNV-1a: the same port on every rank
            digest = ((digest ^ byte) * 16777619) % (1 << 32)
        out["MASTER_PORT"] = str(20000 + digest % 12000)
    return out


def init_process_group(backend: str = BACKEND, **kwargs: Any) -> None:
    """``torch.distributed.init_process_group`` under any launcher railyard knows:
    torchrun and ``railyard launch`` as they are, and mpirun, MPICH/PMI and Slurm through
    their variables (rank, size; rank 0's host is 127.0.0.1 on one host, else
    MASTER_ADDR; the store's port is MASTER_PORT, else derived from the job's id)."""
    if not ("RANK" in os.environ and "WORLD_SIZE" in os.environ):
        os.environ.update(_launcher_env(dict(os.environ)))
    dist.init_process_group(backend=backend, **kwargs)


def _create(store: dist.Store, rank: int, size: int, timeout: timedelta) -> ProcessGroupRailyard:
    return ProcessGroupRailyard(store, rank, size, timeout)


def register() -> None:
    """Register the backend with torch under the name ``railyard`` (once)."""
    if BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])


register()

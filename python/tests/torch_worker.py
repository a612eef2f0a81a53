"""One rank of the torch backend's check (python/tests/test_torch.py): every collective
torch.distributed offers, run on the railyard group and on a gloo group over the same
ranks with the same inputs, and every rank's results compared. Prints
"rank R: N checks ok" at the end; raises at the first difference."""

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import railyard.torch as rt

launcher = sys.argv[1] if len(sys.argv) > 1 else "torchrun"
if launcher == "torchrun":
    dist.init_process_group(backend="railyard", timeout=timedelta(seconds=60))
else:  # mpirun / Slurm / railyard launch: the launcher's variables, through our helper
    rt.init_process_group(timeout=timedelta(seconds=60))
rank, size = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "railyard", dist.get_backend()
gloo = dist.new_group(backend="gloo")
checks = 0

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.uint8]


def data(shape, dtype, salt=0):
    shape = (shape,) if isinstance(shape, int) else shape
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    hi = 4 if dtype == torch.uint8 else 50
    return torch.randint(1, hi, shape, generator=g).to(dtype)


def same(ours, theirs, what):
    global checks
    if isinstance(ours, (list, tuple)):
        assert len(ours) == len(theirs), what
        for a, b in zip(ours, theirs):
            same(a, b, what)
        return
    # Reductions may add in another order: floats agree to rounding, integers exactly.
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(ours.dtype, 1e-5)
    if ours.dtype.is_floating_point:
        torch.testing.assert_close(ours, theirs, rtol=tol, atol=tol, msg=lambda m: f"rank {rank}: {what}: {m}")
    else:
        assert torch.equal(ours, theirs), f"rank {rank}: {what}: {ours} != {theirs}"
    checks += 1


def both(fn, *args):
    """fn(group, *copies of args) on railyard's group and gloo's: (ours, theirs)."""
    ours = [a.clone() if torch.is_tensor(a) else [x.clone() for x in a] for a in args]
    theirs = [a.clone() if torch.is_tensor(a) else [x.clone() for x in a] for a in args]
    fn(None, *ours)
    fn(gloo, *theirs)
    return ours, theirs


OPS = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
for dtype in DTYPES:
    for n in (1, 7, 1000):
        for op in OPS:
            if op == dist.ReduceOp.PRODUCT and n > 7:
                continue
            o, t = both(lambda g, x: dist.all_reduce(x, op=op, group=g), data(n, dtype))
            same(o, t, f"all_reduce {dtype} {op} n={n}")

# AVG is railyard's own (gloo has none): the sum over the ranks, divided by their number.
x = data(10, torch.float64)
s = x.clone()
dist.all_reduce(s, group=gloo)
dist.all_reduce(x, op=dist.ReduceOp.AVG)
same(x, s / size, "all_reduce avg")

o, t = both(lambda g, a, b: dist.all_reduce_coalesced([a, b], group=g), data(5, torch.float32), data(3, torch.float32, 1))
same(o, t, "all_reduce_coalesced")

for dtype in (torch.float32, torch.bfloat16, torch.int64):
    x = data((3, 2), dtype)
    o, t = both(lambda g, out: dist.all_gather(out, x, group=g), [torch.empty((3, 2), dtype=dtype) for _ in range(size)])
    same(o, t, f"all_gather {dtype}")
    o, t = both(lambda g, out: dist.all_gather_into_tensor(out, x, group=g), torch.empty((size * 3, 2), dtype=dtype))
    same(o, t, f"all_gather_into_tensor {dtype}")
    parts = [data(4, dtype, i) for i in range(size)]
    o, t = both(lambda g, out: dist.reduce_scatter(out, parts, group=g), torch.empty(4, dtype=dtype))
    same(o, t, f"reduce_scatter {dtype}")
    big = data(4 * size, dtype)
    o, t = both(lambda g, out: dist.reduce_scatter_tensor(out, big, group=g), torch.empty(4, dtype=dtype))
    same(o, t, f"reduce_scatter_tensor {dtype}")
    for root in range(size):
        o, t = both(lambda g, b: dist.broadcast(b, root, group=g), data(9, dtype))
        same(o, t, f"broadcast root {root} {dtype}")
        o, t = both(lambda g, b: dist.reduce(b, root, group=g), data(9, dtype))
        # Off the root the buffer's contents are unspecified; compare the root's.
        if rank == root:
            same(o, t, f"reduce root {root} {dtype}")
        gl = [torch.empty(5, dtype=dtype) for _ in range(size)] if rank == root else None
        gl2 = [torch.empty(5, dtype=dtype) for _ in range(size)] if rank == root else None
        mine = data(5, dtype)
        dist.gather(mine, gl, dst=root)
        dist.gather(mine, gl2, dst=root, group=gloo)
        if rank == root:
            same(gl, gl2, f"gather root {root} {dtype}")
        sl = [data(3, dtype, 10 + i) for i in range(size)] if rank == root else None
        a, b = torch.empty(3, dtype=dtype), torch.empty(3, dtype=dtype)
        dist.scatter(a, sl, src=root)
        dist.scatter(b, sl, src=root, group=gloo)
        same(a, b, f"scatter root {root} {dtype}")

# Parts of 1 MiB and more go one message each (a strided one copied on the way).
for root in (0, size - 1):
    big = 1 << 18
    gl = [torch.empty(big) for _ in range(size)] if rank == root else None
    gl2 = [torch.empty(big) for _ in range(size)] if rank == root else None
    if gl is not None:
        gl[-1] = torch.empty(big * 2)[::2]
    mine = data(big, torch.float32)
    dist.gather(mine, gl, dst=root)
    dist.gather(mine, gl2, dst=root, group=gloo)
    if rank == root:
        same(gl, gl2, f"gather of 1 MiB parts to root {root}")
    sl = [data(big, torch.float32, 20 + i) for i in range(size)] if rank == root else None
    a, b = torch.empty(big), torch.empty(big)
    dist.scatter(a, sl, src=root)
    dist.scatter(b, sl, src=root, group=gloo)
    same(a, b, f"scatter of 1 MiB parts from root {root}")

x = data(4 * size, torch.float32)
o, t = both(lambda g, out: dist.all_to_all_single(out, x, group=g), torch.empty(4 * size))
same(o, t, "all_to_all_single even")
# Uneven: rank r sends r + j + 1 rows of 2 to rank j.
send_rows = [rank + j + 1 for j in range(size)]
recv_rows = [j + rank + 1 for j in range(size)]
x = data((sum(send_rows), 2), torch.int64)
o, t = both(
    lambda g, out: dist.all_to_all_single(out, x, recv_rows, send_rows, group=g),
    torch.empty((sum(recv_rows), 2), dtype=torch.int64),
)
same(o, t, "all_to_all_single with split sizes")
# A rank with nothing to send (rank 0: zero rows) still receives.
send_rows = [0 if rank == 0 else 1 for _ in range(size)]
recv_rows = [0 if j == 0 else 1 for j in range(size)]
x = data((sum(send_rows), 3), torch.float32)
o, t = both(
    lambda g, out: dist.all_to_all_single(out, x, recv_rows, send_rows, group=g),
    torch.empty((sum(recv_rows), 3)),
)
same(o, t, "all_to_all_single with an empty input")
ins = [data(3, torch.float32, j) for j in range(size)]
o, t = both(lambda g, outs: dist.all_to_all(outs, ins, group=g), [torch.empty(3) for _ in range(size)])
same(o, t, "all_to_all lists")
# Uneven lists (gloo refuses them): rank r sends j + 1 elements of 100 r + j to rank j.
outs = [torch.empty(rank + 1) for _ in range(size)]
dist.all_to_all(outs, [torch.full((j + 1,), 100.0 * rank + j) for j in range(size)])
same(outs, [torch.full((rank + 1,), 100.0 * i + rank) for i in range(size)], "all_to_all uneven lists")

# Point to point: a ring shift posted as isend + irecv on every rank, then waited.
right, left = (rank + 1) % size, (rank - 1) % size
got = torch.empty(6)
works = [dist.isend(data(6, torch.float32), right), dist.irecv(got, left)]
for w in works:
    w.wait()
g = torch.Generator().manual_seed(1000 * left)
same(got, torch.randn(6, generator=g), "isend/irecv ring")
# The same with batch_isend_irecv, and blocking send/recv between ranks 0 and 1.
got = torch.empty(6)
for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, data(6, torch.float32, 1), right), dist.P2POp(dist.irecv, got, left)]):
    w.wait()
same(got, data(6, torch.float32, 1) if size == 1 else torch.randn(6, generator=torch.Generator().manual_seed(1000 * left + 1)), "batch_isend_irecv")
if rank == 0:
    dist.send(torch.arange(5.0), 1)
    back = torch.empty(5)
    dist.recv(back, 1)
    same(back, torch.arange(5.0) * 2, "send/recv")
elif rank == 1:
    y = torch.empty(5)
    dist.recv(y, 0)
    dist.send(y * 2, 0)

# Async handles and their futures.
x = data(8, torch.float32)
ref = x.clone()
dist.all_reduce(ref, group=gloo)
w = dist.all_reduce(x, async_op=True)
assert w.wait()
same(w.get_future().wait()[0], ref, "async future")

# Objects, barriers, sub-groups.
objs = [None] * size
dist.all_gather_object(objs, {"rank": rank})
assert objs == [{"rank": r} for r in range(size)], objs
dist.barrier()
dist.monitored_barrier(timeout=timedelta(seconds=30), wait_all_ranks=True)
sub_ranks = list(range(0, size, 2))
sub = dist.new_group(sub_ranks)
if rank in sub_ranks:
    x = torch.full((3,), float(rank))
    dist.all_reduce(x, group=sub)
    same(x, torch.full((3,), float(sum(sub_ranks))), "sub-group all_reduce")

# Refused with a clear error.
for bad, match in [
    (lambda: dist.all_reduce(torch.ones(4)[::2]), "not contiguous"),
    (lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)), "not supported"),
    (lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND), "not supported"),
    (lambda: dist.send(torch.ones(2), (rank + 1) % size, tag=7), "tag"),
    (lambda: dist.all_reduce(torch.ones(2, dtype=torch.int64), op=dist.ReduceOp.AVG), "integer sums wrap"),
]:
    try:
        bad()
    except Exception as e:  # noqa: BLE001
        assert match in str(e), f"rank {rank}: {match!r} not in {e}"
    else:
        raise AssertionError(f"rank {rank}: {match} was accepted")
dist.barrier()
print(f"rank {rank}: {checks} checks ok", flush=True)
dist.destroy_process_group()

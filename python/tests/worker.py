"""One rank of the multi-rank tests, started by `railyard launch`: every collective x
dtype on numpy arrays, each result compared with what numpy computes from every rank's
input (every rank can compute every rank's input: it is a function of rank and index)."""

import sys

import numpy as np

import railyard

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8]


def data(rank, n, dtype):
    # Small integers: exact in every dtype, sums of a few ranks stay in uint8 and float16.
    return ((np.arange(n) * 7 + rank * 3) % 11 + 1).astype(dtype)


def check(name, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError(f"{name}: got {got[:8]}... ({got.dtype}) want {want[:8]}... ({want.dtype})")


def chunks(count, parts):
    base, extra = divmod(count, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def main():
    comm = railyard.init()
    r, p = comm.rank, comm.size
    n = 37  # not a multiple of the rank count: uneven chunks
    ran = 0
    for dt in DTYPES:
        inputs = [data(q, n, dt) for q in range(p)]
        total = np.sum(np.stack(inputs).astype(np.int64), axis=0).astype(dt)
        # all-reduce, out of place and in place; min and max
        check(f"allreduce {dt}", comm.all_reduce(data(r, n, dt), np.empty(n, dt)), total)
        x = data(r, n, dt)
        comm.all_reduce(x)
        check(f"allreduce in place {dt}", x, total)
        check(f"allreduce max {dt}", comm.all_reduce(data(r, n, dt), np.empty(n, dt), op="max"), np.max(np.stack(inputs), axis=0))
        check(f"allreduce min {dt}", comm.all_reduce(data(r, n, dt), np.empty(n, dt), op="min"), np.min(np.stack(inputs), axis=0))
        # reduce-scatter
        sizes = chunks(n, p)
        start = sum(sizes[:r])
        mine = total[start : start + sizes[r]]
        check(f"reducescatter {dt}", comm.reduce_scatter(data(r, n, dt), np.empty(sizes[r], dt)), mine)
        check(f"reducescatter in place {dt}", comm.reduce_scatter(data(r, n, dt)), mine)
        # all-gather: rank q contributes chunk q of the whole
        whole = data(0, n, dt)
        offs = np.cumsum([0] + sizes)
        got = comm.all_gather(whole[offs[r] : offs[r + 1]].copy(), np.empty(n, dt))
        check(f"allgather {dt}", got, whole)
        buf = np.zeros(n, dt)
        buf[offs[r] : offs[r + 1]] = whole[offs[r] : offs[r + 1]]
        check(f"allgather in place {dt}", comm.all_gather(buf), whole)
        # broadcast from the last rank
        b = data(r, n, dt)
        check(f"broadcast {dt}", comm.broadcast(b, root=p - 1), inputs[p - 1])
        # reduce to rank 1 % p
        root = 1 % p
        got = comm.reduce(data(r, n, dt), root=root)
        if r == root:
            check(f"reduce {dt}", got, total)
        elif got is not None:
            raise AssertionError("reduce: a non-root rank got a result")
        # gather / scatter with equal chunks of m
        m = 5
        got = comm.gather(data(r, m, dt), root=0)
        if r == 0:
            check(f"gather {dt}", got, np.concatenate([data(q, m, dt) for q in range(p)]))
        full = data(0, m * p, dt)
        got = comm.scatter(full if r == 0 else None, np.empty(m, dt), root=0)
        check(f"scatter {dt}", got, full[r * m : (r + 1) * m])
        # all-to-all: chunk j of rank i goes to rank j
        k = 3 * p + 1
        send = data(r, k, dt)
        ks = chunks(k, p)
        ko = np.cumsum([0] + ks)
        want = np.concatenate([data(q, k, dt)[ko[r] : ko[r + 1]] for q in range(p)])
        check(f"alltoall {dt}", comm.all_to_all(send), want)
        # all-to-allv: rank i sends i + j + 1 elements to rank j
        counts = [[i + j + 1 for j in range(p)] for i in range(p)]
        send = data(r, sum(counts[r]), dt)
        recv = np.empty(sum(counts[i][r] for i in range(p)), dt)
        pieces = []
        for i in range(p):
            s = data(i, sum(counts[i]), dt)
            off = sum(counts[i][:r])
            pieces.append(s[off : off + counts[i][r]])
        check(f"alltoallv {dt}", comm.all_to_allv(send, recv, counts), np.concatenate(pieces))
        # send / recv around a ring
        nxt, prv = (r + 1) % p, (r - 1) % p
        if p > 1:
            if r % 2 == 0:
                comm.send(data(r, n, dt), nxt)
                got = comm.recv(np.empty(n, dt), prv)
            else:
                got = comm.recv(np.empty(n, dt), prv)
                comm.send(data(r, n, dt), nxt)
            check(f"sendrecv {dt}", got, inputs[prv])
        ran += 1
    # A send that is not this rank's share of recv is refused before anything moves, and
    # the message says what the share is.
    try:
        comm.all_gather(np.zeros(n + 1, np.float32), np.empty(n * p, np.float32))
        raise AssertionError("all_gather accepted a send of the wrong size")
    except ValueError as e:
        if "share of recv" not in str(e) or f"give rank {r} {n}" not in str(e):
            raise AssertionError(f"all_gather's size error: {e}")
    # async: a handle per call, results in issue order
    xs = [data(r, 1000, np.float32) for _ in range(3)]
    handles = [comm.all_reduce_async(x) for x in xs]
    total = np.sum(np.stack([data(q, 1000, np.float32) for q in range(p)]), axis=0)
    for h in handles:
        check("allreduce async", h.wait(), total)
    comm.barrier()
    # The GIL is released while a collective waits: a Python thread keeps counting while
    # rank 0 waits in a barrier for a rank that sleeps first.
    import threading
    import time

    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1

    if r == 0:
        t = threading.Thread(target=count)
        t.start()
        comm.barrier()
        stop.set()
        t.join()
        if ticks[0] < 1000:
            raise AssertionError(f"the GIL was held during the barrier: {ticks[0]} ticks")
    else:
        time.sleep(0.3)
        comm.barrier()
    # Two threads calling at once: serialised by the communicator, no deadlock (the lock is
    # taken with the GIL released). Equal inputs, so either pairing across ranks is right.
    outs = [None, None]

    def reduce_in(i):
        outs[i] = comm.all_reduce(np.full(65536, r + 1, np.float32), np.empty(65536, np.float32))

    threads = [threading.Thread(target=reduce_in, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for o in outs:
        check("two threads", o, np.full(65536, sum(range(1, p + 1)), np.float32))
    # A NaN wins max and min on every rank, wherever it is.
    for nan_rank in range(p):
        v = np.array([np.nan if r == nan_rank else 1.0], np.float32)
        for op in ("max", "min"):
            got = comm.all_reduce(v.copy(), op=op)
            if not np.isnan(got[0]):
                raise AssertionError(f"{op} with NaN on rank {nan_rank}: {got}")
    # An async failure seen through wait() is not raised again by the next call.
    h = comm.all_reduce_async(np.ones(3, np.complex64))
    try:
        h.wait()
    except TypeError:
        pass
    else:
        raise AssertionError("complex all-reduce did not fail")
    check("after a handled async error", comm.all_reduce(np.ones(3, np.float32)), np.full(3, p, np.float32))
    # CPU torch tensors go through a zero-copy numpy view, where torch is installed.
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        total = float(sum(range(1, p + 1)))
        tt = torch.full((16,), float(r + 1), dtype=torch.float32)
        comm.all_reduce(tt)
        if not torch.equal(tt, torch.full((16,), total)):
            raise AssertionError(f"torch all_reduce: {tt}")
        # The same tensor again (the cached view), then changed in every way torch
        # allows in place: each call must reduce what the tensor holds now.
        def again(t, want, what):
            comm.all_reduce(t)
            if not torch.equal(t, want):
                raise AssertionError(f"torch all_reduce after {what}: {t} (want {want})")

        tt.fill_(r + 1)
        again(tt, torch.full((16,), total), "fill_")
        tt.resize_(8).fill_(r + 1)
        again(tt, torch.full((8,), total), "resize_ to fewer elements")
        # (Growing it is refused by torch once a numpy view shares its storage.)
        tt.set_(torch.full((64,), float(r + 1)))
        again(tt, torch.full((64,), total), "set_ to another storage")
        tt.data = torch.full((4,), float(r + 1))
        again(tt, torch.full((4,), total), "assigning .data")
        # What a cache keyed on the tensor would get wrong (a review found each): .data
        # onto part of the same memory, shared memory, a tensor without a version counter.
        u = torch.full((8,), float(r + 1))
        comm.all_reduce(u)
        u.data = u.data[:4]
        u.fill_(r + 1)
        again(u, torch.full((4,), total), ".data onto a prefix of its own storage")
        u.share_memory_()
        u.fill_(r + 1)
        again(u, torch.full((4,), total), "share_memory_")
        with torch.inference_mode():
            inf = torch.full((3,), float(r + 1))
        again(inf, torch.full((3,), total), "an inference-mode tensor")
        m = torch.arange(6, dtype=torch.float64).reshape(2, 3) + r
        comm.all_reduce(m)
        m.t_()  # now a strided view: refused, not reduced through the last call's view
        try:
            comm.all_reduce(m)
        except ValueError:
            pass
        else:
            raise AssertionError("all_reduce of a transposed (strided) tensor did not fail")
        g = torch.full((5,), float(r + 1), requires_grad=True)
        comm.all_reduce(g)
        with torch.no_grad():
            g.mul_(2)
        again(g.detach(), torch.full((5,), 2 * total * p), "requires_grad")
    comm.barrier()
    # errors from bad arguments are ValueError/TypeError before anything is sent
    for bad, kind in [
        (lambda: comm.all_reduce(np.ones((4, 4), np.float32)[:, ::2]), ValueError),
        (lambda: comm.all_reduce(np.ones(4, np.complex64)), TypeError),
        (lambda: comm.broadcast(np.ones(4, np.float32), root=p), ValueError),
        (lambda: comm.all_reduce(np.ones(4, np.float32), np.ones(5, np.float32)), ValueError),
        (lambda: comm.all_reduce([1, 2, 3]), TypeError),
    ]:
        try:
            bad()
        except kind:
            pass
        else:
            raise AssertionError(f"no {kind.__name__}")
    comm.barrier()
    comm.close()
    print(f"rank {r}: {ran} dtypes ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())

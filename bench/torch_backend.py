#!/usr/bin/env python3
"""torch.distributed on CPU tensors: railyard's backend against gloo, and against
railyard's own numpy path (``railyard.Communicator`` on numpy arrays), every collective at
8 B … 64 MiB, in the same processes.

One torchrun job holds three communicators over the same ranks: the default group
(backend "railyard"), a gloo group (``new_group(backend="gloo")``) and railyard's numpy
communicator. For each collective and size, each round times the three in turn
(interleaved): warm-up calls, a barrier, ITERS back-to-back calls, the mean per call, the
maximum over ranks (as nccl-tests, ``railyard perf`` and ../shared/bench/peers time).
The table gives the median over ROUNDS rounds and the ratios railyard/gloo (below 1:
railyard faster) and backend/numpy (the backend's own per-call cost).

    python3 bench/torch_backend.py                    # needs: pip install ./python torch
    NPROCS=4 ROUNDS=5 python3 bench/torch_backend.py
    SIZES=8,65536 COLLECTIVES=all_reduce,broadcast python3 bench/torch_backend.py
    python3 bench/torch_backend.py --floor      # torch's own cost: a backend that does nothing

``--floor`` times an 8 B ``dist.all_reduce`` on a group whose backend returns at once
(what torch.distributed costs by itself, before any backend runs), on railyard's backend,
and railyard's numpy path, interleaved in the same processes.
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

SIZES = [8, 512, 8 << 10, 128 << 10, 2 << 20, 16 << 20, 64 << 20]
COLLECTIVES = [
    "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "reduce", "gather", "scatter", "all_to_all_single",
    "all_to_all", "send_recv", "barrier",
]


def iters_for(size, small):
    # About 256 MiB moved per timing at large sizes, `small` calls at small ones.
    return small if size <= 8192 else max(5, min(small, (256 << 20) // max(size, 1) // 4))


def worker(sizes, collectives, rounds, small_iters):
    from datetime import timedelta

    import numpy as np
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(backend="railyard", timeout=timedelta(seconds=300))
    rank, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    comm = numpy_comm(dist)

    def slowest(secs):
        t = torch.tensor([secs], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
        return t.item()

    def timed(fn, barrier, iters):
        for _ in range(min(20, iters)):
            fn()
        barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return slowest((time.perf_counter() - t0) / iters)

    def calls(name, size):
        """(backend call(group), numpy call or None) for `size` bytes per rank."""
        count = max(1, size // 4)
        x = torch.ones(count)
        part = torch.ones(max(1, count // n))
        whole = torch.ones(part.numel() * n)
        whole_in = torch.ones_like(whole)
        out_list = [torch.empty_like(part) for _ in range(n)]
        in_list = [torch.ones_like(part) for _ in range(n)]
        xn, partn, wholen = x.numpy(), part.numpy(), whole.numpy()
        peer = (rank + 1) % n if rank % 2 == 0 else rank - 1
        paired = not (n % 2 and rank == n - 1)
        torch_calls = {
            "all_reduce": (lambda g: dist.all_reduce(x, group=g), lambda: comm.all_reduce(xn)),
            "all_reduce_coalesced": (lambda g: dist.all_reduce_coalesced([x, part], group=g), None),
            "all_gather": (lambda g: dist.all_gather(out_list, part, group=g), lambda: comm.all_gather(partn, wholen)),
            "all_gather_into_tensor": (lambda g: dist.all_gather_into_tensor(whole, part, group=g), lambda: comm.all_gather(partn, wholen)),
            "reduce_scatter": (lambda g: dist.reduce_scatter(part, in_list, group=g), lambda: comm.reduce_scatter(wholen, partn)),
            "reduce_scatter_tensor": (lambda g: dist.reduce_scatter_tensor(part, whole, group=g), lambda: comm.reduce_scatter(wholen, partn)),
            "broadcast": (lambda g: dist.broadcast(x, 0, group=g), lambda: comm.broadcast(xn, 0)),
            "reduce": (lambda g: dist.reduce(x, 0, group=g), lambda: comm.reduce(xn, wholen[: xn.size] if wholen.size >= xn.size else None, root=0)),
            "gather": (lambda g: dist.gather(part, out_list if rank == 0 else None, dst=0, group=g), lambda: comm.gather(partn, wholen if rank == 0 else None, root=0)),
            "scatter": (lambda g: dist.scatter(part, in_list if rank == 0 else None, src=0, group=g), lambda: comm.scatter(wholen if rank == 0 else None, partn, root=0)),
            "all_to_all_single": (lambda g: dist.all_to_all_single(whole, whole_in, group=g), None),
            "all_to_all": (lambda g: dist.all_to_all(out_list, in_list, group=g), None),
            "barrier": (lambda g: dist.barrier(group=g), lambda: comm.barrier()),
        }
        wn_in = np.ones_like(wholen)
        numpy_a2a = lambda: comm.all_to_all(wn_in, wholen)
        torch_calls["all_to_all_single"] = (torch_calls["all_to_all_single"][0], numpy_a2a)
        torch_calls["all_to_all"] = (torch_calls["all_to_all"][0], numpy_a2a)

        def exchange(g):  # pairs of ranks swap buffers: the lower sends first
            if not paired:
                return
            if rank < peer:
                dist.send(x, peer, group=g)
                dist.recv(x, peer, group=g)
            else:
                dist.recv(x, peer, group=g)
                dist.send(x, peer, group=g)

        def exchange_numpy():
            if not paired:
                return
            if rank < peer:
                comm.send(xn, peer)
                comm.recv(xn, peer)
            else:
                comm.recv(xn, peer)
                comm.send(xn, peer)

        torch_calls["send_recv"] = (exchange, exchange_numpy)
        return torch_calls[name]

    rows = []
    for name in collectives:
        for size in ([0] if name == "barrier" else sizes):
            backend_call, numpy_call = calls(name, size)
            iters = iters_for(size, small_iters)
            per = {"railyard": [], "gloo": [], "numpy": []}
            for _ in range(rounds):
                per["railyard"].append(timed(lambda: backend_call(None), dist.barrier, iters))
                per["gloo"].append(timed(lambda: backend_call(gloo), lambda: dist.barrier(group=gloo), iters))
                if numpy_call is not None:
                    per["numpy"].append(timed(numpy_call, comm.barrier, iters))
            rows.append({"collective": name, "size": size, **{k: statistics.median(v) if v else None for k, v in per.items()}})
            if rank == 0:
                print(f"{name} {size}: " + ", ".join(f"{k} {v}" for k, v in rows[-1].items() if k not in ("collective", "size")), file=sys.stderr, flush=True)
    if rank == 0:
        print("RESULT " + json.dumps(rows), flush=True)
    comm.close()
    dist.destroy_process_group()


def floor_worker(rounds, iters):
    """torch.distributed's own per-call cost: a Python backend whose all_reduce returns a
    finished Work at once, beside railyard's backend and its numpy path (8 B)."""
    import numpy as np
    import torch
    import torch.distributed as dist

    from railyard.torch import _Done

    class Nothing(dist.ProcessGroup):
        def allreduce(self, tensors, opts=None):
            return _Done(tensors)

        def barrier(self, opts=None):
            return _Done([])

        def getBackendName(self):
            return "nothing"

    dist.Backend.register_backend("nothing", lambda store, rank, size, timeout: Nothing(rank, size), devices=["cpu"])
    torch.set_num_threads(1)
    dist.init_process_group(backend="railyard")
    rank, n = dist.get_rank(), dist.get_world_size()
    nothing = dist.new_group(backend="nothing")
    gloo = dist.new_group(backend="gloo")
    comm = numpy_comm(dist)
    x, xn = torch.ones(2), np.ones(2, dtype=np.float32)

    def timed(fn):
        for _ in range(200):
            fn()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        t = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
        return t.item()

    per = {"nothing": [], "railyard": [], "numpy": []}
    for _ in range(rounds):
        per["nothing"].append(timed(lambda: dist.all_reduce(x, group=nothing)))
        per["railyard"].append(timed(lambda: dist.all_reduce(x)))
        per["numpy"].append(timed(lambda: comm.all_reduce(xn)))
    if rank == 0:
        print("RESULT " + json.dumps({k: statistics.median(v) for k, v in per.items()}), flush=True)
    comm.close()
    dist.destroy_process_group()


def fmt(secs):
    if secs is None:
        return "–"
    return f"{secs * 1e6:.2f} µs" if secs < 1e-3 else f"{secs * 1e3:.3f} ms"


def size_name(s):
    if s == 0:
        return "–"
    return f"{s} B" if s < 1024 else (f"{s >> 10} KiB" if s < 1 << 20 else f"{s >> 20} MiB")


def torchrun(n, args):
    """This script's worker as `n` ranks under torchrun: what rank 0 printed after RESULT."""
    env = dict(os.environ, GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME", "lo"), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n), str(pathlib.Path(__file__).resolve())] + args
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=7200, env=env)
    if out.returncode != 0:
        sys.exit(f"the benchmark job failed ({out.returncode}):\n{out.stdout[-4000:]}")
    return next(json.loads(l[len("RESULT "):]) for l in out.stdout.splitlines() if l.startswith("RESULT "))


def numpy_comm(dist):
    """railyard's numpy communicator over the default group's ranks, rendezvous through
    torch's store."""
    import railyard
    from railyard import _native

    store = dist.distributed_c10d._get_default_store()
    if dist.get_rank() == 0:
        store.set("bench/numpy-id", _native.rendezvous_id())
    return railyard.Communicator(_native.Comm.join(store.get("bench/numpy-id").decode(), dist.get_rank(), dist.get_world_size(), 300.0))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker([int(s) for s in sys.argv[2].split(",")], sys.argv[3].split(","), int(sys.argv[4]), int(sys.argv[5]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--floor-worker":
        floor_worker(int(sys.argv[2]), int(sys.argv[3]))
        return
    n = int(os.environ.get("NPROCS", "2"))
    rounds = int(os.environ.get("ROUNDS", "3"))
    small_iters = int(os.environ.get("ITERS", "2000"))
    if len(sys.argv) > 1 and sys.argv[1] == "--floor":
        r = torchrun(n, ["--floor-worker", str(max(rounds, 5)), str(max(small_iters, 20000))])
        print(f"## dist.all_reduce of 8 B, {n} ranks: torch's own cost and railyard's\n")
        print("| backend that does nothing (torch alone) | railyard backend | railyard numpy path | backend / numpy | backend − torch alone |")
        print("|---|---|---|---|---|")
        print(f"| {fmt(r['nothing'])} | {fmt(r['railyard'])} | {fmt(r['numpy'])} | {r['railyard'] / r['numpy']:.2f} | {fmt(r['railyard'] - r['nothing'])} |")
        return
    sizes = [int(s) for s in os.environ["SIZES"].split(",")] if "SIZES" in os.environ else SIZES
    collectives = os.environ["COLLECTIVES"].split(",") if "COLLECTIVES" in os.environ else COLLECTIVES
    rows = torchrun(n, ["--worker", ",".join(map(str, sizes)), ",".join(collectives), str(rounds), str(small_iters)])
    print(f"## torch.distributed on CPU tensors, {n} ranks on {os.cpu_count()} cores, float32 (median of {rounds} interleaved rounds)\n")
    print("| collective | size per rank | railyard backend | gloo | railyard / gloo | railyard numpy path | backend / numpy |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = lambda a, b: f"{a / b:.2f}" if a and b else "–"
        print(f"| {r['collective']} | {size_name(r['size'])} | {fmt(r['railyard'])} | {fmt(r['gloo'])} | "
              f"{ratio(r['railyard'], r['gloo'])} | {fmt(r['numpy'])} | {ratio(r['railyard'], r['numpy'])} |")
    worst = max(rows, key=lambda r: r["railyard"] / r["gloo"])
    print(f"\nworst railyard / gloo: {worst['railyard'] / worst['gloo']:.2f} ({worst['collective']}, {size_name(worst['size'])})")
    print("raw:", json.dumps(rows), file=sys.stderr)


if __name__ == "__main__":
    main()

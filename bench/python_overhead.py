#!/usr/bin/env python3
"""Per-call cost of an all-reduce called from Python: railyard's package against mpi4py's
Allreduce (Open MPI) and torch.distributed gloo, in the same run, at 2 ranks; railyard on
CPU torch tensors against the same calls on numpy arrays, timed in turn in one process;
and at large sizes railyard from Python against the Rust runtime (`railyard perf`) it
wraps.

Every peer is timed the same way: warm-up calls, one barrier, ITERS back-to-back calls,
mean per call, max over ranks (how `railyard perf`, nccl-tests and ../shared/bench/peers
time themselves). The three libraries run in rounds, interleaved, ROUNDS times; the table
gives the median per call and railyard's ratio to each peer (below 1: railyard faster).

    python3 bench/python_overhead.py            # needs: pip install ./python numpy mpi4py torch
    ROUNDS=5 ITERS=20000 python3 bench/python_overhead.py

Roles (started by the script itself): --role railyard (under `railyard launch`), --role
mpi4py (under mpirun), --role gloo (torch.multiprocessing).
"""

import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SMALL = [8, 512, 8192]
LARGE = [16 << 20, 64 << 20]


def iters_for(size, small_iters):
    return small_iters if size <= 8192 else max(20, (256 << 20) // (size * 4))


def timed(fn, barrier, iters, warmup):
    for _ in range(warmup):
        fn()
    barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def role_railyard(sizes, small_iters):
    import numpy as np

    import railyard

    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    comm = railyard.init()
    out = []
    for size in sizes:
        x = np.ones(size // 4, dtype=np.float32)
        iters = iters_for(size, small_iters)
        t = timed(lambda: comm.all_reduce(x), comm.barrier, iters, 50)
        row = {"size": size, "secs": float(comm.all_reduce(np.array([t]), op="max")[0])}
        if torch is not None:
            # The same call on a CPU torch tensor, then numpy again: the torch/numpy ratio
            # is of neighbouring timings in one process (the mean of the two numpy runs).
            tt = torch.ones(size // 4, dtype=torch.float32)
            t_torch = timed(lambda: comm.all_reduce(tt), comm.barrier, iters, 50)
            t_again = timed(lambda: comm.all_reduce(x), comm.barrier, iters, 50)
            row["torch_secs"] = float(comm.all_reduce(np.array([t_torch]), op="max")[0])
            row["numpy_beside_torch_secs"] = float(comm.all_reduce(np.array([(t + t_again) / 2]), op="max")[0])
        out.append(row)
    if comm.rank == 0:
        print(json.dumps(out), flush=True)
    comm.close()


def role_mpi4py(sizes, small_iters):
    import numpy as np
    from mpi4py import MPI

    c = MPI.COMM_WORLD
    out = []
    for size in sizes:
        x = np.ones(size // 4, dtype=np.float32)
        y = np.empty_like(x)
        t = timed(lambda: c.Allreduce(x, y, op=MPI.SUM), c.Barrier, iters_for(size, small_iters), 50)
        out.append({"size": size, "secs": c.allreduce(t, op=MPI.MAX)})
    if c.Get_rank() == 0:
        print(json.dumps(out), flush=True)


def gloo_worker(rank, n, sizes, small_iters, initfile, queue):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{initfile}", rank=rank, world_size=n)
    out = []
    for size in sizes:
        x = torch.ones(size // 4, dtype=torch.float32)
        t = timed(lambda: dist.all_reduce(x), dist.barrier, iters_for(size, small_iters), 50)
        tt = torch.tensor([t], dtype=torch.float64)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        out.append({"size": size, "secs": tt.item()})
    if rank == 0:
        queue.put(out)
    dist.destroy_process_group()


def role_gloo(sizes, small_iters, n):
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as d:
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        procs = [ctx.Process(target=gloo_worker, args=(r, n, sizes, small_iters, os.path.join(d, "init"), q)) for r in range(n)]
        for p in procs:
            p.start()
        result = q.get(timeout=600)
        for p in procs:
            p.join(60)
        print(json.dumps(result), flush=True)


def railyard_bin():
    for profile in ("release", "debug"):
        b = ROOT / "target" / profile / "railyard"
        if b.exists():
            return str(b)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "railyard"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "release" / "railyard")


def last_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith("["):
            return json.loads(line)
    raise RuntimeError(f"no result in:\n{text}")


def run_peer(kind, sizes, small_iters, n):
    me = [sys.executable, os.path.abspath(__file__), "--sizes", ",".join(map(str, sizes)), "--iters", str(small_iters)]
    if kind == "railyard":
        cmd = [railyard_bin(), "launch", "--np", str(n), "--"] + me + ["--role", "railyard"]
    elif kind == "mpi4py":
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            return None
        cmd = [mpirun, "--oversubscribe", "--allow-run-as-root", "-np", str(n)] + me + ["--role", "mpi4py"]
    else:
        cmd = me + ["--role", "gloo", "--np", str(n)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        print(f"{kind} failed:\n{out.stdout}\n{out.stderr}", file=sys.stderr)
        return None
    rows = last_json(out.stdout)
    if kind == "railyard" and all("torch_secs" in r for r in rows):
        # torch / numpy of neighbouring timings, per size.
        TORCH_RATIOS.append({r["size"]: r["torch_secs"] / r["numpy_beside_torch_secs"] for r in rows})
        TORCH_SECS.append({r["size"]: r["torch_secs"] for r in rows})
    return {r["size"]: r["secs"] for r in rows}


# railyard on torch tensors, per round: time per call, and the ratio to numpy beside it.
TORCH_RATIOS = []
TORCH_SECS = []


def rust_perf(sizes, n):
    """The Rust runtime's own in-place all-reduce time at each size (`railyard perf`), as
    the Python calls above run in place."""
    rows = {}
    for size in sizes:
        iters = iters_for(size, 0)
        cmd = [railyard_bin(), "perf", "all_reduce", "--np", str(n), "-b", str(size), "-e", str(size),
               "-n", str(iters), "-w", "50", "-c", "0", "--format", "json"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        if out.returncode != 0:
            print(f"railyard perf failed:\n{out.stderr}", file=sys.stderr)
            continue
        for r in json.loads(out.stdout):
            rows[int(r["size"])] = float(r["in_place"]["time_us"]) * 1e-6
    return rows


def fmt(secs):
    return f"{secs * 1e6:.2f} µs" if secs < 1e-3 else f"{secs * 1e3:.3f} ms"


def main():
    args = sys.argv[1:]
    opt = {args[i]: args[i + 1] for i in range(0, len(args) - 1, 2) if args[i].startswith("--")}
    if "--role" in opt:
        sizes = [int(s) for s in opt["--sizes"].split(",")]
        small_iters = int(opt["--iters"])
        {"railyard": lambda: role_railyard(sizes, small_iters), "mpi4py": lambda: role_mpi4py(sizes, small_iters),
         "gloo": lambda: role_gloo(sizes, small_iters, int(opt.get("--np", "2")))}[opt["--role"]]()
        return
    rounds = int(os.environ.get("ROUNDS", "3"))
    small_iters = int(os.environ.get("ITERS", "10000"))
    n = int(os.environ.get("NPROCS", "2"))
    sizes = SMALL + LARGE
    runs = {"railyard": [], "mpi4py": [], "gloo": []}
    perf_runs = []
    for r in range(rounds):
        for kind in runs:
            got = run_peer(kind, sizes, small_iters, n)
            if got is not None:
                runs[kind].append(got)
        perf_runs.append(rust_perf(LARGE, n))  # the Rust runtime, in the same round
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    med = {k: {s: statistics.median(run[s] for run in v) for s in sizes} for k, v in runs.items() if v}
    print(f"## all-reduce called from Python, {n} ranks, float32 (median of {rounds} interleaved rounds)\n")
    print("| size | railyard (Python) | mpi4py (Open MPI) | torch gloo | railyard / mpi4py | railyard / gloo |")
    print("|---|---|---|---|---|---|")
    for s in sizes:
        ry = med.get("railyard", {}).get(s)
        mp = med.get("mpi4py", {}).get(s)
        gl = med.get("gloo", {}).get(s)
        cell = lambda v: fmt(v) if v else "–"
        ratio = lambda a, b: f"{a / b:.2f}" if a and b else "–"
        size = f"{s} B" if s < 1024 else (f"{s >> 10} KiB" if s < 1 << 20 else f"{s >> 20} MiB")
        print(f"| {size} | {cell(ry)} | {cell(mp)} | {cell(gl)} | {ratio(ry, mp)} | {ratio(ry, gl)} |")
    if TORCH_RATIOS:
        print(f"\n## railyard on CPU torch tensors against numpy arrays, {n} ranks (median of {len(TORCH_RATIOS)} rounds)\n")
        print("| size | railyard (torch tensor) | torch / numpy, timed in turn in one process |")
        print("|---|---|---|")
        for s in sizes:
            t = statistics.median(r[s] for r in TORCH_SECS)
            ratio = statistics.median(r[s] for r in TORCH_RATIOS)
            size = f"{s} B" if s < 1024 else (f"{s >> 10} KiB" if s < 1 << 20 else f"{s >> 20} MiB")
            print(f"| {size} | {fmt(t)} | {ratio:.3f} |")
    perf = {s: statistics.median(p[s] for p in perf_runs if s in p) for s in LARGE if any(s in p for p in perf_runs)}
    if perf and "railyard" in med:
        print("\n## Large sizes: the Python package against the Rust runtime it wraps (`railyard perf`)\n")
        print("| size | railyard from Python | railyard perf (Rust) | Python / Rust |")
        print("|---|---|---|---|")
        for s in LARGE:
            if s in perf:
                print(f"| {s >> 20} MiB | {fmt(med['railyard'][s])} | {fmt(perf[s])} | {med['railyard'][s] / perf[s]:.3f} |")
    print("\nraw per-round seconds:", json.dumps({k: v for k, v in runs.items()}), file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""railyard perf against Open MPI (mpi4py) and torch gloo, in interleaved pairs.

For every operation and rank count, each pair runs railyard and then one peer, back to
back, on the same sizes (8 B x4 ... max); per size the pair gives ratios railyard/peer of
time and of bus bandwidth, and the report takes the median over pairs (the machine is
noisy: 2-3x between runs). Both sides are timed the same way: back-to-back iterations
after warm-up, time per iteration averaged (railyard perf's time; the peers' "batch avg").
The peers' batch follows `warmup` untimed calls and `iters` individually timed ones, so
railyard perf gets `warmup + iters` warm-up calls: the same calls on the same buffers
before the timed loop (it matters from 8 MiB up: this machine's 260 MiB L3 takes a few
calls to hold a buffer, and the first calls of a size run up to 2.5x slower, for the
peers as for us).
memcpy bandwidth is measured in the same run (the peers' memcpy_bw.c) for the
large-message target.

  python3 bench/compare.py --ops allreduce --nprocs 2 --pairs 15 --out docs/benchmarks.md

Peers come from ../shared/bench/peers (install: openmpi-bin, pip mpi4py numpy torch).
"""
import argparse, hashlib, json, math, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = os.path.join(os.path.dirname(ROOT), "shared", "bench", "peers")
sys.path.insert(0, PEERS)
from common import fmt_size, sizes  # noqa: E402  (the peers' size grid and size labels, shared)

OURS = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter", "alltoall": "all_to_all", "broadcast": "broadcast"}


# Calls that work in place on the peer's side (MPI_Bcast has one buffer; torch's all_reduce
# and broadcast overwrite their tensor): compared with our in-place column; the rest
# with our out-of-place one.
IN_PLACE = {("mpi", "broadcast"), ("mpic", "broadcast"), ("gloo", "allreduce"), ("gloo", "broadcast")}

# Peers: "mpic" is Open MPI timed from C (the peers' mpi_coll.c: one barrier, back-to-back
# calls, mean per call, max over ranks; no Python in the loop) - the peer for small
# messages; "mpi" the same library through mpi4py (about 1 us of Python per call); "gloo"
# torch.distributed.
PEER_NAMES = {"mpic": "Open MPI from C (mpi_coll.c)", "mpi": "Open MPI via mpi4py", "gloo": "torch gloo"}
BUS_FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n, "reducescatter": lambda n: (n - 1) / n,
              "alltoall": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0}


# mpi_coll.c mallocs its two buffers and memsets them to zero; at -O2 the compiler turns
# that pair into calloc, so the pages are never touched and the send buffer of every
# collective that only reads it (all of them but broadcast's non-roots) is the kernel's one
# shared zero page: a 2 MiB all-gather then ran in 340 us instead of 490 (its single-copy
# read hits one cached page). Ours sends from memory it wrote. With malloc not treated as
# the builtin (gcc and clang both), the memset the source asks for stays.
#
# Memory like ours: railyard perf's buffers of 4 MiB and more start on a 2 MiB boundary
# and are advised for transparent huge pages (runtime memory.rs, HugePageBuffer); this
# machine's THP mode is `madvise`, so mpi_coll.c's plain malloc got none (in a run to
# 32 MiB each of our ranks held 129 MiB of huge pages, each of its ranks 0). Huge pages
# shorten single-copy pinning and TLB walks: the peer's 2-rank all-to-all of 512 KiB
# took 24-26 us with them and 32-36 without. peer_huge_pages.c, linked in with
# --wrap=malloc, gives the peer's own large mallocs the same start and advice.
PEER_SHIM = os.path.join(HERE, "peer_huge_pages.c")
MPI_COLL_FLAGS = ["-O2", "-fno-builtin-malloc", PEER_SHIM, "-Wl,--wrap=malloc"]


def build_peer(name, src_name, compiler, flags, check=None, key_extra=""):
    """One of the peers' C programs, built into target/peers/ under a name keyed by its
    source, the command and `key_extra`; built under a temporary name and kept only once
    `check(path)` (which exits with the reason when the build is unusable) has passed."""
    src = os.path.join(PEERS, src_name)
    with open(src, "rb") as f:
        key = f.read() + " ".join([compiler, *flags, key_extra]).encode()
    exe = os.path.join(ROOT, "target", "peers", f"{name}-{hashlib.sha256(key).hexdigest()[:16]}")
    if os.path.exists(exe):
        return exe
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    tmp = f"{exe}.{os.getpid()}"
    built = subprocess.run([compiler, "-o", tmp, src, *flags], capture_output=True, text=True)
    if built.returncode != 0:
        sys.exit(f"{compiler} {src} {' '.join(flags)} failed:\n{built.stderr}")
    if check:
        check(tmp)
    os.replace(tmp, exe)
    return exe


def refuse_calloc(path):
    """Exit unless the program at `path` is known not to import calloc."""
    imports = subprocess.run(["nm", "-u", path], capture_output=True, text=True)
    if imports.returncode != 0 or "calloc" in imports.stdout:
        os.unlink(path)
        sys.exit("cannot use mpi_coll.c as built: " + ("`nm -u` failed (binutils needed)" if imports.returncode
                 else "it imports calloc, so its buffers would stay the untouched zero page"))


def mpi_coll_exe():
    """mpi_coll.c built with MPI_COLL_FLAGS, keyed also by the MPI version, and checked not
    to import calloc before it is used."""
    version = subprocess.run(["mpicc", "--showme:version"], capture_output=True, text=True).stdout
    with open(PEER_SHIM) as f:
        shim = f.read()
    return build_peer("mpi-coll", "mpi_coll.c", "mpicc", MPI_COLL_FLAGS, check=refuse_calloc, key_extra=version + shim)


def ours(op, n, max_b, iters, warmup, in_place):
    """Our rows keyed by the peers' per-rank size (8 B x4 ..., plus max_b off that grid).
    `warmup` is the peers' number: perf warms up `warmup + iters` times (see above)."""
    per_rank = op in ("allgather", "reducescatter")
    scale = n if per_rank else 1
    out = {}
    grid = sizes(max_b=max_b)
    # sizes() appends max_b when it is off the x4 grid; perf -f 4 cannot reach it.
    grid_top = grid[-1] if len(grid) == 1 or grid[-1] == grid[-2] * 4 else grid[-2]
    runs = [(8, grid_top)] + ([(max_b, max_b)] if grid_top != max_b else [])
    for lo, hi in runs:
        # -a 3: the time of the slowest rank, as the peers report it (max over ranks).
        cmd = [os.path.join(ROOT, "target", "release", "railyard"), "perf", OURS[op], "--np", str(n), "-b", str(lo * scale),
               "-e", str(hi * scale), "-f", "4", "-n", str(iters), "-w", str(warmup + iters), "-c", "0", "-a", "3", "--format", "json"]
        if not in_place:
            cmd.append("--out-of-place-only")
        rows = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        for r in rows:
            half = r["in_place"] if in_place else r["out_of_place"]
            out[r["size"] // scale] = (half["time_us"], half["busbw_gb_per_sec"])
    return out


def peer(kind, op, n, max_b, iters, warmup):
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        path = f.name
    if kind == "mpic":
        cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(n), mpi_coll_exe(), op, "8", str(max_b), str(iters), str(warmup)]
        text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        out = {}
        for line in text.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                total = r["size"] * (n if op in ("allgather", "reducescatter") else 1)
                t = r["t_batch_us"]
                out[r["size"]] = (t, total / (t * 1e-6) / 1e9 * BUS_FACTOR[op](n) if t > 0 else 0.0)
        return out
    if kind == "mpi":
        cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(n), sys.executable, os.path.join(PEERS, "bench_mpi4py.py"),
               "--ops", op, "--max-size", str(max_b), "--iters", str(iters), "--warmup", str(warmup), "--json", path, "--lib-label", "ompi-shm"]
    else:
        cmd = [sys.executable, os.path.join(PEERS, "bench_torch_gloo.py"), "--nprocs", str(n), "--ops", op, "--max-size", str(max_b),
               "--iters", str(iters), "--warmup", str(warmup), "--json", path]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            out[r["size"]] = (r["t_batch_us"], r["busbw_batch"])
    os.unlink(path)
    return out


def median_interval(xs, level=0.95):
    """A distribution-free interval for the median of what `xs` sample: the order
    statistics x_(k) and x_(n+1-k) with the largest k such that Binom(n, 1/2) puts at
    most (1 - level) / 2 below k. None when n is too small for the level (n < 6 at 95%).
    Where it holds 1.0, the pairs cannot tell ours from the peer at that size."""
    xs = sorted(xs)
    n = len(xs)
    tail = (1 - level) / 2
    k, below = 0, 0.0
    while k < n:
        below_next = below + math.comb(n, k) / 2 ** n
        if below_next > tail:
            break
        below, k = below_next, k + 1
    return (xs[k - 1], xs[n - k]) if k >= 1 else None


def steal_secs():
    """CPU time the hypervisor gave to others (all CPUs, /proc/stat's steal column), in
    seconds: on a shared VM a run with much of it is not a measurement of either side."""
    try:
        with open("/proc/stat") as f:
            cols = f.readline().split()
        return int(cols[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def memcpy_gbps():
    """One thread, 64 MiB, median GB/s from the peers' memcpy_bw.c table."""
    exe = build_peer("memcpy-bw", "memcpy_bw.c", "gcc", ["-O2", "-lpthread"])
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) == 5 and cols[0] == "1" and cols[1] == "64 MiB":
            return float(cols[2])
    raise RuntimeError(f"no 1-thread 64 MiB row in memcpy_bw output:\n{out}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", default="allreduce,allgather,reducescatter,alltoall,broadcast")
    p.add_argument("--nprocs", default="2,4")
    p.add_argument("--peers", default="mpi,gloo")
    p.add_argument("--pairs", type=int, default=15, help="interleaved pairs per run; 6 at least for the interval of the median")
    p.add_argument("--max-size", type=int, default=256 << 20)
    p.add_argument("--other-max", type=int, default=64 << 20)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--small-iters", type=int, default=0,
                   help="also time sizes up to --small-max with this many iterations (both sides), replacing those rows: "
                        "10 iterations of a 10 us call sit inside one scheduler tick")
    p.add_argument("--small-max", type=int, default=64 << 10)
    p.add_argument("--max-steal", type=float, default=0.05,
                   help="rerun a pair (both sides) when the hypervisor stole more than this share of the machine's CPU time "
                        "during it (/proc/stat steal over wall time x cores); 0 keeps every pair")
    p.add_argument("--reruns", type=int, default=3, help="at most this many reruns of one pair for steal; then it is kept")
    p.add_argument("--out", default="")
    a = p.parse_args()
    if a.reruns < 0 or not 0 <= a.max_steal <= 1:
        p.error("--reruns must be at least 0 and --max-steal a share from 0 to 1")
    if a.pairs < 1:
        p.error("--pairs must be at least 1")
    if a.pairs < 6:
        print(f"note: with {a.pairs} pairs the tables give no interval for their medians (6 pairs at least)", file=sys.stderr)
    started = time.time()
    lines = [f"Run {time.strftime('%Y-%m-%d %H:%M')} on this machine; `python3 bench/compare.py {' '.join(sys.argv[1:])}`.", ""]
    summary = ["| run | ours | 8 B time ratio | min busbw ratio | max busbw ratio | sizes ours ≥ peer | sizes time ratio ≤ 1 | sizes whose interval holds 1 |",
               "|---|---|---|---|---|---|---|---|"]
    mem = [memcpy_gbps()]
    stolen = steal_secs()
    for n in [int(x) for x in a.nprocs.split(",")]:
        for op in a.ops.split(","):
            max_b = a.max_size if op == "allreduce" else a.other_max
            for kind in a.peers.split(","):
                ratios = {}
                in_place = (kind, op) in IN_PLACE
                reran = 0
                for _ in range(a.pairs):
                    for attempt in range(a.reruns + 1):
                        s0, t0 = steal_secs(), time.time()
                        mine = ours(op, n, max_b, a.iters, a.warmup, in_place)
                        theirs = peer(kind, op, n, max_b, a.iters, a.warmup)
                        if a.small_iters:
                            mine.update(ours(op, n, a.small_max, a.small_iters, a.warmup, in_place))
                            theirs.update(peer(kind, op, n, a.small_max, a.small_iters, a.warmup))
                        share = (steal_secs() - s0) / ((time.time() - t0) * (os.cpu_count() or 1))
                        if not (a.max_steal > 0 and share > a.max_steal) or attempt == a.reruns:
                            break
                        reran += 1
                    for size in sizes(max_b=max_b):
                        if size in mine and size in theirs and theirs[size][0] > 0 and mine[size][0] > 0:
                            t = mine[size][0] / theirs[size][0]
                            bw = mine[size][1] / theirs[size][1] if theirs[size][1] > 0 else float("nan")
                            ratios.setdefault(size, []).append((t, bw, mine[size][1], theirs[size][1]))
                title = f"{op}, N = {n}, railyard vs {PEER_NAMES[kind]}"
                form = "in place" if in_place else "out of place"
                again = f" ({reran} reruns for steal)" if reran else ""
                lines.append(f"### {title} (ours {form}): medians over {a.pairs} interleaved pairs{again}")
                lines.append("")
                lines.append("| size/rank | time ratio (ours/peer) | 95% interval of that median | pairs ours slower | busbw ratio (ours/peer) | our busbw GB/s | peer busbw GB/s |")
                lines.append("|---|---|---|---|---|---|---|")
                intervals = {size: median_interval([x[0] for x in rs]) for size, rs in ratios.items()}
                for size in sorted(ratios):
                    rs = ratios[size]
                    med = lambda i: statistics.median(x[i] for x in rs)
                    ci = intervals[size]
                    ci = f"{ci[0]:.3f}–{ci[1]:.3f}" if ci else "(too few pairs)"
                    slower = sum(x[0] > 1 for x in rs)
                    lines.append(f"| {fmt_size(size)} | {med(0):.3f} | {ci} | {slower}/{len(rs)} | {med(1):.2f} | {med(2):.3f} | {med(3):.3f} |")
                lines.append("")
                if ratios:
                    bw = {size: statistics.median(x[1] for x in rs) for size, rs in ratios.items()}
                    lo, hi = min(bw, key=bw.get), max(bw, key=bw.get)
                    first = min(ratios)
                    t = {size: statistics.median(x[0] for x in rs) for size, rs in ratios.items()}
                    t8 = t[first]
                    cis = [c for c in intervals.values() if c]
                    unsure = f"{sum(c[0] <= 1 <= c[1] for c in cis)}/{len(cis)}" if cis else "(too few pairs)"
                    if 0 < len(cis) < len(ratios):
                        unsure += f" ({len(ratios) - len(cis)} sizes with too few pairs)"
                    summary.append(f"| {title} | {form} | {t8:.2f} ({fmt_size(first)}) | {bw[lo]:.2f} ({fmt_size(lo)}) | {bw[hi]:.2f} ({fmt_size(hi)}) | "
                                   f"{sum(v >= 1 for v in bw.values())}/{len(bw)} | {sum(v <= 1 for v in t.values())}/{len(t)} | {unsure} |")
                print("\n".join(lines[-len(ratios) - 4:]), flush=True)
    mem.append(memcpy_gbps())
    lines = lines[:2] + ["Summary: per run, the smallest size's time ratio (ours/peer; below 1 = we are faster), the smallest and largest busbw ratio over sizes, "
                         "at how many sizes ours ≥ peer (median busbw ratio) and the median time ratio ≤ 1, and at how many the 95% interval of the median "
                         "time ratio (order statistics of the pairs; needs 6 pairs) holds 1.0, where the pairs cannot tell the two apart.", ""] + summary + [""] + lines[2:]
    lines.append(f"memcpy (one thread, 64 MiB, median of the tool's repetitions) at start and end: {mem[0]:.2f} and {mem[1]:.2f} GB/s.")
    wall = time.time() - started
    lines.append(f"Wall time {wall:.0f} s; CPU time stolen by the hypervisor meanwhile (/proc/stat, all {os.cpu_count()} cores): "
                 f"{steal_secs() - stolen:.1f} s; a pair was rerun when more than {a.max_steal:.0%} of its CPU time was stolen "
                 f"(at most {a.reruns} times).")
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "a") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Scale benchmark: `railyard plan` wall time and peak memory per algorithm on rail
fat-trees of 8-GPU servers, from 512 to 131,072 GPUs (issue "Schedules and the model at
cluster scale", deliverable 6).

Every run is its own process, so its peak resident memory is the child's ru_maxrss
(os.wait4); a run that exceeds --timeout is killed and reported as such, and a run the
tool refuses (a limit, an error) is reported with the first line of its error.

    cargo build --release
    python3 bench/scale.py --out docs/scale-results.md      # about 20 minutes on 2 cores
"""

import argparse
import os
import signal
import subprocess
import sys
import time

# nvls and nvls-tree are left out: rail fat-trees have no NVSwitch that reduces.
ALL_REDUCE = ["ring", "interleaved-ring", "rail-ring", "tree", "double-tree", "rhd", "recursive-doubling",
              "hierarchical", "in-network", "in-network-chain"]
GPUS = [512, 1024, 8192, 16384, 131072]


def run(binary, args, timeout):
    """(status, wall seconds, peak MiB, note) of one `railyard` process."""
    start = time.monotonic()
    proc = subprocess.Popen([binary] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.send_signal(signal.SIGKILL)
            pid, status, usage = os.wait4(proc.pid, 0)
            return "timeout", time.monotonic() - start, usage.ru_maxrss / 1024, f"killed after {timeout} s"
        time.sleep(0.02)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace").strip()
    code = os.waitstatus_to_exitcode(status)
    # The error's first clause: what was refused and the limit (the hint is in --help).
    note = "" if code == 0 else (err.splitlines()[-1].split(";")[0] if err else f"exit {code}")
    return ("ok" if code == 0 else "refused"), wall, usage.ru_maxrss / 1024, note


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="target/release/railyard")
    ap.add_argument("--gpus", default=",".join(map(str, GPUS)), help="GPU counts (multiples of 8)")
    ap.add_argument("--algos", default=",".join(ALL_REDUCE))
    ap.add_argument("--size", default="1GiB", help="all-reduce size")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    ap.add_argument("--alltoall", default="512,1024,8192", help="GPU counts for pairwise all-to-all")
    ap.add_argument("--out", help="write the markdown table here (else stdout)")
    args = ap.parse_args()
    if not os.path.exists(args.binary):
        sys.exit(f"{args.binary} not found: run `cargo build --release` first")

    lines = [
        f"`railyard plan --topo rail:servers=S --collective allreduce --size {args.size} --algo A "
        f"--format json` (8 GPUs per server, 32 servers per leaf group, 2 spines; JSON to /dev/null), "
        f"one process per cell, wall time / peak RSS; timeout {args.timeout:g} s.",
        "",
    ]
    gpus = [int(g) for g in args.gpus.split(",") if g]
    algos = [a for a in args.algos.split(",") if a and a != "all"]
    lines.append("| algorithm | " + " | ".join(f"{g:,} GPUs" for g in gpus) + " |")
    lines.append("|---" * (len(gpus) + 1) + "|")
    notes = []
    for algo in algos + ["all"]:
        cells = []
        for g in gpus:
            topo = f"rail:servers={g // 8}"
            status, wall, mib, note = run(args.binary, ["plan", "--topo", topo, "--size", args.size,
                                                        "--algo", algo, "--format", "json"], args.timeout)
            if status == "ok":
                cells.append(f"{wall:.2f} s / {mib:,.0f} MiB")
            else:
                cells.append(f"{status} ({wall:.1f} s, {mib:,.0f} MiB)")
                notes.append(f"- {algo} at {g:,} GPUs: {note}")
            print(f"{algo} {g}: {cells[-1]}", file=sys.stderr, flush=True)
        lines.append(f"| {algo} | " + " | ".join(cells) + " |")
    lines.append("")
    a2a = [int(g) for g in args.alltoall.split(",") if g]
    if a2a:
        lines.append("Pairwise all-to-all (`--collective alltoall --algo pairwise --size 1GiB`):")
        lines.append("")
        lines.append("| ranks | " + " | ".join(f"{g:,}" for g in a2a) + " |")
        lines.append("|---" * (len(a2a) + 1) + "|")
        cells = []
        for g in a2a:
            status, wall, mib, note = run(args.binary, ["plan", "--topo", f"rail:servers={g // 8}", "--collective",
                                                        "alltoall", "--algo", "pairwise", "--size", "1GiB",
                                                        "--format", "json"], args.timeout)
            cells.append(f"{wall:.2f} s / {mib:,.0f} MiB" if status == "ok" else f"{status} ({wall:.1f} s)")
            if status != "ok":
                notes.append(f"- pairwise all-to-all at {g:,} ranks: {note}")
            print(f"pairwise {g}: {cells[-1]}", file=sys.stderr, flush=True)
        lines.append("| pairwise | " + " | ".join(cells) + " |")
        lines.append("")
    if notes:
        lines.append("Refused or unfinished:")
        lines.append("")
        lines.extend(notes)
        lines.append("")
    text = "\n".join(lines)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()

"""The Ray executor of `railyard sweep` (``railyard sweep GRID --executor ray``).

The command line starts this module and writes the numbers of the points to run on its
stdin, one per line; each point runs as a Ray task that calls the native library's
``sweep_point`` (the same code the local executor runs), and its record, one JSON line,
is printed as it finishes. The command line checks and stores the records, so resuming,
progress and the results file are the same whichever executor ran the points.

    python -m railyard.ray_sweep --grid GRID.toml [--address ADDR | --workers N] < points
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

# Points handed to Ray at once: enough to keep every worker busy, few enough that a
# million-point grid is not a million futures in the driver.
MAX_IN_FLIGHT = 1024


def _run_point(grid_text: str, grid_dir: str, point: int) -> str:
    from railyard import _native

    return _native.sweep_point(grid_text, grid_dir, point)


def _exit_with_parent() -> None:
    """End this driver when the railyard that started it is gone (killed, or failed
    without waiting), rather than run Ray tasks nobody will record."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m railyard.ray_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--grid", required=True, help="the grid file")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--address", help="a running Ray cluster (ray://host:10001, or host:6379 inside it)")
    where.add_argument("--workers", type=int, default=2, help="workers of a local Ray started for this sweep")
    parser.add_argument(
        "--connect-timeout", type=float, default=60.0, help="seconds to wait for Ray to start or to connect"
    )
    args = parser.parse_args(argv)
    _exit_with_parent()
    try:
        import ray
    except ImportError:
        print(
            f"railyard sweep --executor ray: ray is not installed for {sys.executable} "
            "(pip install ray, or give --python a Python that has it)",
            file=sys.stderr,
        )
        return 2
    # The records go to the original stdout; anything else printed there (Ray's own
    # messages, workers' logs forwarded to the driver) goes to stderr, so it cannot
    # break the stream of records.
    records = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    grid = Path(args.grid)
    # Bytes as the command line read them (no newline translation): the record's grid hash.
    grid_text = grid.read_bytes().decode("utf-8")
    grid_dir = str(grid.resolve().parent)
    points = [int(line) for line in sys.stdin if line.strip()]
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not args.address and args.workers < 1:
        parser.error("--workers: at least 1")
    # ray.init retries an unreachable address for minutes: bounded by a watchdog (Ray
    # must be started from the main thread, so the wait cannot move to another one).
    connected = threading.Event()

    def watchdog() -> None:
        if not connected.wait(args.connect_timeout):
            where = f"the Ray cluster at {args.address}" if args.address else "a local Ray"
            print(f"railyard sweep --executor ray: {where} did not answer within {args.connect_timeout:g} s", file=sys.stderr)
            sys.stderr.flush()
            os._exit(2)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        if args.address:
            ray.init(address=args.address, log_to_driver=True)
        else:
            ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=True)
    except Exception as e:
        hint = " (a ray:// address needs pip install 'ray[client]')" if (args.address or "").startswith("ray://") else ""
        print(f"railyard sweep --executor ray: cannot start Ray: {e}{hint}", file=sys.stderr)
        return 2
    connected.set()
    task = ray.remote(_run_point)
    text = ray.put(grid_text)
    pending = iter(points)
    in_flight = []
    try:
        while True:
            for point in pending:
                in_flight.append(task.remote(text, grid_dir, point))
                if len(in_flight) >= MAX_IN_FLIGHT:
                    break
            if not in_flight:
                break
            done, in_flight = ray.wait(in_flight, num_returns=1)
            records.write(ray.get(done[0]) + "\n")
            records.flush()
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`railyard sweep --executor ray`: the points run as Ray tasks calling the native
library give the same records as the local executor; `sweep_point` is the CLI's record."""

import json
import subprocess
import sys

import pytest

from railyard import _native

GRID = """command = "plan"
where = "size <= 1MiB or topo contains 'clos'"
[base]
collective = "allreduce"
algo = "ring,double-tree"
[axes]
topo = ["rail:servers=2,gpus=4", "rail:servers=4,gpus=2", "clos:k=4"]
size = { from = "4KiB", to = "64MiB", factor = 4 }
"""


def records(path):
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        r.pop("wall_secs")
        assert r["point"] not in out, f"point {r['point']} twice"
        out[r["point"]] = r
    return out


def sweep(railyard_bin, *args):
    return subprocess.run([railyard_bin, "sweep", *args], capture_output=True, text=True, timeout=600)


def test_ray_executor_gives_the_local_records(railyard_bin, tmp_path):
    pytest.importorskip("ray")
    grid = tmp_path / "g.toml"
    grid.write_text(GRID)
    local = tmp_path / "local.jsonl"
    out = sweep(railyard_bin, str(grid), "--out", str(local))
    assert out.returncode == 0, out.stderr
    ray_out = tmp_path / "ray.jsonl"
    # A local Ray with 2 workers; the Python running these tests has railyard and ray.
    out = sweep(railyard_bin, str(grid), "--executor", "ray", "--jobs", "2", "--python", sys.executable, "--out", str(ray_out))
    assert out.returncode == 0, out.stderr
    a, b = records(local), records(ray_out)
    # 3 topologies x 8 sizes, sizes above 1 MiB only on the Clos: 3 x 5 + 3 = 18 points.
    assert len(a) == 18
    assert a == b
    # Everything recorded: resuming with Ray has nothing to do, and repeats nothing.
    out = sweep(railyard_bin, str(grid), "--executor", "ray", "--python", sys.executable, "--out", str(ray_out), "--resume")
    assert out.returncode == 0 and "0 points run" in out.stdout, out.stdout + out.stderr
    assert records(ray_out) == a


def test_sweep_point_is_the_cli_record(railyard_bin, tmp_path):
    grid = tmp_path / "g.toml"
    grid.write_text(GRID)
    local = tmp_path / "local.jsonl"
    assert sweep(railyard_bin, str(grid), "--out", str(local)).returncode == 0
    want = records(local)
    for point in (0, 17):
        got = json.loads(_native.sweep_point(GRID, str(tmp_path), point))
        got.pop("wall_secs")
        assert got == want[point]
    with pytest.raises(ValueError, match="the grid has 24 points"):
        _native.sweep_point(GRID, str(tmp_path), 24)
    with pytest.raises(ValueError, match="left out by the grid's where"):
        _native.sweep_point(GRID, str(tmp_path), 18)


def test_a_python_without_ray_or_railyard_is_said(railyard_bin, tmp_path):
    grid = tmp_path / "g.toml"
    grid.write_text(GRID)
    out = sweep(railyard_bin, str(grid), "--executor", "ray", "--python", str(tmp_path / "nosuch-python"))
    assert out.returncode == 2 and "cannot start" in out.stderr and "--python" in out.stderr, out.stderr
    assert not (tmp_path / "g.jsonl").exists() or (tmp_path / "g.jsonl").read_text() == ""

"""Collectives from Python at 2-4 ranks under `railyard launch`: results equal numpy's
for every collective x dtype (tests/worker.py checks them on every rank)."""

import os
import pathlib
import subprocess
import sys

import pytest

WORKER = pathlib.Path(__file__).with_name("worker.py")


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_every_collective_and_dtype_equals_numpy(railyard_bin, ranks):
    env = dict(os.environ, RAILYARD_TIMEOUT_SECS="30")
    out = subprocess.run(
        [railyard_bin, "launch", "--np", str(ranks), "--", sys.executable, str(WORKER)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for r in range(ranks):
        assert f"rank {r}: 6 dtypes ok" in out.stdout, out.stdout + out.stderr


def test_init_without_a_launcher_raises():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAILYARD_", "OMPI_", "SLURM_", "PMI_")) and k not in ("RANK", "WORLD_SIZE")}
    code = "import railyard\ntry:\n    railyard.init()\nexcept ValueError as e:\n    print('ValueError', e)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert "ValueError environment" in out.stdout, out.stdout + out.stderr


def test_launch_runs_a_job_from_python_and_says_how_it_ended():
    import signal

    import railyard

    before = signal.getsignal(signal.SIGINT)
    code = "import os, sys; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE']); sys.exit(3 if os.environ['RANK'] == '1' else 0)"
    r = railyard.launch([sys.executable, "-c", code], np=2)
    assert r["code"] == 3 and "rank 1 exited with code 3" in r["reason"], r
    assert railyard.launch(["true"], np=3) == {"code": 0, "reason": None}
    r = railyard.launch(["sleep", "30"], np=2, timeout=0.3)
    assert r["code"] == 124 and "timeout" in r["reason"], r
    # Python's own Ctrl-C handler is back once the job is over.
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(ValueError, match="np"):
        railyard.launch(["true"], np=0)
    with pytest.raises(TypeError, match="command"):
        railyard.launch("true", np=1)

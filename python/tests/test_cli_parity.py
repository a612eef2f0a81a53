"""railyard.sim, analyze_nccl_tests, analyze_nccl_log and explain_nccl return what the CLI's
``--format json`` prints, for a set of argument lists (the simulator's wall-clock seconds,
measured, left out)."""

import json
import os
import subprocess

import pytest

import railyard

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
NCCL_TESTS = os.path.join(ROOT, "corpus", "nccl-tests", "hopper", "h100-2n-ib-allreduce-default-nccl-tests-290.txt")
NCCL_LOG = os.path.join(ROOT, "samples", "nccl-log")


def cli_json(bin_path, *args):
    out = subprocess.run([bin_path, *args, "--format", "json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def unmeasured(value):
    if isinstance(value, dict):
        return {k: unmeasured(v) for k, v in value.items() if k != "wall_secs"}
    if isinstance(value, list):
        return [unmeasured(v) for v in value]
    return value


@pytest.mark.parametrize(
    "kwargs, args",
    [
        ({}, ["--topo", "hgx-h100x2"]),
        (
            dict(topo="dgx-h100:nodes=2", size="64MiB", algo=["ring", "rail-ring"], ecmp=1),
            ["--topo", "dgx-h100:nodes=2", "--size", "64MiB", "--algo", "ring,rail-ring", "--ecmp", "1"],
        ),
        (dict(collective="allgather", size=1 << 20, barriers=True), ["--topo", "hgx-h100x2", "--collective", "allgather", "--size", "1048576", "--barriers"]),
    ],
)
def test_sim_equals_the_cli(railyard_bin, kwargs, args):
    assert unmeasured(railyard.sim(**kwargs)) == unmeasured(cli_json(railyard_bin, "sim", *args))


def test_analyze_nccl_tests_equals_the_cli(railyard_bin):
    assert railyard.analyze_nccl_tests(NCCL_TESTS) == cli_json(railyard_bin, "analyze", "nccl-tests", NCCL_TESTS)
    with_topo = railyard.analyze_nccl_tests(NCCL_TESTS, topo="dgx-h100:nodes=2")
    assert with_topo == cli_json(railyard_bin, "analyze", "nccl-tests", NCCL_TESTS, "--topo", "dgx-h100:nodes=2")
    assert {s["verdict"] for s in with_topo["analysis"]["sizes"]} == {"slow"}


def test_analyze_nccl_log_equals_the_cli(railyard_bin):
    logs = sorted(os.path.join(NCCL_LOG, f) for f in os.listdir(NCCL_LOG))
    assert logs
    for log in logs[:3]:
        assert railyard.analyze_nccl_log(log) == cli_json(railyard_bin, "analyze", "nccl-log", log)


@pytest.mark.parametrize(
    "kwargs, args",
    [({}, []), (dict(topo="dgx-h100:nodes=4", size="1GiB", nccl_algo="Ring"), ["--topo", "dgx-h100:nodes=4", "--size", "1GiB", "--nccl-algo", "Ring"])],
)
def test_explain_nccl_equals_the_cli(railyard_bin, kwargs, args):
    assert railyard.explain_nccl(**kwargs) == cli_json(railyard_bin, "explain-nccl", *args)


def test_bad_options_name_themselves():
    with pytest.raises(ValueError, match="no-such-flag"):
        railyard.sim(no_such_flag=1)
    with pytest.raises(ValueError, match="cannot read|No such file"):
        railyard.analyze_nccl_tests("/nonexistent/file.txt")
    with pytest.raises(TypeError):
        railyard.sim(size=object())
    with pytest.raises(TypeError, match="format"):
        railyard.sim(format="md")
    # A value that starts with "-" is a value: the CLI says what is wrong with it.
    with pytest.raises(ValueError, match="--ecmp"):
        railyard.sim(ecmp=-1)
    with pytest.raises(ValueError, match="cannot read|No such file"):
        railyard.analyze_nccl_log("-run.log")

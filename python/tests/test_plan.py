"""Planning and the models from Python equal the CLI's JSON; bad arguments raise."""

import json
import subprocess

import pytest

import railyard


def cli_json(bin_path, *args):
    out = subprocess.run([bin_path, *args, "--format", "json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    "kwargs, args",
    [
        ({}, []),
        (
            {"topo": "a100-pcie-control", "algo": "ring,hierarchical", "size": "8MiB"},
            ["--topo", "a100-pcie-control", "--algo", "ring,hierarchical", "--size", "8MiB"],
        ),
        (
            {"collective": "allgather", "size": 1 << 20, "dtype": "bf16", "algo": ["ring", "direct"]},
            ["--collective", "allgather", "--size", "1MiB", "--dtype", "bf16", "--algo", "ring,direct"],
        ),
        ({"collective": "broadcast", "root": 3, "size": "64KiB"}, ["--collective", "broadcast", "--root", "3", "--size", "64KiB"]),
    ],
)
def test_plan_equals_the_cli(railyard_bin, kwargs, args):
    assert railyard.plan(**kwargs) == cli_json(railyard_bin, "plan", *args)


def test_the_seeds_numbers_come_through():
    p = railyard.plan(algo="ring,hierarchical")
    times = {a["name"]: a["total_secs"] for a in p["algorithms"]}
    # seed 001 §7.2.1: about 7.6 ms and 1.3 ms.
    assert abs(times["ring"] - 7.575e-3) < 1e-6
    assert abs(times["hierarchical"] - 1.2996e-3) < 1e-6
    assert p["fastest"] == "hierarchical"


@pytest.mark.parametrize("name", railyard.models())
def test_every_model_equals_the_cli(railyard_bin, name):
    got = railyard.model(name)["output"]
    assert got == cli_json(railyard_bin, "model", name)


def test_model_inputs_take_units_and_the_seeds_words():
    # seed 001 §7.3.4: 128 x 256 B per 2 us; 4 us slots halve the slot bound.
    base = railyard.model("concurrency", slots=[128])["output"]["cases"][0]
    slow = railyard.model("concurrency", slots=[128], slot_secs="4us")["output"]["cases"][0]
    assert abs(base["slot_bound_bytes_per_sec"] - 16.384e9) < 1
    assert abs(slow["slot_bound_bytes_per_sec"] - 8.192e9) < 1
    e = railyard.model("ecmp", flows=32, uplinks=32)
    assert e["inputs"]["cases"] == [[32, 32]]


def test_topology_is_the_file_format(railyard_bin):
    out = subprocess.run([railyard_bin, "topo", "show", "hgx-h100x2", "--format", "json"], capture_output=True, text=True, check=True)
    assert railyard.topology("hgx-h100x2") == json.loads(out.stdout)
    assert railyard.topology("rail:servers=4")["gpus"] == 32


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: railyard.plan(size="12 parsecs"), "size"),
        (lambda: railyard.plan(size=-1), "size"),
        (lambda: railyard.plan(topo="nonesuch"), "topo"),
        (lambda: railyard.plan(collective="allsorts"), "collective"),
        (lambda: railyard.plan(algo="nonesuch"), "algo"),
        (lambda: railyard.plan(dtype="f128"), "dtype"),
        (lambda: railyard.plan(channels=0), "channels"),
        (lambda: railyard.plan(ranks=0), "ranks"),
        (lambda: railyard.model("nonesuch"), "nonesuch"),
        (lambda: railyard.model("concurrency", slot_secs="x"), "slot_secs"),
        (lambda: railyard.model("concurrency", nonesuch=1), "nonesuch"),
        (lambda: railyard.model("ecmp", flows=3), "ecmp"),
        (lambda: railyard.topology("rail:servers=0"), "topo"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_field(call, field):
    with pytest.raises(ValueError, match=field):
        call()


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: railyard.plan(size=2**70), "size"),
        (lambda: railyard.plan(root=2**70), "root"),
        (lambda: railyard.plan(algo=[]), "algo"),
        (lambda: railyard.plan(algo="ring,"), "algo"),
        (lambda: railyard.model("concurrency", path_bytes_per_sec=float("nan")), "path_bytes_per_sec"),
    ],
)
def test_out_of_range_values_raise_value_error(call, field):
    with pytest.raises(ValueError, match=field):
        call()


def test_numpy_dtypes_and_scalars_are_taken():
    import numpy as np

    assert railyard.plan(dtype=np.float16, size=1024, algo="ring")["elem_bytes"] == 2
    assert railyard.plan(root=np.int64(0), size=1024, algo="ring")["bytes"] == 1024
    assert railyard.model("concurrency", slots=[np.int64(128)])["inputs"]["slots"] == [128]


def test_wrong_types_raise_type_error():
    with pytest.raises(TypeError, match="size"):
        railyard.plan(size=1.5)
    with pytest.raises(TypeError):
        railyard.model("concurrency", slots=object())
    for bad in (dict(topo=None), dict(algo=None), dict(algo=b"ring"), dict(dtype=object()), dict(root=True)):
        with pytest.raises(TypeError):
            railyard.plan(**bad)


def test_plan_training_equals_the_cli(railyard_bin, tmp_path):
    job = {"job": {"model": "llama3-8b", "topo": "dgx-h100:nodes=2", "global_batch": 64, "layout": "search", "show": 3}}
    scenario = tmp_path / "job.toml"
    scenario.write_text(railyard._toml(job))
    from_python = railyard.plan_training(job)
    assert from_python == cli_json(railyard_bin, "plan-training", "--scenario", str(scenario))
    best = from_python["job"]["ranked"][0]
    assert best["memory"]["total_bytes"] <= best["memory"]["capacity_bytes"]
    assert best["step"]["step_secs"] > 0
    job["job"].update(topo="dgx-h100:nodes=1", global_batch=16, target_tokens_per_sec=2e5)
    scenario.write_text(railyard._toml(job))
    solved = railyard.plan_training(job, solve=True)
    assert solved == cli_json(railyard_bin, "plan-training", "--scenario", str(scenario), "--solve")
    assert [t["question"] for t in solved["solved"]["job"]["targets"]][0].startswith("fewest nodes")


def test_plan_training_refuses_what_does_not_fit():
    job = {"job": {"model": "llama3-70b", "topo": "dgx-h100:nodes=1", "global_batch": 8, "layout": {"tp": 8, "pp": 1, "dp": 1}}}
    with pytest.raises(ValueError, match="no layout fits"):
        railyard.plan_training(job)
    with pytest.raises(TypeError, match="job.layout"):
        railyard.plan_training({"job": {"layout": [1, 2]}})

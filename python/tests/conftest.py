"""Shared by the tests: where the `railyard` binary is (the CLI the package must agree
with, and the launcher of the multi-rank tests)."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def railyard_binary() -> str:
    env = os.environ.get("RAILYARD_BIN")
    if env:
        return env
    for profile in ("release", "debug"):
        candidate = ROOT / "target" / profile / "railyard"
        if candidate.exists():
            return str(candidate)
    subprocess.run(["cargo", "build", "-q", "-p", "railyard"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "debug" / "railyard")


@pytest.fixture(scope="session")
def railyard_bin() -> str:
    return railyard_binary()

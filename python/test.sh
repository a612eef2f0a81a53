#!/usr/bin/env bash
# Build the Python package from this checkout and run its tests (python/tests) in a
# virtual environment under target/, so nothing is installed into the system's Python.
# Installs Python itself (Debian packages) when the machine has none.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v python3 >/dev/null || ! python3 -c "import venv, ensurepip" 2>/dev/null; then
  echo "python/test.sh: installing python3 and venv (Debian packages)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
fi
VENV=target/python-venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# The build backend runs `maturin` by name: the environment's own, not one the machine may lack.
export PATH="$PWD/$VENV/bin:$PATH"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r python/requirements-test.txt
# The tests launch ranks with the CLI and compare with it: this checkout's (a release
# binary left by an earlier build may be older); build it if `cargo test` has not.
[ -x target/debug/railyard ] || cargo build -q -p railyard
export RAILYARD_BIN="${RAILYARD_BIN:-$PWD/target/debug/railyard}"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation ./python
# From the repository root: `import railyard` must find the installed package, not python/railyard.
"$VENV/bin/python" -m pytest -q python/tests

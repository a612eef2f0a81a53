#!/usr/bin/env bash
# The README's test command: every Rust test, then the Python package built and tested.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace
python/test.sh

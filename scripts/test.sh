#!/usr/bin/env bash
# The README's test command: every Rust test, then the Python package built and tested.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace
# The MSCCL corpus's recorded verdicts are the reference interpreter's (the Rust test holds
# railyard's checker to them).
python3 scripts/msccl_corpus.py
python/test.sh

#!/usr/bin/env bash
# Miri on the runtime's unsafe code that can run under it: wire frames, element byte
# views, reduce kernels, the shared-transfer claiming protocol and ring index arithmetic
# (an anonymous mapping stands in for the /dev/shm file). Miri needs a nightly
# toolchain; this installs its component from rustup when a nightly is there, and says
# plainly when it cannot run (no nightly on the machine), rather than pass silently.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "miri: SKIPPED — no nightly toolchain on this machine (rustup toolchain install nightly --component miri)" >&2
    exit 0
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup component add --toolchain nightly miri rust-src
fi
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}"
cargo +nightly miri test -p railyard-runtime --lib -- \
    frame:: element:: share:: reduce:: prepared:: shm::tests::ring_arithmetic_wraps_every_way \
    shm::tests::peek_shows_whole_runs_and_advance_checks_them \
    shm::tests::the_read_position_is_published_by_eighths_or_on_release \
    shm::tests::small_frames_are_padded_to_a_line_and_the_reader_skips_the_padding

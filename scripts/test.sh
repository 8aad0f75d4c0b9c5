#!/usr/bin/env bash
# The whole test suite: the Rust workspace (`cargo test --workspace --locked`), then the Python
# package's suite (crates/flashmux-py/tests) against the extension built from this checkout.
#
# The Python side runs in .venv: it is created with the first python3 found (3.9 or newer; set
# PYTHON to choose), filled from crates/flashmux-py/requirements.lock (pinned: pandas, pyarrow,
# tqdm, Ray, maturin, pytest, nbclient, ...), and the extension is built into it with maturin.
# The venv is kept between runs and refilled when the lock file changes.
#
#   scripts/test.sh              # both suites
#   scripts/test.sh --python     # the Python suite only (builds the extension first)
#   scripts/test.sh --rust       # the Rust suite only
set -euo pipefail
cd "$(dirname "$0")/.."

want_rust=1 want_python=1
case "${1:-}" in
    --python) want_rust=0 ;;
    --rust) want_python=0 ;;
    "") ;;
    *) echo "usage: scripts/test.sh [--rust | --python]" >&2; exit 2 ;;
esac

if [ "$want_rust" = 1 ]; then
    cargo test --workspace --locked
fi
[ "$want_python" = 1 ] || exit 0

scripts/python-env.sh
VENV="$PWD/.venv"
# Ray starts its own processes: keep them off the user's session and quiet.
export RAY_USAGE_STATS_ENABLED=0
"$VENV/bin/python" -m pytest crates/flashmux-py/tests -q -p no:cacheprovider

#!/usr/bin/env bash
# Creates (or refreshes) .venv for flashmux's Python package and builds the extension into it:
#   scripts/python-env.sh && .venv/bin/python -c 'import flashmux; print(flashmux.run())'
# PYTHON chooses the interpreter (default python3, 3.9 or newer).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="$PWD/.venv"
LOCK=crates/flashmux-py/requirements.lock

if ! command -v "$PY" >/dev/null 2>&1; then
    echo "python-env: $PY not found: install Python 3.9 or newer (or set PYTHON)" >&2
    exit 1
fi
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' || {
    echo "python-env: $PY is $("$PY" -V 2>&1): flashmux needs 3.9 or newer (set PYTHON)" >&2
    exit 1
}
if [ ! -x "$VENV/bin/python" ]; then
    if ! "$PY" -m venv "$VENV" 2>/dev/null; then
        # Debian's Python has venv in a package of its own.
        rm -rf "$VENV"
        if command -v apt-get >/dev/null 2>&1; then
            SUDO=""
            [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
            $SUDO apt-get update -qq || true
            ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
            DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "python$ver-venv" >/dev/null \
                || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
        fi
        "$PY" -m venv "$VENV"
    fi
fi
stamp="$VENV/.flashmux-lock"
if ! cmp -s "$LOCK" "$stamp"; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$LOCK"
    cp "$LOCK" "$stamp"
fi
VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" "$VENV/bin/maturin" develop --release --locked -q \
    -m crates/flashmux-py/Cargo.toml

"""Shared fixtures: the command-line binary the Python API is checked against, and small
scenarios that run in a fraction of a second."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

#: A small scenario: two tenants on a small clean drive, 200 ms of simulated time.
SMALL = """
name = "small"
seed = 3

[device]
preset = "paper-c"

[precondition]
state = "clean"

[stop]
time = "200ms"

[output]
timeline_interval = "20ms"

[[tenant]]
name = "seq"
fio = \"\"\"
[w]
rw=write
bs=64k
direct=1
iodepth=4
time_based
runtime=10s
\"\"\"

[[tenant]]
name = "rand"
fio = \"\"\"
[r]
rw=randrw
rwmixread=70
bs=4k
direct=1
iodepth=8
time_based
runtime=10s
\"\"\"
"""


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `flashmux` binary built from this checkout (FLASHMUX_CLI overrides)."""
    if "FLASHMUX_CLI" in os.environ:
        return Path(os.environ["FLASHMUX_CLI"])
    subprocess.run(["cargo", "build", "--locked", "-q", "-p", "flashmux-cli"], cwd=ROOT, check=True)
    return ROOT / "target" / "debug" / "flashmux"


@pytest.fixture
def small(tmp_path) -> Path:
    p = tmp_path / "small.toml"
    p.write_text(SMALL)
    return p


def run_cli(cli: Path, *args, cwd=None):
    """Runs the command line; returns (exit code, stdout, stderr)."""
    p = subprocess.run([str(cli), *map(str, args)], cwd=cwd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def cli_error(stderr: str) -> str:
    """The message the command line printed as `flashmux: error: ...`."""
    marker = "flashmux: error: "
    assert marker in stderr, f"no error in: {stderr!r}"
    # The message may run over several lines (a TOML parse error shows the line it is on).
    return stderr.split(marker, 1)[1].rstrip("\n")

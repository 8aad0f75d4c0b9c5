"""flashmux.sweep: the command line's sweep.csv row for row, Ray against the serial sweep, the
cache, failing points, Ctrl-C."""

import os
import signal
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

import flashmux
from conftest import SMALL, cli_error, run_cli

EXPERIMENT = """
name = "op"
scenario = "small.toml"

[[sweep]]
key = "device.ftl.overprovisioning"
values = [0.07, 0.28]
label = "op"

[[sweep]]
key = "tenant.1.fio"
values = ["[r]\\nrw=randread\\nbs=4k\\ndirect=1\\niodepth=8\\n", "[w]\\nrw=randwrite\\nbs=16k\\ndirect=1\\niodepth=2\\n"]
names = ["randread", "randwrite"]
label = "workload"
"""


@pytest.fixture
def experiment(small):
    p = small.parent / "exp.toml"
    p.write_text(EXPERIMENT)
    return p


def assert_same_rows(py: pd.DataFrame, cli_csv) -> None:
    cli = pd.read_csv(cli_csv, keep_default_na=True)
    assert list(py.columns[: len(cli.columns)]) == list(cli.columns)
    assert list(py.columns[len(cli.columns):]) == ["point", "config_hash", "error"]
    pd.testing.assert_frame_equal(py[cli.columns].reset_index(drop=True), cli, check_dtype=False)


def test_an_experiment_file_gives_the_cli_sweep_csv_row_for_row(cli, experiment, tmp_path):
    code, _, err = run_cli(cli, "sweep", experiment, "-o", tmp_path / "cli", "--no-progress")
    assert code == 0, err
    df = flashmux.sweep(str(experiment), progress=False, workers=2, output_dir=tmp_path / "py")
    assert len(df) == 8 and (df["error"] == "").all()
    assert_same_rows(df, tmp_path / "cli" / "sweep.csv")
    # Each point's hash is its results.json's config_hash.
    s = flashmux.Scenario(experiment.parent / "small.toml").set("device.ftl.overprovisioning", 0.28)
    s.set("tenant.1.fio", "[r]\nrw=randread\nbs=4k\ndirect=1\niodepth=8\n")
    assert df.loc[4, "config_hash"] == s.config_hash
    # Written as CSV and Parquet.
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "py" / "sweep.parquet"), df)
    assert list(pd.read_csv(tmp_path / "py" / "sweep.csv").columns) == list(df.columns)


def test_a_grid_with_seeds(small):
    df = flashmux.sweep(base=small, grid={"device.ftl.overprovisioning": [0.07, 0.28], "tenant.0.weight": [100, 900]}, seeds=range(3), progress=False)
    assert list(df.columns[:3]) == ["device.ftl.overprovisioning", "tenant.0.weight", "seed"]
    assert len(df) == 2 * 2 * 3 * 2
    # The first key outermost, seeds innermost.
    assert list(df["seed"][:6]) == [0, 0, 1, 1, 2, 2]
    assert list(df["device.ftl.overprovisioning"].unique()) == [0.07, 0.28]
    # Each point is the run of its scenario.
    one = flashmux.run(flashmux.Scenario(small).set("device.ftl.overprovisioning", 0.28).set("tenant.0.weight", 900), seed=2)
    row = df[(df["device.ftl.overprovisioning"] == 0.28) & (df["tenant.0.weight"] == 900) & (df["seed"] == 2)]
    pd.testing.assert_frame_equal(row[one.metrics.columns].reset_index(drop=True), one.metrics, check_dtype=False)


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_a_sweep_on_ray_with_2_cpus_equals_the_serial_sweep(local_ray, small):
    grid = {"device.ftl.overprovisioning": [0.07, 0.15, 0.28], "tenant.1.weight": [250, 750]}
    serial = flashmux.sweep(base=small, grid=grid, seeds=[1, 2], workers=1, progress=False)
    on_ray = flashmux.sweep(base=small, grid=grid, seeds=[1, 2], executor="ray", progress=False)
    assert len(serial) == 24
    pd.testing.assert_frame_equal(on_ray, serial)
    assert on_ray.attrs["ran"] == 12


def test_a_rerun_with_the_cache_runs_nothing(small, tmp_path):
    cache = tmp_path / "cache"
    grid = {"tenant.1.weight": [100, 500, 900]}
    first = flashmux.sweep(base=small, grid=grid, seeds=[1, 2], cache=cache, progress=False)
    assert (first.attrs["ran"], first.attrs["cached"]) == (6, 0)
    again = flashmux.sweep(base=small, grid=grid, seeds=[1, 2], cache=cache, progress=False)
    assert (again.attrs["ran"], again.attrs["cached"]) == (6 - 6, 6)
    pd.testing.assert_frame_equal(again, first)
    # A new point runs; the others come from the cache.
    more = flashmux.sweep(base=small, grid=grid, seeds=[1, 2, 3], cache=cache, progress=False)
    assert (more.attrs["ran"], more.attrs["cached"]) == (3, 6)
    # A damaged cache file is run again, not trusted.
    victim = next((cache / "points").glob("*.json"))
    victim.write_text("{not json")
    fixed = flashmux.sweep(base=small, grid=grid, seeds=[1, 2], cache=cache, progress=False)
    assert (fixed.attrs["ran"], fixed.attrs["cached"]) == (1, 5)
    pd.testing.assert_frame_equal(fixed, first)


def test_a_failing_point_is_recorded_with_the_cli_message(cli, small, tmp_path):
    exp = small.parent / "bad-point.toml"
    exp.write_text('scenario = "small.toml"\n[[sweep]]\nkey = "device.ftl.overprovisioning"\nvalues = [0.07, -1.0, 0.28]\nlabel = "op"\n')
    code, _, err = run_cli(cli, "sweep", exp, "-o", tmp_path / "cli", "--no-progress")
    assert code == 2
    with pytest.warns(flashmux.FlashmuxWarning, match="1 of 3 points do not resolve"):
        df = flashmux.sweep(str(exp), progress=False)
    assert df.attrs["failed"] == 1 and df.attrs["ran"] == 2
    bad = df[df["op"] == -1.0]
    assert len(bad) == 1 and bad["tenant"].isna().all()
    assert bad["error"].iloc[0] == cli_error(err)
    good = df[df["op"] != -1.0]
    assert len(good) == 4 and (good["error"] == "").all() and good["write_iops"].notna().all()


SLOW = SMALL.replace("runtime=10s", "runtime=10000s")

# argv[2]: "first" interrupts the sweep (SIGINT, as Ctrl-C) once its first point is in the cache,
# so that the test does not depend on how fast this machine is; "never" lets it finish.
INTERRUPTED = """
import json, os, pathlib, signal, sys, threading, time, warnings
import flashmux
def interrupt_after_first():
    points = pathlib.Path(sys.argv[3]) / "points"
    while not (points.is_dir() and any(points.glob("*.json"))):
        time.sleep(0.005)
    os.kill(os.getpid(), signal.SIGINT)
if sys.argv[2] == "first":
    threading.Thread(target=interrupt_after_first, daemon=True).start()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    df = flashmux.sweep(base=flashmux.Scenario(sys.argv[1]).set("stop.time", "120s"),
                        seeds=range(6), workers=1, cache=sys.argv[3], progress=False)
print(json.dumps({**df.attrs, "rows": len(df), "warned": [str(x.message) for x in w]}))
"""


def test_ctrl_c_keeps_what_finished_and_the_cache_resumes(tmp_path):
    scenario = tmp_path / "slow.toml"
    scenario.write_text(SLOW)
    cache = tmp_path / "cache"
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    import json

    p = subprocess.run([sys.executable, str(script), str(scenario), "first", str(cache)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["interrupted"] is True
    finished = out["ran"]
    assert 1 <= finished < 6, out
    assert out["rows"] == 2 * finished
    assert any("interrupted" in m for m in out["warned"])
    assert len(list((cache / "points").glob("*.json"))) == finished
    # The rerun runs only what did not finish.
    p = subprocess.run([sys.executable, str(script), str(scenario), "never", str(cache)], capture_output=True, text=True, timeout=600)
    out2 = json.loads(p.stdout.splitlines()[-1]) if p.returncode == 0 else None
    assert out2 is not None, p.stderr
    assert (out2["cached"], out2["ran"], out2["interrupted"]) == (finished, 6 - finished, False)


AGED = {"precondition.state": "aged", "device.capacity": "4GiB"}


def aged_base(small):
    s = flashmux.Scenario(small)
    for k, v in AGED.items():
        s.set(k, v)
    return s


def test_points_that_share_a_drive_age_it_once(small):
    base = aged_base(small)
    grid = {"host.scheduler": ["none", "cfq", "mq-deadline"]}
    alone = flashmux.sweep(base=base, grid=grid, seeds=[1, 2], progress=False, share_drives=False)
    shared = flashmux.sweep(base=base, grid=grid, seeds=[1, 2], progress=False)
    pd.testing.assert_frame_equal(shared, alone)
    # One drive per seed: the schedulers share it.
    assert (shared.attrs["drives_aged"], alone.attrs["drives_aged"]) == (2, 0)


def test_the_cache_keeps_drives_for_other_sweeps(small, tmp_path):
    base = aged_base(small)
    first = flashmux.sweep(base=base, grid={"tenant.0.weight": [100, 900]}, seeds=[4], cache=tmp_path, progress=False)
    assert first.attrs["drives_aged"] == 1 and len(list((tmp_path / "drives").glob("*.fmstate"))) == 1
    # Another sweep on the same drive (weights do not change it) loads it.
    other = flashmux.sweep(base=base, grid={"tenant.1.weight": [300, 700]}, seeds=[4], cache=tmp_path, progress=False)
    assert (other.attrs["drives_aged"], other.attrs["drives_reused"], other.attrs["ran"]) == (0, 1, 2)
    plain = flashmux.sweep(base=base, grid={"tenant.1.weight": [300, 700]}, seeds=[4], progress=False, share_drives=False)
    pd.testing.assert_frame_equal(other, plain)


def test_shared_drives_on_ray_equal_the_serial_sweep(local_ray, small, tmp_path):
    base = aged_base(small)
    grid = {"host.scheduler": ["none", "cfq"]}
    serial = flashmux.sweep(base=base, grid=grid, seeds=[1, 2], workers=1, progress=False, share_drives=False)
    on_ray = flashmux.sweep(base=base, grid=grid, seeds=[1, 2], executor="ray", cache=tmp_path, progress=False)
    pd.testing.assert_frame_equal(on_ray, serial)
    assert on_ray.attrs["drives_aged"] == 2

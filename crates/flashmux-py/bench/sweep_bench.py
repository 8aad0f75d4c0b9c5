"""Sweep throughput: points per minute with the local executor and with Ray, 1 and 2 workers,
and the per-point overhead of each (docs/PERFORMANCE.md, "Python sweeps").

    .venv/bin/python crates/flashmux-py/bench/sweep_bench.py [--points 200]

A point is the test suite's small scenario (two tenants, 64 KiB sequential writes and 4 KiB
random 70/30 read/write on a clean paper-C drive) run for `--sim` of simulated time; the
overhead is measured with points of 1 ms, whose simulation is negligible.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import flashmux  # noqa: E402
from conftest import SMALL  # noqa: E402


def one(executor, workers, n, sim):
    base = flashmux.Scenario.from_toml(SMALL.replace("runtime=10s", "runtime=100000s")).set("stop.time", sim)
    if executor == "ray":
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        # Ray's workers start lazily: one warm-up point each, as a cluster that is up would have.
        flashmux.sweep(base=base, seeds=range(10_000, 10_000 + workers), executor="ray", progress=False)
    t = time.perf_counter()
    df = flashmux.sweep(base=base, seeds=range(n), executor=executor, workers=workers, progress=False)
    dt = time.perf_counter() - t
    if executor == "ray":
        import ray

        ray.shutdown()
    assert df.attrs["ran"] == n and (df["error"] == "").all()
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=200)
    ap.add_argument("--sim", default="40s")
    a = ap.parse_args()
    print(f"{a.points} points of {a.sim} simulated each")
    print(f"{'executor':<8} {'workers':>7} {'seconds':>8} {'points/min':>10} {'scaling':>8}")
    for ex in ("local", "ray"):
        base = None
        for w in (1, 2):
            dt = one(ex, w, a.points, a.sim)
            base = base or dt
            print(f"{ex:<8} {w:>7} {dt:>8.1f} {a.points / dt * 60:>10.0f} {base / dt:>7.2f}x", flush=True)
    print("\noverhead per point (1 ms points, 1 worker)")
    for ex in ("local", "ray"):
        dt = one(ex, 1, a.points, "1ms")
        print(f"{ex:<8} {dt / a.points * 1e3:>8.2f} ms", flush=True)


if __name__ == "__main__":
    main()

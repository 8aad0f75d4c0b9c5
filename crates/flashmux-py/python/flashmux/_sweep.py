"""Sweeps: one simulation per point, in this process's thread pool or as Ray tasks, with a cache
that lets an interrupted sweep resume."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._run import FlashmuxWarning, PathLike, Scenario, ScenarioLike, TEXT_COLUMNS, _scenario

#: Columns every sweep row ends with: the point's position, its configuration hash (the cache's
#: key, results.json's `config_hash`) and the error of a point that failed (empty otherwise).
EXTRA_COLUMNS = ("point", "config_hash", "error")

#: The cache's file format; a file of another version is ignored (and rewritten).
CACHE_VERSION = 1


class _Point:
    __slots__ = ("index", "params", "text", "label", "base_dir", "config_hash", "drive", "memory", "state_file", "error", "result")

    def __init__(self, index: int, params: List[Tuple[str, Any]]):
        self.index = index
        self.params = params
        self.text = self.label = self.base_dir = self.config_hash = self.drive = self.state_file = None
        self.memory = 0
        self.error: Optional[str] = None
        # (columns, rows, stop_reason)
        self.result: Optional[Tuple[List[str], List[List[str]], str]] = None


def _run_point(text: str, label: str, base_dir: str, state_file: Optional[str], cancel: Optional["_native.Cancel"] = None):
    """One point; never raises for the point's own failure: ``("ok", columns, rows, stop)`` or
    ``("error", message)``. Ray runs it as a task."""
    try:
        columns, rows, stop, _hash = _native.run_point(text, label, base_dir, cancel, state_file)
        return ("ok", columns, rows, stop)
    except _native.FlashmuxError as e:
        return ("error", str(e))


def _age_drive(text: str, label: str, base_dir: str, path: str, cancel: Optional["_native.Cancel"] = None):
    """Ages a point's drive into ``path``: ``("ok", bytes)`` or ``("error", message)``; the file
    appears whole or not at all."""
    try:
        n, _summary = _native.age_point(text, label, base_dir, path, cancel)
        return ("ok", n) if n else ("error", "interrupted while aging")
    except _native.FlashmuxError as e:
        return ("error", str(e))


def _experiment(experiment, base, grid, seeds, name) -> "_native.Experiment":
    if experiment is not None:
        if base is not None or grid is not None or seeds is not None:
            raise TypeError("give either an experiment file, or base= with grid= and/or seeds=, not both")
        if isinstance(experiment, _native.Experiment):
            return experiment
        return _native.Experiment.load(os.fspath(experiment))
    if base is None:
        raise TypeError("sweep() needs an experiment file or base= (a scenario) with grid= and/or seeds=")
    s = _scenario(base)
    axes = []
    for key, values in (grid or {}).items():
        values = list(values)
        axes.append((key, values, key, None))
    if seeds is not None:
        axes.append(("seed", [int(x) for x in seeds], "seed", None))
    return _native.Experiment.from_axes(s.native, axes, name or "sweep")


class _Cache:
    """Finished points, one JSON file each, keyed by the flashmux version and the point's
    configuration hash (which includes the seed)."""

    def __init__(self, directory: PathLike):
        self.dir = Path(directory) / "points"
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, h: str) -> Path:
        return self.dir / f"{_native.__version__}-{h}.json"

    def get(self, h: str):
        try:
            with open(self._path(h), encoding="utf-8") as f:
                d = json.load(f)
        except (OSError, ValueError):
            return None
        if d.get("cache_version") != CACHE_VERSION or d.get("config_hash") != h:
            return None
        return (d["columns"], d["rows"], d["stop_reason"])

    def put(self, h: str, result) -> None:
        columns, rows, stop = result
        path = self._path(h)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"cache_version": CACHE_VERSION, "config_hash": h, "columns": columns, "rows": rows, "stop_reason": stop}, f)
        os.replace(tmp, path)


def sweep(
    experiment: Union[PathLike, "_native.Experiment", None] = None,
    *,
    base: ScenarioLike = None,
    grid: Optional[Mapping[str, Iterable[Any]]] = None,
    seeds: Optional[Iterable[int]] = None,
    executor: str = "local",
    workers: Optional[int] = None,
    address: Optional[str] = None,
    cache: Optional[PathLike] = None,
    output_dir: Optional[PathLike] = None,
    progress: bool = True,
    name: Optional[str] = None,
    share_drives: bool = True,
):
    """Runs every point of a sweep and returns one pandas DataFrame, a row per point and tenant
    like ``flashmux sweep``'s sweep.csv: the point's parameters, ``tenant``, the metric columns,
    then ``point``, ``config_hash`` and ``error``.

    The points come from an experiment file (``flashmux sweep``'s format) or from ``base`` (a
    scenario) with ``grid`` (dotted key → values; the first key outermost; each key is its
    column) and ``seeds`` (the last, innermost axis, column ``seed``).

    - ``executor="local"``: a pool of ``workers`` threads in this process (default: the CPUs);
      ``executor="ray"``: each point a Ray task of one CPU, on the Ray that is initialized, or
      ``ray.init(address=address)`` (``None``: a local Ray of ``workers`` CPUs; ``"auto"`` or
      ``"ray://host:port"``: a cluster).
    - Points stream back as they finish (a tqdm bar with ``progress``). A point whose scenario
      does not resolve or whose run fails has its message in ``error`` and the sweep goes on.
    - Ctrl-C stops the running points and returns what finished (``df.attrs["interrupted"]``).
    - ``cache``: a directory; finished points are kept there by configuration hash and skipped
      on a rerun, so an interrupted sweep resumes where it stopped.
    - ``output_dir``: also writes ``sweep.csv`` and ``sweep.parquet`` there.
    - ``share_drives``: points that precondition the same drive (same device, preconditioning,
      seed and tenants' regions — whatever they do after aging) age it once: the drive is saved
      (``DIR/drives/`` of the cache, else a temporary directory) and each point loads it, with
      results byte-identical to aging in place. With Ray, the cache directory must be one every
      worker sees (a shared filesystem).

    ``df.attrs`` says what happened: ``points``, ``ran``, ``cached``, ``failed``,
    ``interrupted``, ``drives_aged`` (drives aged and saved for sharing), ``drives_reused``
    (saved drives found in the cache).
    """
    exp = _experiment(experiment, base, grid, seeds, name)
    if executor not in ("local", "ray"):
        raise ValueError(f"executor: '{executor}': expected 'local' or 'ray'")
    if workers is not None and workers < 1:
        raise ValueError(f"workers: {workers}: must be at least 1")
    n = len(exp)
    points = [_Point(i, exp.params(i)) for i in range(n)]
    for p in points:
        try:
            p.text, p.label, base_dir, p.config_hash, p.drive, p.memory = exp.point(p.index)
            p.base_dir = str(base_dir)
        except _native.ConfigError as e:
            p.error = str(e)
    store = _Cache(cache) if cache is not None else None
    cached = 0
    if store is not None:
        for p in points:
            if p.error is None and (hit := store.get(p.config_hash)) is not None:
                p.result = hit
                cached += 1
    todo = [p for p in points if p.error is None and p.result is None]
    failed_before = sum(p.error is not None for p in points)
    if failed_before:
        warnings.warn(f"{failed_before} of {n} points do not resolve: their rows carry the error", FlashmuxWarning, stacklevel=2)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, initial=n - len(todo), unit="point", desc=exp.name)

    def finished(p: _Point, out) -> None:
        if out[0] == "ok":
            result = (out[1], out[2], out[3])
            if out[3] == "interrupted":
                return  # cut short by Ctrl-C: not a result
            p.result = result
            if store is not None:
                store.put(p.config_hash, result)
        else:
            p.error = out[1]
        if bar is not None:
            bar.update(1)

    interrupted = False
    drives_aged = drives_reused = 0
    scratch = None
    try:
        if todo:
            workers_n = workers or os.cpu_count() or 1
            if executor == "local":
                exp.check_memory(max(todo, key=lambda p: p.memory).index, min(workers_n, len(todo)))
            # Drives shared by points: aged once, saved, loaded by each.
            groups: Dict[str, List[_Point]] = {}
            if share_drives:
                for p in todo:
                    if p.drive is not None:
                        groups.setdefault(p.drive, []).append(p)
                if cache is None:
                    groups = {k: v for k, v in groups.items() if len(v) > 1}
            if groups:
                if cache is not None:
                    drive_dir = Path(cache) / "drives"
                else:
                    import tempfile

                    scratch = tempfile.TemporaryDirectory(prefix="flashmux-drives-")
                    drive_dir = Path(scratch.name)
                drive_dir.mkdir(parents=True, exist_ok=True)
                jobs = []
                for key, members in groups.items():
                    path = drive_dir / f"{_native.__version__}-{key}.fmstate"
                    for p in members:
                        p.state_file = str(path)
                    if path.exists():
                        drives_reused += 1
                    else:
                        jobs.append((members[0], str(path)))
                def aged(_p: _Point, out) -> None:
                    nonlocal drives_aged
                    drives_aged += out[0] == "ok"

                interrupted = _execute(
                    _age_drive, [(p, (p.text, p.label, p.base_dir, path)) for p, path in jobs], executor, workers_n, address, aged
                )
                # A drive that failed to age (its error is then its points' own, when they age
                # it themselves) is not shared.
                for p in todo:
                    if p.state_file is not None and not Path(p.state_file).exists():
                        p.state_file = None
            if not interrupted:
                jobs = [(p, (p.text, p.label, p.base_dir, p.state_file)) for p in todo]
                interrupted = _execute(_run_point, jobs, executor, workers_n, address, finished)
    finally:
        if bar is not None:
            bar.close()
        if scratch is not None:
            scratch.cleanup()
    ran = sum(p.result is not None for p in todo) + sum(p.error is not None for p in todo)
    df = _frame(exp.labels, points)
    failed = sum(p.error is not None for p in points)
    df.attrs.update(
        {
            "points": n,
            "ran": ran,
            "cached": cached,
            "failed": failed,
            "interrupted": interrupted,
            "drives_aged": drives_aged,
            "drives_reused": drives_reused,
        }
    )
    if interrupted:
        done = sum(p.result is not None or p.error is not None for p in points)
        warnings.warn(f"interrupted: {done} of {n} points finished; rerun with the same cache to resume", FlashmuxWarning, stacklevel=2)
    if output_dir is not None:
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / "sweep.csv", index=False)
        df.to_parquet(out / "sweep.parquet", index=False)
    return df


def _execute(fn: Callable, jobs: List[Tuple[_Point, tuple]], executor: str, workers: int, address: Optional[str], done: Callable) -> bool:
    """Runs ``fn(*args)`` for each ``(point, args)`` of ``jobs`` on the executor — ``workers``
    threads of this process, or one Ray task of one CPU each — and calls ``done(point, out)``
    as each finishes. ``fn`` never raises for its own failure (see ``_run_point``). Returns
    whether Ctrl-C stopped it: the running calls stop after their event in progress (those cut
    short report it: a point's stop reason ``interrupted``, a drive's error) and are handed to
    ``done`` like the others; the ones not started never run."""
    if not jobs:
        return False
    if executor == "local":
        cancel = _native.Cancel()
        with cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="flashmux") as pool:
            futures = {pool.submit(fn, *args, cancel): p for p, args in jobs}
            pending = set(futures)
            try:
                while pending:
                    finished, pending = cf.wait(pending, timeout=0.25, return_when=cf.FIRST_COMPLETED)
                    for f in finished:
                        done(futures[f], f.result())
            except KeyboardInterrupt:
                cancel.cancel()
                for f in pending:
                    f.cancel()
                for f in pending:
                    if not f.cancelled():
                        try:
                            done(futures[f], f.result())
                        except cf.CancelledError:
                            pass
                return True
        return False
    ray = _ray(workers, address)
    task = ray.remote(num_cpus=1, max_retries=0)(fn)
    refs = {task.remote(*args): p for p, args in jobs}
    try:
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.25)
            for r in ready:
                p = refs.pop(r)
                try:
                    out = ray.get(r)
                except Exception as e:  # the worker died, the task was cancelled, ...
                    out = ("error", f"{type(e).__name__}: {e}")
                done(p, out)
    except KeyboardInterrupt:
        for r in refs:
            ray.cancel(r, force=True)
        return True
    return False


def _ray(workers: Optional[int], address: Optional[str]):
    try:
        import ray
    except ImportError as e:
        raise ImportError("executor='ray' needs Ray: pip install 'ray>=2.9'") from e
    if not ray.is_initialized():
        kwargs: Dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is None:
            kwargs["num_cpus"] = workers or os.cpu_count() or 1
        ray.init(address=address, **kwargs)
    return ray


def _frame(labels: Sequence[str], points: List[_Point]):
    import pandas as pd

    metric_columns = ["tenant"] + list(_metric_columns())
    rows: List[Dict[str, Any]] = []
    for p in points:
        base = dict(p.params)
        extra = {"point": p.index, "config_hash": p.config_hash or "", "error": p.error or ""}
        if p.result is None:
            if p.error is None:
                continue  # never ran (interrupted)
            rows.append({**base, **{c: None for c in metric_columns}, **extra})
            continue
        columns, trows, _stop = p.result
        for r in trows:
            rows.append({**base, **dict(zip(columns, r)), **extra})
    df = pd.DataFrame(rows, columns=list(labels) + metric_columns + list(EXTRA_COLUMNS))
    for c in metric_columns:
        if c not in TEXT_COLUMNS:
            df[c] = pd.to_numeric(df[c].replace("", float("nan")))
    df["point"] = df["point"].astype("int64")
    return df


def _metric_columns() -> List[str]:
    global _METRICS
    if _METRICS is None:
        _METRICS = _native.metric_columns()
    return _METRICS


_METRICS: Optional[List[str]] = None

"""Scenarios, single runs and their results."""

from __future__ import annotations

import io
import json as _json
import os
import shutil
import tempfile
import warnings
import weakref
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from . import _native

PathLike = Union[str, "os.PathLike[str]"]
ScenarioLike = Union["Scenario", PathLike, Mapping[str, Any], None]


class FlashmuxWarning(UserWarning):
    """What the command line prints as `flashmux: warning: ...` (and its notes)."""


class Scenario:
    """A scenario: its TOML document and the validated scenario it resolves to.

    ``Scenario("scenario.toml")`` loads a file, ``Scenario({...})`` takes a dict shaped as the
    TOML file is, ``Scenario()`` is the built-in default scenario. ``set(key, value)`` sets any
    key by its dotted path, exactly as an experiment's ``[[sweep]]`` does (``"seed"``,
    ``"device.ftl.cmt.pages"``, ``"tenant.1.fio"``), and validates at once: a bad key or value
    raises :class:`ConfigError` and leaves the scenario as it was.
    """

    __slots__ = ("_s",)

    def __init__(self, source: ScenarioLike = None):
        if isinstance(source, Scenario):
            self._s = source._s
        elif isinstance(source, _native.Scenario):
            self._s = source
        elif source is None:
            self._s = _native.Scenario.default()
        elif isinstance(source, Mapping):
            self._s = _native.Scenario.from_dict(dict(source))
        elif isinstance(source, (str, os.PathLike)):
            self._s = _native.Scenario.load(os.fspath(source))
        else:
            raise TypeError(f"a scenario is a file path, a dict or a flashmux.Scenario, not a {type(source).__name__}")

    @classmethod
    def load(cls, path: PathLike) -> "Scenario":
        """Loads a scenario file; relative paths in it start at its directory."""
        return cls(_native.Scenario.load(os.fspath(path)))

    @classmethod
    def from_toml(cls, text: str, name: str = "<string>", base_dir: PathLike = ".") -> "Scenario":
        """A scenario from TOML text; ``name`` labels it in errors, ``base_dir`` resolves
        relative ``job_file`` and ``trace`` paths."""
        return cls(_native.Scenario.from_toml(text, name, os.fspath(base_dir)))

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], name: str = "<dict>", base_dir: PathLike = ".") -> "Scenario":
        """A scenario from a dict shaped as the TOML file is."""
        return cls(_native.Scenario.from_dict(dict(doc), name, os.fspath(base_dir)))

    @classmethod
    def default(cls) -> "Scenario":
        """The built-in default scenario (``flashmux run`` with no arguments)."""
        return cls(None)

    def set(self, key: str, value: Any) -> "Scenario":
        """Sets ``key`` (a dotted path) to ``value`` and validates; returns the scenario, so calls
        chain."""
        self._s = self._s.set(key, value)
        return self

    def with_(self, **keys: Any) -> "Scenario":
        """A copy with the keys set; ``__`` in a keyword stands for a dot
        (``s.with_(seed=7, device__ftl__cmt__pages=256)``)."""
        s = self.copy()
        for k, v in keys.items():
            s.set(k.replace("__", "."), v)
        return s

    def get(self, key: str, default: Any = None) -> Any:
        """The value the document gives ``key``, or ``default``."""
        return self._s.get(key, default)

    def __getitem__(self, key: str) -> Any:
        missing = object()
        v = self._s.get(key, missing)
        if v is missing:
            raise KeyError(key)
        return v

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def copy(self) -> "Scenario":
        return Scenario(self._s)

    def to_toml(self) -> str:
        return self._s.to_toml()

    def to_dict(self) -> Dict[str, Any]:
        return self._s.to_dict()

    @property
    def config_hash(self) -> str:
        """SHA-256 of everything that determines the results, seed included (results.json's)."""
        return self._s.config_hash

    @property
    def seed(self) -> int:
        return self._s.seed

    @property
    def name(self) -> str:
        return self._s.name

    @property
    def tenants(self) -> List[str]:
        return self._s.tenants

    @property
    def warnings(self) -> List[str]:
        return self._s.warnings

    @property
    def notes(self) -> List[str]:
        return self._s.notes

    @property
    def native(self) -> "_native.Scenario":
        return self._s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scenario) and self.config_hash == other.config_hash

    def __hash__(self) -> int:
        return hash(self.config_hash)

    def __reduce__(self):
        return (Scenario, (self._s,))

    def __repr__(self) -> str:
        return repr(self._s)


def _scenario(x: ScenarioLike) -> Scenario:
    return x if isinstance(x, Scenario) else Scenario(x)


def _warn(messages: List[str], notes: List[str] = ()) -> None:
    for w in messages:
        warnings.warn(w, FlashmuxWarning, stacklevel=3)
    if notes:
        warnings.warn("accepted but not modelled: " + ", ".join(notes), FlashmuxWarning, stacklevel=3)


class Result:
    """One run's results: the files ``flashmux run`` writes, and DataFrames of them."""

    def __init__(self, out: Dict[str, Any], directory: Path, temporary: bool):
        self._out = out
        self._dir = directory
        self._data: Optional[Dict[str, Any]] = None
        if temporary:
            self._cleanup = weakref.finalize(self, shutil.rmtree, str(directory), True)

    @property
    def json(self) -> str:
        """results.json as ``flashmux run`` writes it (fio's JSON output with flashmux's section)."""
        return self._out["json"]

    @property
    def data(self) -> Dict[str, Any]:
        """results.json parsed."""
        if self._data is None:
            self._data = _json.loads(self.json)
        return self._data

    @property
    def summary(self) -> str:
        """summary.txt: the per-tenant table the command line prints."""
        return self._out["summary"]

    @property
    def config_hash(self) -> str:
        return self._out["config_hash"]

    @property
    def stop_reason(self) -> str:
        return self._out["stop_reason"]

    @property
    def warnings(self) -> List[str]:
        return list(self._out["warnings"])

    @property
    def directory(self) -> Path:
        """Where the timeline (and, with ``output_dir``, every result file) is."""
        return self._dir

    @property
    def tenants(self):
        """A pandas DataFrame, one row per tenant: every field of results.json's
        ``flashmux.tenants`` flattened (``write.iops``, ``lat_ns.p99``, ``share.error``,
        ``gc_share``, ``map.miss_ratio``, ...), with the run's fairness per tenant
        (``fairness.*``) where an alone baseline measured it."""
        import pandas as pd

        fm = self.data["flashmux"]
        df = pd.json_normalize(fm["tenants"], sep=".")
        fairness = fm.get("fairness") or {}
        per_tenant = fairness.get("tenants") if isinstance(fairness, dict) else None
        if isinstance(per_tenant, list) and len(per_tenant) == len(df):
            f = pd.json_normalize(per_tenant, sep=".").add_prefix("fairness.")
            df = pd.concat([df, f.drop(columns=[c for c in f.columns if c in ("fairness.name", "fairness.tenant")])], axis=1)
        return df

    @property
    def metrics(self):
        """A pandas DataFrame, one row per tenant, with sweep.csv's metric columns."""
        return _metric_frame(self._out["columns"], self._out["rows"])

    @property
    def timeline(self):
        """timeline.csv as a pandas DataFrame (read from the file the run streamed it to)."""
        import pandas as pd

        return pd.read_csv(self._dir / "timeline.csv")

    def save(self, directory: PathLike) -> Path:
        """Writes results.json, timeline.csv and summary.txt into ``directory``, as ``flashmux run
        -o`` does; returns it."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        _write_atomic(d / "results.json", self.json)
        _write_atomic(d / "summary.txt", self.summary)
        src = self._dir / "timeline.csv"
        if src.resolve() != (d / "timeline.csv").resolve():
            shutil.copyfile(src, d / "timeline.csv")
        return d

    def __repr__(self) -> str:
        fm = self.data["flashmux"]
        return (
            f"<flashmux.Result {fm['scenario']!r} seed={fm['seed']} tenants={len(fm['tenants'])} "
            f"sim_time={fm['sim_time_ns'] / 1e9:.3f}s stop={self.stop_reason}>"
        )


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


#: sweep.csv's columns that are text; the other metric columns are numbers (empty: undefined).
TEXT_COLUMNS = ("tenant", "stop_reason")


def _metric_frame(columns: List[str], rows: List[List[str]]):
    import pandas as pd

    df = pd.DataFrame(rows, columns=columns)
    for c in columns:
        if c not in TEXT_COLUMNS:
            df[c] = pd.to_numeric(df[c].replace("", float("nan")))
    return df


def run(
    scenario: ScenarioLike = None,
    seed: Optional[int] = None,
    *,
    output_dir: Optional[PathLike] = None,
    json_plus: bool = False,
    alone_baseline: bool = False,
) -> Result:
    """Runs a scenario (a file path, a dict, a :class:`Scenario`, or ``None`` for the built-in
    default) and returns its :class:`Result`.

    ``seed`` replaces the scenario's (``flashmux run --seed``). With ``output_dir`` the run writes
    results.json, timeline.csv and summary.txt there as ``flashmux run -o`` does; without it the
    timeline streams to a temporary directory that lives as long as the result. ``json_plus``:
    latency histogram bins in the JSON (``--output-format json+``). ``alone_baseline``: also runs
    each tenant alone and reports slowdowns and fairness (``--alone-baseline``; N+1 runs).

    The GIL is released while the model runs; Ctrl-C stops it after the event in progress and
    raises ``KeyboardInterrupt``.
    """
    s = _scenario(scenario)
    if output_dir is None:
        directory, temporary = Path(tempfile.mkdtemp(prefix="flashmux-run-")), True
    else:
        directory, temporary = Path(output_dir), False
        directory.mkdir(parents=True, exist_ok=True)
    try:
        out = _native.run(
            s.native, seed=seed, timeline=str(directory / "timeline.csv"), json_plus=json_plus, alone_baseline=alone_baseline
        )
    except BaseException:
        if temporary:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    _warn(out["warnings"], out["notes"])
    r = Result(out, directory, temporary)
    if not temporary:
        _write_atomic(directory / "results.json", r.json)
        _write_atomic(directory / "summary.txt", r.summary)
    return r


def age(scenario: ScenarioLike, path: PathLike, seed: Optional[int] = None) -> Dict[str, Any]:
    """Ages the scenario's drive (with ``seed`` instead of its own, if given) and saves it to
    ``path``, as ``flashmux age --save`` does. A scenario with ``precondition.state_file =
    path`` (and the same drive: device, preconditioning, seed, tenants' regions) then starts from
    it instead of aging, with byte-identical results. Returns ``{"path", "bytes",
    "precondition"}`` (what aging did, as summary.txt says it)."""
    s = _scenario(scenario)
    n, summary = _native.age(s.native, os.fspath(path), seed)
    if not n:
        raise KeyboardInterrupt("interrupted while aging: nothing saved")
    return {"path": Path(path), "bytes": n, "precondition": summary}


def presets() -> Dict[str, str]:
    """The device presets: name → one-line summary."""
    return dict(_native.presets())


def personalities() -> Dict[str, Dict[str, str]]:
    """The built-in workload personalities: name → ``{"summary", "fio"}`` (its fio job)."""
    return {n: {"summary": s, "fio": job} for n, s, job in _native.personalities()}


def experiments() -> Dict[str, str]:
    """The bundled paper experiments (``flashmux reproduce --list``): name → summary."""
    return dict(_native.experiments())


def reproduce(name: str, quick: bool = False, output_dir: Optional[PathLike] = None) -> Dict[str, Any]:
    """Runs a bundled paper experiment as ``flashmux reproduce`` does and returns ``{"checks":
    DataFrame (claim, measured, pass), "figures": [Path], "tables": [Path], "passed": bool,
    "output_dir": Path}``. ``quick``: the short variant the test suite runs. Files go to
    ``output_dir`` (default ``flashmux-out/<name>``)."""
    import pandas as pd

    out = Path(output_dir) if output_dir is not None else Path("flashmux-out") / name
    cancel = _native.Cancel()
    try:
        r = _native.reproduce(name, str(out), quick=quick, cancel=cancel)
    except KeyboardInterrupt:
        cancel.cancel()
        raise
    checks = pd.DataFrame(r["checks"], columns=["claim", "measured", "pass"])
    return {
        "checks": checks,
        "figures": [Path(p) for p in r["figures"]],
        "tables": [Path(p) for p in r["tables"]],
        "passed": bool(len(checks)) and bool(checks["pass"].all()),
        "interrupted": r["interrupted"],
        "output_dir": out,
    }

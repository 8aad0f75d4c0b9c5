"""flashmux from Python: runs, sweeps (in this process or on a Ray cluster) and results as pandas
DataFrames.

    import flashmux
    r = flashmux.run("scenario.toml", seed=7)      # or a dict, or a flashmux.Scenario
    r.json                                          # results.json, byte-identical to `flashmux run`'s
    r.tenants                                       # one row per tenant
    r.timeline                                      # timeline.csv
    df = flashmux.sweep("experiment.toml")          # the experiment files `flashmux sweep` reads
    df = flashmux.sweep(base="scenario.toml",
                        grid={"device.ftl.cmt.pages": [64, 256, 1024]},
                        seeds=range(5), executor="ray", cache=".flashmux-cache")

Every run is the simulator's own (the Rust library `flashmux run` uses), with the GIL released
while it simulates. Errors are exceptions carrying the command line's message: `ConfigError` for
bad input (what the command line exits 2 on), `SimulationError` for a run that failed.
"""

from ._native import (  # noqa: F401
    ConfigError,
    FlashmuxError,
    SimulationError,
    __version__,
)
from ._run import Result, Scenario, age, run, presets, personalities, experiments, reproduce, FlashmuxWarning
from ._sweep import sweep

__all__ = [
    "run",
    "sweep",
    "reproduce",
    "age",
    "Scenario",
    "Result",
    "presets",
    "personalities",
    "experiments",
    "FlashmuxError",
    "ConfigError",
    "SimulationError",
    "FlashmuxWarning",
    "__version__",
]

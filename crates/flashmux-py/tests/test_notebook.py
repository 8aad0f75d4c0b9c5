"""examples/paper-c.ipynb runs from top to bottom (its quick variant) and draws paper C's
figures from the same numbers `flashmux reproduce paper-c-cmt --quick` checks."""

import os

import pandas as pd
import pytest

from conftest import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def test_the_paper_c_notebook_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHMUX_QUICK", "1")
    monkeypatch.setenv("FLASHMUX_NOTEBOOK_OUT", str(tmp_path))
    examples = ROOT / "examples"
    nb = nbformat.read(examples / "paper-c.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(examples)}}).execute()
    assert (tmp_path / "paper-c-figs-2-3.png").stat().st_size > 10_000
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "VM0 misses more shared than partitioned or balanced: True" in text
    assert "VM1: shared <= balanced <= partitioned: True" in text
    # The notebook's sweep is the command line's experiment: its sweep.csv has the same rows.
    df = pd.read_csv(tmp_path / "sweep.csv")
    assert len(df) == 6 * 3 * 2 and set(df["policy"]) == {"shared", "partitioned", "balanced"}
    # The notebook leaves nothing in the repository.
    assert not (examples / "flashmux-out").exists()

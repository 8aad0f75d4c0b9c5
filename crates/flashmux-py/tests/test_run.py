"""flashmux.run and flashmux.Scenario against the command line."""

import json
import pickle

import pandas as pd
import pytest

import flashmux
from conftest import SMALL, cli_error, run_cli


def test_json_timeline_and_summary_are_byte_identical_to_the_cli(cli, small, tmp_path):
    code, _, err = run_cli(cli, "run", small, "--seed", 7, "-o", tmp_path / "cli", "--no-progress", "--output-format", "json")
    assert code == 0, err
    r = flashmux.run(str(small), seed=7, output_dir=tmp_path / "py")
    for f in ("results.json", "timeline.csv", "summary.txt"):
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes(), f
    assert r.json == (tmp_path / "cli" / "results.json").read_text()
    assert r.data["flashmux"]["seed"] == 7
    assert r.stop_reason == "time-limit"


def test_a_scenario_changed_in_python_runs_as_the_cli_overrides_do(cli, tmp_path):
    # --time and --seed on the command line; the same keys set through Scenario.set.
    code, _, err = run_cli(cli, "run", "--time", "300ms", "--seed", 5, "-o", tmp_path / "cli", "--no-progress", "--output-format", "json")
    assert code == 0, err
    s = flashmux.Scenario().set("stop.time", "300ms").set("seed", 5)
    r = flashmux.run(s)
    assert r.json == (tmp_path / "cli" / "results.json").read_text()
    assert r.config_hash == s.config_hash == r.data["flashmux"]["config_hash"]


def test_json_plus_and_the_alone_baseline_match_the_cli(cli, small, tmp_path):
    code, out, err = run_cli(cli, "run", small, "--alone-baseline", "--output-format", "json+", "-o", tmp_path / "cli", "--no-progress")
    assert code == 0, err
    r = flashmux.run(small, json_plus=True, alone_baseline=True)
    assert r.json == out
    assert "slowdown" in json.dumps(r.data["flashmux"]["fairness"])
    # Each tenant's slowdown joins its row.
    t = r.tenants
    slowdowns = [x["slowdown"] for x in r.data["flashmux"]["fairness"]["tenants"]]
    assert list(t["fairness.slowdown"]) == slowdowns and all(s > 1 for s in slowdowns)


def test_results_as_dataframes(small):
    r = flashmux.run(small)
    t = r.tenants
    assert list(t["name"]) == ["seq", "rand"]
    for c in ("write.iops", "read.iops", "lat_ns.p99", "gc_share", "map.miss_ratio", "share.error"):
        assert c in t.columns, c
    assert t.loc[1, "read.iops"] > 0 and t.loc[0, "read.iops"] == 0
    m = r.metrics
    assert list(m.columns) == ["tenant"] + flashmux._native.metric_columns()
    assert m.loc[0, "write_iops"] == pytest.approx(t.loc[0, "write.iops"], rel=1e-6)
    tl = r.timeline
    # 10 intervals of 20 ms, one row per tenant each.
    assert len(tl) == 20 and set(tl["tenant"]) == {"seq", "rand"}
    assert tl["time_s"].iloc[-1] == pytest.approx(0.18)


def test_the_temporary_directory_goes_with_the_result(small):
    r = flashmux.run(small)
    d = r.directory
    assert (d / "timeline.csv").exists()
    del r
    import gc

    gc.collect()
    assert not d.exists()


def test_save_writes_what_run_o_writes(small, tmp_path):
    r = flashmux.run(small)
    r.save(tmp_path / "saved")
    direct = flashmux.run(small, output_dir=tmp_path / "direct")
    for f in ("results.json", "timeline.csv", "summary.txt"):
        assert (tmp_path / "saved" / f).read_bytes() == (tmp_path / "direct" / f).read_bytes()
    assert direct.json == r.json


def test_scenario_from_dict_toml_and_file_are_one_scenario(small):
    a = flashmux.Scenario(small)
    b = flashmux.Scenario.from_toml(SMALL)
    c = flashmux.Scenario(a.to_dict())
    assert a.config_hash == b.config_hash == c.config_hash
    assert a == c and a.tenants == ["seq", "rand"] and a.seed == 3 and a.name == "small"
    assert flashmux.run(c).json == flashmux.run(a).json


def test_scenario_keys_by_dotted_path(small):
    s = flashmux.Scenario(small)
    assert s.get("tenant.1.name") == "rand"
    assert s["device.preset"] == "paper-c"
    assert s.get("device.ftl.cmt.pages") is None
    with pytest.raises(KeyError):
        s["device.nope"]
    t = s.with_(seed=9, device__ftl__overprovisioning=0.28)
    assert t.seed == 9 and t["device.ftl.overprovisioning"] == 0.28
    assert s.seed == 3, "with_ leaves the original alone"
    s["tenant.0.weight"] = 800
    assert s.get("tenant.0.weight") == 800 and s.config_hash != t.config_hash


def test_a_bad_set_raises_and_changes_nothing(small):
    s = flashmux.Scenario(small)
    before = s.config_hash
    with pytest.raises(flashmux.ConfigError, match=r"device.ftl.overprovisioning: -1 is out of range"):
        s.set("device.ftl.overprovisioning", -1.0)
    with pytest.raises(flashmux.ConfigError, match=r"index 5 is past the end of 'tenant' \(2 elements\)"):
        s.set("tenant.5.weight", 3)
    with pytest.raises(TypeError, match="None has no TOML value"):
        s.set("seed", None)
    with pytest.raises(TypeError, match="has no TOML value"):
        s.set("seed", object())
    assert s.config_hash == before


def test_python_values_become_toml_values(small):
    s = flashmux.Scenario(small)
    s.set("seed", 11)
    assert s.seed == 11
    # A dict is a table; a tuple (or any sequence) an array.
    s.set("device.ftl", {"mapping": "dftl", "cmt": {"pages": 512}})
    assert s.get("device.ftl.cmt.pages") == 512
    s.set("tenant", tuple(reversed(s.get("tenant"))))
    assert s.tenants == ["rand", "seq"]
    with pytest.raises(flashmux.ConfigError, match="precondition.state: invalid type: boolean `true`, expected a string"):
        s.set("precondition.state", True)
    with pytest.raises(flashmux.ConfigError, match="does not fit in a 64-bit"):
        s.set("seed", 2**70)


def test_scenarios_pickle(small):
    s = flashmux.Scenario(small).set("seed", 4)
    t = pickle.loads(pickle.dumps(s))
    assert t.config_hash == s.config_hash and t.to_toml() == s.to_toml()
    u = pickle.loads(pickle.dumps(flashmux.Scenario(small)))
    assert u.config_hash == flashmux.Scenario(small).config_hash


def test_listings_match_the_cli(cli):
    _, out, _ = run_cli(cli, "presets")
    assert list(flashmux.presets()) == [l.split()[0] for l in out.splitlines()]
    _, out, _ = run_cli(cli, "personalities")
    assert list(flashmux.personalities()) == [l.split()[0] for l in out.splitlines()]
    _, job, _ = run_cli(cli, "personalities", "varmail")
    assert flashmux.personalities()["varmail"]["fio"] == job
    _, out, _ = run_cli(cli, "reproduce", "--list")
    assert list(flashmux.experiments()) == [l.split()[0] for l in out.splitlines()]


def test_reproduce_writes_what_the_cli_writes(cli, tmp_path):
    code, _, err = run_cli(cli, "reproduce", "paper-b-exitless", "--quick", "-o", tmp_path / "cli", "--no-progress")
    r = flashmux.reproduce("paper-b-exitless", quick=True, output_dir=tmp_path / "py")
    assert (tmp_path / "py" / "checks.txt").read_text() == (tmp_path / "cli" / "checks.txt").read_text()
    for t in r["tables"]:
        rel = t.relative_to(tmp_path / "py")
        assert t.read_bytes() == (tmp_path / "cli" / rel).read_bytes()
    assert r["figures"] and all(f.exists() for f in r["figures"])
    assert list(r["checks"].columns) == ["claim", "measured", "pass"]
    assert r["passed"] == (code == 0)


def test_a_saved_drive_gives_the_results_of_aging_in_place(cli, small, tmp_path):
    aged = flashmux.Scenario(small).set("precondition.state", "workload").set("device.capacity", "4GiB")
    saved = flashmux.age(aged, tmp_path / "drive.fmstate")
    assert saved["bytes"] > 1_000_000 and saved["precondition"].startswith("workload, fill 100%")
    loading = aged.copy().set("precondition.state_file", str(tmp_path / "drive.fmstate"))
    assert loading.config_hash == aged.config_hash
    assert flashmux.run(loading).json == flashmux.run(aged).json
    # The command line reads the same file; its own `age` writes the same bytes.
    (tmp_path / "aged.toml").write_text(aged.to_toml())
    code, _, err = run_cli(cli, "age", tmp_path / "aged.toml", "--save", tmp_path / "cli.fmstate")
    assert code == 0, err
    assert (tmp_path / "cli.fmstate").read_bytes() == (tmp_path / "drive.fmstate").read_bytes()
    # Another seed is another drive: the CLI's message.
    (tmp_path / "loading.toml").write_text(loading.to_toml())
    code, _, err = run_cli(cli, "run", tmp_path / "loading.toml", "--seed", 9, "-o", tmp_path / "out")
    assert code == 2
    with pytest.raises(flashmux.ConfigError) as e:
        flashmux.run(flashmux.Scenario(tmp_path / "loading.toml"), seed=9)
    assert str(e.value) == cli_error(err)


def test_age_refuses_what_the_cli_refuses(cli, tmp_path):
    null = tmp_path / "null.toml"
    null.write_text('[device]\npreset = "null"\n[[tenant]]\nname = "t"\nfio = "[w]\\nrw=write\\nnumber_ios=1\\n"\n')
    code, _, err = run_cli(cli, "age", null, "--save", tmp_path / "x")
    assert code == 2
    with pytest.raises(flashmux.ConfigError) as e:
        flashmux.age(null, tmp_path / "x")
    assert str(e.value) == cli_error(err)

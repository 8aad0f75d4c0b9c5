"""Every error path raises with the message the command line prints (and exits 2 on)."""

import pytest

import flashmux
from conftest import SMALL, cli_error, run_cli

BAD_SCENARIOS = {
    "unknown key": SMALL.replace('preset = "paper-c"', 'preset = "paper-c"\nbogus = 1'),
    "unknown preset": SMALL.replace('preset = "paper-c"', 'preset = "nope"'),
    "bad toml": SMALL.replace('name = "small"', 'name = "small'),
    "bad fio option": SMALL.replace("bs=64k", "bs=64q"),
    "bad duration": SMALL.replace('time = "200ms"', 'time = "soon"'),
    "region past the end": SMALL.replace('name = "rand"', 'name = "rand"\nregion = { offset = "0", size = "64TiB" }'),
    "missing trace": SMALL.replace('[[tenant]]\nname = "rand"', '[[tenant]]\nname = "t"\ntrace = "nowhere.blktrace"\n\n[[tenant]]\nname = "rand"'),
}


@pytest.mark.parametrize("case", sorted(BAD_SCENARIOS))
def test_a_bad_scenario_raises_the_cli_message(cli, tmp_path, case):
    p = tmp_path / "bad.toml"
    p.write_text(BAD_SCENARIOS[case])
    code, _, err = run_cli(cli, "run", p, "-o", tmp_path / "out", "--no-progress")
    assert code == 2, err
    with pytest.raises(flashmux.ConfigError) as e:
        flashmux.run(str(p))
    assert str(e.value) == cli_error(err)
    # The location, where the message gives one.
    if e.value.line is not None:
        assert f"{e.value.file}:{e.value.line}:" in str(e.value)


def test_a_missing_file_raises_the_cli_message(cli, tmp_path):
    code, _, err = run_cli(cli, "run", tmp_path / "none.toml")
    assert code == 2
    with pytest.raises(flashmux.ConfigError) as e:
        flashmux.Scenario(tmp_path / "none.toml")
    assert str(e.value) == cli_error(err)
    assert e.value.file == str(tmp_path / "none.toml")


BAD_EXPERIMENTS = {
    "bad key": 'scenario = "small.toml"\n[[sweep]]\nkey = "device..ftl"\nvalues = [1]\n',
    "label twice": 'scenario = "small.toml"\n[[sweep]]\nkey = "seed"\nvalues = [1]\nlabel = "x"\n[[sweep]]\nkey = "device.ftl.overprovisioning"\nvalues = [0.1]\nlabel = "x"\n',
    "empty values": 'scenario = "small.toml"\n[[sweep]]\nkey = "seed"\nvalues = []\n',
    "no scenario": '[[sweep]]\nkey = "seed"\nvalues = [1]\n',
    "missing scenario file": 'scenario = "none.toml"\n',
    "unknown field": 'scenario = "small.toml"\nsweeps = []\n',
}


@pytest.mark.parametrize("case", sorted(BAD_EXPERIMENTS))
def test_a_bad_experiment_raises_the_cli_message(cli, small, tmp_path, case):
    p = tmp_path / "exp.toml"
    p.write_text(BAD_EXPERIMENTS[case])
    code, _, err = run_cli(cli, "sweep", p, "-o", tmp_path / "out", "--no-progress")
    assert code == 2, err
    with pytest.raises(flashmux.ConfigError) as e:
        flashmux.sweep(str(p), progress=False)
    assert str(e.value) == cli_error(err)


def test_an_unknown_bundled_experiment(cli, tmp_path):
    code, _, err = run_cli(cli, "reproduce", "paper-z", "-o", tmp_path)
    assert code == 2
    with pytest.raises(flashmux.ConfigError) as e:
        flashmux.reproduce("paper-z", output_dir=tmp_path)
    assert str(e.value) == cli_error(err)


def test_wrong_arguments_are_python_errors(small):
    with pytest.raises(TypeError, match="a file path, a dict or a flashmux.Scenario"):
        flashmux.run(42)
    with pytest.raises(ValueError, match="executor: 'dask'"):
        flashmux.sweep(base=small, seeds=[1], executor="dask")
    with pytest.raises(TypeError, match="either an experiment file, or base="):
        flashmux.sweep("x.toml", base=small)
    with pytest.raises(TypeError, match="needs an experiment file or base="):
        flashmux.sweep()
    with pytest.raises(ValueError, match="workers: 0"):
        flashmux.sweep(base=small, seeds=[1], workers=0)
    with pytest.raises(flashmux.ConfigError, match="label 'seed' is already used"):
        flashmux.sweep(base=small, grid={"seed": [1, 2]}, seeds=[3])


def test_exceptions_are_one_family():
    assert issubclass(flashmux.ConfigError, flashmux.FlashmuxError)
    assert issubclass(flashmux.SimulationError, flashmux.FlashmuxError)
    assert flashmux.ConfigError.__module__ == "flashmux._native"

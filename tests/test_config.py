"""Config errors stop with one line naming the key; tables decide the runs."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nmtbench import config as nmtconfig
from nmtbench.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "config" / "schema.yaml"


@pytest.fixture
def cfg():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_default_config_is_valid(cfg):
    nmtconfig.check(cfg, SCHEMA)


@pytest.mark.parametrize("mutate, message", [
    (lambda c: c["experiments"]["transformer-tiny"].update(max_epochs="ten"),
     "config key 'experiments.transformer-tiny.max_epochs': 'ten' is not of type 'integer'"),
    (lambda c: c.pop("seeds"), "config key 'seeds' is missing"),
    (lambda c: c["datasets"]["toy"].pop("lowercase"),
     "config key 'datasets.toy.lowercase' is missing"),
    (lambda c: c["experiments"]["transformer-tiny"].update(method="bert-magic"),
     "config key 'experiments.transformer-tiny.method': unknown method 'bert-magic'"),
    (lambda c: c["experiments"]["transformer-tiny"].update(max_epoch=3),
     "config key 'experiments.transformer-tiny.max_epoch' is not a setting"),
    (lambda c: c.update(tables=["nope"]), "config key 'tables': unknown table 'nope'"),
    (lambda c: c["table_definitions"]["toy.baseline"]["rows"].append("ghost"),
     "config key 'table_definitions.toy.baseline.rows': unknown experiment 'ghost'"),
    (lambda c: c["decode"].update(lenpen_form="linear"), "config key 'decode.lenpen_form'"),
])
def test_invalid_config_names_the_key(cfg, mutate, message):
    bad = copy.deepcopy(cfg)
    mutate(bad)
    with pytest.raises(InputError) as err:
        nmtconfig.check(bad, SCHEMA)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_snakemake_prints_one_line_for_a_bad_config(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--directory", str(tmp_path),
         "--snakefile", str(ROOT / "Snakefile"), "--configfile", str(ROOT / "config/config.yaml"),
         "--config", "seeds=oops"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "config" in line]
    assert lines == ["config error: config key 'seeds': 'oops' is not of type 'array'"]


def test_requested_tables_decide_the_runs(cfg):
    assert nmtconfig.requested_runs(cfg) == [("toy", "transformer-tiny", 1),
                                             ("toy", "transformer-tiny-500", 1)]
    cfg["table_definitions"]["small"] = {"caption": "x", "dataset": "toy",
                                         "rows": ["transformer-tiny-500"]}
    cfg["tables"] = ["small"]
    cfg["seeds"] = [1, 2]
    assert nmtconfig.requested_runs(cfg) == [("toy", "transformer-tiny-500", 1),
                                             ("toy", "transformer-tiny-500", 2)]
    cfg["tables"] = ["all"]
    assert len(nmtconfig.requested_runs(cfg)) == 4


def test_experiment_overrides_defaults(cfg):
    resolved = nmtconfig.experiment_config(cfg, "transformer-tiny-500", seed=7)
    assert resolved["train_pairs"] == 500 and resolved["seed"] == 7
    assert resolved["max_tokens"] == cfg["defaults"]["max_tokens"]
    assert nmtconfig.as_json(resolved) == nmtconfig.as_json(dict(reversed(resolved.items())))

"""The project's one YAML reader: YAML 1.2's core schema, where PyYAML reads YAML 1.1."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nmtbench.workflow.yaml_reader import load_yaml

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "config" / "smoke.yaml"

# (a plain scalar, as YAML 1.2 reads it, as PyYAML's YAML 1.1 does)
SCALARS = [
    ("010", 10, 8), ("08", 8, "08"), ("0o10", 8, "0o10"), ("0x10", 16, 16), ("-7", -7, -7),
    ("0b11", "0b11", 3), ("1_000", "1_000", 1000), ("1:30", "1:30", 90),
    ("1e-3", 0.001, "1e-3"), ("1.0e3", 1000.0, "1.0e3"), ("1.0e+3", 1000.0, 1000.0),
    (".5", 0.5, 0.5), ("yes", "yes", True), ("no", "no", False), ("on", "on", True),
    ("off", "off", False), ("true", True, True), ("False", False, False),
    ("2020-01-01", "2020-01-01", yaml.safe_load("2020-01-01")), ("~", None, None),
    ("null", None, None), ("=", "=", None),
]


@pytest.mark.parametrize(("text", "read", "yaml11"), SCALARS, ids=[s[0] for s in SCALARS])
def test_plain_scalars_are_read_as_yaml_1_2_reads_them(text, read, yaml11):
    assert load_yaml(f"key: {text}") == {"key": read}
    if text != "=":  # PyYAML's safe loader has no constructor for YAML 1.1's value key
        assert yaml.safe_load(f"key: {text}") == {"key": yaml11}


def test_quoted_and_tagged_scalars_are_as_written():
    assert load_yaml("a: '010'\nb: !!str yes\nc: !!int '12'\nd: [.inf, -.inf]") == {
        "a": "010", "b": "yes", "c": 12, "d": [float("inf"), float("-inf")]}
    with pytest.raises(yaml.YAMLError, match="'twelve' is not an integer"):
        load_yaml("a: !!int twelve")
    with pytest.raises(yaml.YAMLError, match="python/tuple"):
        load_yaml("a: !!python/tuple [1, 2]")


def test_a_key_twice_is_refused_and_a_merge_may_be_overridden():
    with pytest.raises(yaml.YAMLError, match="key 'a' is written twice in one mapping"):
        load_yaml("a: 1\nb: 2\na: 3\n")
    assert load_yaml("d: &d {x: 1, y: 2}\ne: {<<: *d, x: 3}") == {
        "d": {"x": 1, "y": 2}, "e": {"x": 3, "y": 2}}


def test_every_yaml_file_the_project_reads_means_the_same_to_yaml_1_1():
    """The configs, paper files and schemas hold no scalar the two readers read otherwise:
    the files mean the same to anyone reading them with PyYAML (the tests among them)."""
    files = [*sorted((ROOT / "config").glob("*.yaml")), *sorted((ROOT / "papers").glob("*.yaml"))]
    assert len(files) > 10
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert load_yaml(text) == yaml.safe_load(text), path


def dry_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--directory", str(tmp_path),
         "--snakefile", str(ROOT / "Snakefile"), "--configfile", str(SMOKE), *args],
        capture_output=True, text=True, timeout=120)


def test_the_workflow_runs_on_its_config_as_yaml_1_2_reads_it(tmp_path):
    """Snakemake reads config files as YAML 1.1: seed 010 would be seed 8 and a learning rate
    1e-3 text. The workflow plans from the files as nmtbench reads them, with --config's
    values over them."""
    over = tmp_path / "over.yaml"
    over.write_text("seeds: [010]\ntables: [toyworld.table1]\ndefaults: {lr: 1e-3}\n")
    result = dry_run(tmp_path, str(over))
    assert result.returncode == 0, result.stderr
    assert "/seed10/" in result.stdout and "/seed8/" not in result.stdout
    result = dry_run(tmp_path, str(over), "--config", "seeds=[3]")
    assert result.returncode == 0, result.stderr
    assert "/seed3/" in result.stdout and "/seed10/" not in result.stdout
    over.write_text("datasets: {toy: {lowercase: no}}\n")
    result = dry_run(tmp_path, str(over))
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "config error: config key 'datasets.toy.lowercase': 'no' is not of type 'boolean' "
        "(the workflow reads YAML 1.2, where a boolean is true or false and other words are "
        "text)")


def test_a_key_twice_in_a_schema_is_one_line_naming_it(tmp_path):
    """The schemas are read as the configs and paper files are: edited to hold a key twice
    (a method added below an entry of the same name), one line names the file and line."""
    from nmtbench.errors import InputError
    from nmtbench.workflow.config import check, load_config
    from nmtbench.workflow.papers import load_catalogue

    papers = shutil.copytree(ROOT / "papers", tmp_path / "papers")
    with (papers / "schema.yaml").open("a") as schema:
        schema.write("x-note: 1\nx-note: 2\n")
    lines = (papers / "schema.yaml").read_text().count("\n")
    with pytest.raises(InputError, match=f"^{papers}/schema.yaml: line {lines}: invalid YAML "
                       r"\(key 'x-note' is written twice in one mapping\)$"):
        load_catalogue(papers)
    config_schema = tmp_path / "schema.yaml"
    config_schema.write_text((ROOT / "config" / "schema.yaml").read_text() + "$id: a\n$id: b\n")
    lines = config_schema.read_text().count("\n")
    with pytest.raises(InputError, match=f"^{config_schema}: line {lines}: invalid YAML "
                       r"\(key '\$id' is written twice in one mapping\)$"):
        check(load_config([ROOT / "config" / "config.yaml"]), config_schema)

"""Workflow configuration: schema validation, cross-references, and experiment resolution.

`rules/common.smk` calls `check` before building the DAG, so a bad config stops with one line
naming the key; the other functions turn the requested tables into the runs they need.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from nmtbench.errors import InputError
from nmtbench.trainer import TrainConfig

SETTINGS_OUTSIDE_TRAINER = {"method", "decode", "pretrained"}


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def validate(config: dict[str, Any], schema_path: str | Path) -> None:
    """Check the config against the JSON schema; the first error becomes a one-line message."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        return
    if error.validator == "required":
        missing = error.message.split("'")[1]
        key = f"{_key_path(error)}.{missing}" if error.absolute_path else missing
        raise InputError(f"config key '{key}' is missing")
    if error.validator == "additionalProperties":
        raise InputError(f"config key '{_key_path(error)}': {error.message}")
    raise InputError(f"config key '{_key_path(error)}': {error.message}")


def requested_tables(config: dict[str, Any]) -> list[str]:
    tables = config["tables"]
    return sorted(config["table_definitions"]) if tables == ["all"] else list(tables)


def check(config: dict[str, Any], schema_path: str | Path) -> None:
    """Schema, then references between sections: tables -> experiments/datasets -> methods."""
    from methods import METHODS

    validate(config, schema_path)
    trainer_keys = {f.name for f in fields(TrainConfig)}
    for name, experiment in config["experiments"].items():
        method = experiment["method"]
        if method not in METHODS:
            raise InputError(f"config key 'experiments.{name}.method': unknown method "
                             f"{method!r}; known: {', '.join(sorted(METHODS))}")
        known = trainer_keys | SETTINGS_OUTSIDE_TRAINER | METHODS[method].config_keys()
        for key in list(config["defaults"]) + list(experiment):
            if key not in known:
                where = "defaults" if key in config["defaults"] else f"experiments.{name}"
                raise InputError(f"config key '{where}.{key}' is not a setting of the trainer "
                                 f"or of method {method!r}")
    for table in requested_tables(config):
        if table not in config["table_definitions"]:
            raise InputError(f"config key 'tables': unknown table {table!r}; defined: "
                             f"{', '.join(sorted(config['table_definitions']))}")
    for table, spec in config["table_definitions"].items():
        if spec["dataset"] not in config["datasets"]:
            raise InputError(f"config key 'table_definitions.{table}.dataset': unknown "
                             f"dataset {spec['dataset']!r}")
        for row in spec["rows"]:
            if row not in config["experiments"]:
                raise InputError(f"config key 'table_definitions.{table}.rows': unknown "
                                 f"experiment {row!r}")


def requested_runs(config: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(dataset, experiment, seed) of every run the requested tables need, without repeats."""
    runs = {(spec["dataset"], row, seed)
            for spec in (config["table_definitions"][t] for t in requested_tables(config))
            for row in spec["rows"] for seed in config["seeds"]}
    return sorted(runs)


def experiment_config(config: dict[str, Any], experiment: str, seed: int) -> dict[str, Any]:
    """The defaults overridden by the experiment's own settings, with the run's seed."""
    merged = {**config["defaults"], **config["experiments"][experiment], "seed": seed}
    merged.pop("decode", None)
    return merged


def decode_config(config: dict[str, Any], experiment: str) -> dict[str, Any]:
    return {**config["decode"], **config["experiments"][experiment].get("decode", {})}


def as_json(obj: Any) -> str:
    """Canonical JSON: the same config always gives the same string (no spurious reruns)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))

"""The resolved settings a generated results file was made with (results/parity.md,
benchmarks.md, gpu.md, and every report's tables.md): each writes them under a "Settings"
heading, and tests/benchmarks/test_recorded_settings.py reads them back and resolves the same
experiments from today's config files (tests/helpers/recorded_settings_check.py), so that a
committed file no longer describing today's default fails the suite instead of being read as
if it did."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nmtbench.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Settings"


def _plan(configs: list[str]):
    from nmtbench.workflow.config import check, load_config

    return check(load_config([ROOT / c for c in configs]), ROOT / "config" / "schema.yaml",
                 ROOT / "papers")


def trained_in(configs: list[str], dataset: str, run_dirs: Iterable[str]
               ) -> list[tuple[str, str]]:
    """(dataset, experiment) trained in each of `run_dirs` (`results/runs/<dataset>/<run>/
    seed<n>`) by `configs`: the first experiment of those sharing the run."""
    plan, found = _plan(configs), []
    for run_dir in run_dirs:
        name = Path(run_dir).parts[-2]
        for experiment in plan.experiments:
            try:
                cell = plan.run_cell(dataset, experiment, "recorded settings")
            except InputError:  # an experiment this dataset cannot run
                continue
            if cell.status == "ok" and Path(cell.run_dir(1)).parts[-2] == name:
                found.append((dataset, experiment))
                break
        else:
            raise ValueError(f"{run_dir}: no experiment of {configs} trains this run")
    return found


def resolve(configs: Iterable[str], cells: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """What `configs` (paths relative to the repository, merged in order) make of each
    (dataset, experiment): its training settings (without a seed) and its decoding settings."""
    configs = list(configs)
    return of_plan(_plan(configs), configs, cells)


def of_plan(plan, configs: list[str], cells: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """`resolve`'s record from a plan already made of `configs` (the report's)."""
    return {"configs": configs, "experiments": {
        f"{dataset}/{experiment}": {
            "train": plan.train_settings(dataset, experiment),
            "decode": dataclasses.asdict(plan.decode_settings(dataset, experiment))}
        for dataset, experiment in cells}}


INTRO = ("The settings the config files resolved for the experiments measured here when this "
         "file was made (`nmtbench.workflow.recorded_settings`); the test suite fails once they "
         "resolve otherwise, until this file is made again.")


def markdown(recorded: dict[str, Any], changed: str = "", intro: str = INTRO) -> list[str]:
    """The section that records `recorded` (from `resolve`); `changed` says what the benchmark
    set differently on top of them, if anything."""
    return [HEADING, "", intro + (f" {changed}" if changed else ""),
            "", "```json", *_compact(recorded), "```", ""]


def _compact(recorded: dict[str, Any]) -> list[str]:
    """`recorded` as JSON with one experiment a line."""
    rows = [f"  {json.dumps(name)}: {json.dumps(value, sort_keys=True)}"
            for name, value in sorted(recorded["experiments"].items())]
    return [f'{{"configs": {json.dumps(recorded["configs"])},', ' "experiments": {',
            *[row + "," for row in rows[:-1]], *rows[-1:], " }}"]


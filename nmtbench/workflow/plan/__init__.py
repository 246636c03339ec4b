"""From the requested tables and figures to the files that fill them: the workflow's plan.

A table cell names (paper dataset, experiment, split, metric). The config maps the paper's
dataset onto a prepared one (`dataset_map`; the embedded default maps every paper dataset onto
the toy world) and may adapt experiments per dataset (`datasets.<d>.overrides`, keyed by
method: the toy world shrinks every Transformer to `tiny`). Two consequences keep the plan small:

- A training run is identified by what it trains. Experiments whose resolved training settings
  are equal on a dataset share one run directory, named after the plainest experiment (fewest
  settings of its own) that asks for those settings itself, i.e. the dataset's overrides change
  none of the settings it names (`transformer-base`, not `bertkd-transformer-base`); the report
  says which cells share a run.
- Decoding is identified by its settings (`DecodeSettings.tag`), so experiments that differ
  only in beam or length penalty decode the same trained model twice instead of training it
  twice.

A run may train with other runs' outputs (`RunInput`): a teacher's translations
(`sequence_distillation`), a reverse model's back-translations (`bt_sentences`), another run's
checkpoint (`init_from`, `features_from`).

Cells whose method is not implemented (or is `external`, quoted by the paper from other work)
need no files; the report shows them as such.
"""

from __future__ import annotations

from typing import Any

from nmtbench.errors import InputError
from nmtbench.workflow.method_registry import MethodInfo
from nmtbench.workflow.papers import EXTERNAL, Catalogue
from nmtbench.workflow.plan.cells import (
    NOT_IMPLEMENTED,
    Cell,
    bootstrap_file,
    buckets_file,
    generated,
    latency_file,
    tested_against,
    toy_world,
)
from nmtbench.workflow.plan.columns import ReportCells
from nmtbench.workflow.plan.inputs import RunInputPlanning
from nmtbench.workflow.plan.requests import Requests
from nmtbench.workflow.plan.runs import RunSharing
from nmtbench.workflow.plan.settings import ExperimentSettings
from nmtbench.workflow.plan.targets import Targets

__all__ = ["EXTERNAL", "NOT_IMPLEMENTED", "Cell", "Plan", "bootstrap_file", "buckets_file",
           "generated", "latency_file", "tested_against", "toy_world"]


class Plan(Requests, ExperimentSettings, RunSharing, RunInputPlanning, Targets, ReportCells):
    """The requested tables/figures of one config, resolved against the paper catalogue: one
    object over the config, the catalogue and the implemented methods, made of parts with one
    job each (this package's modules), which call each other through it."""

    def __init__(self, config: dict[str, Any], catalogue: Catalogue,
                 implemented: dict[str, MethodInfo]) -> None:
        """`implemented`: each implemented method, as config/schema.yaml describes it."""
        self.config = config
        self.catalogue = catalogue
        self.implemented = implemented
        self.experiments = _merge_experiments(catalogue.experiments,
                                              config.get("experiments", {}))
        self.seeds: list[int] = [int(s) for s in config["seeds"]]


def _merge_experiments(papers: dict[str, dict], config: dict[str, dict]) -> dict[str, dict]:
    """The papers' experiments, extended and overridden key by key by the config's."""
    merged = {name: dict(spec) for name, spec in papers.items()}
    for name, spec in config.items():
        base = merged.get(name, {})
        decode = {**base.get("decode", {}), **spec.get("decode", {})}
        merged[name] = {**base, **spec, **({"decode": decode} if decode else {})}
        if "method" not in merged[name]:
            raise InputError(f"config key 'experiments.{name}.method' is missing (the name is "
                             "not an experiment of any paper, so it needs a method)")
    return merged

"""Cells: where one (row, column) of a table or one point of a figure comes from, the run
files each reads, and whether an experiment is implemented."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nmtbench import layout
from nmtbench.workflow.method_registry import MethodInfo
from nmtbench.workflow.metric_registry import METRICS

NOT_IMPLEMENTED = "not implemented"


# Settings that describe an experiment but do not change its training.
NOT_TRAINING = {"description", "decode"}


# An experiment trained with a published back-translated corpus
# (`published_back_translations: true`, e.g.
# Caswell et al.'s 24M WMT14 pairs) is not implemented unless its dataset holds that corpus;
# back-translating in the DAG is `bt_sentences`. A method's own setting values that no code
# serves are marked `x-not-built` in its schema entry (`MethodInfo.not_built`).
def not_built(spec: dict[str, Any], info: MethodInfo) -> bool:
    """Whether an experiment uses a setting value no code serves yet."""
    return bool(spec.get("published_back_translations")) or any(
        spec.get(key) in values for key, values in info.not_built.items())


@dataclass(frozen=True)
class Cell:
    """Where one (row, column) of a table or one point/series of a figure comes from."""

    dataset: str  # the configured dataset the paper's dataset maps to
    experiment: str  # as the paper names it
    status: str  # "ok", NOT_IMPLEMENTED or EXTERNAL
    run: str | None = None  # the training run's name (shared between identical experiments)
    tag: str | None = None  # the decoding settings

    def file(self, template: str, seed: int | str, **values: Any) -> str:
        """A layout template of this cell's run and decoding, for one seed."""
        return template.format(dataset=self.dataset, run=self.run, seed=seed, tag=self.tag,
                               **values)

    def run_dir(self, seed: int | str) -> str:
        return self.file(layout.RUN, seed)


def generated(datasets: dict[str, Any], name: str) -> bool:
    """Is the dataset a toy world, or one read the other way round? (It then has monolingual
    text of its own on both sides.)"""
    spec = datasets[name]
    return "toyworld" in (spec["kind"], datasets.get(spec.get("of"), {}).get("kind"))


def toy_world(datasets: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The toy world's settings and sizes of a toy-world dataset, or of the one a reversed
    dataset reads the other way round; None for real data."""
    spec = datasets[name]
    return spec.get("world") or datasets.get(spec.get("of"), {}).get("world")


def tested_against(cell: Cell, baseline: Cell | None) -> bool:
    """Is a significance test of the cell against the baseline's meaningful? Not for the
    baseline's own run, nor across datasets (their test sets may differ in content or order)."""
    return baseline is not None and baseline.dataset == cell.dataset and (
        (baseline.run, baseline.tag) != (cell.run, cell.tag))


def latency_file(cell: Cell, baseline: Cell | None, seed: int) -> str:
    """The run's latency record: measured with its table's baseline in one job (the speedup),
    or alone when it is the baseline or the table has none."""
    if baseline is None or (baseline.run, baseline.tag) == (cell.run, cell.tag):
        return cell.file(layout.LATENCY, seed)
    return cell.file(layout.LATENCY_VS, seed, baseline=baseline.run, btag=baseline.tag)


def bootstrap_file(cell: Cell, baseline: Cell, split: str, metric: str, seed: int) -> str:
    """The paired bootstrap that marks the cell's `metric` against the baseline's."""
    return cell.file(layout.BOOTSTRAP, seed, split=split, score=METRICS[metric].significance,
                     baseline=baseline.run,
                     btag=baseline.tag)


def buckets_file(cell: Cell, split: str, cutoffs: list[int], seed: int) -> str:
    return cell.file(layout.BUCKETS, seed, split=split,
                     cutoffs="-".join(str(c) for c in cutoffs))

"""The files the requested tables and figures read: rule all's inputs."""

from __future__ import annotations

from nmtbench import layout
from nmtbench.data.recipes import OPTIONAL_SPLITS, optional_splits
from nmtbench.data.toyworld import size_key
from nmtbench.errors import InputError
from nmtbench.workflow import run_inputs
from nmtbench.workflow.metric_registry import LATENCY_WARMUP, METRICS
from nmtbench.workflow.papers import Figure
from nmtbench.workflow.plan.cells import (
    Cell,
    bootstrap_file,
    buckets_file,
    latency_file,
    tested_against,
    toy_world,
)


class Targets:
    """A part of `Plan`: every run output the requested items need."""

    def pretrained_targets(self) -> list[str]:
        """The names of the checkpoints pre-trained in the DAG that the requested items' runs,
        and the runs they learn from, load (the report shows how well they learned)."""
        pretraining = self.config.get("pretraining", {})
        return sorted({name for dataset, run in self.trained_runs()
                       for name in [*self.checkpoints(dataset, run).values(),
                                    *(self.vocabulary(dataset, run, side)[0]
                                      for side in ("src", "tgt"))]
                       if name in pretraining})

    def _check_split(self, dataset: str, split: str, where: str) -> None:
        """Every dataset makes valid and test; an optional split only some (a toy world with
        its size set, a recipe with parts for it)."""
        if split in OPTIONAL_SPLITS and split not in optional_splits(dataset,
                                                                     self.config["datasets"]):
            raise InputError(f"{where}: dataset {dataset!r} makes no split {split!r} (a toy "
                             f"world makes it with world.{size_key(split)}; a real "
                             "dataset, where its recipe has it)")

    def _check_latency(self, dataset: str, where: str) -> None:
        """A latency job times `analysis.latency_sentences` test sentences after its warm-up:
        a toy world's test set, known now, must hold them (a real one's is checked in the
        job). Fewer timed would be a record the report leaves out as timed otherwise."""
        datasets = self.config["datasets"]
        world = toy_world(datasets, dataset)
        wanted = self.config["analysis"]["latency_sentences"]
        if world is not None and LATENCY_WARMUP + wanted > world["test_pairs"]:
            raise InputError(f"config key 'analysis.latency_sentences': {where} times {wanted} "
                             f"test sentences of dataset {dataset!r} after {LATENCY_WARMUP} "
                             f"warm-up ones, more than its {world['test_pairs']} (config key "
                             f"'datasets.{datasets[dataset].get('of', dataset)}.world."
                             "test_pairs')")

    def targets(self) -> list[str]:
        """Every run output the requested tables and figures read (rule all's inputs)."""
        files: set[str] = set()
        for table in self.tables:
            baseline = self._baseline_cells(table)
            for _, j, cell in self.table_cells(table):
                if cell.status != "ok":
                    continue
                col = table.columns[j]
                self._check_split(cell.dataset, col.split, f"{table.name} column {col.key!r}")
                if METRICS[col.metric].source == "latency":
                    self._check_latency(cell.dataset, f"{table.name} column {col.key!r}")
                for seed in self.seeds:
                    base = baseline.get(j)
                    files.update(self.cell_files(cell, col.split, col.metric, seed, base))
                    if METRICS[col.metric].significance and tested_against(cell, base):
                        files.add(bootstrap_file(cell, base, col.split, col.metric, seed))
        for claim in self.claims:  # a claim between two rows: their own significance test
            for (col, *_), cell, other in self.claim_cells(claim):
                if (other is not None and METRICS[col.metric].significance
                        and cell.status == other.status == "ok" and tested_against(cell, other)):
                    files.update(bootstrap_file(cell, other, col.split, col.metric, seed)
                                 for seed in self.seeds)
        for figure in self.figures:
            for cell in self.figure_cells(figure):
                if cell.status != "ok":
                    continue
                self._check_split(cell.dataset, figure.split, figure.name)
                if any(METRICS[m].source == "latency" for m in
                       filter(None, (figure.spec.get("y"), figure.spec.get("y2")))):
                    self._check_latency(cell.dataset, figure.name)
                for seed in self.seeds:
                    files.update(self.figure_files(figure, cell, seed))
        for kind in run_inputs.KINDS:  # what the report shows of the runs they learn from
            files |= kind.report_files(self)
        return sorted(files)

    @staticmethod
    def cell_files(cell: Cell, split: str, metric: str, seed: int,
                   baseline: Cell | None = None) -> list[str]:
        if METRICS[metric].source == "latency":
            return [latency_file(cell, baseline, seed)]
        return [cell.file(layout.METRICS, seed, split=split)]

    @staticmethod
    def figure_files(figure: Figure, cell: Cell, seed: int) -> list[str]:
        if figure.kind == "curve":
            return [cell.file(layout.TRAIN_SUMMARY, seed)]
        if figure.kind == "buckets":
            return [buckets_file(cell, figure.split, figure.spec["bucket_cutoffs"], seed)]
        files = [cell.file(layout.METRICS, seed, split=figure.split)]
        for metric in filter(None, (figure.spec["y"], figure.spec.get("y2"))):
            files += Targets.cell_files(cell, figure.split, metric, seed)
        return files

    def figure_outputs(self) -> list[str]:
        """The report's figures: the requested ones, then each requested table's validation
        curves (drawn from the training logs of the runs its cells' files were made by)."""
        names = [f.name for f in self.figures] + [layout.CURVES_FIGURE.format(table=t.name)
                                                  for t in self.tables]
        return [layout.FIGURE.format(name=name, ext=ext) for name in names
                for ext in ("png", "pdf")]

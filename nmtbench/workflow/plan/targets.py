"""The files the requested tables and figures read: rule all's inputs."""

from __future__ import annotations

from nmtbench import layout
from nmtbench.data.recipes import OPTIONAL_SPLITS, optional_splits
from nmtbench.data.toyworld import size_key
from nmtbench.errors import InputError
from nmtbench.workflow.metric_registry import METRICS
from nmtbench.workflow.papers import Figure
from nmtbench.workflow.plan.cells import (
    Cell,
    bootstrap_file,
    buckets_file,
    latency_file,
    tested_against,
)


class Targets:
    """A part of `Plan`: every run output the requested items need."""

    def pretrained_targets(self) -> list[str]:
        """The names of the checkpoints pre-trained in the DAG that the requested items' runs
        load (the report shows how well they learned)."""
        pretraining = self.config.get("pretraining", {})
        runs = set(self.runs())
        todo = list(runs)
        while todo:  # and the runs they train with (a teacher, a warm start's parent)
            dataset, run = todo.pop()
            for run_input in self.run_inputs(dataset, run).values():
                cell = run_input.cell
                if cell is not None and (cell.dataset, cell.run) not in runs:
                    runs.add((cell.dataset, cell.run))
                    todo.append((cell.dataset, cell.run))
        return sorted({name for dataset, run in runs
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
                for seed in self.seeds:
                    files.update(self.figure_files(figure, cell, seed))
        for dataset, run in self.runs():  # the report names each reverse model's test BLEU
            back_translation = self.back_translation(dataset, run)
            for seed in self.seeds if back_translation is not None else []:
                files.update(self.cell_files(back_translation.reverse, "test", "bleu_tokenized",
                                             seed))
        for teacher, top_k in self.teachers():  # and each teacher's accuracy and dump
            files.update(teacher.file(layout.SOFT_TARGETS_INFO, seed, top_k=top_k)
                         for seed in self.seeds)
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
        return [layout.FIGURE.format(name=f.name, ext=ext)
                for f in self.figures for ext in ("png", "pdf")]

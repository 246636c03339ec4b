"""What a run trains with from other runs and the data (distillation targets,
back-translations, soft targets, warm starts: one kind each, nmtbench.workflow.run_inputs),
and the runs the requested items learn from, however deep."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from nmtbench import layout
from nmtbench.workflow import run_inputs
from nmtbench.workflow.plan.cells import Cell
from nmtbench.workflow.pretrained_names import checkpoint_dir


class RunInputPlanning:
    """A part of `Plan`: the runs and files a run trains with."""

    def run_inputs(self, dataset: str, experiment: str) -> dict[str, run_inputs.RunInput]:
        """What the experiment's run trains with from other runs (and their data), by the
        name the trainer knows it by (nmtbench.workflow.run_inputs: one kind each)."""
        return run_inputs.resolve(self, dataset, experiment)

    def run_paths(self, dataset: str, run: str, seed: int | str) -> dict[str, Any]:
        """Every file a run reads, as the `train` rule passes them and its config.json records
        them (`RunPaths.as_record`): a run directory recording others was not trained by the
        workflow on this config (by hand, on other data, say)."""
        pretraining = self.config.get("pretraining")
        paths: dict[str, Any] = {
            f"{split}_{side}": layout.PREPARED.format(dataset=dataset, file=f"{split}.{side}")
            for split in ("train", "valid") for side in ("src", "tgt")}
        for side in ("src", "tgt"):
            name, tokenizer_side = self.vocabulary(dataset, run, side)
            paths[f"{side}_tokenizer"] = (
                layout.TOKENIZER_DIR.format(dataset=dataset, side=tokenizer_side)
                if name is None else checkpoint_dir(name, pretraining))
        paths["pretrained"] = {role: checkpoint_dir(name, pretraining)
                               for role, name in self.checkpoints(dataset, run).items()}
        paths["inputs"] = {name: given.path(seed)
                           for name, given in self.run_inputs(dataset, run).items()}
        return paths

    def trained_summaries(self) -> list[str]:
        """The train_summary.json of every run the requested items read, however deep, at the
        seeds they read it (a parent's `seed_offset` on): rule all asks for them, so that one
        deleted by hand is made again (Snakemake remakes a missing file only where something
        asks for it, not below outputs that are up to date)."""
        todo = [(c.dataset, str(c.run), seed) for c in self.cells() if c.run is not None
                for seed in self.seeds]
        found: set[tuple[str, str, int]] = set()
        while todo:
            dataset, run, seed = todo.pop()
            if (dataset, run, seed) not in found:
                found.add((dataset, run, seed))
                todo += [(given.cell.dataset, str(given.cell.run), seed + given.seed_offset)
                         for given in self.run_inputs(dataset, run).values()
                         if given.cell is not None]
        return sorted(layout.TRAIN_SUMMARY.format(dataset=d, run=r, seed=s)
                      for d, r, s in found)

    def trained_runs(self) -> list[tuple[str, str]]:
        """Every (dataset, run) the DAG trains: the requested tables' and figures' runs and
        each run they load or learn from, however deep."""
        return self._learned_from(self.runs(), lambda cell: (cell.dataset, str(cell.run)))

    def experiments_behind(self) -> list[tuple[str, str]]:
        """Every (dataset, experiment) the requested tables' and figures' numbers come from:
        their cells' and each one they load or learn from, however deep (a teacher by the
        experiment that names its decoding); the report records their settings."""
        return self._learned_from({(c.dataset, c.experiment) for c in self.cells()
                                   if c.run is not None},
                                  lambda cell: (cell.dataset, cell.experiment))

    def _learned_from(self, start: Iterable[tuple[str, str]],
                      name: Callable[[Cell], tuple[str, str]]) -> list[tuple[str, str]]:
        """`start`'s (dataset, experiment or run) pairs and, however deep, those of the
        cells their run inputs come from, as `name` names a cell."""
        found: set[tuple[str, str]] = set()
        todo = list(start)
        while todo:
            dataset, experiment = todo.pop()
            if (dataset, experiment) not in found:
                found.add((dataset, experiment))
                todo += [name(given.cell) for given in
                         self.run_inputs(dataset, experiment).values() if given.cell is not None]
        return sorted(found)

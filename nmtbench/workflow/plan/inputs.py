"""What a run trains with from other runs and the data: distillation targets,
back-translations, soft targets and warm starts (their kinds: nmtbench.workflow.run_inputs)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from nmtbench import layout
from nmtbench.errors import InputError
from nmtbench.workflow import run_inputs
from nmtbench.workflow.plan.cells import Cell, generated
from nmtbench.workflow.run_inputs import BackTranslation, RunInput


class RunInputPlanning:
    """A part of `Plan`: the runs and files a run trains with."""

    def distillation(self, dataset: str, experiment: str) -> Cell | None:
        """The teacher whose translations of the training set replace its targets, for a
        non-autoregressive experiment on a dataset with `seq_kd` (sequence-level KD)."""
        teacher = self.config["datasets"][dataset].get("seq_kd")
        if teacher is None or self.decoding(dataset, experiment) != "nat":
            return None
        return self.run_cell(dataset, teacher, f"config key 'datasets.{dataset}.seq_kd'")

    def back_translation(self, dataset: str, experiment: str) -> BackTranslation | None:
        """The back-translated pairs an experiment with `bt_sentences` adds to its training
        data, from the dataset's `back_translation` (reverse dataset and model)."""
        wanted = self.train_settings(dataset, experiment).get("bt_sentences", 0)
        if not wanted:
            return None
        spec = self.config["datasets"][dataset].get("back_translation")
        if spec is None:
            raise InputError(f"experiment {experiment!r} on dataset {dataset!r} adds {wanted} "
                             "back-translated sentences (bt_sentences), but config key "
                             f"'datasets.{dataset}.back_translation' is not set")
        reverse = self.run_cell(spec["reverse"], spec["model"],
                                f"config key 'datasets.{dataset}.back_translation'")
        return BackTranslation(reverse, self.back_translated_sentences(dataset))

    def target_monolingual(self, dataset: str) -> str:
        """The target-side monolingual text a dataset back-translates: a toy world's own (also
        read backwards), or the corpus prepared for a real dataset (beside `prepared/`, which
        `prepare` replaces as a whole)."""
        if generated(self.config["datasets"], dataset):
            return layout.PREPARED.format(dataset=dataset, file="mono.tgt")
        return layout.MONOLINGUAL.format(dataset=dataset)

    def parent_runs(self, dataset: str, experiment: str) -> dict[str, tuple[Cell, dict]]:
        """The runs whose checkpoints the experiment loads (`init_from`, and the method's other
        settings marked `x-parent-run`), by setting: each that experiment's run on the same
        dataset, and its spec (checkpoint best or last, seed_offset)."""
        settings = self.train_settings(dataset, experiment)
        info = self.implemented[self.experiments[experiment]["method"]]
        return {key: (self.run_cell(dataset, settings[key]["experiment"],
                                    f"experiment {experiment!r}, setting {key!r}"), settings[key])
                for key in info.parent_runs if settings.get(key)}

    def teacher_runs(self, dataset: str, experiment: str) -> dict[str, Cell]:
        """The teacher runs whose soft targets the experiment trains on, by setting (its
        method's settings marked `x-soft-targets`): each that experiment's run on the same
        dataset."""
        settings = self.train_settings(dataset, experiment)
        info = self.implemented[self.experiments[experiment]["method"]]
        return {key: self.run_cell(dataset, settings[key]["experiment"],
                                   f"experiment {experiment!r}, setting {key!r}")
                for key in info.teachers if settings.get(key)}

    def run_inputs(self, dataset: str, experiment: str) -> dict[str, RunInput]:
        """What the experiment's run trains with from other runs (and their data), by the
        name the trainer knows it by (nmtbench.workflow.run_inputs: one kind each)."""
        return run_inputs.resolve(self, dataset, experiment)

    def trained_runs(self) -> list[tuple[str, str]]:
        """Every (dataset, run) the DAG trains: the requested tables' and figures' runs and
        each run they load or learn from, however deep."""
        return self._learned_from(self.runs(), lambda cell: (cell.dataset, str(cell.run)))

    def experiments_behind(self) -> list[tuple[str, str]]:
        """Every (dataset, experiment) the requested tables' and figures' numbers come from:
        their cells' and each one they load or learn from, however deep (a teacher by the
        experiment that names its decoding); the report records their settings."""
        return self._learned_from({(c.dataset, c.experiment) for c in self._cells()
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

    def back_translated_sentences(self, dataset: str) -> int:
        """The largest `bt_sentences` of any implemented experiment on the dataset (fixed by
        the catalogue, so asking for another table never re-translates)."""
        return max(self.train_settings(dataset, e).get("bt_sentences", 0)
                   for e in self.experiments if self.status(e, dataset) == "ok")

    def teachers(self) -> list[tuple[Cell, int]]:
        """The teacher runs whose soft targets the requested runs train on, with the K of the
        dump (the report shows how well each teacher learned)."""
        found = {(i.cell, i.values["top_k"]) for dataset, run in self.runs()
                 for i in self.run_inputs(dataset, run).values() if i.name == "soft_targets"}
        return sorted(found, key=lambda pair: (pair[0].dataset, pair[0].run or "", pair[1]))

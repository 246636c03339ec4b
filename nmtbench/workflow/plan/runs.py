"""Runs named and shared: experiments whose resolved training settings are equal on a
dataset train one run, named after the plainest of them; cells of a table or figure."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from nmtbench.errors import InputError
from nmtbench.workflow.decode_settings import DecodeSettings
from nmtbench.workflow.plan.cells import NOT_TRAINING, Cell


class RunSharing:
    """A part of `Plan`: which run trains each experiment, and the cells that read it."""

    def cells(self) -> list[Cell]:
        """Every cell of the requested tables and figures."""
        return ([cell for table in self.tables for _, _, cell in self.table_cells(table)]
                + [cell for figure in self.figures for cell in self.figure_cells(figure)])

    def runs(self) -> list[tuple[str, str]]:
        """The (dataset, run) pairs the requested tables and figures train."""
        return sorted({(c.dataset, c.run) for c in self.cells() if c.run is not None})

    @cached_property
    def _run_names(self) -> dict[tuple[str, str], str]:
        """(dataset, experiment) -> the run directory name, for every implemented experiment."""
        names = {}
        for dataset in self.config["datasets"]:
            groups: dict[str, list[str]] = {}
            for experiment in self.experiments:
                if self.status(experiment, dataset) == "ok":
                    key = _canonical(self.train_settings(dataset, experiment))
                    groups.setdefault(key, []).append(experiment)
            for members in groups.values():
                literal = [e for e in members if self._asks_for_itself(dataset, e)]
                # the plainest experiment (fewest settings of its own) names the run
                run = min(literal or members, key=lambda e: (len(self.experiments[e]), e))
                names.update({(dataset, e): run for e in members})
        return names

    def _asks_for_itself(self, dataset: str, experiment: str) -> bool:
        """Do the dataset's overrides keep every training setting the experiment names itself?

        (They may fill in settings it leaves to the defaults: the smoke config's one-layer
        `tiny` Transformer is still named `transformer-tiny`, not after whichever member
        sorts first.)"""
        resolved = self.train_settings(dataset, experiment)
        return all(resolved.get(k) == v for k, v in self.experiments[experiment].items()
                   if k not in NOT_TRAINING)

    def cell(self, paper_dataset: str, experiment: str, where: str) -> Cell:
        """The cell of a paper's dataset (mapped onto a configured one) and experiment."""
        cell = self.run_cell(self.dataset(paper_dataset, where), experiment, where)
        if cell.status == "ok" and self.decoding(cell.dataset, experiment) == "none":
            raise InputError(f"{where}: experiment {experiment!r} is a teacher, never decoded "
                             "(decoding: none); show its students instead")
        return cell

    def run_cell(self, dataset: str, experiment: str, where: str) -> Cell:
        """The cell of a configured dataset and experiment."""
        status = self.status(experiment, dataset)
        if status != "ok":
            return Cell(dataset, experiment, status)
        settings = self.train_settings(dataset, experiment)
        for role, side in self.checkpoint_roles(experiment).items():
            if role not in settings:
                berts = self.side_berts(dataset, side)
                bert = (f"name one of the BERTs pre-trained on that side, {', '.join(berts)}"
                        if berts else "pre-train one BERT on that side: a 'pretraining' entry "
                        f"of model bert, dataset {dataset}, side {side}")
                raise InputError(f"{where}: experiment {experiment!r} on dataset {dataset!r} "
                                 f"names no {role} checkpoint (set it in the experiment, or "
                                 f"'datasets.{dataset}.checkpoints.{side}', or {bert})")
        spec = self.config["datasets"][dataset]
        if (settings.get("vocabulary") == "joint" and "joint" not in spec["vocab_size"]
                and "joint" not in spec.get("checkpoints", {})):
            raise InputError(f"{where}: experiment {experiment!r} reads a joint vocabulary; set "
                             f"config key 'datasets.{dataset}.vocab_size.joint' (or "
                             f"'datasets.{dataset}.checkpoints.joint')")
        return Cell(dataset, experiment, status, self._run_names[(dataset, experiment)],
                    self.decode_settings(dataset, experiment).tag)

    @cached_property
    def _decodes(self) -> dict[str, DecodeSettings]:
        return {settings.tag: settings
                for dataset in self.config["datasets"] for experiment in self.experiments
                if self.status(experiment, dataset) == "ok"
                for settings in [self.decode_settings(dataset, experiment)]}

    def decode_for_tag(self, tag: str) -> DecodeSettings:
        """The decoding settings a tag stands for (the rules only see the tag)."""
        return self._decodes[tag]

    def decode_batch_size(self, dataset: str, run: str, tag: str) -> int:
        """Sentences a decoding of `run` on `dataset` under `tag` takes at once: the fewest
        its experiments there ask for. The tag leaves the batch out (it does not change the
        hypotheses), so the same tag on another dataset or run may ask for another one: a
        smaller batch is what keeps a decoding within its memory."""
        sizes = [settings.batch_size for e in self.sharing(dataset, run)
                 for settings in [self.decode_settings(dataset, e)] if settings.tag == tag]
        return min(sizes, default=self.decode_for_tag(tag).batch_size)

    def sharing(self, dataset: str, run: str) -> list[str]:
        """The experiments trained by the run `run` on `dataset`."""
        return sorted(e for (d, e), r in self._run_names.items() if d == dataset and r == run)


def _canonical(settings: dict[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True)

"""Sequence-level knowledge distillation (Kim & Rush 2016): an autoregressive teacher's
translations of the training set replace its targets for every non-autoregressive run on a
dataset with `sequence_distillation`. The producing rule: `distill` (rules/decode.smk)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from nmtbench import layout
from nmtbench.errors import InputError
from nmtbench.workflow.run_inputs.kind import Data, RunInput, RunInputKind

if TYPE_CHECKING:
    from nmtbench.workflow.plan import Cell, Plan


def teacher_name(plan: Plan, dataset: str, experiment: str) -> str | None:
    """The experiment whose translations of the training set replace the experiment's targets
    on `dataset`: the dataset's teacher, for a non-autoregressive experiment."""
    name = plan.config["datasets"][dataset].get("sequence_distillation")
    return name if name is not None and plan.decoding(dataset, experiment) == "nat" else None


def teacher(plan: Plan, dataset: str, experiment: str) -> Cell | None:
    """The teacher's run (`teacher_name`)."""
    name = teacher_name(plan, dataset, experiment)
    return None if name is None else plan.run_cell(
        dataset, name, f"config key 'datasets.{dataset}.sequence_distillation'")


class SequenceDistillation(RunInputKind):
    names = ("distilled_targets",)

    def resolve(self, plan: Plan, dataset: str, experiment: str) -> list[RunInput]:
        cell = teacher(plan, dataset, experiment)
        return [] if cell is None else [RunInput("distilled_targets", cell,
                                                 layout.DISTILLED_TARGETS,
                                                 record=layout.DISTILLED_TARGETS_INFO)]

    def learned_from(self, plan: Plan, dataset: str, experiment: str,
                     where: Callable[[str, str, str], str]) -> list[tuple[str, str, str]]:
        name = teacher_name(plan, dataset, experiment)
        return [] if name is None else [
            (f"config key 'datasets.{dataset}.sequence_distillation'", dataset, name)]

    def check_config(self, plan: Plan) -> None:
        """A dataset's `sequence_distillation` is an implemented autoregressive experiment there."""
        for dataset, spec in plan.config["datasets"].items():
            name = spec.get("sequence_distillation")
            if name is not None and (name not in plan.experiments or plan.status(name) != "ok"
                                     or plan.decoding(dataset, name) != "at"):
                raise InputError(f"config key 'datasets.{dataset}.sequence_distillation': "
                                 f"{name!r} is not an implemented autoregressive experiment")

    def load_data(self, data: Data, inputs: Mapping[str, str]) -> None:
        data.replace_targets(inputs["distilled_targets"])

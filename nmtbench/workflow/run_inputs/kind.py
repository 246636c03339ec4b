"""What every run-input kind is: the files a run trains with that other runs or the data
provide (`RunInput`), and the questions the plan, the config check, the report and the trainer
ask of a kind (`RunInputKind`), answered by each kind in its own module of this package."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from nmtbench.records import Bounds
    from nmtbench.workflow.method_registry import MethodInfo
    from nmtbench.workflow.plan import Cell, Plan


@dataclass(frozen=True)
class RunInput:
    """A file a run trains with, passed to the trainer as `--input NAME=PATH`.

    `template` is formatted with the providing run's cell, the seed and `values`; the DAG
    waits for `dependency` (same formatting), or for the file itself when a rule makes it (a
    checkpoint is no rule's output: its run's train_summary.json is)."""

    name: str
    cell: Cell | None  # the run providing it; None: data (`template` is then a plain path)
    template: str
    dependency: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    seed_offset: int = 0  # the providing run's seed is the run's own plus this
    record: str | None = None  # the JSON beside it naming the training that made it

    def path(self, seed: int | str) -> str:
        return self._format(self.template, seed)

    def needs(self, seed: int | str) -> str:
        """The file the DAG waits for before the run trains."""
        return self._format(self.dependency or self.template, seed)

    def _format(self, template: str, seed: int | str) -> str:
        if self.cell is None:
            return template
        return self.cell.file(template, int(seed) + self.seed_offset if self.seed_offset
                              else seed, **self.values)


@dataclass(frozen=True)
class ReportSection:
    """A section of tables.md on the runs providing a kind's inputs: one row per (provider,
    seed), read from the JSON record each provider's rule writes (`record`, formatted with
    the provider's cell, seed and `values`); `columns` turns a record into the row's cells."""

    title: str
    prose: str
    providers: list[tuple[Cell, dict[str, Any]]]
    record: str
    keys: tuple[str, ...]  # what the record must hold (nmtbench.records.read_result)
    numbers: Mapping[str, Bounds]  # the numbers it must hold, and their bounds
    columns: Callable[[dict[str, Any]], dict[str, str]]


class Data(Protocol):
    """What data kinds ask of a run's pairs (nmtbench.training.training_data.TrainingData)."""

    def replace_targets(self, path: str) -> None: ...
    def add_back_translations(self, src_path: str, tgt_path: str) -> None: ...
    def attach_side_data(self, name: str, path: str) -> None: ...


class Weights(Protocol):
    """What weight kinds ask of the trainer (nmtbench.training.trainer.Trainer)."""

    def warm_start(self, name: str, path: str) -> None: ...


class RunInputKind:
    """One kind of run input. `names` are the `--input` names it provides (a warm start's
    are its method's settings naming parent runs). Every hook but `resolve` has a default
    that does nothing, so a kind answers only what concerns it."""

    names: ClassVar[tuple[str, ...]] = ()

    def provides(self, name: str, parent_runs: Iterable[str]) -> bool:
        return name in self.names

    def resolve(self, plan: Plan, dataset: str, experiment: str) -> list[RunInput]:
        """The run's inputs of this kind, each naming the run that provides it."""
        raise NotImplementedError

    def named_runs(self, plan: Plan, dataset: str, experiment: str) -> dict[str, str]:
        """The experiment's settings that name a providing run of this kind on the same
        dataset, with the experiment each names."""
        return {}

    def learned_from(self, plan: Plan, dataset: str, experiment: str,
                     where: Callable[[str, str, str], str]) -> list[tuple[str, str, str]]:
        """The (dataset, experiment) runs the experiment's run on `dataset` learns from through
        this kind, each with the config key naming it, as a message's prefix (`where` says
        where a setting was written); the config check follows them for cycles."""
        return [(f"{where(dataset, experiment, key)}.{key}.experiment'", dataset, parent)
                for key, parent in self.named_runs(plan, dataset, experiment).items()]

    def incompatible(self, parent: MethodInfo) -> str | None:
        """Why a run of the method `parent` cannot provide this kind (None: it can)."""
        return None

    def check_config(self, plan: Plan) -> None:
        """One line on what the config sets wrongly for this kind outside experiments'
        settings (a dataset's teacher, its back-translation)."""

    def report_files(self, plan: Plan) -> set[str]:
        """Files of the providing runs that the report reads (rule all waits for them)."""
        return set()

    def report_section(self, plan: Plan) -> ReportSection | None:
        """The report's section on this kind's providers, if it has one and they are run."""
        return None

    def check_given(self, settings: Mapping[str, Any], given: Mapping[str, str]) -> None:
        """One line when a run with these settings lacks an input of this kind it needs."""

    def load_data(self, data: Data, inputs: Mapping[str, str]) -> None:
        """Take in this kind's `inputs` (name -> path) before the first batch."""

    def load_weights(self, trainer: Weights, inputs: Mapping[str, str]) -> None:
        """Take in this kind's `inputs` when the run starts fresh (not when it resumes)."""


def providing_run(plan: Plan, dataset: str, experiment: str, key: str) -> Cell:
    """The run named by the experiment's setting `key` (`{experiment: ...}`) on `dataset`."""
    settings = plan.train_settings(dataset, experiment)
    return plan.run_cell(dataset, settings[key]["experiment"],
                         f"experiment {experiment!r}, setting {key!r}")


def marked_settings(plan: Plan, dataset: str, experiment: str,
                    keys: Iterable[str]) -> dict[str, str]:
    """Which of the settings `keys` the experiment sets on `dataset`, with the experiment
    each names."""
    settings = plan.train_settings(dataset, experiment)
    return {key: settings[key]["experiment"] for key in keys if settings.get(key)}

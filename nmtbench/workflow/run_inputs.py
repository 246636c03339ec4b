"""Run inputs: the files a run trains with that other runs or the data provide, one registered
kind each (`KINDS`).

A kind says how the plan finds what a run takes (`resolve`: the `RunInput`s, each naming the
run that provides it, its file and the file the DAG waits for, so the rule writing that file is
the one Snakemake runs), and how training takes it in (`load_data` on the run's pairs before they
are read, `load_weights` on the trainer when a run starts fresh), through their own operations, so
that this module stays free of torch. Which runs an experiment loads and which teachers it reads
are its method's settings (`MethodInfo.parent_runs`, `.teachers`); the trainer records the content
digest of every input (nmtbench.provenance), so that a resumed or decoded run refuses changed
inputs. A new kind is one class here, registered in `KINDS`, plus the rule writing its file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from nmtbench import layout
from nmtbench.errors import InputError

if TYPE_CHECKING:
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
class BackTranslation:
    """Where a run's back-translated pairs come from (Sennrich et al. 2016): the reverse-
    direction model `reverse` translates the first `sentences` lines of the dataset's
    target-side monolingual corpus into synthetic sources. One translation per dataset, as
    long as its largest `bt_sentences`: every run takes its own first lines."""

    reverse: Cell
    sentences: int

    def file(self, dataset: str, seed: int | str) -> str:
        return self.reverse.file(layout.BACKTRANSLATE, seed, forward=dataset,
                                 sentences=self.sentences)


class Data(Protocol):
    """What data kinds ask of a run's pairs (nmtbench.training.training_data.TrainingData)."""

    def replace_targets(self, path: str) -> None: ...
    def add_back_translations(self, src_path: str, tgt_path: str) -> None: ...
    def attach_side_data(self, name: str, path: str) -> None: ...


class Weights(Protocol):
    """What weight kinds ask of the trainer (nmtbench.training.trainer.Trainer)."""

    def warm_start(self, name: str, path: str) -> None: ...


class Kind:
    """One kind of run input. `names` are the `--input` names it provides (a warm start's
    are its method's settings naming parent runs)."""

    names: ClassVar[tuple[str, ...]] = ()

    def provides(self, name: str, parent_runs: Iterable[str]) -> bool:
        return name in self.names

    def resolve(self, plan: Plan, dataset: str, experiment: str) -> list[RunInput]:
        raise NotImplementedError

    def check_given(self, settings: Mapping[str, Any], given: Mapping[str, str]) -> None:
        """One line when a run with these settings lacks an input of this kind it needs."""

    def incompatible(self, parent: MethodInfo) -> str | None:
        """Why a run of the method `parent` cannot provide this kind (None: it can)."""
        return None

    def load_data(self, data: Data, inputs: Mapping[str, str]) -> None:
        """Take in this kind's `inputs` (name -> path) before the first batch."""

    def load_weights(self, trainer: Weights, inputs: Mapping[str, str]) -> None:
        """Take in this kind's `inputs` when the run starts fresh (not when it resumes)."""


class SequenceDistillation(Kind):
    """A teacher's translations of the training set replace its targets (sequence-level KD,
    Kim & Rush 2016) for a non-autoregressive experiment on a dataset with `seq_kd`."""

    names = ("train_tgt",)

    def resolve(self, plan: Plan, dataset: str, experiment: str) -> list[RunInput]:
        teacher = plan.distillation(dataset, experiment)
        return [] if teacher is None else [RunInput("train_tgt", teacher, layout.DISTILL,
                                                    record=layout.DISTILL_INFO)]

    def load_data(self, data: Data, inputs: Mapping[str, str]) -> None:
        data.replace_targets(inputs["train_tgt"])


class BackTranslated(Kind):
    """A reverse model's translations of target-side monolingual text (`bt_src`) and that
    text (`bt_tgt`), added to the training pairs: the first `bt_sentences` of them."""

    names = ("bt_src", "bt_tgt")

    def resolve(self, plan: Plan, dataset: str, experiment: str) -> list[RunInput]:
        back_translation = plan.back_translation(dataset, experiment)
        if back_translation is None:
            return []
        return [RunInput("bt_src", back_translation.reverse, layout.BACKTRANSLATE,
                         values={"forward": dataset, "sentences": back_translation.sentences},
                         record=layout.BACKTRANSLATE_INFO),
                RunInput("bt_tgt", None, plan.target_monolingual(dataset))]

    def check_given(self, settings: Mapping[str, Any], given: Mapping[str, str]) -> None:
        if settings.get("bt_sentences") and set(given) != set(self.names):
            raise InputError(f"bt_sentences is {settings['bt_sentences']} but no back-"
                             "translated data was given (--input bt_src=... --input "
                             "bt_tgt=...)")

    def load_data(self, data: Data, inputs: Mapping[str, str]) -> None:
        data.add_back_translations(inputs["bt_src"], inputs["bt_tgt"])


class SoftTargets(Kind):
    """A teacher run's top-K distributions at every position of the training targets, for a
    method with a setting marked `x-soft-targets`; its model takes them in
    (`Model.attach_side_data`)."""

    names = ("soft_targets",)

    def resolve(self, plan: Plan, dataset: str, experiment: str) -> list[RunInput]:
        info = plan.implemented[plan.experiments[experiment]["method"]]
        top_k = plan.train_settings(dataset, experiment).get("top_k", info.defaults.get("top_k"))
        return [RunInput("soft_targets", teacher, layout.SOFT_TARGETS, values={"top_k": top_k},
                         record=layout.SOFT_TARGETS_INFO)
                for key, teacher in plan.teacher_runs(dataset, experiment).items()]

    def incompatible(self, parent: MethodInfo) -> str | None:
        return None if parent.decodings == ("none",) else (
            "is not a teacher (an experiment whose method is trained to give soft targets "
            "and is never decoded)")

    def load_data(self, data: Data, inputs: Mapping[str, str]) -> None:
        data.attach_side_data("soft_targets", inputs["soft_targets"])


class WarmStart(Kind):
    """Another run's checkpoint (best or last, of the same seed or `seed_offset` on) whose
    weights initialise part of the model: `init_from`, and the method's other settings
    marked `x-parent-run` (the method's `parent_runs` say which weights go where)."""

    def provides(self, name: str, parent_runs: Iterable[str]) -> bool:
        return name in parent_runs

    def resolve(self, plan: Plan, dataset: str, experiment: str) -> list[RunInput]:
        return [RunInput(key, cell, layout.CHECKPOINT, layout.TRAIN_SUMMARY,
                         {"checkpoint": spec.get("checkpoint", "best")},
                         spec.get("seed_offset", 0))
                for key, (cell, spec) in plan.parent_runs(dataset, experiment).items()]

    def incompatible(self, parent: MethodInfo) -> str | None:
        """A teacher's weights fit no other model (a warm start that fills none of a
        model's weights is refused when training starts)."""
        return "is a teacher, whose weights no model loads" if parent.decodings == (
            "none",) else None

    def load_weights(self, trainer: Weights, inputs: Mapping[str, str]) -> None:
        for name, path in inputs.items():
            trainer.warm_start(name, path)


WARM_START_KIND, SOFT_TARGETS_KIND = WarmStart(), SoftTargets()
KINDS: tuple[Kind, ...] = (SequenceDistillation(), BackTranslated(), SOFT_TARGETS_KIND,
                          WARM_START_KIND)


def resolve(plan: Plan, dataset: str, experiment: str) -> dict[str, RunInput]:
    """Every input the experiment's run on `dataset` trains with, by name."""
    return {i.name: i for kind in KINDS for i in kind.resolve(plan, dataset, experiment)}


def by_kind(inputs: Mapping[str, str], parent_runs: Iterable[str],
            settings: Mapping[str, Any]) -> list[tuple[Kind, dict[str, str]]]:
    """A run's `--input`s grouped by their kind; an unknown name, or an input the settings
    need and the run was not given, is one line."""
    parent_runs = tuple(parent_runs)
    grouped: list[tuple[Kind, dict[str, str]]] = []
    for name in inputs:
        if not any(kind.provides(name, parent_runs) for kind in KINDS):
            known = sorted({n for kind in KINDS for n in kind.names} | set(parent_runs))
            raise InputError(f"unknown run input {name!r}; known: {', '.join(known)}")
    for kind in KINDS:
        mine = {n: p for n, p in inputs.items() if kind.provides(n, parent_runs)}
        kind.check_given(settings, mine)
        if mine:
            grouped.append((kind, mine))
    return grouped

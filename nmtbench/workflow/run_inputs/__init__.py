"""Run inputs: the files a run trains with that other runs or the data provide, one registered
kind each (`KINDS`), each kind in its own module of this package with everything about it: how
the plan finds what a run takes (`resolve`: the `RunInput`s, each naming the run that provides
it, its file and the file the DAG waits for, so the rule writing that file is the one Snakemake
runs), which runs can provide it (`incompatible`), its config checks, what the report reads and
shows of its providers, and how training takes it in (`load_data` on the run's pairs before
they are read, `load_weights` on the trainer when a run starts fresh), through their own
operations, so that this package stays free of torch.

Which runs an experiment loads and which teachers it reads are its method's settings
(`MethodInfo.parent_runs`, `.soft_targets_from`); the trainer records the content digest of
every input (nmtbench.provenance), so that a resumed or decoded run refuses changed inputs. A
new kind is one module here, registered in `KINDS`, plus the rule writing its file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from nmtbench.errors import InputError
from nmtbench.workflow.run_inputs.back_translation import BackTranslated
from nmtbench.workflow.run_inputs.kind import ReportSection, RunInput, RunInputKind
from nmtbench.workflow.run_inputs.parent_weights import ParentWeights
from nmtbench.workflow.run_inputs.sequence_distillation import SequenceDistillation
from nmtbench.workflow.run_inputs.soft_targets import SoftTargets

if TYPE_CHECKING:
    from nmtbench.workflow.plan import Plan

__all__ = ["KINDS", "ReportSection", "RunInput", "RunInputKind", "by_kind", "check_config",
           "resolve"]

KINDS: tuple[RunInputKind, ...] = (SequenceDistillation(), BackTranslated(), SoftTargets(),
                                   ParentWeights())


def resolve(plan: Plan, dataset: str, experiment: str) -> dict[str, RunInput]:
    """Every input the experiment's run on `dataset` trains with, by name."""
    return {i.name: i for kind in KINDS for i in kind.resolve(plan, dataset, experiment)}


def check_config(plan: Plan, where: Callable[[str, str, str], str]) -> None:
    """Every kind's own config checks; then each run an experiment's run learns from (any
    kind's: a warm start's parent, a teacher, a distillation teacher, a reverse model) is an
    implemented experiment on its dataset that can provide that kind, and following them never
    comes back (a run cannot learn from itself, directly or through a chain, which Snakemake
    would find only as a cyclic graph). `where(dataset, experiment, key)` says where a setting
    was written."""
    for kind in KINDS:
        kind.check_config(plan)

    def visit(node: tuple[str, str], chain: list[tuple[str, str]], here: str | None) -> None:
        for kind in KINDS:
            for at, dataset, parent in kind.learned_from(plan, *node, where):
                # a parent that cannot be is named where it is written; a cycle at the first
                # run's key: the chain starts there
                if parent not in plan.experiments or plan.status(parent, dataset) != "ok":
                    raise InputError(f"{at}: {parent!r} is not an implemented experiment on "
                                     f"dataset {dataset!r}")
                if problem := kind.incompatible(
                        plan.implemented[plan.experiments[parent]["method"]]):
                    raise InputError(f"{at}: {parent!r} {problem}")
                first = here or at
                if (dataset, parent) in chain:
                    cycle = [*chain[chain.index((dataset, parent)):], (dataset, parent)]
                    names = [e if d == node[0] else f"{d}/{e}" for d, e in cycle]
                    raise InputError(f"{first}: runs learning from each other form a cycle "
                                     f"({' -> '.join(names)})")
                visit((dataset, parent), [*chain, (dataset, parent)], first)

    for dataset in plan.config["datasets"]:
        for experiment in plan.experiments:
            if plan.status(experiment, dataset) == "ok":
                visit((dataset, experiment), [(dataset, experiment)], None)


def by_kind(inputs: Mapping[str, str], parent_runs: Iterable[str],
            settings: Mapping[str, Any]) -> list[tuple[RunInputKind, dict[str, str]]]:
    """A run's `--input`s grouped by their kind; an unknown name, or an input the settings
    need and the run was not given, is one line."""
    parent_runs = tuple(parent_runs)
    grouped: list[tuple[RunInputKind, dict[str, str]]] = []
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

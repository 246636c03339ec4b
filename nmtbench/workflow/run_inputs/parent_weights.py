"""Warm starts: another run's checkpoint (best or last, of the same seed or `seed_offset` on)
whose weights initialise part of a model: `init_from`, and a method's other settings marked
`x-parent-run` (the method's `parent_runs` say which weights go where). No rule makes it: the
providing run's training does (rules/train.smk), and the DAG waits for its summary."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from nmtbench import layout
from nmtbench.workflow.run_inputs.kind import (
    RunInput,
    RunInputKind,
    Weights,
    marked_settings,
    providing_run,
)

if TYPE_CHECKING:
    from nmtbench.workflow.method_registry import MethodInfo
    from nmtbench.workflow.plan import Plan


class ParentWeights(RunInputKind):
    def provides(self, name: str, parent_runs: Iterable[str]) -> bool:
        return name in parent_runs

    def named_runs(self, plan: Plan, dataset: str, experiment: str) -> dict[str, str]:
        info = plan.implemented[plan.experiments[experiment]["method"]]
        return marked_settings(plan, dataset, experiment, info.parent_runs)

    def resolve(self, plan: Plan, dataset: str, experiment: str) -> list[RunInput]:
        settings = plan.train_settings(dataset, experiment)
        return [RunInput(key, providing_run(plan, dataset, experiment, key), layout.CHECKPOINT,
                         layout.TRAIN_SUMMARY,
                         {"checkpoint": settings[key].get("checkpoint", "best")},
                         settings[key].get("seed_offset", 0))
                for key in self.named_runs(plan, dataset, experiment)]

    def incompatible(self, parent: MethodInfo) -> str | None:
        """A teacher's weights fit no other model (a warm start that fills none of a
        model's weights is refused when training starts)."""
        return "is a teacher, whose weights no model loads" if parent.decodings == (
            "none",) else None

    def load_weights(self, trainer: Weights, inputs: Mapping[str, str]) -> None:
        for name, path in inputs.items():
            trainer.warm_start(name, path)

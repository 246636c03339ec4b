"""Soft targets: a teacher run's top-K distributions at every position of the training
targets, for a method with a setting marked `x-soft-targets`; its model takes them in
(`Model.attach_side_data`). A teacher is a run of a method that is trained to give them and is
never decoded (decoding `none`); the producing rule is `soft_targets` (rules/train.smk), which
asks the teacher's model for them through the method contract (`Model.soft_targets`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nmtbench import layout
from nmtbench.records import COUNT, NON_NEGATIVE, SHARE, Bounds
from nmtbench.workflow.run_inputs.kind import (
    Data,
    ReportSection,
    RunInput,
    RunInputKind,
    marked_settings,
    providing_run,
)

if TYPE_CHECKING:
    from nmtbench.workflow.method_registry import MethodInfo
    from nmtbench.workflow.plan import Cell, Plan

# What the report reads of the record a teacher's dump writes beside it, and the values the
# dump can write there
RECORD_NUMBERS = {"valid_masked_accuracy": SHARE, "pairs": Bounds(1, whole=True),
                  "target_positions": COUNT, "bytes_per_target_position": NON_NEGATIVE,
                  "seconds_per_1000_pairs": NON_NEGATIVE}


def teachers(plan: Plan) -> list[tuple[Cell, int]]:
    """The teacher runs whose soft targets the requested runs train on, with the K of each
    dump."""
    found = {(i.cell, i.values["top_k"]) for dataset, run in plan.runs()
             for i in plan.run_inputs(dataset, run).values() if i.name == "soft_targets"}
    return sorted(found, key=lambda pair: (pair[0].dataset, pair[0].run or "", pair[1]))


def _columns(record: dict[str, Any]) -> dict[str, str]:
    return {"Objective": record["objective"],
            "Valid masked-token accuracy": f"{100 * record['valid_masked_accuracy']:.1f}%",
            "Soft targets": f"{record['pairs']} pairs, {record['target_positions']} positions",
            "Bytes per position": f"{record['bytes_per_target_position']:.1f}",
            "Seconds per 1,000 pairs": f"{record['seconds_per_1000_pairs']:.2f}"}


class SoftTargets(RunInputKind):
    names = ("soft_targets",)

    def named_runs(self, plan: Plan, dataset: str, experiment: str) -> dict[str, str]:
        info = plan.implemented[plan.experiments[experiment]["method"]]
        return marked_settings(plan, dataset, experiment, info.soft_targets_from)

    def resolve(self, plan: Plan, dataset: str, experiment: str) -> list[RunInput]:
        info = plan.implemented[plan.experiments[experiment]["method"]]
        top_k = plan.train_settings(dataset, experiment).get("top_k", info.defaults.get("top_k"))
        return [RunInput("soft_targets", providing_run(plan, dataset, experiment, key),
                         layout.SOFT_TARGETS, values={"top_k": top_k},
                         record=layout.SOFT_TARGETS_INFO)
                for key in self.named_runs(plan, dataset, experiment)]

    def incompatible(self, parent: MethodInfo) -> str | None:
        return None if parent.decodings == ("none",) else (
            "is not a teacher (an experiment whose method is trained to give soft targets "
            "and is never decoded)")

    def report_files(self, plan: Plan) -> set[str]:
        return {teacher.file(layout.SOFT_TARGETS_INFO, seed, top_k=top_k)
                for teacher, top_k in teachers(plan) for seed in plan.seeds}

    def report_section(self, plan: Plan) -> ReportSection | None:
        found = teachers(plan)
        if not found:
            return None
        return ReportSection(
            "Teachers' soft targets",
            "The teachers whose top-K distributions of the training targets their students "
            "learn from, as each teacher's dump records them: its objective, and the valid "
            "targets' tokens it predicts correctly under that objective.",
            [(teacher, {"top_k": top_k}) for teacher, top_k in found],
            layout.SOFT_TARGETS_INFO, ("objective",), RECORD_NUMBERS, _columns)

    def load_data(self, data: Data, inputs: Mapping[str, str]) -> None:
        data.attach_side_data("soft_targets", inputs["soft_targets"])

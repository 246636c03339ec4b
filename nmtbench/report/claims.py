"""The papers' own findings (`claims:` in papers/*.yaml) checked on our runs.

A claim says that on some columns of a table one row is better than another (higher for scores
and speedups, lower for latency and parameter counts), or that its values exceed a number. Per
column we compare our means over seeds; where the metric has a significance test and the two
rows are different runs or decodings, compare-mt's paired bootstrap between them (`Plan.targets`
lists it) must agree in every seed for the difference to count as significant. The verdict is
the paper's numbers next to ours, and whether the claim holds on every column we measured.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from nmtbench.report.results import BETTER, WORSE, Results
from nmtbench.workflow.metric_registry import METRICS
from nmtbench.workflow.papers import Claim, Column
from nmtbench.workflow.plan import EXTERNAL, NOT_IMPLEMENTED, Cell, Plan, tested_against

# A verdict's outcome: the first three are checked on our runs, the last two are not
HOLDS, FAILS, SOME = "holds", "does not hold", "holds on some columns"
NOT_RUN, NOT_CHECKED = "not run", "not checked"


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    paper: str  # the paper's numbers, column by column
    ours: str  # ours, column by column ("-" where none)
    holds: str  # the outcome, with significance, the columns it holds on, or why not checked
    outcome: str  # HOLDS, FAILS, SOME, NOT_RUN or NOT_CHECKED

    @property
    def checked(self) -> bool:
        return self.outcome not in (NOT_RUN, NOT_CHECKED)


def check_claims(plan: Plan, results: Results) -> list[Verdict]:
    """Every transcribed claim; those about tables this config does not request say so."""
    requested = {claim.table for claim in plan.claims}
    return [_check(plan, results, claim) if claim.table in requested
            else Verdict(claim, _paper_numbers(plan, claim), "-",
                         f"{NOT_RUN} ({claim.table} is not requested)", NOT_RUN)
            for claim in plan.catalogue.claims]


def _check(plan: Plan, results: Results, claim: Claim) -> Verdict:
    ours, outcomes, untestable = [], [], []
    table = plan.catalogue.tables[claim.table]
    for columns, cell, other in plan.claim_cells(claim):
        col = columns[0]
        reason = _untestable(cell, other, METRICS[col.metric].decoded)
        if reason:
            untestable.append(reason)
            continue
        baseline = plan.baseline_cell(table, table.columns.index(col))
        mine = _mean(plan, results, cell, col, baseline)
        theirs = claim.above if other is None else _mean(plan, results, other, col, baseline)
        if mine is None or theirs is None:
            untestable.append("missing")
            continue
        better = mine < theirs if METRICS[col.metric].lower_is_better else mine > theirs
        mark = ""
        if other is not None and METRICS[col.metric].significance and tested_against(cell,
                                                                                     other):
            mark = results.significance(cell, other, col.split, col.metric)
        label = " / ".join(c.label for c in columns)
        ours.append(f"{label}: {_versus(claim, col, mine, theirs, mark)}")
        outcomes.append((better, mark))
    return Verdict(claim, _paper_numbers(plan, claim), "; ".join(ours) or "-",
                   *_summary(outcomes, untestable))


def _untestable(cell: Cell, other: Cell | None, decoded: bool) -> str:
    """Why the column cannot test the claim: a row not run here, or both rows the same
    measurement (one run, and for a decoded metric one decoding)."""
    for c in (cell, other):
        if c is not None and c.status == NOT_IMPLEMENTED:
            return f"{c.experiment} not implemented"
        if c is not None and c.status == EXTERNAL:
            return f"{c.experiment} is quoted from other work, not run"
    if other is not None and cell.run == other.run and (cell.tag == other.tag or not decoded):
        return "both rows are one run on this data"
    return ""


def _mean(plan: Plan, results: Results, cell: Cell, col: Column,
          baseline: Cell | None) -> float | None:
    """Our mean over seeds (latency and speedup as the table measures them, against its
    baseline); None unless every seed has it."""
    values = [results.measure(cell, col.split, col.metric, seed, baseline)
              for seed in plan.seeds]
    return None if None in values else statistics.mean(values)


def _summary(outcomes: list[tuple[bool, str]], untestable: list[str]) -> tuple[str, str]:
    """The verdict as shown, and its outcome."""
    if not outcomes:
        return f"{NOT_CHECKED}: " + "; ".join(sorted(set(untestable))), NOT_CHECKED
    held = sum(better for better, _ in outcomes)
    if held == len(outcomes):
        outcome = verdict = HOLDS
        if all(mark == BETTER for _, mark in outcomes):
            verdict += " (significant)"
    elif held == 0:
        outcome = verdict = FAILS
        if all(mark == WORSE for _, mark in outcomes):
            verdict += " (significantly the other way)"
    else:
        outcome, verdict = SOME, f"{SOME} ({held} of {len(outcomes)})"
    if untestable:
        verdict += "; not checked elsewhere: " + "; ".join(sorted(set(untestable)))
    return verdict, outcome


def _paper_numbers(plan: Plan, claim: Claim) -> str:
    table = plan.catalogue.tables[claim.table]
    rows = {row.experiment: row for row in table.rows}
    parts = []
    for col in (c for c in table.columns if c.key in claim.columns):
        mine = rows[claim.row].reported.get(col.key)
        theirs = (claim.above if claim.than is None
                  else rows[claim.than].reported.get(col.key))
        if mine is not None and theirs is not None:
            parts.append(f"{col.label}: {_versus(claim, col, mine, theirs)}")
    return "; ".join(parts) or "-"


def _versus(claim: Claim, col: Column, mine: float, theirs: float, mark: str = "") -> str:
    """"28.50▲ vs 27.50" for two rows, "2.38x (claimed: above 2.00x)" against a number."""
    fmt = METRICS[col.metric].format
    if claim.than is None:
        return f"{fmt(mine)} (claimed: above {fmt(theirs)})"
    return f"{fmt(mine)}{mark} vs {fmt(theirs)}"

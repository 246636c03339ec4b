"""Render `results/tables.md` and the figures: every requested table, ours next to the paper's.

A cell shows our number (mean ± std over seeds when there are several), a significance mark from
compare-mt's paired bootstrap against the table's baseline row, and, where our data is the
paper's own, the paper's number and the difference. On the toy world our numbers stand alone
and the paper's are listed separately, because they were measured on other data. Cells whose
method is not implemented, or that the paper quotes from other work, say so instead of
vanishing; a run that has not finished shows as "missing", and so does a number made from an
earlier training of its run, by a training whose inputs changed since, or from hypotheses
decoded again since (listed at the end, `nmtbench.provenance`). Every row links its
run directories, and a provenance block says which code, config, hardware and libraries
produced the numbers.

The papers' claims go to `claims.md` beside it, all of them; under each table only those our
runs checked, verdict first, so that what the run found reads at a glance.

`tables.json` beside it holds the same report for programs, made from the same values as the
page (`Shown`, the verdicts, the sections' rows): every cell with its paper, table, row and
column, the paper's number, ours seed by seed, its significance, run directories, settings
hash (of the experiment's entry in the Settings section) and score signatures; the claims,
figures, pre-training and provenance. report/tables.schema.json is its JSON Schema.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import statistics
from dataclasses import dataclass, field
from fnmatch import fnmatch
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from nmtbench import layout, provenance
from nmtbench.devices import cpu_model, gpu_model
from nmtbench.errors import InputError
from nmtbench.fileio import write_json, write_text
from nmtbench.records import COUNT, NON_NEGATIVE, POSITIVE, SHARE, Bounds, read_result
from nmtbench.report import figures, table_curves
from nmtbench.report.claims import HOLDS, Verdict, check_claims
from nmtbench.report.results import (
    BETTER,
    WORSE,
    Results,
    check_prepared,
    check_pretrained,
    check_vocabularies,
    value_at,
)
from nmtbench.report.scoring import SIGNATURES, scoring_notes, signatures
from nmtbench.workflow import recorded_settings, run_inputs
from nmtbench.workflow.metric_registry import METRICS
from nmtbench.workflow.papers import Column, Row, Table
from nmtbench.workflow.plan import EXTERNAL, NOT_IMPLEMENTED, Cell, Plan, generated, tested_against
from nmtbench.workflow.pretrain_settings import PretrainConfig
from nmtbench.workflow.run_inputs import ReportSection

OK, MISSING, NO_BASELINE = "ok", "missing", "no baseline"  # a cell's status in tables.json
JSON_VERSION = 1  # of tables.json's layout (report/tables.schema.json)
SIGNIFICANCE = {BETTER: "better", WORSE: "worse"}
# a quality score (BLEU, ROUGE) under this fraction of its table's baseline, itself at least
# UNLEARNED_BASELINE, is marked: the run did not learn the task
UNLEARNED = "†"
UNLEARNED_FRACTION = 0.25
UNLEARNED_BASELINE = 5.0

log = logging.getLogger(__name__)
LIBRARIES = ("torch", "transformers", "tokenizers", "sacrebleu", "compare-mt", "rouge-score",
             "snakemake", "pandas", "matplotlib")


def write_report(plan: Plan, results_dir: Path, out: Path, root: Path,
                 pretrained_dir: Path = Path(layout.PRETRAINED_ROOT),
                 configs: list[Path] = ()) -> list[Path]:
    """Write tables.md (at `out`), claims.md beside it, tables.json (`out` with the suffix
    .json: the same report for programs), the requested figures and each table's validation
    curves (under `out`'s figures/) from the runs in `results_dir` and the checkpoints
    pre-trained under `pretrained_dir`; `root` is the repository whose commit goes into the
    provenance, and `configs` the config files the plan was merged from, which the Settings
    section names."""
    root, out = Path(root).resolve(), Path(out).resolve()
    claims_out, json_out = out.with_name(Path(layout.CLAIMS).name), out.with_suffix(".json")
    for other, what in ((claims_out, "claims"), (json_out, "cells for programs")):
        if other == out:
            raise InputError(f"{out}: the report writes its {what} to {other.name} beside "
                             "tables.md; give tables.md another name")
    results = Results(plan, Path(results_dir).resolve(), Path(pretrained_dir))
    _check_results_dir(plan, results)
    check_prepared(plan, results.results_dir.parent, _toy_worlds(plan))
    check_vocabularies(plan, results.results_dir.parent)
    verdicts = check_claims(plan, results)
    settings = _settings(plan, root, configs)
    claims_link = _link(claims_out.name, claims_out, out.parent)
    lines = _preamble(plan, verdicts, claims_link)
    record: dict[str, Any] = {"version": JSON_VERSION, "toy_worlds": _toy_worlds(plan),
                              "tally": _tally_record(verdicts), "tables": [],
                              "claims": [_claim_record(v) for v in verdicts]}
    for table in plan.tables:
        mine = [v for v in verdicts if v.claim.table == table.name]
        section, table_record = _table_section(plan, results, table, out.parent,
                                               _table_claims(mine, claims_link), settings)
        lines += ["", *section]
        record["tables"].append({**table_record, "claims": _tally_record(mine)})
    section, record["figures"], written = _figures_section(plan, results, out.parent)
    lines += section
    section, curves = table_curves.section(plan, results, out.parent / "figures", out.parent)
    lines += ["", *section] if plan.tables else []
    written += curves
    record["pretrained"] = _pretraining_rows(plan, Path(pretrained_dir))
    if record["pretrained"]:
        lines += ["", *_pretraining_section(record["pretrained"])]
    record["run_inputs"] = []
    for section in filter(None, (kind.report_section(plan) for kind in run_inputs.KINDS)):
        record["run_inputs"].append(_run_input_rows(plan, results, section))
        lines += ["", *_run_input_section(section, record["run_inputs"][-1]["rows"])]
    record["stale"] = [p.relative_to(results.results_dir).as_posix() for p in sorted(results.stale)]
    if results.stale:
        lines += ["", *_stale_section(results, out)]
    record["provenance"] = _provenance(plan.config, root, _run_records(plan, results))
    record["settings"] = settings
    lines += ["", "## Provenance", "", *_provenance_lines(record["provenance"]),
              "", *_settings_section(settings)]
    write_text(out, "\n".join(lines).rstrip() + "\n")
    write_text(claims_out, "\n".join(_claims_page(verdicts, _link(out.name, out, out.parent),
                                                  bool(results.stale))).rstrip() + "\n")
    write_json(json_out, record)
    return [out, claims_out, json_out, *written]


def _figures_section(plan: Plan, results: Results, base: Path
                     ) -> tuple[list[str], list[dict[str, Any]], list[Path]]:
    """The requested figures drawn under `base`/figures: their section, their records (files,
    caption, our points) and the files written."""
    if not plan.figures:
        return [], [], []
    lines, records, written = ["", "## Figures", ""], [], []
    for figure in plan.figures:
        drawn = figures.draw(plan, results, figure, base / "figures")
        written += drawn.paths
        files = [Path(os.path.relpath(path, base)).as_posix() for path in drawn.paths]
        lines += [f"### {figure.name}", "", f"![{figure.name}]({quote(files[0])})", "",
                  drawn.caption, ""]
        records.append({"name": figure.name, "paper": figure.paper, "files": files,
                        "caption": drawn.caption, "series": {
                            label: [[x if isinstance(x, int | float | str) else str(x), y]
                                    for x, y in points]
                            for label, points in drawn.series.items()}})
    return lines, records, written


def _preamble(plan: Plan, verdicts: list[Verdict], claims_link: str) -> list[str]:
    """The page's title, what its numbers are (toy-world ones not comparable to the papers')
    and the tally of the claims checked."""
    lines = ["# Results", "",
             "Numbers in the tables are measured by this harness (nmtbench) unless marked as the "
             "paper's. Each table's source paper is named under its heading."]
    if rehearsal := plan.config.get("rehearsal"):
        lines.append(f"**A rehearsal, not results**: every run trained a handful of updates on a "
                     "few hundred pairs, from stand-in checkpoints of random weights, at 1/"
                     f"{rehearsal['width_divisor']} of its widths (docs/rehearsal.md); the "
                     "numbers only show that every cell is filled.")
    toy = _toy_worlds(plan)
    if toy:
        lines.append(f"Datasets {', '.join(toy)} are generated toy worlds: **toy-world numbers; "
                     "not comparable to the papers**, so their cells show ours alone.")
    return [*lines, "", f"{_tally(verdicts)}: per table below; all in {claims_link}."]


def _toy_worlds(plan: Plan) -> list[str]:
    """The generated toy worlds the tables and figures read."""
    return sorted({cell.dataset for t in plan.tables for _, _, cell in plan.table_cells(t)
                   if plan.config["datasets"][cell.dataset]["kind"] == "toyworld"}
                  | {c.dataset for f in plan.figures for c in plan.figure_cells(f)
                     if plan.config["datasets"][c.dataset]["kind"] == "toyworld"})


def _stale_section(results: Results, out: Path) -> list[str]:
    """The result files left out because they were made from an earlier training."""
    log.warning("left out %d result files no longer made from what is there (listed in %s)",
                len(results.stale), out)
    return ["## Left out: made from an earlier training", "",
            "These files were made from a training that is no longer in its run "
            "directory (retrained, refused or removed since), by a training whose inputs "
            "(data, tokenizers, pre-trained checkpoints) have changed since, or from "
            "hypotheses decoded again since; their cells show "
            f"{MISSING}. The workflow makes them again where it sees why (a run trained or "
            "data prepared again); where it cannot (a file edited by hand that kept its "
            "modification time, a record an older version of the harness wrote), delete the "
            "file and run it again:", "",
            *[f"- {p.relative_to(results.results_dir)}" for p in sorted(results.stale)]]


@dataclass(frozen=True)
class Shown:
    """One cell as tables.md shows it (`text`) and the values its text is made of."""

    text: str
    status: str  # OK (ours are there) or what the text says instead: MISSING, EXTERNAL, ...
    seeds: dict[int, float | None] = field(default_factory=dict)  # ours, None where missing
    significance: str = ""  # BETTER, WORSE or "" (not significant, or not tested)
    unlearned: str = ""  # why the cell is marked UNLEARNED

    @property
    def done(self) -> list[float]:
        return [v for v in self.seeds.values() if v is not None]

    @property
    def mean(self) -> float | None:
        return statistics.mean(self.done) if self.done else None

    @property
    def std(self) -> float | None:
        """The sample std over seeds, as the text's ± (None for one value)."""
        return statistics.stdev(self.done) if len(self.done) > 1 else None


def _table_section(plan: Plan, results: Results, table: Table, base: Path, claims: list[str],
                   settings: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The table, its notes, the `claims` checked on it, and the paper's own numbers; and
    its record for tables.json (its cells with the `settings` hashes of their experiments)."""
    paper = plan.catalogue.papers.get(table.paper, {})
    cells = plan.table_cells(table)
    comparable = {(i, j): plan.comparable(table.rows[i].dataset(table.columns[j]), cell.dataset)
                  for i, j, cell in cells}
    merged = [group for group in plan.column_groups(table) if _shown(plan, table, group)]
    rows, records, shared, unlearned = [], [], {}, []
    for i, row in enumerate(table.rows):
        rendered: dict[str, str] = {"": row.label}
        run_links: dict[str, str] = {}
        for group in merged:
            j, col = group[0], table.columns[group[0]]
            cell = cells[i * len(table.columns) + j][2]
            label = " / ".join(table.columns[k].label for k in group)
            shown = _cell_text(plan, results, table, j, row.reported.get(col.key), cell,
                               comparable[(i, j)])
            rendered[label] = shown.text
            records += [_cell_record(plan, results, (table, row, table.columns[k], label), cell,
                                     shown, comparable[(i, k)], base, settings) for k in group]
            if shown.unlearned:
                log_file = cell.file(layout.TRAIN_LOG, plan.seeds[0])
                link = _link(log_file.removeprefix(layout.RUNS + "/"), results.path(log_file),
                             base)
                unlearned.append(f"{row.label} ({label}): {shown.unlearned}; training log {link}")
            if cell.run is not None:
                for seed in plan.seeds:
                    run_dir = cell.run_dir(seed)
                    run_links[run_dir] = _link(run_dir.removeprefix(layout.RUNS + "/"),
                                               results.path(run_dir), base)
                members = plan.sharing(cell.dataset, cell.run)
                if len(members) > 1:
                    shared[f"{cell.dataset}/{cell.run}"] = members
        rendered["runs"] = " ".join(run_links.values()) or "-"
        rows.append(rendered)
    lines = [f"## {table.name}", "",
             f"Source: *{paper.get('title', table.paper)}*; {paper.get('citation', '')}", "",
             _literal(table.caption), "", _markdown(pd.DataFrame(rows)), ""]
    notes = _table_notes(plan, table, comparable, shared, any(len(g) > 1 for g in merged),
                         unlearned)
    notes += map(_literal, scoring_notes(plan, results, table))
    lines += [f"- {n}" for n in notes]
    lines += claims
    lines += _reported_section(table, comparable)
    row_notes = [f"{row.label}: {_literal(row.note)}" for row in table.rows if row.note]
    if row_notes:
        lines += ["", "Row notes from the paper:", "", *[f"- {n}" for n in row_notes]]
    return lines, {"name": table.name, "paper": table.paper,
                   "title": paper.get("title", table.paper), "citation": paper.get("citation", ""),
                   "caption": table.caption, "baseline": table.baseline, "cells": records,
                   "notes": notes, "signatures": _signatures_of(records),
                   "row_notes": {row.label: row.note for row in table.rows if row.note}}


def _reported_section(table: Table, comparable: dict[tuple[int, int], bool]) -> list[str]:
    """The paper's own numbers, apart, where some of its columns are on other data than ours
    (each is in tables.json as its cell's `paper_value`)."""
    if all(comparable.values()) or all(v is None for row in table.rows
                                       for v in row.reported.values()):
        return []
    given = [col for col in table.columns if col.metric != "chrf"
             or any(row.reported.get(col.key) is not None for row in table.rows)]
    reported = [{"": row.label, **{col.label: _reported(row.reported.get(col.key), col.metric)
                                   for col in given}} for row in table.rows]
    return ["", f"As reported in the paper ({table.name}; its data, not ours):", "",
            _markdown(pd.DataFrame(reported))]


def _cell_record(plan: Plan, results: Results, where: tuple[Table, Row, Column, str], cell: Cell,
                 shown: Shown, comparable: bool, base: Path,
                 settings: dict[str, Any]) -> dict[str, Any]:
    """tables.json's record of one paper column of a cell tables.md shows (under `label`:
    columns joined by / share one measurement)."""
    table, row, col, label = where
    reported, mean = row.reported.get(col.key), shown.mean
    experiment = f"{cell.dataset}/{cell.experiment}" if cell.run is not None else None
    resolved = settings["experiments"].get(experiment)
    return {
        "paper": table.paper, "table": table.name, "row": row.label,
        "experiment": row.experiment, "column": col.label, "column_key": col.key,
        "shown_as": label, "metric": col.metric, "split": col.split, "dataset": cell.dataset,
        "tag": cell.tag, "status": shown.status, "text": shown.text,
        "ours": {"mean": mean, "std": shown.std,
                 "seeds": {str(seed): value for seed, value in shown.seeds.items()}},
        "paper_value": reported,
        "paper_text": _reported(reported, col.metric) if reported is not None else None,
        "on_papers_data": comparable,
        "difference": (mean - reported if comparable and mean is not None
                       and reported is not None else None),
        "significance": SIGNIFICANCE.get(shown.significance),
        "unlearned": shown.unlearned or None,
        "run_dirs": [Path(os.path.relpath(results.path(cell.run_dir(seed)), base)).as_posix()
                     for seed in plan.seeds] if cell.run is not None else [],
        "settings": experiment if resolved is not None else None,
        "settings_hash": settings_hash(resolved) if resolved is not None else None,
        "signatures": (signatures(plan, results, [(col, cell)], col.metric)
                       if col.metric in SIGNATURES and shown.status == OK else None),
    }


def settings_hash(resolved: dict[str, Any]) -> str:
    """An experiment's settings hash: the sha256 of its entry in the Settings section (its
    training and decoding settings as sorted JSON), its first 12 hex digits."""
    return hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()[:12]


def _signatures_of(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The score signatures of a table's cells, by metric."""
    found: dict[str, set[str]] = {}
    for record in records:
        found.setdefault(record["metric"], set()).update(record["signatures"] or ())
    return {metric: sorted(values) for metric, values in found.items() if values}


def _shown(plan: Plan, table: Table, group: list[int]) -> bool:
    """A column is shown unless it is a chrF column on a generated toy world: chrF is a real
    data score that the papers' tables gain beside their BLEU (none of them reports it)."""
    col = table.columns[group[0]]
    return col.metric != "chrf" or not all(
        generated(plan.config["datasets"], cell.dataset)
        for _, j, cell in plan.table_cells(table) if j in group)


def _table_notes(plan: Plan, table: Table, comparable: dict[tuple[int, int], bool],
                 shared: dict[str, list[str]], joined: bool, unlearned: list[str]) -> list[str]:
    """The notes under a table: significance marks, seeds, columns on other data, shared
    runs, joined columns, runs that did not learn."""
    notes = []
    marked_on = {"bleu": "BLEU", "sacrebleu": "sacreBLEU"}  # else a ROUGE F1
    scores = ", ".join(dict.fromkeys(
        marked_on.get(METRICS[c.metric].significance, "the column's ROUGE F1")
        for c in table.columns if METRICS[c.metric].significance))
    if table.baseline is not None and scores:
        notes.append(f"{BETTER}/{WORSE}: significantly better/worse than the baseline row "
                     f"({table.baseline}) in every seed (compare-mt paired bootstrap, {scores}, "
                     f"{plan.config['analysis']['bootstrap_samples']} resamples, p < 0.05).")
    if len(plan.seeds) > 1:
        notes.append(f"Ours: mean ± sample std over seeds {', '.join(map(str, plan.seeds))}.")
    if not all(comparable.values()):
        notes.append("Columns on data other than the paper's show ours alone; the paper's "
                     "numbers for them are listed below.")
    for run, members in sorted(shared.items()):
        notes.append(f"Run {run} trains {', '.join(members)}: their settings are identical on "
                     "this dataset.")
    if joined:
        notes.append("Columns joined by / are one measurement: on this data their runs, "
                     "decoding and split are the same.")
    notes += [f"{UNLEARNED} did not learn: {n}" for n in unlearned]
    return notes


def _cell_text(plan: Plan, results: Results, table: Table, column: int,
               reported: float | None, cell: Cell, comparable: bool) -> Shown:
    """Ours (± std), the significance mark, and on the paper's own data its number and Δ;
    and, for a score far below the baseline's, a note saying so and where its log is."""
    col = table.columns[column]
    paper = (f" (paper {_reported(reported, col.metric)})"
             if comparable and reported is not None else "")
    if cell.status == EXTERNAL:
        return Shown("external" + paper if comparable else "external (quoted by the paper)",
                     EXTERNAL)
    if cell.status == NOT_IMPLEMENTED:
        return Shown(NOT_IMPLEMENTED + paper, NOT_IMPLEMENTED)
    baseline = plan.baseline_cell(table, column)
    if col.metric == "speedup" and baseline is None:
        return Shown(NO_BASELINE + paper, NO_BASELINE)
    values = {seed: results.measure(cell, col.split, col.metric, seed, baseline)
              for seed in plan.seeds}
    done = [v for v in values.values() if v is not None]
    if not done:
        return Shown(MISSING + paper, MISSING, values)
    text, mark = _format(done, col.metric), ""
    if METRICS[col.metric].significance and tested_against(cell, baseline):
        mark = results.significance(cell, baseline, col.split, col.metric)
    note = _unlearned(plan, results, col, cell, baseline, statistics.mean(done))
    text += mark + (UNLEARNED if note else "")
    if len(done) < len(values):
        text += f" ({len(values) - len(done)} of {len(values)} seeds missing)"
    if paper:
        diff = _format([statistics.mean(done) - reported], col.metric)
        text += f"{paper[:-1]}, Δ {'' if diff.startswith('-') else '+'}{diff})"
    return Shown(text, OK, values, mark, note)


def _unlearned(plan: Plan, results: Results, col, cell: Cell, baseline: Cell | None,
               ours: float) -> str:
    """A score under UNLEARNED_FRACTION of the baseline's (which must itself have learned
    something): the run did not learn the task, which the bare number would hide. Says so
    with both scores (not valid losses: a method's loss may add terms of its own, so two runs'
    losses need not be comparable; its training log has them)."""
    if (not METRICS[col.metric].quality or baseline is None
            or (baseline.run, baseline.tag) == (cell.run, cell.tag)):
        return ""
    theirs = [v for seed in plan.seeds
              if (v := results.measure(baseline, col.split, col.metric, seed, None)) is not None]
    if not theirs or statistics.mean(theirs) < UNLEARNED_BASELINE or (
            ours >= UNLEARNED_FRACTION * statistics.mean(theirs)):
        return ""
    fmt = METRICS[col.metric].format
    return f"{fmt(ours)} against the baseline's {fmt(statistics.mean(theirs))}"


def _check_results_dir(plan: Plan, results: Results) -> None:
    """A report of a directory that is not the plan's results would be a table of "missing":
    refuse one that does not exist or holds none of the run outputs the plan reads (while
    the runs go on, some are missing: that is a report, with them marked)."""
    if not results.results_dir.is_dir():
        raise InputError(f"{results.results_dir}: no such results directory")
    targets = plan.targets()
    if targets and not any(results.path(target).exists() for target in targets):
        raise InputError(f"{results.results_dir}: none of the {len(targets)} run outputs the "
                         f"requested tables read is there (e.g. {results.path(targets[0])}); "
                         "is this the results directory of this config?")


def _format(values: list[float], metric: str) -> str:
    """One value, or mean ± std (a parameter count the seeds agree on stays one value)."""
    fmt = METRICS[metric].format
    if len(values) == 1 or (METRICS[metric].pattern is None and len(set(values)) == 1):
        return fmt(values[0])
    return f"{fmt(statistics.mean(values))} ± {fmt(statistics.stdev(values))}"


def _table_claims(verdicts: list[Verdict], claims_link: str) -> list[str]:
    """Under a table: the claims about it that our runs checked, verdict first, and a count
    of the others (claims.md has them all)."""
    if not verdicts:
        return []
    checked = [v for v in verdicts if v.checked]
    lines = [""]
    if checked:
        rows = [{"On our runs": v.holds, "Claim": f"{v.claim.claim} ({v.claim.source})",
                 "Paper": v.paper, "Ours": v.ours} for v in checked]
        lines += [f"Claims about this table, checked on the runs above ({BETTER}/{WORSE}: "
                  "the paired bootstrap between the claim's two rows, in every seed):", "",
                  _markdown(pd.DataFrame(rows)), ""]
    tally = _tally_record(verdicts)
    lines.append(f"Not run or not checkable here: {tally['not_checked']} of this "
                 f"table's {tally['transcribed']} claims (every claim, with its reason: "
                 f"{claims_link}).")
    return lines


def _tally(verdicts: list[Verdict]) -> str:
    tally = _tally_record(verdicts)
    return (f"**{tally['hold']} of {tally['checked']} checked claims hold** "
            f"(of {tally['transcribed']} transcribed)")


def _tally_record(verdicts: list[Verdict]) -> dict[str, int]:
    checked = [v for v in verdicts if v.checked]
    return {"hold": sum(v.outcome == HOLDS for v in checked), "checked": len(checked),
            "not_checked": len(verdicts) - len(checked), "transcribed": len(verdicts)}


def _claim_record(verdict: Verdict) -> dict[str, Any]:
    """tables.json's record of a claim: the claim as transcribed and its verdict, as claims.md
    shows it (and tables.md under its table, where our runs checked it)."""
    claim = verdict.claim
    return {"paper": claim.paper, "table": claim.table, "claim": claim.claim,
            "source": claim.source, "row": claim.row, "than": claim.than, "above": claim.above,
            "columns": list(claim.columns), "paper_numbers": verdict.paper, "ours": verdict.ours,
            "verdict": verdict.holds, "outcome": verdict.outcome, "checked": verdict.checked}


def _claims_page(verdicts: list[Verdict], tables_link: str, stale: bool) -> list[str]:
    """claims.md: every transcribed claim, whether its table was requested or not."""
    rows = [{"Claim": f"{v.claim.claim} ({v.claim.paper}: {v.claim.source})",
             "Table": v.claim.table, "Paper": v.paper, "Ours": v.ours, "On our runs": v.holds}
            for v in verdicts]
    lines = ["# Claims", "",
             f"The papers' own findings (`claims:` in papers/*.yaml), checked on the runs of "
             f"{tables_link}: {_tally(verdicts)}. A row is better when its number is higher "
             f"(scores, speedups) or lower (latency, parameters); {BETTER}/{WORSE}: the paired "
             "bootstrap between the two rows says so in every seed. Ours are means over seeds; "
             "a claim about a table this config does not request is not run."]
    if stale:
        lines += ["", f"Result files made from an earlier training are left out, as "
                  f"{tables_link} lists them."]
    return [*lines, "", _markdown(pd.DataFrame(rows))]


# What the section below reads of a pre-training's record, and the values its job writes there
PRETRAIN_NUMBERS = {"settings.layers": Bounds(1, whole=True),
                    "settings.d_model": Bounds(1, whole=True), "settings.lr": POSITIVE,
                    "params": Bounds(1, whole=True), "updates": COUNT, "epochs": NON_NEGATIVE,
                    "heldout.accuracy": SHARE, "heldout.perplexity": Bounds(1),
                    "seconds": NON_NEGATIVE, "settings.dropout?": SHARE,
                    "settings.mask_prob?": SHARE, "settings.mask_replace_prob?": SHARE,
                    "settings.random_replace_prob?": SHARE}

def _pretraining_rows(plan: Plan, pretrained_dir: Path) -> list[dict[str, str]]:
    """How well the checkpoints pre-trained in the DAG learned, on their held-out text: a row
    of the section per checkpoint."""
    rows = []
    for name in plan.pretrained_targets():
        spec = plan.config["pretraining"][name]
        planned = Path(layout.PRETRAIN_SUMMARY.format(pretrained=name))
        path = pretrained_dir / planned.relative_to(layout.PRETRAINED_ROOT)
        summary = read_result(path, keys=("settings",), numbers=PRETRAIN_NUMBERS)
        replaced = ("mask_replace_prob", "random_replace_prob")
        if summary is not None and sum(summary["settings"].get(k, 0) for k in replaced) > 1:
            raise InputError(f"{path}: keys 'settings.{replaced[0]}' and "
                             f"'settings.{replaced[1]}' sum to more than 1")
        if summary is not None:
            check_pretrained(plan, name, summary, path)
        part = "mono" if generated(plan.config["datasets"], spec["dataset"]) else "train"
        row = {"Checkpoint": name, "Model": spec["model"],
               "Corpus": " + ".join([f"{spec['dataset']} {part}.{spec['side']}",
                                     *spec.get("extra_corpora", [])])}
        if summary is None:
            rows.append({**row, "Layers × d": "missing"})
            continue
        settings, heldout = summary["settings"], summary["heldout"]
        rows.append({**row, "Objective": _objective(spec["model"], settings),
                     "Layers × d": f"{settings['layers']} × {settings['d_model']}",
                     "Params": METRICS["params_total"].format(summary["params"]),
                     "Updates (epochs)": f"{summary['updates']} ({summary['epochs']:g})",
                     "lr": f"{settings['lr']:g}",
                     "Dropout": f"{settings.get('dropout', PretrainConfig.dropout):g}",
                     "Held-out accuracy": f"{100 * heldout['accuracy']:.1f}%",
                     "Held-out perplexity": f"{heldout['perplexity']:.1f}",
                     "Seconds": f"{summary['seconds']:.0f}"})
    return rows


def _pretraining_section(rows: list[dict[str, str]]) -> list[str]:
    return ["## Pre-trained checkpoints", "",
            "Pre-trained in the DAG on a dataset's text: a toy world's monolingual corpus "
            "(mono), real data's training side (train). Objective: a BERT's "
            "share of tokens selected for prediction, and of those the shares given as [MASK], "
            "as a random token and kept (BERT's own: 15%, 80/10/10). Held-out accuracy: tokens "
            "given as [MASK] predicted correctly (BERT) or next tokens (GPT-2), on the corpus's "
            "last sentences, never trained on.", "",
            _markdown(pd.DataFrame(rows).fillna("-"))]


def _objective(model: str, settings: dict[str, Any]) -> str:
    """"masked LM 30%: 50/10/40" (selected; [MASK]/random/kept) or "causal LM"."""
    if model != "bert":
        return "causal LM"
    defaults = PretrainConfig(model="bert")
    select, masked, randomised = (settings.get(k, getattr(defaults, k)) for k in
                                  ("mask_prob", "mask_replace_prob", "random_replace_prob"))
    shares = [round(100 * x) for x in (masked, randomised, 1 - masked - randomised)]
    return f"masked LM {100 * select:g}%: {'/'.join(map(str, shares))}"


def _run_input_rows(plan: Plan, results: Results, section: ReportSection) -> dict[str, Any]:
    """A run-input kind's section on the runs providing it (nmtbench.workflow.run_inputs):
    its title and one row per provider and seed, from the record its rule wrote."""
    rows = []
    for provider, values in section.providers:
        for seed in plan.seeds:
            path = results.path(provider.file(section.record, seed, **values))
            record = read_result(path, keys=section.keys, numbers=section.numbers)
            if record is not None and not results.current(record, provider, seed):
                results.stale.add(path)  # from an earlier training of the provider
                record = None
            row = {"Run": f"{provider.dataset}/{provider.run}/seed{seed}",
                   **{k: str(v) for k, v in values.items()}}
            rows.append({**row, **(section.columns(record) if record is not None
                                   else {"Result": "missing"})})
    return {"title": section.title, "rows": rows}


def _run_input_section(section: ReportSection, rows: list[dict[str, str]]) -> list[str]:
    return [f"## {section.title}", "", section.prose, "",
            _markdown(pd.DataFrame(rows).fillna("-"))]


def _reported(value: float | None, metric: str) -> str:
    if value is None:
        return "-"
    return _format([value], metric)


def _literal(text: str) -> str:
    """A paper's own prose, whose asterisks mark its rows ("*" = our implementation), kept
    literal: Markdown would read a pair of them as emphasis and drop both."""
    return text.replace("*", r"\*")


def _link(text: str, target: Path, base: Path) -> str:
    return f"[{text}]({quote(Path(os.path.relpath(target, base)).as_posix())})"


def _markdown(frame: pd.DataFrame) -> str:
    """A GitHub table of string cells, kept as written (no number re-parsing), pipes escaped."""
    frame = frame.map(lambda text: str(text).replace("|", "\\|"))
    return frame.to_markdown(index=False, disable_numparse=True)


def _run_records(plan: Plan, results: Results) -> list[dict]:
    """The metrics records behind the report's cells (devices, BLEU signatures): of the
    requested files, those there and not left out, each with the signatures and training
    record its job writes (else one line naming the file and key)."""
    metrics = layout.METRICS.format(**{name: "*" for name in layout.fields(layout.METRICS)})
    records = []
    for target in plan.targets():
        path = results.path(target)
        if fnmatch(target, metrics) and path not in results.stale:
            data = read_result(path)
            if data is not None:
                for key, kind in (("bleu.signature", str), ("bleu.tokenized_signature", str),
                                  ("train", dict)):
                    if not isinstance(value_at(data, key), kind):
                        raise InputError(f"{path}: key '{key}' is missing or not a "
                                         f"{'string' if kind is str else 'mapping'}")
                records.append(data)
    return records


def _provenance(config: dict, root: Path, runs: list[dict]) -> dict[str, Any]:
    """Which code, config, hardware and libraries made the numbers, and the BLEU signatures
    of the runs' scores."""
    seen = sorted({("sacreBLEU", str(run["bleu"]["signature"])) for run in runs}
                  | {("tokenized", str(run["bleu"]["tokenized_signature"])) for run in runs})
    return {
        "git_commit": provenance.git_commit(root),
        "config_hash": hashlib.sha256(json.dumps(config, sort_keys=True).encode()
                                      ).hexdigest()[:12],
        "platform": platform.platform(), "cpu": cpu_model(), "cpu_cores": os.cpu_count(),
        "cuda_device": gpu_model(),
        "training_devices": sorted({str(run.get("train", {}).get("device")) for run in runs}),
        "python": platform.python_version(),
        "libraries": {name: _version(name) for name in LIBRARIES},
        "bleu_signatures": [{"kind": kind, "signature": sig} for kind, sig in seen],
    }


def _provenance_lines(record: dict[str, Any]) -> list[str]:
    lines = [
        f"- git commit: {record['git_commit']}",
        f"- config hash: {record['config_hash']} (sha256 of the config as sorted JSON)",
        f"- platform: {record['platform']}",
        f"- CPU: {record['cpu']}, {record['cpu_cores']} cores",
        f"- CUDA device: {record['cuda_device']}",
        f"- training devices seen in runs: {', '.join(record['training_devices']) or 'none'}",
        f"- python {record['python']}; "
        + "; ".join(f"{name} {version}" for name, version in record["libraries"].items()),
        "- BLEU signatures seen in runs:",
    ]
    return lines + ([f"  - {s['kind']}: `{s['signature']}`" for s in record["bleu_signatures"]]
                    or ["  - none"])


def _settings(plan: Plan, root: Path, configs: list[Path]) -> dict[str, Any]:
    """The resolved training and decoding settings of every experiment behind the report's
    numbers (its cells' and the runs they learn from), as the results files record theirs
    (nmtbench.workflow.recorded_settings), and the names of the config files merged from
    outside the repository."""
    inside, outside = [], []
    for path in dict.fromkeys(Path(c).resolve() for c in configs):
        if path.is_relative_to(root):
            inside.append(path.relative_to(root).as_posix())
        else:
            outside.append(path.name)
    return {**recorded_settings.of_plan(plan, inside, plan.experiments_behind()),
            "merged_from_outside": outside}


def _settings_section(settings: dict[str, Any]) -> list[str]:
    """The Settings section: a committed report that no longer describes its config files
    fails the test suite."""
    intro = ("The settings the config files resolved for the experiments behind the numbers "
             "above (`nmtbench.workflow.recorded_settings`).")
    if settings["merged_from_outside"]:
        intro += (f" Also merged, from outside the repository and so not named below: "
                  f"{', '.join(settings['merged_from_outside'])}.")
    return recorded_settings.markdown(settings, intro=intro)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"

"""Each requested table's validation curves, in one figure beside the papers' figures
(`results/figures/<table>.curves.png` and `.pdf`): the validation loss after every epoch
against the updates made, one line per run behind the table's cells (a line style per seed),
read from the runs' `train_log.jsonl` (the trainer's `valid` events). A run is drawn once its
training has finished and is the one the config describes now (`Results.run_current`); the
caption names the others, unfinished or trained otherwise. The TensorBoard event files beside
each log hold the same curve and the training ones (nmtbench.training.curves).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from urllib.parse import quote

from nmtbench import layout
from nmtbench.errors import InputError, retrain
from nmtbench.fileio import read_jsonl
from nmtbench.records import COUNT, NON_NEGATIVE, checked_number
from nmtbench.report.figures import CAPTION_CHARS, HEIGHT_INCHES, PANEL_INCHES, Drawn, plt, save
from nmtbench.report.results import Results
from nmtbench.workflow.papers import Table
from nmtbench.workflow.plan import Cell, Plan

WIDTH_INCHES = PANEL_INCHES * 1.5  # the legend, one entry per run, beside the axes
SEED_STYLES = ("-", "--", ":", "-.")


def figure_name(table: Table) -> str:
    return layout.CURVES_FIGURE.format(table=table.name)


def table_runs(plan: Plan, table: Table) -> tuple[dict[tuple[str, str], list[str]], list[Cell]]:
    """The table's runs in row order, as (dataset, run) -> the experiments it serves there,
    and the cells no run serves (not implemented, or quoted by the paper)."""
    runs: dict[tuple[str, str], list[str]] = {}
    skipped: dict[str, Cell] = {}
    for _, _, cell in plan.table_cells(table):
        if cell.status != "ok":
            skipped.setdefault(cell.experiment, cell)
            continue
        served = runs.setdefault((cell.dataset, str(cell.run)), [])
        if cell.experiment not in served:
            served.append(cell.experiment)
    return runs, list(skipped.values())


def valid_losses(log: Path) -> list[tuple[int, float]]:
    """(updates made, validation loss) of each validation a train_log.jsonl records. A step
    that is not a count, or a loss that is not a finite number of at least 0 (a cross-entropy;
    the trainer stops before a non-finite one), which no training wrote, is an error naming
    the file, the validation and the key."""
    points = []
    valid = [record for record in read_jsonl(log) if record.get("event") == "valid"]
    for number, record in enumerate(valid, start=1):
        where = f"{log}: valid event {number}"
        for key in ("step", "valid_loss"):
            if key not in record:
                raise InputError(f"{where}: key {key!r} is missing")
        step = checked_number(where, "step", record["step"], COUNT)
        loss = checked_number(where, "valid_loss", record["valid_loss"], NON_NEGATIVE)
        points.append((int(step), float(loss)))
    return points


def _label(plan: Plan, dataset: str, run: str, seed: int) -> str:
    return f"{dataset}/{run}" + (f" seed {seed}" if len(plan.seeds) > 1 else "")


def _measure(plan: Plan, results: Results, runs: dict[tuple[str, str], list[str]]
             ) -> tuple[dict[str, list[tuple[int, float]]], dict[str, list[str]]]:
    """The curve of every finished, current run and seed by label; the labels of the others,
    by why ("unfinished", "other")."""
    series: dict[str, list[tuple[int, float]]] = {}
    left: dict[str, list[str]] = {"unfinished": [], "other": []}
    for (dataset, run), experiments in runs.items():
        cell = Cell(dataset, experiments[0], "ok", run)
        for seed in plan.seeds:
            label = _label(plan, dataset, run, seed)
            log = results.path(cell.file(layout.TRAIN_LOG, seed))
            if not (results.path(cell.file(layout.TRAIN_SUMMARY, seed)).is_file()
                    and log.is_file()):
                left["unfinished"].append(label)
            elif not results.run_current(cell, seed):
                left["other"].append(label)  # other settings or inputs than the config's now
            elif points := valid_losses(log):
                series[label] = points
            else:  # every epoch ends validating: no job writes the log again
                raise InputError(f"{log}: no validation, but the run finished training; only "
                                 f"training it again writes its log: {retrain(log.parent)}")
    return series, left


def _caption(plan: Plan, table: Table, runs: dict[tuple[str, str], list[str]],
             skipped: list[Cell], left: dict[str, list[str]]) -> str:
    seeds = " (a line style per seed)" if len(plan.seeds) > 1 else ""
    caption = (f"Validation loss (the training loss, label-smoothed where training smooths "
               f"it, per target token of the valid set) after every epoch against the updates "
               f"made, of the runs behind {table.name}: one line per run{seeds}, from its "
               f"{layout.TRAIN_LOG_NAME} (its {layout.TENSORBOARD_NAME}/ holds the same and the "
               "training curves).")
    served = [f"{dataset}/{run}: {', '.join(experiments)}"
              for (dataset, run), experiments in runs.items()]
    if served:
        caption += f" Runs and the experiments they serve: {'; '.join(served)}."
    if skipped:
        caption += (" Not plotted, no run: "
                    f"{', '.join(f'{c.experiment} ({c.status})' for c in skipped)}.")
    if left["unfinished"]:
        caption += f" Not plotted, runs unfinished: {', '.join(left['unfinished'])}."
    if left["other"]:
        caption += (" Not plotted, trained otherwise than the config says now: "
                    f"{', '.join(left['other'])}.")
    return caption


def draw(plan: Plan, results: Results, table: Table, out_dir: Path) -> Drawn:
    """Draw the table's validation curves into out_dir (PNG and PDF)."""
    runs, skipped = table_runs(plan, table)
    series, left = _measure(plan, results, runs)
    fig, ax = plt.subplots(figsize=(WIDTH_INCHES, HEIGHT_INCHES))
    for i, (dataset, run) in enumerate(runs):
        for k, seed in enumerate(plan.seeds):
            points = series.get(_label(plan, dataset, run, seed))
            if points:
                ax.plot([x for x, _ in points], [y for _, y in points],
                        SEED_STYLES[k % len(SEED_STYLES)], color=f"C{i % 10}", marker="o",
                        markersize=3, label=_label(plan, dataset, run, seed))
    ax.set_xlabel("updates")
    ax.set_ylabel("validation loss")
    if series:
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"{table.name}: validation curves", fontsize=11)
    caption = _caption(plan, table, runs, skipped, left)
    fig.text(0.01, 0.01, "\n".join(textwrap.wrap(
        caption, int(CAPTION_CHARS * WIDTH_INCHES / PANEL_INCHES))), fontsize=6, va="bottom")
    fig.subplots_adjust(bottom=0.32, top=0.88, left=0.08, right=0.66)
    return Drawn(save(fig, out_dir, figure_name(table)), caption, series)


def section(plan: Plan, results: Results, out_dir: Path, base: Path
            ) -> tuple[list[str], list[Path]]:
    """The report's section of every requested table's curves (images linked relative to
    `base`), and the files drawn."""
    lines, paths = ["## Validation curves", ""], []
    for table in plan.tables:
        drawn = draw(plan, results, table, out_dir)
        paths += drawn.paths
        png = Path(os.path.relpath(drawn.paths[0], base)).as_posix()
        lines += [f"### {table.name}: validation curves", "",
                  f"![{figure_name(table)}]({quote(png)})", "", drawn.caption, ""]
    return lines, paths

"""The papers' figures, redrawn from run directories with matplotlib (PNG and PDF).

Three kinds cover every figure the papers show: a *sweep* (one metric, optionally a second on a
twin y-axis, against a setting; AB-Net Figure 2), *curves* (valid BLEU per epoch or step from
the training logs; AB-Net Figure 3a, deep fusion Figure 3) and length *buckets* (BLEU by output
length, compare-mt's bucketing; BERT-KD Figure 2). Each figure carries a caption naming the runs
it plots; experiments that cannot be plotted yet are named there too.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from nmtbench import layout  # noqa: E402
from nmtbench.errors import InputError  # noqa: E402
from nmtbench.fileio import atomic_path, read_jsonl  # noqa: E402
from nmtbench.records import is_number, read_result  # noqa: E402
from nmtbench.report.results import Results  # noqa: E402
from nmtbench.workflow.metric_registry import METRICS  # noqa: E402
from nmtbench.workflow.papers import Figure  # noqa: E402
from nmtbench.workflow.plan import Cell, Plan, buckets_file  # noqa: E402


@dataclass
class Drawn:
    """What a figure shows: its files, caption, and every plotted series as (x, y) points."""

    paths: list[Path]
    caption: str
    series: dict[str, list[tuple[Any, float]]] = field(default_factory=dict)


def draw(plan: Plan, results: Results, figure: Figure, out_dir: Path) -> Drawn:
    """Draw one figure from the runs of its cells into out_dir (PNG and PDF)."""
    cells = plan.figure_cells(figure)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    series: dict[str, list[tuple[Any, float]]] = {}
    plotted = {"sweep": _sweep, "curve": _curve, "buckets": _buckets}[figure.kind](
        plan, results, figure, cells, ax, series)
    skipped = [f"{c.experiment} ({c.status})" for c in cells if c.status != "ok"]
    missing = [c.experiment for c in cells if c.status == "ok" and c.run not in plotted]
    runs = sorted({_run_path(c) for c in cells if c.run in plotted})
    paper = plan.catalogue.papers.get(figure.paper, {}).get("citation", figure.paper)
    caption = (f"{figure.caption.rstrip('.')}. Data: {', '.join(runs) or 'none yet'} "
               f"(seeds {', '.join(map(str, plan.seeds))}, {figure.split} split). "
               f"Source: {figure.name}; {paper}")
    shared = {c.run: [d.experiment for d in cells if d.run == c.run] for c in cells
              if c.run in plotted}
    for run, members in sorted(shared.items()):
        if len(members) > 1:
            caption += (f" {', '.join(members)} share run {run} (identical settings on "
                        "this dataset), so their marks coincide.")
    if figure.kind == "curve":
        caption += " Curves: greedy BLEU on the valid set after every epoch."
    caption += _back_translation_note(plan, results, cells)
    if skipped:
        caption += f" Not plotted, no method yet: {', '.join(skipped)}."
    if missing:
        caption += f" Not plotted, runs unfinished: {', '.join(missing)}."
    fig.text(0.01, 0.01, "\n".join(textwrap.wrap(caption, 110)), fontsize=6, va="bottom")
    fig.subplots_adjust(bottom=0.32, left=0.12, right=0.86)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{figure.name}.png", out_dir / f"{figure.name}.pdf"]
    # through a temporary file each: a killed report never leaves a truncated figure
    with atomic_path(paths[0]) as tmp:
        fig.savefig(tmp, format="png", dpi=150, metadata={"Software": None})
    with atomic_path(paths[1]) as tmp:
        fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "Producer": None})
    plt.close(fig)
    return Drawn(paths, caption, series)


def _back_translation_note(plan: Plan, results: Results, cells: list[Cell]) -> str:
    """Which reverse model translated the back-translated pairs of the plotted runs, and how
    well it translates (its test BLEU)."""
    found = {bt for c in cells if c.status == "ok"
             for bt in [plan.back_translation(c.dataset, c.experiment)] if bt is not None}
    notes = []
    for bt in sorted(found, key=lambda b: (b.reverse.dataset, b.reverse.run)):
        bleu = _mean([results.measure(bt.reverse, "test", "bleu_tokenized", s, None)
                      for s in plan.seeds])
        notes.append(f" Back-translations: up to {bt.sentences} target-side sentences "
                     f"translated by {_run_path(bt.reverse)} "
                     f"({bt.reverse.experiment}; test BLEU "
                     f"{'not yet measured' if bleu is None else f'{bleu:.2f}'}).")
    return "".join(notes)


def _run_path(cell: Cell) -> str:
    """The directory of the cell's run, all seeds (the caption names the seeds)."""
    return layout.RUN_SEEDS.format(dataset=cell.dataset, run=cell.run)


def _mean(values: list[float | None]) -> float | None:
    done = [v for v in values if v is not None]
    return statistics.mean(done) if done and len(done) == len(values) else None


def _sweep(plan: Plan, results: Results, figure: Figure, cells: list[Cell], ax,
           series: dict) -> set[str]:
    spec = figure.spec
    xs, ys, y2s, plotted = [], [], [], set()
    setting = spec["x"].get("setting")
    for x, cell in zip(spec["x"]["values"], cells, strict=True):
        if cell.status != "ok":
            continue
        if setting is not None:  # where the run is, on its dataset (unset: the paper's x)
            x = plan.train_settings(cell.dataset, cell.experiment).get(setting, x)
        y = _mean([results.measure(cell, figure.split, spec["y"], s, None) for s in plan.seeds])
        if y is None:
            continue
        y2 = (_mean([results.measure(cell, figure.split, spec["y2"], s, None)
                     for s in plan.seeds]) if spec.get("y2") else None)
        xs.append(x)
        ys.append(y)
        y2s.append(y2)
        plotted.add(cell.run)
    series[spec["y"]] = list(zip(xs, ys, strict=True))
    ax.plot(xs, ys, "o-", color="tab:blue", label=f"ours: {METRICS[spec['y']].label}")
    reported = spec.get("reported", {})
    if reported.get("y"):
        ax.plot(spec["x"]["values"], reported["y"], "o--", color="tab:blue", alpha=0.5,
                label="paper")
    ax.set_xlabel(spec["x"]["label"])
    ax.set_ylabel(METRICS[spec["y"]].label, color="tab:blue")
    if len(set(spec["x"]["values"])) > 1 and min(spec["x"]["values"]) > 0 and (
            max(spec["x"]["values"]) / min(spec["x"]["values"]) >= 8):
        ax.set_xscale("log", base=2)
    if spec.get("y2"):
        series[spec["y2"]] = list(zip(xs, y2s, strict=True))
        twin = ax.twinx()
        twin.plot(xs, y2s, "s-", color="tab:orange",
                  label=f"ours: {METRICS[spec['y2']].label}")
        if reported.get("y2"):
            twin.plot(spec["x"]["values"], reported["y2"], "s--", color="tab:orange", alpha=0.5)
        twin.set_ylabel(METRICS[spec["y2"]].label, color="tab:orange")
        handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        ax.legend(handles=handles, fontsize=8)
    else:
        ax.legend(fontsize=8)
    ax.set_title(figure.name)
    return plotted


def _curve(plan: Plan, results: Results, figure: Figure, cells: list[Cell], ax,
           series: dict) -> set[str]:
    axis = figure.spec["axis"]
    plotted = set()
    for cell, label in zip(cells, figure.spec["series"].values(), strict=True):
        if cell.status != "ok":
            continue
        per_seed = [_valid_bleu(results.path(cell.file(layout.TRAIN_LOG, s)), axis)
                    for s in plan.seeds]
        if not all(per_seed):
            continue
        xs = sorted(set.intersection(*(set(points) for points in per_seed)))
        ys = [statistics.mean(p[x] for p in per_seed) for x in xs]
        series[label] = list(zip(xs, ys, strict=True))
        ax.plot(xs, ys, label=label)
        plotted.add(cell.run)
    ax.set_xlabel(axis)
    ax.set_ylabel("BLEU on valid (greedy)")
    ax.set_title(figure.name)
    if plotted:
        ax.legend(fontsize=8)
    return plotted


def _valid_bleu(log: Path, axis: str) -> dict[int, float]:
    """{epoch or step: valid BLEU} from a train_log.jsonl (the trainer's `valid` events; a
    line a kill cut short is left out, as the trainer leaves it out when it resumes)."""
    if not log.is_file():
        return {}
    points = {record.get(axis): record.get("valid_bleu") for record in read_jsonl(log)
              if record.get("event") == "valid" and "valid_bleu" in record}
    for x, bleu in points.items():
        if not (is_number(x) and is_number(bleu)):
            raise InputError(f"{log}: a valid event's {axis} and valid_bleu must be numbers, "
                             f"got {x!r} and {bleu!r}")
    return {x: float(bleu) for x, bleu in points.items()}


def _bucket_record(path: Path) -> dict | None:
    """A `buckets` job's record (None while none is there); one without a list of
    {bucket, bleu} entries, bleu a number or null, is an error naming it."""
    data = read_result(path, keys=("buckets",))
    if data is not None and not (isinstance(data["buckets"], list) and all(
            isinstance(b, dict) and "bucket" in b and (b.get("bleu") is None
                                                       or is_number(b["bleu"]))
            for b in data["buckets"])):
        raise InputError(f"{path}: key 'buckets' must be a list of {{bucket, bleu}} entries")
    return data


def _buckets(plan: Plan, results: Results, figure: Figure, cells: list[Cell], ax,
             series: dict) -> set[str]:
    cutoffs = figure.spec["bucket_cutoffs"]
    bars, labels, plotted = [], [], set()
    for cell, label in zip(cells, figure.spec["series"].values(), strict=True):
        if cell.status != "ok":
            continue
        data = [_bucket_record(results.path(buckets_file(cell, figure.split, cutoffs, s)))
                for s in plan.seeds]
        if not all(data):
            continue
        names = [b["bucket"] for b in data[0]["buckets"]]
        means = [_mean([d["buckets"][i]["bleu"] for d in data]) for i in range(len(names))]
        bars.append([math.nan if m is None else m for m in means])  # empty bucket: no bar
        labels.append(label)
        series[label] = list(zip(names, bars[-1], strict=True))
        plotted.add(cell.run)
    if bars:
        width = 0.8 / len(bars)
        for k, (values, label) in enumerate(zip(bars, labels, strict=True)):
            ax.bar([i + k * width for i in range(len(values))], values, width, label=label)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names)
        ax.legend(fontsize=8)
    ax.set_xlabel("output length (tokens)")
    ax.set_ylabel(f"BLEU on {figure.split}")
    ax.set_title(figure.name)
    return plotted

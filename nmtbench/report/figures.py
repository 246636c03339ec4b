"""The papers' figures, redrawn from run directories with matplotlib (PNG and PDF).

Three kinds cover every figure the papers show: a *sweep* (one metric, optionally a second on a
twin y-axis, against a setting; AB-Net Figure 2), *curves* (valid BLEU per epoch or step from
the training logs; AB-Net Figure 3a, deep fusion Figure 3) and length *buckets* (BLEU by output
length, compare-mt's bucketing; BERT-KD Figure 2). Each kind measures our series from the runs
and plots series on an axis; the paper's values (`reported`) go through the same plotting. On
the paper's own data both share one axis; on other data (the toy world) the paper's and ours
are two panels side by side, each on its own axes, since one's scale says nothing of the
other's. The caption says what each panel shows and names the runs; experiments that cannot be
plotted yet are named there too.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from compare_mt.bucketers import LengthSentenceBucketer  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from nmtbench import layout  # noqa: E402
from nmtbench.errors import InputError  # noqa: E402
from nmtbench.fileio import atomic_path, read_jsonl  # noqa: E402
from nmtbench.records import SCORE, checked_number, is_number, read_result  # noqa: E402
from nmtbench.report.results import Results  # noqa: E402
from nmtbench.workflow.metric_registry import METRICS  # noqa: E402
from nmtbench.workflow.papers import Figure  # noqa: E402
from nmtbench.workflow.plan import Cell, Plan, buckets_file  # noqa: E402
from nmtbench.workflow.run_inputs import back_translation  # noqa: E402

# Plotted points by series: a sweep's by metric, curves' and buckets' by legend label
Series = dict[str, list[tuple[Any, float]]]
PANEL_INCHES, HEIGHT_INCHES = 6.4, 4.2
CAPTION_CHARS = 110  # per line of caption under one panel


@dataclass
class Drawn:
    """What a figure shows: its files, caption, and every series of ours as (x, y) points."""

    paths: list[Path]
    caption: str
    series: Series = field(default_factory=dict)


@dataclass(frozen=True)
class Kind:
    """One kind of figure: our series measured from the runs (and the runs plotted), ours and
    the paper's plotted on one axis, and what its axes show, for the caption."""

    measure: Callable[[Plan, Results, Figure, list[Cell]], tuple[Series, set[str]]]
    plot: Callable[[Axes, Figure, Series, Series], None]
    shows: Callable[[Figure], str]


def draw(plan: Plan, results: Results, figure: Figure, out_dir: Path) -> Drawn:
    """Draw one figure from the runs of its cells into out_dir (PNG and PDF)."""
    cells = plan.figure_cells(figure)
    kind = KINDS[figure.kind]
    ours, plotted = kind.measure(plan, results, figure, cells)
    paper = _paper_series(figure)
    dataset = cells[0].dataset
    comparable = plan.comparable(figure.dataset, dataset)
    where = dataset + (" (a toy world)" if plan.config["datasets"][dataset]["kind"] == "toyworld"
                       else "")
    if paper and not comparable:
        panels = [(f"paper: {figure.dataset}", {}, paper), (f"this run: {where}", ours, {})]
    else:
        panels = [(f"this run{' and the paper' if paper else ''}: {where}", ours, paper)]
    width = PANEL_INCHES * (1 + 0.6 * (len(panels) - 1))
    fig, axes = plt.subplots(1, len(panels), figsize=(width, HEIGHT_INCHES), squeeze=False)
    for ax, (title, mine, theirs) in zip(axes[0], panels, strict=True):
        kind.plot(ax, figure, mine, theirs)
        ax.set_title(title, fontsize=10)
    fig.suptitle(figure.name, fontsize=11)
    caption = _caption(plan, results, figure, cells, plotted,
                       _panels(plan, figure, cells, plotted, where, comparable, paper))
    fig.text(0.01, 0.01, "\n".join(textwrap.wrap(caption, int(CAPTION_CHARS * width
                                                                / PANEL_INCHES))),
             fontsize=6, va="bottom")
    fig.subplots_adjust(bottom=0.32, top=0.84, left=0.12 * PANEL_INCHES / width,
                        right=1 - 0.14 * PANEL_INCHES / width, wspace=0.45)
    return Drawn(save(fig, out_dir, figure.name), caption, ours)


def save(fig: plt.Figure, out_dir: Path, name: str) -> list[Path]:
    """Write `fig` as out_dir/<name>.png and .pdf (without dates: the same figure is the same
    bytes) and close it; the two paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf"]
    # through a temporary file each: a killed report never leaves a truncated figure
    with atomic_path(paths[0]) as tmp:
        fig.savefig(tmp, format="png", dpi=150, metadata={"Software": None})
    with atomic_path(paths[1]) as tmp:
        fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "Producer": None})
    plt.close(fig)
    return paths


def _paper_series(figure: Figure) -> Series:
    """The paper's values (`reported` in papers/*.yaml) as series keyed like ours: a sweep's
    by metric at its x values, curves' by legend label at the paper's 1st, 2nd... epoch or
    step, buckets' by legend label per bucket; values the paper does not state left out."""
    spec = figure.spec
    names = {"y": spec.get("y"), "y2": spec.get("y2")} if figure.kind == "sweep" else spec["series"]
    series = {}
    for key, values in spec.get("reported", {}).items():
        if not values:
            continue
        xs = (spec["x"]["values"] if figure.kind == "sweep"
              else _bucket_names(figure) if figure.kind == "buckets"
              else range(1, len(values) + 1))
        points = [(x, y) for x, y in zip(xs, values, strict=True) if y is not None]
        if points:
            series[names[key]] = points
    return series


def _panels(plan: Plan, figure: Figure, cells: list[Cell], plotted: set[str], where: str,
            comparable: bool, paper: Series) -> str:
    """What each panel shows: the paper's values and which runs of ours, on what data."""
    runs = (f"{', '.join(sorted({_run_path(c) for c in cells if c.run in plotted})) or 'none yet'}"
            f" (seeds {', '.join(map(str, plan.seeds))})")
    if paper and not comparable:
        return (f"Left: the paper's values on {figure.dataset}, where its text states them. "
                f"Right: this run on {where}: {runs}. Other data than the paper's, so each "
                "panel has its own axes.")
    if paper:
        return (f"This run on {where}: {runs}; and, marked paper, the paper's own values on "
                "the same data.")
    other = "" if comparable else f", not the paper's {figure.dataset}"
    return f"This run alone, on {where}{other}: {runs}; the paper states no values of it."


def _caption(plan: Plan, results: Results, figure: Figure, cells: list[Cell],
             plotted: set[str], panels: str) -> str:
    skipped = [f"{c.experiment} ({c.status})" for c in cells if c.status != "ok"]
    missing = [c.experiment for c in cells if c.status == "ok" and c.run not in plotted]
    paper = plan.catalogue.papers.get(figure.paper, {}).get("citation", figure.paper)
    caption = (f"{KINDS[figure.kind].shows(figure)}. {panels} "
               f"Source: {figure.name}; {paper}")
    shared = {c.run: [d.experiment for d in cells if d.run == c.run] for c in cells
              if c.run in plotted}
    for run, members in sorted(shared.items()):
        if len(members) > 1:
            caption += (f" {', '.join(members)} share run {run} (identical settings on "
                        "this dataset), so their marks coincide.")
    caption += _back_translation_note(plan, results, cells)
    if skipped:
        caption += f" Not plotted, no method yet: {', '.join(skipped)}."
    if missing:
        caption += f" Not plotted, runs unfinished: {', '.join(missing)}."
    return caption


def _back_translation_note(plan: Plan, results: Results, cells: list[Cell]) -> str:
    """Which reverse model translated the back-translated pairs of the plotted runs, and how
    well it translates (its test BLEU)."""
    found = {bt for c in cells if c.status == "ok"
             for bt in [back_translation.source(plan, c.dataset, c.experiment)] if bt is not None}
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


def _sweep(plan: Plan, results: Results, figure: Figure,
           cells: list[Cell]) -> tuple[Series, set[str]]:
    """Our mean of y (and y2) at each x: the paper's x, or the run's own `x.setting`."""
    spec = figure.spec
    points: dict[str, list[tuple[Any, float | None]]] = {m: [] for m in _sweep_metrics(figure)}
    plotted = set()
    setting = spec["x"].get("setting")
    for x, cell in zip(spec["x"]["values"], cells, strict=True):
        if cell.status != "ok":
            continue
        if setting is not None:  # where the run is, on its dataset (unset: the paper's x)
            x = plan.train_settings(cell.dataset, cell.experiment).get(setting, x)
        means = {m: _mean([results.measure(cell, figure.split, m, s, None) for s in plan.seeds])
                 for m in points}
        if means[spec["y"]] is None:
            continue
        for metric, y in means.items():
            points[metric].append((x, y))
        plotted.add(cell.run)
    return points, plotted


def _sweep_metrics(figure: Figure) -> list[str]:
    return [figure.spec["y"], *([figure.spec["y2"]] if figure.spec.get("y2") else [])]


def _plot_sweep(ax: Axes, figure: Figure, ours: Series, paper: Series) -> None:
    """y on the left axis, y2 (where there is one to draw) on a twin on the right; ours
    solid, the paper's dashed with open marks. Ticks at the paper's x values (at the runs'
    own, where x is a setting the dataset may scale) and at every point drawn."""
    spec = figure.spec
    axes = [ax, *([ax.twinx()] if any(spec.get("y2") in s for s in (ours, paper)) else [])]
    for on, metric, marker, colour in zip(axes, _sweep_metrics(figure), "os",
                                          ("tab:blue", "tab:orange"), strict=False):
        for who, series, style in (("ours", ours, {"ls": "-"}),
                                   ("paper", paper, {"ls": "--", "mfc": "none"})):
            if metric in series:
                on.plot(*_xy(series[metric]), marker=marker, color=colour,
                        label=f"{who}: {METRICS[metric].label}", **style)
        on.set_ylabel(METRICS[metric].label, color=colour)
    ax.set_xlabel(spec["x"]["label"])
    xs = spec["x"]["values"]
    log = len(set(xs)) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 8
    if log:
        ax.set_xscale("log", base=2)
    drawn = {x for series in (ours, paper) for points in series.values() for x, _ in points}
    ticks = sorted(drawn | (set() if spec["x"].get("setting") else set(xs)))
    ax.set_xticks(ticks)
    if len(ticks) > 1:  # every tick in view, with a margin (a factor on a log axis)
        lo, hi = ticks[0], ticks[-1]
        ax.set_xlim(*((lo / (hi / lo) ** 0.05, hi * (hi / lo) ** 0.05) if log
                      else (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))))
    ax.legend(handles=[h for on in axes for h in on.get_legend_handles_labels()[0]], fontsize=8)


def _sweep_shows(figure: Figure) -> str:
    spec = figure.spec
    y2 = f" (left axis) and {METRICS[spec['y2']].label} (right axis)" if spec.get("y2") else ""
    return (f"{METRICS[spec['y']].label}{y2} on the {figure.split} split against "
            f"{spec['x']['label']}")


def _xy(points: list[tuple[Any, float]]) -> tuple[list[Any], list[float]]:
    return [x for x, _ in points], [y for _, y in points]


def _colours(figure: Figure) -> dict[str, str]:
    """One colour per legend label, the same in every panel."""
    return {label: f"C{i}" for i, label in enumerate(figure.spec["series"].values())}


def _curve(plan: Plan, results: Results, figure: Figure,
           cells: list[Cell]) -> tuple[Series, set[str]]:
    """Our mean valid BLEU at each epoch or step every seed has."""
    axis = figure.spec["axis"]
    series, plotted = {}, set()
    for cell, label in zip(cells, figure.spec["series"].values(), strict=True):
        if cell.status != "ok":
            continue
        per_seed = [_valid_bleu(results.path(cell.file(layout.TRAIN_LOG, s)), axis)
                    for s in plan.seeds]
        if not all(per_seed):
            continue
        xs = sorted(set.intersection(*(set(points) for points in per_seed)))
        series[label] = [(x, statistics.mean(p[x] for p in per_seed)) for x in xs]
        plotted.add(cell.run)
    return series, plotted


def _plot_curves(ax: Axes, figure: Figure, ours: Series, paper: Series) -> None:
    """A line per series; ours solid, the paper's dashed."""
    colours = _colours(figure)
    for who, series, line in (("", ours, "-"), ("paper: ", paper, "--")):
        for label, points in series.items():
            ax.plot(*_xy(points), line, color=colours[label], label=who + label)
    ax.set_xlabel(figure.spec["axis"])
    ax.set_ylabel("BLEU on valid (greedy)")
    if ours or paper:
        ax.legend(fontsize=8)


def _curve_shows(figure: Figure) -> str:
    return (f"Greedy BLEU on the valid set after every epoch, against the "
            f"{figure.spec['axis']}, of {', '.join(figure.spec['series'].values())}")


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
        checked_number(log, "valid_bleu", bleu, SCORE)
    return {x: float(bleu) for x, bleu in points.items()}


def _bucket_record(path: Path, names: list[str]) -> dict | None:
    """A `buckets` job's record (None while none is there); one without a list of
    {bucket, bleu} entries, bleu a number or null, one for each of `names` in order, is an
    error naming it."""
    data = read_result(path, keys=("buckets",))
    if data is not None and not (isinstance(data["buckets"], list) and all(
            isinstance(b, dict) and "bucket" in b and (b.get("bleu") is None
                                                       or is_number(b["bleu"]))
            for b in data["buckets"])):
        raise InputError(f"{path}: key 'buckets' must be a list of {{bucket, bleu}} entries")
    for i, bucket in enumerate(data["buckets"] if data is not None else []):
        if bucket["bleu"] is not None:
            checked_number(path, f"buckets.{i}.bleu", bucket["bleu"], SCORE)
    if data is not None and [b["bucket"] for b in data["buckets"]] != names:
        raise InputError(f"{path}: key 'buckets' must be the buckets {', '.join(names)} in "
                         "this order")
    return data


def _buckets(plan: Plan, results: Results, figure: Figure,
             cells: list[Cell]) -> tuple[Series, set[str]]:
    """Our mean BLEU per bucket (NaN where a seed's bucket is empty: no bar)."""
    series, plotted = {}, set()
    for cell, label in zip(cells, figure.spec["series"].values(), strict=True):
        if cell.status != "ok":
            continue
        data = [_current_buckets(results, cell, figure, s) for s in plan.seeds]
        if not all(data):
            continue
        means = [_mean([d["buckets"][i]["bleu"] for d in data])
                 for i in range(len(data[0]["buckets"]))]
        series[label] = [(b["bucket"], math.nan if m is None else m)
                         for b, m in zip(data[0]["buckets"], means, strict=True)]
        plotted.add(cell.run)
    return series, plotted


def _current_buckets(results: Results, cell: Cell, figure: Figure, seed: int) -> dict | None:
    """One seed's bucket record, if it bucketed the cell's current hypotheses and reference
    (`Results.made_from_hypotheses`); otherwise None, and the file is listed as left out (a
    record made before buckets named their inputs is too: `snakemake --forcerun buckets`
    makes it again)."""
    path = results.path(buckets_file(cell, figure.split, figure.spec["bucket_cutoffs"], seed))
    data = _bucket_record(path, _bucket_names(figure))
    if data is not None and not results.made_from_hypotheses(data, cell, seed, figure.split):
        results.stale.add(path)
        return None
    return data


def _bucket_names(figure: Figure) -> list[str]:
    """compare-mt's labels of the figure's buckets ("<8", "[8,16)", ">=16")."""
    return LengthSentenceBucketer(bucket_cutoffs=list(figure.spec["bucket_cutoffs"])).bucket_strs


def _plot_buckets(ax: Axes, figure: Figure, ours: Series, paper: Series) -> None:
    """Grouped bars, a bar per series in each bucket; the paper's hatched and pale."""
    colours = _colours(figure)
    bars = [(label, label, points, {}) for label, points in ours.items()] + [
        (f"paper: {label}", label, points, {"hatch": "//", "alpha": 0.5})
        for label, points in paper.items()]
    names = _bucket_names(figure)
    at = {name: i for i, name in enumerate(names)}
    width = 0.8 / max(len(bars), 1)
    for k, (legend, label, points, style) in enumerate(bars):
        ax.bar([at[name] + k * width for name, _ in points], [y for _, y in points], width,
               color=colours[label], label=legend, **style)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names)
    if bars:
        ax.legend(fontsize=8)
    ax.set_xlabel("output length (tokens)")
    ax.set_ylabel(f"BLEU on {figure.split}")


def _buckets_shows(figure: Figure) -> str:
    return (f"BLEU on the {figure.split} split by output length in tokens, of "
            f"{', '.join(figure.spec['series'].values())}")


KINDS = {"sweep": Kind(_sweep, _plot_sweep, _sweep_shows),
         "curve": Kind(_curve, _plot_curves, _curve_shows),
         "buckets": Kind(_buckets, _plot_buckets, _buckets_shows)}

"""`figures.draw`: each kind drawn from fabricated runs; the plotted series equal the files."""

from __future__ import annotations

import copy
import json
import math
import statistics
from pathlib import Path

import matplotlib.image
import pytest
from fabricated_runs import (
    BUCKET_LABELS,
    BUCKETS,
    BUCKETS_BLEU,
    CURVE,
    CURVES,
    DATASET,
    NUMBERS,
    PAPER_YAML,
    SWEEP,
    TAG_BIG,
    fabricate,
    make_config,
    make_plan,
    write_papers,
)

from nmtbench.errors import InputError
from nmtbench.report import figures
from nmtbench.report.results import Results

SEEDS = [1, 2]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, figures.Drawn], Path]:
    """Every figure drawn once from one fabricated results directory."""
    tmp = tmp_path_factory.mktemp("figures")
    plan = make_plan(make_config(SEEDS, tables=[SWEEP, CURVE, BUCKETS]),
                     write_papers(tmp / "papers"))
    fabricate(plan, tmp / "results")
    results = Results(plan, tmp / "results")
    out = tmp / "out"
    return {f.name: figures.draw(plan, results, f, out) for f in plan.figures}, out


def mean(experiment: str, key: str) -> float:
    return statistics.mean(NUMBERS[experiment][s][key] for s in SEEDS)


@pytest.mark.parametrize("name", [SWEEP, CURVE, BUCKETS])
def test_files_are_written_and_valid(drawn, name: str) -> None:
    figs, out = drawn
    png, pdf = figs[name].paths
    assert (png, pdf) == (out / f"{name}.png", out / f"{name}.pdf")
    assert png.stat().st_size > 0 and pdf.stat().st_size > 0
    image = matplotlib.image.imread(png)
    # 6.4 x 4.2 inches at 150 dpi, RGBA
    assert image.shape == (630, 960, 4)
    assert image.std() > 0  # something is drawn
    assert pdf.read_bytes().startswith(b"%PDF-")


def test_sweep_series(drawn) -> None:
    series = drawn[0][SWEEP].series
    # x values of the implemented experiments only (abnet at 256 is not implemented)
    assert series == {
        "bleu_tokenized": [(512, mean("trm-base", "tokenized")),
                           (1024, mean("trm-big", "tokenized"))],
        "params_trained": [(512, mean("trm-base", "trained")),
                           (1024, mean("trm-big", "trained"))],
    }
    assert series["bleu_tokenized"] == [(512, 27.5), (1024, 28.5)]
    assert series["params_trained"] == [(512, 74_000_000.0), (1024, 765_432.0)]


def test_curve_series(drawn) -> None:
    series = drawn[0][CURVE].series
    expected = {}
    for experiment, label in (("trm-base", "Base"), ("trm-big", "Big")):
        per_seed = [dict(CURVES[experiment][s]) for s in SEEDS]
        epochs = sorted(set.intersection(*(set(p) for p in per_seed)))
        expected[label] = [(e, statistics.mean(p[e] for p in per_seed)) for e in epochs]
    assert series == expected
    # epoch 4 is in seed 1 only; the valid event without valid_bleu (epoch 9) is skipped
    assert series["Base"] == [(1, 11.0), (2, 21.0), (3, 31.0)]
    assert series["Big"] == [(1, 6.0), (2, 26.0), (3, 40.5)]


def test_buckets_series(drawn) -> None:
    series = drawn[0][BUCKETS].series
    assert list(series) == ["Base", "Big"]
    base, big = series["Base"], series["Big"]
    assert [name for name, _ in base] == [name for name, _ in big] == BUCKET_LABELS
    assert [v for _, v in big] == [statistics.mean(BUCKETS_BLEU["trm-big"][s][i] for s in SEEDS)
                                   for i in range(3)] == [26.0, 35.5, 13.0]
    assert [v for _, v in base][:2] == [21.0, 30.5]
    assert math.isnan(base[2][1])  # empty in seed 1: no bar, not a mean of one seed


@pytest.mark.parametrize(("name", "shows"), [
    (SWEEP, "BLEU (tokenized) (left axis) and #trained parameters (right axis) on the test "
            "split against d_model. "),
    (CURVE, "Greedy BLEU on the valid set after every epoch, against the epoch, of Base, Big, "
            "AB-Net. "),
    (BUCKETS, "BLEU on the test split by output length in tokens, of Base, Big, AB-Net. ")])
def test_caption_names_runs_and_unimplemented(drawn, name: str, shows: str) -> None:
    caption = drawn[0][name].caption
    assert caption.startswith(shows)
    assert (f"This run on {DATASET}: results/runs/{DATASET}/trm-base, "
            f"results/runs/{DATASET}/trm-big (seeds 1, 2); and, marked paper, the paper's own "
            "values on the same data.") in caption
    assert f"Source: {name}; Doe, Roe. TOY 2024." in caption
    assert caption.endswith("Not plotted, no method yet: abnet (not implemented).")
    assert "unfinished" not in caption


# --- the paper's values: beside ours on its data, a panel of their own on other data --------
# What each figure's `reported` draws (the sweep's first x value and the buckets' middle
# bucket are not stated; trm-base states no buckets)
PAPER_POINTS = {
    SWEEP: {"paper: BLEU (tokenized)": [(512, 27.3), (1024, 28.4)]},
    CURVE: {"paper: Base": [(1, 15.0), (2, 25.0)]},
    BUCKETS: {"paper: Big": [("<8", 30.0), (">=16", 20.0)]},
}
OURS_LABELS = {SWEEP: {"ours: BLEU (tokenized)", "ours: #trained parameters"},
               CURVE: {"Base", "Big"}, BUCKETS: {"Base", "Big"}}
TOY_TITLE = "this run: toy (a toy world)"


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> list:
    """The matplotlib figures draw() makes, kept open to be looked at."""
    figs: list = []
    close = figures.plt.close
    monkeypatch.setattr(figures.plt, "close", figs.append)
    yield figs
    for fig in figs:
        close(fig)


def panels(fig) -> dict[str, dict[str, list]]:
    """What each panel of a drawn figure plots, by its title: every line's points and every
    group of bars' (bucket name, height), a twin y-axis counted with its panel."""
    places: dict[tuple, list] = {}
    for ax in fig.axes:
        places.setdefault(ax.get_position().bounds, []).append(ax)
    shown = {}
    for axes in places.values():
        plotted = {}
        for ax in axes:
            for line in ax.get_lines():
                plotted[line.get_label()] = [tuple(p) for p in line.get_xydata()]
            for bars in ax.containers:  # bar k of bucket i is centred at i + k * width
                plotted[bars.get_label()] = [(BUCKET_LABELS[int(b.get_x() + b.get_width() / 2)],
                                              b.get_height()) for b in bars]
        shown[next(ax.get_title() for ax in axes if ax.get_title())] = plotted
    return shown


def draw_one(tmp_path: Path, name: str, toy: bool, paper: dict = PAPER_YAML):
    """One figure drawn from fabricated runs: what draw() returns, and the figure it drew."""
    plan = make_plan(make_config(SEEDS, toy=toy, tables=[name]),
                     write_papers(tmp_path / "papers", paper))
    fabricate(plan, tmp_path / "results")
    return figures.draw(plan, Results(plan, tmp_path / "results"), plan.figures[0],
                        tmp_path / "out")


@pytest.mark.parametrize("name", [SWEEP, CURVE, BUCKETS])
def test_on_the_papers_data_its_values_share_our_axis(tmp_path: Path, kept, name: str) -> None:
    drawn = draw_one(tmp_path, name, toy=False)
    ((title, plotted),) = panels(kept[0]).items()
    assert title == f"this run and the paper: {DATASET}"
    assert {k: v for k, v in plotted.items() if k.startswith("paper")} == PAPER_POINTS[name]
    assert set(plotted) - set(PAPER_POINTS[name]) == OURS_LABELS[name]
    if name == CURVE:
        assert plotted["Base"] == drawn.series["Base"]


@pytest.mark.parametrize("name", [SWEEP, CURVE, BUCKETS])
def test_on_other_data_the_papers_values_get_a_panel_of_their_own(tmp_path: Path, kept,
                                                                 name: str) -> None:
    """The toy world: the paper's values on the left on their own axes, ours on the right,
    and the caption says which is which."""
    drawn = draw_one(tmp_path, name, toy=True)
    assert panels(kept[0]) == {
        f"paper: {DATASET}": PAPER_POINTS[name],
        TOY_TITLE: panels(kept[0])[TOY_TITLE]}
    ours = panels(kept[0])[TOY_TITLE]
    assert set(ours) == OURS_LABELS[name]  # none of the paper's
    if name == SWEEP:
        assert ours["ours: BLEU (tokenized)"] == drawn.series["bleu_tokenized"]
    panel_axes = {ax.get_position().bounds for ax in kept[0].axes}
    assert len(panel_axes) == 2
    assert (f"Left: the paper's values on {DATASET}, where its text states them. Right: this "
            "run on toy (a toy world): results/runs/toy/trm-base (seeds 1, 2). Other data than "
            "the paper's, so each panel has its own axes.") in drawn.caption
    assert not any(word in drawn.caption.lower() for word in ("blue", "red", "orange", "colo"))
    # two panels side by side: 1.6 times as wide as one
    assert matplotlib.image.imread(drawn.paths[0]).shape == (630, 1536, 4)


def test_a_figure_the_paper_states_no_values_of_is_ours_alone(tmp_path: Path, kept) -> None:
    paper = copy.deepcopy(PAPER_YAML)
    del paper["figures"]["figure3"]["reported"]
    drawn = draw_one(tmp_path, BUCKETS, toy=True, paper=paper)
    assert list(panels(kept[0])) == [TOY_TITLE]
    assert (f"This run alone, on toy (a toy world), not the paper's {DATASET}: "
            "results/runs/toy/trm-base (seeds 1, 2); the paper states no values of it.") in (
        drawn.caption)


def test_unfinished_runs_are_named_not_plotted(tmp_path: Path) -> None:
    plan = make_plan(make_config(SEEDS, tables=[SWEEP, CURVE, BUCKETS]),
                     write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    big2 = tmp_path / "results" / "runs" / DATASET / "trm-big" / "seed2"
    (big2 / "train_log.jsonl").unlink()
    (big2 / f"buckets.test.{TAG_BIG}.8-16.json").unlink()
    (big2 / f"metrics.test.{TAG_BIG}.json").unlink()
    results = Results(plan, tmp_path / "results")
    for figure in plan.figures:
        result = figures.draw(plan, results, figure, tmp_path / "out")
        assert f"This run on {DATASET}: results/runs/{DATASET}/trm-base (seeds" in result.caption
        assert result.caption.endswith("Not plotted, no method yet: abnet (not implemented). "
                                       "Not plotted, runs unfinished: trm-big.")
        assert all(p.stat().st_size > 0 for p in result.paths)
        if figure.kind == "sweep":
            assert result.series["bleu_tokenized"] == [(512, 27.5)]
        else:
            assert list(result.series) == ["Base"]


def test_corrupt_train_log_is_named_with_its_line(tmp_path: Path) -> None:
    plan = make_plan(make_config([1], tables=[CURVE]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    log = tmp_path / "results" / "runs" / DATASET / "trm-big" / "seed1" / "train_log.jsonl"
    lines = log.read_text().splitlines()
    lines[2] = lines[2][:-3]
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=f"{log}: line 3: invalid JSON"):
        figures.draw(plan, Results(plan, tmp_path / "results"), plan.figures[0], tmp_path)


def test_buckets_other_than_the_figures_are_named_with_their_file(tmp_path: Path) -> None:
    plan = make_plan(make_config([1], tables=[BUCKETS]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    record = (tmp_path / "results" / "runs" / DATASET / "trm-big" / "seed1" /
              f"buckets.test.{TAG_BIG}.8-16.json")
    record.write_text(record.read_text().replace('"<8"', '"<10"'))
    with pytest.raises(InputError, match=f"^{record}: key 'buckets' must be the buckets <8, "
                                         r"\[8,16\), >=16 in this order$"):
        figures.draw(plan, Results(plan, tmp_path / "results"), plan.figures[0], tmp_path)


def test_a_bucket_bleu_no_job_could_write_is_named_with_its_file(tmp_path: Path) -> None:
    plan = make_plan(make_config([1], tables=[BUCKETS]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    record = (tmp_path / "results" / "runs" / DATASET / "trm-big" / "seed1" /
              f"buckets.test.{TAG_BIG}.8-16.json")
    data = json.loads(record.read_text())
    data["buckets"][1]["bleu"] = 135.0
    record.write_text(json.dumps(data))
    with pytest.raises(InputError, match=f"^{record}: key 'buckets.1.bleu' must be from 0 to "
                                         "100, got 135.0$"):
        figures.draw(plan, Results(plan, tmp_path / "results"), plan.figures[0], tmp_path)


def test_a_valid_bleu_no_trainer_could_log_is_named_with_its_log(tmp_path: Path) -> None:
    plan = make_plan(make_config([1], tables=[CURVE]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    log = tmp_path / "results" / "runs" / DATASET / "trm-big" / "seed1" / "train_log.jsonl"
    log.write_text(log.read_text().replace('"valid_bleu": 25.0', '"valid_bleu": -25.0'))
    with pytest.raises(InputError, match=f"^{log}: key 'valid_bleu' must be from 0 to 100, "
                                         "got -25.0$"):
        figures.draw(plan, Results(plan, tmp_path / "results"), plan.figures[0], tmp_path)


@pytest.mark.parametrize("change", ["hypotheses decoded again", "another decoding",
                                    "a record naming no hypotheses"])
def test_buckets_of_other_hypotheses_are_left_out(tmp_path: Path, change: str) -> None:
    """A bucket record is plotted only while it bucketed the hypotheses decoded now by the
    run's current training with the cell's settings; otherwise it is listed as left out."""
    plan = make_plan(make_config([1], tables=[BUCKETS]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    big = tmp_path / "results" / "runs" / DATASET / "trm-big" / "seed1"
    record = big / f"buckets.test.{TAG_BIG}.8-16.json"
    if change == "hypotheses decoded again":
        (big / f"hyp.test.{TAG_BIG}.txt").write_text("another translation\n")
    elif change == "another decoding":
        decoding = big / f"decode.test.{TAG_BIG}.json"
        decoding.write_text(decoding.read_text().replace('"beam": ', '"beam": 1'))
    else:
        data = json.loads(record.read_text())
        del data["hyp"]
        (big / f"hyp.test.{TAG_BIG}.txt").write_text("a translation\n")
        record.write_text(json.dumps(data))
    results = Results(plan, tmp_path / "results")
    drawn = figures.draw(plan, results, plan.figures[0], tmp_path / "out")
    assert list(drawn.series) == ["Base"]
    assert results.stale == {record}

"""`figures.draw`: each kind drawn from fabricated runs; the plotted series equal the files."""

from __future__ import annotations

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


@pytest.mark.parametrize(("name", "split"), [(SWEEP, "test"), (CURVE, "valid"),
                                             (BUCKETS, "test")])
def test_caption_names_runs_and_unimplemented(drawn, name: str, split: str) -> None:
    caption = drawn[0][name].caption
    assert (f"Data: results/runs/{DATASET}/trm-base, results/runs/{DATASET}/trm-big "
            f"(seeds 1, 2, {split} split).") in caption
    assert f"Source: {name}; Doe, Roe. TOY 2024." in caption
    assert caption.endswith("Not plotted, no method yet: abnet (not implemented).")
    assert "unfinished" not in caption


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
        assert f"Data: results/runs/{DATASET}/trm-base (seeds" in result.caption
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

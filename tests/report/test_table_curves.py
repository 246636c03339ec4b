"""Each requested table's validation curves (`table_curves`), drawn from fabricated runs' logs:
a line per run and seed; the runs not finished or not the config's now named, not drawn."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pytest
from fabricated_runs import (
    SUMMARY,
    TABLE,
    fabricate,
    make_config,
    make_plan,
    section,
    write,
    write_papers,
)

from nmtbench import layout
from nmtbench.errors import InputError
from nmtbench.report import table_curves
from nmtbench.report.results import Results
from nmtbench.report.tables import write_report
from nmtbench.workflow.config import check, load_config
from nmtbench.workflow.plan import Cell

SEEDS = [1, 2]


def losses(run: str, seed: int) -> list[tuple[int, float]]:
    """A fabricated run's validations: (updates, valid loss), different per run and seed."""
    return [(10 * epoch, 5.0 - epoch - 0.1 * seed - 0.01 * len(run)) for epoch in (1, 2, 3)]


def trained(plan, results: Path, seeds: list[int]) -> list[tuple[str, str]]:
    """Finish every run the table reads: its train_summary.json and train_log.jsonl."""
    table = plan.catalogue.tables[TABLE]
    runs = list(table_curves.table_runs(plan, table)[0])
    for dataset, run in runs:
        for seed in seeds:
            run_dir = results / Path(layout.RUN.format(dataset=dataset, run=run, seed=seed)
                                     ).relative_to("results")
            write(run_dir / layout.TRAIN_SUMMARY_NAME, SUMMARY)
            log = [{"event": "train", "epoch": 1, "step": 1, "loss": 9.0}]
            log += [{"event": "valid", "epoch": e, "step": step, "valid_loss": loss}
                    for e, (step, loss) in enumerate(losses(run, seed), start=1)]
            (run_dir / layout.TRAIN_LOG_NAME).write_text(
                "".join(json.dumps(r) + "\n" for r in log), encoding="utf-8")
    return runs


def test_a_line_per_run_and_seed_from_the_logs(tmp_path: Path) -> None:
    plan = make_plan(make_config(SEEDS, tables=[TABLE]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    runs = trained(plan, tmp_path / "results", SEEDS)
    assert len(runs) > 1
    table = plan.catalogue.tables[TABLE]
    drawn = table_curves.draw(plan, Results(plan, tmp_path / "results"), table, tmp_path / "out")
    assert [p.name for p in drawn.paths] == [f"{TABLE}.curves.png", f"{TABLE}.curves.pdf"]
    image = matplotlib.image.imread(drawn.paths[0])
    assert image.shape == (630, 1440, 4) and image.std() > 0
    assert drawn.series == {f"{dataset}/{run} seed {seed}": losses(run, seed)
                            for dataset, run in runs for seed in SEEDS}
    assert "Not plotted, runs unfinished" not in drawn.caption
    assert ("Not plotted, no run: abnet (not implemented), prior-work (external)."
            in drawn.caption)
    assert "wmt14-en-de/trm-base: trm-base; wmt14-en-de/trm-big: trm-big." in drawn.caption


def test_unfinished_and_stale_runs_are_not_drawn(tmp_path: Path) -> None:
    plan = make_plan(make_config([1], tables=[TABLE]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    table = plan.catalogue.tables[TABLE]
    (first, run), *_ = table_curves.table_runs(plan, table)[0]
    # nothing finished: every run named, none drawn
    results = Results(plan, tmp_path / "results")
    drawn = table_curves.draw(plan, results, table, tmp_path / "out")
    assert drawn.series == {} and f"runs unfinished: {first}/{run}" in drawn.caption
    # finished, but trained with other settings than the config's now: an earlier training
    trained(plan, tmp_path / "results", [1])
    cell = Cell(first, run, "ok", run)
    config = tmp_path / "results" / Path(cell.file(layout.RUN_CONFIG, 1)).relative_to("results")
    record = json.loads(config.read_text())
    record["experiment"]["lr"] = 123.0
    write(config, record)
    results = Results(plan, tmp_path / "results")
    drawn = table_curves.draw(plan, results, table, tmp_path / "out")
    assert f"{first}/{run}" not in drawn.series and len(drawn.series) >= 1
    assert (f"Not plotted, trained otherwise than the config says now: {first}/{run}."
            in drawn.caption)
    assert "runs unfinished" not in drawn.caption


def test_a_finished_run_whose_log_holds_no_validation_is_one_line(tmp_path: Path) -> None:
    """Every epoch ends validating, so a finished run's log emptied by hand was drawn as no
    line, with no word in the caption, for good: no job writes it again."""
    plan = make_plan(make_config([1], tables=[TABLE]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    (first, run), *_ = trained(plan, tmp_path / "results", [1])
    run_dir = tmp_path / "results" / Path(layout.RUN.format(dataset=first, run=run, seed=1)
                                          ).relative_to("results")
    (run_dir / layout.TRAIN_LOG_NAME).write_text("", encoding="utf-8")
    with pytest.raises(InputError) as found:
        table_curves.draw(plan, Results(plan, tmp_path / "results"),
                          plan.catalogue.tables[TABLE], tmp_path / "out")
    assert str(found.value) == (
        f"{run_dir / layout.TRAIN_LOG_NAME}: no validation, but the run finished training; "
        f"only training it again writes its log: delete {run_dir} to train it again")


def test_the_report_shows_each_tables_curves(tmp_path: Path) -> None:
    plan = make_plan(make_config([1], tables=[TABLE]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    out = tmp_path / "report" / "tables.md"
    written = write_report(plan, tmp_path / "results", out, tmp_path)
    assert out.parent / "figures" / f"{TABLE}.curves.png" in written
    curves = section(out.read_text(encoding="utf-8"), "Validation curves")
    assert f"### {TABLE}: validation curves" in curves
    assert f"![{TABLE}.curves](figures/{TABLE}.curves.png)" in curves
    # what the report rule declares: the figures the plan lists are the ones written
    declared = {Path(p).name for p in plan.figure_outputs()}
    assert declared == {p.name for p in written if p.parent == out.parent / "figures"}


def test_the_default_config_declares_a_curve_figure_for_each_table() -> None:
    """What rules/report.smk declares (Plan.figure_outputs): each default table's curves, in
    PNG and PDF, beside the requested figures."""
    root = Path(__file__).resolve().parents[2]
    plan = check(load_config([root / "config" / "config.yaml"]), root / "config" / "schema.yaml",
                 root / "papers")
    assert plan.tables
    outputs = plan.figure_outputs()
    for table in plan.tables:
        assert [f"results/figures/{table.name}.curves.{ext}" for ext in ("png", "pdf")] == [
            p for p in outputs if p.startswith(f"results/figures/{table.name}.curves.")]
    assert len(outputs) == 2 * (len(plan.tables) + len(plan.figures))


@pytest.mark.parametrize("loss, refused", [
    ("NaN", "must be a finite number, got nan"), ("Infinity", "must be a finite number, got inf"),
    ("-0.5", "must be at least 0, got -0.5"), ('"5.1"', "must be a finite number, got '5.1'"),
])
def test_a_valid_loss_no_training_writes_is_one_line_naming_the_file_and_key(
        tmp_path: Path, loss: str, refused: str) -> None:
    """A cross-entropy is finite (the trainer stops before a non-finite one) and never
    negative: a log edited by hand to another is refused, not drawn as a curve."""
    log = tmp_path / layout.TRAIN_LOG_NAME
    log.write_text('{"event": "valid", "step": 10, "valid_loss": 4.5}\n'
                   f'{{"event": "valid", "step": 20, "valid_loss": {loss}}}\n', encoding="utf-8")
    with pytest.raises(InputError) as found:
        table_curves.valid_losses(log)
    assert str(found.value) == f"{log}: valid event 2: key 'valid_loss' {refused}"
    log.write_text('{"event": "valid", "step": 2.5, "valid_loss": 4.5}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r": valid event 1: key 'step' must be a whole number"):
        table_curves.valid_losses(log)

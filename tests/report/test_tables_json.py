"""tables.json: written beside tables.md by the same report, valid against its JSON Schema
(report/tables.schema.json), holding every number the page shows, and every cell with where it
comes from. The committed default's file is checked against its tables.md too; the smoke run's
in tests/end_to_end/test_workflow.py."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import recorded_settings_check
from fabricated_runs import (
    CURVE,
    DATASET,
    SIG_CASED,
    SIG_LC,
    SIG_TOK,
    SWEEP,
    TABLE,
    fabricate,
    make_config,
    make_plan,
    write_papers,
)
from tables_json_check import (
    ROOT,
    SCHEMA,
    cell_mismatches,
    claim_and_figure_mismatches,
    missing_numbers,
    schema_errors,
)

from nmtbench.errors import InputError
from nmtbench.report.tables import settings_hash, write_report

RUNS = f"../results/runs/{DATASET}"


@pytest.fixture(scope="module")
def papers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_papers(tmp_path_factory.mktemp("papers"))


def report(tmp_path: Path, papers: Path, seeds: list[int], toy: bool = False,
           verdicts: dict | None = None) -> tuple[str, dict]:
    """tables.md and tables.json of the fabricated runs, written to tmp_path/report/."""
    plan = make_plan(make_config(seeds, toy=toy, tables=[TABLE, SWEEP, CURVE]), papers)
    fabricate(plan, tmp_path / "results", verdicts)
    out = tmp_path / "report" / "tables.md"
    write_report(plan, tmp_path / "results", out, tmp_path)
    return (out.read_text(encoding="utf-8"),
            json.loads(out.with_name("tables.json").read_text(encoding="utf-8")))


def cells_of(record: dict) -> dict[tuple[str, str], dict]:
    return {(cell["row"], cell["column"]): cell for table in record["tables"]
            for cell in table["cells"]}


@pytest.mark.parametrize(("seeds", "toy"), [([1, 2], False), ([1], False), ([1, 2], True)])
def test_tables_json_is_valid_and_holds_what_tables_md_shows(tmp_path: Path, papers: Path,
                                                             seeds: list[int], toy: bool) -> None:
    text, record = report(tmp_path, papers, seeds, toy, verdicts={("trm-big", 1): "worse"})
    assert schema_errors(record) == []
    assert missing_numbers(text, record) == []
    assert cell_mismatches(text, record) == []
    assert claim_and_figure_mismatches(text, record) == []


def test_each_cell_says_where_its_numbers_come_from(tmp_path: Path, papers: Path) -> None:
    text, record = report(tmp_path, papers, [1, 2])
    cells = cells_of(record)
    big = cells[("Transformer big", "BLEU")]
    assert {k: big[k] for k in ("paper", "table", "experiment", "metric", "split", "dataset",
                                "status", "text", "paper_value", "on_papers_data",
                                "significance", "run_dirs", "settings", "signatures")} == {
        "paper": "toypaper", "table": TABLE, "experiment": "trm-big",
        "metric": "bleu_tokenized", "split": "test", "dataset": DATASET, "status": "ok",
        "text": "28.50 ± 0.71▲ (paper 28.40, Δ +0.10)", "paper_value": 28.4,
        "on_papers_data": True, "significance": "better",
        "run_dirs": [f"{RUNS}/trm-big/seed1", f"{RUNS}/trm-big/seed2"],
        "settings": f"{DATASET}/trm-big", "signatures": [SIG_TOK]}
    assert big["ours"] == {"mean": 28.5, "std": pytest.approx(0.7071, abs=1e-4),
                           "seeds": {"1": 28.0, "2": 29.0}}
    assert big["difference"] == pytest.approx(0.1)
    # the run's settings hash is that of its entry in tables.md's Settings section
    recorded = recorded_settings_check.read(text)["experiments"][f"{DATASET}/trm-big"]
    assert big["settings_hash"] == settings_hash(recorded)
    assert big["settings_hash"] != cells[("Transformer", "BLEU")]["settings_hash"]
    assert record["settings"]["experiments"][f"{DATASET}/trm-big"] == recorded
    assert cells[("Transformer big", "sacreBLEU")]["signatures"] == [SIG_LC]
    assert cells[("Transformer", "sacreBLEU")]["signatures"] == [SIG_CASED]
    assert cells[("Transformer", "BLEU")]["significance"] is None  # the baseline itself
    params = cells[("Transformer big", "#Params")]
    assert (params["ours"]["mean"], params["ours"]["std"]) == (765432, 0)
    assert params["text"] == "765,432 (paper 800,000, Δ -34,568)"
    assert params["signatures"] is None  # no score
    # cells with no number of ours keep the paper's and say why
    abnet = cells[("AB-Net", "BLEU")]
    assert (abnet["status"], abnet["paper_value"], abnet["run_dirs"], abnet["settings_hash"],
            abnet["ours"]) == ("not implemented", 29.0, [], None,
                               {"mean": None, "std": None, "seeds": {}})
    assert cells[("Prior work", "BLEU")]["status"] == "external"
    table = record["tables"][0]
    assert table["signatures"] == {"bleu_tokenized": [SIG_TOK],
                                   "sacrebleu": sorted([SIG_CASED, SIG_LC])}
    assert table["claims"] == {"hold": 2, "checked": 3, "not_checked": 1, "transcribed": 4}
    assert record["tally"] == {"hold": 2, "checked": 3, "not_checked": 2, "transcribed": 5}
    assert [c["outcome"] for c in record["claims"] if c["claim"] == "Big beats base"] == [
        "holds"]


def test_a_missing_seed_is_null_and_a_toy_cell_keeps_the_papers_number_apart(
        tmp_path: Path, papers: Path) -> None:
    plan = make_plan(make_config([1, 2], toy=True, tables=[TABLE]), papers)
    runs = fabricate(plan, tmp_path / "results")
    for run in runs:
        if run.name == "seed2":
            for metrics in run.glob("metrics.*.json"):
                metrics.unlink()
    out = tmp_path / "tables.md"
    write_report(plan, tmp_path / "results", out, tmp_path)
    record = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert schema_errors(record) == []
    assert missing_numbers(out.read_text(encoding="utf-8"), record) == []
    cell = cells_of(record)[("Transformer", "BLEU")]
    assert cell["ours"] == {"mean": 27.0, "std": None, "seeds": {"1": 27.0, "2": None}}
    assert cell["text"] == "27.00 (1 of 2 seeds missing)"
    # on a toy world ours are not the paper's measure: its number is kept, not compared
    assert (cell["paper_value"], cell["on_papers_data"], cell["difference"]) == (
        27.3, False, None)


def test_the_schema_refuses_what_the_report_never_writes(tmp_path: Path, papers: Path) -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA.read_text()))
    _, record = report(tmp_path, papers, [1])
    cell = record["tables"][0]["cells"][0]
    for broken in ({**cell, "status": "fine"}, {**cell, "settings_hash": "xyz"},
                   {k: v for k, v in cell.items() if k != "run_dirs"}):
        record["tables"][0]["cells"][0] = broken
        assert schema_errors(record), broken
    assert schema_errors({**record, "version": 2})


def test_tables_json_is_not_the_tables_it_stands_beside(tmp_path: Path, papers: Path) -> None:
    plan = make_plan(make_config([1]), papers)
    fabricate(plan, tmp_path / "results")
    out = tmp_path / "tables.json"
    with pytest.raises(InputError, match=f"^{out}: the report writes its cells for programs "
                       "to tables.json beside tables.md"):
        write_report(plan, tmp_path / "results", out, tmp_path)
    assert not out.exists()


def test_the_committed_tables_json_is_valid_and_holds_what_tables_md_shows() -> None:
    """The default's results/tables.json, made with results/tables.md by its report."""
    committed = ROOT / "results" / "tables.json"
    if not committed.is_file():
        pytest.skip("results/tables.json is not committed yet: run the default "
                    "(snakemake --cores all) and commit it with results/tables.md")
    record = json.loads(committed.read_text(encoding="utf-8"))
    text = (ROOT / "results" / "tables.md").read_text(encoding="utf-8")
    assert schema_errors(record) == []
    assert missing_numbers(text, record) == []
    assert cell_mismatches(text, record) == []
    assert claim_and_figure_mismatches(text, record) == []

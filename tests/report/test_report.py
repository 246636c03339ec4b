"""`write_report`: tables.md rendered from fabricated run directories, checked cell by cell.

The runs are fabricated at exactly the paths `Plan.targets()` lists
(tests/helpers/fabricated_runs.py), so a cell that reads another file, or formats its numbers
differently, fails here.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
import recorded_settings_check
from fabricated_runs import (
    CURVE,
    DATASET,
    PAPER,
    PAPER_YAML,
    SIG_CASED,
    SIG_CHRF,
    SIG_LC,
    SIG_TOK,
    SWEEP,
    TABLE,
    TAG_BASE,
    TAG_BIG,
    fabricate,
    make_config,
    make_plan,
    markdown_table,
    section,
    write_papers,
)

from nmtbench import provenance
from nmtbench.errors import InputError
from nmtbench.report import tables
from nmtbench.report.results import Results
from nmtbench.report.tables import LIBRARIES, write_report

RUNS = f"results/runs/{DATASET}"
BIG1 = f"{RUNS}/trm-big/seed1"
BIG2 = f"{RUNS}/trm-big/seed2"
BASE2 = f"{RUNS}/trm-base/seed2"


@pytest.fixture(scope="module")
def papers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_papers(tmp_path_factory.mktemp("papers"))


def render(plan, tmp_path: Path) -> str:
    """Report the runs under tmp_path/results into tmp_path/report/tables.md (so run links
    have to leave the report's directory)."""
    out = tmp_path / "report" / "tables.md"
    write_report(plan, tmp_path / "results", out, tmp_path)
    return out.read_text(encoding="utf-8")


def rows_of(text: str) -> dict[str, dict[str, str]]:
    return {row[""]: row for row in markdown_table(section(text, TABLE))}


def without_runs(row: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in row.items() if k not in ("", "runs")}


def setup(tmp_path: Path, papers: Path, seeds: list[int], toy: bool = False,
          verdicts: dict | None = None, tables: list[str] | None = None):
    plan = make_plan(make_config(seeds, toy=toy, tables=tables), papers)
    fabricate(plan, tmp_path / "results", verdicts)
    return plan


# --- real data: ours, the paper's number and the difference ------------------------------------
def test_real_dataset_two_seeds(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1, 2])
    text = render(plan, tmp_path)
    rows = rows_of(text)
    assert list(rows) == ["Transformer", "Transformer big", "AB-Net", "Prior work"]
    assert without_runs(rows["Transformer"]) == {
        "BLEU": "27.50 ± 0.71 (paper 27.30, Δ +0.20)",  # mean(27, 28), sample std
        "sacreBLEU": "26.25 ± 0.35 (paper 26.40, Δ -0.15)",
        "#Params": "74M (paper 74M, Δ +0)",  # equal over seeds: shown once
        "Latency": "31.0 ms ± 1.4 ms (paper 30.0 ms, Δ +1.0 ms)",
        "Speedup": "1.00x ± 0.00x (paper 1.00x, Δ +0.00x)",  # the baseline against itself
    }
    assert without_runs(rows["Transformer big"]) == {
        "BLEU": "28.50 ± 0.71▲ (paper 28.40, Δ +0.10)",
        "sacreBLEU": "27.12 ± 0.18▲",  # mean(27.0, 27.25); the paper has none
        "#Params": "765,432 (paper 800,000, Δ -34,568)",  # exact below a million
        "Latency": "17.5 ms ± 3.5 ms",
        # per seed: 30/15 = 2.0 and 32/20 = 1.6 (not the ratio of the means, 31/17.5)
        "Speedup": "1.80x ± 0.28x (paper 1.90x, Δ -0.10x)",
    }
    # unbuilt and quoted rows keep the paper's number where it has one
    assert without_runs(rows["AB-Net"])["BLEU"] == "not implemented (paper 29.00)"
    assert {v for k, v in without_runs(rows["AB-Net"]).items() if k != "BLEU"} == {
        "not implemented"}
    assert without_runs(rows["Prior work"]) == {
        "BLEU": "external (paper 28.00)", "sacreBLEU": "external",
        "#Params": "external", "Latency": "external", "Speedup": "external"}
    body = section(text, TABLE)
    assert "Source: *A Toy Paper on BERT*; Doe, Roe. TOY 2024." in body
    assert "Table 1: the toy table." in body
    assert "- Ours: mean ± sample std over seeds 1, 2." in body
    assert "significantly better/worse than the baseline row (trm-base) in every seed" in body
    assert "1000 resamples" in body
    assert r"- Transformer: the baseline (\* in the paper)" in body  # the row note, literal
    # real data only: no toy notice, no separate table of the paper's numbers
    assert "toy-world numbers" not in text
    assert "As reported in the paper" not in text


def test_real_dataset_one_seed(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1])
    text = render(plan, tmp_path)
    rows = rows_of(text)
    assert without_runs(rows["Transformer"]) == {
        "BLEU": "27.00 (paper 27.30, Δ -0.30)",  # the baseline row: never a mark
        "sacreBLEU": "26.00 (paper 26.40, Δ -0.40)",
        "#Params": "74M (paper 74M, Δ +0)",
        "Latency": "30.0 ms (paper 30.0 ms, Δ +0.0 ms)",
        "Speedup": "1.00x (paper 1.00x, Δ +0.00x)",
    }
    assert without_runs(rows["Transformer big"]) == {
        "BLEU": "28.00▲ (paper 28.40, Δ -0.40)",
        "sacreBLEU": "27.00▲",
        "#Params": "765,432 (paper 800,000, Δ -34,568)",
        "Latency": "15.0 ms",
        "Speedup": "2.00x (paper 1.90x, Δ +0.10x)",  # 30 ms / 15 ms
    }
    assert "mean ± sample std" not in text


@pytest.mark.parametrize(("verdicts", "mark"), [
    (("better", "better"), "▲"),
    (("worse", "worse"), "▼"),
    (("none", "none"), ""),
    (("better", "none"), ""),  # a mark needs every seed to agree
    (("better", "worse"), ""),
    (("worse", "none"), ""),
])
def test_significance_marks(tmp_path: Path, papers: Path, verdicts, mark) -> None:
    plan = setup(tmp_path, papers, [1, 2],
                 verdicts={("trm-big", 1): verdicts[0], ("trm-big", 2): verdicts[1]})
    rows = rows_of(render(plan, tmp_path))
    assert rows["Transformer big"]["BLEU"] == f"28.50 ± 0.71{mark} (paper 28.40, Δ +0.10)"
    assert rows["Transformer big"]["sacreBLEU"] == f"27.12 ± 0.18{mark}"
    assert rows["Transformer"]["BLEU"] == "27.50 ± 0.71 (paper 27.30, Δ +0.20)"
    # metrics that the bootstrap does not test never get a mark
    assert rows["Transformer big"]["#Params"] == "765,432 (paper 800,000, Δ -34,568)"


def test_mark_needs_every_seeds_bootstrap(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1, 2])
    (tmp_path / BIG2 / f"bootstrap.test.{TAG_BIG}.bleu.vs.trm-base.{TAG_BASE}.json").unlink()
    rows = rows_of(render(plan, tmp_path))
    assert rows["Transformer big"]["BLEU"] == "28.50 ± 0.71 (paper 28.40, Δ +0.10)"


def test_numbers_made_from_an_earlier_training_are_left_out(tmp_path: Path,
                                                           papers: Path) -> None:
    """trm-big seed 2 trained again (or a refused run replaced its summary): its metrics,
    its latency and the baseline's latency against it are no longer its numbers."""
    plan = setup(tmp_path, papers, [1, 2])
    (tmp_path / BIG2 / "train_summary.json").write_text('{"steps": 7}\n', encoding="utf-8")
    text = render(plan, tmp_path)
    big = without_runs(rows_of(text)["Transformer big"])
    assert big["BLEU"] == "28.00 (1 of 2 seeds missing) (paper 28.40, Δ -0.40)"  # seed 1 only
    assert big["Latency"] == "15.0 ms (1 of 2 seeds missing)"
    left_out = section(text, "Left out: made from an earlier training")
    assert "runs/toy/trm-big/seed2/metrics.test." in left_out.replace(DATASET, "toy")


def test_a_run_without_its_summary_reports_nothing(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1])
    (tmp_path / f"{RUNS}/trm-big/seed1" / "train_summary.json").unlink()
    big = without_runs(rows_of(render(plan, tmp_path))["Transformer big"])
    assert big["BLEU"].startswith("missing") and big["Speedup"].startswith("missing")


def test_a_directory_that_is_not_the_results_is_refused(tmp_path: Path, papers: Path) -> None:
    """A table of "missing" from a wrong --results directory would read as a report: the
    directory must exist and hold at least one of the run outputs the plan reads."""
    plan = setup(tmp_path, papers, [1])
    out = tmp_path / "report" / "tables.md"
    with pytest.raises(InputError, match=f"^{tmp_path / 'nowhere'}: no such results directory$"):
        write_report(plan, tmp_path / "nowhere", out, tmp_path)
    (tmp_path / "other" / "runs").mkdir(parents=True)
    with pytest.raises(InputError) as err:
        write_report(plan, tmp_path / "other", out, tmp_path)
    assert re.fullmatch(rf"{tmp_path / 'other'}: none of the \d+ run outputs the requested "
                        rf"tables read is there \(e\.g\. {tmp_path / 'other'}/runs/\S+\); is "
                        r"this the results directory of this config\?", str(err.value))
    assert not out.exists()


def test_a_corrupt_metrics_file_stops_the_report_with_its_name(tmp_path: Path,
                                                               papers: Path) -> None:
    plan = setup(tmp_path, papers, [1])
    metrics = tmp_path / BIG1 / f"metrics.test.{TAG_BIG}.json"
    metrics.write_text(metrics.read_text()[:40])  # a copy cut short
    with pytest.raises(InputError, match=f"^{metrics}: line \\d+: invalid JSON"):
        render(plan, tmp_path)
    metrics.write_text("[1, 2]")
    with pytest.raises(InputError, match=f"^{metrics}: not a JSON object$"):
        render(plan, tmp_path)


def test_no_mark_from_a_bootstrap_of_other_hypotheses(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1])
    for metrics in (tmp_path / BIG1).glob("metrics.test.*.json"):  # decoded again since
        metrics.write_text(metrics.read_text().replace('"hyp": "', '"hyp": "new-'))
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "28.00 (paper 28.40, Δ -0.40)"
    assert "bootstrap.test." in section(text, "Left out: made from an earlier training")


def test_scores_that_do_not_name_their_hypotheses_are_left_out(tmp_path: Path,
                                                              papers: Path) -> None:
    """A metrics file without the digest of the hypotheses it scored (written by hand, or by
    another tool) cannot show it scored those there now: left out, not a traceback."""
    plan = setup(tmp_path, papers, [1])
    for metrics in (tmp_path / BIG1).glob("metrics.test.*.json"):
        record = json.loads(metrics.read_text())
        del record["hyp"]
        metrics.write_text(json.dumps(record))
    text = render(plan, tmp_path)  # no hypotheses there to compare: shown, but unmarked
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "28.00 (paper 28.40, Δ -0.40)"
    assert "bootstrap.test." in section(text, "Left out: made from an earlier training")
    (tmp_path / BIG1 / f"hyp.test.{TAG_BIG}.txt").write_text("a hypothesis\n")
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "missing (paper 28.40)"
    assert "metrics.test." in section(text, "Left out: made from an earlier training")


def test_a_record_of_another_kind_in_a_metrics_file_is_left_out(tmp_path: Path,
                                                               papers: Path) -> None:
    """Length buckets written by hand over a metrics file (`buckets --out metrics...`): no
    training nor BLEU to read in it, so it is left out, not a traceback; a shown metrics file
    without the BLEU signatures the provenance lists is one line naming it and the key."""
    plan = setup(tmp_path, papers, [1])
    path = tmp_path / BIG1 / f"metrics.test.{TAG_BIG}.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({"buckets": [], "hyp": record["hyp"]}))
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "missing (paper 28.40)"
    assert "metrics.test." in section(text, "Left out: made from an earlier training")
    del record["bleu"]["signature"]
    path.write_text(json.dumps(record))
    with pytest.raises(InputError, match=f"^{re.escape(str(path))}: key 'bleu.signature' is "
                                         "missing or not a string$"):
        render(plan, tmp_path)


def test_scores_of_another_test_set_are_left_out(tmp_path: Path, papers: Path) -> None:
    """The test set prepared again (other sentences, say) since the run was scored: its scores
    are not the table's; scores that name the test set they read stay."""
    plan = setup(tmp_path, papers, [1])
    prepared = tmp_path / "data" / DATASET / "prepared"
    prepared.mkdir(parents=True)
    for side in ("src", "tgt"):
        (prepared / f"test.{side}").write_text("a new test sentence\n")
    text = render(plan, tmp_path)  # the fabricated scores name no test set: not current
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "missing (paper 28.40)"
    for metrics in (tmp_path / BIG1).glob("metrics.test.*.json"):
        record = json.loads(metrics.read_text())
        record["ref"] = provenance.file_digest(prepared / "test.tgt")
        record["decode"]["src"] = provenance.file_digest(prepared / "test.src")
        metrics.write_text(json.dumps(record))
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "28.00 (paper 28.40, Δ -0.40)"
    (prepared / "test.src").write_text("another source\n")
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "missing (paper 28.40)"


def test_a_toy_world_made_with_other_settings_than_the_config_is_refused(
        tmp_path: Path, papers: Path) -> None:
    """`report` by hand after the config's toy world changed (test_pairs, say) but before the
    workflow made it again: the scores on the world in data/ are not the config's. Its
    manifest records the world it was made with; one without a manifest cannot tell."""
    plan = setup(tmp_path, papers, [1], toy=True)
    world = plan.config["datasets"]["toy"]["world"]
    manifest = tmp_path / "data" / "toy" / "prepared" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    render(plan, tmp_path)  # no manifest (results copied without the data): not compared
    manifest.write_text(json.dumps({"kind": "toyworld", "world": world}))
    render(plan, tmp_path)
    manifest.write_text(json.dumps({"kind": "toyworld", "world": {**world, "test_pairs": 30}}))
    with pytest.raises(InputError) as err:
        render(plan, tmp_path)
    assert str(err.value) == (
        f"{manifest.parent}: the toy world there was made with other settings than config key "
        f"'datasets.toy.world' gives it now (test_pairs 30 there, {world['test_pairs']} in the "
        f"config); run the workflow, which makes it again, or delete {manifest.parent}")


def test_a_vocabulary_trained_for_another_size_than_the_config_is_refused(
        tmp_path: Path, papers: Path) -> None:
    """`report` by hand after a dataset's vocab_size changed in the config but before the
    workflow trained the vocabulary again: the runs are current on the vocabulary there. Its
    summary records the size asked for; one without a summary cannot tell."""
    plan = setup(tmp_path, papers, [1], toy=True)
    tokenizer = tmp_path / "data" / "toy" / "tokenizer" / "tgt"
    tokenizer.mkdir(parents=True)
    render(plan, tmp_path)  # no summary: not compared
    wanted = plan.config["datasets"]["toy"]["vocab_size"]["tgt"]
    summary = tokenizer / "vocabulary_summary.json"
    summary.write_text(json.dumps({"vocab_size": wanted, "lowercase": False}))
    render(plan, tmp_path)
    summary.write_text(json.dumps({"vocab_size": wanted + 1, "lowercase": False}))
    with pytest.raises(InputError) as err:
        render(plan, tmp_path)
    assert str(err.value) == (
        f"{tokenizer}: trained for {wanted + 1} pieces, but config key "
        f"'datasets.toy.vocab_size.tgt' asks for {wanted} now; run the workflow, which trains "
        f"it again, or delete {tokenizer}")


def test_scores_of_a_decoding_by_other_settings_are_left_out(tmp_path: Path,
                                                            papers: Path) -> None:
    """Hypotheses decoded by hand into a run directory under a cell's file name, with another
    beam than the cell's tag stands for, are not that cell's."""
    plan = setup(tmp_path, papers, [1])
    for metrics in (tmp_path / BIG1).glob("metrics.test.*.json"):
        record = json.loads(metrics.read_text())
        record["decode"]["beam"] += 1
        metrics.write_text(json.dumps(record))
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "missing (paper 28.40)"


@pytest.mark.parametrize("path", ["train_src", "src_tokenizer"])
def test_a_run_trained_by_hand_on_other_files_is_left_out(tmp_path: Path, papers: Path,
                                                          path: str) -> None:
    """A run trained by hand into a cell's run directory with the cell's settings but another
    corpus or vocabulary than the workflow gives it is not the cell's run."""
    plan = setup(tmp_path, papers, [1])
    config_path = tmp_path / BIG1 / "config.json"
    config = json.loads(config_path.read_text())
    config["paths"][path] = "elsewhere/other.txt"
    config_path.write_text(json.dumps(config))
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "missing (paper 28.40)"


# (how a record of trm-big seed 1 was made otherwise than the config says now, the column
# whose number it leaves out); the fabricated records are scored as the config scores
SCORED_OTHERWISE = {
    "BLEU of lowercased text": (
        "metrics", lambda r: r["bleu"].update(
            tokenized_signature=r["bleu"]["tokenized_signature"].replace("case:mixed",
                                                                         "case:lc")), "BLEU"),
    "BLEU without compound splitting": (
        "metrics", lambda r: r["bleu"].update(compound_split=False), "BLEU"),
    "sacreBLEU after another language's detokenizer": (
        "metrics", lambda r: r["bleu"].update(detok_lang="en"), "sacreBLEU"),
    "latency timed on other sentences": (
        "latency", lambda r: r.update(sentences=5), "Latency"),
}


@pytest.mark.parametrize("case", sorted(SCORED_OTHERWISE))
def test_a_number_scored_otherwise_than_the_config_says_is_left_out(tmp_path: Path,
                                                                    papers: Path, case: str):
    """Scores record how they were scored (case in the signature, compound splitting, the
    detokenizer's language) and latencies how they were timed: a config that now scores or
    times otherwise does not show them (report by hand; the workflow scores again)."""
    kind, change, column = SCORED_OTHERWISE[case]
    plan = setup(tmp_path, papers, [1])
    for path in (tmp_path / BIG1).glob(f"{kind}.*.json"):
        record = json.loads(path.read_text())
        change(record)
        path.write_text(json.dumps(record))
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])[column].startswith("missing"), text


def test_no_mark_from_a_bootstrap_scored_otherwise(tmp_path: Path, papers: Path) -> None:
    """A significance mark resampled BLEU of lowercased text, where the config no longer
    lowercases: the mark is left out and listed."""
    plan = setup(tmp_path, papers, [1])
    for path in (tmp_path / BIG1).glob("bootstrap.test.*.json"):
        record = json.loads(path.read_text())
        record["lowercase"] = True
        path.write_text(json.dumps(record))
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "28.00 (paper 28.40, Δ -0.40)"
    assert "bootstrap.test." in section(text, "Left out: made from an earlier training")


@pytest.mark.parametrize("edit", [{"score": "sacrebleu"}, {"ref": "another reference"}],
                         ids=["another score", "another reference"])
def test_no_mark_from_a_bootstrap_of_another_score_or_reference(tmp_path: Path, papers: Path,
                                                                edit: dict) -> None:
    """A bootstrap record under a BLEU mark's file name that resampled another score (a
    sacreBLEU record copied over it) or scored against another reference than the metrics'
    (one made by hand with another --ref): the mark is left out and listed."""
    plan = setup(tmp_path, papers, [1])
    assert "▲" in without_runs(rows_of(render(plan, tmp_path))["Transformer big"])["BLEU"]
    for path in (tmp_path / BIG1).glob("bootstrap.test.*.bleu.*.json"):
        path.write_text(json.dumps(json.loads(path.read_text()) | edit))
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "28.00 (paper 28.40, Δ -0.40)"
    assert "bootstrap.test." in section(text, "Left out: made from an earlier training")


def test_no_mark_from_a_bootstrap_of_other_resamples(tmp_path: Path, papers: Path) -> None:
    """analysis.bootstrap_samples changed since the marks were computed: they are left out
    until the workflow computes them again."""
    config = make_config([1])
    config["analysis"]["bootstrap_samples"] = 2000
    plan = make_plan(config, papers)
    fabricate(plan, tmp_path / "results")  # its bootstrap records say 1000
    text = render(plan, tmp_path)
    assert without_runs(rows_of(text)["Transformer big"])["BLEU"] == "28.00 (paper 28.40, Δ -0.40)"
    assert "bootstrap.test." in section(text, "Left out: made from an earlier training")


def test_missing_seeds(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1, 2])
    (tmp_path / BIG2 / f"metrics.test.{TAG_BIG}.json").unlink()
    (tmp_path / BIG2 / f"bootstrap.test.{TAG_BIG}.bleu.vs.trm-base.{TAG_BASE}.json").unlink()
    (tmp_path / BASE2 / f"latency.{TAG_BASE}.json").unlink()
    (tmp_path / BIG2 / f"latency.{TAG_BIG}.vs.trm-base.{TAG_BASE}.json").unlink()
    rows = rows_of(render(plan, tmp_path))
    assert without_runs(rows["Transformer big"]) == {
        "BLEU": "28.00 (1 of 2 seeds missing) (paper 28.40, Δ -0.40)",
        "sacreBLEU": "27.00 (1 of 2 seeds missing)",
        "#Params": "765,432 (1 of 2 seeds missing) (paper 800,000, Δ -34,568)",
        # latency and speedup of a row are measured together, against the baseline
        "Latency": "15.0 ms (1 of 2 seeds missing)",
        "Speedup": "2.00x (1 of 2 seeds missing) (paper 1.90x, Δ +0.10x)",
    }
    assert rows["Transformer"]["Latency"] == (
        "30.0 ms (1 of 2 seeds missing) (paper 30.0 ms, Δ +0.0 ms)")

    (tmp_path / BIG1 / f"metrics.test.{TAG_BIG}.json").unlink()
    rows = rows_of(render(plan, tmp_path))
    big = rows["Transformer big"]
    assert (big["BLEU"], big["sacreBLEU"], big["#Params"]) == (
        "missing (paper 28.40)", "missing", "missing (paper 800,000)")
    assert big["Latency"] == "15.0 ms (1 of 2 seeds missing)"


# --- toy world: ours alone, the paper's numbers apart ------------------------------------------
def test_toy_world(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1, 2], toy=True)
    text = render(plan, tmp_path)
    preamble = text.split("\n## ", 1)[0]
    assert ("Datasets toy are generated toy worlds: **toy-world numbers; not comparable to the "
            "papers**") in preamble
    rows = rows_of(text)
    assert without_runs(rows["Transformer"]) == {
        "BLEU": "27.50 ± 0.71", "sacreBLEU": "26.25 ± 0.35", "#Params": "74M",
        "Latency": "31.0 ms ± 1.4 ms", "Speedup": "1.00x ± 0.00x"}
    assert without_runs(rows["Transformer big"]) == {
        "BLEU": "28.50 ± 0.71▲", "sacreBLEU": "27.12 ± 0.18▲", "#Params": "765,432",
        "Latency": "17.5 ms ± 3.5 ms", "Speedup": "1.80x ± 0.28x"}
    assert set(without_runs(rows["AB-Net"]).values()) == {"not implemented"}
    assert set(without_runs(rows["Prior work"]).values()) == {"external (quoted by the paper)"}
    for row in rows.values():
        for cell in without_runs(row).values():
            assert "paper " not in cell and "Δ" not in cell
    # the toy world's scores need no account of how a paper scored them
    assert "multi-bleu.perl" not in text and "The paper reported" not in text

    body = section(text, TABLE)
    assert ("- Columns on data other than the paper's show ours alone; the paper's numbers for "
            "them are listed below.") in body
    # `tiny` on the toy world makes both Transformers train identically: one run, said so
    assert ("- Run toy/trm-base trains trm-base, trm-big: their settings are identical on this "
            "dataset.") in body
    reported = markdown_table(body.split("As reported in the paper (toypaper.table1; its data, "
                                         "not ours):", 1)[1])
    assert reported == [
        {"": "Transformer", "BLEU": "27.30", "sacreBLEU": "26.40", "#Params": "74M",
         "Latency": "30.0 ms", "Speedup": "1.00x"},
        {"": "Transformer big", "BLEU": "28.40", "sacreBLEU": "-", "#Params": "800,000",
         "Latency": "-", "Speedup": "1.90x"},
        {"": "AB-Net", "BLEU": "29.00", "sacreBLEU": "-", "#Params": "-", "Latency": "-",
         "Speedup": "-"},
        {"": "Prior work", "BLEU": "28.00", "sacreBLEU": "-", "#Params": "-", "Latency": "-",
         "Speedup": "-"},
    ]


def test_columns_that_are_one_measurement_on_the_toy_world_show_once(tmp_path: Path,
                                                                   papers: Path) -> None:
    """Two language pairs both mapped onto the toy world: one column, both names; the
    parameter count (another metric) stays a column of its own."""
    plan = setup(tmp_path, papers, [1], toy=True, tables=[f"{PAPER}.table2"])
    body = section(render(plan, tmp_path), f"{PAPER}.table2")
    (base, abnet) = markdown_table(body)
    assert without_runs(base) == {"En-De / En-Fr": "27.00", "#Params": "74M"}
    assert set(without_runs(abnet).values()) == {"not implemented"}
    assert ("- Columns joined by / are one measurement: on this data their runs, decoding and "
            "split are the same.") in body
    # the paper's own numbers keep every column
    reported = markdown_table(body.split("its data, not ours):", 1)[1])
    assert reported[0] == {"": "Transformer", "En-De": "27.30", "En-Fr": "38.10", "#Params": "-"}


def test_a_score_far_below_the_baselines_is_marked_with_its_training_log(tmp_path: Path,
                                                                       papers: Path) -> None:
    plan = setup(tmp_path, papers, [1])
    path = tmp_path / BIG1 / f"metrics.test.{TAG_BIG}.json"
    record = json.loads(path.read_text())
    record["bleu"]["tokenized"] = 0.5  # under a quarter of the baseline's 27.00
    path.write_text(json.dumps(record))
    text = render(plan, tmp_path)
    big = rows_of(text)["Transformer big"]
    assert big["BLEU"].startswith("0.50▲†")
    assert "†" not in big["sacreBLEU"] and "†" not in rows_of(text)["Transformer"]["BLEU"]
    body = section(text, TABLE)
    note = next(line for line in body.splitlines() if line.startswith("- † did not learn"))
    assert note.startswith("- † did not learn: Transformer big (BLEU): 0.50 against the "
                           "baseline's 27.00; training log [")
    (target,) = re.findall(r"\]\(([^)]+)\)", note)
    assert (tmp_path / "report" / target).resolve() == (
        tmp_path / BIG1 / "train_log.jsonl").resolve()


def claims_page(tmp_path: Path) -> dict[str, dict[str, str]]:
    """claims.md's rows, by claim (without its source), as render() wrote it."""
    rows = markdown_table((tmp_path / "report" / "claims.md").read_text(encoding="utf-8"))
    return {row["Claim"].split(" (")[0]: row for row in rows}


def table_claims(text: str, table: str = TABLE) -> tuple[list[dict[str, str]], str]:
    """The claims checked under a table's section of tables.md, and its count line."""
    body = section(text, table)
    count = next(line for line in body.splitlines() if line.startswith("Not run or not "))
    if "Claims about this table" not in body:
        return [], count
    return markdown_table(body.split("Claims about this table", 1)[1]), count


def test_claims_are_checked_on_our_runs(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1, 2])
    text = render(plan, tmp_path)
    verdicts = claims_page(tmp_path)
    # claims.md: every transcribed claim, the unrequested table's too
    assert list(verdicts) == ["Big beats base", "Base is smaller", "Big is faster",
                              "AB-Net beats base", "Base beats AB-Net in two pairs"]
    big = verdicts["Big beats base"]
    assert big["Claim"] == f"Big beats base ({PAPER}: abstract)"
    assert big["Table"] == TABLE
    assert big["Paper"] == "BLEU: 28.40 vs 27.30"  # sacreBLEU: the paper gives none for big
    assert big["Ours"] == "BLEU: 28.50▲ vs 27.50; sacreBLEU: 27.12▲ vs 26.25"
    assert big["On our runs"] == "holds (significant)"
    smaller = verdicts["Base is smaller"]  # 74M trained parameters against 765,432
    assert smaller["Ours"] == "#Params: 74M vs 765,432"
    assert smaller["On our runs"] == "does not hold"
    assert verdicts["Big is faster"]["Ours"] == "Speedup: 1.80x (claimed: above 1.00x)"
    assert verdicts["Big is faster"]["On our runs"] == "holds"
    assert verdicts["AB-Net beats base"]["On our runs"] == "not checked: abnet not implemented"
    assert verdicts["Base beats AB-Net in two pairs"]["On our runs"] == (
        f"not run ({PAPER}.table2 is not requested)")

    # tables.md: under the table the three checked, verdict first, as claims.md has them;
    # a line counts the other; the unrequested table's claim is in claims.md alone
    checked, count = table_claims(text)
    assert [list(row) for row in checked] == [["On our runs", "Claim", "Paper", "Ours"]] * 3
    assert checked == [{"On our runs": verdicts[c]["On our runs"], "Claim": f"{c} ({source})",
                        "Paper": verdicts[c]["Paper"], "Ours": verdicts[c]["Ours"]}
                       for c, source in (("Big beats base", "abstract"),
                                         ("Base is smaller", "Table 1"),
                                         ("Big is faster", "Section 4"))]
    assert count == ("Not run or not checkable here: 1 of this table's 4 claims (every claim, "
                     "with its reason: [claims.md](claims.md)).")
    assert "AB-Net beats base" not in text and "Base beats AB-Net" not in text
    assert "## Claims" not in text
    top = text.split("\n## ", 1)[0]
    assert ("\n**2 of 3 checked claims hold** (of 5 transcribed): per table below; all in "
            "[claims.md](claims.md).\n") in top
    assert "**2 of 3 checked claims hold** (of 5 transcribed)" in (
        tmp_path / "report" / "claims.md").read_text(encoding="utf-8")


def test_a_claim_that_holds_on_some_columns_is_not_counted_as_holding(tmp_path: Path,
                                                                    papers: Path) -> None:
    plan = setup(tmp_path, papers, [1])
    path = tmp_path / BIG1 / f"metrics.test.{TAG_BIG}.json"
    record = json.loads(path.read_text())
    record["bleu"]["sacrebleu"] = 20.0  # below the baseline's 26.00; BLEU stays above
    path.write_text(json.dumps(record))
    text = render(plan, tmp_path)
    assert claims_page(tmp_path)["Big beats base"]["On our runs"] == (
        "holds on some columns (1 of 2)")
    assert table_claims(text)[0][0]["On our runs"] == "holds on some columns (1 of 2)"
    assert "**1 of 3 checked claims hold** (of 5 transcribed)" in text


def test_a_table_whose_claims_are_all_unchecked_lists_none(tmp_path: Path,
                                                          papers: Path) -> None:
    """table2 on the toy world: its one claim's rows are AB-Net (not implemented) and the
    baseline, so the table has a count line and no claims block."""
    plan = setup(tmp_path, papers, [1], toy=True, tables=[f"{PAPER}.table2"])
    text = render(plan, tmp_path)
    assert table_claims(text, f"{PAPER}.table2") == ([], (
        "Not run or not checkable here: 1 of this table's 1 claims (every claim, with its "
        "reason: [claims.md](claims.md))."))
    assert "**0 of 0 checked claims hold** (of 5 transcribed)" in text
    assert claims_page(tmp_path)["Big beats base"]["On our runs"] == (
        f"not run ({TABLE} is not requested)")


def test_a_claim_between_rows_that_are_one_measurement_is_not_checked(tmp_path: Path,
                                                              papers: Path) -> None:
    plan = setup(tmp_path, papers, [1], toy=True)
    render(plan, tmp_path)
    verdicts = {claim: row["On our runs"] for claim, row in claims_page(tmp_path).items()}
    # one run, two decodings: BLEU compares the decodings; a parameter count cannot
    assert verdicts["Big beats base"] == "holds (significant)"
    assert verdicts["Base is smaller"] == "not checked: both rows are one run on this data"
    # both language pairs of table2 are the toy world: one comparison, both columns named
    plan = setup(tmp_path, papers, [1], toy=True, tables=[f"{PAPER}.table2"])
    (claim,) = [c for c in plan.claims if c.table == f"{PAPER}.table2"]
    (columns, cell, other), = plan.claim_cells(claim)
    assert [c.key for c in columns] == ["en_de", "en_fr"]
    assert (cell.experiment, other.experiment) == ("trm-base", "abnet")


def test_claims_of_numbers_left_out_are_not_checked_on_them(tmp_path: Path,
                                                           papers: Path) -> None:
    """A stale metrics file is left out of the claims as of the table, and listed."""
    plan = setup(tmp_path, papers, [1])
    (tmp_path / BIG1 / "train_summary.json").write_text('{"steps": 7}\n', encoding="utf-8")
    text = render(plan, tmp_path)
    verdicts = claims_page(tmp_path)
    assert verdicts["Big beats base"]["On our runs"] == "not checked: missing"
    assert "runs/toy/trm-big/seed1/metrics.test." in section(
        text, "Left out: made from an earlier training").replace(DATASET, "toy")
    assert ("Result files made from an earlier training are left out, as [tables.md](tables.md) "
            "lists them.") in (tmp_path / "report" / "claims.md").read_text(encoding="utf-8")


def test_claims_md_is_not_the_tables_it_stands_beside(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1])
    out = tmp_path / "claims.md"
    with pytest.raises(InputError, match=f"^{out}: the report writes its claims to claims.md "
                                         "beside tables.md; give tables.md another name$"):
        write_report(plan, tmp_path / "results", out, tmp_path)
    assert not out.exists()


@pytest.mark.parametrize(("value", "text"), [
    (74_000_000, "74M"), (213_500_000, "213.5M"), (1_000_000, "1M"), (36_700_000, "36.7M"),
    (999_999, "999,999"), (765_432, "765,432"),
])
def test_parameter_counts_as_the_papers_print_them(value: int, text: str) -> None:
    assert tables._format([value], "params_trained") == text
    assert tables._format([value, value], "params_total") == text


# --- links, provenance, determinism ------------------------------------------------------------
def test_rows_link_their_run_directories(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1, 2])
    text = render(plan, tmp_path)
    base = tmp_path / "report"
    rows = rows_of(text)
    for label, run in (("Transformer", "trm-base"), ("Transformer big", "trm-big")):
        links = re.findall(r"\[([^\]]+)\]\(([^)]+)\)", rows[label]["runs"])
        assert [name for name, _ in links] == [f"{DATASET}/{run}/seed1", f"{DATASET}/{run}/seed2"]
        for name, target in links:
            assert not Path(target).is_absolute()
            resolved = (base / target).resolve()
            assert resolved == (tmp_path / "results" / "runs" / name).resolve()
            assert resolved.is_dir() and any(resolved.iterdir())
    assert rows["AB-Net"]["runs"] == "-"
    assert rows["Prior work"]["runs"] == "-"


def test_toy_rows_link_the_shared_run(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1], toy=True)
    rows = rows_of(render(plan, tmp_path))
    link = "[toy/trm-base/seed1](../results/runs/toy/trm-base/seed1)"
    assert rows["Transformer"]["runs"] == rows["Transformer big"]["runs"] == link


def test_provenance_and_rendering_twice(tmp_path: Path, papers: Path) -> None:
    config = make_config([1, 2], tables=[TABLE, SWEEP, CURVE])
    plan = make_plan(config, papers)
    fabricate(plan, tmp_path / "results")
    out = tmp_path / "report" / "tables.md"
    written = write_report(plan, tmp_path / "results", out, tmp_path)
    first = out.read_text(encoding="utf-8")
    assert write_report(plan, tmp_path / "results", out, tmp_path) == written
    assert out.read_text(encoding="utf-8") == first

    assert written[:3] == [out.resolve(), out.resolve().with_name("claims.md"),
                           out.resolve().with_name("tables.json")]
    assert sorted(p.name for p in written[3:]) == [
        f"{SWEEP}.pdf", f"{SWEEP}.png", f"{CURVE}.pdf", f"{CURVE}.png",
        f"{TABLE}.curves.pdf", f"{TABLE}.curves.png"]  # the table's validation curves
    figures = section(first, "Figures")
    for name in (SWEEP, CURVE):
        image = re.search(rf"!\[{re.escape(name)}\]\(([^)]+)\)", figures)
        assert image, name
        png = (out.parent / image[1]).resolve()
        assert png == (out.parent / "figures" / f"{name}.png").resolve()
        assert png.stat().st_size > 0
    assert "Not plotted, no method yet: abnet (not implemented)." in figures

    prov = section(first, "Provenance")
    assert "- git commit: uncommitted/unknown" in prov  # tmp_path is no repository
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
    assert f"- config hash: {digest} (sha256 of the config as sorted JSON)" in prov
    assert "- training devices seen in runs: cpu, cuda" in prov
    assert "compare-mt" in LIBRARIES
    for name in LIBRARIES:
        assert f"{name} {metadata.version(name)}" in prov
    signatures = prov.split("- BLEU signatures seen in runs:\n", 1)[1].splitlines()
    assert signatures == [f"  - sacreBLEU: `{SIG_LC}`", f"  - sacreBLEU: `{SIG_CASED}`",
                          f"  - tokenized: `{SIG_TOK}`"]


def test_config_hash_follows_the_config(tmp_path: Path, papers: Path) -> None:
    texts = []
    for samples in (1000, 2000):
        config = make_config([1])
        config["analysis"]["bootstrap_samples"] = samples
        plan = make_plan(config, papers)
        fabricate(plan, tmp_path / "results")
        texts.append(section(render(plan, tmp_path), "Provenance"))
    hashes = [re.search(r"config hash: (\w+)", t)[1] for t in texts]
    assert hashes[0] != hashes[1]


def test_settings_name_every_experiment_behind_the_numbers(tmp_path: Path,
                                                          papers: Path) -> None:
    """The Settings section records each experiment a cell reads, resolved as its run was,
    and names the config files by their place in the repository (one outside it by name)."""
    plan = make_plan(make_config([1], tables=[TABLE]), papers)
    fabricate(plan, tmp_path / "results")
    out = tmp_path / "report" / "tables.md"
    outside = tmp_path.parent / f"{tmp_path.name}-mirror.yaml"
    write_report(plan, tmp_path / "results", out, tmp_path,
                 configs=[tmp_path / "config" / "config.yaml", outside,
                          tmp_path / "config" / "config.yaml"])
    text = out.read_text(encoding="utf-8")
    recorded = recorded_settings_check.read(text)
    assert recorded["configs"] == ["config/config.yaml"]
    assert f"not named below: {outside.name}." in section(text, "Settings")
    cells = sorted({f"{c.dataset}/{c.experiment}" for _, _, c in plan.table_cells(
        plan.tables[0]) if c.status == "ok"})
    assert sorted(recorded["experiments"]) == cells
    for name, settings in recorded["experiments"].items():
        dataset, experiment = name.split("/")
        assert settings["train"] == json.loads(json.dumps(
            plan.train_settings(dataset, experiment)))
        assert settings["decode"]["beam"] == plan.decode_settings(dataset, experiment).beam


@pytest.mark.parametrize(("status", "expected"), [("", "abc123"), (" M x.py\n", "abc123+dirty")])
def test_git_commit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, status: str,
                    expected: str) -> None:
    calls = []

    def fake_run(args, **kwargs):
        calls.append((args, kwargs["cwd"]))
        stdout = "abc123\n" if args[1] == "rev-parse" else status
        return subprocess.CompletedProcess(args, 0, stdout, "")

    monkeypatch.setattr(provenance.subprocess, "run", fake_run)
    assert provenance.git_commit(tmp_path) == expected
    assert calls[0] == (["git", "rev-parse", "HEAD"], tmp_path)


def test_git_commit_is_not_dirty_from_the_report_it_is_writing(tmp_path: Path) -> None:
    """Rewriting the tracked results/ (tables.md, figures) is not a dirty tree; code is."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "tables.md").write_text("old\n")
    (tmp_path / "x.py").write_text("a = 1\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "c")
    head = git("rev-parse", "HEAD").strip()
    (tmp_path / "results" / "tables.md").write_text("new\n")
    assert provenance.git_commit(tmp_path) == head
    (tmp_path / "x.py").write_text("a = 2\n")
    assert provenance.git_commit(tmp_path) == head + "+dirty"


def test_git_commit_outside_a_repository(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def fake_run(args, **kwargs):
        return subprocess.CompletedProcess(args, 128, "", "fatal: not a git repository")

    monkeypatch.setattr(provenance.subprocess, "run", fake_run)
    assert provenance.git_commit(tmp_path) == "uncommitted/unknown"


def test_corrupt_metrics_file_is_named_with_its_line(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1])
    path = tmp_path / BIG1 / f"metrics.test.{TAG_BIG}.json"
    path.write_text('{\n  "bleu": {\n    "tokenized": 28.0,\n  }\n}\n', encoding="utf-8")
    with pytest.raises(InputError) as err:
        render(plan, tmp_path)
    assert str(path) in str(err.value)
    assert "line 4: invalid JSON" in str(err.value)


@pytest.mark.parametrize("value", ["28.0", float("nan"), float("inf")])
def test_metrics_file_without_the_metric(tmp_path: Path, papers: Path, value) -> None:
    """A score in words, or NaN or infinity (Python's JSON reader takes both, as a file edited
    by hand may hold them: the table would show "nan")."""
    plan = setup(tmp_path, papers, [1])
    path = tmp_path / BIG1 / f"metrics.test.{TAG_BIG}.json"
    data = json.loads(path.read_text())
    data["bleu"]["tokenized"] = value
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(f"{path}: key 'bleu.tokenized' must be a "
                                                   f"finite number, got {value!r}")):
        render(plan, tmp_path)


# (the file under the run trm-big/seed1, the key, the hand-edited value, the error's rest)
IMPOSSIBLE = {
    "BLEU below 0": (f"metrics.test.{TAG_BIG}.json", "bleu.tokenized", -5.0,
                     "key 'bleu.tokenized' must be from 0 to 100, got -5.0"),
    "BLEU above 100": (f"metrics.test.{TAG_BIG}.json", "bleu.tokenized", 250.0,
                       "key 'bleu.tokenized' must be from 0 to 100, got 250.0"),
    "sacreBLEU above 100": (f"metrics.test.{TAG_BIG}.json", "bleu.sacrebleu", 100.5,
                            "key 'bleu.sacrebleu' must be from 0 to 100, got 100.5"),
    "half a parameter": (f"metrics.test.{TAG_BIG}.json", "params.total", 2.5,
                         "key 'params.total' must be a whole number, got 2.5"),
    "no parameters": (f"metrics.test.{TAG_BIG}.json", "params.total", 0,
                      "key 'params.total' must be at least 1, got 0"),
    "a negative latency": (f"latency.{TAG_BIG}.vs.trm-base.{TAG_BASE}.json",
                           "latency_ms.median", -1.0,
                           "key 'latency_ms.median' must be above 0, got -1.0"),
    "a speedup of 0": (f"latency.{TAG_BIG}.vs.trm-base.{TAG_BASE}.json", "speedup", 0.0,
                       "key 'speedup' must be above 0, got 0.0"),
    "a speedup its medians do not give": (
        f"latency.{TAG_BIG}.vs.trm-base.{TAG_BASE}.json", "speedup", 7.0,
        "key 'speedup' is 7, but the baseline's and the run's median latencies make it 2"),
    "a p-value above 1": (f"bootstrap.test.{TAG_BIG}.bleu.vs.trm-base.{TAG_BASE}.json",
                          "p_better", 3.0, "key 'p_better' must be from 0 to 1, got 3.0"),
    "a finding its p-values do not give": (
        f"bootstrap.test.{TAG_BIG}.bleu.vs.trm-base.{TAG_BASE}.json", "p_better", 0.5,
        "key 'significance' is 'better', but its p-values make it 'none'"),
}


def _with(data: dict, key: str, value: object) -> dict:
    """`data` with the value at the dotted `key` (`bleu.tokenized`) replaced by `value`."""
    *parents, last = key.split(".")
    record = data
    for part in parents:
        record = record[part]
    record[last] = value
    return data


@pytest.mark.parametrize("case", IMPOSSIBLE)
def test_a_number_no_job_could_write_is_one_line_naming_it(tmp_path: Path, papers: Path,
                                                          case: str) -> None:
    """A record edited by hand to a number of the right type that its job cannot write, or
    that disagrees with the numbers it is made from, is refused, not shown as a result."""
    plan = setup(tmp_path, papers, [1])
    name, key, value, message = IMPOSSIBLE[case]
    path = tmp_path / BIG1 / name
    path.write_text(json.dumps(_with(json.loads(path.read_text()), key, value)),
                    encoding="utf-8")
    with pytest.raises(InputError, match=f"^{re.escape(f'{path}: {message}')}$"):
        render(plan, tmp_path)


def test_trained_parameters_above_all_of_them_are_refused(tmp_path: Path, papers: Path) -> None:
    plan = setup(tmp_path, papers, [1])
    path = tmp_path / BIG1 / f"metrics.test.{TAG_BIG}.json"
    data = json.loads(path.read_text())
    data["params"]["trained"] = data["params"]["total"] + 1
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(
            f"{path}: key 'params.trained' is {data['params']['trained']}, more than "
            f"'params.total' ({data['params']['total']})")):
        Results(plan, tmp_path / "results").measure(
            plan.cell(DATASET, "trm-big", "test"), "test", "params_trained", 1, None)


# --- what each score column of a real-data table is ----------------------------------------------
def test_real_data_columns_say_how_ours_and_the_papers_were_scored(tmp_path: Path,
                                                                   papers: Path) -> None:
    """Under the table: per BLEU column our scorer, the text it saw and the signatures the
    runs recorded (both runs' sacreBLEU ones), the paper's `bleu` record (its sacreBLEU
    column's own), and the rows the paper scored otherwise."""
    plan = setup(tmp_path, papers, [1, 2])
    notes = [line for line in section(render(plan, tmp_path), TABLE).splitlines()
             if line.startswith(("- BLEU:", "- sacreBLEU:", "- How the paper", "- Rows the"))]
    assert notes == [
        "- BLEU: multi-bleu.perl (sacreBLEU tokenize none, no smoothing) on Moses-tokenized, "
        f"cased text, hyphenated compounds split; signature `{SIG_TOK}`. The paper reported: "
        "tokenized BLEU on Moses-tokenized, cased text, compounds split.",
        "- sacreBLEU: sacreBLEU on detokenized text (the output Moses-detokenized), cased; "
        f"signature `{SIG_LC}`, `{SIG_CASED}`. The paper reported: sacreBLEU on 13a-tokenized "
        "(sacreBLEU's default), cased text.",
        "- How the paper scored, as its file records it: Section 4, footnote 2",
        "- How the paper scored, as its file records it: Section 4: sacreBLEU, "
        "nrefs:1|case:mixed|tok:13a",
        "- Rows the paper scored otherwise: Prior work is quoted, scored by its own script. The "
        "harness scores all its rows one way, as these notes say.",
    ]


def _chrf_papers(directory: Path) -> Path:
    """The toy paper whose table1 has a chrF column beside sacreBLEU."""
    paper = copy.deepcopy(PAPER_YAML)
    columns = paper["tables"]["table1"]["columns"]
    paper["tables"]["table1"]["columns"] = {
        **{k: columns[k] for k in ("bleu", "sacre")},
        "chrf": {"label": "chrF", "dataset": DATASET, "split": "test", "metric": "chrf"},
        **{k: v for k, v in columns.items() if k not in ("bleu", "sacre")}}
    return write_papers(directory, paper)


def test_a_chrf_column_reads_the_metrics_file_and_carries_no_mark(tmp_path: Path) -> None:
    plan = setup(tmp_path, _chrf_papers(tmp_path / "papers"), [1])
    text = render(plan, tmp_path)
    rows = rows_of(text)
    # sacreBLEU + 30 in the fabricated files; the bootstrap tests BLEU only, the paper has none
    assert rows["Transformer"]["chrF"] == "56.00"
    assert rows["Transformer big"]["chrF"] == "57.00"
    assert rows["Transformer big"]["sacreBLEU"] == "27.00▲"
    body = section(text, TABLE)
    assert (f"- chrF: sacreBLEU's chrF (character 6-grams, beta 2) on detokenized text, cased; "
            f"signature `{SIG_CHRF}`.\n") in body
    # no chrF bootstrap is asked for, and claims about BLEU leave chrF out
    assert not [t for t in plan.targets() if ".chrf." in t]
    (claim,) = [c for c in plan.claims if c.claim == "Big beats base"]
    assert claim.columns == ["bleu", "sacre"]


def test_a_chrf_column_on_a_toy_world_is_not_shown(tmp_path: Path) -> None:
    """chrF is a real-data score: the papers' tables carry a chrF column for their real
    datasets, which the toy world's default does not show."""
    plan = make_plan(make_config([1], toy=True), _chrf_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    rows = rows_of(render(plan, tmp_path))
    assert "chrF" not in rows["Transformer"] and "sacreBLEU" in rows["Transformer"]


def test_a_metrics_file_from_before_chrf_asks_for_evaluate_again(tmp_path: Path) -> None:
    plan = setup(tmp_path, _chrf_papers(tmp_path / "papers"), [1])
    path = tmp_path / BIG1 / f"metrics.test.{TAG_BIG}.json"
    record = json.loads(path.read_text())
    del record["chrf"]
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(InputError) as err:
        render(plan, tmp_path)
    assert str(err.value) == (f"{path}: missing key 'chrf.score'; an older evaluate wrote this "
                              "file: delete it, or run snakemake with --forcerun evaluate, to "
                              "score the run again")


# (the pre-training summary's key, a value its job cannot write, the error's rest)
IMPOSSIBLE_PRETRAINING = {
    "an accuracy above 1": ("heldout.accuracy", 1.5,
                            "key 'heldout.accuracy' must be from 0 to 1, got 1.5"),
    "a perplexity below 1": ("heldout.perplexity", 0.5,
                             "key 'heldout.perplexity' must be at least 1, got 0.5"),
    "updates in halves": ("updates", 10.5, "key 'updates' must be a whole number, got 10.5"),
    "a negative time": ("seconds", -1.0, "key 'seconds' must be at least 0, got -1.0"),
    "more tokens replaced than selected": (
        "settings.random_replace_prob", 0.6, "keys 'settings.mask_replace_prob' and "
        "'settings.random_replace_prob' sum to more than 1"),
}


def pretrain_summary(plan, name: str) -> dict:
    """A summary of the pre-training of `name` with the settings the plan gives it."""
    from dataclasses import asdict

    from nmtbench.workflow.config import pretrain_settings
    from nmtbench.workflow.pretrain_settings import PretrainConfig

    settings = PretrainConfig.from_dict(pretrain_settings(plan.config["pretraining"][name]))
    return {"settings": asdict(settings), "params": 1000, "updates": 10, "epochs": 1.0,
            "seconds": 2.0, "heldout": {"accuracy": 0.5, "perplexity": 9.0}}


@pytest.mark.parametrize("case", IMPOSSIBLE_PRETRAINING)
def test_a_pretraining_number_no_job_could_write_is_refused(tmp_path: Path, case: str) -> None:
    """The pre-trained checkpoints' section reads their summaries within the values the
    pre-training writes."""
    from smoke import smoke_plan

    plan = smoke_plan()
    key, value, message = IMPOSSIBLE_PRETRAINING[case]
    name = plan.pretrained_targets()[0]
    path = tmp_path / name / "pretrain_summary.json"
    path.parent.mkdir()
    summary = pretrain_summary(plan, name)
    tables._pretraining_rows(plan, tmp_path / "elsewhere")  # none there: "missing", no error
    path.write_text(json.dumps(summary), encoding="utf-8")
    tables._pretraining_rows(plan, tmp_path)
    path.write_text(json.dumps(_with(summary, key, value)), encoding="utf-8")
    with pytest.raises(InputError, match=f"^{re.escape(f'{path}: {message}')}$"):
        tables._pretraining_rows(plan, tmp_path)


def test_a_checkpoint_pre_trained_with_other_settings_than_the_config_is_refused(
        tmp_path: Path) -> None:
    """`report` by hand after a BERT's pre-training settings changed in the config but before
    the workflow pre-trained it again: its runs are current on the BERT there, which the
    config no longer describes. A setting an older summary leaves out is its default."""
    from smoke import smoke_plan

    plan = smoke_plan()
    name = plan.pretrained_targets()[0]
    path = tmp_path / name / "pretrain_summary.json"
    path.parent.mkdir()
    summary = pretrain_summary(plan, name)
    dropout = summary["settings"].pop("dropout")  # an older summary's
    path.write_text(json.dumps(summary), encoding="utf-8")
    tables._pretraining_rows(plan, tmp_path)
    summary["settings"] |= {"dropout": dropout, "max_updates": 4}
    path.write_text(json.dumps(summary), encoding="utf-8")
    wanted = plan.config["pretraining"][name]["max_updates"]
    with pytest.raises(InputError) as err:
        tables._pretraining_rows(plan, tmp_path)
    assert str(err.value) == (
        f"{path.parent}: pre-trained with other settings than config key 'pretraining.{name}' "
        f"gives it now (max_updates 4 there, {wanted} in the config); run the workflow, which "
        f"pre-trains it again, or delete {path.parent}")


def test_a_run_on_a_checkpoint_or_data_made_again_is_not_current(tmp_path, monkeypatch):
    """A run records the digests of the BERT (data/pretrained/...) and the data it read. The
    report, by hand too, compares them with the checkpoint in its --pretrained directory,
    whose summary it shows, and the data beside its results directory, where it reads the
    test sets: results, data and checkpoints copied elsewhere and reported from there are
    compared there, not with the working directory's (where they are not: nothing to
    compare)."""
    from smoke import smoke_plan

    from nmtbench.workflow.config import as_json

    plan = smoke_plan()
    cell = plan.cell("toy", "abnet-enc-at", "test")
    paths = plan.run_paths("toy", str(cell.run), 1)
    bert = Path(paths["pretrained"]["src_bert"])
    assert bert.parts[:2] == ("data", "pretrained") and not plan.run_inputs("toy", str(cell.run))
    copy = tmp_path / "copy"  # the workflow's directory, copied
    for path in provenance.input_paths(paths).values():
        target = copy / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(path) == bert:
            target.mkdir(exist_ok=True)
            (target / "model.safetensors").write_text("the first pre-training")
        elif not target.exists():
            target.write_text("text\n")
    run_dir = copy / cell.run_dir(1)
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({
        "experiment": json.loads(as_json(plan.run_settings("toy", str(cell.run), 1))),
        "paths": paths}))
    monkeypatch.chdir(copy)
    (run_dir / "train_summary.json").write_text(json.dumps(
        {"inputs": provenance.input_digests(paths)}))
    monkeypatch.chdir(tmp_path)  # reported from elsewhere
    results, pretrained = copy / "results", copy / "data" / "pretrained"
    assert Results(plan, results, pretrained).run_current(cell, 1)
    (copy / bert / "model.safetensors").write_text("pre-trained again")
    assert not Results(plan, results, pretrained).run_current(cell, 1)
    (copy / bert / "model.safetensors").write_text("the first pre-training")
    assert Results(plan, results, pretrained).run_current(cell, 1)
    (copy / paths["train_src"]).write_text("a corpus made again\n")  # beside the results
    assert not Results(plan, results, pretrained).run_current(cell, 1)

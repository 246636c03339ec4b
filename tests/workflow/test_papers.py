"""papers/*.yaml: the real files load, carry the papers' numbers, and a bad file names its key."""

import shutil
from pathlib import Path

import pytest
import yaml

from nmtbench.errors import InputError
from nmtbench.workflow.metric_registry import METRICS
from nmtbench.workflow.papers import PAPERS_DIR, load_catalogue

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parent / "shared" / "seeds"

# Every table and figure METHODS.md names (plus the harness's own: toy world, Multi30k).
EXPECTED = {
    "abnet2020": ["table1", "table2", "table3a", "table3b", "figure2", "figure3a", "figure3b"],
    "deepfusion2022": [f"table{i}" for i in range(1, 8)] + ["figure3"],
    "bertfused2020": ["table1", "table5", "table6"],
    "ctnmt2020": ["table1"],
    "bertkd2020": [f"table{i}" for i in range(1, 6)]
    + ["table6a", "table6b", "figure2a", "figure2b", "figure2c"],
    "toyworld": ["table1", "figure1"],
    "multi30k": ["table1"],
}


@pytest.fixture(scope="module")
def catalogue():
    return load_catalogue()


def test_real_papers_load_and_hold_every_table_and_figure(catalogue):
    assert PAPERS_DIR == ROOT / "papers"
    names = set(catalogue.names())
    for paper, items in EXPECTED.items():
        for item in items:
            assert f"{paper}.{item}" in names, f"{paper}.{item} missing"
            kind = catalogue.figures if item.startswith("figure") else catalogue.tables
            assert kind[f"{paper}.{item}"].paper == paper
    assert set(catalogue.papers) == set(EXPECTED)
    # names() lists tables, then figures, each sorted: what `tables: [all]` expands to
    assert catalogue.names() == sorted(catalogue.tables) + sorted(catalogue.figures)


def test_every_cell_and_series_names_a_defined_experiment(catalogue):
    for table in catalogue.tables.values():
        for row in table.rows:
            assert row.experiment in catalogue.experiments
            assert set(row.reported) <= {c.key for c in table.columns}
        if table.baseline is not None:
            assert table.baseline in [r.experiment for r in table.rows]
    for figure in catalogue.figures.values():
        assert figure.experiments()
        assert set(figure.experiments()) <= set(catalogue.experiments)
    # every experiment remembers the file that defined it first
    assert catalogue.sources["abnet"] == str(PAPERS_DIR / "abnet2020.yaml")
    assert catalogue.sources["transformer-tiny"] == str(PAPERS_DIR / "toyworld.yaml")


def test_paper_sources_are_the_seed_documents(catalogue):
    if not SEEDS.is_dir():
        pytest.skip("../shared/seeds is absent")
    for paper, meta in catalogue.papers.items():
        if not meta["source"].startswith("nmtbench."):  # the harness's own tables aside
            # written as the seed's name or as ../shared/seeds/<name>
            assert (SEEDS / Path(meta["source"]).name).is_file(), paper


def _reported(catalogue, table, experiment, column):
    row = next(r for r in catalogue.tables[table].rows if r.experiment == experiment)
    return row.reported[column]


def _row(catalogue, table, label):
    return next(r for r in catalogue.tables[table].rows if r.label == label)


def test_spot_check_reported_numbers_against_the_papers(catalogue):
    # AB-Net (seed 000), Table 1: AB-Net 36.49 on IWSLT14 De-En; Transformer-Base latency 778 ms
    t1 = catalogue.tables["abnet2020.table1"]
    columns = {c.key: c for c in t1.columns}
    assert (columns["iwslt14_de_en"].dataset, columns["iwslt14_de_en"].split,
            columns["iwslt14_de_en"].metric) == ("iwslt14-de-en", "test", "bleu_tokenized")
    assert _reported(catalogue, "abnet2020.table1", "abnet", "iwslt14_de_en") == 36.49
    assert _reported(catalogue, "abnet2020.table1", "abnet", "wmt14_de_en") == 33.57
    assert columns["latency"].metric == "latency_ms"
    assert _reported(catalogue, "abnet2020.table1", "transformer-base", "latency") == 778
    assert t1.baseline == "transformer-base"
    # Deep fusion (seed 001), Table 1: "Ours" 31.59 En-De, 44.21 En-Fr, 171M parameters
    ours = _row(catalogue, "deepfusion2022.table1", "Ours")
    assert ours.reported["en_de"] == 31.59
    assert ours.reported["en_fr"] == 44.21
    assert ours.reported["params"] == 171_000_000
    # BERT-KD (seed 003), Table 1: "+ BERT teacher" dev 36.93, test 35.63; baseline 35.27/34.09
    t = "bertkd2020.table1"
    student = _row(catalogue, t, "+ BERT teacher")
    assert student.reported == {"dev": 36.93, "test": 35.63}
    assert _reported(catalogue, t, "bertkd-transformer-base-deen", "test") == 34.09
    assert _reported(catalogue, t, "bertkd-transformer-base-deen", "dev") == 35.27
    dev = next(c for c in catalogue.tables[t].columns if c.key == "dev")
    assert (dev.dataset, dev.split) == ("iwslt14-de-en", "valid")
    # a number the paper does not give stays null, not 0
    assert _reported(catalogue, t, "bertkd-ext-lightconv", "dev") is None


def test_table_runs_and_figure_experiments(catalogue):
    table = catalogue.tables["toyworld.table1"]
    cells = {(c.dataset, r.experiment, c.split) for r in table.rows for c in table.columns}
    assert cells == {("toy", e, "test") for e in ("transformer-tiny", "transformer-tiny-500",
                                                  "bert-init", "bert-init-500",
                                                  "bert-frozen-500")}
    sweep = catalogue.figures["toyworld.figure1"]
    assert sweep.kind == "sweep"
    assert sweep.experiments() == ["transformer-tiny-d32", "transformer-tiny-d64",
                                   "transformer-tiny"]
    assert sweep.spec["x"]["values"] == [32, 64, 128]
    buckets = catalogue.figures["bertkd2020.figure2a"]
    assert buckets.kind == "buckets"
    assert buckets.experiments() == ["bertkd-transformer-base-deen", "bertkd-kd-deen"]
    assert "kind" not in buckets.spec and "dataset" not in buckets.spec


# --- errors name the file and the key -----------------------------------------------------

@pytest.fixture
def papers(tmp_path):
    """A papers dir holding the schema and one paper file (the toy world's)."""
    shutil.copy(PAPERS_DIR / "schema.yaml", tmp_path / "schema.yaml")
    shutil.copy(PAPERS_DIR / "toyworld.yaml", tmp_path / "toyworld.yaml")
    return tmp_path


def _rewrite(path: Path, mutate) -> None:
    data = yaml.safe_load(path.read_text())
    mutate(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _table(d):
    return d["tables"]["table1"]


def _on_real_data(d, **bleu):
    """toyworld.yaml's table1 on IWSLT14 De-En, reporting 30.1 BLEU and sacreBLEU in its first
    row; with a `bleu` record made of `bleu` over a complete one (None: none)."""
    table = _table(d)
    for key in ("bleu", "sacrebleu"):
        table["columns"][key].update(dataset="iwslt14-de-en")
    table["rows"][0]["reported"].update(bleu=30.1, sacrebleu=30.1)
    record = {"kind": "tokenized", "tokenizer": "moses", "case": "lowercased",
              "compound_split": False, "where": "footnote 1",
              "columns": {"sacrebleu": {"kind": "sacrebleu", "tokenizer": "13a"}}}
    if bleu.get("record", True) is not None:
        table["bleu"] = {**record, **bleu}


# a claim about toyworld.yaml's table1
_CLAIM = {"claim": "all pairs beat 500", "source": "nowhere", "table": "table1",
          "row": "transformer-tiny", "than": "transformer-tiny-500"}


@pytest.mark.parametrize("mutate, key, message", [
    (lambda d: _table(d)["rows"][1].update(experiment="transformer-tinny"),
     "tables.table1.rows.1.experiment", "unknown experiment 'transformer-tinny'"),
    (lambda d: _table(d)["rows"][0]["reported"].update(bleuu=30.1),
     "tables.table1.rows.0.reported.bleuu", "no such column; columns: bleu, sacrebleu, params"),
    (lambda d: _table(d)["rows"][0].update(trained_on={"bleuu": "wmt16-ro-en-bt"}),
     "tables.table1.rows.0.trained_on.bleuu", "no such column; columns: bleu, sacrebleu, params"),
    (lambda d: _table(d)["columns"]["bleu"].update(dataset="iwslt99-de-en"),
     "tables.table1.columns.bleu.dataset", "'iwslt99-de-en' is not one of"),
    (lambda d: _table(d)["columns"]["bleu"].update(metric="bleu"),
     "tables.table1.columns.bleu.metric", "'bleu' is not one of"),
    (lambda d: _table(d).update(baseline="transformer-tiny-d32"),
     "tables.table1.baseline", "'transformer-tiny-d32' is not one of the table's rows"),
    (lambda d: _table(d)["rows"].append(dict(_table(d)["rows"][0])),
     "tables.table1.rows", "experiment 'transformer-tiny-500' appears twice"),
    (lambda d: d["figures"]["figure1"]["x"].update(values=[32, 64]),
     "figures.figure1.experiments", "3 experiments for 2 x values"),
    (lambda d: d["figures"]["figure1"]["experiments"].__setitem__(0, "ghost"),
     "figures.figure1.experiments.0", "unknown experiment 'ghost'"),
    (lambda d: d["figures"]["figure1"].update(reported={"ghost": [1.0]}),
     "figures.figure1.reported.ghost", "not one of y, y2"),
    (lambda d: d["figures"]["figure1"].update(reported={"y": [1.0, None]}),
     "figures.figure1.reported.y", "2 values for 3 x values"),
    (lambda d: d["figures"]["figure1"].pop("y"), "figures.figure1", "'y' is a required"),
    (lambda d: d["experiments"]["transformer-tiny"].update(method="magic"),
     "experiments.transformer-tiny.method", "unknown method 'magic'; known: abnet, "),
    (lambda d: d.update(claims=[dict(_CLAIM, table="table9")]), "claims.0.table",
     "no table 'table9' in this file"),
    (lambda d: d.update(claims=[dict(_CLAIM, than="ghost")]), "claims.0.than",
     "'ghost' is not a row of table1"),
    (lambda d: d.update(claims=[dict(_CLAIM, columns=["bleuu"])]), "claims.0.columns",
     "no column 'bleuu' in table1; columns: bleu, sacrebleu, params"),
    (lambda d: d.update(claims=[dict(_CLAIM, above=1.0)]), "claims.0",
     "is valid under each of"),
    (lambda d: d.pop("title"), "(top level)", "'title' is a required property"),
    # how the paper scored its BLEU: said wherever a real dataset's BLEU is reported
    (lambda d: _on_real_data(d, record=None), "tables.table1",
     "column 'bleu' reports BLEU but the table has no `bleu` record"),
    (lambda d: _on_real_data(d, columns={"sacrebleu": {}}), "tables.table1.bleu.columns.sacrebleu",
     "should be non-empty"),
    (lambda d: _on_real_data(d, columns={"params": {"case": "cased"}}),
     "tables.table1.bleu.columns.params", "not a BLEU column of the table; those are bleu, "
     "sacrebleu"),
    (lambda d: _on_real_data(d, columns={}), "tables.table1.bleu",
     "the paper's BLEU in column 'sacrebleu' is tokenized, but the column compares it with "
     "sacrebleu; change one (a column's own kind: bleu.columns.sacrebleu.kind)"),
    (lambda d: _on_real_data(d, case="upper"), "tables.table1.bleu.case",
     "'upper' is not one of ['cased', 'lowercased', 'unknown']"),
    (lambda d: (_on_real_data(d), _table(d)["bleu"].pop("where")), "tables.table1.bleu",
     "'where' is a required property"),
    (lambda d: d.update(paper="toy"), "paper",
     "is 'toy' but must equal the file name 'toyworld'"),
])
def test_bad_paper_file_names_file_and_key(papers, mutate, key, message):
    path = papers / "toyworld.yaml"
    _rewrite(path, mutate)
    with pytest.raises(InputError) as err:
        load_catalogue(papers)
    text = str(err.value)
    assert text.startswith(f"{path}: key '{key}'")
    assert message in text
    assert "\n" not in text


def test_a_bleu_record_loads_and_resolves_per_column(papers):
    _rewrite(papers / "toyworld.yaml", _on_real_data)
    table = load_catalogue(papers).tables["toyworld.table1"]
    assert table.bleu_scoring("bleu") == {"kind": "tokenized", "tokenizer": "moses",
                                          "case": "lowercased", "compound_split": False,
                                          "where": "footnote 1"}
    assert table.bleu_scoring("sacrebleu")["kind"] == "sacrebleu"
    assert table.bleu_scoring("sacrebleu")["case"] == "lowercased"


def test_the_unmodified_copy_loads(papers):
    catalogue = load_catalogue(papers)
    assert catalogue.names() == ["toyworld.table1", "toyworld.figure1"]


def test_a_changed_file_is_read_again_and_each_load_is_a_copy_of_its_own(papers):
    """A process reads the files once until one changes (the tests check many configs)."""
    first = load_catalogue(papers)
    first.tables.clear()  # a caller's changes are its own
    assert load_catalogue(papers).names() == ["toyworld.table1", "toyworld.figure1"]
    _rewrite(papers / "toyworld.yaml", lambda d: d["figures"].pop("figure1"))
    assert load_catalogue(papers).names() == ["toyworld.table1"]
    (papers / "schema.yaml").unlink()
    with pytest.raises(InputError, match="schema.yaml: missing"):
        load_catalogue(papers)


def test_experiment_defined_differently_in_two_files_names_both(papers):
    other = papers / "zother.yaml"
    other.write_text(yaml.safe_dump({
        "paper": "zother", "title": "t", "source": "s",
        "experiments": {"transformer-tiny": {"method": "transformer", "size": "base"}},
        "tables": {"table1": {"caption": "c",
                              "columns": {"bleu": {"label": "B", "dataset": "toy",
                                                   "split": "test",
                                                   "metric": "bleu_tokenized"}},
                              "rows": [{"experiment": "transformer-tiny", "label": "x",
                                        "reported": {}}]}},
    }))
    with pytest.raises(InputError) as err:
        load_catalogue(papers)
    text = str(err.value)
    assert text.startswith(f"{other}: key 'experiments.transformer-tiny'")
    assert str(papers / "toyworld.yaml") in text
    # the identical definition is allowed: one experiment, first file recorded as its source
    toy = yaml.safe_load((papers / "toyworld.yaml").read_text())
    _rewrite(other, lambda d: d["experiments"].update(
        {"transformer-tiny": toy["experiments"]["transformer-tiny"]}))
    catalogue = load_catalogue(papers)
    assert catalogue.sources["transformer-tiny"] == str(papers / "toyworld.yaml")
    assert "zother.table1" in catalogue.tables


def test_invalid_yaml_names_file_and_line(papers):
    path = papers / "toyworld.yaml"
    lines = path.read_text().splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("title:"))
    lines[title] = "title: broken: value"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        load_catalogue(papers)
    assert str(err.value).startswith(f"{path}: line {title + 1}: invalid YAML")


def test_non_utf8_and_missing_schema(papers):
    path = papers / "toyworld.yaml"
    path.write_bytes(b"paper: toyworld\ntitle: caf\xe9\n")
    with pytest.raises(InputError, match="not valid UTF-8") as err:
        load_catalogue(papers)
    assert str(err.value).startswith(str(path))
    (papers / "schema.yaml").unlink()
    with pytest.raises(InputError, match="schema.yaml: missing"):
        load_catalogue(papers)


def test_every_table_reporting_bleu_on_real_data_records_how(catalogue):
    """The record of each paper table (papers/schema.yaml $defs.bleu), spot-checked against
    what the seeds say: the toy world alone, which published nothing, has none."""
    for name, table in catalogue.tables.items():
        bleu = [c for c in table.columns if c.metric in ("bleu_tokenized", "sacrebleu")]
        assert (table.bleu is None) == (not bleu or table.paper == "toyworld"), name
    # AB-Net (seed 000, Section 4.1): case-insensitive on IWSLT14, case-sensitive on WMT
    abnet = catalogue.tables["abnet2020.table1"]
    assert abnet.bleu_scoring("iwslt14_de_en")["case"] == "lowercased"
    assert abnet.bleu_scoring("wmt14_en_de")["case"] == "cased"
    assert abnet.bleu_scoring("wmt14_en_de")["tokenizer"] == "wordpiece"
    assert "Mask-Predict" in abnet.bleu["rows_scored_differently"]
    # BERT-KD (seed 003, footnote 4): compounds split on WMT14 En-De only
    assert catalogue.tables["bertkd2020.table3"].bleu["compound_split"] is True
    assert catalogue.tables["bertkd2020.table1"].bleu["compound_split"] is False
    # deep fusion: tokenized, case-sensitive; CTNMT's slides state the case alone
    assert catalogue.tables["deepfusion2022.table1"].bleu["case"] == "cased"
    assert catalogue.tables["ctnmt2020.table1"].bleu["kind"] == "unknown"


def test_every_claim_agrees_with_the_papers_own_numbers(catalogue):
    """A transcribed claim is a finding the paper's own table shows, on every column it names
    where the table has both numbers (and at least one). A table of the harness's own runs
    (no reported numbers: multi30k's) checks other papers' findings: its claims' sources name
    the paper whose finding each is."""
    papers = {name.split(".")[0] for name in catalogue.tables}
    for claim in catalogue.claims:
        table = catalogue.tables[claim.table]
        rows = {row.experiment: row for row in table.rows}
        if not any(row.reported for row in table.rows):
            assert claim.source.split()[0] in papers - {claim.paper}, claim.claim
            continue
        compared = 0
        for col in (c for c in table.columns if c.key in claim.columns):
            ours = rows[claim.row].reported.get(col.key)
            theirs = claim.above if claim.than is None else rows[claim.than].reported.get(col.key)
            if ours is None or theirs is None:
                continue
            assert (ours < theirs if METRICS[col.metric].lower_is_better else ours > theirs), (
                claim.claim, col.key, ours, theirs)
            compared += 1
        assert compared, claim.claim
    # every paper with a method in the harness states findings
    assert {c.paper for c in catalogue.claims} >= {
        "abnet2020", "bertfused2020", "ctnmt2020", "bertkd2020", "deepfusion2022"}

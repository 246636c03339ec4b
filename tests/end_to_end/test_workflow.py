"""End to end: the smoke config's whole DAG, run once by real snakemake (the session fixture
`smoke_run`), and what its outputs must show."""

import json
import re
import shutil

import pytest
import recorded_settings_check
import torch
import yaml
from fabricated_runs import section
from smoke import ROOT, SMOKE, run_dir, smoke_plan, snakemake
from tables_json_check import (
    cell_mismatches,
    claim_and_figure_mismatches,
    missing_numbers,
    schema_errors,
)
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmtbench import cli
from nmtbench.data.tokenization import load_tokenizer
from nmtbench.report.results import Results
from nmtbench.workflow.run_inputs import back_translation

pytestmark = pytest.mark.slow


def test_tables_md_shows_every_requested_table_with_its_runs(smoke_run):
    text = (smoke_run / "results" / "tables.md").read_text()
    plan = smoke_plan()
    for name in plan.names:
        if name in plan.catalogue.tables:
            assert f"## {name}\n" in text
    for experiment, label in (("transformer-tiny", "Transformer-tiny, all pairs"),
                              ("transformer-tiny-500", "Transformer-tiny, 500 pairs")):
        run, tag = run_dir(smoke_run, experiment)
        metrics = json.loads((run / f"metrics.test.{tag}.json").read_text())
        assert set(metrics["bleu"]) >= {"sacrebleu", "signature", "tokenized"}
        assert set(metrics["rouge"]) == {"rouge1", "rouge2", "rougeL"}
        assert metrics["params"]["total"] == metrics["params"]["trained"] > 0
        row = next(line for line in text.splitlines() if line.startswith(f"| {label} "))
        assert f"{metrics['bleu']['tokenized']:.2f}" in row
        assert f"[toy/{run.parent.name}/seed1](runs/toy/{run.parent.name}/seed1)" in row
    assert metrics["train"]["train_pairs"] == 100  # the smoke config's train_pairs override
    # rows no run serves are shown, not silently dropped: the quoted ones of deep fusion's
    # Table 1 (every other cell of the smoke tables runs on the toy world; test_report checks
    # "not implemented" cells)
    assert "external (quoted by the paper)" in text
    # the claims: counted at the top (as claims.md counts them), all of them in claims.md
    tally = re.search(r"(?m)^(\*\*\d+ of \d+ checked claims hold\*\* \(of \d+ transcribed\)): "
                      r"per table below; all in \[claims\.md\]\(claims\.md\)\.$", text)
    assert tally, text[:2000]
    claims = (smoke_run / "results" / "claims.md").read_text()
    assert claims.startswith("# Claims\n") and tally[1] in claims
    # the settings behind the numbers, named by the config files snakemake merged, in order
    recorded = recorded_settings_check.read(text)
    assert recorded["configs"] == ["config/config.yaml", SMOKE.relative_to(ROOT).as_posix()]
    assert "multi30k-de-en/multi30k-transformer" not in recorded["experiments"]
    assert "toy/transformer-tiny-500" in recorded["experiments"]
    assert recorded_settings_check.differences(recorded) == []


def test_tables_json_holds_what_tables_md_shows(smoke_run):
    """results/tables.json beside tables.md: valid against report/tables.schema.json, every
    number the page shows, every cell with the run files its numbers come from."""
    results = smoke_run / "results"
    record = json.loads((results / "tables.json").read_text())
    text = (results / "tables.md").read_text()
    assert schema_errors(record) == []
    assert missing_numbers(text, record) == []
    assert cell_mismatches(text, record) == []
    assert claim_and_figure_mismatches(text, record) == []
    scores = [cell for table in record["tables"] for cell in table["cells"]
              if cell["metric"] == "bleu_tokenized" and cell["status"] == "ok"]
    assert scores
    for cell in scores:
        metrics = json.loads((results / cell["run_dirs"][0] /
                              f"metrics.{cell['split']}.{cell['tag']}.json").read_text())
        assert cell["ours"]["seeds"]["1"] == metrics["bleu"]["tokenized"]
        assert cell["signatures"] == [metrics["bleu"]["tokenized_signature"]]
        assert cell["settings"] in record["settings"]["experiments"]


def test_the_smoke_run_runs_every_rule_but_those_of_real_data(smoke_run):
    """Every rule ran at least once: all but the download, preparation, snapshot and trimming
    of real datasets and checkpoints, which test_datasets.py and test_pretrained.py run."""
    metadata = (smoke_run / ".snakemake" / "metadata").iterdir()
    ran = {json.loads(path.read_text())["rule"] for path in metadata}
    assert ran == {"toyworld", "reverse_dataset", "tokenizer", "pretrain", "train", "decode",
                   "distill", "backtranslate", "latency", "latency_vs_baseline", "evaluate",
                   "bootstrap", "buckets", "soft_targets", "report"}


def test_every_run_records_the_files_the_plan_gives_it(smoke_run):
    """The report takes a run for its cell only on the files Plan.run_paths names, so the
    train rule must pass exactly those: every run of the smoke DAG recorded them."""
    plan = smoke_plan()
    for dataset, run in plan.trained_runs():
        for seed in plan.seeds:
            config = smoke_run / "results" / "runs" / dataset / run / f"seed{seed}" / "config.json"
            recorded = json.loads(config.read_text())["paths"]
            assert recorded == plan.run_paths(dataset, run, seed), (dataset, run)


def test_a_joint_vocabulary_run_reads_both_sides_with_one_tokenizer(smoke_run):
    """`vocabulary: joint` (deep fusion's baselines on the paper config; the smoke config's
    transformer-tiny-500): the DAG trains one WordPiece on both sides and the run reads both
    with it; `share_embeddings` makes the encoder's and decoder's embeddings one table in the
    checkpoint."""
    assert smoke_plan().run_settings("toy", "transformer-tiny-500", 1)["share_embeddings"]
    run, tag = run_dir(smoke_run, "transformer-tiny-500")
    joint = "data/toy/tokenizer/joint"
    paths = json.loads((run / "config.json").read_text())["paths"]
    assert paths["src_tokenizer"] == paths["tgt_tokenizer"] == joint
    tokenizer = load_tokenizer(smoke_run / joint)  # knows both languages' words
    for side in ("src", "tgt"):
        line = (smoke_run / f"data/toy/prepared/train.{side}").read_text().splitlines()[0]
        assert tokenizer.unk_token_id not in tokenizer(line)["input_ids"], side
    state = torch.load(run / "checkpoints" / "best.pt", weights_only=True)["model"]
    assert torch.equal(state["encoder.embed.weight"], state["decoder.embed.weight"])
    assert json.loads((run / f"metrics.test.{tag}.json").read_text())["bleu"]["tokenized"] >= 0


def test_toy_berts_are_pretrained_in_the_dag_and_loaded_by_the_bert_runs(smoke_run):
    """The toy BERTs are HF directories made in the DAG; bert-init/bert-frozen load them."""
    text = (smoke_run / "results" / "tables.md").read_text()
    assert "## Pre-trained checkpoints" in text
    # (toy-bert-joint: the BERT-KD teacher's, for bertkd2020.figure2a; the GPT-2s: CTNMT's
    # Table 2 teachers)
    assert smoke_plan().pretrained_targets() == ["toy-bert-joint", "toy-bert-src",
                                                 "toy-bert-tgt", "toy-gpt2-src", "toy-gpt2-tgt"]
    gpt2 = next(line for line in text.splitlines() if line.startswith("| toy-gpt2-src "))
    assert re.search(r"\| causal LM +\|", gpt2)
    for name in ("toy-bert-joint", "toy-bert-src", "toy-bert-tgt"):
        summary = json.loads((smoke_run / "data" / "pretrained" / name /
                              "pretrain_summary.json").read_text())
        row = next(line for line in text.splitlines() if line.startswith(f"| {name} "))
        assert f"{100 * summary['heldout']['accuracy']:.1f}%" in row
        assert re.search(r"\| masked LM 30%: 50/10/40 +\|", row)  # the toy BERTs' objective
        settings = summary["settings"]  # its learning rate and dropout, as it trained them
        assert re.search(rf"\| {settings['lr']:g} +\| {settings['dropout']:g} +\|", row)
    for experiment, label in (("bert-init-500", "BERT-initialised encoder, 500 pairs"),
                              ("bert-frozen-500", "Frozen BERT encoder, 500 pairs")):
        run, tag = run_dir(smoke_run, experiment)
        paths = json.loads((run / "config.json").read_text())["paths"]
        assert paths["pretrained"] == {"src_bert": "data/pretrained/toy-bert-src"}
        assert paths["src_tokenizer"] == "data/pretrained/toy-bert-src"
        metrics = json.loads((run / f"metrics.test.{tag}.json").read_text())
        row = next(line for line in text.splitlines() if line.startswith(f"| {label} "))
        assert f"{metrics['bleu']['tokenized']:.2f}" in row
    frozen = json.loads((run / f"metrics.test.{tag}.json").read_text())["params"]
    assert 0 < frozen["trained"] < frozen["total"]  # the frozen BERT does not train
    assert "## Provenance" in text and "config hash" in text
    assert metrics["bleu"]["signature"] in text


def test_one_figure_of_each_kind_in_png_and_pdf(smoke_run):
    plan = smoke_plan()
    kinds = {figure.kind for figure in plan.figures}
    assert kinds == {"sweep", "curve", "buckets"}
    for figure in plan.figures:
        for ext in ("png", "pdf"):
            path = smoke_run / "results" / "figures" / f"{figure.name}.{ext}"
            assert path.stat().st_size > 1000, path


def test_each_tables_validation_curves_and_every_runs_event_files(smoke_run):
    """The report draws each requested table's validation curves, every run of it finished;
    a run's and a pre-training's TensorBoard event files hold what their logs say."""
    plan = smoke_plan()
    curves = section((smoke_run / "results" / "tables.md").read_text(), "Validation curves")
    for table in plan.tables:
        for ext in ("png", "pdf"):
            path = smoke_run / "results" / "figures" / f"{table.name}.curves.{ext}"
            assert path.stat().st_size > 1000, path
        assert f"![{table.name}.curves](figures/{table.name}.curves.png)" in curves
    assert "Not plotted, runs unfinished" not in curves
    run, _ = run_dir(smoke_run, "transformer-tiny")
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    reader = EventAccumulator(str(run / "tensorboard"))
    reader.Reload()
    assert [(e.step, e.value) for e in reader.Scalars("valid/loss")] == [
        (r["step"], pytest.approx(r["valid_loss"], rel=1e-6)) for r in log
        if r["event"] == "valid"]
    assert {"train/loss", "train/grad_norm", "train/tokens_per_second", "lr/all"} <= set(
        reader.Tags()["scalars"])
    pretrained = EventAccumulator(str(smoke_run / "data" / "pretrained" / "toy-bert-src" /
                                      "tensorboard"))
    pretrained.Reload()
    assert {"train/loss", "heldout/accuracy"} <= set(pretrained.Tags()["scalars"])


def test_back_translation_trains_on_the_reverse_runs_translations(smoke_run):
    """Figure 3b: a Transformer on the toy world read backwards translates the first lines of
    the target-side monolingual text; each run adds its own first N pairs."""
    plan = smoke_plan()
    toy, reverse = smoke_run / "data" / "toy" / "prepared", smoke_run / "data" / "toy-reverse"
    for split in ("train", "valid"):
        for side, other in (("src", "tgt"), ("tgt", "src")):
            assert (reverse / "prepared" / f"{split}.{side}").read_bytes() == (
                toy / f"{split}.{other}").read_bytes()
    mono = (toy / "mono.tgt").read_text().splitlines()
    bt = back_translation.source(plan, "toy", "abnet-bt-mask-predict-2m")
    bt_src = plan.run_inputs("toy", "abnet-bt-mask-predict-2m")["bt_src"].path(1)
    synthetic = (smoke_run / bt_src).read_text().splitlines()
    assert bt.sentences == 400 and len(synthetic) == 400 < len(mono)
    record = json.loads((smoke_run / bt_src.replace(".txt", ".json")).read_text())
    assert record["decoding"] == "at" and record["beam"] == 2  # the reverse run's settings
    text = (smoke_run / "results" / "tables.md").read_text()
    for experiment, n in (("abnet-bt-mask-predict-500k", 100), ("abnet-bt-mask-predict-2m", 400)):
        run, _ = run_dir(smoke_run, experiment)
        config = json.loads((run / "config.json").read_text())
        assert config["experiment"]["bt_sentences"] == n
        assert config["paths"]["inputs"]["bt_src"] == bt_src
        assert config["paths"]["inputs"]["bt_tgt"] == "data/toy/prepared/mono.tgt"
        kept = sum(1 for line in synthetic[:n] if line.strip())
        assert f"training on {kept} back-translated pairs" in (
            smoke_run / "logs" / "train" / "toy" / experiment / "seed1.log").read_text()
    metrics = json.loads((smoke_run / bt.reverse.run_dir(1) /
                          f"metrics.test.{bt.reverse.tag}.json").read_text())
    assert (f"translated by results/runs/toy-reverse/{bt.reverse.run} (transformer-base; test "
            f"BLEU {metrics['bleu']['tokenized']:.2f})") in text


def test_report_html_contains_tables_and_figures(smoke_copy):
    result = snakemake(smoke_copy, "--report", "report.html")
    assert result.returncode == 0, result.stderr[-3000:]
    html = (smoke_copy / "report.html").read_text(errors="replace")
    assert "tables.md" in html
    for figure in smoke_plan().figures:
        assert f"{figure.name}.png" in html
    for table in smoke_plan().tables:  # each table's validation curves
        assert f"{table.name}.curves.png" in html


def test_report_cli_rebuilds_tables_from_copied_results(smoke_run, tmp_path, capsys):
    """No Snakemake: copy results/ elsewhere and rebuild tables.md and the figures there
    (`report` in this process; a process of its own: test_bad_input.py)."""
    copy = tmp_path / "copied"
    shutil.copytree(smoke_run / "results" / "runs", copy / "runs")
    shutil.copytree(smoke_run / "data" / "pretrained", copy / "pretrained")
    status = cli.main(["report", "--root", str(ROOT), "--results", str(copy), "--pretrained",
                       str(copy / "pretrained"), "--configfile", str(SMOKE)])
    assert status == 0, capsys.readouterr().err[-3000:]
    ours = (copy / "tables.md").read_text()
    original = (smoke_run / "results" / "tables.md").read_text()
    strip = [line for line in ours.splitlines() if not line.startswith("- git commit")]
    assert strip == [line for line in original.splitlines()
                     if not line.startswith("- git commit")]
    assert (copy / "claims.md").read_text() == (smoke_run / "results" / "claims.md").read_text()
    ours, original = (json.loads((d / "tables.json").read_text())
                      for d in (copy, smoke_run / "results"))
    for record in (ours, original):
        record["provenance"].pop("git_commit")
    assert ours == original
    assert (copy / "figures" / "abnet2020.figure3b.png").stat().st_size > 1000


def test_second_run_has_nothing_to_do(smoke_run):
    result = snakemake(smoke_run, "--cores", "2", "-n")
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr


def test_regenerated_data_never_reports_the_old_runs_numbers(smoke_copy, tmp_path,
                                                             monkeypatch, capsys):
    """The toy world is generated anew (another seed): the finished run's checkpoint is not
    trained on it, so training stops with one line, nothing is reported as current, and a
    report built by hand leaves the old numbers out."""
    table = tmp_path / "table.yaml"
    table.write_text("tables: [toyworld.table1]\n")
    run, tag = run_dir(smoke_copy, "transformer-tiny", table)
    metrics = run / f"metrics.test.{tag}.json"
    assert metrics.exists()

    regenerated = tmp_path / "regenerated.yaml"
    regenerated.write_text("datasets: {toy: {world: {seed: 2}}}\n")
    result = snakemake(smoke_copy, "--cores", "2", str(metrics.relative_to(smoke_copy)),
                       "--configfile", str(SMOKE), str(table), str(regenerated))
    assert result.returncode != 0
    log = (smoke_copy / "logs" / "train" / "toy" / run.parent.name / "seed1.log").read_text()
    assert re.fullmatch(r"error: \S+/last\.pt was trained on other inputs \(src_tokenizer, "
                        r"tgt_tokenizer, train_src, train_tgt, valid_src, valid_tgt changed\); "
                        r"delete \S+ to train it again\n", log), log
    assert not (run / "train_summary.json").exists()

    monkeypatch.chdir(smoke_copy)
    status = cli.main(["report", "--results", "results", "--out", "again.md", "--root",
                       str(ROOT), "--pretrained", "data/pretrained", "--configfile", str(SMOKE),
                       str(table), str(regenerated)])
    assert status == 0, capsys.readouterr().err[-2000:]
    text = (smoke_copy / "again.md").read_text()
    row = next(line for line in text.splitlines() if f"({run.relative_to(smoke_copy)})" in line)
    assert "missing" in row and not re.search(r"\| \d+\.\d\d", row), row


# (what breaks the record, the start of report's one error line; {r}: the copied results)
BROKEN_RECORDS = {
    "a pre-training summary without its held-out scores": (
        "pretrained/toy-bert-src/pretrain_summary.json", lambda d: d.pop("heldout"),
        "{r}/pretrained/toy-bert-src/pretrain_summary.json: key 'heldout.accuracy' is missing"),
    "a pre-training summary with a learning rate in words": (
        "pretrained/toy-bert-src/pretrain_summary.json",
        lambda d: d["settings"].update(lr="fast"),
        "{r}/pretrained/toy-bert-src/pretrain_summary.json: key 'settings.lr' must be a "
        "finite number, got 'fast'"),
    "soft targets' record without its objective": (
        "runs/toy/bertkd-teacher-mbert/seed1/soft_targets.top8.json",
        lambda d: d.pop("objective"),
        "{r}/runs/toy/bertkd-teacher-mbert/seed1/soft_targets.top8.json: key 'objective' is "
        "missing"),
    "length buckets that are not a list": (
        "runs/toy/bertkd-kd-deen/seed1/buckets.valid.beam4-lp0p6-gnmt-best.8-16-24-32-40.json",
        lambda d: d.update(buckets={"short": 1}),
        "{r}/runs/toy/bertkd-kd-deen/seed1/buckets.valid.beam4-lp0p6-gnmt-best.8-16-24-32-40"
        ".json: key 'buckets' must be a list of {{bucket, bleu}} entries"),
}


@pytest.mark.parametrize("broken", BROKEN_RECORDS)
def test_report_by_hand_names_a_malformed_record_in_one_line(smoke_run, tmp_path, broken,
                                                             capsys):
    """`report` without Snakemake on copied results in which one record lost a key or holds
    a word for a number: one line naming the file and the key, never a traceback."""
    relative, damage, expected = BROKEN_RECORDS[broken]
    copy = tmp_path / "copied"
    shutil.copytree(smoke_run / "results" / "runs", copy / "runs")
    shutil.copytree(smoke_run / "data" / "pretrained", copy / "pretrained")
    record = copy / relative
    assert record.is_file(), sorted(p.name for p in record.parent.iterdir())
    data = json.loads(record.read_text())
    damage(data)
    record.write_text(json.dumps(data))
    status = cli.main(["report", "--root", str(ROOT), "--results", str(copy), "--pretrained",
                       str(copy / "pretrained"), "--configfile", str(SMOKE)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: {expected.format(r=copy)}"), err


def test_following_a_refusals_advice_trains_the_run_again(smoke_copy, tmp_path, monkeypatch):
    """A finished run's last.pt is damaged, and more epochs are asked for: the train job
    refuses to resume with one line that says what to delete. Doing exactly that, the next
    run trains it again from the start and its row is a number, not "missing"."""
    table = tmp_path / "table.yaml"
    table.write_text("tables: [toyworld.table1]\n")
    run, tag = run_dir(smoke_copy, "bert-frozen-500", table)
    last = run / "checkpoints" / "last.pt"
    last.write_bytes(last.read_bytes()[:-100] + bytes(100))  # its sha256 no longer matches
    more = tmp_path / "more.yaml"
    more.write_text("experiments: {bert-frozen-500: {max_epochs: 3}}\n")
    configs = ["--configfile", str(SMOKE), str(table), str(more)]
    metrics = str((run / f"metrics.test.{tag}.json").relative_to(smoke_copy))
    assert snakemake(smoke_copy, "--cores", "2", metrics, *configs).returncode != 0
    log = (smoke_copy / "logs" / "train" / "toy" / "bert-frozen-500" / "seed1.log").read_text()
    advice = re.search(rf"^error: {re.escape(str(last.relative_to(smoke_copy)))}: corrupt .* "
                       r"delete (\S+) to train it again$", log, re.M)
    assert advice, log

    shutil.rmtree(smoke_copy / advice.group(1))  # what the line says, nothing more
    result = snakemake(smoke_copy, "--cores", "2", metrics, *configs)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((run / "train_summary.json").read_text())["epochs"] == 3
    monkeypatch.chdir(smoke_copy)
    assert cli.main(["report", "--root", str(ROOT), "--out", str(tmp_path / "tables.md"),
                     "--configfile", *configs[1:]]) == 0
    row = next(line for line in (tmp_path / "tables.md").read_text().splitlines()
               if "bert-frozen-500" in line and line.startswith("|"))
    assert "missing" not in row and re.search(r"\| \d+\.\d", row), row


@pytest.mark.parametrize("lost", ["best.pt", "last.pt", "last.pt.sha256", "epoch2.pt"])
def test_a_checkpoint_deleted_by_hand_stops_the_workflow_until_the_run_trains_again(
        tmp_path, lost):
    """A finished run's best.pt (its decodings' and its children's weights), last.pt, a
    checksum file, or an epoch checkpoint it keeps for averaging deleted with its checksum
    file: no job makes it again, and the run's cell stood "missing" (or an average of other
    epochs) with exit 0. The workflow now stops before planning, in -n too, with one line;
    doing what it says trains the run again and makes its number again."""
    work, table = tmp_path / "work", tmp_path / "table.yaml"
    table.write_text("tables: [toyworld.table1]\n")
    run, tag = run_dir(work, "transformer-tiny-500", table)
    metrics = str((run / f"metrics.test.{tag}.json").relative_to(work))
    configs = ["--configfile", str(SMOKE), str(table)]
    result = snakemake(work, "--cores", "2", metrics, *configs)
    assert result.returncode == 0, result.stderr[-3000:]
    (run / "checkpoints" / lost).unlink()
    if lost.startswith("epoch"):
        (run / "checkpoints" / f"{lost}.sha256").unlink()
    rel = run.relative_to(work)
    for args in (["-n"], ["--cores", "2", metrics]):
        result = snakemake(work, *args, *configs)
        assert result.returncode == 1
        assert result.stderr.strip().splitlines()[-1] == (
            f"error: {rel}/checkpoints/{lost} is gone, but the run's results were made from "
            f"it and only training the run again makes it; delete {rel} to train it again")
    shutil.rmtree(work / rel)  # what the line says, nothing more
    result = snakemake(work, "--cores", "2", metrics, *configs)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run / "checkpoints" / lost).is_file() and (work / metrics).is_file()


def test_a_finished_run_without_its_checkpoints_is_refused_before_planning(tmp_path):
    """The refusal reads the run directory alone, before Snakemake plans a job: a summary
    whose checkpoints are not there (all four read: best, last, their checksums)."""
    run, _ = run_dir(tmp_path, "transformer-tiny-500")
    (run / "checkpoints").mkdir(parents=True)
    (run / "train_summary.json").write_text("{}\n")
    result = snakemake(tmp_path, "-n")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"error: {run.relative_to(tmp_path)}/checkpoints/best.pt is gone")


def test_a_pretraining_summary_deleted_by_hand_is_refused_before_planning(tmp_path):
    """A checkpoint pre-trained here without its pretrain_summary.json: the report's row of
    it said "missing" with exit 0 for good, as its rule cannot declare the summary. The
    workflow stops before planning, naming the directory to delete (pre-training again
    makes the same weights: test_a_checkpoint_pretrained_again_keeps_the_runs_on_it)."""
    checkpoint = tmp_path / "data" / "pretrained" / "toy-bert-src"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}\n")
    result = snakemake(tmp_path, "-n")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: data/pretrained/toy-bert-src: its pretrain_summary.json is gone, but its "
        "config.json is there, so no job makes it again; delete data/pretrained/toy-bert-src "
        "to pre-train the checkpoint again")


@pytest.mark.parametrize("changed", [{"max_epochs": 1}, {"lr_schedule": "linear",
                                                       "max_epochs": 3}],
                         ids=["fewer-epochs", "a-linear-decay-made-longer"])
def test_a_finished_run_under_changed_settings_keeps_no_number(smoke_copy, tmp_path,
                                                               monkeypatch, changed):
    """The config asks a finished run for fewer epochs, or for a linear decay over more: the
    workflow reruns its train job, which refuses to resume (the result would not be the new
    settings' run) with one line saying what to delete; the workflow fails, and a report
    shows no number for the cell rather than the old training's."""
    table = tmp_path / "table.yaml"
    table.write_text("tables: [toyworld.table1]\n")
    run, tag = run_dir(smoke_copy, "bert-frozen-500", table)
    more = tmp_path / "changed.yaml"
    more.write_text(yaml.safe_dump({"experiments": {"bert-frozen-500": changed}}))
    configs = ["--configfile", str(SMOKE), str(table), str(more)]
    result = snakemake(smoke_copy, "--cores", "2", *configs)
    assert result.returncode != 0
    log = (smoke_copy / "logs" / "train" / "toy" / "bert-frozen-500" / "seed1.log").read_text()
    assert re.search(r"^error: \S+/last\.pt (cannot resume as this config's run: .*|was "
                     r"trained with another config); delete "
                     rf"{re.escape(str(run.relative_to(smoke_copy)))} to train it again$",
                     log, re.M), log
    monkeypatch.chdir(smoke_copy)
    out = tmp_path / "tables.md"
    assert cli.main(["report", "--root", str(ROOT), "--out", str(out), "--configfile",
                     *configs[1:]]) == 0
    row = next(line for line in out.read_text().splitlines()
               if line.startswith("| Frozen BERT encoder, 500 pairs "))
    assert "missing" in row and not re.search(r"\| \d+\.\d\d", row), row


def test_a_checkpoint_pretrained_again_keeps_the_runs_on_it(smoke_copy, tmp_path):
    """A pre-trained checkpoint deleted and made again by the workflow: byte-identical weights,
    another wall-clock time in its summary. The runs on it resume their finished training (no
    update), so their summaries, translations and cells stay, and the workflow exits 0 with
    every cell filled rather than refusing the runs or leaving them out of tables.md."""
    table = tmp_path / "table.yaml"
    table.write_text("tables: [toyworld.table1]\n")
    run, tag = run_dir(smoke_copy, "bert-init-500", table)
    kept = {name: (run / name).read_bytes()
            for name in ("train_summary.json", f"hyp.test.{tag}.txt")}
    shutil.rmtree(smoke_copy / "data" / "pretrained" / "toy-bert-src")
    result = snakemake(smoke_copy, "--cores", "2", "--configfile", str(SMOKE), str(table))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "pretrain" in result.stdout + result.stderr  # it was made again
    assert {name: (run / name).read_bytes() for name in kept} == kept
    rows = [line for line in (smoke_copy / "results" / "tables.md").read_text().splitlines()
            if line.startswith("| ") and "/seed1](" in line]
    assert rows and not [row for row in rows if "missing" in row], rows


def test_files_deleted_by_hand_are_made_again(smoke_copy, tmp_path):
    """A pre-trained BERT's weights, a run's config.json and another run's train_summary.json
    deleted by hand: the next workflow run makes each again (the BERT byte for byte, the runs
    resumed without an update) and exits 0 with every cell filled, not "missing" for good."""
    table = tmp_path / "table.yaml"
    table.write_text("tables: [toyworld.table1]\n")
    frozen, _ = run_dir(smoke_copy, "bert-frozen-500", table)
    small, _ = run_dir(smoke_copy, "transformer-tiny-500", table)
    deleted = [smoke_copy / "data" / "pretrained" / "toy-bert-src" / "model.safetensors",
               frozen / "config.json", small / "train_summary.json"]
    kept = {path: path.read_bytes() for path in deleted}
    for path in deleted:
        path.unlink()
    result = snakemake(smoke_copy, "--cores", "2", "--configfile", str(SMOKE), str(table))
    assert result.returncode == 0, result.stderr[-3000:]
    assert kept[deleted[0]] == deleted[0].read_bytes()
    assert json.loads(kept[deleted[2]])["steps"] == json.loads(deleted[2].read_text())["steps"]
    assert json.loads(deleted[1].read_text())["paths"] == json.loads(kept[deleted[1]])["paths"]
    rows = [line for line in (smoke_copy / "results" / "tables.md").read_text().splitlines()
            if line.startswith("| ") and "/seed1](" in line]
    assert rows and not [row for row in rows if "missing" in row], rows


def _children(plan) -> dict[str, tuple]:
    """Per run-input name that another run provides: one (child cell, input) of the plan."""
    found = {}
    for dataset, run in plan.runs():
        for name, given in plan.run_inputs(dataset, run).items():
            if given.cell is not None and dataset == "toy":
                found.setdefault(name, (plan.cell(dataset, run, "test"), given))
    return found


def test_a_report_by_hand_leaves_out_runs_the_config_no_longer_describes(smoke_run, tmp_path):
    """A run whose settings changed in the config, or that loaded or learned from such a run,
    or from a file its provider's current training did not make, is not current: `report`
    run by hand shows none of their numbers (Snakemake would train them again)."""
    copy = tmp_path / "copied"
    shutil.copytree(smoke_run / "results" / "runs", copy / "runs")
    plan = smoke_plan()
    children = _children(plan)
    assert {"init_from", "distilled_targets", "soft_targets"} <= set(children), sorted(children)
    results = Results(plan, copy)
    assert all(results.run_current(child, 1) for child, _ in children.values())

    for name, (child, given) in children.items():  # the provider's settings change
        changed = tmp_path / f"{name}.yaml"
        # the last word on the settings of the experiment the run is named after
        changed.write_text(yaml.safe_dump(
            {"datasets": {"toy": {"overrides": {given.cell.run: {"warmup_updates": 11}}}}}))
        now = smoke_plan(changed)
        assert now.run_settings("toy", given.cell.run, 1)["warmup_updates"] == 11
        assert not Results(now, copy).run_current(now.cell("toy", child.run, "test"), 1), name
        assert Results(now, copy).run_current(plan.cell("toy", "transformer-tiny-500",
                                                        "test"), 1)  # unrelated: still shown

    for name in ("distilled_targets", "soft_targets"):  # retrained, its earlier outputs kept
        child, given = children[name]
        summary = copy / given.cell.run_dir(1).removeprefix("results/") / "train_summary.json"
        original = summary.read_text()
        summary.write_text(original + "\n")
        assert not Results(plan, copy).run_current(child, 1), name
        summary.write_text(original)

    teacher = children["soft_targets"][1].cell
    summary = copy / teacher.run_dir(1).removeprefix("results/") / "train_summary.json"
    summary.write_text(summary.read_text() + "\n")
    out = tmp_path / "tables.md"
    assert cli.main(["report", "--root", str(ROOT), "--results", str(copy), "--out", str(out),
                     "--configfile", str(SMOKE)]) == 0
    teachers = out.read_text().split("## Teachers' soft targets", 1)[1].split("\n## ", 1)[0]
    assert "missing" in teachers and "%" not in teachers, teachers

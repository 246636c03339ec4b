"""End to end: real snakemake on the smoke config (a shrunken toy world)."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nmtbench.config import check, load_config
from nmtbench.tokenization import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "config" / "smoke.yaml"
pytestmark = pytest.mark.slow


def snakemake(workdir: Path, *args: str, **popen) -> subprocess.CompletedProcess | subprocess.Popen:
    if "--configfile" not in args:
        args = ("--configfile", str(SMOKE), *args)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(workdir), *args]
    if popen:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                **popen)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def smoke_plan(*extra: Path):
    config = load_config([ROOT / "config" / "config.yaml", SMOKE, *extra])
    return check(config, ROOT / "config" / "schema.yaml", ROOT / "papers")


def run_dir(workdir: Path, experiment: str, *extra: Path) -> tuple[Path, str]:
    """Where the smoke config trains `experiment` on the toy world, and its decoding tag."""
    cell = smoke_plan(*extra).cell("toy", experiment, "test")
    return workdir / cell.run_dir(1), cell.tag


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("smoke")
    result = snakemake(workdir, "--cores", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


def test_tables_md_shows_every_requested_table_with_its_runs(finished):
    text = (finished / "results" / "tables.md").read_text()
    plan = smoke_plan()
    for name in plan.names:
        if name in plan.catalogue.tables:
            assert f"## {name}\n" in text
    for experiment, label in (("transformer-tiny", "Transformer-tiny, all pairs"),
                              ("transformer-tiny-500", "Transformer-tiny, 500 pairs")):
        run, tag = run_dir(finished, experiment)
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


def test_toy_berts_are_pretrained_in_the_dag_and_loaded_by_the_bert_runs(finished):
    """The toy BERTs are HF directories made in the DAG; bert-init/bert-frozen load them."""
    text = (finished / "results" / "tables.md").read_text()
    assert "## Pre-trained checkpoints" in text
    # (toy-bert-joint: the BERT-KD teacher's, for bertkd2020.table1; the GPT-2s: CTNMT's
    # Table 2 teachers)
    assert smoke_plan().pretrained_targets() == ["toy-bert-joint", "toy-bert-src",
                                                 "toy-bert-tgt", "toy-gpt2-src", "toy-gpt2-tgt"]
    gpt2 = next(line for line in text.splitlines() if line.startswith("| toy-gpt2-src "))
    assert re.search(r"\| causal LM +\|", gpt2)
    for name in ("toy-bert-joint", "toy-bert-src", "toy-bert-tgt"):
        summary = json.loads((finished / "data" / "pretrained" / name /
                              "pretrain_summary.json").read_text())
        row = next(line for line in text.splitlines() if line.startswith(f"| {name} "))
        assert f"{100 * summary['heldout']['accuracy']:.1f}%" in row
        assert re.search(r"\| masked LM 30%: 50/10/40 +\|", row)  # the toy BERTs' objective
        settings = summary["settings"]  # its learning rate and dropout, as it trained them
        assert re.search(rf"\| {settings['lr']:g} +\| {settings['dropout']:g} +\|", row)
    for experiment, label in (("bert-init-500", "BERT-initialised encoder, 500 pairs"),
                              ("bert-frozen-500", "Frozen BERT encoder, 500 pairs")):
        run, tag = run_dir(finished, experiment)
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


def test_one_figure_of_each_kind_in_png_and_pdf(finished):
    plan = smoke_plan()
    kinds = {figure.kind for figure in plan.figures}
    assert kinds == {"sweep", "curve", "buckets"}
    for figure in plan.figures:
        for ext in ("png", "pdf"):
            path = finished / "results" / "figures" / f"{figure.name}.{ext}"
            assert path.stat().st_size > 1000, path


def test_back_translation_trains_on_the_reverse_runs_translations(finished):
    """Figure 3b: a Transformer on the toy world read backwards translates the first lines of
    the target-side monolingual text; each run adds its own first N pairs."""
    plan = smoke_plan()
    toy, reverse = finished / "data" / "toy" / "prepared", finished / "data" / "toy-reverse"
    for split in ("train", "valid"):
        for side, other in (("src", "tgt"), ("tgt", "src")):
            assert (reverse / "prepared" / f"{split}.{side}").read_bytes() == (
                toy / f"{split}.{other}").read_bytes()
    mono = (toy / "mono.tgt").read_text().splitlines()
    bt = plan.back_translation("toy", "abnet-bt-mask-predict-2m")
    synthetic = (finished / bt.file("toy", 1)).read_text().splitlines()
    assert bt.sentences == 400 and len(synthetic) == 400 < len(mono)
    record = json.loads((finished / bt.file("toy", 1).replace(".txt", ".json")).read_text())
    assert record["decoding"] == "beam" and record["beam"] == 2  # the reverse run's settings
    text = (finished / "results" / "tables.md").read_text()
    for experiment, n in (("abnet-bt-mask-predict-500k", 100), ("abnet-bt-mask-predict-2m", 400)):
        run, _ = run_dir(finished, experiment)
        config = json.loads((run / "config.json").read_text())
        assert config["experiment"]["bt_sentences"] == n
        assert config["paths"]["inputs"]["bt_src"] == bt.file("toy", 1)
        assert config["paths"]["inputs"]["bt_tgt"] == "data/toy/prepared/mono.tgt"
        kept = sum(1 for line in synthetic[:n] if line.strip())
        assert f"training on {kept} back-translated pairs" in (
            finished / "logs" / "train" / "toy" / experiment / "seed1.log").read_text()
    metrics = json.loads((finished / bt.reverse.run_dir(1) /
                          f"metrics.test.{bt.reverse.tag}.json").read_text())
    assert (f"translated by results/runs/toy-reverse/{bt.reverse.run} (transformer-base; test "
            f"BLEU {metrics['bleu']['tokenized']:.2f})") in text


def test_report_html_contains_tables_and_figures(finished):
    result = snakemake(finished, "--report", "report.html")
    assert result.returncode == 0, result.stderr[-3000:]
    html = (finished / "report.html").read_text(errors="replace")
    assert "tables.md" in html
    for figure in smoke_plan().figures:
        assert f"{figure.name}.png" in html


def test_report_cli_rebuilds_tables_from_copied_results(finished, tmp_path):
    """No Snakemake: copy results/ elsewhere and rebuild tables.md and the figures there."""
    copy = tmp_path / "copied"
    shutil.copytree(finished / "results" / "runs", copy / "runs")
    shutil.copytree(finished / "data" / "pretrained", copy / "pretrained")
    result = subprocess.run(
        [sys.executable, "-m", "nmtbench", "report", "--root", str(ROOT), "--results", str(copy),
         "--pretrained", str(copy / "pretrained"), "--configfile", str(SMOKE)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    ours = (copy / "tables.md").read_text()
    original = (finished / "results" / "tables.md").read_text()
    strip = [line for line in ours.splitlines() if not line.startswith("- git commit")]
    assert strip == [line for line in original.splitlines()
                     if not line.startswith("- git commit")]
    assert (copy / "figures" / "toyworld.figure1.png").stat().st_size > 1000


def test_second_run_has_nothing_to_do(finished):
    result = snakemake(finished, "--cores", "2", "-n")
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr


def test_dag_contains_only_the_requested_table_runs(tmp_path):
    result = snakemake(tmp_path, "--cores", "1", "-n", "--config",
                       "tables=[toyworld.table1]", "seeds=[1,2]")
    assert result.returncode == 0, result.stderr
    trained = {line.split("wildcards:")[1].strip() for line in result.stdout.splitlines()
               if "wildcards:" in line and "run=" in line and "tag=" not in line
               and "baseline=" not in line}
    runs = {run_dir(tmp_path, e)[0].parent.name for e in (
        "transformer-tiny", "transformer-tiny-500", "bert-init", "bert-init-500",
        "bert-frozen-500")}
    assert len(runs) == 5
    assert trained == {f"dataset=toy, run={run}, seed={seed}"
                       for run in runs for seed in (1, 2)}


def test_a_joint_vocabulary_run_reads_both_sides_with_one_tokenizer(tmp_path):
    """`vocabulary: joint` (deep fusion's baselines on the paper config): the DAG trains one
    WordPiece on both sides and the run reads both with it; `share_embeddings` makes the
    encoder's and decoder's embeddings one table in the checkpoint."""
    extra = tmp_path / "joint.yaml"
    extra.write_text("tables: [toyworld.table1]\n"
                     "datasets: {toy: {vocab_size: {src: 400, tgt: 300, joint: 500}}}\n"
                     "experiments: {transformer-tiny: {vocabulary: joint, "
                     "share_embeddings: true}}\n")
    run, tag = run_dir(tmp_path, "transformer-tiny", extra)
    target = run / f"metrics.test.{tag}.json"
    result = snakemake(tmp_path, "--cores", "2", str(target.relative_to(tmp_path)),
                       "--configfile", str(SMOKE), str(extra))
    assert result.returncode == 0, result.stderr[-3000:]
    joint = "data/toy/tokenizer/joint"
    paths = json.loads((run / "config.json").read_text())["paths"]
    assert paths["src_tokenizer"] == paths["tgt_tokenizer"] == joint
    tokenizer = load_tokenizer(tmp_path / joint)  # knows both languages' words
    for side in ("src", "tgt"):
        line = (tmp_path / f"data/toy/prepared/train.{side}").read_text().splitlines()[0]
        assert tokenizer.unk_token_id not in tokenizer(line)["input_ids"], side
    state = torch.load(run / "checkpoints" / "best.pt", weights_only=True)["model"]
    assert torch.equal(state["encoder.embed.weight"], state["decoder.embed.weight"])
    assert json.loads(target.read_text())["bleu"]["tokenized"] >= 0


def test_a_joint_vocabulary_needs_its_size(tmp_path):
    extra = tmp_path / "joint.yaml"  # the default's Multi30k sets no joint vocabulary
    extra.write_text("tables: [multi30k.table1]\n"
                     "experiments: {multi30k-transformer: {vocabulary: joint}}\n")
    result = snakemake(tmp_path, "--cores", "1", "-n", "--configfile", str(SMOKE), str(extra))
    assert result.returncode != 0
    assert ("set config key 'datasets.multi30k-de-en.vocab_size.joint'"
            in result.stdout + result.stderr)


def test_unknown_table_fails_before_any_job(tmp_path):
    result = snakemake(tmp_path, "--cores", "1", "-n", "--config", "tables=[abnet2020.tabel1]")
    assert result.returncode != 0
    assert "config key 'tables': unknown table or figure 'abnet2020.tabel1'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_committed_tables_md_does_not_stop_the_runs(tmp_path):
    """A clone ships the default's tables.md; `snakemake` must still train and rebuild it."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "tables.md").write_text("# from the repository\n")
    result = snakemake(tmp_path, "--cores", "1", "-n")
    assert result.returncode == 0, result.stderr
    jobs = [line.split()[1] for line in result.stdout.splitlines()
            if line.startswith(("rule ", "localrule "))]
    assert {"train", "report"} <= {j.rstrip(":") for j in jobs}


def _last_checkpoint_step(run: Path) -> int:
    log = run / "train_log.jsonl"
    if not (run / "checkpoints" / "last.pt").exists() or not log.exists():
        return 0
    steps = [json.loads(line)["step"] for line in log.read_text().splitlines() if line.strip()]
    return max(steps, default=0)


def test_killed_snakemake_resumes_training_and_ends_the_same(tmp_path):
    """SIGKILL the whole process group mid-training; the rerun resumes and matches a clean run."""
    longer = tmp_path / "longer.yaml"
    longer.write_text("defaults: {max_epochs: 25}\ntables: [toyworld.table1]\n")
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    for workdir in (clean, killed):
        workdir.mkdir()
    result = snakemake(clean, "--cores", "1", "--configfile", str(SMOKE), str(longer))
    assert result.returncode == 0, result.stderr[-3000:]

    run, tag = run_dir(killed, "transformer-tiny", longer)
    proc = snakemake(killed, "--cores", "1", "--configfile", str(SMOKE), str(longer),
                     start_new_session=True)
    deadline = time.time() + 600
    while _last_checkpoint_step(run) < 30 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "training finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (run / "train_summary.json").exists()

    result = snakemake(killed, "--cores", "1", "--configfile", str(SMOKE), str(longer))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed from step" in (run / "train_log.jsonl").read_text()
    hyp = f"hyp.test.{tag}.txt"
    assert (run / hyp).read_text() == (clean / run.relative_to(killed) / hyp).read_text()
    ours = json.loads((run / f"metrics.test.{tag}.json").read_text())
    theirs = json.loads((clean / run.relative_to(killed) / f"metrics.test.{tag}.json").read_text())
    assert ours["bleu"] == theirs["bleu"]
    assert ours["train"]["best_valid_loss"] == theirs["train"]["best_valid_loss"]


def test_regenerated_data_never_reports_the_old_runs_numbers(tmp_path):
    """The toy world is generated anew (another seed): the finished run's checkpoint is not
    trained on it, so training stops with one line, nothing is reported as current, and a
    report built by hand leaves the old numbers out."""
    table = tmp_path / "table.yaml"
    table.write_text("tables: [toyworld.table1]\n")
    result = snakemake(tmp_path, "--cores", "2", "--configfile", str(SMOKE), str(table))
    assert result.returncode == 0, result.stderr[-3000:]
    run, tag = run_dir(tmp_path, "transformer-tiny", table)
    assert (run / f"metrics.test.{tag}.json").exists()

    regenerated = tmp_path / "regenerated.yaml"
    regenerated.write_text("datasets: {toy: {world: {seed: 2}}}\n")
    result = snakemake(tmp_path, "--cores", "2", "--keep-going", "--configfile", str(SMOKE),
                       str(table), str(regenerated))
    assert result.returncode != 0
    log = (tmp_path / "logs" / "train" / "toy" / run.parent.name / "seed1.log").read_text()
    assert re.fullmatch(r"error: \S+/last\.pt was trained on other inputs \(src_tokenizer, "
                        r"tgt_tokenizer, train_src, train_tgt, valid_src, valid_tgt changed\); "
                        r"delete \S+ to train again\n", log), log
    assert not (run / "train_summary.json").exists()

    report = subprocess.run(
        [sys.executable, "-m", "nmtbench", "report", "--results", "results", "--out",
         "again.md", "--root", str(ROOT), "--pretrained", "data/pretrained", "--configfile",
         str(SMOKE), str(table), str(regenerated)], cwd=tmp_path, capture_output=True,
        text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    text = (tmp_path / "again.md").read_text()
    row = next(line for line in text.splitlines() if f"({run.relative_to(tmp_path)})" in line)
    assert "missing" in row and not re.search(r"\| \d+\.\d\d", row), row


def test_paper_config_plans_every_table_on_the_real_datasets(tmp_path):
    """config/paper.yaml: the plan builds; unprepared datasets show up as `prepare` jobs."""
    result = snakemake(tmp_path, "--cores", "1", "-n", "--configfile",
                       str(ROOT / "config" / "paper.yaml"))
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "dataset=wmt14-en-de, run=transformer-base, seed=1" in out
    assert "dataset=iwslt14-de-en, run=transformer-base, seed=1" in out
    # Figure 3b: IWSLT14 En-De's Transformer back-translates 2M English Wikipedia sentences
    assert "dataset=iwslt14-en-de, run=transformer-base, seed=1" in out
    assert "forward=iwslt14-de-en, sentences=2000000" in out
    assert "rule prepare_monolingual:" in out or "localrule prepare_monolingual:" in out
    assert "rule prepare:" in out or "localrule prepare:" in out
    assert "results/figures/abnet2020.figure2.png" in out
    # the papers' BERTs are snapshotted from the hub once, and the BERT methods train on them
    assert "data/pretrained/bert-base-uncased/config.json" in out
    assert "dataset=iwslt14-en-de, run=bertfused-bert-init-encoder, seed=1" in out
    # CTNMT Table 2's teacher is the public GPT-2, in its own byte-level BPE
    assert "data/pretrained/gpt2/config.json" in out
    assert "dataset=wmt14-en-de, run=ctnmt-distill-gpt2-decoder, seed=1" in out
    # deep fusion's mBERT is trimmed to WMT14 En-De's pieces after its snapshot and the data
    trim = next(job for job in re.findall(r"rule trim:\n(.*?)\n\n", out, re.S)
                if "output: data/pretrained/mbert-wmt14-en-de/config.json" in job)
    assert "data/pretrained/bert-base-multilingual-cased/config.json" in trim
    assert "data/wmt14-en-de/prepared/train.src" in trim
    # translating a training set or a corpus gets a day (resources.translate), a test set 2 h
    resources = job_resources(out)
    assert resources["distill"] == resources["backtranslate"] == {"runtime": "1440", "gpu": "1",
                                                                  "mem_mb": "16000"}
    assert resources["decode"] == {"runtime": "120", "gpu": "1", "mem_mb": "16000"}


def job_resources(dry_run: str) -> dict[str, dict[str, str]]:
    """Each rule's runtime, gpu and mem_mb as a dry run prints them (one job's, and every job of
    a rule has the same)."""
    found, rule = {}, None
    for line in dry_run.splitlines():
        if match := re.match(r"(?:local)?rule (\w+):$", line):
            rule = match[1]
        elif line.startswith("    resources: ") and rule is not None:
            pairs = dict(item.split("=", 1) for item in line.split(": ", 1)[1].split(", "))
            found.setdefault(rule, {k: pairs.get(k) for k in ("runtime", "gpu", "mem_mb")})
    return found

"""End to end: real snakemake on the smoke config, each test on a DAG of its own (dry runs, a
run killed mid-training)."""

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch
from smoke import ROOT, SMOKE, run_dir, snakemake

from nmtbench.fileio import read_jsonl
from nmtbench.parts import checkpoints

pytestmark = pytest.mark.slow


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


def test_a_joint_vocabulary_needs_its_size(tmp_path):
    extra = tmp_path / "joint.yaml"  # Multi30k, standing in a dataset without a joint size
    extra.write_text("tables: [multi30k.table1]\n"
                     "datasets: {m30k-nojoint: {kind: multi30k, src_lang: de, tgt_lang: en,\n"
                     "  vocab_size: {src: 8000, tgt: 8000}, lowercase: true, detok_lang: en}}\n"
                     "dataset_map: {multi30k-de-en: m30k-nojoint}\n"
                     "experiments: {multi30k-transformer: {vocabulary: joint}}\n")
    result = snakemake(tmp_path, "--cores", "1", "-n", "--configfile", str(SMOKE), str(extra))
    assert result.returncode != 0
    assert ("set config key 'datasets.m30k-nojoint.vocab_size.joint'"
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
    # read as the trainer reads it: the line being written may be incomplete
    return max((record["step"] for record in read_jsonl(log)), default=0)


def test_killed_snakemake_resumes_training_and_ends_the_same(tmp_path):
    """SIGKILL the whole process group mid-training; the rerun resumes and ends with the
    weights of a clean run. One run alone (the Transformer of the toy world's table), on data
    both workdirs share."""
    longer = tmp_path / "longer.yaml"
    longer.write_text("defaults: {max_epochs: 8}\ntables: [toyworld.table1]\n")
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    clean.mkdir()
    run, _ = run_dir(clean, "transformer-tiny", longer)
    summary = str((run / "train_summary.json").relative_to(clean))
    result = snakemake(clean, "--cores", "1", summary, "--configfile", str(SMOKE), str(longer))
    assert result.returncode == 0, result.stderr[-3000:]
    # the same toy world and vocabularies (and Snakemake's records of them), without the run
    shutil.copytree(clean, killed, ignore=shutil.ignore_patterns("runs", "train"))
    run = killed / run.relative_to(clean)

    proc = snakemake(killed, "--cores", "1", summary, "--configfile", str(SMOKE), str(longer),
                     start_new_session=True)
    deadline = time.time() + 600
    while _last_checkpoint_step(run) < 20 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, "training finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (run / "train_summary.json").exists()

    result = snakemake(killed, "--cores", "1", summary, "--configfile", str(SMOKE), str(longer))
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = re.findall(r"^(?:local)?rule (\w+):$", result.stdout + result.stderr, re.M)
    assert jobs == ["train"]  # the data was not made again
    assert "resumed from step" in (run / "train_log.jsonl").read_text()
    ours = json.loads((run / "train_summary.json").read_text())
    theirs = json.loads((clean / run.relative_to(killed) / "train_summary.json").read_text())
    assert ours["steps"] == theirs["steps"] > 20
    assert ours["best_valid_loss"] == theirs["best_valid_loss"]
    for name in ("last", "best"):
        resumed = checkpoints.load(run / "checkpoints" / f"{name}.pt")["model"]
        straight = checkpoints.load(clean / run.relative_to(killed) / "checkpoints"
                                    / f"{name}.pt")["model"]
        assert resumed.keys() == straight.keys()
        assert all(torch.equal(resumed[k], straight[k]) for k in straight), name


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

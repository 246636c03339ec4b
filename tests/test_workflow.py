"""End to end: real snakemake on the smoke config (a shrunken toy world)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "config" / "smoke.yaml"
pytestmark = pytest.mark.slow


def snakemake(workdir: Path, *args: str, **popen) -> subprocess.CompletedProcess | subprocess.Popen:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(workdir), "--configfile", str(SMOKE), *args]
    if popen:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                **popen)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("smoke")
    result = snakemake(workdir, "--cores", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


def test_tables_md_lists_every_run_with_bleu_and_provenance(finished):
    text = (finished / "results" / "tables.md").read_text()
    for experiment in ("transformer-tiny", "transformer-tiny-500"):
        metrics = json.loads((finished / "results/runs/toy" / experiment / "seed1" /
                              "metrics.json").read_text())
        assert set(metrics["bleu"]) >= {"sacrebleu", "signature", "tokenized"}
        assert metrics["params"]["total"] == metrics["params"]["trained"] > 0
        row = next(line for line in text.splitlines() if line.startswith(f"| {experiment} "))
        assert f"{metrics['bleu']['tokenized']:.2f}" in row
        assert f"{metrics['params']['total']:,}" in row
    assert metrics["train"]["train_pairs"] == 100  # the smoke config's train_pairs override
    assert "## Provenance" in text and "config hash" in text
    assert metrics["bleu"]["signature"] in text


def test_second_run_has_nothing_to_do(finished):
    result = snakemake(finished, "--cores", "2", "-n")
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr


def test_dag_contains_only_the_requested_runs(tmp_path):
    only = tmp_path / "only.yaml"
    only.write_text("table_definitions:\n  small: {caption: c, dataset: toy, "
                    "rows: [transformer-tiny-500]}\ntables: [small]\nseeds: [1, 2]\n")
    result = snakemake(tmp_path, "--cores", "1", "-n", "--configfile", str(SMOKE), str(only))
    assert result.returncode == 0, result.stderr
    wildcards = {line.split("wildcards:")[1].strip() for line in result.stdout.splitlines()
                 if "wildcards:" in line and "experiment=" in line}
    assert {w for w in wildcards} == {
        "dataset=toy, experiment=transformer-tiny-500, seed=1",
        "dataset=toy, experiment=transformer-tiny-500, seed=2"}


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
    longer.write_text("defaults: {max_epochs: 25}\ntables: [toy.baseline]\n")
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    for workdir in (clean, killed):
        workdir.mkdir()
    result = snakemake(clean, "--cores", "1", "--configfile", str(SMOKE), str(longer))
    assert result.returncode == 0, result.stderr[-3000:]

    run = killed / "results/runs/toy/transformer-tiny/seed1"
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
    for name in ("hyp.test.txt",):
        assert (run / name).read_text() == (clean / run.relative_to(killed) / name).read_text()
    ours = json.loads((run / "metrics.json").read_text())
    theirs = json.loads((clean / run.relative_to(killed) / "metrics.json").read_text())
    assert ours["bleu"] == theirs["bleu"]
    assert ours["train"]["best_valid_loss"] == theirs["train"]["best_valid_loss"]

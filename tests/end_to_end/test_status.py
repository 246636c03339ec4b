"""`python -m nmtbench status` on a copy of the smoke run: every cell's state, and the ones a
kill, a failed job, changed settings or a running workflow leave."""

import fcntl
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from smoke import ROOT, SMOKE, smoke_plan, snakemake

from nmtbench import layout
from nmtbench.workflow.status import Status


def states(workdir: Path) -> dict[tuple[str, str], str]:
    """(table, "row / column (seed 1, run dir)") -> the state line status gives it."""
    out, table = {}, None
    for line in Status(smoke_plan(), workdir).lines():
        if line.startswith("## "):
            table = line[3:]
        elif line.startswith("- "):
            where, _, state = line[2:].partition("): ")
            out[(table, where + ")")] = state
    return out


def of_run(found: dict, run_dir: str) -> list[str]:
    return [state for (_, where), state in found.items() if f", {run_dir})" in where]


@pytest.mark.slow
def test_a_finished_run_is_done_cell_by_cell_with_its_numbers(smoke_run):
    found = states(smoke_run)
    plan = smoke_plan()
    ok = sum(1 for t in plan.tables for *_, c in plan.table_cells(t) if c.status == "ok")
    assert len([s for s in found.values() if s.startswith("done")]) == ok * len(plan.seeds)
    table = plan.tables[0]
    i, j, cell = next(c for c in plan.table_cells(table) if c[2].status == "ok"
                      and table.columns[c[1]].metric == "bleu_tokenized")
    metrics = json.loads((smoke_run / cell.file(layout.METRICS, 1, split="test")).read_text())
    where = f"{table.rows[i].experiment} / {table.columns[j].key} (seed 1, {cell.run_dir(1)})"
    bleu = metrics["bleu"]["tokenized"]
    assert found[(table.name, where)] == f"done: BLEU (tokenized) {bleu:.2f}"


@pytest.mark.slow
def test_kills_failures_and_changed_settings_each_get_their_state(smoke_copy):
    plan = smoke_plan()
    runs = sorted({c.run_dir(1) for t in plan.tables for *_, c in plan.table_cells(t)
                   if c.status == "ok"})
    killed, failed, changed, training = (smoke_copy / r for r in runs[:4])
    # killed mid-training: the summary not written yet, the log at update 3, no process
    (killed / layout.TRAIN_SUMMARY_NAME).unlink()
    log = [json.loads(line) for line in (killed / layout.TRAIN_LOG_NAME).open()]
    (killed / layout.TRAIN_LOG_NAME).write_text(
        "".join(json.dumps(r) + "\n" for r in log if r["step"] <= 3))
    # a failed job: Snakemake's log names its outputs and its log file
    (failed / layout.TRAIN_SUMMARY_NAME).unlink()
    summary = str((failed / layout.TRAIN_SUMMARY_NAME).relative_to(smoke_copy))
    (smoke_copy / ".snakemake" / "log").mkdir(parents=True, exist_ok=True)
    (smoke_copy / ".snakemake/log/2026-01-01T000000.000000.snakemake.log").write_text(
        f"Error in rule train:\n    jobid: 4\n    output: {summary}, x/config.json\n"
        f"    log: logs/train/x.log (check log file(s) for error details)\n    shell:\n"
        f"        python -m nmtbench train ...\n")
    # trained with other settings than the config's now
    config = json.loads((changed / layout.RUN_CONFIG_NAME).read_text())
    config["experiment"]["max_epochs"] += 5
    (changed / layout.RUN_CONFIG_NAME).write_text(json.dumps(config))
    # training now: its lock held by a process (this one)
    (training / layout.TRAIN_SUMMARY_NAME).unlink()
    with (training / ".train.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = states(smoke_copy)
    rel = {name: str(path.relative_to(smoke_copy)) for name, path in
           (("killed", killed), ("failed", failed), ("changed", changed),
            ("training", training))}
    interrupted = (r"interrupted: update 3( of \d+)?, epoch 1 of \d+; log moved \d+ s ago; "
                   r"the next workflow run resumes it")
    assert of_run(found, rel["killed"])
    assert all(re.fullmatch(interrupted, s) for s in of_run(found, rel["killed"]))
    assert all(s.startswith("failed: see logs/train/x.log") for s in of_run(found, rel["failed"]))
    assert all(s.startswith("stale: trained with other settings than the config's "
                            "(max_epochs)") for s in of_run(found, rel["changed"]))
    assert all(s.startswith("training: update ") for s in of_run(found, rel["training"]))
    after = states(smoke_copy)  # the lock released: the run is interrupted now
    assert all(s.startswith("interrupted: ") for s in of_run(after, rel["training"]))


@pytest.mark.slow
def test_status_beside_a_running_workflow_sees_it_train_and_takes_nothing(smoke_copy):
    """A run deleted and the workflow started again: status, asked while it runs, sees the
    workflow and the run training; the workflow ends as it would alone, and the command then
    finds every cell done."""
    plan = smoke_plan()
    cell = next(c for t in plan.tables for *_, c in plan.table_cells(t) if c.status == "ok")
    shutil.rmtree(smoke_copy / cell.run_dir(1))
    workflow = snakemake(smoke_copy, "--cores", "2", cwd=smoke_copy)
    seen, deadline = set(), time.monotonic() + 600
    try:
        while workflow.poll() is None and time.monotonic() < deadline:
            lines = Status(plan, smoke_copy).lines()
            line = next(x for x in lines if f", {cell.run_dir(1)})" in x)
            seen.add(line.partition("): ")[2].split(":")[0])
            if line.endswith("): training") or "): training: " in line:
                assert lines[0].startswith("a workflow is running jobs here (process ")
            time.sleep(0.05)
    finally:
        workflow.wait(timeout=600)
    assert workflow.returncode == 0
    assert "training" in seen, seen
    command = [sys.executable, "-m", "nmtbench", "status", "--configfile", str(SMOKE),
               "--root", str(ROOT), "--directory", str(smoke_copy)]
    final = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    assert final.stdout.startswith("no workflow is running jobs here")
    cells = [x for x in final.stdout.splitlines() if x.startswith("- ") and " (seed " in x]
    assert cells and all("): done: " in x for x in cells)


def test_the_paper_config_before_its_first_job_and_a_reader_that_stops(tmp_path):
    """On the paper config (858 jobs) in an empty directory every cell is not started, each
    naming what it waits for; a reader that stops early (`| head`) is no error."""
    command = [sys.executable, "-m", "nmtbench", "status", "--configfile",
               str(ROOT / "config" / "paper.yaml"), "--root", str(ROOT), "--directory",
               str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    cells = [x for x in result.stdout.splitlines() if x.startswith("- ") and " (seed " in x]
    assert len(cells) > 400
    assert all("): not started: waits for " in x for x in cells)
    head = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head.stdout.readline()
    head.stdout.close()  # as `head -1` does
    assert head.wait(timeout=120) == 0
    assert head.stderr.read() == b""

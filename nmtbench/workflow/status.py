"""Where a reproduction stands (`python -m nmtbench status`): per requested table, per cell and
seed, the run behind it and its state, read from the run directories and Snakemake's own logs.

Quick and safe beside a running workflow: it reads file states, modification times and small
JSON records, takes no lock (a held lock is read from /proc/locks) and digests nothing. So
"stale" here is what that can see (a run trained with other settings than the config's, an
input or a record written after what was made from it, Snakemake's rule for staleness); the
report also compares content digests, and is the word on which number a table shows.

A cell is in the first of these states that holds for it:
- done: its record is there, made after the run's training, which has the config's settings;
- stale: the same, but trained with other settings, or made before something it reads;
- failed: a Snakemake job making it, its run or an input of its run failed and its output is
  still missing (the job's log file is named);
- training: a process holds the run's lock (update x of y, from its training log);
- interrupted: a training log, but no process holds the lock: the next workflow run resumes it;
- trained: the run finished; its decoding or scoring is still to come;
- not started: nothing yet (the inputs it waits for are named).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmtbench import layout, provenance
from nmtbench.records import is_number
from nmtbench.workflow.config import as_json
from nmtbench.workflow.metric_registry import METRICS
from nmtbench.workflow.plan import Cell, Plan
from nmtbench.workflow.workdir_lock import WORKFLOW_LOCK

RUN_LOCK_NAME = ".train.lock"  # nmtbench/training/trainer.py holds it while it trains
SNAKEMAKE_LOGS = ".snakemake/log"


@dataclass(frozen=True)
class State:
    name: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}" if self.detail else self.name


class Status:
    """The states of a plan's cells in a workflow directory (`root`)."""

    def __init__(self, plan: Plan, root: Path, now: float | None = None) -> None:
        self.plan, self.root = plan, root
        self.now = time.time() if now is None else now
        self.locked = held_locks()
        self.failed = failed_jobs(root / SNAKEMAKE_LOGS)  # output -> its job's log file
        self._runs: dict[tuple[str, str, int], State] = {}

    def lines(self) -> list[str]:
        """The report: a header, then per table a line per cell and seed, then a tally."""
        lines, tally = [self.workflow()], {}
        for table in self.plan.tables:
            lines += ["", f"## {table.name}"]
            for i, j, cell in self.plan.table_cells(table):
                row, col = table.rows[i], table.columns[j]
                where = f"{row.experiment} / {col.key}"
                if cell.status != "ok":
                    lines.append(f"- {where}: {cell.status}")
                    continue
                for seed in self.plan.seeds:
                    state = self.cell(cell, col.split, col.metric, seed,
                                      self.plan.baseline_cell(table, j))
                    tally[state.name] = tally.get(state.name, 0) + 1
                    lines.append(f"- {where} (seed {seed}, {cell.run_dir(seed)}): {state}")
        counts = ", ".join(f"{n} {name}" for name, n in sorted(tally.items()))
        return [*lines, "", f"cells: {counts or 'none to run'}"]

    def workflow(self) -> str:
        lock = self.root / WORKFLOW_LOCK
        if self.locked is not None and lock.exists() and _key(lock) in self.locked:
            pid = lock.read_text().strip() or "?"
            return f"a workflow is running jobs here (process {pid})"
        return "no workflow is running jobs here" if self.locked is not None else (
            "whether a workflow runs here is unknown (no /proc/locks)")

    def cell(self, cell: Cell, split: str, metric: str, seed: int,
             baseline: Cell | None) -> State:
        run = self.run(cell.dataset, str(cell.run), seed)
        if run.name != "trained":
            return run
        output = self.root / Plan.cell_files(cell, split, metric, seed, baseline)[0]
        made_after = [self.root / cell.file(layout.TRAIN_SUMMARY, seed)]
        if METRICS[metric].source == "metrics":
            made_after.append(self.root / cell.file(layout.HYP, seed, split=split))
        if not output.is_file():
            if log := self._failure([output, *made_after[1:]]):
                return State("failed", f"see {log}")
            return State("trained", f"{output.relative_to(self.root)} still to be made")
        if newer := [p for p in made_after if p.is_file() and _mtime(p) > _mtime(output)]:
            return State("stale", f"{newer[0].relative_to(self.root)} is newer than "
                                  f"{output.name}")
        return State("done", _value(output, metric))

    def run(self, dataset: str, run: str, seed: int) -> State:
        key = (dataset, run, seed)
        if key not in self._runs:
            self._runs[key] = self._run(dataset, run, seed)
        return self._runs[key]

    def _run(self, dataset: str, run: str, seed: int) -> State:
        run_dir = self.root / layout.RUN.format(dataset=dataset, run=run, seed=seed)
        summary = run_dir / layout.TRAIN_SUMMARY_NAME
        inputs = [str(p) for p in provenance.input_paths(self.plan.run_paths(dataset, run,
                                                                              seed)).values()]
        if summary.is_file():
            return self._trained(run_dir, summary, inputs, dataset, run, seed)
        train_log = run_dir / layout.TRAIN_LOG_NAME
        progress = (self._progress(train_log, self.plan.run_settings(dataset, run, seed))
                    if train_log.is_file() else None)
        lock = run_dir / RUN_LOCK_NAME
        if lock.exists() and (_key(lock) in self.locked if self.locked is not None
                              else progress is not None):
            return State("training", progress or "starting (no update logged yet)")
        if log := self._failure([summary]):
            return State("failed", f"see {log}" + (f" (stopped at {progress.split(';')[0]})"
                                                   if progress else ""))
        if progress:
            return State("interrupted", f"{progress}; the next workflow run resumes it")
        missing = [str(p) for p in inputs if not (self.root / p).exists()]
        if failed := next((self.failed[p] for p in missing if p in self.failed), None):
            return State("failed", f"an input of the run failed: see {failed}")
        return State("not started", f"waits for {', '.join(missing[:2])}"
                     + (f" and {len(missing) - 2} more" if len(missing) > 2 else "")
                     if missing else "")

    def _trained(self, run_dir: Path, summary: Path, inputs: list[str], dataset: str, run: str,
                 seed: int) -> State:
        config = _json(run_dir / layout.RUN_CONFIG_NAME)
        planned = json.loads(as_json(self.plan.run_settings(dataset, run, seed)))
        recorded = config.get("experiment") if isinstance(config, dict) else None
        if recorded != planned:
            keys = sorted(k for k in {*planned, *(recorded or {})}
                          if (recorded or {}).get(k) != planned.get(k))
            return State("stale", "trained with other settings than the config's ("
                                  + ", ".join(keys[:4]) + ")")
        changed = [p for p in inputs
                   if (self.root / p).exists() and _mtime(self.root / p) > _mtime(summary)]
        if changed:
            return State("stale", f"{changed[0]} changed after the run trained")
        return State("trained")

    def _progress(self, train_log: Path, settings: dict[str, Any]) -> str:
        """Update x of y (y: max_updates, or max_epochs times the first epoch's updates),
        the epoch, and how long ago the log last moved."""
        step, epoch, per_epoch = 0, 1, None
        for line in train_log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line a kill cut short
            step, epoch = record.get("step", step), record.get("epoch", epoch)
            if record.get("event") == "valid" and epoch == 1 and per_epoch is None:
                per_epoch = step
        total = settings.get("max_updates") or (
            settings["max_epochs"] * per_epoch if per_epoch else None)
        age = _ago(self.now - _mtime(train_log))
        return (f"update {step}" + (f" of {total}" if total else "")
                + f", epoch {epoch} of {settings['max_epochs']}; log moved {age} ago")

    def _failure(self, outputs: list[Path]) -> str | None:
        for path in outputs:
            if (log := self.failed.get(str(path.relative_to(self.root)))) is not None:
                return log
        return None


def held_locks() -> set[tuple[int, int]] | None:
    """(device, inode) of every file some process holds an OS lock on, from /proc/locks
    (reading it takes none); None where the system has no such file."""
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    held = set()
    for line in text.splitlines():
        fields = line.split()
        where = next((f for f in fields if f.count(":") == 2), None)  # major:minor:inode
        if where is not None:
            major, minor, inode = where.split(":")
            held.add((os.makedev(int(major, 16), int(minor, 16)), int(inode)))
    return held


def failed_jobs(log_dir: Path) -> dict[str, str]:
    """Output -> log file of each job Snakemake's logs say failed (the newest log last, so a
    later failure names its own log)."""
    failed: dict[str, str] = {}
    for log in sorted(log_dir.glob("*.snakemake.log")) if log_dir.is_dir() else []:
        blocks: list[dict[str, str]] = []
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("Error in rule "):
                blocks.append({})
            elif blocks and line.startswith("    ") and not line.startswith("     "):
                key, _, value = line.strip().partition(": ")
                blocks[-1].setdefault(key, value)
        for block in blocks:
            job_log = block.get("log", "").split(" (check")[0] or str(log)
            for output in filter(None, block.get("output", "").split(", ")):
                failed[output] = job_log
    return failed


def _key(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino


def _mtime(path: Path) -> float:
    return path.stat().st_mtime


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _value(output: Path, metric: str) -> str:
    record = value = _json(output)
    if metric == "speedup" and isinstance(record, dict) and "baseline" not in record:
        return "the baseline's own latency"
    for key in METRICS[metric].keys:
        value = value.get(key) if isinstance(value, dict) else None
    return f"{METRICS[metric].label} {METRICS[metric].format(value)}" if is_number(value) \
        else f"{output.name} holds no {METRICS[metric].label}"


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"

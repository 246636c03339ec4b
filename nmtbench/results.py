"""Reading a plan's run outputs back from a results directory (results/ or a copy of it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nmtbench import layout, provenance
from nmtbench.errors import InputError
from nmtbench.metric_registry import METRICS
from nmtbench.plan import Cell, Plan, bootstrap_file
from nmtbench.records import read_result

BETTER, WORSE = "▲", "▼"


class Results:
    """Reads the run outputs of a plan's cells from a results directory: only those made from
    the training that is in the run's directory now (`nmtbench.provenance`); the others are
    left out and listed in `stale`."""

    def __init__(self, plan: Plan, results_dir: Path) -> None:
        self.plan = plan
        self.results_dir = results_dir
        self.stale: set[Path] = set()

    def path(self, planned: str) -> Path:
        """Where a planned file ("results/runs/...") is in this results directory."""
        return self.results_dir / Path(planned).relative_to(Path(layout.RUNS).parent)

    def measure(self, cell: Cell, split: str, metric: str, seed: int,
                baseline: Cell | None) -> float | None:
        """Our value of one cell for one seed; None when its file is not there yet."""
        path = self.path(Plan.cell_files(cell, split, metric, seed, baseline)[0])
        data = read_result(path)
        if data is None:
            return None
        made_from = [(data, cell)]
        if METRICS[metric].source == "latency" and "baseline" in data:
            made_from.append((data["baseline"], baseline))
        if not all(provenance.current(record, self.path(c.run_dir(seed)))
                   for record, c in made_from):
            self.stale.add(path)
            return None
        if metric == "speedup" and "baseline" not in data:
            return 1.0  # the baseline row itself
        return _get(data, METRICS[metric].keys, path)

    def significance(self, cell: Cell, baseline: Cell, split: str) -> str:
        """▲/▼ when every seed's paired bootstrap says better/worse at p < 0.05."""
        verdicts = []
        for seed in self.plan.seeds:
            path = self.path(bootstrap_file(cell, baseline, split, seed))
            data = read_result(path)
            if data is None:
                return ""
            scored = [(read_result(self.path(c.file(layout.METRICS, seed, split=split))), c)
                      for c in (cell, baseline)]
            if not all(s is not None and provenance.current(s, self.path(c.run_dir(seed)))
                       for s, c in scored) or data.get("hyps") != [s["hyp"] for s, _ in scored]:
                self.stale.add(path)  # it compared hypotheses the table does not show
                return ""
            verdicts.append(data.get("significance"))
        if all(v == "better" for v in verdicts):
            return BETTER
        if all(v == "worse" for v in verdicts):
            return WORSE
        return ""


def _get(data: dict, keys: tuple[str, ...], path: Path) -> float:
    value: Any = data
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise InputError(f"{path}: missing key '{'.'.join(keys)}'")
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{path}: key '{'.'.join(keys)}' must be a number, got {value!r}")
    return float(value)

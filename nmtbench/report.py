"""Render `results/tables.md`: every requested table, every run, and where the numbers came from.

Each cell is traceable to its run directory, a run that did not finish shows as "missing" rather
than vanishing from a mean, and the provenance block says which code, config, hardware and
library versions produced the numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

import pandas as pd
import torch

from nmtbench.errors import InputError
from nmtbench.fileio import write_text

MISSING = "missing"
NUMBER_KEYS = ("bleu.sacrebleu", "bleu.tokenized", "params.total", "params.trained",
               "train.seconds")
TEXT_KEYS = ("bleu.signature", "bleu.tokenized_signature", "train.device")
LIBRARIES = ("torch", "transformers", "tokenizers", "sacrebleu", "snakemake", "pandas")
SEED_DIR = re.compile(r"seed(\d+)")


def load_run(run_dir: str | os.PathLike) -> dict | None:
    """The run's metrics.json, or None when the run has not produced one (shown as "missing")."""
    path = Path(run_dir) / "metrics.json"
    if not path.is_file():
        return None
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not valid UTF-8") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: line {err.lineno}: invalid JSON ({err.msg})") from None
    for key in NUMBER_KEYS + TEXT_KEYS:
        try:
            value = _get(run, key)
        except (KeyError, TypeError):
            raise InputError(f"{path}: missing key '{key}'") from None
        if key in TEXT_KEYS and not isinstance(value, str):
            raise InputError(f"{path}: key '{key}' must be a string, got {value!r}")
        if key in NUMBER_KEYS and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise InputError(f"{path}: key '{key}' must be a number, got {value!r}")
    return run


def write_tables(config: dict, run_dirs: list[Path], out: Path, root: Path) -> None:
    """Write the markdown report for the tables `config` requests from the runs in `run_dirs`.

    `run_dirs` follow `.../{dataset}/{experiment}/seed{n}`; relative ones are taken relative to
    `root`, the workflow's directory, whose git state goes into the provenance block.
    """
    root = Path(root).resolve()
    out = Path(out).resolve()
    runs = {_run_key(_absolute(d, root)): _absolute(d, root) for d in run_dirs}
    loaded = {key: load_run(path) for key, path in sorted(runs.items())}
    definitions = [(name, _definition(config, name)) for name in _config(config, "tables")]
    seeds = [int(s) for s in _config(config, "seeds")]

    datasets = sorted({d["dataset"] for _, d in definitions} | {k[0] for k in loaded})
    kinds = {name: spec.get("kind") for name, spec in config.get("datasets", {}).items()}
    toy = [d for d in datasets if kinds.get(d) == "toyworld"]
    lines = ["# Results", "", "All numbers below were measured by this harness (nmtbench)."]
    if toy:
        lines.append(
            f"Datasets {', '.join(toy)} are generated toy worlds: "
            "**toy-world numbers; not comparable to the papers**."
        )
    for name, definition in definitions:
        dataset = definition["dataset"]
        rows = [
            _table_row(experiment, _row_runs(dataset, experiment, seeds, runs, loaded, root),
                       out.parent)
            for experiment in definition["rows"]
        ]
        lines += ["", f"## {name}", "", f"{definition['caption']} (dataset: {dataset})", "",
                  _markdown(pd.DataFrame(rows))]
    all_runs = [_all_runs_row(key, runs[key], run, out.parent) for key, run in loaded.items()]
    lines += ["", "## All runs", "", _markdown(pd.DataFrame(all_runs)) if all_runs else "(none)"]
    lines += ["", "## Provenance", "", *_provenance(config, root, list(loaded.values()))]
    write_text(out, "\n".join(lines) + "\n")


def _config(config: dict, key: str) -> list:
    if key not in config:
        raise InputError(f"config: missing key '{key}'")
    return config[key]


def _definition(config: dict, name: str) -> dict:
    definition = config.get("table_definitions", {}).get(name)
    if definition is None:
        raise InputError(f"config: tables lists '{name}' but table_definitions.{name} is not set")
    for key in ("caption", "dataset", "rows"):
        if key not in definition:
            raise InputError(f"config: missing key 'table_definitions.{name}.{key}'")
    return definition


def _absolute(run_dir: str | os.PathLike, root: Path) -> Path:
    return Path(os.path.normpath(root / run_dir))


def _run_key(run_dir: Path) -> tuple[str, str, int]:
    match = SEED_DIR.fullmatch(run_dir.name)
    if match is None:
        raise InputError(f"{run_dir}: a run directory must be .../{{dataset}}/{{experiment}}/seedN")
    return run_dir.parent.parent.name, run_dir.parent.name, int(match.group(1))


def _row_runs(dataset: str, experiment: str, seeds: list[int], runs: dict, loaded: dict,
              root: Path) -> list[tuple[int, Path, dict | None]]:
    """The runs of one table row: the configured seeds plus any other seed given for it."""
    given = {k[2] for k in runs if k[:2] == (dataset, experiment)}
    result = []
    for seed in sorted(set(seeds) | given):
        key = (dataset, experiment, seed)
        if key in runs:
            result.append((seed, runs[key], loaded[key]))
        else:
            path = root / "results" / "runs" / dataset / experiment / f"seed{seed}"
            result.append((seed, path, load_run(path)))
    return result


def _table_row(experiment: str, row_runs: list[tuple[int, Path, dict | None]],
               base: Path) -> dict:
    done = [run for _, _, run in row_runs if run is not None]
    missing = [f"seed{seed}" for seed, _, run in row_runs if run is None]

    def cell(key: str, summarize: Callable[[list[float]], str]) -> str:
        return summarize([float(_get(run, key)) for run in done]) if done else MISSING

    seeds = f"{len(done)} of {len(row_runs)} ({', '.join(missing)} missing)" if missing else (
        str(len(done)))
    return {
        "experiment": experiment,
        "BLEU (tokenized)": cell("bleu.tokenized", _bleu),
        "sacreBLEU": cell("bleu.sacrebleu", _bleu),
        "#params total": cell("params.total", _params),
        "#params trained": cell("params.trained", _params),
        "training time": cell("train.seconds", _time),
        "seeds": seeds,
        "runs": " ".join(
            _link(f"seed{seed}", path, base) + ("" if run is not None else f" {MISSING}")
            for seed, path, run in row_runs
        ),
    }


def _get(run: dict, dotted: str) -> object:
    value = run
    for part in dotted.split("."):
        value = value[part]
    return value


def _spread(values: list[float], fmt: Callable[[float], str]) -> str:
    """One seed as is; several as mean ± sample standard deviation."""
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(statistics.mean(values))} ± {fmt(statistics.stdev(values))}"


def _bleu(values: list[float]) -> str:
    return _spread(values, _two_decimals)


def _time(values: list[float]) -> str:
    return _spread(values, _duration)


def _params(values: list[float]) -> str:
    """Parameter counts should not depend on the seed; show a spread only when they do."""
    return _count(values[0]) if len(set(values)) == 1 else _spread(values, _count)


def _two_decimals(value: float) -> str:
    return f"{value:.2f}"


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _duration(seconds: float) -> str:
    """Human-readable time: 42.3s, 3m 12s, 2h 05m."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def _link(text: str, target: Path, base: Path) -> str:
    return f"[{text}]({quote(Path(os.path.relpath(target, base)).as_posix())})"


def _all_runs_row(key: tuple[str, str, int], path: Path, run: dict | None, base: Path) -> dict:
    dataset, experiment, seed = key

    def cell(dotted: str, fmt: Callable[[float], str]) -> str:
        return MISSING if run is None else fmt(float(_get(run, dotted)))

    return {
        "dataset": dataset,
        "experiment": experiment,
        "seed": str(seed),
        "BLEU (tokenized)": cell("bleu.tokenized", _two_decimals),
        "sacreBLEU": cell("bleu.sacrebleu", _two_decimals),
        "#params total": cell("params.total", _count),
        "#params trained": cell("params.trained", _count),
        "training time": cell("train.seconds", _duration),
        "device": MISSING if run is None else str(_get(run, "train.device")),
        "run": _link(path.name, path, base),
    }


def _markdown(frame: pd.DataFrame) -> str:
    """A GitHub table of string cells, kept as written (no number re-parsing), pipes escaped."""
    frame = frame.map(lambda text: text.replace("|", "\\|"))
    return frame.to_markdown(index=False, disable_numparse=True)


def _provenance(config: dict, root: Path, runs: list[dict | None]) -> list[str]:
    done = [run for run in runs if run is not None]
    config_hash = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
    devices = sorted({str(_get(run, "train.device")) for run in done})
    lines = [
        f"- git commit: {_git_commit(root)}",
        f"- config hash: {config_hash} (sha256 of the config as sorted JSON)",
        f"- platform: {platform.platform()}",
        f"- CPU: {_cpu_model()}, {os.cpu_count()} cores",
        f"- CUDA device: {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}",
        f"- training devices seen in runs: {', '.join(devices) or 'none'}",
        f"- python {platform.python_version()}; "
        + "; ".join(f"{name} {_version(name)}" for name in LIBRARIES),
        "- BLEU signatures seen in runs:",
    ]
    signatures = sorted(
        {("sacreBLEU", str(_get(run, "bleu.signature"))) for run in done}
        | {("tokenized", str(_get(run, "bleu.tokenized_signature"))) for run in done}
    )
    lines += [f"  - {kind}: `{signature}`" for kind, signature in signatures] or ["  - none"]
    return lines


def _git_commit(root: Path) -> str:
    """HEAD of `root`, with +dirty when the work tree has changes the commit does not hold."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=False)
        if head.returncode != 0:
            return "uncommitted/unknown"
        status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True,
                                text=True, check=False)
    except OSError:
        return "uncommitted/unknown"
    return head.stdout.strip() + ("+dirty" if status.stdout.strip() else "")


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"

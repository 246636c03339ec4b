"""JSON records the jobs write (a run's train_summary.json and config.json, metrics, a
decoding's record), read back strictly: a record that is corrupt or of the wrong shape stops
the command with one line naming it. Without torch or the workflow's packages: the text
environment's commands read them too."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from nmtbench import layout
from nmtbench.errors import InputError
from nmtbench.fileio import read_json


def is_number(value: Any) -> bool:
    """An int or float from JSON (true and false are ints to Python, not numbers here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_finite(value: Any) -> bool:
    """A number that is neither NaN nor infinite: what a record may show (JSON has neither,
    but Python's reader takes NaN and Infinity, as a hand-edited file may hold them)."""
    return is_number(value) and math.isfinite(value)


def read_result(path: str | Path, keys: tuple[str, ...] = (),
                numbers: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """A JSON record a job writes (metrics, latency, a run's summary), or None while no job
    has written it. A corrupt one, one that is not an object, or one without one of `keys` or
    of `numbers` (dotted: "heldout.accuracy"; these must be numbers; "key?": a number where
    it is there) is an error naming it."""
    data = read_json(path)
    if data is None:
        return None
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a JSON object")
    for key in (*keys, *numbers):
        value: Any = data
        for part in key.removesuffix("?").split("."):
            if not isinstance(value, dict) or part not in value:
                if key.endswith("?"):
                    break
                raise InputError(f"{path}: key {key!r} is missing")
            value = value[part]
        else:
            if key in numbers and not is_finite(value):
                raise InputError(f"{path}: key {key.removesuffix('?')!r} must be a finite "
                                 f"number, got {value!r}")
    return data


def read_record(path: str | Path, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON record a command cannot do without (a run's train_summary.json or config.json,
    a decoding's record): missing, corrupt, not an object or lacking one of `keys`, it stops
    the command with one line naming it."""
    data = read_result(path, keys)
    if data is None:
        raise InputError(f"{path}: no such file")
    return data


# What a run directory holds that commands reading the run depend on (its decodings, metrics
# and other outputs sit beside these and may be written by them).
RUN_FILES = (layout.RUN_CONFIG_NAME, layout.TRAIN_SUMMARY_NAME, layout.TRAIN_LOG_NAME,
             layout.CHECKPOINTS_NAME)


def run_inputs(run_dir: str | Path) -> list[Path]:
    """The paths a command reading the run `run_dir` depends on: the run's own files and every
    path its config.json records (tokenizers, pre-trained checkpoints, data, other runs'
    outputs). An unreadable config.json adds none: the command itself then names it."""
    run_dir = Path(run_dir)
    found = [run_dir / name for name in RUN_FILES]
    try:
        config = read_result(run_dir / layout.RUN_CONFIG_NAME) or {}
    except InputError:
        return found
    pending = [config.get("paths")]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, str) and value:
            found.append(Path(value))
    return found

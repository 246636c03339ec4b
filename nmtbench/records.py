"""JSON records the jobs write (a run's train_summary.json and config.json, metrics, a
decoding's record), read back strictly: a record that is corrupt or of the wrong shape stops
the command with one line naming it. Without torch or the workflow's packages: the text
environment's commands read them too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nmtbench.errors import InputError
from nmtbench.fileio import read_json


def read_result(path: str | Path) -> dict[str, Any] | None:
    """A JSON record a job writes (metrics, latency, a run's summary), or None while no job
    has written it; a corrupt one, or one that is not an object, is an error naming it."""
    data = read_json(path)
    if data is not None and not isinstance(data, dict):
        raise InputError(f"{path}: not a JSON object")
    return data


def read_record(path: str | Path, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON record a command cannot do without (a run's train_summary.json or config.json,
    a decoding's record): missing, corrupt, not an object or lacking one of `keys`, it stops
    the command with one line naming it."""
    data = read_result(path)
    if data is None:
        raise InputError(f"{path}: no such file")
    if missing := [key for key in keys if key not in data]:
        raise InputError(f"{path}: key {missing[0]!r} is missing")
    return data

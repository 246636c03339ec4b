"""JSON records the jobs write (a run's train_summary.json and config.json, metrics, a
decoding's record), read back strictly: a record that is corrupt or of the wrong shape stops
the command with one line naming it. Without torch or the workflow's packages: the text
environment's commands read them too."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Bounds:
    """The values a recorded number can take. A file edited by hand may hold a number of the
    right type that no job could have written (BLEU 250, a negative latency, half a
    parameter): shown, it would read as a result."""

    low: float = -math.inf
    high: float = math.inf
    above: bool = False  # strictly above `low`
    whole: bool = False  # a count

    def refusal(self, value: float) -> str | None:
        """What `value` fails, in words; None where it is one of these values."""
        if self.whole and not isinstance(value, int):
            return "a whole number"
        if value < self.low or (self.above and value == self.low) or value > self.high:
            lower = f"above {self.low:g}" if self.above else f"at least {self.low:g}"
            return (f"from {self.low:g} to {self.high:g}" if math.isfinite(self.high)
                    else lower)
        return None


ANY = Bounds()
SCORE = Bounds(0, 100)  # BLEU, chrF and ROUGE F1, x100
SHARE = Bounds(0, 1)  # an accuracy, a probability
COUNT = Bounds(0, whole=True)
POSITIVE = Bounds(0, above=True)  # a time per item, a rate, a ratio of two
NON_NEGATIVE = Bounds(0)


def checked_number(path: str | Path, key: str, value: Any, bounds: Bounds = ANY) -> float:
    """`value`, the number at `key` of the record `path`; one that is not a finite number
    or outside `bounds` is an error naming the file and the key."""
    if not is_finite(value):
        raise InputError(f"{path}: key {key!r} must be a finite number, got {value!r}")
    if refused := bounds.refusal(value):
        raise InputError(f"{path}: key {key!r} must be {refused}, got {value!r}")
    return value


def read_result(path: str | Path, keys: tuple[str, ...] = (),
                numbers: Mapping[str, Bounds] | None = None) -> dict[str, Any] | None:
    """A JSON record a job writes (metrics, latency, a run's summary), or None while no job
    has written it. A corrupt one, one that is not an object, or one without one of `keys` or
    of `numbers` (dotted: "heldout.accuracy"; these must be numbers within their bounds;
    "key?": such a number where it is there) is an error naming it."""
    numbers = numbers or {}
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
            if key in numbers:
                checked_number(path, key.removesuffix("?"), value, numbers[key])
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

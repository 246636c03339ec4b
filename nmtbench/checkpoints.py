"""Checkpoint files: atomic saves, safe loads (weights_only), and averaging of the last k."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from nmtbench.errors import InputError
from nmtbench.fileio import atomic_path

EPOCH_FILE = re.compile(r"epoch(\d+)\.pt$")


def save(path: str | Path, state: dict[str, Any]) -> None:
    """torch.save to a temporary file, then rename: a kill never leaves a half-written file."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load(path: str | Path) -> dict[str, Any]:
    """Load tensors and plain Python values only (no pickled code)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise InputError(f"{path}: checkpoint not found") from None
    except Exception as err:  # torch raises several types for corrupt or unsafe files
        raise InputError(f"{path}: not a loadable checkpoint ({type(err).__name__}: "
                         f"{str(err).splitlines()[0]})") from None


def epoch_checkpoints(directory: str | Path) -> list[Path]:
    """The per-epoch checkpoints in a directory, oldest first."""
    found = [(int(m.group(1)), p) for p in Path(directory).glob("epoch*.pt")
             if (m := EPOCH_FILE.search(p.name))]
    return [p for _, p in sorted(found)]


def average(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the models in several checkpoints (fairseq's average_checkpoints)."""
    if not paths:
        raise InputError("no checkpoints to average")
    first = load(paths[0])["model"]
    sums = {name: t.double() for name, t in first.items() if t.is_floating_point()}
    for path in paths[1:]:
        model = load(path)["model"]
        if model.keys() != first.keys():
            raise InputError(f"{path}: parameters differ from {paths[0]}; cannot average")
        for name in sums:
            sums[name] += model[name].double()
    return {name: (sums[name] / len(paths)).to(t.dtype) if name in sums else t
            for name, t in first.items()}

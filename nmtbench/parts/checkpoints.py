"""Checkpoint files: atomic, checksummed saves; verified loads (weights_only); averaging of the
last k.

Beside each checkpoint `X.pt`, `X.pt.sha256` records its digest (`sha256sum` format: `sha256sum
-c` checks it by hand), and every load verifies it, so flipped bytes never load as another
model. While a new file is renamed into place the record lists the old file's digest and the new
one's, so a kill between the rename and the final record leaves a checkpoint that verifies. A
checkpoint without a record is refused (the record was lost, or another program wrote the file).
Weights with nan or inf are neither saved nor loaded.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nmtbench import layout
from nmtbench.errors import InputError
from nmtbench.fileio import atomic_path, write_text
from nmtbench.provenance import CHECKSUM_SUFFIX, file_digest

log = logging.getLogger(__name__)

# the numbered checkpoints kept for averaging: of each epoch, and of every so many updates
NUMBERED = {"epochs": layout.EPOCH_CHECKPOINT_NAME.format(epoch="{}"),
            "updates": layout.UPDATE_CHECKPOINT_NAME.format(update="{}")}
CHECKSUM_LINE = re.compile(r"([0-9a-f]{64})  \S.*")


def checksum_path(path: str | Path) -> Path:
    return Path(f"{path}{CHECKSUM_SUFFIX}")


def save(path: str | Path, state: dict[str, Any]) -> None:
    """torch.save to a temporary file, then rename: a kill never leaves a half-written file.
    A state holding nan or inf raises FloatingPointError and nothing is written."""
    path = Path(path)
    if (bad := nonfinite(state)) is not None:
        raise FloatingPointError(f"{bad} holds non-finite values")
    try:  # the digests the file there now verifies with
        old = _recorded(path) or []
    except InputError:  # a damaged record: that file does not verify anyway
        old = []
    with atomic_path(path) as tmp:
        # to a file object: given a path, torch names the archive's records after the file,
        # here a temporary one of a random name, so equal states would differ in their bytes
        with open(tmp, "wb") as f:
            torch.save(state, f)
        digest = file_digest(tmp)
        _write_checksums(path, [*old, digest])  # the rename may leave either file
    _write_checksums(path, [digest])


def load(path: str | Path) -> dict[str, Any]:
    """Verify the file against its recorded checksum, then load tensors and plain Python values
    only (no pickled code)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: checkpoint not found")
    recorded = _recorded(path)
    if recorded is None:
        raise InputError(f"{path}: its checksum file {checksum_path(path).name} is missing, so "
                         "it cannot be verified")
    if file_digest(path) not in recorded:
        raise InputError(f"{path}: corrupt checkpoint (its sha256 is not the one recorded in "
                         f"{checksum_path(path)})")
    if path.is_file() and path.stat().st_size == 0:
        raise InputError(f"{path}: empty file (0 bytes)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for corrupt or unsafe files
        detail = "".join(f": {line}" for line in str(err).splitlines()[:1])
        raise InputError(f"{path}: not a loadable checkpoint ({type(err).__name__}{detail})") \
            from None
    if not isinstance(state, dict) or "model" not in state:
        raise InputError(f"{path}: not a checkpoint of this project (no model weights in it)")
    if (bad := nonfinite(state)) is not None:
        raise InputError(f"{path}: {bad} holds non-finite values (the weights of a diverged "
                         "training)")
    return state


def remove(path: str | Path) -> None:
    """Delete a checkpoint and its checksum record."""
    Path(path).unlink(missing_ok=True)
    checksum_path(path).unlink(missing_ok=True)


def nonfinite(value: Any, name: str = "") -> str | None:
    """The dotted name of the first floating-point tensor in `value` (nested dicts, lists)
    holding nan or inf; None when there is none."""
    if isinstance(value, torch.Tensor):
        return name if value.is_floating_point() and not torch.isfinite(value).all() else None
    items = (value.items() if isinstance(value, dict)
             else enumerate(value) if isinstance(value, list | tuple) else ())
    for key, item in items:
        if (bad := nonfinite(item, f"{name}.{key}" if name else str(key))) is not None:
            return bad
    return None


def _recorded(path: Path) -> list[str] | None:
    """The digests recorded for `path`; None when it has no record."""
    record = checksum_path(path)
    try:
        text = record.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{record}: cannot read ({getattr(err, 'strerror', None) or err})") \
            from None
    digests = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not (match := CHECKSUM_LINE.fullmatch(line)):
            raise InputError(f"{record}: line {number}: not a sha256 line")
        digests.append(match.group(1))
    if not digests:
        raise InputError(f"{record}: empty (no sha256 line)")
    return digests


def _write_checksums(path: Path, digests: list[str]) -> None:
    write_text(checksum_path(path), "".join(f"{d}  {path.name}\n" for d in digests))


def numbered_checkpoints(directory: str | Path, per: str = "epochs") -> list[Path]:
    """The checkpoints of each epoch (`per` "epochs") or of every so many updates ("updates")
    in a directory, oldest first."""
    name = NUMBERED[per]
    number = re.compile(re.escape(name).replace(r"\{\}", r"(\d+)") + "$")
    found = [(int(m.group(1)), p) for p in Path(directory).glob(name.format("*"))
             if (m := number.fullmatch(p.name))]
    return [p for _, p in sorted(found)]


def average(paths: list[Path],
            check: Callable[[Path, dict[str, Any]], None] | None = None
            ) -> dict[str, torch.Tensor]:
    """Element-wise mean of the models in several checkpoints (fairseq's average_checkpoints).
    `check(path, state)` vets each loaded checkpoint (raising InputError) before it is used."""
    if not paths:
        raise InputError("no checkpoints to average")

    def model_of(path: Path) -> dict[str, torch.Tensor]:
        state = load(path)
        if check is not None:
            check(path, state)
        return state["model"]

    first = model_of(paths[0])
    sums = {name: t.double() for name, t in first.items() if t.is_floating_point()}
    for path in paths[1:]:
        model = model_of(path)
        if model.keys() != first.keys():
            raise InputError(f"{path}: parameters differ from {paths[0]}; cannot average")
        for name in sums:
            sums[name] += model[name].double()
    return {name: (sums[name] / len(paths)).to(t.dtype) if name in sums else t
            for name, t in first.items()}

"""Pre-trained checkpoint names and the directories they stand for, without torch: planning
resolves them (nmtbench/parts/pretrained.py loads what is there)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nmtbench import layout
from nmtbench.errors import InputError

# A Hugging Face hub name: NAME or ORGANISATION/NAME (a path under data/pretrained/, never
# outside it: no part starts with a dot).
HUB_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?"


def checkpoint_dir(name: str, pretraining: dict[str, Any] | None = None) -> str:
    """The directory a checkpoint name stands for: an existing local directory as given;
    a hub name or a toy pre-training name under data/pretrained/."""
    if pretraining and name in pretraining:
        return layout.PRETRAINED_DIR.format(pretrained=name)
    if name.startswith(("/", "./", "../", "~")) or Path(name).is_dir():
        path = Path(name).expanduser()
        if not path.is_dir():
            raise InputError(f"checkpoint directory {name!r} does not exist")
        if not (path / layout.HF_CONFIG_NAME).is_file():
            raise InputError(f"checkpoint directory {name!r} holds no config.json: not a "
                             "Hugging Face checkpoint (save_pretrained writes one)")
        return str(path)
    if not re.fullmatch(HUB_NAME, name):
        raise InputError(f"checkpoint {name!r} is neither a hub name nor a local directory")
    return layout.PRETRAINED_DIR.format(pretrained=name)

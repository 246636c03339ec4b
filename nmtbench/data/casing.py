"""Which sides of a dataset keep their case. A recipe may lowercase a side (fairseq's IWSLT14
recipe lowercases both), but a side that a cased pre-trained checkpoint reads must keep its case:
such a model was trained on cased text (`bert-base-german-cased` tells nouns by their capitals).
So a side is lowercased only where the recipe lowercases it, the dataset's checkpoint of that
side does not read case, and the dataset's `keep_case` does not name it (a side that a run's own
cased checkpoint reads); planning refuses a run whose checkpoint reads case on a lowercased side.
Without torch: planning decides it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SIDES = ("src", "tgt")


def reads_case(name: str | None, trimmed: dict[str, Any] | None = None) -> bool | None:
    """True where checkpoint `name` tells upper from lower case, False where its tokenizer
    lowercases, None where neither its tokenizer config (a local directory) nor its name says
    so. A `trimmed` checkpoint (config `trimmed`) reads as the one it was cut from."""
    if not name:
        return None
    source = (trimmed or {}).get(name, {}).get("checkpoint")
    if source:
        return reads_case(source, trimmed)
    config = Path(name) / "tokenizer_config.json"
    if config.is_file():
        try:
            lower = json.loads(config.read_text()).get("do_lower_case")
        except (OSError, ValueError):
            lower = None
        if isinstance(lower, bool):
            return not lower
    base = Path(name).name.lower()
    if "uncased" in base:
        return False
    if "cased" in base or base.startswith("gpt2"):  # GPT-2's byte-level BPE keeps case
        return True
    return None


def side_checkpoint(spec: dict[str, Any], side: str) -> str | None:
    """The dataset's checkpoint that reads `side`: its own, else the joint one."""
    checkpoints = spec.get("checkpoints", {})
    return checkpoints.get(side) or checkpoints.get("joint")


def lowercased_sides(spec: dict[str, Any], recipe_lowercases: bool,
                     trimmed: dict[str, Any] | None = None) -> set[str]:
    """The sides of a dataset whose text is lowercased when it is prepared."""
    if not recipe_lowercases:
        return set()
    return {side for side in SIDES if side not in spec.get("keep_case", [])
            and reads_case(side_checkpoint(spec, side), trimmed) is not True}

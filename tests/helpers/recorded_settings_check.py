"""Reading back the settings a generated results file records (`nmtbench.workflow.
recorded_settings` writes them under its "Settings" heading) and checking them against what
today's config files resolve: the tests' side of that record."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from nmtbench.workflow.decode_settings import DecodeSettings
from nmtbench.workflow.recorded_settings import HEADING, resolve

# A key a record lacks is older than the record's setting: it ran as the key's default does
# (a new key's default keeps what ran before it existed)
DEFAULTS = {"decode": json.loads(json.dumps(dataclasses.asdict(DecodeSettings()))), "train": {}}

BLOCK = re.compile(re.escape(HEADING) + r"\n.*?```json\n(.*?)\n```", re.S)


def read(text: str) -> dict[str, Any] | None:
    """The settings recorded in a results file's text (None: it records none)."""
    found = BLOCK.search(text)
    return json.loads(found.group(1)) if found else None


def differences(recorded: dict[str, Any], unread: frozenset[str] = frozenset()) -> list[str]:
    """`experiment: key was X, now Y` for each setting today's config files resolve otherwise,
    but those in `unread` (`part.key`: settings what was measured does not depend on)."""
    cells = [tuple(name.split("/", 1)) for name in recorded["experiments"]]
    # through JSON, as the recorded ones went: tuples become lists
    today = json.loads(json.dumps(resolve(recorded["configs"], cells)))["experiments"]
    found = []
    for name, then in recorded["experiments"].items():
        for part in ("train", "decode"):
            was, now = {**DEFAULTS[part], **then[part]}, today[name][part]
            found += [f"{name}: {part}.{key} was {was.get(key)!r}, now {now.get(key)!r}"
                      for key in sorted(set(was) | set(now))
                      if was.get(key) != now.get(key) and f"{part}.{key}" not in unread]
    return found

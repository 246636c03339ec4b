"""The JSON Schema validator of the config and paper files, with whole-string patterns.

Python's `re.search` lets a pattern's closing `$` match before a final line break, so a
standard validator passes "toy\\n" as a safe name (and a line break would reach paths and
command lines). Here a pattern ending in `$` must match up to the very end of the string.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator


def _pattern(validator: Any, pattern: str, instance: Any,
             schema: dict[str, Any]) -> Iterator[jsonschema.ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    whole = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
    if not re.search(whole, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


Validator = jsonschema.validators.extend(Draft202012Validator, {"pattern": _pattern})

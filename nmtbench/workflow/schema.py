"""config/schema.yaml: the settings declared once (dataclasses made from it), and the JSON
Schema validator of the config and paper files, with whole-string patterns.

Python's `re.search` lets a pattern's closing `$` match before a final line break, so a
standard validator passes "toy\\n" as a safe name (and a line break would reach paths and
command lines). Here a pattern ending in `$` must match up to the very end of the string,
and an integer is one as written (2, not 2.0).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from nmtbench.workflow.yaml_reader import read_yaml


def _pattern(validator: Any, pattern: str, instance: Any,
             schema: dict[str, Any]) -> Iterator[jsonschema.ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    whole = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
    if not re.search(whole, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _integer(checker: Any, instance: Any) -> bool:
    """A whole number as written: 2, not 2.0, which the standard takes for an integer and
    which every count then reaching `range` or a tensor's shape would refuse as a float."""
    return isinstance(instance, int) and not isinstance(instance, bool)


Validator = jsonschema.validators.extend(
    Draft202012Validator, {"pattern": _pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _integer))


SCHEMA = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"


@functools.cache
def definitions() -> dict[str, Any]:
    """config/schema.yaml's `$defs`: where each setting's name, type, range, default and
    meaning are written, once (read as every YAML file the project reads)."""
    return read_yaml(SCHEMA)["$defs"]


def schema_dataclass(*path: str) -> Callable[[type], type]:
    """A class decorator: the class becomes a (keyword-only) dataclass whose fields are the
    properties of the schema's `$defs.<path>` with their `default`s, so that a setting is
    declared in one place. A property without a default is a required field (its class's
    `from_config` fills it, as a size fills the Transformer's widths)."""

    def declare(cls: type) -> type:
        entry = definitions()
        for key in path:
            entry = entry[key]
        annotations = dict(cls.__dict__.get("__annotations__", {}))
        for name, spec in entry["properties"].items():
            annotations[name] = "Any"
            if "default" in spec:
                default = spec["default"]
                setattr(cls, name, field(default_factory=functools.partial(copy.deepcopy, default))
                        if isinstance(default, (dict, list)) else default)
        cls.__annotations__ = annotations
        cls.schema_path = path
        return dataclass(kw_only=True)(cls)

    return declare

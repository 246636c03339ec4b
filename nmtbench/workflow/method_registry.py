"""The implemented methods, registered by their entries in `config/schema.yaml`
(`$defs.methods`): each entry is a method's settings (its class's fields are made from them)
and, under `x-class`, where its class is. Planning reads the entries without importing the
classes (it must not load torch); `methods.get_method` imports a class where a model is built.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nmtbench.errors import InputError
from nmtbench.workflow.schema import definitions

CHECKPOINT_SIDE = "x-checkpoint-side"
PARENT_RUN = "x-parent-run"
SOFT_TARGETS = "x-soft-targets"
CLASS = "x-class"  # "module:Class" of the method
NOT_BUILT = "x-not-built"  # a setting's values that the papers use and no code serves yet
UNREAD = "x-unread"  # a method's entry: trainer settings it does not read -> why
LOSS_TERMS = "x-loss-terms"  # a method's entry: the loss terms its models can give


@dataclass(frozen=True)
class MethodInfo:
    """What the plan and the config check need to know of a method."""

    name: str
    keys: frozenset[str]  # its settings (the trainer's are TrainConfig's)
    decodings: tuple[str, ...]  # the first is the default
    checkpoint_roles: dict[str, str]  # setting naming a pre-trained checkpoint -> its side
    parent_runs: tuple[str, ...]  # settings naming another run whose checkpoint it loads
    schema: dict[str, Any]  # its settings' JSON schema, the trainer's included (and `$defs`,
    # which its references such as #/$defs/name point into)
    soft_targets_from: tuple[str, ...] = ()  # settings naming the run whose soft targets it reads
    unread: dict[str, str] = field(default_factory=dict)  # trainer settings it refuses -> why
    cls: str = ""  # where its class is, "module:Class"
    defaults: dict[str, Any] = field(default_factory=dict)  # its settings' defaults
    not_built: dict[str, frozenset] = field(default_factory=dict)  # setting -> values no
    # code serves yet (`x-not-built`): an experiment using one is not implemented
    loss_terms: tuple[str, ...] = ()  # the terms `loss_weights` may weigh (`x-loss-terms`)


    def decoding(self, settings: Mapping[str, Any], where: str) -> str:
        """The decoding `settings` ask for (unset: the method's default), checked once here
        for the config check and for every model built (`Method.read_settings`); `where`
        prefixes the message up to the key."""
        decoding = settings.get("decoding", self.decodings[0])
        if decoding not in self.decodings:
            raise InputError(f"{where}.decoding': method {self.name!r} decodes with "
                             f"{' or '.join(self.decodings)}, not {decoding!r}")
        return decoding


def method_infos(definitions: dict[str, Any]) -> dict[str, MethodInfo]:
    """Each method of the schema's `$defs` (`methods`, with `trainer`)."""
    trainer = definitions["trainer"]["properties"]
    infos = {}
    for name, schema in definitions["methods"].items():
        properties = schema["properties"]
        unread = schema.get(UNREAD, {})
        terms = tuple(schema[LOSS_TERMS])
        infos[name] = MethodInfo(
            name=name,
            keys=frozenset(properties),
            decodings=tuple(properties.get("decoding", {}).get("enum", ["at"])),
            checkpoint_roles={key: spec[CHECKPOINT_SIDE] for key, spec in properties.items()
                              if CHECKPOINT_SIDE in spec},
            parent_runs=tuple(key for key, spec in {**trainer, **properties}.items()
                              if spec.get(PARENT_RUN) and key not in unread),
            schema={"type": "object", "$defs": definitions, "properties": {
                **trainer, **properties,
                "loss_weights": _weighing(properties["loss_weights"], name, terms)}},
            soft_targets_from=tuple(key for key, spec in properties.items()
                                    if spec.get(SOFT_TARGETS)),
            unread=dict(unread),
            cls=schema.get(CLASS, ""),
            defaults={key: spec["default"] for key, spec in properties.items()
                      if "default" in spec},
            not_built={key: frozenset(spec[NOT_BUILT]) for key, spec in properties.items()
                       if NOT_BUILT in spec},
            loss_terms=terms)
    return infos


def _weighing(spec: dict[str, Any], method: str, terms: tuple[str, ...]) -> dict[str, Any]:
    """`loss_weights`' schema, its keys the method's terms only: the trainer weighs the terms a
    model gives, so a weight of any other name (a typo) would weigh nothing, silently."""
    known = {"enum": list(terms), "x-message": f"{{instance!r}} is not a loss term of method "
             f"{method!r} (its terms: {', '.join(terms)})"}
    names = [spec["propertyNames"], known] if "propertyNames" in spec else [known]
    return {**spec, "propertyNames": {"allOf": names}}


@functools.cache
def registered_methods() -> dict[str, MethodInfo]:
    """Each method of config/schema.yaml."""
    return method_infos(definitions())

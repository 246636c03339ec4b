"""One module per method. A method is registered by its entry in config/schema.yaml
(`$defs.methods.<name>`: its settings, and `x-class: "module:Class"`); experiment configs name
it, and `get_method` imports its class only when asked for (planning must not load torch).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from nmtbench.errors import InputError
from nmtbench.workflow.method_registry import registered_methods

if TYPE_CHECKING:
    from nmtbench.parts.contract import Method


def get_method(name: str) -> type[Method]:
    """The class registered under `name`; an unknown name is a one-line InputError."""
    methods = registered_methods()
    if name not in methods:
        raise InputError(f"unknown method {name!r}; known: {', '.join(sorted(methods))}")
    if ":" not in methods[name].cls:
        raise InputError(f"config/schema.yaml $defs.methods.{name}: no x-class "
                         "(\"module:Class\", where the method's class is)")
    module, cls = methods[name].cls.split(":", 1)
    return getattr(import_module(module), cls)

"""The method registry: experiment configs name a method, and this maps the name to its class."""

from __future__ import annotations

from methods.abnet import ABNet
from methods.bert_encoder import BertFrozen, BertInit
from methods.cmlm import CMLM
from methods.transformer import Transformer
from nmtbench.errors import InputError
from nmtbench.method import Method

METHODS: dict[str, type[Method]] = {
    "transformer": Transformer,
    "bert-init": BertInit,
    "bert-frozen": BertFrozen,
    "cmlm": CMLM,
    "abnet": ABNet,
}


def get_method(name: str) -> type[Method]:
    """The class registered under `name`; an unknown name is a one-line InputError."""
    if name not in METHODS:
        raise InputError(f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    return METHODS[name]

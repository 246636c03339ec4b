"""The method registry: experiment configs name a method, and this maps the name to its class.

Classes are imported only when asked for: planning the workflow reads each method's settings
from `config/schema.yaml` (checked against the classes by tests/test_method_contract.py) and
must not load torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from nmtbench.errors import InputError

if TYPE_CHECKING:
    from nmtbench.method import Method

# name -> "module:class"
METHODS: dict[str, str] = {
    "transformer": "methods.transformer:Transformer",
    "rnn": "methods.rnn:RNN",
    "bert-init": "methods.bert_encoder:BertInit",
    "bert-frozen": "methods.bert_encoder:BertFrozen",
    "cmlm": "methods.cmlm:CMLM",
    "abnet": "methods.abnet:ABNet",
    "bert-fused": "methods.bert_fused:BertFused",
    "ctnmt": "methods.ctnmt:CTNMT",
    "deep-fusion": "methods.deep_fusion:DeepFusion",
    "c-mlm": "methods.bert_kd:CMLMTeacherMethod",
    "bert-kd": "methods.bert_kd:BertKD",
}


def get_method(name: str) -> type[Method]:
    """The class registered under `name`; an unknown name is a one-line InputError."""
    if name not in METHODS:
        raise InputError(f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    module, cls = METHODS[name].split(":")
    return getattr(import_module(module), cls)

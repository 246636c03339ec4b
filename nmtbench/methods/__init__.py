"""The method registry: experiment configs name a method, and this maps the name to its class.

Classes are imported only when asked for: planning the workflow reads each method's settings
from `config/schema.yaml` (checked against the classes by tests/models/test_method_contract.py) and
must not load torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from nmtbench.errors import InputError

if TYPE_CHECKING:
    from nmtbench.models.contract import Method

# name -> "module:class"
METHODS: dict[str, str] = {
    "transformer": "nmtbench.methods.transformer:Transformer",
    "rnn": "nmtbench.methods.rnn:RNN",
    "bert-init": "nmtbench.methods.bert_encoder:BertInit",
    "bert-frozen": "nmtbench.methods.bert_encoder:BertFrozen",
    "cmlm": "nmtbench.methods.cmlm:CMLM",
    "abnet": "nmtbench.methods.abnet:ABNet",
    "bert-fused": "nmtbench.methods.bert_fused:BertFused",
    "ctnmt": "nmtbench.methods.ctnmt:CTNMT",
    "deep-fusion": "nmtbench.methods.deep_fusion:DeepFusion",
    "bert-kd-teacher": "nmtbench.methods.bert_kd:CMLMTeacherMethod",
    "bert-kd": "nmtbench.methods.bert_kd:BertKD",
}


def get_method(name: str) -> type[Method]:
    """The class registered under `name`; an unknown name is a one-line InputError."""
    if name not in METHODS:
        raise InputError(f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    module, cls = METHODS[name].split(":")
    return getattr(import_module(module), cls)

"""Runtime fixes that let fairseq 0.12.2 (released for torch 1.12 and Python <= 3.10) run on
Python 3.11 and current torch. benchmarks/parity/run.py puts this directory on fairseq's
PYTHONPATH, so Python imports it at start-up; the harness never imports it.

Python 3.11 rejects any unhashable class-level default of a dataclass field, including another
dataclass's instance; 3.10 rejected only list, dict and set. fairseq's and hydra-core 1.0's configs
use dataclass instances as defaults, and fairseq reads those defaults back from
`__dataclass_fields__[name].default`, so turning them into `default_factory` would break it. We
restore the 3.10 rule for exactly that case: a dataclass-instance default is kept as a default.

fairseq's encoder layer also switches a loaded model (fairseq-generate) to PyTorch's fused
"BetterTransformer" kernel, whose newer signature it calls wrongly ("Mask Type should be
defined"); we keep such layers on their plain forward, the one training uses.

Python 3.12 removed the `typing.io` module, from which the ANTLR 4.8 runtime and hydra-core 1.0's
generated parser import `TextIO`, and the importers' `find_module`, which hydra-core 1.0's plugin
scan calls; we give both back.
"""

import dataclasses
import importlib.abc
import importlib.machinery
import sys
import types
import typing

_get_field = dataclasses._get_field


def _get_field_allowing_dataclass_defaults(cls, name, a_type, *args):
    attr = cls.__dict__.get(name, dataclasses.MISSING)
    declared = attr if isinstance(attr, dataclasses.Field) else None  # `x: T = field(default=...)`
    default = declared.default if declared else attr
    if not dataclasses.is_dataclass(default) or isinstance(default, type):
        return _get_field(cls, name, a_type, *args)
    if declared:  # let the 3.11 check see no default ...
        declared.default = dataclasses.MISSING
    else:
        delattr(cls, name)
    try:
        f = _get_field(cls, name, a_type, *args)
    finally:
        if declared:
            declared.default = default
        else:
            setattr(cls, name, default)
    f.default = default  # ... then give the field its default back, as 3.10 did
    return f


dataclasses._get_field = _get_field_allowing_dataclass_defaults


class _PlainEncoderLayers(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Once fairseq.modules.transformer_layer is imported, a loaded encoder layer stays unfused."""

    name = "fairseq.modules.transformer_layer"

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        self.loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        self.loader.exec_module(module)
        layer = module.TransformerEncoderLayerBase
        load = layer._load_from_state_dict

        def load_unfused(self, *args, **kwargs):
            load(self, *args, **kwargs)
            self.load_to_BT = False  # the encoder and its layers both read this flag

        layer._load_from_state_dict = load_unfused


sys.meta_path.insert(0, _PlainEncoderLayers())


if "typing.io" not in sys.modules and not hasattr(typing, "io"):
    typing_io = types.ModuleType("typing.io")
    typing_io.IO, typing_io.TextIO, typing_io.BinaryIO = typing.IO, typing.TextIO, typing.BinaryIO
    sys.modules["typing.io"] = typing.io = typing_io

if not hasattr(importlib.machinery.FileFinder, "find_module"):
    def _find_module(self, fullname, path=None):
        spec = self.find_spec(fullname)
        return None if spec is None else spec.loader

    importlib.machinery.FileFinder.find_module = _find_module

"""The files one training run reads, as the `train` rule passes them (and config.json records
them): its corpora, vocabularies, pre-trained checkpoints and other runs' outputs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from nmtbench.errors import InputError


@dataclass(frozen=True)
class RunPaths:
    train_src: str
    train_tgt: str
    valid_src: str
    valid_tgt: str
    src_tokenizer: str
    tgt_tokenizer: str
    pretrained: dict[str, str] = field(default_factory=dict)  # checkpoint role -> directory
    inputs: dict[str, str] = field(default_factory=dict)  # run input name -> its file

    @classmethod
    def from_record(cls, record: Any, where: str) -> RunPaths:
        """The paths a run's config.json recorded; a missing or malformed one is one line."""
        if not isinstance(record, Mapping):
            raise InputError(f"{where}: key 'paths' must be an object")
        values = {}
        for f in fields(cls):
            value = record.get(f.name, {} if f.name in ("pretrained", "inputs") else None)
            nested = f.name in ("pretrained", "inputs")
            if (not nested and not isinstance(value, str)) or (nested and not (
                    isinstance(value, Mapping)
                    and all(isinstance(v, str) for v in value.values()))):
                raise InputError(f"{where}: key 'paths.{f.name}' must be "
                                 f"{'an object of paths' if nested else 'a path'}")
            values[f.name] = dict(value) if nested else value
        return cls(**values)

    def as_record(self) -> dict[str, Any]:
        """As config.json records them (and `provenance.input_digests` names them)."""
        return asdict(self)

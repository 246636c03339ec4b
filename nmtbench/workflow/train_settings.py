"""The trainer's settings and learning-rate schedule, without torch: planning the workflow reads
their names and checks configs against them, and must not load torch to do so."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from nmtbench.workflow.schema import schema_dataclass


@schema_dataclass("trainer")
class TrainConfig:
    """Trainer settings; an experiment's config may override any of them. The fields, their
    defaults and meanings are config/schema.yaml's `$defs.trainer`."""

    def __post_init__(self) -> None:
        self.adam_betas = tuple(self.adam_betas)

    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in cfg.items() if k in known})


STOPPING = ("max_epochs", "max_updates", "patience", "divergence_factor")


def resumable(cfg: dict[str, Any]) -> dict[str, Any]:
    """The settings a checkpoint must share with the run that loads it (resuming it, or
    decoding with it): all but when to stop, so that raising max_epochs and running again
    trains on from where the run ended."""
    return {k: v for k, v in cfg.items() if k not in STOPPING}


def inverse_sqrt_lr(step: int, cfg: TrainConfig) -> float:
    """The rate after `step` updates: linear warm-up from warmup_init_lr to lr, then
    lr * sqrt(warmup / step) (fairseq's inverse_sqrt). As in fairseq, update k is made with the
    rate after k - 1 updates, so the first one uses warmup_init_lr."""
    if step < cfg.warmup_updates:
        return cfg.warmup_init_lr + (cfg.lr - cfg.warmup_init_lr) * step / cfg.warmup_updates
    return cfg.lr * math.sqrt(cfg.warmup_updates / max(step, 1))


def learning_rate(step: int, cfg: TrainConfig, total: int) -> float:
    """The rate after `step` of `total` updates under `cfg.lr_schedule`: the same warm-up,
    then inverse square root decay, or linear decay to 0 at `total`."""
    if cfg.lr_schedule == "linear" and step >= cfg.warmup_updates:
        return cfg.lr * max(0.0, (total - step) / max(total - cfg.warmup_updates, 1))
    return inverse_sqrt_lr(step, cfg)

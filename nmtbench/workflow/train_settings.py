"""The trainer's settings and learning-rate schedule, without torch: planning the workflow reads
their names and checks configs against them, and must not load torch to do so."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any


@dataclass
class TrainConfig:
    """Trainer settings; an experiment's config may override any of them."""

    seed: int = 1
    max_tokens: int = 4096  # padded tokens per batch (source or target, whichever is longer)
    max_sentences: int = 0  # and at most this many pairs (fairseq --batch-size); 0: no limit
    # a full batch is cut back to a multiple of this many sentences (fairseq's
    # --required-batch-size-multiple; 1 fills batches greedily up to max_tokens)
    batch_size_multiple: int = 8
    update_freq: int = 1  # batches each process accumulates per update (fairseq --update-freq)
    lr: float = 5e-4
    warmup_updates: int = 4000
    warmup_init_lr: float = 1e-7
    # after the warm-up: inverse_sqrt (fairseq's, every NMT paper here) or linear (down to 0
    # at the last update: BERT fine-tuning's triangle, Devlin et al. 2019)
    lr_schedule: str = "inverse_sqrt"
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-8
    weight_decay: float = 0.0
    clip_norm: float = 0.0  # 0 disables clipping (fairseq's default)
    # stop when an update's loss is over this many times its running level (an exponential
    # moving average of the losses before it, over about 100 updates); 0 disables. Under label
    # smoothing the per-token loss stays near 1 or above, so 10x only ever means divergence;
    # without it, a memorised corpus's loss may near 0: raise it, or 0, if that stops a run
    divergence_factor: float = 10.0
    max_epochs: int = 50
    max_updates: int = 0  # 0: no limit
    patience: int = 0  # stop after this many epochs without a better valid loss; 0: never
    save_interval_updates: int = 200  # how often `last.pt` is refreshed inside an epoch
    keep_last_epochs: int = 10  # per-epoch checkpoints kept for averaging
    max_positions: int = 256
    train_pairs: int | None = None  # use only the first N training pairs (data-size studies)
    bt_sentences: int = 0  # back-translated pairs added to the training data (inputs bt_src/tgt)
    log_interval: int = 50
    valid_bleu: bool = False  # greedy-decode the valid set after every epoch (BLEU curves)
    # warm start: {experiment: NAME, checkpoint: best|last}, that experiment's run on the same
    # dataset and seed; the plan passes its checkpoint file as the run input `init_from`
    init_from: dict | None = None

    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in cfg.items() if k in known}
        if "adam_betas" in values:
            values["adam_betas"] = tuple(values["adam_betas"])
        return cls(**values)


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

"""The trainer's settings and learning-rate schedule, without torch: planning the workflow reads
their names and checks configs against them, and must not load torch to do so."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from nmtbench import layout
from nmtbench.errors import InputError
from nmtbench.records import COUNT, read_result
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


def refusal(cfg: dict[str, Any]) -> tuple[str, str] | None:
    """The setting that makes `cfg` no run anyone means, and why; or None. A batch of
    `max_tokens` must hold a pair of up to `max_positions` tokens, which the run keeps (it
    would be a batch of its own, over the budget meant to bound memory); the warm-up rises to
    `lr` from `warmup_init_lr` (from above it would start at a rate higher than the peak)."""
    tc = TrainConfig.from_dict(cfg)
    if tc.max_tokens < tc.max_positions:
        return "max_tokens", (f"max_tokens {tc.max_tokens} is less than max_positions "
                              f"{tc.max_positions}: a batch could not hold the longest pair "
                              "the run keeps")
    if tc.warmup_init_lr > tc.lr:
        return "warmup_init_lr", (f"warmup_init_lr {tc.warmup_init_lr} is above lr {tc.lr}: "
                                  "the warm-up would fall to the peak rate, not rise to it")
    return None


STOPPING = ("max_epochs", "max_updates", "patience", "divergence_factor")
# how often a run logs and saves last.pt: neither changes what it learns
BOOKKEEPING = ("log_interval", "save_interval_updates")


def resumable(cfg: dict[str, Any]) -> dict[str, Any]:
    """The settings a checkpoint must share with the run that loads it (resuming it, or
    decoding with it): all but when to stop (`resume_refusal` judges those) and how often
    it logs and saves; how often it saves does count where update checkpoints are kept (the
    checkpoints an average reads)."""
    free = BOOKKEEPING if not cfg.get("keep_interval_updates") else ("log_interval",)
    return {k: v for k, v in cfg.items() if k not in (*STOPPING, *free)}


def trained_out(tc: TrainConfig, epoch: int, step: int) -> bool:
    """Whether a run in `epoch` (or about to start it) with `step` updates made has had all
    that `max_epochs` and `max_updates` allow: checked before training (a finished run resumes
    to no updates), after every update and at each epoch's end. Patience is judged at an
    epoch's end alone, from the validation loss."""
    return epoch > tc.max_epochs or bool(tc.max_updates and step >= tc.max_updates)


def stopped(tc: TrainConfig, epoch: int, step: int, without_improvement: int) -> bool:
    """Whether training is over at an epoch's end (or about to start `epoch`, resumed): trained
    out, or `patience` validations without improvement (a run that stopped so, resumed,
    stays stopped, as it would have uninterrupted)."""
    return trained_out(tc, epoch, step) or bool(tc.patience and
                                                  without_improvement >= tc.patience)


def _off_is_never(value: float) -> float:
    return value if value else math.inf  # patience and divergence_factor: 0 never stops


def resume_refusal(saved: dict[str, Any], state: dict[str, Any], cfg: dict[str, Any],
                   total_updates: int, world_size: int = 1) -> str | None:
    """Why resuming a checkpoint (`state`, trained with `saved`) under `cfg` by `world_size`
    processes would not end as an uninterrupted run of `cfg` does, or None: its schedule read
    the run's planned length and `cfg` plans another (`Progress.read_total`; a linear decay
    always does), it is past where `cfg` stops, it was cut inside an epoch by `max_updates`
    where `cfg` trains on (an uninterrupted run would not have validated there), `cfg` stops
    on a patience or divergence it might have met earlier, or it would train on with another
    number of processes (an update takes world size x update_freq batches).
    Raising `max_epochs` of an inverse-square-root run trains on from where it ended."""
    old, new = TrainConfig.from_dict(saved), TrainConfig.from_dict(cfg)
    planned = state.get("total_updates")  # None: saved before it was recorded
    same_length = (planned == total_updates if planned is not None else
                   (old.max_epochs, old.max_updates) == (new.max_epochs, new.max_updates))
    if not same_length and state.get("read_total", True):
        return (f"its schedule ran over {planned or 'another number of'} updates (a linear "
                f"decay, or its method's schedule), this config plans {total_updates}")
    step, epoch, offset = state["step"], state["epoch"], state["offset"]
    if ((new.max_updates and step > new.max_updates) or epoch - 1 > new.max_epochs
            or (epoch > new.max_epochs and offset > 0)):
        return (f"it has trained {step} updates into epoch {epoch}, past where this config "
                "stops")
    if state.get("cut") and new.max_updates != step:
        return (f"max_updates ended it inside epoch {epoch - 1}, after {step} updates, and "
                "validated there; this config trains on, through the rest of that epoch")
    for key in ("patience", "divergence_factor"):
        if _off_is_never(getattr(new, key)) < _off_is_never(getattr(old, key)):
            return (f"this config's {key} {getattr(new, key)} may have stopped it earlier "
                    f"than its {getattr(old, key)} did")
    trained_by = state.get("world_size", 1)
    if trained_by != world_size and not stopped(new, epoch, step,
                                                state.get("epochs_without_improvement", 0)):
        return (f"it was trained by {trained_by} processes, this training has {world_size}, "
                f"and each update would take other batches from here on (resume it with "
                f"{trained_by} processes: resources.train.gpu)")
    return None


def kept_checkpoints(cfg: dict[str, Any], epochs: int, steps: int) -> dict[str, list[str]]:
    """The numbered checkpoints, by kind ("epochs", "updates") and oldest first, that a run of
    `cfg` keeps once it has trained `epochs` epochs and `steps` updates: those of its last
    `keep_last_epochs` epochs and, with `keep_interval_updates`, the last that many of every
    `save_interval_updates` updates (nmtbench.training.run_files saves and prunes them so).
    Averaging reads them; one gone is made again by no job but training the run again."""
    tc = TrainConfig.from_dict(cfg)
    interval = list(range(tc.save_interval_updates, steps + 1, tc.save_interval_updates))
    return {"epochs": [layout.EPOCH_CHECKPOINT_NAME.format(epoch=epoch) for epoch in
                       range(max(1, epochs - tc.keep_last_epochs + 1), epochs + 1)],
            "updates": [layout.UPDATE_CHECKPOINT_NAME.format(update=update) for update in
                        interval[-tc.keep_interval_updates:] if tc.keep_interval_updates]}


def kept_by_run(run_dir: str | Path) -> dict[str, list[str]]:
    """`kept_checkpoints` of the finished run in `run_dir`, by its records: the settings its
    config.json holds, the epochs and updates its train_summary.json counts. None of either
    kind while either record is not there (a run not finished, or a config.json the workflow
    makes again); a record that cannot be read is an error naming it."""
    run_dir = Path(run_dir)
    summary_path = run_dir / layout.TRAIN_SUMMARY_NAME
    summary = read_result(summary_path, numbers={"epochs": COUNT, "steps": COUNT})
    run = read_result(run_dir / layout.RUN_CONFIG_NAME, ("experiment",))
    if summary is None or run is None:
        return {"epochs": [], "updates": []}
    if not isinstance(run["experiment"], dict):
        raise InputError(f"{run_dir / layout.RUN_CONFIG_NAME}: key 'experiment' must be an "
                         "object of settings")
    return kept_checkpoints(run["experiment"], summary["epochs"], summary["steps"])


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

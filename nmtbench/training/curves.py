"""Training curves as TensorBoard event files, and as a W&B run where the config names a
project.

Every training and pre-training writes them into `tensorboard/` of its run directory (the main
process alone), from the records its log holds: per logged update the training loss and its
parts (`train/...`), the rate of each parameter group (`lr/<group>`), the gradient norm and
the tokens per second since the last logged update; per validation the valid loss and the
greedy valid BLEU where it is computed (`valid/...`). `tensorboard --logdir results/runs`
shows every run. A resumed run's writer starts with TensorBoard's purge mark at the first
update it makes again, so a reader drops what the killed process wrote after its checkpoint
and no curve is drawn twice. A fresh start removes an earlier training's event files with its
log (`RunFiles.remove_earlier_training`). Nothing reads them back: the report draws its
curves from `train_log.jsonl`, and no digest covers them (`provenance.path_digest` leaves
them out of a pre-trained checkpoint's).

With `wandb_project` (the config's `logging.wandb_project`, which the workflow hands its jobs
as the environment variable NMTBENCH_WANDB_PROJECT) and `wandb` importable, the same
scalars go to a W&B run in `wandb/` of the run directory, online or offline as `WANDB_MODE`
says; a resumed training is a run of its own there. W&B is never required: without it, one
warning line and training goes on.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from nmtbench import layout
from nmtbench.records import is_number

log = logging.getLogger(__name__)

# record keys -> tags; the other numbers of a `train` record are loss parts (train/<key>)
TAGS = {"loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/lr",
        "tokens_per_second": "train/tokens_per_second", "valid_loss": "valid/loss",
        "best_valid_loss": "valid/best_loss", "valid_bleu": "valid/bleu"}
# the train and pretrain commands' default W&B project (--wandb-project): the workflow sets
# it from the config's logging.wandb_project (rules/common.smk), so their commands stay the same
WANDB_PROJECT_ENV = "NMTBENCH_WANDB_PROJECT"
LR_PREFIX = "lr_"  # a parameter group's rate: lr_<group name> -> lr/<group name>
PLOTTED_EVENTS = ("train", "valid", "heldout")  # the others (resume, warm_start) are text


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The tagged numbers of one log record (its `event` says which: train, valid, or the
    held-out scores of a pre-training, `heldout/...`)."""
    event = record.get("event")
    if event not in PLOTTED_EVENTS:
        return {}
    found = {}
    for key, value in record.items():
        if key in ("step", "epoch", "seconds") or not is_number(value):
            continue
        if key in TAGS:
            found[TAGS[key]] = float(value)
        elif key.startswith(LR_PREFIX):
            found["lr/" + key[len(LR_PREFIX):].replace(" ", "_")] = float(value)
        elif event in ("train", "heldout"):
            found[f"{event}/{key}"] = float(value)
    return found


def remove(run_dir: Path) -> bool:
    """Remove an earlier training's event files from `run_dir`; whether there were any."""
    events = run_dir / layout.TENSORBOARD_NAME
    if not events.is_dir():
        return False
    shutil.rmtree(events)
    return True


class Curves:
    """The curves of the training in `run_dir`; `enabled` for the main process alone (the
    others count time and write nothing). `wandb_project`: also to a W&B run of that project,
    `config` its settings, `name` its name (else `run_dir`)."""

    def __init__(self, run_dir: Path, enabled: bool, wandb_project: str | None = None,
                 config: dict[str, Any] | None = None, name: str | None = None):
        self.run_dir, self.enabled = Path(run_dir), enabled
        self.wandb_project, self.config = wandb_project, config
        self.name = name or str(run_dir)
        self.purge_step: int | None = None  # a resumed run's first update
        self._writer: Any = None  # opened at the first scalar: a run with none writes none
        self._wandb: Any = None
        self._tokens, self._seconds = 0.0, 0.0  # since the last train record

    def resume_at(self, step: int) -> None:
        """The training goes on after update `step`: what was written of later ones is
        dropped by readers (TensorBoard's purge of steps from `step` + 1 on)."""
        self.purge_step = step + 1

    def timed(self, tokens: float, since: float) -> float:
        """The seconds since `since` (`time.perf_counter`), one update's, counted with its
        `tokens` towards the next train record's tokens per second."""
        seconds = time.perf_counter() - since
        self._tokens += tokens
        self._seconds += seconds
        return seconds

    def write(self, step: int, record: dict[str, Any]) -> None:
        """The scalars of a log record made after `step` updates."""
        if not self.enabled:
            return
        if record.get("event") == "train" and self._seconds > 0:
            record = {**record, "tokens_per_second": self._tokens / self._seconds}
            self._tokens, self._seconds = 0.0, 0.0
        values = scalars(record)
        if not values:
            return
        writer = self._open()
        for tag, value in values.items():
            writer.add_scalar(tag, value, step)
        writer.flush()  # a killed run keeps its curves up to its last record
        if self._wandb is not None:
            self._wandb.log(values, step=step)

    def _open(self) -> Any:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(self.run_dir / layout.TENSORBOARD_NAME),
                                         purge_step=self.purge_step)
            self._wandb = self._wandb_run()
        return self._writer

    def _wandb_run(self) -> Any:
        if not self.wandb_project:
            return None
        try:
            import wandb
        except ImportError:
            log.warning("logging.wandb_project is %r, but wandb is not installed (pip install "
                        "wandb): the curves go to %s alone", self.wandb_project,
                        self.run_dir / layout.TENSORBOARD_NAME)
            return None
        return wandb.init(project=self.wandb_project, dir=str(self.run_dir),
                          name=self.name, config=self.config, reinit="create_new")

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None

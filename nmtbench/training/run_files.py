"""A run directory as the trainer keeps it: one training process at a time (a lock held for the
whole run), its log (`train_log.jsonl`) and the same records as curves (`tensorboard/`,
nmtbench.training.curves), its checkpoints, and what a kill or an earlier training left there."""

from __future__ import annotations

import fcntl
import json
import logging
import time
from pathlib import Path
from typing import IO, Any

import torch

from nmtbench import layout, provenance
from nmtbench.errors import InputError, retrain
from nmtbench.fileio import read_jsonl, refuse_foreign, write_lines
from nmtbench.parts import checkpoints
from nmtbench.training import curves
from nmtbench.training.curves import Curves
from nmtbench.training.distributed import World
from nmtbench.workflow.train_settings import resumable, resume_refusal

log = logging.getLogger(__name__)

LOCK_POLL_SECONDS = 1.0


def hold(lock: IO[str] | None, world: World, device: torch.device, run_dir: Path) -> None:
    """Take the run directory's lock (rank 0, `lock`; the others wait with it), waiting while
    another process trains there. Giving up would fail this job, and Snakemake deletes a failed
    job's output: the train_summary.json the other process writes. Once it is done, this one
    resumes its last.pt (0 updates if it finished) and writes the same summary."""
    waiting = False
    while True:
        held = 0.0
        if lock is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = 1.0
            except BlockingIOError:
                pass
        if world.all_reduce_sum([held], device)[0]:
            return
        if not waiting and world.is_main:
            log.warning("%s is being trained by another process: waiting for it to end", run_dir)
        waiting = True
        time.sleep(LOCK_POLL_SECONDS)


def weights_of(state: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint of the weights alone (best, epochN, updateN) holds of a training's
    `state`: not the optimizer, nor the wall-clock seconds, so that a run trained again alike
    saves the same bytes and the runs that warm-start from it or learn from it (their input
    digests) keep theirs."""
    return {k: v for k, v in state.items() if k not in ("optimizer", "seconds")}


class RunFiles:
    """The files of one run directory the trainer writes (only the main process writes); its
    curves also go to a W&B run of `wandb_project`, with the run's `config`, where it names
    one."""

    def __init__(self, run_dir: Path, is_main: bool, wandb_project: str | None = None,
                 config: dict[str, Any] | None = None):
        refuse_foreign(run_dir, layout.run_entries(), "run directory")  # a checkpoint's, say
        self.run_dir, self.is_main = run_dir, is_main
        self.curves = Curves(run_dir, is_main, wandb_project, config)
        self.ckpt_dir = run_dir / layout.CHECKPOINTS_NAME
        self.log_path = run_dir / layout.TRAIN_LOG_NAME
        self.config_path = run_dir / layout.RUN_CONFIG_NAME
        self.summary_path = run_dir / layout.TRAIN_SUMMARY_NAME
        self.last = self.checkpoint("last")  # what a restarted run resumes from

    def checkpoint(self, name: str) -> Path:
        """A checkpoint's path: best, last."""
        return self.ckpt_dir / layout.CHECKPOINT_NAME.format(checkpoint=name)

    def log(self, step: int, epoch: int, record: dict[str, Any]) -> None:
        if self.is_main:
            with self.log_path.open("a") as f:
                f.write(json.dumps({"step": step, "epoch": epoch, **record}) + "\n")
        self.curves.write(step, record)

    def truncate_log(self, step: int) -> None:
        """Drop log lines of steps after the checkpoint: they are about to be replayed (and a
        line a kill cut short); readers of the curves drop them too."""
        self.curves.resume_at(step)
        if not self.is_main or not self.log_path.exists():
            return
        kept = [record for record in read_jsonl(self.log_path) if record.get("step", 0) <= step]
        write_lines(self.log_path, [json.dumps(record) for record in kept])

    def load_last(self, cfg: dict[str, Any], inputs_digest: dict[str, str],
                  input_paths: dict[str, Any], world_size: int,
                  total_updates: int) -> dict[str, Any]:
        """last.pt, verified, of this config and these inputs (`input_paths`, digested as
        `inputs_digest`), and resumable to what an
        uninterrupted run of `cfg` (`total_updates` long) gives. Damaged, there is nothing to
        fall back on: an epoch checkpoint holds no optimizer state, and resuming one with a
        fresh optimizer would make another run than the config describes."""
        last = self.last
        try:
            state = checkpoints.load(last)
        except InputError as err:
            raise InputError(f"{err}; the epoch checkpoints hold no optimizer state to resume "
                             f"from: {retrain(self.run_dir)}") from None
        saved = json.loads(state["config"])
        if resumable(saved) != resumable(cfg):
            raise InputError(f"{last} was trained with another config; {retrain(self.run_dir)}")
        if why := resume_refusal(saved, state, cfg, total_updates, world_size):
            raise InputError(f"{last} cannot resume as this config's run: {why}; "
                             f"{retrain(self.run_dir)}")
        if stale := provenance.changed(state["inputs"], inputs_digest, input_paths):
            raise InputError(f"{last} was trained on other inputs ({', '.join(stale)} changed); "
                             f"{retrain(self.run_dir)}")
        return state

    def save_epoch(self, epoch: int, state: dict[str, Any], improved: bool,
                   keep_last: int) -> None:
        """The checkpoints of an epoch's end: last.pt resumes; epochN.pt (the last `keep_last`
        kept) and best.pt hold the weights alone (read for decoding and averaging). Weights
        gone non-finite raise FloatingPointError (checkpoints.save refuses them)."""
        weights = weights_of(state)
        epoch_file = layout.EPOCH_CHECKPOINT_NAME.format(epoch=epoch)
        checkpoints.save(self.ckpt_dir / epoch_file, weights)
        for old in checkpoints.numbered_checkpoints(self.ckpt_dir)[:-keep_last]:
            checkpoints.remove(old)
        if improved:
            checkpoints.save(self.checkpoint("best"), weights)
        checkpoints.save(self.last, state)

    def save_interval(self, step: int, state: dict[str, Any], keep_last: int) -> None:
        """The checkpoints of every save_interval_updates updates: last.pt resumes; with
        `keep_last` > 0, updateN.pt holds the weights alone (the last `keep_last` kept, for
        averaging over updates: a run of few, long epochs has too few epoch checkpoints)."""
        if keep_last:
            weights = weights_of(state)
            update_file = layout.UPDATE_CHECKPOINT_NAME.format(update=step)
            checkpoints.save(self.ckpt_dir / update_file, weights)
            for old in checkpoints.numbered_checkpoints(self.ckpt_dir, "updates")[:-keep_last]:
                checkpoints.remove(old)
        checkpoints.save(self.last, state)

    def remove_earlier_training(self) -> None:
        """What an earlier training left here without a last.pt to resume (its log and event
        files, best and epoch checkpoints: e.g. last.pt was deleted) is not this training's and
        would mix into its curves and checkpoint averages."""
        if not self.is_main:
            return
        saved = layout.CHECKPOINT_NAME.format(checkpoint="*")
        earlier = [p for p in (self.log_path, *self.ckpt_dir.glob(saved),
                               *self.ckpt_dir.glob(saved + checkpoints.CHECKSUM_SUFFIX))
                   if p.exists()]
        for path in earlier:
            path.unlink()
        if curves.remove(self.run_dir):
            earlier.append(self.run_dir / layout.TENSORBOARD_NAME)
        if earlier:
            log.warning("%s: removed %d files of an earlier training (no last.pt to resume)",
                        self.run_dir, len(earlier))

    def close(self) -> None:
        """Flush and close the curves' writers (the end of a training, or its failure)."""
        self.curves.close()

    def remove_unfinished_saves(self) -> None:
        """The temporary files of saves a kill interrupted, each as large as a checkpoint
        (only the lock's holder writes checkpoints)."""
        for path in self.ckpt_dir.glob(".*.tmp"):
            path.unlink()
            log.warning("%s: removed an unfinished checkpoint save", path)

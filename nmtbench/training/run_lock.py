"""One training process per run directory: a lock held for the whole run, and the leftovers of
saves a kill interrupted."""

from __future__ import annotations

import fcntl
import logging
import time
from pathlib import Path
from typing import IO

import torch

from nmtbench.training.distributed import World

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


def remove_unfinished_saves(ckpt_dir: Path) -> None:
    """The temporary files of saves a kill interrupted, each as large as a checkpoint (only
    the lock's holder writes checkpoints)."""
    for path in ckpt_dir.glob(".*.tmp"):
        path.unlink()
        log.warning("%s: removed an unfinished checkpoint save", path)

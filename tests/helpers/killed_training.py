"""A training killed at a chosen update, as `kill -9` would leave it (for resume tests)."""

from __future__ import annotations

import pytest


class Killed(Exception):
    """Stands for SIGKILL: the process state is lost, only what is on disk survives."""


def train_until_killed(trainer, kill_at: int) -> None:
    """Run `trainer` until it is about to make update `kill_at + 1`, then stop it dead."""
    original_step = trainer._train_step

    def step_then_maybe_die(indices):
        if trainer.step == kill_at:
            raise Killed
        return original_step(indices)

    trainer._train_step = step_then_maybe_die
    with pytest.raises(Killed):
        trainer.run()

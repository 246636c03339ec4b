"""Data-parallel training across processes: the process group `torchrun` sets up.

`torchrun --nproc-per-node N -m nmtbench train ...` starts N copies of the trainer with RANK,
LOCAL_RANK and WORLD_SIZE in their environment; a plain `python -m nmtbench train` is a world of
one, for which every function here is a no-op, so the single-process path stays exactly as it was.
GPUs talk over NCCL, CPU processes over gloo (how the tests run two processes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    rank: int = 0
    local_rank: int = 0
    size: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes checkpoints, logs and summaries."""
        return self.rank == 0

    def device(self, device: torch.device) -> torch.device:
        """Each process of a multi-GPU job owns the GPU of its local rank."""
        if self.size > 1 and device.type == "cuda":
            return torch.device("cuda", self.local_rank)
        return device

    def all_reduce_sum(self, values: list[float], device: torch.device) -> list[float]:
        """Sum a few floats over every process (identity in a world of one)."""
        if self.size == 1:
            return values
        return self.all_reduce_tensor(torch.tensor(values, dtype=torch.float64,
                                                   device=device)).tolist()

    def all_reduce_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over every process, in place (itself in a world of one)."""
        if self.size > 1:
            dist.all_reduce(tensor)
        return tensor


def join(device: torch.device) -> World:
    """The world this process belongs to; joins the process group when torchrun started it."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return World()
    world = World(int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), size)
    if not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(world.local_rank)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return world


def leave(world: World, finished: bool) -> None:
    """Tear the process group down while the interpreter is fully alive. A process that finished
    first waits for the others at a barrier, so no peer is still inside a collective when the
    connections close; one that failed skips it (the others would never reach it, and torchrun
    stops them). The caller must have dropped its DistributedDataParallel wrapper: its reducer
    keeps the gloo group alive past this call, to be destroyed during interpreter shutdown, where
    gloo's worker threads abort the process ("terminate called without an active exception")."""
    if world.size > 1 and dist.is_initialized():
        if finished:
            dist.barrier()
        dist.destroy_process_group()


class LossOf(torch.nn.Module):
    """Makes a method's `loss` the module's forward, so DistributedDataParallel (which hooks
    `forward`) synchronises the gradients of every method without the method knowing."""

    def __init__(self, method: torch.nn.Module):
        super().__init__()
        self.method = method

    def forward(self, batch, progress):
        return self.method.loss(batch, progress)


def synced(model: torch.nn.Module, world: World, device: torch.device,
           seed: int) -> torch.nn.parallel.DistributedDataParallel | None:
    """The model wrapped for data-parallel training when there are several processes (each
    then draws its own dropout from seed + rank); None for one."""
    if world.size == 1:
        return None
    wrapped = torch.nn.parallel.DistributedDataParallel(
        LossOf(model), device_ids=[device.index] if device.type == "cuda" else None,
        find_unused_parameters=True)  # e.g. a fine-tuned BERT's unused pooler
    torch.manual_seed(seed + world.rank)
    return wrapped


def rng_state() -> dict[str, Any]:
    """The random generators a checkpoint keeps (this process's: rank 0 saves)."""
    return {"rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def restore_rng(state: dict[str, Any], world: World, seed: int, step: int) -> None:
    """The generators of a resumed run; other processes than rank 0 draw their own again."""
    torch.set_rng_state(state["rng"])
    if state["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    if world.size > 1:  # the checkpoint holds rank 0's generator only
        torch.manual_seed(seed + world.rank + 1_000_003 * step)

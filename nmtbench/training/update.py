"""One update of the shared training loop: the batches of an update, each weighted by its share
of the update's target tokens (fairseq's sample-size rule), across data-parallel processes; the
learning rate of each parameter group; clipping; and the divergence rules, which stop training
before a bad update is applied."""

from __future__ import annotations

import math
from collections import defaultdict
from contextlib import nullcontext
from typing import Any

import torch

from nmtbench.devices import autocast
from nmtbench.parts.batches import Bitext
from nmtbench.parts.contract import Model, ParamGroup, Progress
from nmtbench.training.distributed import World
from nmtbench.workflow.train_settings import TrainConfig, learning_rate

LOSS_EMA_DECAY = 0.99  # the running loss level the divergence rule compares with: ~100 updates


class Diverged(Exception):
    """The update would not be finite, or its loss jumped: what went wrong, in words."""


class Updater:
    """Applies updates to `model` with `optimizer` (over `groups`); `synced` is the
    DistributedDataParallel wrapper when there are several processes. Keeps the running level
    of the training loss (`loss_ema`, saved in checkpoints)."""

    def __init__(self, model: Model, synced: Any, groups: list[ParamGroup],
                 optimizer: torch.optim.Optimizer, world: World, device: torch.device,
                 tc: TrainConfig, total_updates: int):
        self.model, self.synced, self.groups, self.optimizer = model, synced, groups, optimizer
        self.world, self.device, self.tc, self.total_updates = world, device, tc, total_updates
        self.loss_ema: float | None = None
        # whether the run's schedules read its planned length (saved in checkpoints)
        self.read_total = tc.lr_schedule == "linear"

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the updater."""
        return {"loss_ema": self.loss_ema, "read_total": self.read_total}

    def restore(self, state: dict[str, Any]) -> None:
        """Back to a checkpoint's `state` (one older than `read_total` is taken to have read
        the run's length)."""
        self.loss_ema, self.read_total = state["loss_ema"], state.get("read_total", True)

    def _loss(self, batch, progress):
        return (self.model.loss(batch, progress) if self.synced is None
                else self.synced(batch, progress))

    def _no_sync(self, last: bool):
        """Gradients are exchanged once per update, on the last batch this process adds."""
        return self.synced.no_sync() if self.synced is not None and not last else nullcontext()

    def update(self, group: list[list[int]], data: Bitext, step: int) -> dict[str, float]:
        """Update `step` + 1 over `group` (world size x update_freq batches of `data`, fewer
        at an epoch's end); its record (the loss and its parts, target tokens, the schedule's
        rate `lr` and each group's `lr_<group>`, the gradient norm). Raises Diverged before
        applying a bad update."""
        self.model.train()
        lr = learning_rate(step, self.tc, self.total_updates)
        progress = Progress(step, self.total_updates)
        for spec, param_group in zip(self.groups, self.optimizer.param_groups, strict=True):
            param_group["lr"] = lr * spec.lr_scale(progress)
        sums = self._gradients(group, data, progress)
        self.read_total = self.read_total or progress.read_total
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        grad_norm = torch.nn.utils.clip_grad_norm_(
            params, self.tc.clip_norm if self.tc.clip_norm > 0 else math.inf)
        # the update's one wait for the GPU: its numbers come to the host together
        keys = sorted(sums)
        summed = self.world.all_reduce_tensor(torch.stack(
            [torch.as_tensor(sums[k], dtype=torch.float64, device=self.device) for k in keys]))
        # the gradients are already the same everywhere, and so is their norm
        values = torch.cat([summed, grad_norm.to(torch.float64).reshape(1)]).tolist()
        record, grad_norm = dict(zip(keys, values[:-1], strict=True)), values[-1]
        # every process sees the same loss and gradient norm: all stop, none waits for another
        if record.pop("nonfinite"):
            raise Diverged(f"loss is {record['loss']}")
        if not math.isfinite(grad_norm):
            raise Diverged(f"gradient norm is {grad_norm}")
        factor = self.tc.divergence_factor
        if factor and self.loss_ema is not None and record["loss"] > factor * self.loss_ema:
            raise Diverged(f"loss {record['loss']:.4g} is over {factor:g}x its running level "
                           f"{self.loss_ema:.4g} (divergence_factor)")
        self.optimizer.step()
        self.loss_ema = record["loss"] if self.loss_ema is None else (
            LOSS_EMA_DECAY * self.loss_ema + (1 - LOSS_EMA_DECAY) * record["loss"])
        return {**record, **{f"lr_{g.name}": p["lr"] for g, p in
                             zip(self.groups, self.optimizer.param_groups, strict=True)},
                "lr": lr, "grad_norm": grad_norm}

    def _gradients(self, group: list[list[int]], data: Bitext,
                   progress: Progress) -> dict[str, torch.Tensor]:
        """Backward over this process's share of the group; the loss parts summed over all
        processes (`nonfinite` counts non-finite losses), weighted by target tokens, on the
        device: this process's share."""
        tokens = sum(data.target_tokens(indices) for indices in group)
        share = [(indices, data.target_tokens(indices) / tokens)
                 for indices in group[self.world.rank::self.world.size]]
        # a process left without a batch still takes part in the exchange, with zero weight
        share = share or [(group[0], 0.0)]
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, Any] = defaultdict(float)
        for j, (indices, weight) in enumerate(share):
            batch = data.collate(indices).to(self.device)
            with self._no_sync(last=j == len(share) - 1):
                with autocast(self.device):
                    loss, losses = self._loss(batch, progress)
                # DDP averages over processes; the weights already sum to one over all of them
                (loss * (weight * self.world.size)).backward()
            parts = {**losses.per_token(), "loss": loss.detach().double()}
            for key, value in parts.items():  # in float64, as Python floats would add up
                sums[key] = sums[key] + value * weight
            sums["ntokens"] = sums["ntokens"] + losses.ntokens * (weight > 0)
            sums["nonfinite"] = sums["nonfinite"] + (~torch.isfinite(loss.detach())).double()
        return sums

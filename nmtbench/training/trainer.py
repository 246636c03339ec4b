"""The shared training loop: every method trains through here.

fairseq's recipe, kept small: token-based batches, Adam (0.9, 0.98) with an inverse-square-root
schedule after linear warm-up, gradient clipping, validation loss every epoch, `last`/`best`/
per-epoch checkpoints, bf16 autocast on CUDA. A restarted run resumes from `checkpoints/last.pt`
(model, optimizer, schedule, RNG, position inside the epoch), so on CPU a resumed run ends with
exactly the weights of an uninterrupted one.

Under `torchrun` the same loop is data-parallel (DistributedDataParallel): every update takes
`world size x update_freq` consecutive batches of the epoch's shuffled list, each process its
share, and each batch's gradient is weighted by its share of the update's target tokens, as
fairseq normalises by the update's sample size. One process with `update_freq: 2` and two
processes with `update_freq: 1` therefore make the same updates. Rank 0 alone writes.

Divergence stops training, with one line naming the last good checkpoint: a non-finite loss or
gradient norm (checked before the update, which is not made), or a loss over
`divergence_factor` times its running level (an exponential moving average of the losses
before it). Bad updates are not skipped: fairseq skips one only under fp16 loss scaling, where
an overflow means the scale was too high; in fp32 or bf16 (fp32's range, no scaler) it means
the run diverged, and skipping would quietly make it another run than its config describes.
Checkpoints are never saved with non-finite weights.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import time
from collections import defaultdict
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from nmtbench import provenance
from nmtbench.data.tokenization import load_tokenizer, vocab_of
from nmtbench.devices import autocast, resolve_device
from nmtbench.errors import InputError, retrain
from nmtbench.fileio import read_jsonl, write_json, write_lines
from nmtbench.methods import get_method
from nmtbench.models import checkpoints
from nmtbench.models.contract import Model, Progress, adamw
from nmtbench.training import distributed
from nmtbench.training.run_lock import hold, remove_unfinished_saves
from nmtbench.training.training_data import TrainingData
from nmtbench.training.validation import valid_bleu, validation_loss
from nmtbench.workflow import run_inputs
from nmtbench.workflow.train_settings import TrainConfig, learning_rate, resumable

log = logging.getLogger(__name__)

LOSS_EMA_DECAY = 0.99  # the running loss level the divergence rule compares with: ~100 updates

class Trainer:
    def __init__(self, run_dir: str | Path, cfg: dict[str, Any], paths: dict[str, str],
                 device: str = "auto"):
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.log_path = self.run_dir / "train_log.jsonl"
        self.cfg = cfg
        self.paths = paths
        # other runs' outputs it trains with (`--input NAME=PATH`), by kind
        self.method = get_method(cfg["method"])
        self.input_kinds = run_inputs.by_kind(paths.get("inputs", {}),
                                              self.method.warm_starts, cfg)
        self.tc = TrainConfig.from_dict(cfg)
        self.inputs_digest = provenance.input_digests(paths)  # a resume must read the same
        requested = resolve_device(device)
        self.world = distributed.join(requested)
        self.device = self.world.device(requested)
        self.src_tok = load_tokenizer(paths["src_tokenizer"])
        self.tgt_tok = load_tokenizer(paths["tgt_tokenizer"])
        torch.manual_seed(self.tc.seed)
        self.model: Model = self.method.build(cfg, vocab_of(self.src_tok),
                                              vocab_of(self.tgt_tok),
                                              paths.get("pretrained", {})).to(self.device)
        data = TrainingData(paths, self.src_tok, self.tgt_tok, self.tc, self.model)
        for kind, given in self.input_kinds:
            kind.load_data(data, given)
        self.train_data, self.valid_data = data.train, data.valid
        self.synced = None  # the DistributedDataParallel wrapper when there are several processes
        if self.world.size > 1:
            self.synced = torch.nn.parallel.DistributedDataParallel(
                distributed.LossOf(self.model),
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
                find_unused_parameters=True)  # e.g. a fine-tuned BERT's unused pooler
            torch.manual_seed(self.tc.seed + self.world.rank)  # each process its own dropout
        self.groups = self.model.param_groups()
        self.optimizer = adamw(self.groups, self.tc.weight_decay, lr=self.tc.lr,
                               betas=self.tc.adam_betas, eps=self.tc.adam_eps)
        self.per_update = self.world.size * self.tc.update_freq
        self.total_updates = self.tc.max_updates or self.tc.max_epochs * math.ceil(
            len(self._batches()) / self.per_update)
        self.step, self.epoch, self.offset = 0, 1, 0  # offset: batches done in current epoch
        self.best_valid = math.inf
        self.epochs_without_improvement = 0
        self.seconds = 0.0
        self.loss_ema: float | None = None  # running level of the training loss
        self.saved_step: int | None = None  # the update `last.pt` holds (None: none saved yet)

    # --- checkpoint state --------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {"model": self.model.checkpoint_state(), "optimizer": self.optimizer.state_dict(),
                "step": self.step, "epoch": self.epoch, "offset": self.offset,
                "world_size": self.world.size,
                "best_valid": self.best_valid, "seconds": self.seconds,
                "epochs_without_improvement": self.epochs_without_improvement,
                "loss_ema": self.loss_ema, "rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                "config": json.dumps(self.cfg, sort_keys=True), "inputs": self.inputs_digest}

    def _resume(self) -> None:
        state = self._load_last()
        if resumable(json.loads(state["config"])) != resumable(self.cfg):
            raise InputError(f"{self.ckpt_dir / 'last.pt'} was trained with another config; "
                             f"{retrain(self.run_dir)}")
        if stale := provenance.changed(state["inputs"], self.inputs_digest):
            raise InputError(f"{self.ckpt_dir / 'last.pt'} was trained on other inputs "
                             f"({', '.join(stale)} changed); {retrain(self.run_dir)}")
        if state.get("world_size", 1) != self.world.size:
            log.warning("%s was trained by %d processes, resumed by %d: the batch per update "
                        "changes", self.ckpt_dir / "last.pt", state.get("world_size", 1),
                        self.world.size)
        self.model.load_checkpoint_state(state["model"], str(self.ckpt_dir / "last.pt"))
        self.optimizer.load_state_dict(state["optimizer"])
        for key in ("step", "epoch", "offset", "best_valid", "seconds",
                    "epochs_without_improvement"):
            setattr(self, key, state[key])
        self.loss_ema = state["loss_ema"]
        self.saved_step = self.step
        torch.set_rng_state(state["rng"])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        if self.world.size > 1:  # the checkpoint holds rank 0's generator only
            torch.manual_seed(self.tc.seed + self.world.rank + 1_000_003 * self.step)
        self._truncate_log()
        self._log({"event": "resume", "message": f"resumed from step {self.step}"})
        log.info("resumed from step %d (epoch %d)", self.step, self.epoch)

    def _load_last(self) -> dict[str, Any]:
        """last.pt, verified. Damaged, there is nothing to fall back on: an epoch checkpoint
        holds no optimizer state, and resuming one with a fresh optimizer would make another
        run than the config describes."""
        last = self.ckpt_dir / "last.pt"
        try:
            return checkpoints.load(last)
        except InputError as err:
            raise InputError(f"{err}; the epoch checkpoints hold no optimizer state to resume "
                             f"from: {retrain(self.run_dir)}") from None

    def _truncate_log(self) -> None:
        """Drop log lines of steps after the checkpoint: they are about to be replayed (and a
        line a kill cut short)."""
        if not self.world.is_main or not self.log_path.exists():
            return
        kept = [record for record in read_jsonl(self.log_path)
                if record.get("step", 0) <= self.step]
        write_lines(self.log_path, [json.dumps(record) for record in kept])

    def _log(self, record: dict[str, Any]) -> None:
        if not self.world.is_main:
            return
        with self.log_path.open("a") as f:
            f.write(json.dumps({"step": self.step, "epoch": self.epoch, **record}) + "\n")

    # --- training ----------------------------------------------------------------------------
    def _loss(self, batch, progress):
        return (self.model.loss(batch, progress) if self.synced is None
                else self.synced(batch, progress))

    def _no_sync(self, last: bool):
        """Gradients are exchanged once per update, on the last batch this process adds."""
        return self.synced.no_sync() if self.synced is not None and not last else nullcontext()

    def _train_step(self, group: list[list[int]]) -> dict[str, float]:
        """One update over `group` (world size x update_freq batches, fewer at an epoch's end)."""
        self.model.train()
        lr = learning_rate(self.step, self.tc, self.total_updates)
        progress = Progress(self.step, self.total_updates)
        for spec, param_group in zip(self.groups, self.optimizer.param_groups, strict=True):
            param_group["lr"] = lr * spec.lr_scale(progress)
        tokens = sum(self.train_data.target_tokens(indices) for indices in group)
        share = [(indices, self.train_data.target_tokens(indices) / tokens)
                 for indices in group[self.world.rank::self.world.size]]
        # a process left without a batch still takes part in the exchange, with zero weight
        share = share or [(group[0], 0.0)]
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = defaultdict(float)
        for j, (indices, weight) in enumerate(share):
            batch = self.train_data.collate(indices).to(self.device)
            with self._no_sync(last=j == len(share) - 1):
                with autocast(self.device):
                    loss, losses = self._loss(batch, progress)
                # DDP averages over processes; the weights already sum to one over all of them
                (loss * (weight * self.world.size)).backward()
            parts = {**losses.per_token(), "loss": float(loss.detach())}
            for key, value in parts.items():
                sums[key] += value * weight
            sums["ntokens"] += losses.ntokens * (weight > 0)
            sums["nonfinite"] += float(not torch.isfinite(loss))
        keys = sorted(sums)
        record = dict(zip(keys, self.world.all_reduce_sum([sums[k] for k in keys], self.device),
                          strict=True))
        # every process sees the same loss and gradient norm: all stop, none waits for another
        if record.pop("nonfinite"):
            raise self._diverged(self.step + 1, f"loss is {record['loss']}")
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        grad_norm = torch.nn.utils.clip_grad_norm_(
            params, self.tc.clip_norm if self.tc.clip_norm > 0 else math.inf)
        if not math.isfinite(grad_norm):
            raise self._diverged(self.step + 1, f"gradient norm is {float(grad_norm)}")
        factor = self.tc.divergence_factor
        if factor and self.loss_ema is not None and record["loss"] > factor * self.loss_ema:
            raise self._diverged(self.step + 1, f"loss {record['loss']:.4g} is over {factor:g}x "
                                 f"its running level {self.loss_ema:.4g} (divergence_factor)")
        self.optimizer.step()
        self.step += 1
        self.loss_ema = record["loss"] if self.loss_ema is None else (
            LOSS_EMA_DECAY * self.loss_ema + (1 - LOSS_EMA_DECAY) * record["loss"])
        return {**record, **{f"lr_{g.name}": p["lr"] for g, p in
                             zip(self.groups, self.optimizer.param_groups, strict=True)
                             if len(self.groups) > 1},
                "lr": lr, "grad_norm": float(grad_norm)}

    def _diverged(self, step: int, what: str) -> FloatingPointError:
        """The one-line stop: what went wrong at which update, and what a rerun resumes."""
        where = (f"the last good checkpoint is {self.ckpt_dir / 'last.pt'} (step "
                 f"{self.saved_step})" if self.saved_step is not None
                 else "no checkpoint was saved before it: training again starts over")
        return FloatingPointError(f"training diverged at step {step}: {what}; {where}")

    def _save(self, name: str, state: dict[str, Any]) -> None:
        """Save a checkpoint of the current update (rank 0); weights gone non-finite stop
        training instead (checkpoints.save refuses them)."""
        try:
            checkpoints.save(self.ckpt_dir / name, state)
        except FloatingPointError as err:
            raise self._diverged(self.step, str(err)) from None

    def _end_epoch(self) -> bool:
        """Validate, save checkpoints; return True when training should stop."""
        valid = validation_loss(self.model, self.valid_data, self.tc, self.world, self.device)
        improved = valid < self.best_valid
        if improved:
            self.best_valid = valid
            self.epochs_without_improvement = 0
        else:
            self.epochs_without_improvement += 1
        record = {"valid_loss": valid, "best_valid_loss": self.best_valid}
        if self.tc.valid_bleu and self.world.is_main:
            record["valid_bleu"] = valid_bleu(self.model, self.src_tok, self.tgt_tok, self.paths)
        self._log({"event": "valid", **record, "seconds": round(self.seconds, 2)})
        finished_epoch = self.epoch
        self.epoch, self.offset = self.epoch + 1, 0
        if self.world.is_main:
            state = self._state()
            # only last.pt resumes; the others are read for their weights (decoding, averaging)
            weights = {k: v for k, v in state.items() if k != "optimizer"}
            self._save(f"epoch{finished_epoch}.pt", weights)
            for old in checkpoints.epoch_checkpoints(self.ckpt_dir)[: -self.tc.keep_last_epochs]:
                checkpoints.remove(old)
            if improved:
                self._save("best.pt", weights)
            self._save("last.pt", state)
        self.saved_step = self.step  # every process: each names it if training diverges
        return (finished_epoch >= self.tc.max_epochs
                or (self.tc.max_updates and self.step >= self.tc.max_updates)
                or (self.tc.patience and self.epochs_without_improvement >= self.tc.patience))

    def _batches(self, shuffle_seed: int | None = None) -> list[list[int]]:
        return self.train_data.batches(self.tc.max_tokens, shuffle_seed,
                                       self.tc.batch_size_multiple, self.tc.max_sentences)

    def _start_fresh(self) -> None:
        """Begin at step 0: what an earlier training left here (its log, best and epoch
        checkpoints: e.g. last.pt was deleted) is not this training's and would mix into its
        curves and checkpoint averages."""
        if self.world.is_main:
            earlier = [p for p in (self.log_path, *self.ckpt_dir.glob("*.pt"),
                                   *self.ckpt_dir.glob(f"*.pt{checkpoints.CHECKSUM_SUFFIX}"))
                       if p.exists()]
            for path in earlier:
                path.unlink()
            if earlier:
                log.warning("%s: removed %d files of an earlier training (no last.pt to resume)",
                            self.run_dir, len(earlier))
        for kind, given in self.input_kinds:
            kind.load_weights(self, given)

    def warm_start(self, name: str, path: str) -> None:
        """Initialise (part of) the model from another run's checkpoint (a fresh run only: a
        resumed one has its own weights), as the method's `warm_starts` say for `name`."""
        take, into = self.method.warm_starts[name]
        try:
            state = checkpoints.load(path)
        except InputError as err:  # the parent's checkpoint (runs/<parent>/seedN/checkpoints/)
            raise InputError(f"{name}: {err}; {retrain(Path(path).parent.parent)}") from None
        report = self.model.warm_start(state["model"], name, take, into)
        self._log({"event": "warm_start", "input": name, "from": path,
                   "missing": report.missing, "unexpected": report.unexpected})
        log.info("%s from %s: %d keys kept their initialisation, %d of its keys unused",
                 name, path, len(report.missing), len(report.unexpected))

    def run(self) -> dict[str, Any]:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        finished = False
        try:
            with ((self.run_dir / ".train.lock").open("w") if self.world.is_main
                  else nullcontext()) as lock:
                hold(lock, self.world, self.device, self.run_dir)
                if self.world.is_main:
                    remove_unfinished_saves(self.ckpt_dir)
                summary = self._run()
                finished = True
                return summary
        finally:
            self.synced = None  # its reducer holds the process group (see distributed.leave)
            gc.collect()
            distributed.leave(self.world, finished)

    def _run(self) -> dict[str, Any]:
        if (self.ckpt_dir / "last.pt").exists():
            self._resume()
        else:
            self._start_fresh()
        if self.world.is_main:  # only once the checkpoint is known to be this config's
            write_json(self.run_dir / "config.json", {"experiment": self.cfg,
                                                      "paths": self.paths,
                                                      "inputs": self.inputs_digest})
        done = self.epoch > self.tc.max_epochs or bool(
            self.tc.max_updates and self.step >= self.tc.max_updates)
        per_update = self.per_update
        with tqdm(total=self.total_updates, initial=self.step, desc=f"train {self.run_dir}",
                  unit="step",
                  mininterval=5, disable=None if self.world.is_main else True) as bar:
            while not done:
                batches = self._batches(self.tc.seed + self.epoch)
                for first in range(self.offset, len(batches), per_update):
                    group = batches[first:first + per_update]
                    start = time.perf_counter()
                    record = self._train_step(group)
                    self.offset += len(group)
                    self.seconds += time.perf_counter() - start
                    bar.update(1)
                    if self.step % self.tc.log_interval == 0:
                        self._log({"event": "train", **record})
                        bar.set_postfix(loss=f"{record['loss']:.3f}", epoch=self.epoch)
                    if self.step % self.tc.save_interval_updates == 0:
                        if self.world.is_main:
                            self._save("last.pt", self._state())
                        self.saved_step = self.step
                    if self.tc.max_updates and self.step >= self.tc.max_updates:
                        break
                done = self._end_epoch()
        summary = {"steps": self.step, "epochs": self.epoch - 1, "seconds": round(self.seconds, 2),
                   "best_valid_loss": self.best_valid, "device": self.device.type,
                   "params": self.model.num_params(), "train_pairs": len(self.train_data),
                   "processes": self.world.size, "inputs": self.inputs_digest}
        if self.world.is_main:
            write_json(self.run_dir / "train_summary.json", summary)
        return summary

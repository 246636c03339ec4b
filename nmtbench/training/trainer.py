"""The shared training loop: every method trains through here.

fairseq's recipe, kept small: token-based batches, Adam (0.9, 0.98) with an inverse-square-root
schedule after linear warm-up, gradient clipping, validation loss every epoch, `last`/`best`/
per-epoch checkpoints, bf16 autocast on CUDA; every log record also drawn as TensorBoard (and
W&B) curves (nmtbench.training.curves). A restarted run resumes from `checkpoints/last.pt`
(model, optimizer, schedule, RNG, position inside the epoch), so on CPU a resumed run ends with
exactly the weights of an uninterrupted one; a checkpoint that an uninterrupted run of the
current config would not pass through (trained further, or on a schedule over another length)
is refused (`resume_refusal`).

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
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from nmtbench import layout, provenance
from nmtbench.data.tokenization import load_tokenizer, vocab_of
from nmtbench.devices import resolve_device
from nmtbench.errors import InputError, retrain
from nmtbench.fileio import write_json
from nmtbench.methods import get_method
from nmtbench.parts import checkpoints
from nmtbench.parts.contract import Model, WarmStart, adamw
from nmtbench.records import read_record
from nmtbench.run_paths import RunPaths
from nmtbench.training import distributed
from nmtbench.training.run_files import RunFiles, hold
from nmtbench.training.training_data import TrainingData
from nmtbench.training.update import Diverged, Updater
from nmtbench.training.validation import valid_bleu, validation_loss
from nmtbench.workflow import run_inputs
from nmtbench.workflow.train_settings import TrainConfig, stopped, trained_out

log = logging.getLogger(__name__)


def warm_start(model: Model, name: str, path: str, take_into: tuple[str, str],
               *tokenizers: Any) -> WarmStart:
    """Initialise (part of) `model` from another run's checkpoint `path` (its weights under
    `take`, into `into`), where each side whose weights it takes reads the vocabulary the
    parent run read (`tokenizers`: this run's, src and tgt): the embedding rows of another
    vocabulary of the same size would stand for other words, silently. The plan compares
    what it can tell before any job (nmtbench.evaluation.params.check_warm_start); hub
    checkpoints of different names are compared here, by their pieces."""
    parent_dir = Path(path).parent.parent  # the checkpoint is runs/<parent>/seedN/checkpoints/
    try:
        state = checkpoints.load(path)
    except InputError as err:
        raise InputError(f"{name}: {err}; {retrain(parent_dir)}") from None
    report = model.warm_start(state["model"], name, *take_into)
    record = read_record(parent_dir / layout.RUN_CONFIG_NAME, ("paths",))
    parent = RunPaths.from_record(record["paths"], str(parent_dir / layout.RUN_CONFIG_NAME))
    for side, ours in zip(("src", "tgt"), tokenizers, strict=True):
        theirs = parent.src_tokenizer if side == "src" else parent.tgt_tokenizer
        if side in report.sides and (
                load_tokenizer(theirs, target=side == "tgt").get_vocab() != ours.get_vocab()):
            raise InputError(f"{name}: {parent_dir} read the {side} side with the vocabulary "
                             f"of {theirs}, another than this run's; warm-start from a run of "
                             "the same vocabulary")
    return report


class Trainer:
    """Trains one run in `run_dir` with `cfg` (the resolved experiment config) on `paths`
    (corpora, tokenizers, pre-trained checkpoints, run inputs), or resumes it; on a GPU with
    the model compiled (`compile`; `Model.compile_for_training`)."""

    def __init__(self, run_dir: str | Path, cfg: dict[str, Any], paths: RunPaths,
                 device: str = "auto", compile: bool = False, wandb_project: str | None = None):
        self.run_dir = Path(run_dir)
        self.cfg, self.paths = cfg, paths
        # other runs' outputs it trains with (`--input NAME=PATH`), by kind
        self.method = get_method(cfg["method"])
        self.input_kinds = run_inputs.by_kind(paths.inputs, self.method.parent_runs, cfg)
        self.tc = TrainConfig.from_dict(cfg)
        # what it reads, by content: a resume must read the same
        self.inputs_digest = provenance.input_digests(paths.as_record())
        requested = resolve_device(device)
        self.world = distributed.join(requested)
        self.files = RunFiles(self.run_dir, self.world.is_main, wandb_project, cfg)
        self.ckpt_dir = self.files.ckpt_dir
        self.device = self.world.device(requested)
        self.src_tok = load_tokenizer(paths.src_tokenizer)
        self.tgt_tok = load_tokenizer(paths.tgt_tokenizer, target=True)
        torch.manual_seed(self.tc.seed)
        self.model: Model = self.method.build(cfg, vocab_of(self.src_tok),
                                              vocab_of(self.tgt_tok),
                                              paths.pretrained).to(self.device)
        if compile and self.device.type == "cuda":
            self.model.compile_for_training()
        data = TrainingData(paths, self.src_tok, self.tgt_tok, self.tc, self.model)
        for kind, given in self.input_kinds:
            kind.load_data(data, given)
        self.train_data, self.valid_data = data.train, data.valid
        # the DistributedDataParallel wrapper when there are several processes (else None)
        self.synced = distributed.synced(self.model, self.world, self.device, self.tc.seed)
        self.groups = self.model.param_groups()
        self.optimizer = adamw(self.groups, self.tc.weight_decay, lr=self.tc.lr,
                               betas=self.tc.adam_betas, eps=self.tc.adam_eps)
        self.per_update = self.world.size * self.tc.update_freq
        self.total_updates = self.tc.max_updates or self.tc.max_epochs * math.ceil(
            len(self._batches()) / self.per_update)
        self.updater = Updater(self.model, self.synced, self.groups, self.optimizer, self.world,
                               self.device, self.tc, self.total_updates)
        # offset: batches done in the current epoch; cut: the last one ended by max_updates
        self.step, self.epoch, self.offset, self.cut = 0, 1, 0, False
        self.best_valid, self.epochs_without_improvement, self.seconds = math.inf, 0, 0.0
        self.saved_step: int | None = None  # the update `last.pt` holds (None: none saved yet)

    # --- checkpoint state --------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {"model": self.model.checkpoint_state(), "optimizer": self.optimizer.state_dict(),
                "step": self.step, "epoch": self.epoch, "offset": self.offset,
                "world_size": self.world.size, "best_valid": self.best_valid,
                "seconds": self.seconds, "total_updates": self.total_updates,
                "epochs_without_improvement": self.epochs_without_improvement, "cut": self.cut,
                **self.updater.state(), **distributed.rng_state(),
                "config": json.dumps(self.cfg, sort_keys=True), "inputs": self.inputs_digest}

    def _resume(self) -> None:
        state = self.files.load_last(self.cfg, self.inputs_digest, self.paths.as_record(),
                                     self.world.size, self.total_updates)
        self.model.load_checkpoint_state(state["model"], str(self.files.last))
        self.optimizer.load_state_dict(state["optimizer"])
        for key in ("step", "epoch", "offset", "best_valid", "seconds",
                    "epochs_without_improvement"):
            setattr(self, key, state[key])
        self.cut = state.get("cut", False)  # not recorded before it was checked
        self.updater.restore(state)
        self.saved_step = self.step
        distributed.restore_rng(state, self.world, self.tc.seed, self.step)
        self.files.truncate_log(self.step)
        self._log({"event": "resume", "message": f"resumed from step {self.step}"})
        log.info("resumed from step %d (epoch %d)", self.step, self.epoch)

    def _log(self, record: dict[str, Any]) -> None:
        self.files.log(self.step, self.epoch, record)

    # --- training ----------------------------------------------------------------------------
    def _train_step(self, group: list[list[int]]) -> dict[str, float]:
        """One update over `group` (world size x update_freq batches, fewer at an epoch's end)."""
        try:
            record = self.updater.update(group, self.train_data, self.step)
        except Diverged as err:
            raise self._diverged(self.step + 1, str(err)) from None
        self.step += 1
        return record

    def _diverged(self, step: int, what: str) -> FloatingPointError:
        """The one-line stop: what went wrong at which update, and what a rerun resumes."""
        where = (f"the last good checkpoint is {self.files.last} (step "
                 f"{self.saved_step})" if self.saved_step is not None
                 else "no checkpoint was saved before it: training again starts over")
        return FloatingPointError(f"training diverged at step {step}: {what}; {where}")

    @contextmanager
    def _saving(self):
        """Weights gone non-finite are not saved: training stops, naming the last good save."""
        try:
            yield
        except FloatingPointError as err:
            raise self._diverged(self.step, str(err)) from None

    def _end_epoch(self) -> bool:
        """Validate, save checkpoints; return True when training should stop."""
        valid = validation_loss(self.model, self.valid_data, self.tc, self.world, self.device)
        improved = valid < self.best_valid
        self.best_valid = valid if improved else self.best_valid
        self.epochs_without_improvement = 0 if improved else self.epochs_without_improvement + 1
        record = {"valid_loss": valid, "best_valid_loss": self.best_valid}
        if self.tc.valid_bleu and self.world.is_main:
            record["valid_bleu"] = valid_bleu(self.model, self.src_tok, self.tgt_tok, self.paths)
        self._log({"event": "valid", **record, "seconds": round(self.seconds, 2)})
        finished_epoch = self.epoch
        self.epoch, self.offset = self.epoch + 1, 0
        if self.world.is_main:
            with self._saving():
                self.files.save_epoch(finished_epoch, self._state(), improved,
                                      self.tc.keep_last_epochs)
        self.saved_step = self.step  # every process: each names it if training diverges
        return stopped(self.tc, self.epoch, self.step, self.epochs_without_improvement)

    def _batches(self, shuffle_seed: int | None = None) -> list[list[int]]:
        return self.train_data.batches(self.tc.max_tokens, shuffle_seed,
                                       self.tc.batch_size_multiple, self.tc.max_sentences)

    def _start_fresh(self) -> None:
        """Begin at step 0, from the weights the run inputs give (warm starts)."""
        self.files.remove_earlier_training()
        for kind, given in self.input_kinds:
            kind.load_weights(self, given)

    def warm_start(self, name: str, path: str) -> None:
        """Initialise (part of) the model from another run's checkpoint (a fresh run only: a
        resumed one has its own weights), as the method's `parent_runs` say for `name`."""
        report = warm_start(self.model, name, path, self.method.parent_runs[name],
                            self.src_tok, self.tgt_tok)
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
                    self.files.remove_unfinished_saves()
                summary = self._run()
                finished = True
                return summary
        finally:
            self.synced = self.updater.synced = None  # the reducer holds the process group
            self.files.close()
            gc.collect()
            distributed.leave(self.world, finished)

    def _run(self) -> dict[str, Any]:
        if self.files.last.exists():
            self._resume()
        else:
            self._start_fresh()
        if self.world.is_main:  # only once the checkpoint is known to be this config's
            write_json(self.files.config_path, {"experiment": self.cfg,
                                                "paths": self.paths.as_record(),
                                                "inputs": self.inputs_digest})
        done = stopped(self.tc, self.epoch, self.step, self.epochs_without_improvement)
        per_update = self.per_update
        with tqdm(total=self.total_updates, initial=self.step, desc=f"train {self.run_dir}",
                  unit="step", mininterval=5, disable=None if self.world.is_main else True) as bar:
            while not done:
                batches = self._batches(self.tc.seed + self.epoch)
                for first in range(self.offset, len(batches), per_update):
                    group = batches[first:first + per_update]
                    start = time.perf_counter()
                    record = self._train_step(group)
                    self.offset += len(group)
                    self.seconds += self.files.curves.timed(record.get("ntokens", 0), start)
                    bar.update(1)
                    if self.step % self.tc.log_interval == 0:
                        self._log({"event": "train", **record})
                        bar.set_postfix(loss=f"{record['loss']:.3f}", epoch=self.epoch)
                    if self.step % self.tc.save_interval_updates == 0:
                        if self.world.is_main:
                            with self._saving():
                                self.files.save_interval(self.step, self._state(),
                                                         self.tc.keep_interval_updates)
                        self.saved_step = self.step
                    if trained_out(self.tc, self.epoch, self.step):
                        break
                self.cut = self.offset < len(batches)  # by max_updates, inside the epoch
                done = self._end_epoch()
        summary = {"steps": self.step, "epochs": self.epoch - 1, "seconds": round(self.seconds, 2),
                   "best_valid_loss": self.best_valid, "device": self.device.type,
                   "params": self.model.num_params(), "train_pairs": len(self.train_data),
                   "processes": self.world.size, "inputs": self.inputs_digest}
        if self.world.is_main:
            write_json(self.files.summary_path, summary)
        return summary

"""Translate a file with a trained run: load its checkpoint(s), decode in batches, write text."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from nmtbench import layout, provenance
from nmtbench.data.tokenization import decode, encode_sources, load_tokenizer, vocab_of
from nmtbench.devices import hardware_name, resolve_device
from nmtbench.errors import InputError, TooLong, retrain
from nmtbench.fileio import read_lines, write_lines
from nmtbench.methods import get_method
from nmtbench.parts import checkpoints
from nmtbench.parts.beam_search import beam_search
from nmtbench.parts.contract import Model
from nmtbench.parts.mask_predict import mask_predict
from nmtbench.records import read_record
from nmtbench.run_paths import RunPaths
from nmtbench.workflow.decode_settings import DecodeSettings
from nmtbench.workflow.train_settings import kept_by_run, resumable

log = logging.getLogger(__name__)


def load_run_model(run_dir: str | Path, checkpoint: str = "best", average_last: int = 0,
                   device: str = "auto", average_of: str = "epochs"
                   ) -> tuple[Model, Any, Any, dict[str, Any]]:
    """Rebuild a run's model and tokenizers and load its weights.

    `average_last` > 0 averages the last k checkpoints of each epoch, or of every so many
    updates (`average_of`; fairseq's average_checkpoints.py); otherwise `checkpoint` names the
    file (best or last). What is loaded must be what the run was trained with: the tokenizers
    and pre-trained checkpoints as config.json's digests record them, and checkpoints this
    run saved (their own config and input digests are config.json's); else one line naming
    the file."""
    run_dir = Path(run_dir)
    config_path = run_dir / layout.RUN_CONFIG_NAME
    if not config_path.exists():
        raise InputError(f"{run_dir}: no config.json; is this a trained run directory?")
    run = read_record(config_path, ("experiment", "paths", "inputs"))
    cfg, recorded = run["experiment"], run["inputs"]
    paths = RunPaths.from_record(run["paths"], str(config_path))
    if not isinstance(recorded, dict):
        raise InputError(f"{config_path}: key 'inputs' must be an object of digests")
    _check_run_from_its_directory(run_dir, config_path, paths)
    src_tok = load_tokenizer(paths.src_tokenizer)
    tgt_tok = load_tokenizer(paths.tgt_tokenizer, target=True)
    _check_decode_inputs(run_dir, config_path, paths, recorded)

    def check(path: Path, state: dict[str, Any]) -> None:
        _check_own_checkpoint(run_dir, path, state, cfg, recorded, paths)

    # frozen pre-trained weights are not in the run's checkpoints: they load from their own
    # (those translating reads: not a distillation teacher)
    model = get_method(cfg["method"]).build_for_translation(
        cfg, vocab_of(src_tok), vocab_of(tgt_tok), paths.pretrained)
    if average_last > 0:
        found = averaged(run_dir, average_last, average_of)
        kind = average_of[:-1]  # epoch, update
        try:
            weights = checkpoints.average(found, check=check)
        except InputError as err:  # damaged, or not this run's: only training again helps
            raise InputError(f"{err}; {retrain(run_dir)}") from None
        where = f"{run_dir}: the last {average_last} {kind} checkpoints"
    else:
        path = run_dir / layout.CHECKPOINTS_NAME / layout.CHECKPOINT_NAME.format(
            checkpoint=checkpoint)
        try:
            state = checkpoints.load(path)
            check(path, state)
        except InputError as err:
            raise InputError(f"{err}; {retrain(run_dir)}") from None
        weights, where = state["model"], str(path)
    try:
        model.load_checkpoint_state(weights, where)
    except RuntimeError as err:  # torch's "size mismatch for ...": other vocabularies, sizes
        detail = str(err).strip().splitlines()[-1].strip()
        raise InputError(f"{where}: does not fit the model of {config_path} ({detail})") \
            from None
    model.to(resolve_device(device)).eval()
    return model, src_tok, tgt_tok, cfg


def averaged(run_dir: Path, average_last: int, average_of: str) -> list[Path]:
    """The last `average_last` epoch or update checkpoints (`average_of`) of a run: of a
    finished one, those its records say it keeps (kept_by_run), each of which must be there
    (one deleted with its checksum file would silently leave an older one in the average);
    of an unfinished one, the last there."""
    directory = run_dir / layout.CHECKPOINTS_NAME
    kept = [directory / name for name in kept_by_run(run_dir)[average_of]]
    if gone := next((path for path in kept[-average_last:] if not path.is_file()), None):
        raise InputError(f"{gone} is gone, but the run keeps it and averaging reads it; "
                         f"{retrain(run_dir)}")
    found = kept or checkpoints.numbered_checkpoints(directory, average_of)
    if len(found) < average_last:
        raise InputError(f"{run_dir}: asked to average the last {average_last} checkpoints "
                         f"but only {len(found)} {average_of[:-1]} checkpoints exist")
    return found[-average_last:]


def _check_decode_inputs(run_dir: Path, config_path: Path, paths: RunPaths,
                         recorded: dict[str, str]) -> None:
    """What decoding reads besides the run's own checkpoints, its vocabularies and the frozen
    pre-trained weights its checkpoints leave out, is still what the run was trained with (a
    retrained vocabulary of the same size would decode into other words, silently)."""
    read = {"src_tokenizer": paths.src_tokenizer, "tgt_tokenizer": paths.tgt_tokenizer,
            "pretrained": paths.pretrained}
    for _, path in provenance.changed_inputs(recorded, read)[:1]:
        raise InputError(f"{path}: changed since {run_dir} was trained; {retrain(run_dir)}")


def _check_own_checkpoint(run_dir: Path, path: Path, state: dict[str, Any],
                          cfg: dict[str, Any], recorded: dict[str, str],
                          paths: RunPaths) -> None:
    """A checkpoint records the config and input digests of the training that saved it: they
    must be this run's (a checkpoint copied from another run would decode as this one). The
    settings that only say when to stop may differ (a run resumed with more epochs keeps its
    earlier best.pt)."""
    try:
        saved = json.loads(state["config"])
    except (KeyError, TypeError, ValueError):
        saved = None
    if not isinstance(saved, dict) or resumable(saved) != resumable(cfg):
        raise InputError(f"{path}: not a checkpoint of {run_dir} (it was trained with another "
                         "config than its config.json records)")
    if stale := provenance.changed(state.get("inputs", {}), recorded, paths.as_record()):
        raise InputError(f"{path}: not a checkpoint of {run_dir} (it was trained on other "
                         f"inputs than its config.json records: {', '.join(stale)})")


def _check_run_from_its_directory(run_dir: Path, config_path: Path, paths: RunPaths) -> None:
    """A run records the paths it read as its command was given them, relative to where it
    ran (the workflow's directory): from elsewhere they name nothing, and a tokenizer's
    would be taken for a hub name. Say where to run from instead."""
    for path in (paths.src_tokenizer, paths.tgt_tokenizer, *paths.pretrained.values()):
        if Path(path).is_absolute() or Path(path).exists():
            continue
        where = next((d for d in run_dir.resolve().parents if (d / path).exists()), None)
        if where is not None:
            raise InputError(f"{config_path}: it records {path!r}, relative to the directory "
                             f"the run was made in; run this command from {where}")


def source_positions(model: Model) -> int | None:
    """The longest source (in tokens, with its [CLS] and [SEP]) the pre-trained models in the
    encoder read, which fail deep inside Hugging Face's code on a longer one (a BERT: 512);
    None without one. The model's own position tables name a too-long line as they meet it
    (TooLong, below)."""
    limits = [module.config.max_position_embeddings
              for module in getattr(model, "encoder", model).modules()
              if isinstance(getattr(getattr(module, "config", None), "max_position_embeddings",
                                    None), int)]
    return min(limits, default=None)


def translate_lines(model: Model, src_tok: Any, tgt_tok: Any, lines: list[str], *,
                    progress: str | None = None, source: str = "source",
                    **settings: Any) -> list[str]:
    """Translate `lines` (same order), batching sentences of similar length: beam search
    (beam, lenpen, lenpen_form, max_len_a/b) or mask-predict (length_beam, iterations), as
    the model decodes. `settings`: DecodeSettings fields, over its defaults. A line longer
    than the model's positions is an error naming it (`source`: where the lines are from)."""
    s = DecodeSettings.from_dict(settings)
    if model.decoding == "at":
        def search(src: torch.Tensor) -> list[list[int]]:
            return beam_search(model, src, vocab=vocab, beam=s.beam, max_len_a=s.max_len_a,
                               max_len_b=s.max_len_b, lenpen=s.lenpen,
                               lenpen_form=s.lenpen_form)
    elif model.decoding == "nat":
        def search(src: torch.Tensor) -> list[list[int]]:
            return mask_predict(model, src, length_beam=s.length_beam, iterations=s.iterations,
                                vocab=vocab, lenpen=s.lenpen, lenpen_form=s.lenpen_form)
    else:
        raise InputError(f"the model decodes {model.decoding!r}: it is never decoded")
    encoded = encode_sources(src_tok, lines, model.source_bos)
    limit = source_positions(model)
    for number, ids in enumerate(encoded, 1):
        if limit is not None and len(ids) > limit:
            raise InputError(f"{source}: line {number}: {len(ids)} tokens, more than the "
                             f"{limit} positions of the model's pre-trained encoder")
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    hyps: list[str] = [""] * len(lines)
    vocab = vocab_of(tgt_tok)
    dev = next(model.parameters()).device
    with tqdm(total=len(lines), desc=progress, unit="sent", mininterval=5,
              disable=None if progress else True) as bar:
        for first in range(0, len(order), s.batch_size):
            chunk = order[first:first + s.batch_size]
            longest = max(len(encoded[i]) for i in chunk)
            src = torch.full((len(chunk), longest), src_tok.pad_token_id, dtype=torch.long)
            for row, i in enumerate(chunk):
                src[row, : len(encoded[i])] = torch.tensor(encoded[i])
            try:
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dev.type == "cuda"):
                    outputs = search(src.to(dev))
            except TooLong as err:  # named: a line of the batch's longest
                line = min(i for i in chunk if len(encoded[i]) == longest) + 1
                raise InputError(f"{source}: line {line}: {longest} tokens, more than the "
                                 f"model's {err.limit} positions (max_positions)") from None
            for i, ids in zip(chunk, outputs, strict=True):
                hyps[i] = decode(tgt_tok, ids)
            bar.update(len(chunk))
    return hyps


def search_settings(model: Model, settings: DecodeSettings, run_dir: str | Path
                    ) -> dict[str, Any]:
    """The decoding settings that apply to the model's search (the others are ignored), once
    they are known to make sense for the model (`DecodeSettings.refusal`)."""
    if refusal := replace(settings, decoding=model.decoding).refusal(
            model.tgt_vocab.size, getattr(model, "max_length", None)):
        raise InputError(f"{run_dir}: {refusal}")
    return settings.search(parallel=model.decoding == "nat")


def translate_file(run_dir: str | Path, src_path: str | Path, out_path: str | Path,
                   settings: DecodeSettings, *, device: str = "auto",
                   max_lines: int | None = None) -> dict[str, Any]:
    """Decode every line of src_path (or its first `max_lines`) into out_path, in order, with
    the run's checkpoint and search `settings`; return the decoding record."""
    lines = read_lines(src_path)
    if not lines:
        raise InputError(f"{src_path} is empty: nothing to decode")
    if max_lines is not None:
        if len(lines) < max_lines:
            raise InputError(f"{src_path} has {len(lines)} lines, fewer than the {max_lines} "
                             "to translate")
        lines = lines[:max_lines]
    model, src_tok, tgt_tok, _ = load_run_model(run_dir, settings.checkpoint,
                                                settings.average_last, device,
                                                settings.average_of)
    search_settings(model, settings, run_dir)
    start = time.perf_counter()
    hyps = translate_lines(model, src_tok, tgt_tok, lines, progress=f"decode {src_path}",
                           source=str(src_path), **settings.as_dict())
    seconds = time.perf_counter() - start
    write_lines(out_path, hyps)
    return {**replace(settings, decoding=model.decoding).record(),
            "batch_size": settings.batch_size, "seconds": round(seconds, 2),
            "device": hardware_name(next(model.parameters()).device),
            "src": provenance.file_digest(src_path), provenance.TRAINED: _training(run_dir)}


def _training(run_dir: str | Path) -> str | None:
    """The digest of the run's finished training; None while it is still training."""
    try:
        return provenance.training_digest(run_dir)
    except InputError:
        return None

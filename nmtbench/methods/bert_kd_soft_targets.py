"""BERT-KD's soft targets (Chen et al. 2020, `nmtbench/methods/bert_kd.py`): a C-MLM teacher's
distributions over a training set, written once by the teacher (`dump`, the `soft-targets`
command) and attached to the training pairs of every student (`load`): for every pair and
every position of `y [SEP]`, the teacher's top-K log-probs with that position masked.

Each position is masked exactly once: a pair with a target of n positions is copied
c = min(copies, n) times and copy r masks the positions j with j mod c = r, so one forward
pass serves n / c positions (the authors' code: 7 copies; a left-to-right teacher, which would
see the masks left of a position, gets one copy per position). One safetensors file holds every
pair's rows, keyed by line number: `offsets` (lines + 1), `ids` (positions x K, int32) and
`logprobs` (positions x K, float16). Its one metadata entry (one, so that the file's bytes are
the same each time it is written: safetensors writes several in any order) records what made
it and what it holds: K, the target vocabulary's digest and size (a student with another
vocabulary is refused instead of learning from ids that mean other words), the teacher's
training and the training corpus (digests: a retrained teacher or a changed corpus makes the
file stale, not silently used) and a digest of the tensors (an edited file is refused).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from nmtbench import provenance
from nmtbench.errors import InputError
from nmtbench.fileio import atomic_path, write_json
from nmtbench.parts.batches import Bitext

log = logging.getLogger(__name__)

COPIES = 7  # masked copies of a pair per forward pass (the authors' num_samples)
SOFT_IDS, SOFT_LOGPROBS = "soft_ids", "soft_logprobs"  # the batch extras of soft targets
RECORD = "soft_targets"  # the file's one metadata entry: its record as JSON


def vocab_digest(tokenizer: Any) -> str:
    """A digest of a tokenizer's vocabulary (piece -> id), the soft targets' id space."""
    pieces = json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False)
    return hashlib.sha256(pieces.encode()).hexdigest()


def corpus_digest(src: str | Path, tgt: str | Path) -> str:
    """A digest of a training corpus's two files, by content."""
    both = f"{provenance.file_digest(src)} {provenance.file_digest(tgt)}"
    return hashlib.sha256(both.encode()).hexdigest()


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """A digest of the soft targets' tensors (names, shapes, values)."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def copy_masks(length: int, copies: int = COPIES) -> torch.Tensor:
    """(c, length) booleans, c = min(copies, length): copy r masks positions j = r mod c, so
    every position is masked in exactly one copy."""
    c = min(copies, length)
    return torch.arange(length)[None, :] % c == torch.arange(c)[:, None]


@torch.no_grad()
def teacher_topk(model: Any, data: Bitext, top_k: int, max_tokens: int,
                 copies: int = COPIES, desc: str = "soft targets"
                 ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """For each pair of `data`, in order: the ids (n, K) and log-probs (n, K) of the teacher's
    top K at each of its n target positions, that position masked."""
    v = model.tgt_vocab
    ids: list[torch.Tensor] = [torch.empty(0)] * len(data)
    lprobs: list[torch.Tensor] = [torch.empty(0)] * len(data)
    device = next(model.parameters()).device
    batches = data.batches(max_tokens // copies or 1)
    for indices in tqdm(batches, desc=desc, unit="batch", mininterval=5, disable=None):
        batch = data.collate(indices)
        rows, masked, owners = [], [], []
        for row, i in enumerate(indices):
            n = len(data.tgt[i]) - 1  # y [SEP]
            masks = copy_masks(n, copies)
            target = batch.tgt_out[row, :n]
            for mask in masks:
                rows.append(row)
                masked.append(target.masked_fill(mask, v.mask))
                owners.append(mask)
        width = batch.tgt_out.size(1)
        tgt = torch.full((len(masked), width), v.pad, dtype=torch.long)
        for r, m in enumerate(masked):
            tgt[r, : len(m)] = m
        out = model.predict(batch.src[rows].to(device), tgt.to(device)).cpu()  # (R, T, V)
        top = out.topk(top_k, dim=-1)
        for row, i in enumerate(indices):
            n = len(data.tgt[i]) - 1
            pair_ids = torch.empty(n, top_k, dtype=torch.int32)
            pair_lp = torch.empty(n, top_k, dtype=torch.float16)
            for r in (r for r, owner in enumerate(rows) if owner == row):
                mask = owners[r]
                pair_ids[mask] = top.indices[r, :n][mask].int()
                pair_lp[mask] = top.values[r, :n][mask].half()
            ids[i], lprobs[i] = pair_ids, pair_lp
    return ids, lprobs


def dump(teacher: tuple[Any, Any, Any, dict[str, Any]], run_dir: str | Path,
         train: tuple[str | Path, str | Path], valid: tuple[str | Path, str | Path],
         out: str | Path, top_k: int, info: str | Path | None = None,
         max_tokens: int = 4096) -> dict[str, Any]:
    """Write the top-K soft targets of every training pair (`train`: source and target
    files) of the teacher run in `run_dir` (`teacher`: its model, tokenizers and config, as
    `nmtbench.evaluation.translate.load_run_model` loads them) to `out` (safetensors), and a
    summary (size, time, the teacher's masked-token accuracy on `valid`) to `info`."""
    from safetensors.torch import save_file

    model, src_tok, tgt_tok, cfg = teacher
    if getattr(model, "decoding", None) != "none" or not hasattr(model, "predict"):
        raise InputError(f"{run_dir}: not a teacher run (method {cfg.get('method')!r}; soft "
                         "targets come from a bert-kd-teacher run)")
    if top_k > model.tgt_vocab.size:
        raise InputError(f"top_k {top_k} exceeds the vocabulary ({model.tgt_vocab.size})")
    start = time.perf_counter()
    # a left-to-right teacher sees the masks left of a position: one masked position a copy
    copies = COPIES if model.settings.objective == "cmlm" else model.max_length
    train_data = Bitext.load(*train, src_tok, tgt_tok, src_bos=True)
    ids, lprobs = teacher_topk(model, train_data, top_k, max_tokens, copies,
                               desc=f"soft targets {out}")
    seconds = time.perf_counter() - start
    lengths = torch.tensor([len(t) for t in ids])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    tensors = {"offsets": offsets, "ids": torch.cat(ids), "logprobs": torch.cat(lprobs)}
    record = {"top_k": top_k, "vocab_size": model.tgt_vocab.size,
              "vocab_digest": vocab_digest(tgt_tok), "teacher": str(run_dir),
              provenance.TRAINED: provenance.training_digest(run_dir),
              "corpus": corpus_digest(*train), "tensors": tensors_digest(tensors)}
    with atomic_path(out) as tmp:
        save_file(tensors, str(tmp), metadata={RECORD: json.dumps(record, sort_keys=True)})
    valid_data = Bitext.load(*valid, src_tok, tgt_tok, src_bos=True)
    valid_ids, _ = teacher_topk(model, valid_data, 1, max_tokens, copies,
                                desc="teacher accuracy (valid)")
    hits = sum(int((p[:, 0] == torch.tensor(t[1:])).sum()) for p, t in zip(valid_ids,
                                                                            valid_data.tgt,
                                                                            strict=True))
    positions = int(lengths.sum())
    summary = {"pairs": len(train_data), "target_positions": positions, "top_k": top_k,
               "bytes": Path(out).stat().st_size,
               "bytes_per_target_position": Path(out).stat().st_size / max(positions, 1),
               "seconds": round(seconds, 2),
               "seconds_per_1000_pairs": round(1000 * seconds / max(len(train_data), 1), 3),
               "valid_masked_accuracy": hits / max(sum(len(t) - 1 for t in valid_data.tgt), 1),
               "valid_positions": sum(len(t) - 1 for t in valid_data.tgt),
               "teacher": str(run_dir), "method": cfg.get("method"),
               "objective": cfg.get("objective", "cmlm"),
               provenance.TRAINED: record[provenance.TRAINED]}
    if info is not None:
        write_json(info, summary)
    log.info("soft targets of %d pairs (%d positions, top %d): %.1f bytes a position, %.1f s "
             "per 1000 pairs; teacher's masked-token accuracy on valid %.1f%%", len(train_data),
             positions, top_k, summary["bytes_per_target_position"],
             summary["seconds_per_1000_pairs"], 100 * summary["valid_masked_accuracy"])
    return summary


def load(path: str | Path, data: Bitext, tokenizer: Any, top_k: int) -> None:
    """Attach the soft targets of `path` to the training pairs of `data` (extras `soft_ids`
    and `soft_logprobs`, by line number): refused, one line, when edited or damaged, made in
    another vocabulary, with fewer than `top_k` candidates, or from another corpus than
    `data`'s."""
    offsets, ids, lprobs, record = _read(path)
    if record.get("vocab_digest") != vocab_digest(tokenizer):
        raise InputError(f"{path}: made in another target vocabulary than the student's "
                         "(the student must read its teacher's vocabulary)")
    if record.get("top_k", 0) < top_k:
        raise InputError(f"{path}: holds the top {record.get('top_k')} of each position, the "
                         f"student asks for top_k {top_k}")
    if data.files is None or record.get("corpus") != corpus_digest(*data.files):
        raise InputError(f"{path}: made from another training corpus than "
                         f"{' and '.join(data.files or ('this one',))}; write it again from "
                         "the teacher (delete it and rerun)")
    lines = len(offsets) - 1
    by_line = {}
    for line, tgt in zip(data.lines, data.tgt, strict=True):
        if line >= lines:
            raise InputError(f"{path}: nothing for line {line + 1} of the corpus (it has "
                             f"{lines} lines)")
        start, end = int(offsets[line]), int(offsets[line + 1])
        if end - start != len(tgt) - 1:
            raise InputError(f"{path}: line {line + 1} has {end - start} target positions, "
                             f"the corpus's target has {len(tgt) - 1}: made from other data")
        by_line[line] = (ids[start:end, :top_k], lprobs[start:end, :top_k])
    data.attach(SOFT_IDS, {k: v[0] for k, v in by_line.items()}, str(path))
    data.attach(SOFT_LOGPROBS, {k: v[1] for k, v in by_line.items()}, str(path))


def _read(path: str | Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
    """The file's tensors and record, checked against each other: the tensors are the ones
    its record describes, the offsets index `ids`, every id lies in the vocabulary."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            record = json.loads((f.metadata() or {})[RECORD])
            tensors = {k: f.get_tensor(k) for k in ("offsets", "ids", "logprobs")}
    except (OSError, SafetensorError, KeyError, ValueError) as err:
        raise InputError(f"{path}: not a soft-targets file of this version ({err}); write it "
                         "again from the teacher (delete it and rerun)") from None
    if not isinstance(record, dict) or record.get("tensors") != tensors_digest(tensors):
        raise InputError(f"{path}: its tensors are not those it was written with (edited or "
                         "damaged); write it again from the teacher (delete it and rerun)")
    offsets, ids, lprobs = tensors["offsets"], tensors["ids"], tensors["logprobs"]
    size = record.get("vocab_size")
    if (offsets.dim() != 1 or len(offsets) < 1 or int(offsets[0]) != 0
            or bool((offsets[1:] < offsets[:-1]).any()) or int(offsets[-1]) != len(ids)
            or ids.dim() != 2 or lprobs.shape != ids.shape):
        raise InputError(f"{path}: malformed (offsets and rows disagree); write it again")
    if ids.numel() and (int(ids.min()) < 0 or not isinstance(size, int)
                        or int(ids.max()) >= size):
        raise InputError(f"{path}: holds ids outside the vocabulary of {size} pieces; write "
                         "it again from the teacher")
    return offsets, ids, lprobs, record

"""Parallel corpora: strict reading, encoding with HF tokenizers, and token-based batching."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from nmtbench.data.tokenization import encode_sources
from nmtbench.errors import InputError
from nmtbench.fileio import read_lines
from nmtbench.parts.contract import Batch

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> tuple[list[str], list[str]]:
    """Read a sentence-aligned pair of files; they must have equal, non-empty lines."""
    src = read_lines(src_path, allow_empty=False)
    tgt = read_lines(tgt_path, allow_empty=False)
    if len(src) != len(tgt):
        raise InputError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: "
                         "parallel files must be line-aligned")
    return src, tgt


def read_back_translations(src_path: str | Path, tgt_path: str | Path,
                           count: int) -> tuple[list[str], list[str]]:
    """The first `count` back-translated pairs: synthetic sources (`src_path`, the reverse
    model's translations) and the monolingual sentences they translate (`tgt_path`, which
    may go on beyond them). A source the reverse model left empty drops its pair, logged."""
    src = read_lines(src_path)
    tgt = read_lines(tgt_path, allow_empty=False)
    for path, lines in ((src_path, src), (tgt_path, tgt)):
        if len(lines) < count:
            raise InputError(f"{path} has {len(lines)} lines, fewer than the {count} "
                             "back-translated pairs asked for (bt_sentences)")
    pairs = [(s, t) for s, t in zip(src[:count], tgt[:count], strict=True) if s.strip()]
    if len(pairs) < count:
        log.warning("%s: dropped %d of %d back-translated pairs with an empty source",
                    src_path, count - len(pairs), count)
    return [s for s, _ in pairs], [t for _, t in pairs]


@dataclass
class Bitext:
    """Encoded sentence pairs: source [CLS] x [SEP] or x [SEP] (`src_bos`), target
    [CLS] y [SEP]; each example's line number in its corpus (`lines`, the batch's `ids`), and
    per-example side data by name (`extras`, attached by line number, so that filtering
    never misaligns it)."""

    src: list[list[int]]
    tgt: list[list[int]]
    src_pad: int
    tgt_pad: int
    lines: list[int] | None = None  # None: 0, 1, ...
    corpus_lines: int | None = None  # lines read, before filtering (None: as many as kept)
    extras: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    files: tuple[str, str] | None = None  # the source and target files read (None: not files)

    def __post_init__(self) -> None:
        self.lines = list(range(len(self.src))) if self.lines is None else self.lines
        self.corpus_lines = len(self.src) if self.corpus_lines is None else self.corpus_lines

    def __len__(self) -> int:
        return len(self.src)

    @classmethod
    def load(cls, src_path: str | Path, tgt_path: str | Path, src_tok: PreTrainedTokenizerBase,
             tgt_tok: PreTrainedTokenizerBase, max_positions: int | None = None,
             limit: int | None = None, src_bos: bool = True) -> Bitext:
        """Read, encode and (fairseq practice) drop pairs longer than max_positions, logged."""
        src_lines, tgt_lines = read_parallel(src_path, tgt_path)
        if limit is not None:
            src_lines, tgt_lines = src_lines[:limit], tgt_lines[:limit]
        data = cls.encode(src_lines, tgt_lines, src_tok, tgt_tok, max_positions, str(src_path),
                          src_bos)
        data.files = (str(src_path), str(tgt_path))
        return data

    @classmethod
    def encode(cls, src_lines: list[str], tgt_lines: list[str],
               src_tok: PreTrainedTokenizerBase, tgt_tok: PreTrainedTokenizerBase,
               max_positions: int | None, name: str, src_bos: bool = True) -> Bitext:
        """Encode aligned lines, dropping (and logging) pairs longer than max_positions;
        `src_bos`: whether sources start with [CLS] (`nmtbench.data.tokenization.encode_sources`).
        Dropping half the pairs or more is an error: what is left is another corpus than the
        one the run names (and with none left a model would "finish" training on nothing)."""
        if not src_lines:
            raise InputError(f"{name}: no sentence pairs")
        src = encode_sources(src_tok, src_lines, src_bos)
        tgt = tgt_tok(tgt_lines, add_special_tokens=True)["input_ids"]
        keep = list(range(len(src)))
        if max_positions is not None:
            keep = [i for i in keep
                    if len(src[i]) <= max_positions and len(tgt[i]) <= max_positions]
            if 2 * len(keep) <= len(src):
                raise InputError(f"{name}: {len(src) - len(keep)} of {len(src)} pairs are "
                                 f"longer than max_positions ({max_positions} tokens); raise "
                                 "the setting max_positions")
            if len(keep) < len(src):
                log.warning("%s: dropped %d of %d pairs longer than %d tokens", name,
                            len(src) - len(keep), len(src), max_positions)
        return cls([src[i] for i in keep], [tgt[i] for i in keep], src_tok.pad_token_id,
                   tgt_tok.pad_token_id, keep, len(src))

    def attach(self, name: str, by_line: Mapping[int, torch.Tensor] | Sequence[torch.Tensor],
               where: str) -> None:
        """Side data for every example, looked up by its line number (`where` names the
        source in errors): a tensor per example, its first dimension padded in batches."""
        values = []
        for line in self.lines:
            try:
                values.append(by_line[line])
            except (KeyError, IndexError):
                raise InputError(f"{where}: nothing for line {line + 1} of the corpus") from None
        self.extras[name] = values

    def __add__(self, other: Bitext) -> Bitext:
        """Both corpora; `other`'s line numbers follow this one's."""
        if self.extras.keys() != other.extras.keys():
            raise InputError(f"cannot concatenate corpora with side data "
                             f"{sorted(self.extras)} and {sorted(other.extras)}")
        return Bitext(self.src + other.src, self.tgt + other.tgt, self.src_pad, self.tgt_pad,
                      self.lines + [self.corpus_lines + i for i in other.lines],
                      self.corpus_lines + other.corpus_lines,
                      {k: v + other.extras[k] for k, v in self.extras.items()})

    def batches(self, max_tokens: int, shuffle_seed: int | None = None,
                multiple: int = 1, max_sentences: int = 0) -> list[list[int]]:
        """Token batches of pairs sorted by (source, target) length, as fairseq orders them;
        an example counts as its longer padded tensor (source, or the decoder's input)."""
        order = sorted(range(len(self)), key=lambda i: (len(self.src[i]), len(self.tgt[i]), i))
        lengths = [max(len(s), len(t) - 1) for s, t in zip(self.src, self.tgt, strict=True)]
        return token_batches(order, lengths, max_tokens, shuffle_seed, multiple, max_sentences)

    def target_tokens(self, indices: list[int]) -> int:
        """The batch's non-padding target tokens (y [SEP]): what its loss is averaged over."""
        return sum(len(self.tgt[i]) - 1 for i in indices)

    def collate(self, indices: list[int]) -> Batch:
        """Pad a batch; the target is split into decoder input ([CLS] y) and output (y [SEP])."""
        tgt = [self.tgt[i] for i in indices]
        return Batch(src=_pad([self.src[i] for i in indices], self.src_pad),
                     tgt_in=_pad([t[:-1] for t in tgt], self.tgt_pad),
                     tgt_out=_pad([t[1:] for t in tgt], self.tgt_pad),
                     ids=torch.tensor([self.lines[i] for i in indices]),
                     extras={k: _stack([v[i] for i in indices]) for k, v in self.extras.items()})


def token_batches(order: list[int], lengths: list[int], max_tokens: int,
                  shuffle_seed: int | None = None, multiple: int = 1,
                  max_sentences: int = 0) -> list[list[int]]:
    """Group examples of similar length so that no batch exceeds max_tokens (padded), nor
    max_sentences examples (0: no limit).

    As fairseq's `batch_by_size` does: walk the examples in length order and fill batches
    greedily; a full batch of `multiple` or more sentences is cut back to a multiple of
    `multiple` (fairseq's --required-batch-size-multiple, 8 by default) and the examples cut
    off start the next one (at the end, they are the last batch). Then the batch order is
    shuffled with a generator seeded per epoch, so that a resumed run sees the same batches in
    the same order.
    """
    def full(longest: int, size: int) -> bool:
        return longest * size > max_tokens or 0 < max_sentences < size

    def cut(batch: list[int]) -> int:  # how many of a closed batch's examples it keeps
        return len(batch) - len(batch) % multiple if len(batch) >= multiple else len(batch)

    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0  # of current
    for i in order:
        if current and full(max(longest, lengths[i]), len(current) + 1):
            keep = cut(current)
            batches.append(current[:keep])
            current = current[keep:]  # fewer than `multiple`
            longest = max((lengths[j] for j in current), default=0)
            if current and full(max(longest, lengths[i]), len(current) + 1):
                batches.append(current)
                current, longest = [], 0
        current.append(i)
        longest = max(longest, lengths[i])
    if current:  # the last batch, cut the same way; what it cuts off is a batch of its own
        keep = cut(current)
        batches += [b for b in (current[:keep], current[keep:]) if b]
    if shuffle_seed is not None:
        generator = torch.Generator().manual_seed(shuffle_seed)
        batches = [batches[j] for j in torch.randperm(len(batches), generator=generator)]
    return batches


def _pad(seqs: list[list[int]], pad: int) -> torch.Tensor:
    """(B, longest) ids, padded at the end: one tensor made at once, not a row at a time (the
    trainer collates between updates, while the GPU waits)."""
    longest = max(len(s) for s in seqs)
    return torch.tensor([s + [pad] * (longest - len(s)) for s in seqs], dtype=torch.long)


def _stack(values: list[torch.Tensor]) -> torch.Tensor:
    """Per-example tensors as one (B, ...) tensor, the first dimension zero-padded."""
    if values[0].dim() == 0:
        return torch.stack(values)
    longest = max(v.size(0) for v in values)
    return torch.stack([torch.nn.functional.pad(v, [0, 0] * (v.dim() - 1)
                                                + [0, longest - v.size(0)]) for v in values])

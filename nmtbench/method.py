"""The method contract: the one surface the trainer, decoders, evaluator and reporter use.

Every method in `methods/` subclasses `Method`, so no other part of the harness special-cases a
method. A method says how to build itself, which parameters train, how to compute its loss, and
which shared decoder it uses; autoregressive methods also expose the incremental-decoding hooks
that `nmtbench.decoding.beam_search` drives, parallel (non-autoregressive) methods the hooks
that `nmtbench.mask_predict.mask_predict` drives.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn


@dataclass
class Batch:
    """A padded batch. Target ids follow the BERT convention: BOS = [CLS], EOS = [SEP]."""

    src: torch.Tensor  # (B, S) source ids incl. [CLS] ... [SEP], right-padded with pad id
    tgt_in: torch.Tensor  # (B, T) [CLS] y_1 .. y_n, padded
    tgt_out: torch.Tensor  # (B, T) y_1 .. y_n [SEP], padded
    ids: torch.Tensor  # (B,) line numbers of the examples in their corpus

    def to(self, device: torch.device | str) -> Batch:
        return Batch(*(t.to(device) for t in (self.src, self.tgt_in, self.tgt_out, self.ids)))


@dataclass(frozen=True)
class Vocab:
    """The special ids and size of one side's tokenizer."""

    size: int
    pad: int
    bos: int
    eos: int
    unk: int
    mask: int


class Method(nn.Module):
    """Base class of every method (see DESIGN.md section 4)."""

    decoding: ClassVar[str] = "beam"  # "beam" (autoregressive) or "mask_predict"
    # Whether the model reads sources as [CLS] x [SEP] (a BERT does) or as x [SEP] (fairseq's
    # Transformer reads x </s>); the trainer and the decoders encode sources to match.
    source_bos: bool = True
    # The values of the experiment setting `decoding` it accepts: at (beam), nat (mask-predict).
    decodings: ClassVar[tuple[str, ...]] = ("at",)

    @classmethod
    def build(cls, cfg: dict[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: dict[str, str] | None = None, weights: bool = True) -> Method:
        """Build the model from the resolved experiment config and the two vocabularies.

        `pretrained` maps a checkpoint role of the config (`src_bert`) to the directory holding
        it; a role missing there is taken from the config's checkpoint name (whose architecture
        `nmtbench.pretrained` knows offline). `weights=False` builds the architecture with
        random weights: for counting parameters, or before loading a trained run's state.
        """
        raise NotImplementedError

    @classmethod
    def config_keys(cls) -> set[str]:
        """The experiment-config keys this method reads (others are the trainer's)."""
        return set()

    def trainable_parameters(self) -> Iterator[nn.Parameter]:
        """The parameters the optimizer updates (frozen parts are left out)."""
        return (p for p in self.parameters() if p.requires_grad)

    def loss(self, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        """Mean training loss per target token, and its parts (floats) for the training log."""
        raise NotImplementedError

    # Incremental decoding hooks, used by nmtbench.decoding.beam_search.
    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Encode source ids (B, S); the returned state holds everything decoding needs."""
        raise NotImplementedError

    def decode_step(self, tokens: torch.Tensor, state: dict[str, Any]) -> torch.Tensor:
        """Feed the last generated token (B,) and return next-token log-probs (B, V).

        Updates `state` in place (key/value caches, position).
        """
        raise NotImplementedError

    def reorder_state(self, state: dict[str, Any], index: torch.Tensor) -> dict[str, Any]:
        """Select/repeat batch rows of every tensor in the state (beam search, mask-predict)."""
        raise NotImplementedError

    # Parallel decoding hooks, used by nmtbench.mask_predict.mask_predict: `encode`'s state
    # also holds "length_lprobs" (B, L), the log-probs of every target length.
    def predict(self, tokens: torch.Tensor, state: dict[str, Any]) -> torch.Tensor:
        """Log-probs (B, T, V) at every position of a partly masked target (B, T)."""
        raise NotImplementedError

    def num_params(self) -> dict[str, int]:
        total = sum(p.numel() for p in self.parameters())
        trained = sum(p.numel() for p in self.trainable_parameters())
        return {"total": total, "trained": trained}

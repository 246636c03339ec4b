"""Mask-Predict's conditional masked language model (CMLM; Ghazvininejad et al. 2019), the
non-autoregressive baseline of `000` and the training objective every NAT method here shares.

The model is the Transformer baseline with two changes: the decoder's self-attention sees the
whole target (no causal mask), and a LENGTH token, an embedding put in front of the embedded
source, is encoded with it; its output, scored against the table of length embeddings,
predicts the target length (class 0 is never predicted). The encoder output of the LENGTH
position is left out of what the decoder attends to.

Training (`losses`): the target [BOS] y [EOS] has k tokens of y replaced by [MASK], k uniform
in 1..|y| and the positions uniform among y's; label-smoothed cross-entropy on the masked tokens
(term `tokens`) plus 0.1 x the length NLL (term `length`; 0.1 is the weight of the Mask-Predict
and AB-Net criteria, `loss_weights.length`), divided by the number of masked tokens. Decoding:
`nmtbench.parts.mask_predict`. `ConditionalMaskedLM` is this objective over any encoder that
predicts lengths and any non-causal decoder: every parallel-decoding method's model.

Details the paper leaves to us, and what we chose (from the public Mask-Predict and AB-Net
code where they say): 256 length classes for the Transformer CMLM (Mask-Predict's), a target
longer than the longest predictable length is scored as that length; the LENGTH embedding is
added unscaled and without a position; [BOS] and [EOS] stay in the decoder input and are
never masked, and the predicted length counts the tokens between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nmtbench.data.tokenization import Vocab
from nmtbench.methods.transformer import (
    Encoded,
    SizedSettings,
    TransformerDecoder,
    TransformerEncoder,
    embedding,
    fairseq_init,
    reorder,
)
from nmtbench.parts.contract import Batch, Losses, Method, Model, Progress, method_settings
from nmtbench.parts.losses import compiled_smoothed_nll, smoothed_nll_of_logits


def target_sequence(batch: Batch, bos: int) -> torch.Tensor:
    """[BOS] y [EOS] (B, T+1), padded, from the batch's shifted target."""
    return torch.cat([torch.full_like(batch.tgt_out[:, :1], bos), batch.tgt_out], dim=1)


def sample_masks(content: torch.Tensor) -> torch.Tensor:
    """For each row of content (B, T) (True at the tokens that may be masked, n of them), mask
    k positions, k uniform in 1..n, the positions uniform among the n; rows with n = 0 mask
    nothing. Uses the global torch generator, so the trainer's seed fixes it."""
    n = content.sum(dim=1)  # (B,)
    k = torch.minimum((torch.rand(n.shape, device=content.device) * n).long() + 1, n)
    scores = torch.rand(content.shape, device=content.device).masked_fill(~content, 2.0)
    rank = scores.argsort(dim=1).argsort(dim=1)  # 0 = first chosen
    return rank < k[:, None]


class ConditionalMaskedLM(Model):
    """The CMLM objective and the `NonAutoregressive` hooks (mask-predict) over an encoder whose
    output carries a LENGTH state (`Encoded.length`, scored against `encoder.embed_lengths`)
    and a decoder that sees every position: `decoder(tokens, encoded) -> logits`, the same
    as `decoder.project(decoder.states(tokens, encoded))`."""

    decoding = "nat"

    def __init__(self, encoder: nn.Module, decoder: nn.Module, settings: SizedSettings,
                 src_vocab: Vocab, tgt_vocab: Vocab, source_bos: bool, max_length: int):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.settings = settings
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.source_bos = source_bos
        self.max_length = max_length

    def _length_logits(self, h: torch.Tensor) -> torch.Tensor:
        """The LENGTH position's output h (B, D) scored against every length embedding;
        lengths 1..max_length only (class 0 is the LENGTH token itself)."""
        logits = F.linear(h, self.encoder.embed_lengths.weight).float()  # (B, L)
        logits[:, 0] = float("-inf")
        logits[:, self.max_length + 1:] = float("-inf")  # longer than the decoder can hold
        return logits

    def losses(self, batch: Batch, progress: Progress | None = None) -> Losses:
        tokens, masked = self.mask_target(batch)
        return self.masked_losses(tokens, masked, self.encoder(batch.src))

    def mask_target(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The target [BOS] y [EOS] (B, T) and the positions masked in it (B, T)."""
        v = self.tgt_vocab
        tokens = target_sequence(batch, v.bos)
        content = (tokens != v.pad) & (tokens != v.bos) & (tokens != v.eos)
        return tokens, sample_masks(content)

    def masked_losses(self, tokens: torch.Tensor, masked: torch.Tensor,
                      encoded: Encoded) -> Losses:
        """The terms "tokens" (the masked tokens) and "length" given the encoder's output."""
        v = self.tgt_vocab
        content = (tokens != v.pad) & (tokens != v.bos) & (tokens != v.eos)
        lengths = content.sum(dim=1).clamp(max=self.max_length)  # (B,)
        length_nll = F.cross_entropy(self._length_logits(encoded.length), lengths,
                                     reduction="sum")
        logits = self.decoder(tokens.masked_fill(masked, v.mask), encoded)
        smoothed_nll = compiled_smoothed_nll() if self.compiled else smoothed_nll_of_logits
        loss_sum, nll_sum = smoothed_nll(logits[masked], tokens[masked],  # (M, V), (M,)
                                         self.settings.label_smoothing, v.pad)
        ntokens = masked.sum()
        return Losses({"tokens": loss_sum, "length": length_nll}, ntokens,
                      {"nll": nll_sum.detach().double() / ntokens})

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """The state also holds what a `TransformerDecoder` reads of the memory (each layer's
        keys and values), computed once for all mask-predict iterations."""
        encoded = self.encoder(src)
        context = {f"context.{k}": v for k, v in (encoded.context or {}).items()}
        layers = (self.decoder.memory_states(encoded)
                  if isinstance(self.decoder, TransformerDecoder) else {})
        return {"memory": encoded.memory, "src_mask": encoded.mask[:, 0, 0, :], **context,
                **layers,
                "length_lprobs": F.log_softmax(self._length_logits(encoded.length), dim=-1)}

    def predict(self, tokens: torch.Tensor, state: dict[str, torch.Tensor],
                positions: torch.Tensor | None = None) -> torch.Tensor:
        """Log-probs (B, T, V) at every position of tokens (B, T) ([MASK] where unknown), or
        (M, V) at the `positions` (B, T) chosen: only their states reach the output layer."""
        context = {k.removeprefix("context."): v for k, v in state.items()
                   if k.startswith("context.")}
        encoded = Encoded(state["memory"], state["src_mask"][:, None, None, :], None,
                          context or None)
        states = (self.decoder.states(tokens, encoded, state)  # its layers' memory, from encode
                  if isinstance(self.decoder, TransformerDecoder)
                  else self.decoder.states(tokens, encoded))  # (B, T, D)
        if positions is not None:
            states = states[positions]  # (M, D)
        return F.log_softmax(self.decoder.project(states), dim=-1, dtype=torch.float32)

    def reorder_state(self, state: dict[str, Any], index: torch.Tensor) -> dict[str, Any]:
        return reorder(state, index)


@method_settings("cmlm")
class CMLMSettings(SizedSettings):
    """Mask-Predict's settings."""


class CMLM(Method):
    """Transformer encoder with a LENGTH token (256 classes, Mask-Predict's) and a
    non-causal Transformer decoder."""

    settings = CMLMSettings
    parallel = ConditionalMaskedLM
    length_classes = 256

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None,
              weights: bool = True) -> ConditionalMaskedLM:
        settings = cls.read_settings(cfg)
        arch = settings.architecture
        src_embed, tgt_embed = embedding(src_vocab, arch.d_model), embedding(tgt_vocab,
                                                                             arch.d_model)
        encoder = TransformerEncoder(arch, src_embed)
        decoder = TransformerDecoder(arch, tgt_embed, causal=False)
        fairseq_init(src_embed, tgt_embed, encoder.layers, decoder.layers)
        encoder.embed_lengths = nn.Embedding(cls.length_classes, arch.d_model)
        nn.init.normal_(encoder.embed_lengths.weight, mean=0.0, std=arch.d_model ** -0.5)
        return cls.parallel(encoder, decoder, settings, src_vocab, tgt_vocab, settings.src_bos,
                            min(cls.length_classes - 1, arch.max_positions - 2))

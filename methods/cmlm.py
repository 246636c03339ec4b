"""Mask-Predict's conditional masked language model (CMLM; Ghazvininejad et al. 2019), the
non-autoregressive baseline of `000` and the training objective every NAT method here shares.

The model is the Transformer baseline with two changes: the decoder's self-attention sees the
whole target (no causal mask), and a LENGTH token, an embedding put in front of the embedded
source, is encoded with it; its output, scored against the table of length embeddings,
predicts the target length (class 0 is never predicted). The encoder output of the LENGTH
position is left out of what the decoder attends to.

Training (`loss`): the target [BOS] y [EOS] has k tokens of y replaced by [MASK], k uniform in
1..|y| and the positions uniform among y's; label-smoothed cross-entropy on the masked tokens
plus 0.1 x the length NLL (the weight of the Mask-Predict and AB-Net criteria), divided by the
number of masked tokens. Decoding: `nmtbench.mask_predict`.

Details the paper leaves to us, and what we chose (from the public Mask-Predict and AB-Net
code where they say): 256 length classes for the Transformer CMLM (Mask-Predict's), a target
longer than the longest predictable length is scored as that length; the LENGTH embedding is
added unscaled and without a position; [BOS] and [EOS] stay in the decoder input and are
never masked, and the predicted length counts the tokens between them.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from methods.transformer import Transformer, TransformerConfig, transformer_config
from nmtbench.errors import InputError
from nmtbench.losses import label_smoothed_nll
from nmtbench.method import Batch, Vocab

LENGTH_LOSS_WEIGHT = 0.1


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


class ConditionalMaskedLM(Transformer):
    """The CMLM objective and mask-predict hooks over two model-specific parts: `_encode`
    (memory, source mask, length logits) and `_decode` (logits of a partly masked target, by
    default from the non-causal Transformer decoder). Subclasses replace them."""

    decoding = "mask_predict"
    decodings = ("nat",)
    max_length: int  # the longest target (tokens between BOS and EOS) the model predicts

    def loss(self, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        v = self.tgt_vocab
        tokens = target_sequence(batch, v.bos)  # (B, T)
        content = (tokens != v.pad) & (tokens != v.bos) & (tokens != v.eos)
        masked = sample_masks(content)  # (B, T)
        memory, src_mask, length_logits = self._encode(batch.src)
        lengths = content.sum(dim=1).clamp(max=self.max_length)  # (B,)
        length_nll = F.cross_entropy(length_logits.float(), lengths, reduction="sum")
        logits = self._decode(tokens.masked_fill(masked, v.mask), memory, src_mask)
        lprobs = F.log_softmax(logits[masked].float(), dim=-1)  # (M, V)
        loss_sum, nll_sum = label_smoothed_nll(lprobs, tokens[masked], self.cfg.label_smoothing,
                                               v.pad)
        ntokens = int(masked.sum())
        loss = (loss_sum + LENGTH_LOSS_WEIGHT * length_nll) / ntokens
        return loss, {"loss": loss.item(), "nll": nll_sum.item() / ntokens,
                      "length_nll": length_nll.item() / len(lengths), "ntokens": ntokens}

    def _length_logits(self, h: torch.Tensor, table: nn.Embedding) -> torch.Tensor:
        """The LENGTH position's output h (B, D) scored against every length embedding;
        lengths 1..max_length only (class 0 is the LENGTH token itself)."""
        logits = F.linear(h, table.weight).float()  # (B, L)
        logits[:, 0] = float("-inf")
        logits[:, self.max_length + 1:] = float("-inf")  # longer than the decoder can hold
        return logits

    # mask-predict hooks
    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        memory, src_mask, length_logits = self._encode(src)
        return {"memory": memory, "src_mask": src_mask[:, 0, 0, :],
                "length_lprobs": F.log_softmax(length_logits, dim=-1)}

    def predict(self, tokens: torch.Tensor, state: dict[str, torch.Tensor]) -> torch.Tensor:
        """Log-probs (B, T, V) at every position of tokens (B, T) ([MASK] where unknown)."""
        logits = self._decode(tokens, state["memory"], state["src_mask"][:, None, None, :])
        return F.log_softmax(logits.float(), dim=-1)

    def _encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def _decode(self, tokens: torch.Tensor, memory: torch.Tensor,
                src_mask: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, V) from the Transformer decoder, every position
        seeing every real position."""
        tgt_mask = (tokens != self.tgt_vocab.pad)[:, None, None, :]  # (B, 1, 1, T)
        x = self._embed(self.tgt_embed, tokens)
        for layer in self.decoder:
            x, _ = layer(x, *layer.cross_attn.kv(memory), src_mask, tgt_mask=tgt_mask)
        return self._logits(x)


class CMLM(ConditionalMaskedLM):
    """Transformer encoder with a LENGTH token and a non-causal Transformer decoder."""

    length_classes = 256

    def __init__(self, cfg: TransformerConfig, src_vocab: Vocab, tgt_vocab: Vocab,
                 memory_dim: int | None = None):
        super().__init__(cfg, src_vocab, tgt_vocab, memory_dim)
        self.embed_lengths = nn.Embedding(self.length_classes, cfg.d_model)
        nn.init.normal_(self.embed_lengths.weight, mean=0.0, std=cfg.d_model ** -0.5)
        self.max_length = min(self.length_classes - 1, cfg.max_positions - 2)

    @classmethod
    def build(cls, cfg: dict[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: dict[str, str] | None = None, weights: bool = True) -> CMLM:
        if cfg.get("decoding", "nat") != "nat":
            raise InputError(f"method cmlm decodes in parallel: decoding {cfg['decoding']!r} "
                             "must be 'nat'")
        return cls(transformer_config(cfg), src_vocab, tgt_vocab)

    @classmethod
    def config_keys(cls) -> set[str]:
        return {"size", "decoding"} | {f.name for f in fields(TransformerConfig)}

    def _encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """src (B, S) -> memory (B, S, D), key mask (B, 1, 1, S), length logits (B, L)."""
        keep = src != self.src_vocab.pad  # (B, S)
        x = self._embed(self.src_embed, src)  # (B, S, D)
        length = self.embed_lengths.weight[:1].expand(src.size(0), 1, -1)  # (B, 1, D)
        x = torch.cat([length, x], dim=1)  # (B, 1 + S, D)
        mask = torch.cat([torch.ones_like(keep[:, :1]), keep], dim=1)[:, None, None, :]
        for layer in self.encoder:
            x = layer(x, mask)
        x = self.encoder_norm(x)
        return x[:, 1:], keep[:, None, None, :], self._length_logits(x[:, 0], self.embed_lengths)

"""AB-Net (Guo et al., NeurIPS 2020, `000`): two frozen BERTs joined by adapters.

- Encoder: the source-side BERT with an FFN adapter after every layer (Eq. 4-5),
  H + W2 ReLU(W1 LN(H)), hidden size `adapter_dim` (d_Aenc: 512 IWSLT14, 2048 WMT). A LENGTH
  token, an embedding put in front of the BERT's embedded source, predicts the target length
  from its final state (as Mask-Predict).
- Decoder: the target-side BERT, non-causal, with a cross-attention adapter after every layer
  (Eq. 6), LN(H + MHA(H, H_E, H_E)) over the final encoder output, whose width is the BERT's
  (d_Adec = 768 for base). The BERT's own masked-LM head predicts the tokens.
- Only the adapters and the length embeddings train (`freeze_bert: true`); the BERTs'
  embeddings, layers and heads stay as pre-trained. Trained with the CMLM objective and decoded
  with mask-predict (`methods.cmlm`, `nmtbench.mask_predict`).

Variants, all settings of this one method (the paper's ablations are experiments in config):
- `tgt_bert: null`: AB-Net-Enc, the source side as above with a Transformer decoder of `size`
  trained from scratch: non-causal (CMLM) with `decoding: nat`, the autoregressive Transformer
  decoder with `decoding: at` (Table 3a; beam search, no LENGTH token);
- `encoder_adapter_layers` / `decoder_adapter_layers`: `all`, `none`, `top-K` or a list of
  0-based layer indices (Table 3b (1), (3), (5), (6));
- `freeze_bert: false`: everything trains ("AB-Net FB", Figure 3a); `bert_init: random`: the
  BERT architectures with random weights ("AB-Net SC").

Details the paper leaves to us, and what we chose (from the authors' public code where it
says): the encoder adapter's linears have no bias and xavier-uniform weights; the length table
has 1024 classes at the source BERT's width, N(0, 0.02); the LENGTH position is dropped from
the memory; the decoder adapter is post-norm with dropout `dropout` on its output and one head
per BERT head (the paper gives no head count). The authors' code also puts an FFN after each
decoder cross-attention; the paper's equations and its 67M trained parameters (Table 1) have
none, so neither do we. The frozen BERTs keep their dropout active in training (the authors'
code trains them in train mode), and gradients flow through them to the adapters below.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from methods.cmlm import ConditionalMaskedLM
from methods.transformer import (
    MultiheadAttention,
    Transformer,
    TransformerConfig,
    transformer_config,
)
from nmtbench.errors import InputError
from nmtbench.method import Vocab
from nmtbench.pretrained import check_vocab, freeze, load_model

LENGTH_CLASSES = 1024
BERT_INITS = ("pretrained", "random")


def adapter_layers(spec: Any, n_layers: int, key: str) -> list[int]:
    """The 0-based BERT layers a layer spec names: all, none, top-K or a list of indices."""
    if spec == "all":
        return list(range(n_layers))
    if spec == "none":
        return []
    if isinstance(spec, str) and (m := re.fullmatch(r"top-(\d+)", spec)):
        k = int(m.group(1))
        if not 0 < k <= n_layers:
            raise InputError(f"{key} {spec!r}: the BERT has {n_layers} layers")
        return list(range(n_layers - k, n_layers))
    if isinstance(spec, list) and all(isinstance(i, int) and 0 <= i < n_layers for i in spec):
        return sorted(set(spec))
    raise InputError(f"{key} {spec!r}: use all, none, top-K or a list of layer indices "
                     f"below {n_layers}")


class FFNAdapter(nn.Module):
    """H + W2 ReLU(W1 LN(H)) (Eq. 4)."""

    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.w1 = nn.Linear(width, hidden, bias=False)
        self.w2 = nn.Linear(hidden, width, bias=False)
        nn.init.xavier_uniform_(self.w1.weight)
        nn.init.xavier_uniform_(self.w2.weight)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.w2(F.relu(self.w1(self.norm(h))))


class CrossAttentionAdapter(nn.Module):
    """LN(H + dropout(MHA(H, H_E, H_E))) (Eq. 6), H_E of width `memory_dim`."""

    def __init__(self, width: int, heads: int, memory_dim: int, dropout: float,
                 attention_dropout: float):
        super().__init__()
        self.attn = MultiheadAttention(width, heads, attention_dropout, kdim=memory_dim)
        self.norm = nn.LayerNorm(width)
        self.drop = nn.Dropout(dropout)
        for proj in (self.attn.q_proj, self.attn.k_proj, self.attn.v_proj, self.attn.out_proj):
            nn.init.xavier_uniform_(proj.weight)
            nn.init.zeros_(proj.bias)

    def forward(self, h: torch.Tensor, memory: torch.Tensor,
                src_mask: torch.Tensor) -> torch.Tensor:
        return self.norm(h + self.drop(self.attn(h, *self.attn.kv(memory), mask=src_mask)))


class SourceBert(nn.Module):
    """The source-side BERT with FFN adapters after the chosen layers and, for parallel
    decoding, a LENGTH token; returns the final states without the LENGTH position."""

    def __init__(self, bert: nn.Module, adapter_dim: int, layers: list[int],
                 length_classes: int):
        super().__init__()
        self.bert = bert
        width = bert.config.hidden_size
        self.adapters = nn.ModuleDict({str(i): FFNAdapter(width, adapter_dim) for i in layers})
        self.embed_lengths = nn.Embedding(length_classes, width) if length_classes else None
        if self.embed_lengths is not None:
            nn.init.normal_(self.embed_lengths.weight, mean=0.0, std=0.02)

    @classmethod
    def build(cls, bert: nn.Module, vocab: Vocab, settings: dict[str, Any],
              length_classes: int) -> SourceBert:
        """From an experiment's settings (`adapter_dim`, `encoder_adapter_layers`)."""
        check_vocab(vocab.size, bert, "source")
        layers = adapter_layers(settings.get("encoder_adapter_layers", "all"),
                                bert.config.num_hidden_layers, "encoder_adapter_layers")
        return cls(bert, settings.get("adapter_dim", 2048), layers, length_classes)

    def forward(self, src: torch.Tensor, keep: torch.Tensor,
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """src (B, S), keep (B, S) True at real tokens -> states (B, S, H), LENGTH state (B, H)."""
        h = self.bert.embeddings(input_ids=src)  # (B, S, H)
        if self.embed_lengths is not None:
            length = self.embed_lengths.weight[:1].expand(src.size(0), 1, -1)
            h = torch.cat([length.to(h.dtype), h], dim=1)
            keep = torch.cat([torch.ones_like(keep[:, :1]), keep], dim=1)
        mask = keep[:, None, None, :]
        for i, layer in enumerate(self.bert.encoder.layer):
            h = layer(h, mask)
            if str(i) in self.adapters:
                h = self.adapters[str(i)](h)
        if self.embed_lengths is None:
            return h, None
        return h[:, 1:], h[:, 0]


class TargetBert(nn.Module):
    """The target-side BERT (masked LM) with cross-attention adapters after chosen layers."""

    def __init__(self, mlm: nn.Module, layers: list[int], memory_dim: int, dropout: float,
                 attention_dropout: float):
        super().__init__()
        self.mlm = mlm
        config = mlm.config
        self.adapters = nn.ModuleDict({
            str(i): CrossAttentionAdapter(config.hidden_size, config.num_attention_heads,
                                          memory_dim, dropout, attention_dropout)
            for i in layers})

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor, memory: torch.Tensor,
                src_mask: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, V) over the BERT's vocabulary."""
        h = self.mlm.bert.embeddings(input_ids=tokens)
        mask = keep[:, None, None, :]
        for i, layer in enumerate(self.mlm.bert.encoder.layer):
            h = layer(h, mask)
            if str(i) in self.adapters:
                h = self.adapters[str(i)](h, memory, src_mask)
        return self.mlm.cls(h)


def _load_berts(cfg: dict[str, Any], pretrained: dict[str, str] | None,
                weights: bool) -> tuple[nn.Module, nn.Module | None]:
    """The source BERT and the target BERT with its masked-LM head (None for AB-Net-Enc)."""
    bert_init = cfg.get("bert_init", "pretrained")
    if bert_init not in BERT_INITS:
        raise InputError(f"bert_init {bert_init!r}: use one of {', '.join(BERT_INITS)}")
    weights = weights and bert_init == "pretrained"
    found = pretrained or {}
    if not cfg.get("src_bert"):
        raise InputError("abnet needs `src_bert` (the source-side checkpoint); set it in the "
                         "experiment or as the dataset's checkpoints.src")
    # our own layer loop passes boolean masks, which the sdpa attention takes as they are
    src = load_model(found.get("src_bert", cfg["src_bert"]), weights=weights,
                     add_pooling_layer=False, attn_implementation="sdpa")
    tgt = None
    if cfg.get("tgt_bert"):
        tgt = load_model(found.get("tgt_bert", cfg["tgt_bert"]), weights=weights,
                         masked_lm=True, attn_implementation="sdpa")
    return src, tgt


def _frozen(settings: dict[str, Any]) -> bool:
    """AB-Net freezes both BERTs whole (true, the paper) or nothing (false, "AB-Net FB")."""
    policy = settings.get("freeze_bert", True)
    if policy not in (True, False, "all", "none"):
        raise InputError(f"abnet freeze_bert {policy!r}: use true (all) or false (none)")
    return policy in (True, "all")


class ABNet(ConditionalMaskedLM):
    """AB-Net and AB-Net-Enc with parallel decoding; `build` returns `ABNetEncAT` for
    `decoding: at`."""

    decodings = ("nat", "at")

    def __init__(self, cfg: TransformerConfig, settings: dict[str, Any], src_bert: nn.Module,
                 tgt_bert: nn.Module | None, src_vocab: Vocab, tgt_vocab: Vocab):
        width = src_bert.config.hidden_size
        super().__init__(replace(cfg, encoder_layers=0, src_bos=True,  # BERT reads [CLS] x [SEP]
                                 decoder_layers=0 if tgt_bert is not None else cfg.decoder_layers),
                         src_vocab, tgt_vocab, memory_dim=width)
        del self.src_embed  # the BERT reads the source
        self.encoder_norm = nn.Identity()
        self.source = SourceBert.build(src_bert, src_vocab, settings, LENGTH_CLASSES)
        self.target: TargetBert | None = None
        if tgt_bert is not None:
            del self.tgt_embed  # the target BERT's embeddings and head
            check_vocab(tgt_vocab.size, tgt_bert, "target")
            self.target = TargetBert(
                tgt_bert, adapter_layers(settings.get("decoder_adapter_layers", "all"),
                                         tgt_bert.config.num_hidden_layers,
                                         "decoder_adapter_layers"),
                width, cfg.dropout, cfg.attention_dropout)
        positions = (tgt_bert.config.max_position_embeddings if tgt_bert is not None
                     else cfg.max_positions)
        self.max_length = min(LENGTH_CLASSES - 1, positions - 2)
        if _frozen(settings):
            freeze(src_bert, "all")
            if tgt_bert is not None:
                for p in tgt_bert.parameters():
                    p.requires_grad_(False)

    @classmethod
    def build(cls, cfg: dict[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: dict[str, str] | None = None, weights: bool = True,
              ) -> ABNet | ABNetEncAT:
        decoding = cfg.get("decoding", "nat")
        if decoding not in ("nat", "at"):
            raise InputError(f"abnet decoding {decoding!r}: use nat or at")
        src, tgt = _load_berts(cfg, pretrained, weights)
        if decoding == "at":
            if tgt is not None:
                raise InputError("abnet with decoding 'at' is AB-Net-Enc: set tgt_bert: null")
            return ABNetEncAT(transformer_config(cfg), cfg, src, src_vocab, tgt_vocab)
        return cls(transformer_config(cfg), cfg, src, tgt, src_vocab, tgt_vocab)

    @classmethod
    def config_keys(cls) -> set[str]:
        return (Transformer.config_keys() - {"src_bos"}) | {  # a BERT always reads [CLS]
            "decoding", "src_bert", "tgt_bert", "freeze_bert", "bert_init", "adapter_dim",
            "encoder_adapter_layers", "decoder_adapter_layers"}

    def _encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        keep = src != self.src_vocab.pad
        memory, length = self.source(src, keep)
        return memory, keep[:, None, None, :], self._length_logits(length,
                                                                   self.source.embed_lengths)

    def _decode(self, tokens: torch.Tensor, memory: torch.Tensor,
                src_mask: torch.Tensor) -> torch.Tensor:
        if self.target is None:  # AB-Net-Enc: the CMLM's Transformer decoder
            return super()._decode(tokens, memory, src_mask)
        return self.target(tokens, tokens != self.tgt_vocab.pad, memory, src_mask)


class ABNetEncAT(Transformer):
    """AB-Net-Enc with autoregressive decoding (Table 3a): the adapted source BERT under a
    Transformer decoder trained from scratch; decoded by beam search."""

    def __init__(self, cfg: TransformerConfig, settings: dict[str, Any], src_bert: nn.Module,
                 src_vocab: Vocab, tgt_vocab: Vocab):
        super().__init__(replace(cfg, encoder_layers=0, src_bos=True), src_vocab, tgt_vocab,
                         memory_dim=src_bert.config.hidden_size)
        del self.src_embed
        self.encoder_norm = nn.Identity()
        self.source = SourceBert.build(src_bert, src_vocab, settings, 0)
        if _frozen(settings):
            freeze(src_bert, "all")

    def _encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keep = src != self.src_vocab.pad
        memory, _ = self.source(src, keep)
        return memory, keep[:, None, None, :]

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
  with mask-predict (`nmtbench.methods.cmlm`, `nmtbench.parts.mask_predict`).

Variants, all settings of this one method (the paper's ablations are experiments in config):
- `tgt_bert: null`: AB-Net-Enc, the source side as above with a Transformer decoder of `size`
  trained from scratch: non-causal (CMLM) with `decoding: nat`, the autoregressive Transformer
  decoder with `decoding: at` (Table 3a; beam search, no LENGTH token). The three are one
  encoder module under one of three decoders, joined by the shared `ConditionalMaskedLM`
  (parallel) or `EncoderDecoder` (autoregressive);
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
code trains them in train mode), and gradients flow through them to the adapters below;
`bert_dropout` sets that dropout instead of the checkpoints' own (the toy world: 0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.methods.cmlm import ConditionalMaskedLM
from nmtbench.methods.transformer import (
    Encoded,
    EncoderDecoder,
    MultiheadAttention,
    SizedSettings,
    TransformerDecoder,
    embedding,
    fairseq_init,
)
from nmtbench.parts.contract import Method, mark_pretrained, method_settings
from nmtbench.parts.pretrained import check_vocab, load_model

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
    """The encoder: the source-side BERT with FFN adapters after the chosen layers and, for
    parallel decoding, a LENGTH token whose final state predicts the target length."""

    def __init__(self, bert: nn.Module, pad: int, adapter_dim: int, layers: list[int],
                 length_classes: int):
        super().__init__()
        self.bert = bert
        self.pad = pad
        width = bert.config.hidden_size
        self.adapters = nn.ModuleDict({str(i): FFNAdapter(width, adapter_dim) for i in layers})
        self.embed_lengths = nn.Embedding(length_classes, width) if length_classes else None
        if self.embed_lengths is not None:
            nn.init.normal_(self.embed_lengths.weight, mean=0.0, std=0.02)

    def forward(self, src: torch.Tensor) -> Encoded:
        """src (B, S) -> states (B, S, H) and, with a LENGTH token, its state (B, H)."""
        keep = src != self.pad  # (B, S)
        h = self.bert.embeddings(input_ids=src)  # (B, S, H)
        if self.embed_lengths is not None:
            length = self.embed_lengths.weight[:1].expand(src.size(0), 1, -1)
            h = torch.cat([length.to(h.dtype), h], dim=1)
            keep = torch.cat([torch.ones_like(keep[:, :1]), keep], dim=1)
        for i, layer in enumerate(self.bert.encoder.layer):
            h = layer(h, keep[:, None, None, :])
            if str(i) in self.adapters:
                h = self.adapters[str(i)](h)
        if self.embed_lengths is None:
            return Encoded(h, keep[:, None, None, :])
        return Encoded(h[:, 1:], keep[:, None, None, 1:], h[:, 0])


class TargetBert(nn.Module):
    """The parallel decoder: the target-side BERT (masked LM), non-causal, with
    cross-attention adapters after the chosen layers."""

    def __init__(self, mlm: nn.Module, pad: int, layers: list[int], memory_dim: int,
                 dropout: float, attention_dropout: float):
        super().__init__()
        self.mlm = mlm
        self.pad = pad
        config = mlm.config
        self.adapters = nn.ModuleDict({
            str(i): CrossAttentionAdapter(config.hidden_size, config.num_attention_heads,
                                          memory_dim, dropout, attention_dropout)
            for i in layers})

    def states(self, tokens: torch.Tensor, encoded: Encoded) -> torch.Tensor:
        """tokens (B, T) -> the last layer's states (B, T, D), which the MLM head reads."""
        h = self.mlm.bert.embeddings(input_ids=tokens)
        mask = (tokens != self.pad)[:, None, None, :]
        for i, layer in enumerate(self.mlm.bert.encoder.layer):
            h = layer(h, mask)
            if str(i) in self.adapters:
                h = self.adapters[str(i)](h, encoded.memory, encoded.mask)
        return h

    def project(self, states: torch.Tensor) -> torch.Tensor:
        """The BERT's MLM head: states (..., D) -> logits (..., V)."""
        return self.mlm.cls(states)

    def forward(self, tokens: torch.Tensor, encoded: Encoded) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, V) over the BERT's vocabulary."""
        return self.project(self.states(tokens, encoded))


@method_settings("abnet")
class ABNetSettings(SizedSettings):
    """AB-Net's settings (no `encoder_layers`: the encoder is the pre-trained model)."""


def _load_berts(settings: ABNetSettings, pretrained: Mapping[str, Any] | None,
                weights: bool) -> tuple[nn.Module, nn.Module | None]:
    """The source BERT and the target BERT with its masked-LM head (None for AB-Net-Enc),
    marked as pre-trained unless `bert_init: random`."""
    if settings.bert_init not in BERT_INITS:
        raise InputError(f"bert_init {settings.bert_init!r}: use one of {', '.join(BERT_INITS)}")
    if settings.freeze_bert not in (True, False, "all", "none"):
        raise InputError(f"abnet freeze_bert {settings.freeze_bert!r}: use true (all) or false "
                         "(none)")
    if not settings.src_bert:
        raise InputError("abnet needs `src_bert` (the source-side checkpoint); set it in the "
                         "experiment or as the dataset's checkpoints.src")
    loaded = settings.bert_init == "pretrained"
    found = pretrained or {}
    # our own layer loop passes boolean masks, which the sdpa attention takes as they are
    berts = [load_model(found.get("src_bert", settings.src_bert), weights=weights and loaded,
                        add_pooling_layer=False, attn_implementation="sdpa")]
    if settings.tgt_bert:
        berts.append(load_model(found.get("tgt_bert", settings.tgt_bert),
                                weights=weights and loaded, masked_lm=True,
                                attn_implementation="sdpa"))
    frozen = settings.freeze_bert in (True, "all")
    for bert in berts:
        for p in bert.parameters():
            p.requires_grad_(not frozen)
        if settings.bert_dropout is not None:
            set_dropout(bert, settings.bert_dropout)
        if loaded:
            mark_pretrained(bert)
    return berts[0], berts[1] if len(berts) > 1 else None


def set_dropout(bert: nn.Module, p: float) -> None:
    """Every dropout of a BERT (hidden states and attention probabilities) at rate `p`."""
    bert.config.hidden_dropout_prob = bert.config.attention_probs_dropout_prob = p
    for module in bert.modules():
        if isinstance(module, nn.Dropout):
            module.p = p


class ABNet(Method):
    """AB-Net, and AB-Net-Enc with parallel or autoregressive decoding."""

    settings = ABNetSettings
    autoregressive = EncoderDecoder
    parallel = ConditionalMaskedLM

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None, weights: bool = True,
              ) -> ConditionalMaskedLM | EncoderDecoder:
        settings = cls.read_settings(cfg)
        if settings.decoding == "at" and settings.tgt_bert:
            raise InputError("abnet with decoding 'at' is AB-Net-Enc: set tgt_bert: null")
        src_bert, tgt_bert = _load_berts(settings, pretrained, weights)
        check_vocab(src_vocab.size, src_bert, "source")
        width = src_bert.config.hidden_size
        nat = settings.decoding == "nat"
        encoder = SourceBert(
            src_bert, src_vocab.pad, settings.adapter_dim,
            adapter_layers(settings.encoder_adapter_layers, src_bert.config.num_hidden_layers,
                           "encoder_adapter_layers"),
            LENGTH_CLASSES if nat else 0)
        arch = settings.architecture
        if tgt_bert is not None:
            check_vocab(tgt_vocab.size, tgt_bert, "target")
            decoder: nn.Module = TargetBert(
                tgt_bert, tgt_vocab.pad,
                adapter_layers(settings.decoder_adapter_layers,
                               tgt_bert.config.num_hidden_layers, "decoder_adapter_layers"),
                width, arch.dropout, arch.attention_dropout)
            positions = tgt_bert.config.max_position_embeddings
        else:  # AB-Net-Enc: a Transformer decoder trained from scratch
            tgt_embed = embedding(tgt_vocab, arch.d_model)
            decoder = TransformerDecoder(arch, tgt_embed, causal=not nat, memory_dim=width)
            fairseq_init(tgt_embed, decoder.layers)
            positions = arch.max_positions
        if not nat:
            return cls.autoregressive(encoder, decoder, settings, src_vocab, tgt_vocab,
                                      source_bos=True)  # a BERT reads [CLS] x [SEP]
        return cls.parallel(encoder, decoder, settings, src_vocab, tgt_vocab, source_bos=True,
                            max_length=min(LENGTH_CLASSES - 1, positions - 2))

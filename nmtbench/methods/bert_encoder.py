"""BERT as the NMT encoder: initialised from BERT and fine-tuned (`bert-init`), or frozen
(`bert-frozen`). The baselines of `001` Table 2 (lines 2-3) and `002` (BERT-fused Table 1).

The encoder is the checkpoint's own `BertModel` (its embeddings, learned positions and GELU
layers, loaded through `transformers`); the decoder is the Transformer baseline's, sized by
`size` like any Transformer, and its cross-attention reads the BERT's width through its own
key/value projections (fairseq's kdim/vdim) when the decoder is narrower.

`bert_output_as` says what the BERT output is:
- `encoder` (default): the BERT's last layer is the encoder output the decoder attends to
  (`001`: "use mBERT to initialise the encoder" / "use frozen mBERT as the encoder");
- `embeddings`: the BERT's last layer replaces the source embeddings of a standard NMT
  encoder of `encoder_layers` layers, which trains (`002` Table 1, ELMo-style).

`freeze_bert` is a policy of `nmtbench.parts.pretrained.freeze`: `none` for bert-init, `all` for
bert-frozen, or anything in between (`embeddings`, `below-top-K`).

Details the papers leave open, and what we chose:
- a fully frozen BERT runs in eval mode (no dropout) and without gradients: its output is a
  fixed feature of the source, as a frozen feature extractor's is;
- with `embeddings`, a linear map (xavier, no bias) takes the BERT width to d_model when they
  differ, then dropout; no positions are added, as the BERT output already encodes them;
- the source must be tokenized with the BERT's own vocabulary (the workflow does so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.methods.transformer import (
    Encoded,
    EncoderDecoder,
    EncoderLayer,
    SizedSettings,
    TransformerConfig,
    TransformerDecoder,
    embedding,
    fairseq_init,
)
from nmtbench.parts.contract import Method, mark_pretrained, method_settings
from nmtbench.parts.pretrained import check_vocab, freeze, load_model

OUTPUT_AS = ("encoder", "embeddings")


@method_settings("bert-init")
class BertInitSettings(SizedSettings):
    """bert-init's settings."""


@method_settings("bert-frozen")
class BertFrozenSettings(BertInitSettings):
    """bert-frozen's settings: bert-init's, the BERT frozen by default."""


class BertEncoder(nn.Module):
    """The source side: a BERT, and with `as_embeddings` a Transformer encoder stack of
    cfg.encoder_layers over its last layer (after a linear map to d_model when the widths
    differ, then dropout)."""

    def __init__(self, bert: nn.Module, pad: int, cfg: TransformerConfig, as_embeddings: bool):
        super().__init__()
        self.bert = bert
        self.pad = pad
        self.frozen = not any(p.requires_grad for p in bert.parameters())
        width = bert.config.hidden_size
        self.proj: nn.Module = nn.Identity()
        if as_embeddings and width != cfg.d_model:
            self.proj = nn.Linear(width, cfg.d_model, bias=False)
        self.drop = nn.Dropout(cfg.dropout) if as_embeddings else nn.Identity()
        self.layers = nn.ModuleList(EncoderLayer(cfg)
                                    for _ in range(cfg.encoder_layers if as_embeddings else 0))
        # the BERT's last layer is already normalised; a pre-norm stack over it is not
        self.norm = nn.LayerNorm(cfg.d_model) if as_embeddings and cfg.pre_norm else nn.Identity()

    def train(self, mode: bool = True) -> BertEncoder:
        super().train(mode)
        if self.frozen:
            self.bert.eval()
        return self

    def forward(self, src: torch.Tensor) -> Encoded:
        """src (B, S) BERT wordpiece ids -> memory (B, S, D or the BERT's width)."""
        keep = src != self.pad  # (B, S)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.frozen):
            x = self.bert(input_ids=src, attention_mask=keep.long()).last_hidden_state
        mask = keep[:, None, None, :]  # (B, 1, 1, S)
        x = self.drop(self.proj(x))
        for layer in self.layers:
            x = layer(x, mask)
        return Encoded(self.norm(x), mask)


class BertInit(Method):
    """NMT encoder initialised from BERT and fine-tuned with the rest of the model."""

    settings = BertInitSettings
    autoregressive = EncoderDecoder

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None,
              weights: bool = True) -> EncoderDecoder:
        settings = cls.read_settings(cfg)
        if settings.bert_output_as not in OUTPUT_AS:
            raise InputError(f"bert_output_as {settings.bert_output_as!r}: use one of "
                             f"{', '.join(OUTPUT_AS)}")
        if not settings.src_bert:
            raise InputError("bert methods need `src_bert` (the source-side checkpoint); set it "
                             "in the experiment or as the dataset's checkpoints.src")
        source = (pretrained or {}).get("src_bert", settings.src_bert)
        bert = mark_pretrained(load_model(source, weights=weights, add_pooling_layer=False))
        check_vocab(src_vocab.size, bert, "source")
        freeze(bert, settings.freeze_bert)
        arch = settings.architecture
        as_embeddings = settings.bert_output_as == "embeddings"
        tgt_embed = embedding(tgt_vocab, arch.d_model)
        encoder = BertEncoder(bert, src_vocab.pad, arch, as_embeddings)
        decoder = TransformerDecoder(
            arch, tgt_embed, memory_dim=None if as_embeddings else bert.config.hidden_size)
        fairseq_init(tgt_embed, encoder.layers, decoder.layers)
        if isinstance(encoder.proj, nn.Linear):
            nn.init.xavier_uniform_(encoder.proj.weight)
        return cls.autoregressive(encoder, decoder, settings, src_vocab, tgt_vocab,
                                  source_bos=True)  # the BERT reads [CLS] x [SEP]


class BertFrozen(BertInit):
    """Frozen BERT as the encoder (or as the encoder's input embeddings)."""

    settings = BertFrozenSettings

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

`freeze_bert` is a policy of `nmtbench.pretrained.freeze`: `none` for bert-init, `all` for
bert-frozen, or anything in between (`embeddings`, `below-top-K`).

Details the papers leave open, and what we chose:
- a fully frozen BERT runs in eval mode (no dropout) and without gradients: its output is a
  fixed feature of the source, as a frozen feature extractor's is;
- with `embeddings`, a linear map (xavier, no bias) takes the BERT width to d_model when they
  differ, then dropout; no positions are added, as the BERT output already encodes them;
- the source must be tokenized with the BERT's own vocabulary (the workflow does so).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

import torch
from torch import nn

from methods.transformer import Transformer, TransformerConfig, transformer_config
from nmtbench.errors import InputError
from nmtbench.method import Vocab
from nmtbench.pretrained import check_vocab, freeze, load_model

OUTPUT_AS = ("encoder", "embeddings")


class BertEncoderTransformer(Transformer):
    """A Transformer whose source side is a (fine-tuned or frozen) BERT."""

    default_freeze: ClassVar[str] = "none"

    def __init__(self, cfg: TransformerConfig, bert: nn.Module, src_vocab: Vocab,
                 tgt_vocab: Vocab, freeze_bert: str | bool, bert_output_as: str):
        if bert_output_as not in OUTPUT_AS:
            raise InputError(f"bert_output_as {bert_output_as!r}: use one of "
                             f"{', '.join(OUTPUT_AS)}")
        width = bert.config.hidden_size
        check_vocab(src_vocab.size, bert, "source")
        as_embeddings = bert_output_as == "embeddings"
        super().__init__(replace(cfg, encoder_layers=cfg.encoder_layers if as_embeddings else 0,
                                 src_bos=True),  # the BERT reads [CLS] x [SEP]
                         src_vocab, tgt_vocab, memory_dim=None if as_embeddings else width)
        del self.src_embed  # the BERT's embeddings read the source
        self.as_embeddings = as_embeddings
        self.bert = bert
        self.bert_proj: nn.Module = nn.Identity()
        if as_embeddings and width != cfg.d_model:
            self.bert_proj = nn.Linear(width, cfg.d_model, bias=False)
            nn.init.xavier_uniform_(self.bert_proj.weight)
        if not as_embeddings:
            self.encoder_norm = nn.Identity()  # the BERT's last layer is already normalised
        freeze(self.bert, freeze_bert)
        self.bert_frozen = not any(p.requires_grad for p in self.bert.parameters())

    @classmethod
    def build(cls, cfg: dict[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: dict[str, str] | None = None,
              weights: bool = True) -> BertEncoderTransformer:
        if "src_bert" not in cfg:
            raise InputError("bert methods need `src_bert` (the source-side checkpoint); set it "
                             "in the experiment or as the dataset's checkpoints.src")
        source = (pretrained or {}).get("src_bert", cfg["src_bert"])
        bert = load_model(source, weights=weights, add_pooling_layer=False)
        return cls(transformer_config(cfg), bert, src_vocab, tgt_vocab,
                   cfg.get("freeze_bert", cls.default_freeze),
                   cfg.get("bert_output_as", "encoder"))

    @classmethod
    def config_keys(cls) -> set[str]:
        # no src_bos: a BERT always reads [CLS] x [SEP]
        return (Transformer.config_keys() - {"src_bos"}) | {"src_bert", "freeze_bert",
                                                             "bert_output_as"}

    def train(self, mode: bool = True) -> BertEncoderTransformer:
        super().train(mode)
        if self.bert_frozen:
            self.bert.eval()
        return self

    def _encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) BERT wordpiece ids -> encoder output (B, S, D or BERT width), key mask."""
        keep = src != self.src_vocab.pad  # (B, S)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.bert_frozen):
            x = self.bert(input_ids=src, attention_mask=keep.long()).last_hidden_state
        src_mask = keep[:, None, None, :]  # (B, 1, 1, S)
        if self.as_embeddings:
            x = self.drop(self.bert_proj(x))  # (B, S, D)
            for layer in self.encoder:
                x = layer(x, src_mask)
        return self.encoder_norm(x), src_mask


class BertInit(BertEncoderTransformer):
    """NMT encoder initialised from BERT and fine-tuned with the rest of the model."""

    default_freeze = "none"


class BertFrozen(BertEncoderTransformer):
    """Frozen BERT as the encoder (or as the encoder's input embeddings)."""

    default_freeze = "all"

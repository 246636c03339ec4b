"""BERT-fused NMT (Zhu et al., ICLR 2020, `002`), autoregressive and on the Mask-Predict
backbone ("BERT-fused NAT", the baseline of AB-Net Table 1).

A frozen BERT reads the source; H_B is its last layer. Every encoder layer attends to H_B
beside its self-attention, every decoder layer beside its encoder-decoder attention; each
pair of branches (dropped out on its own) is averaged into the one residual. Drop-net
(`drop_net` = p_net): in training each fused sub-layer, independently at every forward pass,
keeps only its usual branch with probability p_net/2, only the BERT branch with p_net/2,
and averages them otherwise; inference always averages. The BERT attentions are new and
randomly initialised (fairseq's attention initialisation, gain 1 for their keys and values,
which read the BERT's width); the rest is a Transformer (`nmtbench.methods.transformer`),
warm-started from a trained run through the core's `init_from` run input (parameter names are the
Transformer's, so the warm start reports exactly the BERT attentions as missing). With
`decoding: nat` the same model is a conditional masked LM (LENGTH token, non-causal decoder,
`nmtbench.methods.cmlm`), decoded by mask-predict.

Ablations of `002` Table 6, each a setting: `bert_enc_attention` / `bert_dec_attention`
(remove either attention), `bert_features: random` (H_B replaced by random vectors),
`freeze_bert: false` (BERT tuned jointly), no `init_from` (NMT randomly initialised),
`bert_fusion: add` (BERT fed to every encoder layer without attention), `features_from` (BERT
replaced by another run's Transformer encoder: that run's encoder weights load into the feature
encoder, which reads x [SEP] as its own run did, fixed unless `freeze_bert: false`).

The source is read once, in the BERT's vocabulary ([CLS] x [SEP]), as every BERT method here
does (the workflow tokenizes a side with its checkpoint's vocabulary, the Transformer
baselines included, so the NMT part and BERT share a vocabulary; the paper's NMT used its own
BPE). The NMT encoder reads x [SEP], the same ids without [CLS], exactly what its warm-start
parent was trained on.

Details the paper leaves to us, and what we chose:
- the frozen BERT keeps its dropout active in training, as in the authors' code
  (bert-nmt/bert-nmt, which freezes BERT's parameters but leaves the module in train mode);
- p_net = 1.0 everywhere, as the paper states for WMT and the authors' IWSLT script uses
  (`--encoder-bert-dropout-ratio 0.5`, i.e. p_net/2); drop-net draws from torch's generator,
  so the trainer's seed fixes it; inference averages the branches (the authors' code weighs
  both 0.5 outside training);
- the BERT of IWSLT14 En-De is bert-base-uncased, the authors' default `--bert-model-name`
  (config/paper.yaml gives it as the dataset's source checkpoint);
- `bert_features: random`: fresh N(0, 1) vectors of H_B's shape at every training step, and
  at inference one fixed N(0, 1) vector per position (seed 0), so that a sentence's
  translation depends neither on the run nor on its batch; neither carries anything about
  the source's words;
- `features_from` ("the encoder of another Transformer model"): the papers' experiment names
  the same Transformer recipe as the warm start, trained from another seed (`seed_offset`), so
  that the features come from a second, independently trained model, not from the NMT
  model's own starting point; only for autoregressive decoding (the paper's case);
- `bert_fusion: add` (Table 6, "feed BERT feature into all layers without attention"; the
  revised equation is cut off in our copy of the paper): the encoder's BERT branch is a
  linear map (per layer, no bias, xavier) of the BERT state at the same position (the LENGTH
  token, under NAT, takes [CLS]'s), under drop-net like the attention it replaces; the
  decoder keeps its BERT attention unless `bert_dec_attention: false`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.methods.cmlm import CMLM, ConditionalMaskedLM
from nmtbench.methods.transformer import (
    DecoderLayer,
    Encoded,
    EncoderDecoder,
    EncoderLayer,
    MultiheadAttention,
    SizedSettings,
    TransformerConfig,
    TransformerDecoder,
    TransformerEncoder,
    embedding,
    fairseq_init,
)
from nmtbench.parts.contract import Method, mark_pretrained, method_settings
from nmtbench.parts.pretrained import check_vocab, freeze, load_model

FEATURES = ("bert", "random")
FUSIONS = ("attention", "add")


def drop_net(p_net: float, training: bool) -> tuple[float, float]:
    """The weights of (the usual branch, the BERT branch) for one sub-layer's pass."""
    if training and p_net > 0:
        u = float(torch.rand(()))
        if u < p_net / 2:
            return 1.0, 0.0
        if u > 1 - p_net / 2:
            return 0.0, 1.0
    return 0.5, 0.5


class FusedEncoderLayer(EncoderLayer):
    """An encoder layer whose self-attention is averaged with a BERT branch: attention over
    H_B (`fusion` "attention"), H_B at the same position mapped to d_model ("add"), or none
    (None: the plain layer)."""

    def __init__(self, cfg: TransformerConfig, bert_dim: int, p_net: float,
                 fusion: str | None):
        super().__init__(cfg)
        self.p_net = p_net
        self.fusion = fusion
        if fusion == "attention":
            self.bert_attn = MultiheadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout,
                                                kdim=bert_dim)
        elif fusion == "add":
            self.bert_proj = nn.Linear(bert_dim, cfg.d_model, bias=False)
            nn.init.xavier_uniform_(self.bert_proj.weight)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor,
                context: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
        """x (B, S, D); context: "bert" (B, S', H), "bert_mask" (B, 1, 1, S') and
        "bert_aligned" (B, S, H), H_B at x's positions."""
        if self.fusion is None:
            return super().forward(x, src_mask)
        h = self._in(self.self_attn_norm, x)
        own = self.drop(self.self_attn(h, *self.self_attn.kv(h), mask=src_mask))
        if self.fusion == "attention":
            bert = self.bert_attn(h, *self.bert_attn.kv(context["bert"]),
                                  mask=context["bert_mask"])
        else:
            bert = self.bert_proj(context["bert_aligned"])
        w_own, w_bert = drop_net(self.p_net, self.training)
        x = self._out(self.self_attn_norm, x + w_own * own + w_bert * self.drop(bert))
        h = self._in(self.ffn_norm, x)
        return self._out(self.ffn_norm, x + self.drop(self.ffn(h)))


class FusedDecoderLayer(DecoderLayer):
    """A decoder layer whose encoder-decoder attention is averaged with an attention over
    H_B (none when `attend_bert` is false)."""

    def __init__(self, cfg: TransformerConfig, bert_dim: int, p_net: float, attend_bert: bool):
        super().__init__(cfg)
        self.p_net = p_net
        self.bert_attn = (MultiheadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout,
                                             kdim=bert_dim) if attend_bert else None)

    def memory_state(self, encoded: Encoded) -> dict[str, torch.Tensor]:
        state = super().memory_state(encoded)
        if self.bert_attn is not None:
            state["bert_k"], state["bert_v"] = self.bert_attn.kv(encoded.context["bert"])
            state["bert_mask"] = encoded.context["bert_mask"]  # (B, 1, 1, S')
        return state

    def attend_memory(self, h: torch.Tensor, memory: dict[str, torch.Tensor],
                      src_mask: torch.Tensor) -> torch.Tensor:
        own = super().attend_memory(h, memory, src_mask)
        if self.bert_attn is None:
            return own
        bert = self.bert_attn(h, memory["bert_k"], memory["bert_v"], mask=memory["bert_mask"])
        w_own, w_bert = drop_net(self.p_net, self.training)
        return w_own * own + w_bert * self.drop(bert)


class FusedEncoder(TransformerEncoder):
    """The BERT and the NMT encoder: BERT reads [CLS] x [SEP], the NMT encoder x [SEP] (and,
    for parallel decoding, a LENGTH token in front); H_B goes to every layer and, as
    `Encoded.context`, to the decoder. `bert` is the feature encoder: the BERT, or another
    run's Transformer encoder (`features` "encoder"), which reads x [SEP] like this one."""

    def __init__(self, cfg: TransformerConfig, embed: nn.Embedding,
                 layers: list[FusedEncoderLayer], bert: nn.Module, features: str):
        super().__init__(cfg, embed, layers)
        self.bert = bert
        self.features = features
        self.bert_frozen = not any(p.requires_grad for p in bert.parameters())
        if features == "random":  # inference's draw: one vector per position, seed 0
            table = torch.randn(bert.config.max_position_embeddings, bert.config.hidden_size,
                                generator=torch.Generator().manual_seed(0))
            self.register_buffer("random_states", table, persistent=False)

    def bert_states(self, src: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """H_B (B, S, H) at [CLS] x [SEP]: the BERT's last layer, or random vectors of its
        shape; (B, S - 1, H) at x [SEP] from a Transformer encoder."""
        if self.features == "random":
            if self.training:
                return torch.randn(*src.shape, self.bert.config.hidden_size, device=src.device)
            return self.random_states[:src.size(1)].expand(src.size(0), -1, -1)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.bert_frozen):
            if self.features == "encoder":
                return self.bert(src[:, 1:]).memory
            return self.bert(input_ids=src, attention_mask=keep.long()).last_hidden_state

    def forward(self, src: torch.Tensor) -> Encoded:
        """src (B, S) [CLS] x [SEP] in the BERT's vocabulary, padded."""
        keep = src != self.embed.padding_idx  # (B, S)
        bert = self.bert_states(src, keep)
        x, mask = self.embed_source(src[:, 1:])
        if self.features == "encoder":  # already at x [SEP] (no LENGTH token: AT only)
            keep, aligned = keep[:, 1:], bert
        else:  # x [SEP] are BERT's positions 1.., a LENGTH token in front takes [CLS]'s
            aligned = bert if self.embed_lengths is not None else bert[:, 1:]
        context = {"bert": bert, "bert_mask": keep[:, None, None, :], "bert_aligned": aligned}
        for layer in self.layers:
            x = layer(x, mask, context)
        del context["bert_aligned"]  # the decoder attends to H_B, not to the aligned copy
        return self.finish(x, mask, context)


@method_settings("bert-fused")
class BertFusedSettings(SizedSettings):
    """BERT-fused's settings."""


class BertFused(Method):
    """BERT-fused NMT: a Transformer (or CMLM) whose layers also attend to a frozen BERT."""

    settings = BertFusedSettings
    # the parent's encoder becomes the feature encoder
    parent_runs = {**Method.parent_runs, "features_from": ("encoder.", "encoder.bert.")}
    autoregressive = EncoderDecoder
    parallel = ConditionalMaskedLM

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None, weights: bool = True,
              ) -> EncoderDecoder | ConditionalMaskedLM:
        settings = cls.read_settings(cfg)
        _check(settings)
        arch = settings.architecture
        if settings.features_from:  # its weights come from the run input features_from
            bert: nn.Module = TransformerEncoder(arch, embedding(src_vocab, arch.d_model))
            bert.requires_grad_(not settings.freeze_bert)
            width, features = arch.d_model, "encoder"
        else:
            source = (pretrained or {}).get("src_bert", settings.src_bert)
            bert = mark_pretrained(load_model(source, weights=weights, add_pooling_layer=False))
            check_vocab(src_vocab.size, bert, "source")
            freeze(bert, settings.freeze_bert)
            width, features = bert.config.hidden_size, settings.bert_features
        p_net = settings.drop_net
        nat = settings.decoding == "nat"
        fusion = settings.bert_fusion if settings.bert_enc_attention else None
        src_embed, tgt_embed = embedding(src_vocab, arch.d_model), embedding(tgt_vocab,
                                                                             arch.d_model)
        encoder = FusedEncoder(
            arch, src_embed,
            [FusedEncoderLayer(arch, width, p_net, fusion) for _ in range(arch.encoder_layers)],
            bert, features)
        decoder = TransformerDecoder(
            arch, tgt_embed, causal=not nat,
            layers=[FusedDecoderLayer(arch, width, p_net, settings.bert_dec_attention)
                    for _ in range(arch.decoder_layers)])
        fairseq_init(src_embed, tgt_embed, encoder.layers, decoder.layers)
        if not nat:
            return cls.autoregressive(encoder, decoder, settings, src_vocab, tgt_vocab,
                                      source_bos=True)  # the BERT reads [CLS] x [SEP]
        encoder.embed_lengths = nn.Embedding(CMLM.length_classes, arch.d_model)
        nn.init.normal_(encoder.embed_lengths.weight, mean=0.0, std=arch.d_model ** -0.5)
        return cls.parallel(encoder, decoder, settings, src_vocab, tgt_vocab, source_bos=True,
                            max_length=min(CMLM.length_classes - 1, arch.max_positions - 2))


def _check(settings: BertFusedSettings) -> None:
    """One line for each setting the schema cannot check."""
    if settings.features_from:
        if settings.decoding != "at" or settings.bert_features != "bert":
            raise InputError("bert-fused features_from: with decoding at and bert_features bert "
                             "only (a Transformer encoder in BERT's place)")
    elif not settings.src_bert:
        raise InputError("bert-fused needs `src_bert` (the source-side checkpoint); set it in "
                         "the experiment or as the dataset's checkpoints.src")
    if settings.bert_features not in FEATURES:
        raise InputError(f"bert_features {settings.bert_features!r}: use one of "
                         f"{', '.join(FEATURES)}")
    if settings.bert_fusion not in FUSIONS:
        raise InputError(f"bert_fusion {settings.bert_fusion!r}: use one of {', '.join(FUSIONS)}")
    if not 0.0 <= settings.drop_net <= 1.0:
        raise InputError(f"drop_net {settings.drop_net}: p_net is a probability in [0, 1]")

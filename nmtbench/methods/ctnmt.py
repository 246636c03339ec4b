"""CTNMT (Yang et al., AAAI 2020, `002`): three strategies that keep a BERT's knowledge while
an NMT model is trained with it, each a setting, together "CTNMT + ALL".

- `rate_scheduling`: the BERT's parameters are an optimiser group of their own whose
  learning-rate multiplier rho is a slanted triangle: t / T0 for t < T0
  (`rate_warm_updates`), 1 - (t - T0) / (T - T0) for T0 <= t < T (`rate_freeze_updates`),
  0 (BERT frozen) after, t counting updates; the NMT parameters keep the usual schedule.
  Through the core's parameter groups.
- `dynamic_switch`: a Transformer encoder reads the source beside the BERT and a gate mixes
  the two, g = sigmoid(W h_lm + U h_nmt + b), h = g * h_lm + (1 - g) * h_nmt (Eq. 6-7).
- `distillation` (asymptotic distillation): L = alpha L_nmt + (1 - alpha) L_kd, L_kd the squared
  L2 distance ||h_lm - h_l||^2 between the frozen pre-trained BERT's last layer and the NMT
  encoder's top layer at each source position (Eq. 4-5); the BERT is only a teacher, nothing
  of it is needed to translate. With `distill_side: decoder` (Table 2, "BERT Dec") the
  student is the decoder's top layer and the teacher a target-side BERT (`tgt_bert`) reading
  the reference.

Which encoder the model has follows from the switches: with the dynamic switch, the BERT and a
Transformer encoder, gated; with rate scheduling alone, the BERT itself, fine-tuned (the
"initialise the encoder with BERT and fine-tune" procedure it improves on); with distillation
alone, a Transformer encoder. The decoder is the Transformer's. The BERT reads [CLS] x [SEP]
and the Transformer encoder x [SEP], the same ids after [CLS] (one vocabulary: the workflow
reads the source side in its BERT's vocabulary).

What the paper leaves open we take from ByteDance's public reproduction of CTNMT (neurst,
examples/ctnmt; the authors' employer), and say where we differ:
- alpha = 0.99 (`distill_alpha`; neurst's kd_weight 0.01, "alpha=0.99 makes a better overall
  result"): the loss terms' weights become {tokens: alpha, distill: 1 - alpha};
- L_kd sums the squared differences over the state's dimensions, as Eq. 4 writes it and neurst
  computes it (`distill_reduction: sum`); the text calls it a "mean-squared-error loss", which
  `distill_reduction: mean` reads as a mean over the dimensions (d times weaker). It is summed
  over real source positions and, like the token loss, divided by the batch's target tokens
  (neurst divides it by the source tokens: the same up to the source/target length ratio);
- the slanted triangle ends where neurst's RateScheduledOptimizer freezes the BERT, T = 20,000
  updates, and peaks at T0 = 2,000: the formula is cut from our copy of the paper, whose text
  asks for "a short increase" and "a long decay" after Howard and Ruder's slanted triangular
  rates, whose increase is the first tenth (cut_frac 0.1); neurst's own peak, 10,000, would
  make the two halves equal. neurst multiplies the BERT's
  gradients by rho before Adam, which Adam's normalisation largely undoes; we multiply the
  BERT's learning rate, the rate schedule the paper describes;
- a student narrower than the BERT is compared through a linear map to the BERT's width (no
  bias; used in training only), and the dynamic switch maps h_lm to d_model first (no bias);
- the teacher BERT runs in eval mode (no dropout), so its states are fixed targets;
- into the decoder: at each target position, the states the decoder's output layer reads
  (having seen the target prefix up to that token) are pulled towards the target BERT's last
  layer at the same token of [CLS] y [SEP] (having seen the whole sentence: the mismatch the
  paper gives for the decoder's smaller gain); the squared error is summed over real target
  tokens, like the encoder's over source tokens;
- GPT-2 as the teacher (Table 2, `distill_teacher: gpt2`): the checkpoint in the distilled
  side's role (`src_bert` for the encoder, `tgt_bert` for the decoder) is then a GPT-2 and
  must read that side's vocabulary, as every pre-trained model here does; it reads the same
  [CLS] x [SEP] / [CLS] y [SEP] as a BERT, and its state at a token has seen that token's
  left context only (for the decoder exactly what the student has seen). The public `gpt2`
  reads its byte-level BPE with `<|endoftext|>` at both ends (`nmtbench.data.tokenization`); the
  [PAD] and [MASK] that vocabulary gains after its own ids give the teacher two embedding
  rows more, zero, which nothing reads (padding is masked, no teacher input holds [MASK]).
  On the toy world the GPT-2 of each side, pre-trained in the DAG in its WordPiece, stands in.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import torch
from torch import nn

from nmtbench.data.tokenization import ADDED_TOKENS, Vocab
from nmtbench.errors import InputError
from nmtbench.methods.transformer import (
    Encoded,
    EncoderDecoder,
    SizedSettings,
    TransformerDecoder,
    TransformerEncoder,
    embedding,
    fairseq_init,
)
from nmtbench.parts.contract import (
    Batch,
    Losses,
    Method,
    ParamGroup,
    Progress,
    constant,
    mark_pretrained,
    method_settings,
)
from nmtbench.parts.pretrained import check_vocab, load_model, model_config

TEACHERS = ("bert", "gpt2")


def slanted_triangle(progress: Progress, warm: int, freeze: int) -> float:
    """The BERT group's learning-rate multiplier rho after `progress.step` updates: linear from
    0 to 1 over the first `warm` updates, back to 0 at update `freeze`, then 0."""
    t = progress.step
    if t < warm:
        return t / warm
    return max(0.0, 1 - (t - warm) / (freeze - warm))


class CTNMTEncoder(nn.Module):
    """The BERT (None: distillation alone), a Transformer encoder (None: the BERT is the
    encoder) and, with both, the dynamic switch. `Encoded.context["student"]` holds the states
    asymptotic distillation pulls towards the teacher's, and "student_mask" their mask."""

    def __init__(self, bert: nn.Module | None, nmt: TransformerEncoder | None, d_model: int,
                 pad: int):
        super().__init__()
        self.bert, self.nmt, self.pad = bert, nmt, pad
        if bert is not None and nmt is not None:
            self.lm_proj = nn.Linear(bert.config.hidden_size, d_model, bias=False)
            self.gate_lm = nn.Linear(d_model, d_model, bias=False)  # W
            self.gate_nmt = nn.Linear(d_model, d_model)  # U and b
            for linear in (self.lm_proj, self.gate_lm, self.gate_nmt):
                nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(self.gate_nmt.bias)

    def gate(self, h_lm: torch.Tensor, h_nmt: torch.Tensor) -> torch.Tensor:
        """g = sigmoid(W h_lm + U h_nmt + b), elementwise in (0, 1)."""
        return torch.sigmoid(self.gate_lm(h_lm) + self.gate_nmt(h_nmt))

    def forward(self, src: torch.Tensor) -> Encoded:
        """src (B, S) [CLS] x [SEP] in the BERT's vocabulary, padded."""
        keep = src != self.pad
        if self.nmt is None:  # the BERT is the encoder
            h = self.bert(input_ids=src, attention_mask=keep.long()).last_hidden_state
            mask = keep[:, None, None, :]
            return Encoded(h, mask, None, {"student": h, "student_mask": keep})
        nmt = self.nmt(src[:, 1:])  # x [SEP]: the BERT's positions 1..
        context = {"student": nmt.memory, "student_mask": keep[:, 1:]}
        if self.bert is None:
            return Encoded(nmt.memory, nmt.mask, None, context)
        h_lm = self.bert(input_ids=src, attention_mask=keep.long()).last_hidden_state
        h_lm = self.lm_proj(h_lm[:, 1:])
        g = self.gate(h_lm, nmt.memory)
        return Encoded(g * h_lm + (1 - g) * nmt.memory, nmt.mask, None, context)


class CTNMTModel(EncoderDecoder):
    """The Transformer objective plus asymptotic distillation, and the BERT's optimiser group
    on its own schedule."""

    def __init__(self, encoder: CTNMTEncoder, decoder: TransformerDecoder,
                 settings: CTNMTSettings, src_vocab: Vocab, tgt_vocab: Vocab,
                 teacher: nn.Module | None, teacher_width: int | None = None):
        """`teacher_width` without a `teacher`: the width of the one a run was trained with,
        for the projection its checkpoints hold (a model that translates, which needs no
        teacher)."""
        super().__init__(encoder, decoder, settings, src_vocab, tgt_vocab, source_bos=True)
        self.teacher = teacher
        self.distill_proj: nn.Module = nn.Identity()
        if teacher is not None:
            teacher_width = teacher.config.hidden_size
        if teacher_width is not None:
            student_width = (encoder.bert.config.hidden_size
                             if encoder.nmt is None and settings.distill_side == "encoder"
                             else settings.d_model)
            if student_width != teacher_width:
                self.distill_proj = nn.Linear(student_width, teacher_width, bias=False)
                nn.init.xavier_uniform_(self.distill_proj.weight)

    def train(self, mode: bool = True) -> CTNMTModel:
        super().train(mode)
        if self.teacher is not None:
            self.teacher.eval()
        return self

    def losses(self, batch: Batch, progress: Progress | None = None) -> Losses:
        encoded = self.encoder(batch.src)
        states = self.decoder.states(batch.tgt_in, encoded)
        losses = self.token_losses(self.decoder.project(states), batch)
        if self.teacher is None:
            return losses
        if self.settings.distill_side == "decoder":  # the teacher reads [CLS] y [SEP]
            text, pad = torch.cat([batch.tgt_in[:, :1], batch.tgt_out], 1), self.tgt_vocab.pad
            student, mask = states, batch.tgt_in != pad
        else:  # [CLS] x [SEP]
            text, pad = batch.src, self.src_vocab.pad
            student, mask = encoded.context["student"], encoded.context["student_mask"]
        with torch.no_grad():
            target = self.teacher(input_ids=text,
                                  attention_mask=(text != pad).long()).last_hidden_state
        if self.settings.distill_side == "decoder":
            target = target[:, :student.size(1)]  # [CLS] y, the decoder's inputs
        else:
            target = target[:, target.size(1) - student.size(1):]  # the student's positions
        error = (self.distill_proj(student).float() - target.float()).pow(2)
        error = error.sum(-1) if self.settings.distill_reduction == "sum" else error.mean(-1)
        distill = error.masked_select(mask).sum()
        losses.terms["distill"] = distill
        losses.stats["distill_per_position"] = distill.item() / max(int(mask.sum()), 1)
        return losses

    def param_groups(self) -> list[ParamGroup]:
        """"bert" (the fine-tuned BERT: slanted-triangular with rate scheduling) and "nmt"."""
        bert = self.encoder.bert
        if bert is None:
            return super().param_groups()
        own = [p for p in bert.parameters() if p.requires_grad]
        ids = {id(p) for p in own}
        rest = [p for p in self.trainable_parameters() if id(p) not in ids]
        s = self.settings
        scale = (partial(slanted_triangle, warm=s.rate_warm_updates,
                         freeze=s.rate_freeze_updates)
                 if s.rate_scheduling else constant)
        return [ParamGroup("bert", own, scale), ParamGroup("nmt", rest)]


@method_settings("ctnmt")
class CTNMTSettings(SizedSettings):
    """CTNMT's settings."""


class CTNMT(Method):
    """A Transformer with a BERT on the source side and CTNMT's strategies."""

    settings = CTNMTSettings
    autoregressive = CTNMTModel

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None, weights: bool = True,
              ) -> CTNMTModel:
        return cls._build(cfg, src_vocab, tgt_vocab, pretrained, weights, teacher=True)

    @classmethod
    def build_for_translation(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
                              pretrained: Mapping[str, Any] | None = None) -> CTNMTModel:
        """Without the distillation teacher: only its width is read (from its config), for
        the projection onto it that the checkpoints hold. A run of distillation alone then
        translates as the Transformer it is, loading no pre-trained model."""
        return cls._build(cfg, src_vocab, tgt_vocab, pretrained, True, teacher=False)

    @classmethod
    def _build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
               pretrained: Mapping[str, Any] | None, weights: bool, teacher: bool,
               ) -> CTNMTModel:
        s = cls.read_settings(cfg)
        _check(s)
        if s.distillation:  # Eq. 5 as the weights of the two terms
            s.loss_weights = {"tokens": s.distill_alpha, "distill": 1 - s.distill_alpha,
                              **s.loss_weights}
        source = (pretrained or {}).get("src_bert", s.src_bert)
        arch = s.architecture
        uses_bert = s.dynamic_switch or s.rate_scheduling
        bert = taught = teacher_width = None
        if uses_bert:  # fine-tuned: saved in the run's checkpoints
            bert = mark_pretrained(load_model(source, weights=weights, add_pooling_layer=False))
            check_vocab(src_vocab.size, bert, "source")
        if s.distillation:  # frozen: reloaded from the checkpoint directory
            decoder_side = s.distill_side == "decoder"
            side_vocab = tgt_vocab if decoder_side else src_vocab
            name = (pretrained or {}).get("tgt_bert", s.tgt_bert) if decoder_side else source
            if teacher:
                taught = mark_pretrained(_load_teacher(
                    name, s.distill_teacher, "tgt_bert" if decoder_side else "src_bert",
                    weights, side_vocab.size))
                check_vocab(side_vocab.size, taught, "target" if decoder_side else "source")
                taught.requires_grad_(False)
            else:
                teacher_width = model_config(name).hidden_size
        src_embed, tgt_embed = embedding(src_vocab, arch.d_model), embedding(tgt_vocab,
                                                                             arch.d_model)
        nmt = None if s.rate_scheduling and not s.dynamic_switch else TransformerEncoder(
            arch, src_embed)
        memory_dim = bert.config.hidden_size if nmt is None else None
        decoder = TransformerDecoder(arch, tgt_embed, memory_dim=memory_dim)
        fairseq_init(*([src_embed] if nmt else []), tgt_embed,
                     *([nmt.layers] if nmt else []), decoder.layers)
        encoder = CTNMTEncoder(bert, nmt, arch.d_model, src_vocab.pad)
        return cls.autoregressive(encoder, decoder, s, src_vocab, tgt_vocab, taught,
                                  teacher_width)


def _load_teacher(name: str, kind: str, role: str, weights: bool, vocab_size: int
                  ) -> nn.Module:
    """The frozen teacher's base model, which must be of the kind `distill_teacher` names;
    its embeddings grow by zero rows for the tokens its vocabulary gained in loading
    (`ADDED_TOKENS`)."""
    model_type = model_config(name).model_type
    if model_type != kind:
        raise InputError(f"ctnmt distill_teacher {kind!r}, but {role} {name!r} is a "
                         f"{model_type} checkpoint")
    # a BERT loaded as a base model would add a pooler that distillation never reads
    extra = {"add_pooling_layer": False} if model_type == "bert" else {}
    model = load_model(name, weights=weights, **extra)
    own = model.config.vocab_size
    if own < vocab_size <= own + len(ADDED_TOKENS):
        model.resize_token_embeddings(vocab_size, mean_resizing=False)
        with torch.no_grad():
            model.get_input_embeddings().weight[own:] = 0.0
    return model


def _check(s: CTNMTSettings) -> None:
    """One line for each setting the schema cannot check."""
    if not s.src_bert:
        raise InputError("ctnmt needs `src_bert` (the source-side checkpoint); set it in the "
                         "experiment or as the dataset's checkpoints.src")
    if not (s.distillation or s.dynamic_switch or s.rate_scheduling):
        raise InputError("ctnmt with distillation, dynamic_switch and rate_scheduling all off "
                         "is the Transformer: use method transformer")
    if s.distill_teacher not in TEACHERS:
        raise InputError(f"ctnmt distill_teacher {s.distill_teacher!r}: use one of "
                         f"{', '.join(TEACHERS)}")
    if (s.distill_teacher != "bert" and s.distill_side == "encoder"
            and (s.dynamic_switch or s.rate_scheduling)):
        raise InputError(f"ctnmt distill_teacher {s.distill_teacher!r} into the encoder: src_bert "
                         "is then the teacher, but the dynamic switch and rate scheduling need "
                         "it to be the BERT they fine-tune")
    if s.distillation and s.distill_side == "decoder" and not s.tgt_bert:
        raise InputError("ctnmt distill_side decoder needs `tgt_bert` (the target-side BERT "
                         "teacher); set it in the experiment or as the dataset's "
                         "checkpoints.tgt")
    if not 0 < s.rate_warm_updates < s.rate_freeze_updates:
        raise InputError(f"ctnmt rate_warm_updates {s.rate_warm_updates} and "
                         f"rate_freeze_updates {s.rate_freeze_updates}: need "
                         "0 < rate_warm_updates < rate_freeze_updates")

"""BERT as a teacher for text generation (Chen et al., ACL 2020, `003`): a BERT fine-tuned with
the conditional masked LM (C-MLM) gives, for every target position, its distribution with that
position masked; a Transformer student learns from these soft targets beside the gold words.

Two methods, one per training job, both through the shared trainer:

- `bert-kd-teacher` (`BertKDTeacher`): the BERT reads `[CLS] x [SEP] y [SEP]` (segment 0 for the
  source part, 1 for the target part) and predicts the masked tokens of `y [SEP]`; nothing of the
  source is masked. `objective: l2r` is Table 6's BERT_l2r: the same input, but a target
  position sees the source and the target positions up to itself only (a left-to-right
  conditional LM, so a masked position is predicted from its left context).
  `teacher_layers` keeps the BERT's first N layers (Table 6's BERT_sm: 6 of 12). The teacher
  is never decoded; `bert_kd_soft_targets` runs it over the training set.
- `bert-kd` (`KDStudent`): the Transformer baseline (`student: rnn`: the RNN of
  `nmtbench/methods/rnn.py`, Table 2) trained with
  L = alpha * L_bidi + (1 - alpha) * L_xe (Eq. 5), L_bidi the cross-entropy against the
  teacher's top-K distribution, softmax(top-K logits / T) (Eq. 4); the temperature applies to
  the teacher only (the paper's footnote 6). The terms are `bidi` and `tokens` (the baseline's
  label-smoothed cross-entropy), weighted alpha and 1 - alpha.

Details the paper leaves to us, and what we chose (from the authors' code where it says):
- masking (their code): each token of `y [SEP]` is replaced by [MASK] (always [MASK], no
  80/10/10) with probability `mask_prob` = 0.15, and a row with none masked gets one; the
  final [SEP] is a target like any other (it teaches the student where to stop);
- soft targets for every position of `y [SEP]`, each masked once (their code: 7 copies of a
  pair, copy r masking the positions j with j mod 7 = r); we store the top-K log-probabilities
  (a softmax over the K of them with temperature T is the same as over the K logits);
- validation scores the student on the gold words only (`tokens`): there are no soft targets
  for the validation set, and the best checkpoint is the one with the best gold likelihood;
- the l2r teacher (Table 6) keeps bidirectional attention within the source, as a
  sequence-to-sequence LM over BERT (the paper does not say).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.methods.bert_kd_soft_targets import SOFT_IDS, SOFT_LOGPROBS
from nmtbench.methods.bert_kd_soft_targets import dump as dump_soft_targets
from nmtbench.methods.bert_kd_soft_targets import load as load_soft_targets
from nmtbench.methods.rnn import rnn_parts
from nmtbench.methods.transformer import EncoderDecoder, Transformer, TransformerSettings
from nmtbench.parts.batches import Bitext
from nmtbench.parts.contract import (
    Batch,
    Losses,
    Method,
    MethodSettings,
    Model,
    ParamGroup,
    Progress,
    bert_decay_groups,
    mark_pretrained,
    method_settings,
)
from nmtbench.parts.pretrained import check_vocab, load_model

OBJECTIVES = ("cmlm", "l2r")
STUDENTS = ("transformer", "rnn")


# --- the teacher ------------------------------------------------------------------------------

@method_settings("bert-kd-teacher")
class TeacherSettings(MethodSettings):
    """The teacher's settings."""


def joined(src: torch.Tensor, tgt: torch.Tensor, pad: int
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`[CLS] x [SEP]` (src, B x S) and `y [SEP]` (tgt, B x T), both right-padded, as one
    right-padded row each: input ids, segment ids (1 on the target part), and the column of
    every target position (B x T)."""
    src_len = (src != pad).sum(1, keepdim=True)
    width = int(src_len.max()) + tgt.size(1)
    ids = torch.full((src.size(0), width), pad, dtype=src.dtype, device=src.device)
    ids[:, : min(src.size(1), width)] = src[:, :width]
    where = src_len + torch.arange(tgt.size(1), device=src.device)  # (B, T)
    ids.scatter_(1, where, tgt)
    cols = torch.arange(width, device=src.device)
    segments = ((cols >= src_len) & (ids != pad)).long()
    return ids, segments, where


class BertKDTeacher(Model):
    """A BERT with its masked-LM head over `[CLS] x [SEP] y [SEP]`: `predict` gives the
    log-probs at every target position; `losses` is the C-MLM objective."""

    decoding = "none"
    source_bos = True

    def __init__(self, bert: nn.Module, settings: TeacherSettings, src_vocab: Vocab,
                 tgt_vocab: Vocab):
        super().__init__()
        self.bert = bert
        # the longest target it reads: its positions hold the source too
        self.max_length = bert.config.max_position_embeddings
        self.settings = settings
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab

    def predict(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Log-probs (B, T, V) at the positions of `y [SEP]` (tgt, with [MASK]s), given the
        source (`[CLS] x [SEP]`)."""
        return F.log_softmax(self.logits(src, tgt), dim=-1, dtype=torch.float32)

    def logits(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        ids, segments, where = joined(src, tgt, self.src_vocab.pad)
        real = ids != self.src_vocab.pad
        mask: torch.Tensor = real
        if self.settings.objective == "l2r":  # target positions see the source and their left
            segment = segments.bool()
            cols = torch.arange(ids.size(1), device=ids.device)
            left = cols[None, :, None] >= cols[None, None, :]  # (1, query, key)
            visible = ~segment[:, None, :] | (segment[:, :, None] & left)
            mask = visible & real[:, None, :]
            mask = mask | torch.eye(ids.size(1), dtype=torch.bool, device=ids.device)  # pads
            mask = mask[:, None].to(self.bert.dtype).log()  # additive 4-D mask: 0 or -inf
        out = self.bert(input_ids=ids, token_type_ids=segments, attention_mask=mask).logits
        return out.gather(1, where[..., None].expand(-1, -1, out.size(-1)))

    def write_soft_targets(self, tokenizers: tuple[Any, Any], cfg: Mapping[str, Any],
                           run_dir: str, train: tuple[str, str], valid: tuple[str, str],
                           out: str, top_k: int, info: str | None = None,
                           max_tokens: int = 4096) -> None:
        """Every target position masked once (nmtbench/methods/bert_kd_soft_targets.py)."""
        dump_soft_targets((self, *tokenizers, dict(cfg)), run_dir, train, valid, out, top_k,
                          info=info, max_tokens=max_tokens)

    def param_groups(self) -> list[ParamGroup]:
        """Fine-tuned as BERT is: no weight decay on biases and LayerNorm gains."""
        return bert_decay_groups(self.trainable_parameters())

    def losses(self, batch: Batch, progress: Progress | None = None) -> Losses:
        tgt, v = batch.tgt_out, self.tgt_vocab
        content = tgt != v.pad
        chosen = (torch.rand(tgt.shape, device=tgt.device) < self.settings.mask_prob) & content
        none = ~chosen.any(dim=1)
        if none.any():  # a row with no masked token gets one, uniformly among its tokens
            pick = torch.rand(tgt.shape, device=tgt.device).masked_fill(~content, -1).argmax(1)
            chosen[none, pick[none]] = True
        logits = self.logits(batch.src, tgt.masked_fill(chosen, v.mask))[chosen].float()
        gold = tgt[chosen]
        nll = F.cross_entropy(logits, gold, reduction="sum")
        accuracy = (logits.argmax(-1) == gold).float().mean().item()
        return Losses({"tokens": nll}, int(chosen.sum()), {"accuracy": accuracy})


class BertKDTeacherMethod(Method):
    """The C-MLM teacher (`bert-kd-teacher`): fine-tunes a BERT; never decoded."""

    settings = TeacherSettings
    parent_runs: dict[str, tuple[str, str]] = {}

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None, weights: bool = True) -> BertKDTeacher:
        s = cls.read_settings(cfg)
        if s.objective not in OBJECTIVES:
            raise InputError(f"bert-kd-teacher: objective {s.objective!r}; known: "
                             f"{', '.join(OBJECTIVES)}")
        if not s.bert:
            raise InputError("bert-kd-teacher needs `bert` (the checkpoint it fine-tunes)")
        if src_vocab != tgt_vocab:
            raise InputError("bert-kd-teacher reads source and target in one vocabulary, its "
                             "BERT's (the workflow gives both sides the checkpoint's tokenizer)")
        dropout = {} if s.dropout is None else {"hidden_dropout_prob": s.dropout,
                                                 "attention_probs_dropout_prob": s.dropout}
        bert = load_model((pretrained or {}).get("bert", s.bert), weights=weights,
                          masked_lm=True, attn_implementation="eager", **dropout)
        check_vocab(tgt_vocab.size, bert, "joint")
        layers = bert.bert.encoder.layer
        if s.teacher_layers is not None:
            if not 1 <= s.teacher_layers <= len(layers):
                raise InputError(f"bert-kd-teacher: teacher_layers {s.teacher_layers}: the BERT "
                                 f"has {len(layers)} layers")
            bert.bert.encoder.layer = layers[: s.teacher_layers]
            bert.config.num_hidden_layers = s.teacher_layers
        return BertKDTeacher(mark_pretrained(bert), s, src_vocab, tgt_vocab)


# --- the student ------------------------------------------------------------------------------

@method_settings("bert-kd")
class KDSettings(TransformerSettings):
    """The student's settings: the Transformer's or the RNN's, and the distillation's."""


class KDStudent(EncoderDecoder):
    """The Transformer with the soft-target term `bidi` beside `tokens`."""

    settings: KDSettings

    def attach_side_data(self, name: str, path: str, data: Bitext,
                         tokenizer: Any) -> None:
        """The teacher's soft targets (the run input `soft_targets`), its top `top_k` of
        each target position."""
        if name != "soft_targets":
            super().attach_side_data(name, path, data, tokenizer)
            return
        load_soft_targets(path, data, tokenizer, self.settings.top_k)

    def loss(self, batch: Batch, progress: Progress | None = None) -> tuple[torch.Tensor,
                                                                              Losses]:
        """Eq. 5 in training; on validation (no soft targets) the gold words' loss alone,
        unweighted, so that it compares with the baseline's."""
        losses = self.losses(batch, progress)
        return losses.total(self.settings.loss_weights if "bidi" in losses.terms else {}), losses

    def losses(self, batch: Batch, progress: Progress | None = None) -> Losses:
        logits = self(batch.src, batch.tgt_in)
        losses = self.token_losses(logits, batch)
        if SOFT_IDS not in batch.extras:  # validation: the gold words only
            if self.training:
                raise InputError("bert-kd trains on soft targets: give the run input "
                                 "soft_targets (the teacher's, from the workflow)")
            return losses
        ids = batch.extras[SOFT_IDS][:, : logits.size(1), : self.settings.top_k].long()
        teacher = batch.extras[SOFT_LOGPROBS][:, : logits.size(1), : self.settings.top_k]
        target = F.softmax(teacher.float() / self.settings.temperature, dim=-1)  # (B, T, K)
        lprobs = F.log_softmax(logits, dim=-1, dtype=torch.float32).gather(-1, ids)  # (B, T, K)
        real = (batch.tgt_out != self.tgt_vocab.pad)[..., None]
        bidi = -(target * lprobs * real).sum()
        losses.terms["bidi"] = bidi
        losses.stats["bidi"] = bidi.item() / losses.ntokens
        return losses


class BertKD(Transformer):
    """The student (`bert-kd`): the Transformer baseline (or with `student: rnn` the RNN
    baseline's model), trained on a teacher's soft targets."""

    settings = KDSettings
    autoregressive = KDStudent

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None,
              weights: bool = True) -> KDStudent:
        s = cls.read_settings(cfg)
        if s.student not in STUDENTS:
            raise InputError(f"bert-kd: student {s.student!r}; known: {', '.join(STUDENTS)}")
        if not 0 <= s.alpha <= 1 or s.temperature <= 0 or s.top_k < 1:
            raise InputError("bert-kd: alpha must lie in [0, 1], temperature be positive and "
                             "top_k at least 1")
        if s.top_k > tgt_vocab.size:
            raise InputError(f"bert-kd: top_k {s.top_k} exceeds the target vocabulary "
                             f"({tgt_vocab.size} pieces)")
        if s.student == "rnn":  # Table 2: the RNN baseline's model (nmtbench/methods/rnn.py)
            encoder, decoder = rnn_parts(s, s.dropout, s.max_positions, src_vocab, tgt_vocab)
            model = cls.autoregressive(encoder, decoder, s, src_vocab, tgt_vocab, s.src_bos)
        else:
            model = super().build(cfg, src_vocab, tgt_vocab, pretrained, weights)
        model.settings.loss_weights = {"bidi": s.alpha, "tokens": 1 - s.alpha,
                                       **s.loss_weights}
        return model

"""Tiny models of every registered method, and what is done with them: the method contract's
cases (`CASES`: one tiny experiment config per model a method can build), `build` one on tiny
BERTs (the fixture `tiny_berts`, conftest.py), a `tiny_batch` in its source format, a few Adam
steps (`train`), its loss in eval mode (`eval_loss`) and what decoding reads of it (`outputs`).
tests/parts/test_method_contract.py checks each case; the compiling and CUDA tests run the same
models."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from tiny_checkpoints import BERT_VOCAB, TINY_BERTS

from nmtbench.methods import get_method
from nmtbench.parts.contract import Autoregressive, Batch, Model, Progress
from nmtbench.workflow.method_registry import registered_methods

METHODS = registered_methods()

# A Transformer narrower (16) than the tiny BERT (32), so cross-attention over a BERT's output
# projects its width; no dropout in the parts we build (the frozen BERTs keep theirs).
SMALL = {"size": "tiny", "d_model": 16, "ffn_dim": 32, "n_heads": 2, "encoder_layers": 1,
         "decoder_layers": 1, "dropout": 0.0, "max_positions": 64}
FUSED = {"src_bert": TINY_BERTS["src_bert"], "drop_net": 0.0}

# method -> variant -> its experiment config (on top of SMALL): every model its settings can
# build (AT/NAT, with and without each pre-trained side, each kind of freezing, each output
# mode). A method without an entry gets `automatic_cases`.
CASES: dict[str, dict[str, dict[str, Any]]] = {
    "transformer": {
        "post-norm": {},
        "pre-norm": {"pre_norm": True},
    },
    "bert-init": {
        "encoder": {"src_bert": TINY_BERTS["src_bert"]},
        "below-top-1": {"src_bert": TINY_BERTS["src_bert"], "freeze_bert": "below-top-1"},
        "embeddings": {"src_bert": TINY_BERTS["src_bert"], "bert_output_as": "embeddings"},
    },
    "bert-frozen": {
        "encoder": {"src_bert": TINY_BERTS["src_bert"]},
        "embeddings": {"src_bert": TINY_BERTS["src_bert"], "bert_output_as": "embeddings"},
    },
    "cmlm": {
        "nat": {"decoding": "nat"},
    },
    "abnet": {
        "nat": {"decoding": "nat", "adapter_dim": 16, **TINY_BERTS},
        "nat-tgt-bert-null": {"decoding": "nat", "adapter_dim": 16,
                              "src_bert": TINY_BERTS["src_bert"], "tgt_bert": None},
        "at": {"decoding": "at", "adapter_dim": 16, "src_bert": TINY_BERTS["src_bert"],
               "tgt_bert": None},
        "not-frozen": {"decoding": "nat", "adapter_dim": 16, "freeze_bert": False,
                       "encoder_adapter_layers": "top-1", "decoder_adapter_layers": [0],
                       **TINY_BERTS},
    },
    # drop-net off: over a few steps it may leave a branch without a gradient on purpose
    # (tests/methods/test_bert_fused.py checks it)
    "bert-fused": {
        "at": {**FUSED},
        "nat": {**FUSED, "decoding": "nat"},
        "tune-bert": {**FUSED, "freeze_bert": False},
        "decoder-only": {**FUSED, "bert_enc_attention": False},
        "encoder-only-nat": {**FUSED, "decoding": "nat", "bert_dec_attention": False},
        "add": {**FUSED, "bert_fusion": "add"},
        "add-nat": {**FUSED, "decoding": "nat", "bert_fusion": "add"},
        "random-features": {**FUSED, "bert_features": "random"},
    },
    "ctnmt": {
        "all": {"src_bert": TINY_BERTS["src_bert"], "distillation": True,
                "dynamic_switch": True, "rate_scheduling": True},
        "rate-scheduling": {"src_bert": TINY_BERTS["src_bert"], "rate_scheduling": True},
        "dynamic-switch": {"src_bert": TINY_BERTS["src_bert"], "dynamic_switch": True},
        "distillation": {"src_bert": TINY_BERTS["src_bert"], "distillation": True},
        "distilled-bert-encoder": {"src_bert": TINY_BERTS["src_bert"], "distillation": True,
                                   "rate_scheduling": True},
        "distillation-decoder": {**TINY_BERTS, "distillation": True, "distill_side": "decoder"},
    },
    # the tiny BERT's 2 layers: one group of 2 (M = 2) or two of 1
    "deep-fusion": {
        "at": {"src_bert": TINY_BERTS["src_bert"], "group_size": 2, "decoder_layers": 1},
        "m1": {"src_bert": TINY_BERTS["src_bert"], "group_size": 1, "decoder_layers": 2},
        "nat": {"src_bert": TINY_BERTS["src_bert"], "group_size": 1, "decoder_layers": 2,
                "decoding": "nat"},
        "not-partitioned": {"src_bert": TINY_BERTS["src_bert"], "group_size": 1,
                            "decoder_layers": 2, "partitioned": False},
        "ptm-frozen": {"src_bert": TINY_BERTS["src_bert"], "group_size": 1,
                       "decoder_layers": 2, "freeze_ptm": True},
        "no-pretraining": {"src_bert": TINY_BERTS["src_bert"], "group_size": 1,
                           "decoder_layers": 2, "ptm_pretrained": False},
        "translation-only": {"src_bert": TINY_BERTS["src_bert"], "group_size": 1,
                             "decoder_layers": 2, "losses": ["t"]},
        "decoder-from-bert": {"src_bert": TINY_BERTS["src_bert"], "group_size": 1,
                              "decoder_layers": 2, "decoder_init": TINY_BERTS["tgt_bert"]},
        "frozen-bert-decoder": {"src_bert": TINY_BERTS["src_bert"], "group_size": 1,
                                "decoder_layers": 2, "decoder_init": TINY_BERTS["tgt_bert"],
                                "freeze_decoder": True},
        # one table: the PTM's word embeddings, the decoder's and the output layer
        "shared-embeddings": {"src_bert": TINY_BERTS["src_bert"], "group_size": 1,
                              "decoder_layers": 2, "d_model": 32, "ffn_dim": 64,
                              "vocabulary": TINY_BERTS["src_bert"], "share_embeddings": True},
        "shared-embeddings-nat": {"src_bert": TINY_BERTS["src_bert"], "group_size": 1,
                                  "decoder_layers": 2, "d_model": 32, "ffn_dim": 64,
                                  "vocabulary": TINY_BERTS["src_bert"], "share_embeddings": True,
                                  "decoding": "nat"},
    },
    "bert-kd-teacher": {
        "cmlm": {"bert": TINY_BERTS["src_bert"]},
        "l2r-first-layer": {"bert": TINY_BERTS["src_bert"], "objective": "l2r",
                            "teacher_layers": 1},
    },
    "bert-kd": {
        "transformer": {"top_k": 3, "temperature": 2.0, "alpha": 0.5},
        "rnn-student": {"student": "rnn", "rnn_embed": 12, "rnn_hidden": 16, "top_k": 3,
                        "temperature": 2.0, "alpha": 0.5},
    },
    "rnn": {
        "two-layers": {"rnn_embed": 12, "rnn_hidden": 16},
        "one-layer": {"rnn_embed": 12, "rnn_hidden": 16, "rnn_layers": 1},
    },
}

SIDE_BERT = {"src": "src_bert", "tgt": "tgt_bert", "joint": "src_bert"}  # a side's tiny BERT


def automatic_cases(name: str) -> dict[str, dict[str, Any]]:
    """One case per decoding, every pre-trained checkpoint role filled with a tiny BERT."""
    info = METHODS[name]
    berts = {role: TINY_BERTS[SIDE_BERT[side]] for role, side in info.checkpoint_roles.items()}
    if "decoding" not in info.keys:
        return {"default": berts}
    return {decoding: {**berts, "decoding": decoding} for decoding in info.decodings}


def cases_of(name: str) -> dict[str, dict[str, Any]]:
    return CASES.get(name) or automatic_cases(name)


CASE_IDS = [(name, variant) for name in METHODS for variant in cases_of(name)]


# --- building -------------------------------------------------------------------------------

def config_of(name: str, variant: str) -> dict[str, Any]:
    keys = get_method(name).settings.keys()
    return {"method": name, **{k: v for k, v in SMALL.items() if k in keys},
            **cases_of(name)[variant]}


def build(name: str, variant: str, berts: dict[str, str], seed: int = 0) -> Model:
    """The case's model, each checkpoint role's BERT the tiny one of its side."""
    torch.manual_seed(seed)
    method = get_method(name)
    pretrained = {role: berts[SIDE_BERT[side]] for role, side in method.checkpoint_roles.items()}
    return method.build(config_of(name, variant), BERT_VOCAB, BERT_VOCAB,
                        pretrained={**berts, **pretrained})


def tiny_batch(model: Model) -> Batch:
    """Three pairs of different lengths, right-padded, in the model's source format."""
    v = BERT_VOCAB
    sources = [[10, 11, 12, 13], [20, 21], [30]]
    targets = [[40, 41, 42, 43, 44], [50, 51], [60, 61, 62]]

    def pad(rows: list[list[int]]) -> torch.Tensor:
        width = max(map(len, rows))
        return torch.tensor([r + [v.pad] * (width - len(r)) for r in rows])

    bos = [v.bos] if model.source_bos else []
    tgt_out = pad([[*t, v.eos] for t in targets])
    # a teacher's top-4 soft targets, for the methods that train on them (bert-kd)
    g = torch.Generator().manual_seed(0)
    extras = {"soft_ids": torch.randint(5, v.size, (*tgt_out.shape, 4), generator=g),
              "soft_logprobs": torch.randn(*tgt_out.shape, 4, generator=g)}
    return Batch(src=pad([[*bos, *s, v.eos] for s in sources]),
                 tgt_in=pad([[v.bos, *t] for t in targets]), tgt_out=tgt_out,
                 ids=torch.arange(3), extras=extras)


def eval_loss(model: Model, batch: Batch, precision=nullcontext) -> float:
    """The loss in eval mode with a fixed seed (the same masks for a parallel model), its
    forward pass under `precision()` (an autocast, say)."""
    model.eval()
    torch.manual_seed(1234)
    with torch.no_grad(), precision():
        return float(model.loss(batch, Progress(0, 10))[0])


def train(model: Model, batch: Batch, steps: int = 4, lr: float = 3e-3,
          precision=nullcontext) -> list[float]:
    """Adam steps over the model's parameter groups; the training losses. Each forward pass
    runs under its own `precision()`, as the trainer's do: one autocast around several steps
    would keep serving the weights it cast before the first update (its cast cache lives
    until the outermost autocast exits)."""
    model.train()
    optimizer = torch.optim.Adam([{"params": g.params} for g in model.param_groups()], lr=lr)
    frozen = [p for p in model.parameters() if not p.requires_grad]
    losses = []
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with precision():
            loss, _ = model.loss(batch, Progress(step, steps))
        loss.backward()
        assert all(p.grad is None for p in frozen), "a frozen parameter got a gradient"
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def outputs(model: Model, batch: Batch) -> list[torch.Tensor]:
    """What decoding reads from the model, in eval mode: teacher-forced log-probs (AT), or
    the length log-probs and the predictions over a partly masked target (NAT)."""
    model.eval()
    with torch.no_grad():
        if isinstance(model, Autoregressive):
            return [F.log_softmax(model(batch.src, batch.tgt_in).float(), dim=-1)]
        if model.decoding == "none":  # a teacher: its predictions over the target
            return [model.predict(batch.src, batch.tgt_out)]
        state = model.encode(batch.src)
        tokens = torch.cat([batch.tgt_in, batch.tgt_out[:, -1:]], dim=1)
        tokens[:, 2:4] = torch.where(tokens[:, 2:4] > BERT_VOCAB.eos, BERT_VOCAB.mask,
                                     tokens[:, 2:4])
        return [state["length_lprobs"], model.predict(tokens, state)]

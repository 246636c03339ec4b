"""CTNMT (`nmtbench/methods/ctnmt.py`) beyond the method contract: the dynamic switch's gate, the
slanted-triangular rate of the BERT's parameter group (and the trainer applying it), and
asymptotic distillation."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from tiny_checkpoints import BERT_VOCAB, save_byte_level_gpt2, save_tiny_bert, save_tiny_gpt2

from nmtbench.errors import InputError
from nmtbench.methods import get_method
from nmtbench.parts.contract import Batch, Progress

SMALL = {"size": "tiny", "d_model": 16, "ffn_dim": 32, "n_heads": 2, "encoder_layers": 1,
         "decoder_layers": 1, "dropout": 0.0, "max_positions": 64}


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("ctnmt") / "bert"
    save_tiny_bert(path, seed=5)
    return str(path)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("ctnmt") / "gpt2"
    save_tiny_gpt2(path, seed=6)
    return str(path)


def ctnmt(bert: str, **settings) -> torch.nn.Module:
    torch.manual_seed(0)
    return get_method("ctnmt").build({**SMALL, "src_bert": bert, **settings}, BERT_VOCAB,
                                     BERT_VOCAB, pretrained={"src_bert": bert})


def batch() -> Batch:
    v = BERT_VOCAB
    src = torch.tensor([[v.bos, 10, 11, 12, v.eos], [v.bos, 20, v.eos, v.pad, v.pad]])
    tgt_in = torch.tensor([[v.bos, 30, 31, 32], [v.bos, 40, v.pad, v.pad]])
    tgt_out = torch.tensor([[30, 31, 32, v.eos], [40, v.eos, v.pad, v.pad]])
    return Batch(src, tgt_in, tgt_out, torch.arange(2))


def test_the_gate_lies_in_zero_one(bert):
    model = ctnmt(bert, dynamic_switch=True).eval()
    with torch.no_grad():
        h_lm, h_nmt = torch.randn(2, 3, SMALL["d_model"]), torch.randn(2, 3, SMALL["d_model"])
        g = model.encoder.gate(h_lm, h_nmt)
    assert g.shape == h_lm.shape
    assert 0 < float(g.min()) and float(g.max()) < 1
    assert float(g.std()) > 0  # elementwise, not one number


def test_a_closed_gate_is_the_plain_nmt_encoder(bert):
    """g = 0: the encoder's output is the Transformer encoder's, whatever the BERT says."""
    model = ctnmt(bert, dynamic_switch=True).eval()
    encoder = model.encoder
    with torch.no_grad():
        encoder.gate_lm.weight.zero_()
        encoder.gate_nmt.weight.zero_()
        encoder.gate_nmt.bias.fill_(-1e4)
        src = batch().src
        out = encoder(src)
        plain = encoder.nmt(src[:, 1:])
    torch.testing.assert_close(out.memory, plain.memory, rtol=0, atol=0)
    # and an open one (g = 1) is the BERT's, mapped to d_model
    with torch.no_grad():
        encoder.gate_nmt.bias.fill_(1e4)
        keep = src != BERT_VOCAB.pad
        h_lm = encoder.bert(input_ids=src, attention_mask=keep.long()).last_hidden_state
        torch.testing.assert_close(encoder(src).memory, encoder.lm_proj(h_lm[:, 1:]))


def slanted_rho(t: int, warm: int = 2_000, freeze: int = 20_000) -> float:
    """The slanted triangle written out: t / T0 before T0, 1 - (t - T0) / (T - T0) until T, 0
    after (neurst's RateScheduledOptimizer's formula; T0 a tenth of T, a short increase)."""
    if t < warm:
        return t / warm
    return 1 - (t - warm) / (freeze - warm) if t < freeze else 0.0


def test_the_rate_multiplier_is_the_published_slanted_triangle(bert):
    """At the default points (2,000 and 20,000 updates), whatever the planned total."""
    groups = {g.name: g for g in ctnmt(bert, rate_scheduling=True).param_groups()}
    for step in (0, 1, 500, 1_999, 2_000, 12_345, 11_000, 19_999, 20_000, 35_000):
        for total in (25_000, 300_000):
            assert groups["bert"].lr_scale(Progress(step, total)) == pytest.approx(
                slanted_rho(step), abs=1e-12)
    assert slanted_rho(500) == 0.25 and slanted_rho(11_000) == 0.5


def test_the_bert_has_its_own_group_on_that_schedule(bert):
    model = ctnmt(bert, rate_scheduling=True, dynamic_switch=True, rate_warm_updates=20,
                  rate_freeze_updates=60)
    groups = {g.name: g for g in model.param_groups()}
    assert set(groups) == {"bert", "nmt"}
    assert {id(p) for p in groups["bert"].params} == {
        id(p) for p in model.encoder.bert.parameters()}
    assert groups["bert"].lr_scale(Progress(20, 100)) == pytest.approx(1.0)
    assert groups["bert"].lr_scale(Progress(40, 100)) == pytest.approx(0.5)
    assert groups["bert"].lr_scale(Progress(60, 100)) == 0.0
    assert groups["nmt"].lr_scale(Progress(60, 100)) == 1.0
    # without rate scheduling the fine-tuned BERT learns at the usual rate
    plain = {g.name: g for g in ctnmt(bert, dynamic_switch=True).param_groups()}
    assert plain["bert"].lr_scale(Progress(60, 100)) == 1.0


def test_distillation_is_zero_when_the_student_states_are_the_teachers(bert):
    """BERT as the encoder (rate scheduling) starts as the frozen teacher: in eval mode (no
    dropout) their states agree, and the distillation term is 0; training moves them apart."""
    model = ctnmt(bert, rate_scheduling=True, distillation=True).eval()
    with torch.no_grad():
        losses = model.losses(batch())
    assert float(losses.terms["distill"]) == 0.0
    assert float(losses.terms["tokens"]) > 0
    with torch.no_grad():
        weight = model.encoder.bert.encoder.layer[-1].output.dense.weight
        weight.add_(0.1 * torch.randn_like(weight))
        assert float(model.losses(batch()).terms["distill"]) > 1e-6


def test_the_distillation_term_is_eq_4_squared_l2_distance_summed_over_positions(bert):
    """L_kd = ||h_lm - h_l||_2^2 at each real source position (Eq. 4), summed; the "mean"
    reading divides each position's by the teacher's width."""
    losses = {}
    for reduction in ("sum", "mean"):
        model = ctnmt(bert, distillation=True, distill_reduction=reduction).eval()
        b = batch()
        with torch.no_grad():
            losses[reduction] = float(model.losses(b).terms["distill"])
            student = model.distill_proj(model.encoder(b.src).context["student"])
            teacher = model.teacher(input_ids=b.src, attention_mask=(
                b.src != BERT_VOCAB.pad).long()).last_hidden_state[:, 1:]
        real = b.src[:, 1:] != BERT_VOCAB.pad
        by_hand = sum(float(torch.dot(d, d)) for d in (student - teacher)[real])
        width = model.teacher.config.hidden_size
    assert losses["sum"] == pytest.approx(by_hand, rel=1e-5)
    assert losses["mean"] == pytest.approx(by_hand / width, rel=1e-5)


def test_distillation_weights_the_terms_with_alpha(bert):
    model = ctnmt(bert, distillation=True, distill_alpha=0.3).eval()
    with torch.no_grad():
        total, losses = model.loss(batch())
    expected = (0.3 * losses.terms["tokens"] + 0.7 * losses.terms["distill"]) / losses.ntokens
    torch.testing.assert_close(total, expected)
    assert model.encoder.bert is None  # distillation alone: nothing of the BERT translates
    assert model.teacher is not None and not any(p.requires_grad
                                                 for p in model.teacher.parameters())


def test_the_teacher_stays_in_eval_mode(bert):
    model = ctnmt(bert, distillation=True, dynamic_switch=True).train()
    assert not model.teacher.training
    assert model.encoder.bert.training


def test_decoder_distillation_pulls_the_decoder_states_towards_the_target_bert(bert):
    """Table 2's "BERT Dec": the squared error, summed over real target tokens, between the
    states the decoder's output layer reads and the target BERT's last layer at the same token
    of [CLS] y [SEP]; only the NMT model learns from it."""
    model = ctnmt(bert, distillation=True, distill_side="decoder", tgt_bert=bert).eval()
    b = batch()
    with torch.no_grad():
        losses = model.losses(b)
        states = model.decoder.states(b.tgt_in, model.encoder(b.src))
        text = torch.cat([b.tgt_in[:, :1], b.tgt_out], 1)  # [CLS] y [SEP]
        teacher = model.teacher(input_ids=text,
                                attention_mask=(text != BERT_VOCAB.pad).long()).last_hidden_state
        error = (model.distill_proj(states) - teacher[:, :4]).pow(2).sum(-1)
        expected = error.masked_select(b.tgt_in != BERT_VOCAB.pad).sum()
    torch.testing.assert_close(losses.terms["distill"], expected)
    model.train()
    model.losses(b).terms["distill"].backward()
    assert model.decoder.layers[0].ffn.fc1.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.teacher.parameters())


def gpt2_states(gpt2: str, text: torch.Tensor) -> torch.Tensor:
    from transformers import GPT2Model

    model = GPT2Model.from_pretrained(gpt2).eval()
    with torch.no_grad():
        return model(input_ids=text,
                     attention_mask=(text != BERT_VOCAB.pad).long()).last_hidden_state


def test_a_gpt2_teacher_of_the_decoder_has_seen_what_the_student_has(bert, gpt2):
    """Table 2's "GPT-2 Dec": the teacher is the GPT-2 in `tgt_bert`, reading [CLS] y [SEP];
    its state at a token depends on that token's prefix only (the decoder's view), so changing
    the last target token moves only the last position's term."""
    model = get_method("ctnmt").build(
        {**SMALL, "src_bert": bert, "tgt_bert": gpt2, "distillation": True,
         "distill_teacher": "gpt2", "distill_side": "decoder"},
        BERT_VOCAB, BERT_VOCAB, pretrained={"src_bert": bert, "tgt_bert": gpt2}).eval()
    assert model.teacher.config.model_type == "gpt2"
    b = batch()
    with torch.no_grad():
        losses = model.losses(b)
        states = model.decoder.states(b.tgt_in, model.encoder(b.src))
    teacher = gpt2_states(gpt2, torch.cat([b.tgt_in[:, :1], b.tgt_out], 1))
    error = (model.distill_proj(states) - teacher[:, :4]).pow(2).sum(-1)
    torch.testing.assert_close(losses.terms["distill"],
                               error.masked_select(b.tgt_in != BERT_VOCAB.pad).sum())
    changed = torch.cat([b.tgt_in[:, :1], b.tgt_out], 1)
    changed[0, 3] = 50  # y_3 of the first sentence (the student reads it at position 3)
    moved = (gpt2_states(gpt2, changed) - teacher).abs().amax(-1)[0]
    assert moved[:3].max() == 0 and moved[3] > 0


def test_a_gpt2_teacher_of_the_encoder_reads_the_source(bert, gpt2):
    """Table 2's "GPT-2 Enc": the GPT-2 in `src_bert` is the teacher of the Transformer
    encoder's top layer at the tokens of x [SEP]; nothing of it translates."""
    model = ctnmt(gpt2, distillation=True, distill_teacher="gpt2").eval()
    b = batch()
    with torch.no_grad():
        losses = model.losses(b)
        student = model.encoder(b.src).context["student"]
    teacher = gpt2_states(gpt2, b.src)[:, 1:]
    error = (model.distill_proj(student) - teacher).pow(2).sum(-1)
    torch.testing.assert_close(losses.terms["distill"],
                               error.masked_select(b.src[:, 1:] != BERT_VOCAB.pad).sum())
    assert model.encoder.bert is None


@pytest.mark.parametrize("settings, message", [
    ({}, "ctnmt with distillation, dynamic_switch and rate_scheduling all off"),
    ({"distillation": True, "distill_side": "decoder"},
     "ctnmt distill_side decoder needs `tgt_bert`"),
    ({"distillation": True, "distill_teacher": "gpt2"},
     "ctnmt distill_teacher 'gpt2', but src_bert '.*' is a bert checkpoint"),
    ({"distillation": True, "distill_teacher": "t5"}, "ctnmt distill_teacher 't5': use one of"),
    ({"distillation": True, "distill_teacher": "gpt2", "dynamic_switch": True},
     "the dynamic switch and rate scheduling need it to be the BERT"),
    ({"rate_scheduling": True, "rate_warm_updates": 600, "rate_freeze_updates": 500},
     "need 0 < rate_warm_updates < rate_freeze_updates"),
])
def test_bad_settings_are_one_line(bert, settings, message):
    with pytest.raises(InputError, match=message):
        ctnmt(bert, **settings)


def test_gpt2_rows_run_with_the_public_gpt2_and_on_the_toy_world():
    """Table 2's GPT-2 teachers: on WMT14 the public `gpt2` (its byte-level BPE the side's
    vocabulary); on the toy world the GPT-2 pre-trained on each side stands in."""
    from pathlib import Path

    from nmtbench.workflow import config as nmtconfig

    root = Path(__file__).resolve().parents[2]
    files = [root / "config" / "config.yaml"]
    toy = nmtconfig.check(nmtconfig.load_config(files), root / "config" / "schema.yaml",
                          root / "papers")
    paper = nmtconfig.check(nmtconfig.load_config([*files, root / "config" / "paper.yaml"]),
                            root / "config" / "schema.yaml", root / "papers")
    for experiment, role, side in (("ctnmt-distill-gpt2-encoder", "src_bert", "src"),
                                   ("ctnmt-distill-gpt2-decoder", "tgt_bert", "tgt")):
        assert paper.status(experiment, "wmt14-en-de") == "ok"
        assert paper.checkpoints("wmt14-en-de", experiment)[role] == "gpt2"
        assert paper.vocabulary("wmt14-en-de", experiment, side) == ("gpt2", side)
        assert toy.status(experiment, "toy") == "ok"
        assert toy.checkpoints("toy", experiment)[role] == f"toy-gpt2-{side}"
    assert toy.config["pretraining"]["toy-gpt2-src"]["model"] == "gpt2"


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_a_byte_level_gpt2_teaches_through_training_and_decoding(side, bert, toy_dir,
                                                                 toy_paths, tmp_path):
    """A checkpoint shaped like the public `gpt2` (byte-level BPE, <|endoftext|> its one
    special token) is the distilled side's teacher and vocabulary: the run trains, its teacher
    has two zero rows more ([PAD], [MASK]) and its translations are text. (Into the decoder,
    `src_bert` names the source side's BERT, which distillation alone never loads.)"""
    from nmtbench.evaluation.translate import load_run_model, translate_file
    from nmtbench.training.trainer import Trainer
    from nmtbench.workflow.decode_settings import DecodeSettings

    short = "src" if side == "encoder" else "tgt"
    teacher = tmp_path / "gpt2"
    lines = (toy_dir / f"mono.{short}").read_text().splitlines()[:500]
    own = save_byte_level_gpt2(teacher, lines, seed=4).config.vocab_size
    role = "src_bert" if side == "encoder" else "tgt_bert"
    run = tmp_path / "run"
    trainer = Trainer(run, {"method": "ctnmt", **SMALL, "max_positions": 256, "src_bert": bert,
                            "distillation": True, "distill_teacher": "gpt2",
                            "distill_side": side, role: str(teacher), "max_tokens": 800,
                            "lr": 0.003, "warmup_updates": 5, "max_epochs": 1,
                            "log_interval": 1, "seed": 3},
                      replace(toy_paths, **{f"{short}_tokenizer": str(teacher)},
                              pretrained={role: str(teacher)}), device="cpu")
    trainer.run()
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    steps = [r for r in log if r["event"] == "train"]
    assert steps and all(r["distill_per_position"] > 0 for r in steps)
    rows = trainer.model.teacher.get_input_embeddings().weight
    assert rows.shape[0] == own + 2 and not rows[own:].any()
    # translating needs none of the teacher: the run loads without it, every other weight
    # (the projection onto the teacher's width among them) as training left it
    model = load_run_model(run, "last")[0]
    assert model.teacher is None
    trained = {k: v for k, v in trainer.model.state_dict().items()
               if not k.startswith("teacher.")}
    assert model.state_dict().keys() == trained.keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in trained.items())
    out = tmp_path / "hyp.txt"
    translate_file(run, toy_dir / "test.src", out, DecodeSettings(beam=2), device="cpu",
                   max_lines=8)
    hyps = out.read_text().splitlines()
    assert len(hyps) == 8 and any(hyps)
    assert not any("Ġ" in h or "<|endoftext|>" in h or "[PAD]" in h for h in hyps)

"""BERT-fused NMT (`nmtbench/methods/bert_fused.py`) beyond the method contract: drop-net's branch
frequencies, inference averaging, the warm start from a Transformer run, and that the NMT part
reads exactly what its warm-start parent read."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from tiny_checkpoints import BERT_VOCAB, save_tiny_bert

import nmtbench.methods.bert_fused as bert_fused
from nmtbench.errors import InputError
from nmtbench.methods import get_method
from nmtbench.parts.contract import Batch

SMALL = {"size": "tiny", "d_model": 16, "ffn_dim": 32, "n_heads": 2, "encoder_layers": 2,
         "decoder_layers": 2, "dropout": 0.0, "max_positions": 64}


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("fused") / "bert"
    save_tiny_bert(path, seed=3)
    return str(path)


def fused(bert: str, **settings) -> torch.nn.Module:
    torch.manual_seed(0)
    return get_method("bert-fused").build({**SMALL, "src_bert": bert, **settings}, BERT_VOCAB,
                                          BERT_VOCAB, pretrained={"src_bert": bert})


def transformer() -> torch.nn.Module:
    torch.manual_seed(1)
    return get_method("transformer").build(SMALL, BERT_VOCAB, BERT_VOCAB)


def pairs(bos: bool) -> Batch:
    """Two sources x [SEP] (or [CLS] x [SEP]) and targets, right-padded."""
    v = BERT_VOCAB
    head = [v.bos] if bos else []
    src = torch.tensor([[*head, 10, 11, 12, v.eos], [*head, 20, v.eos, v.pad, v.pad]])
    tgt_in = torch.tensor([[v.bos, 30, 31, 32], [v.bos, 40, v.pad, v.pad]])
    tgt_out = torch.tensor([[30, 31, 32, v.eos], [40, v.eos, v.pad, v.pad]])
    return Batch(src, tgt_in, tgt_out, torch.arange(2))


@pytest.mark.parametrize("p_net", [1.0, 0.4])
def test_drop_net_keeps_each_branch_alone_with_probability_half_p_net(p_net):
    torch.manual_seed(0)
    n = 20000
    counts = Counter(bert_fused.drop_net(p_net, training=True) for _ in range(n))
    assert set(counts) <= {(1.0, 0.0), (0.0, 1.0), (0.5, 0.5)}
    for weights in [(1.0, 0.0), (0.0, 1.0)]:
        assert counts[weights] / n == pytest.approx(p_net / 2, abs=0.015)
    assert counts[(0.5, 0.5)] / n == pytest.approx(1 - p_net, abs=0.015)


def test_inference_and_p_net_zero_average_both_branches():
    torch.manual_seed(0)
    assert {bert_fused.drop_net(1.0, training=False) for _ in range(200)} == {(0.5, 0.5)}
    assert {bert_fused.drop_net(0.0, training=True) for _ in range(200)} == {(0.5, 0.5)}


def test_every_fused_sub_layer_draws_its_own_branches_in_training(bert, monkeypatch):
    """Drop-net draws per sub-layer and per pass: 2 encoder + 2 decoder layers per forward."""
    draws = []
    real = bert_fused.drop_net

    def spy(p_net: float, training: bool) -> tuple[float, float]:
        draws.append((p_net, training))
        return real(p_net, training)

    monkeypatch.setattr(bert_fused, "drop_net", spy)
    model = fused(bert)
    model.train()
    model.loss(pairs(bos=True))
    assert draws == [(1.0, True)] * 4
    draws.clear()
    model.eval()
    with torch.no_grad():
        model.loss(pairs(bos=True))
    assert draws == [(1.0, False)] * 4


def test_the_warm_start_loads_the_transformer_and_reports_the_bert_attentions(bert):
    parent = transformer()
    model = fused(bert)
    report = model.warm_start(parent.checkpoint_state())
    assert report.unexpected == []
    assert report.missing and all(".bert_attn." in key for key in report.missing)
    assert len(report.missing) == 4 * 8  # 2 + 2 layers, q/k/v/out weights and biases
    own = model.state_dict()
    for key, value in parent.state_dict().items():
        assert torch.equal(own[key], value), key


def test_with_the_usual_branches_only_it_is_its_warm_start_parent(bert, monkeypatch):
    """The NMT part reads x [SEP] (the ids after BERT's [CLS]) exactly as the Transformer it
    was warm-started from: with drop-net keeping the usual branches, their losses agree."""
    parent = transformer().eval()
    model = fused(bert).eval()
    model.warm_start(parent.checkpoint_state())
    monkeypatch.setattr(bert_fused, "drop_net", lambda p_net, training: (1.0, 0.0))
    with torch.no_grad():
        ours = model.loss(pairs(bos=True))[0]
        theirs = parent.loss(pairs(bos=False))[0]
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)


def test_the_bert_branch_changes_the_output(bert):
    model = fused(bert).eval()
    with torch.no_grad():
        fused_loss = model.loss(pairs(bos=True))[0]
        for layer in [*model.encoder.layers, *model.decoder.layers]:
            layer.bert_attn.out_proj.weight.zero_()
            layer.bert_attn.out_proj.bias.zero_()
        silenced = model.loss(pairs(bos=True))[0]
    assert not torch.allclose(fused_loss, silenced)


def test_removing_an_attention_removes_its_parameters(bert):
    def attending(model: torch.nn.Module) -> set[str]:
        return {n.split(".")[0] for n, _ in model.named_parameters() if "bert_attn" in n}

    assert attending(fused(bert)) == {"encoder", "decoder"}
    assert attending(fused(bert, bert_enc_attention=False)) == {"decoder"}
    assert attending(fused(bert, bert_dec_attention=False)) == {"encoder"}


def test_random_features_carry_nothing_of_the_source(bert):
    """H_B replaced by random vectors: the same at inference whatever the source says."""
    model = fused(bert, bert_features="random").eval()
    src = pairs(bos=True).src
    other = src.clone()
    other[0, 1:4] = torch.tensor([50, 51, 52])
    keep = src != BERT_VOCAB.pad
    assert torch.equal(model.encoder.bert_states(src, keep), model.encoder.bert_states(other, keep))
    real = fused(bert).eval().encoder.bert_states(src, keep)
    assert not torch.equal(real, model.encoder.bert_states(src, keep))


@pytest.mark.parametrize("settings, message", [
    ({"bert_features": "noise"}, "bert_features 'noise': use one of bert, random"),
    ({"bert_fusion": "concat"}, "bert_fusion 'concat': use one of attention, add"),
    ({"drop_net": 1.5}, "drop_net 1.5: p_net is a probability in [0, 1]"),
    ({"features_from": {"experiment": "t"}, "decoding": "nat"},
     "bert-fused features_from: with decoding at and bert_features bert only"),
])
def test_bad_settings_are_one_line(bert, settings, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        fused(bert, **settings)


def test_another_runs_encoder_replaces_bert_and_stays_fixed(bert):
    """features_from: the parent's encoder (and only it) loads into the feature encoder, whose
    states are then the parent encoder's on x [SEP]; nothing of it trains."""
    other = transformer().eval()
    model = fused(bert, features_from={"experiment": "transformer-iwslt"}).eval()
    report = model.warm_start(other.checkpoint_state(), "features_from", "encoder.",
                              "encoder.bert.")
    assert report.missing == [] and report.unexpected == []
    assert not any(p.requires_grad for p in model.encoder.bert.parameters())
    assert all(".bert." not in n for n, _ in model.named_parameters() if _.requires_grad)
    batch = pairs(bos=True)
    keep = batch.src != BERT_VOCAB.pad
    with torch.no_grad():
        features = model.encoder.bert_states(batch.src, keep)
        expected = other.encoder(pairs(bos=False).src).memory
        torch.testing.assert_close(features, expected, rtol=0, atol=0)
        model.loss(batch)  # the fused layers attend to it (mask of x [SEP])


def test_features_from_a_checkpoint_without_an_encoder_is_one_line(bert):
    model = fused(bert, features_from={"experiment": "transformer-iwslt"})
    with pytest.raises(InputError, match="features_from: the checkpoint has no weights under "
                                         "'encoder.'"):
        model.warm_start({"decoder.x": torch.zeros(1)}, "features_from", "encoder.",
                         "encoder.bert.")

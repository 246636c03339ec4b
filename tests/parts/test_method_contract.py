"""The method contract (`nmtbench.parts.contract`): what every registered method must pass, as
Hugging Face's ModelTesterMixin is for its models.

A method gets these tests by registering (its entry in config/schema.yaml): without variants of
its own it is checked in one tiny config per decoding, every pre-trained checkpoint role filled
with a tiny random BERT of its side (the fixture `tiny_berts`, conftest.py, saved once per
session). `CASES` (tests/helpers/tiny_models.py, where the tiny models are built for these
tests and the compiling and CUDA ones) adds variants: one tiny experiment config per model a
method can build (a decoding, an optional pre-trained side, a freezing policy, an output
mode...).

Checked per case: it builds; output shapes; the loss is finite and falls over a few Adam steps
on one tiny batch; frozen parameters get no gradient, do not move, and are exactly what the
run's checkpoint leaves out; incremental decoding equals the teacher-forced pass (autoregressive)
or predict/encode have the documented shapes (parallel); it implements one decoding protocol,
not the other; a warm start from a trained model's checkpoint state fills every key and gives
the same outputs; the optimiser groups hold every trainable parameter once and no frozen one.
Per method: its class is where its entry says, and its settings are that entry's.
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass

import pytest
import torch
import torch.nn.functional as F
from tiny_checkpoints import BERT_VOCAB
from tiny_models import (
    CASE_IDS,
    CASES,
    METHODS,
    build,
    cases_of,
    config_of,
    eval_loss,
    outputs,
    tiny_batch,
    train,
)

from nmtbench.errors import InputError
from nmtbench.evaluation.translate import source_positions
from nmtbench.methods import get_method
from nmtbench.parts.beam_search import beam_search
from nmtbench.parts.contract import (
    Autoregressive,
    Method,
    MethodSettings,
    Model,
    NonAutoregressive,
    Progress,
    WarmStart,
)
from nmtbench.parts.mask_predict import mask_predict


def frozen_names(model: Model) -> set[str]:
    """Every name (tied aliases too) of a parameter that does not train."""
    return {n for n, p in model.named_parameters(remove_duplicate=False) if not p.requires_grad}


# --- registration: the schema entry is the method's settings and says where its class is -----

def test_cases_name_only_registered_methods():
    assert set(CASES) <= set(METHODS), sorted(set(CASES) - set(METHODS))


@pytest.mark.parametrize("name", list(METHODS))
def test_the_class_is_where_the_entry_says_and_its_settings_are_the_entry(name):
    method, info = get_method(name), METHODS[name]
    assert issubclass(method, Method)
    assert issubclass(method.settings, MethodSettings) and is_dataclass(method.settings)
    assert method.settings.method == name, (
        f"{info.cls}: settings made from $defs.methods.{method.settings.method}, not {name}")
    assert method.settings.keys() == info.keys == {f.name for f in fields(method.settings)}
    assert method.decodings == info.decodings and method.checkpoint_roles == info.checkpoint_roles
    assert set(method.decodings) <= {"at", "nat", "none"}  # what translate and the rules know
    assert set(info.parent_runs) == set(method.parent_runs), (
        "the settings marked x-parent-run (the trainer's init_from included) are the ones the "
        "method says where to load")
    # the defaults are the entry's; every key, at its default, is read back as given
    defaults = method.settings.from_config({})
    for key, spec in info.schema["properties"].items():
        if key in info.keys and "default" in spec:
            assert getattr(defaults, key) == spec["default"], key
    given = {k: getattr(defaults, k) for k in info.keys}
    read = method.settings.from_config({**given, "lr": 0.1, "max_epochs": 3})  # trainer's keys
    assert {k: getattr(read, k) for k in info.keys} == given
    for variant, cfg in cases_of(name).items():
        assert set(cfg) <= info.keys, f"CASES[{name!r}][{variant!r}] sets keys {name} lacks"
    decoded = {cfg.get("decoding", method.decodings[0]) for cfg in cases_of(name).values()}
    assert decoded == set(method.decodings), f"CASES[{name!r}] must cover every decoding"


@pytest.mark.parametrize("name", list(METHODS))
def test_the_loss_terms_the_entry_declares_are_those_its_models_give(name, tiny_berts):
    """Planning refuses a `loss_weights` key outside `x-loss-terms` without building a model:
    the declared terms must be the ones the method's models give, over all its cases."""
    given = set()
    for variant in cases_of(name):
        model = build(name, variant, tiny_berts).train()
        given |= set(model.losses(tiny_batch(model), Progress(0, 10)).terms)
    assert given == set(METHODS[name].loss_terms)


def test_a_settings_default_is_a_fresh_copy():
    """Mutable defaults (loss weights, lists) are not shared between settings objects."""
    settings = get_method("deep-fusion").settings
    first = settings.from_config({})
    first.losses.append("x")
    first.loss_weights["length"] = 5
    second = settings.from_config({})
    assert "x" not in second.losses and second.loss_weights == {"length": 0.1}


@pytest.mark.parametrize("name", [n for n in METHODS
                                  if "decoding" in get_method(n).settings.keys()])
def test_a_decoding_the_method_does_not_list_is_an_input_error(name, tiny_berts):
    variant = next(iter(cases_of(name)))
    cfg = {**config_of(name, variant), "decoding": "left-to-right"}
    with pytest.raises(InputError, match="decoding"):
        get_method(name).build(cfg, BERT_VOCAB, BERT_VOCAB, pretrained=tiny_berts)
    for decoding in {"at", "nat"} - set(get_method(name).decodings):
        with pytest.raises(InputError, match="decoding"):
            get_method(name).build({**cfg, "decoding": decoding}, BERT_VOCAB, BERT_VOCAB,
                                   pretrained=tiny_berts)


# --- per case -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_builds_the_model_class_and_protocol_of_its_decoding(name, variant, tiny_berts):
    method = get_method(name)
    model = build(name, variant, tiny_berts)
    decoding = cases_of(name)[variant].get("decoding", method.decodings[0])
    assert isinstance(model, Model)
    assert isinstance(model.settings, method.settings)
    assert model.src_vocab == BERT_VOCAB and model.tgt_vocab == BERT_VOCAB
    assert isinstance(model.source_bos, bool)
    assert model.decoding == decoding
    if decoding == "at":
        assert isinstance(model, method.autoregressive)
        assert isinstance(model, Autoregressive) and not isinstance(model, NonAutoregressive)
        assert model.max_positions > 0
    elif decoding == "none":  # trained, never decoded (a teacher): predicts masked targets
        assert not isinstance(model, (Autoregressive, NonAutoregressive))
        assert callable(model.predict)
    else:
        assert isinstance(model, method.parallel)
        assert isinstance(model, NonAutoregressive) and not isinstance(model, Autoregressive)
        assert model.max_length > 0


@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_output_shapes(name, variant, tiny_berts):
    model = build(name, variant, tiny_berts).eval()
    batch = tiny_batch(model)
    B, T, V = *batch.tgt_in.shape, BERT_VOCAB.size
    with torch.no_grad():
        if isinstance(model, Autoregressive):
            assert model(batch.src, batch.tgt_in).shape == (B, T, V)
            state = model.encode(batch.src)
            assert all(t.size(0) == B for t in state.values())
            assert model.decode_step(batch.tgt_in[:, 0], state).shape == (B, V)
        elif model.decoding == "none":
            lprobs = model.predict(batch.src, batch.tgt_out)
            assert lprobs.shape == (B, T, V)
            torch.testing.assert_close(lprobs.exp().sum(-1), torch.ones(B, T))
        else:
            state = model.encode(batch.src)
            assert all(t.size(0) == B for t in state.values())  # reorder_state selects rows
            lengths = state["length_lprobs"]
            assert lengths.dim() == 2 and lengths.size(0) == B
            assert lengths.size(1) > model.max_length
            torch.testing.assert_close(lengths.exp().sum(-1), torch.ones(B))
            assert lengths[:, 0].isneginf().all()  # length 0 is never predicted
            assert lengths[:, model.max_length + 1:].isneginf().all()  # nor longer than max
            tokens = torch.full((B, T + 1), BERT_VOCAB.mask)
            tokens[:, 0], tokens[:, -1] = BERT_VOCAB.bos, BERT_VOCAB.eos
            lprobs = model.predict(tokens, state)
            assert lprobs.shape == (B, T + 1, V)
            torch.testing.assert_close(lprobs.exp().sum(-1), torch.ones(B, T + 1))
            # only the chosen positions (mask-predict's re-masked ones), in row-major order
            chosen = torch.rand(B, T + 1) < 0.5
            torch.testing.assert_close(model.predict(tokens, state, positions=chosen),
                                       lprobs[chosen], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_loss_is_finite_and_falls_on_a_tiny_batch(name, variant, tiny_berts):
    model = build(name, variant, tiny_berts)
    batch = tiny_batch(model)
    model.train()
    loss, losses = model.loss(batch, Progress(0, 10))
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert losses.terms and losses.ntokens > 0
    assert all(t.dim() == 0 and torch.isfinite(t) for t in losses.terms.values())
    torch.testing.assert_close(loss, losses.total(model.settings.loss_weights))
    assert all(math.isfinite(v) for v in losses.per_token().values())
    before = eval_loss(model, batch)
    train(model, batch)
    after = eval_loss(model, batch)
    assert math.isfinite(after) and after < before, (before, after)


@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_what_is_frozen_stays_frozen_and_is_left_out_of_checkpoints(name, variant, tiny_berts):
    model = build(name, variant, tiny_berts)
    batch = tiny_batch(model)
    params = dict(model.named_parameters())
    before = {n: p.detach().clone() for n, p in params.items()}
    train(model, batch, steps=3)  # asserts that no frozen parameter gets a gradient
    for n, p in params.items():
        if p.requires_grad:
            assert not torch.equal(p, before[n]), f"{n} trains but did not move"
        else:
            assert torch.equal(p, before[n]), f"{n} is frozen but moved"
    # the frozen weights are those of the pre-trained checkpoints: not saved, reloaded
    left_out = set(model.state_dict()) - set(model.checkpoint_state())
    assert left_out == frozen_names(model)
    assert model.num_params()["trained"] == sum(p.numel() for p in params.values()
                                                if p.requires_grad)


@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_param_groups_hold_every_trainable_parameter_once(name, variant, tiny_berts):
    model = build(name, variant, tiny_berts)
    groups = model.param_groups()
    assert groups and len({g.name for g in groups}) == len(groups)
    grouped = [id(p) for g in groups for p in g.params]
    assert len(grouped) == len(set(grouped)), "a parameter is in two groups"
    assert set(grouped) == {id(p) for p in model.parameters() if p.requires_grad}
    for g in groups:
        assert all(p.requires_grad for p in g.params), f"group {g.name} holds a frozen one"
        for step in (0, 5, 10):
            scale = g.lr_scale(Progress(step, 10))
            assert math.isfinite(scale) and scale >= 0, (g.name, step, scale)
        assert g.weight_decay is None or g.weight_decay >= 0


@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_decoding_hooks(name, variant, tiny_berts):
    """AT: encode + decode_step token by token equals the teacher-forced pass, also after
    beam search's row reordering; NAT: predict after reorder_state is predict's rows. Both
    decoders run."""
    model = build(name, variant, tiny_berts).eval()
    batch = tiny_batch(model)
    v = BERT_VOCAB
    order = torch.tensor([2, 0, 0, 1])
    with torch.no_grad():
        if isinstance(model, Autoregressive):
            full = F.log_softmax(model(batch.src, batch.tgt_in).float(), dim=-1)  # (B, T, V)
            state = model.encode(batch.src)
            split = 2
            for t in range(split):
                torch.testing.assert_close(model.decode_step(batch.tgt_in[:, t], state),
                                           full[:, t], rtol=0, atol=1e-5)
            state = model.reorder_state(state, order)
            full = F.log_softmax(model(batch.src[order], batch.tgt_in[order]).float(), dim=-1)
            for t in range(split, batch.tgt_in.size(1)):
                torch.testing.assert_close(model.decode_step(batch.tgt_in[order, t], state),
                                           full[:, t], rtol=0, atol=1e-5)
            hyps = beam_search(model, batch.src, beam=2, vocab=v,
                               max_len_a=1.0, max_len_b=3)
        elif model.decoding == "none":  # no decoding: each pair's predictions are its own
            lprobs = model.predict(batch.src, batch.tgt_out)
            reordered = model.predict(batch.src[order], batch.tgt_out[order])
            real = batch.tgt_out[order] != v.pad
            torch.testing.assert_close(reordered[real], lprobs[order][real], rtol=0, atol=1e-5)
            return
        else:
            state = model.encode(batch.src)
            tokens = torch.full((3, 5), v.mask)
            tokens[:, 0], tokens[:, -1] = v.bos, v.eos
            lprobs = model.predict(tokens, state)
            reordered = model.predict(tokens[order], model.reorder_state(state, order))
            torch.testing.assert_close(reordered, lprobs[order], rtol=0, atol=1e-5)
            hyps = mask_predict(model, batch.src, length_beam=2, iterations=2, vocab=v)
            assert all(1 <= len(h) <= model.max_length for h in hyps)
    assert len(hyps) == 3
    assert all(t not in (v.pad, v.bos, v.eos) for h in hyps for t in h)


@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_source_positions_is_the_longest_source_the_pretrained_encoder_reads(name, variant,
                                                                             tiny_berts):
    """Decoding refuses a source longer than a pre-trained encoder's positions by its line
    number before it starts (translate.source_positions), where the BERT would fail inside
    Hugging Face's code: a source of that many tokens encodes, one more fails."""
    model = build(name, variant, tiny_berts).eval()
    limit = source_positions(model)
    if model.decoding == "none" or limit is None:  # never decoded, or no pre-trained encoder
        return
    v = BERT_VOCAB

    def source(n: int) -> torch.Tensor:
        bos = [v.bos] if model.source_bos else []
        return torch.tensor([bos + [10] * (n - len(bos) - 1) + [v.eos]])

    with torch.no_grad():
        model.encode(source(limit))
        with pytest.raises((IndexError, RuntimeError)):
            model.encode(source(limit + 1))


@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_warm_start_round_trip(name, variant, tiny_berts):
    trained = build(name, variant, tiny_berts, seed=0)
    batch = tiny_batch(trained)
    train(trained, batch, steps=2)
    state = trained.checkpoint_state()
    fresh = build(name, variant, tiny_berts, seed=1)
    if any(not torch.equal(t, fresh.state_dict()[k]) for k, t in state.items()):
        expected = outputs(trained, batch)
        assert any(not torch.equal(a, b) for a, b in zip(outputs(fresh, batch), expected,
                                                         strict=True))
    report = fresh.warm_start(state)
    assert (report.missing, report.unexpected) == ([], [])
    for a, b in zip(outputs(fresh, batch), outputs(trained, batch), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # a resumed run loads the same state strictly
    resumed = build(name, variant, tiny_berts, seed=2)
    resumed.load_checkpoint_state(state, "checkpoints/last.pt")
    for a, b in zip(outputs(resumed, batch), outputs(trained, batch), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_warm_start_reports_what_it_did_not_fill_and_refuses_other_shapes(name, variant,
                                                                          tiny_berts):
    model = build(name, variant, tiny_berts)
    state = dict(model.checkpoint_state())
    dropped = sorted(state)[0]
    del state[dropped]
    state["no.such.weight"] = torch.zeros(1)
    # the sides whose weights the checkpoint holds (a frozen BERT encoder's are not saved; a
    # BERT-KD teacher is one BERT, which no run warm-starts from): their vocabularies count
    sides = frozenset(side for side, part in (("src", "encoder."), ("tgt", "decoder."))
                      if any(key.startswith(part) for key in state))
    assert model.warm_start(state) == WarmStart(missing=[dropped], unexpected=["no.such.weight"],
                                                sides=sides)
    if name not in ("bert-kd-teacher", "bert-frozen"):
        assert sides == {"src", "tgt"}
    state = dict(model.checkpoint_state())
    key = next(k for k, t in state.items() if t.dim() >= 1)
    state[key] = torch.zeros(*state[key].shape[:-1], state[key].shape[-1] + 1)
    with pytest.raises(InputError, match=key.replace(".", r"\.")):
        model.warm_start(state)
    # a checkpoint none of whose weights is one of this model's (another method's run)
    other = {f"elsewhere.{key}": value for key, value in model.checkpoint_state().items()}
    with pytest.raises(InputError, match=r"^init_from: none of the checkpoint's \d+ weights "):
        model.warm_start(other)

"""Compiled training (config `compile`): which modules compile, and that a compiled update
computes what the eager one does: on CPU here, and on a GPU (bf16 autocast, where compiled
training is meant to run) when there is one."""

import pytest
import torch
from tiny_checkpoints import BERT_VOCAB
from tiny_models import build, tiny_batch

from nmtbench.devices import autocast
from nmtbench.methods.transformer import DecoderLayer, EncoderLayer
from nmtbench.parts.contract import Progress
from nmtbench.parts.losses import compiled_smoothed_nll, smoothed_nll_of_logits


def compiled_modules(model):
    return [m for m in model.modules() if getattr(m, "_compiled_call_impl", None) is not None]


def test_the_models_own_layers_compile_and_nothing_else(tiny_berts):
    model = build("bert-fused", "nat", tiny_berts)
    model.compile_for_training()
    layers = [m for m in model.modules() if isinstance(m, (EncoderLayer, DecoderLayer))]
    assert layers and compiled_modules(model) == layers  # the frozen BERT stays eager
    assert model.compiled


def test_the_loss_of_logits_is_the_label_smoothed_loss_of_their_log_probabilities():
    logits = torch.randn(6, BERT_VOCAB.size, dtype=torch.bfloat16)
    target = torch.tensor([5, 9, 0, 7, 0, 11])
    lprobs = torch.log_softmax(logits.float(), dim=-1)
    from nmtbench.parts.losses import label_smoothed_nll

    for got, want in zip(smoothed_nll_of_logits(logits, target, 0.1, 0),
                         label_smoothed_nll(lprobs, target, 0.1, 0), strict=True):
        assert torch.equal(got, want)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"))]


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, variant", [("transformer", "post-norm"), ("cmlm", "nat")])
def test_a_compiled_update_computes_what_the_eager_one_does(name, variant, device, tiny_berts):
    """Without dropout the two differ only in the order of float operations (and, in bf16 on
    a GPU, in where the compiled kernels round)."""
    device = torch.device(device)
    losses = {}
    for compiled in (False, True):
        model = build(name, variant, tiny_berts).to(device)
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        if compiled:
            model.compile_for_training()
        torch.manual_seed(3)  # the same masked positions for a CMLM
        with autocast(device):
            out = model.losses(tiny_batch(model).to(device), Progress(0, 10))
            loss = sum(out.terms.values())
        loss.backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        losses[compiled] = (loss.detach().float(), grad.float())
    tol = {"rtol": 1e-5} if device.type == "cpu" else {"rtol": 2e-2}
    assert torch.allclose(losses[True][0], losses[False][0], **tol)
    grad_tol = ({"rtol": 1e-4, "atol": 1e-6} if device.type == "cpu"
                else {"rtol": 5e-2, "atol": 1e-3})
    assert torch.allclose(losses[True][1], losses[False][1], **grad_tol)


@pytest.mark.slow
def test_the_compiled_loss_matches_the_eager_one():
    logits = torch.randn(7, 50, requires_grad=True)
    target = torch.tensor([1, 2, 3, 0, 4, 5, 0])
    eager = smoothed_nll_of_logits(logits, target, 0.1, 0)
    compiled = compiled_smoothed_nll()(logits, target, 0.1, 0)
    for a, b in zip(eager, compiled, strict=True):
        assert torch.allclose(a, b, rtol=1e-6)

"""benchmarks/gpu.py: the fixed decoding workload it times and the FLOPs and tokens it counts
(run here on tiny models on the CPU; the figures themselves need a GPU)."""

import importlib.util
from pathlib import Path

import pytest
import torch
from tiny_checkpoints import BERT_VOCAB

from nmtbench.methods import get_method

_SPEC = importlib.util.spec_from_file_location(
    "gpu_benchmark", Path(__file__).parents[2] / "benchmarks" / "gpu.py")
gpu = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(gpu)

SMALL = {"size": "tiny", "d_model": 16, "ffn_dim": 32, "n_heads": 2, "encoder_layers": 1,
         "decoder_layers": 1, "max_positions": 64}


def tiny(method: str, **extra):
    torch.manual_seed(0)
    return get_method(method).build({"method": method, **SMALL, **extra}, BERT_VOCAB,
                                    BERT_VOCAB)


@pytest.mark.parametrize("method, extra", [("transformer", {}), ("cmlm", {"decoding": "nat"})])
def test_random_weights_do_the_fixed_decoding_work(method, extra, monkeypatch):
    monkeypatch.setattr(gpu, "OUTPUT", 6)
    model = tiny(method, **extra)
    fixed, decode = gpu.decoder(model, torch.device("cpu"))
    src = gpu.sources(model, 3, 8, torch.Generator().manual_seed(0))
    hyps = decode(src)
    if method == "transformer":  # EOS held back until 6 tokens, then forced
        assert [len(h) for h in hyps] == [6, 6, 6] and fixed.calls == 7
    else:  # the 4 length candidates 5..8, every one through all 10 iterations
        assert all(5 <= len(h) <= 8 for h in hyps) and fixed.calls == gpu.ITERATIONS


def test_training_counts_the_target_tokens_and_the_flops_of_an_update():
    model = tiny("transformer")
    r = gpu.measure_training(model, torch.device("cpu"), steps=1, pairs=4)
    assert r["target_tokens"] == 4 * gpu.TGT_LEN
    # an update's matrix products: at least 6 FLOPs (forward 2, backward 4) per trained
    # weight of the output projection per target token
    assert r["flops_per_update"] >= 6 * BERT_VOCAB.size * 16 * r["target_tokens"]
    assert r["achieved_flops"] == pytest.approx(r["flops_per_update"] / r["ms_per_update"]
                                                * 1000)

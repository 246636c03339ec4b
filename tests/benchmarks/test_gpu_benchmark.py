"""benchmarks/gpu.py: the fixed decoding workload it times and the FLOPs and tokens it counts
(run here on tiny models on the CPU; the figures themselves need a GPU)."""

import importlib.util
from pathlib import Path

import pytest
import torch
from tiny_checkpoints import BERT_VOCAB

from nmtbench.methods import get_method
from nmtbench.workflow.train_settings import TrainConfig

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
    r = gpu.measure_training(TrainConfig.from_dict({}), model, torch.device("cpu"), steps=1,
                             pairs=4)
    assert r["target_tokens"] == 4 * gpu.TGT_LEN
    # an update's matrix products: at least 6 FLOPs (forward 2, backward 4) per trained
    # weight of the output projection per target token
    assert r["flops_per_update"] >= 6 * BERT_VOCAB.size * 16 * r["target_tokens"]
    assert r["achieved_flops"] == pytest.approx(r["flops_per_update"] / r["ms_per_update"]
                                                * 1000)


def test_fairseq_gets_the_harness_pairs_and_sources():
    """gpu_fairseq.py trains on the same ids (y without the decoder's [CLS] and the final EOS,
    which fairseq adds in its own layout) and decodes the same sentences."""
    model = tiny("transformer")
    spec = gpu.fairseq_workload({"transformer-base": model}, torch.device("cpu"), [4],
                                steps=2, sentences=3, batches=1)
    data = gpu.training_data(model, 4, torch.Generator().manual_seed(0))
    (run,) = spec["training"]
    assert run["src"] == data.src and all(len(s) == gpu.SRC_LEN for s in run["src"])
    assert [[model.tgt_vocab.bos, *y, model.tgt_vocab.eos] for y in run["tgt"]] == data.tgt
    assert spec["precisions"] == ["fp32"] and spec["tgt_vocab"] == model.tgt_vocab.size
    assert len(spec["decode_sources"]) == gpu.WARMUP + 3
    assert spec["decode_sources"][0] == gpu.decoding_sources(model, 3)[0].tolist()
    assert len(spec["decode_batch"]) == gpu.BATCH


def test_the_report_sets_each_decoder_against_both_transformer_bases():
    meta = {"command": "python benchmarks/gpu.py", "commit": "abc", "device": "GPU",
            "host_cpu": "x86_64", "driver": "1", "torch": "2", "cuda": "13", "date": "today",
            "spec_peak_flops": 1e15, "matmul_side": 8, "matmul_flops": 8e14}
    step = {"params": {"total": 1e6, "trained": 1e6}, "target_tokens": 4096,
            "ms_per_update": 50.0, "target_tokens_per_s": 81920.0, "flops_per_update": 1e12,
            "achieved_flops": 2e13, "peak_memory_gb": 1.0}
    decoded = {"model_calls_per_sentence": 10, "sentences_per_s_batch64": 100.0, "p90": 1}
    result = {"meta": meta,
              "training": [{"experiment": "transformer-base", "compiled": False, **step},
                           {"experiment": "transformer-base", "compiled": True, **step,
                            "target_tokens_per_s": 163840.0}],
              "decoding": {"transformer-base": {"decoding": "beam", "median": 100.0, **decoded},
                           "abnet": {"decoding": "mask_predict", "median": 50.0, **decoded}},
              "loss_curves": {"eager": [9.0, 8.0, 7.0, 6.0], "compiled": [9.0, 8.1, 7.1, 6.1]},
              "fairseq": {"fairseq": "0.12.2",
                          "training": [{"experiment": "transformer-base", "precision": "fp16",
                                        "target_tokens": 4096, "ms_per_update": 40.0,
                                        "target_tokens_per_s": 102400.0,
                                        "peak_memory_gb": 1.0}],
                          "decoding": {"transformer-base": {"median": 150.0, "p90": 160.0,
                                                            "sentences_per_s_batch64": 90.0}}},
              "settings": {"configs": ["config/config.yaml"],
                           "experiments": {"toy/transformer-base": {"train": {}, "decode": {}}}}}
    text = gpu.markdown(result)
    assert ("| transformer-base | 4,096 | fp16 | 40.0 | 102,400 | 1.0 | 163,840 (compiled) | "
            "1.60x |") in text
    assert "| abnet | 50.0 | 2.00x | 3.00x |" in text  # against ours (100 ms), fairseq's (150)
    assert "| 4 | 6.0000 | 6.1000 | +0.1000 |" in text

"""The CUDA path, which CI (no GPU) cannot run: every method's model on the GPU, bf16 autocast
in training, validation and decoding, and checkpoints moving between GPU and CPU. Skipped
without a GPU; on one: `pytest tests/parts/test_cuda.py`.

A model whose code makes a tensor on the wrong device, or whose loss misbehaves in bf16, passes
every CPU test; these catch it."""

from __future__ import annotations

import json
import math

import pytest
import torch
from tiny_checkpoints import BERT_VOCAB
from tiny_checkpoints import TINY_TRANSFORMER as CFG
from tiny_models import CASE_IDS, build, eval_loss, outputs, tiny_batch, train

from nmtbench.evaluation.translate import load_run_model, translate_lines
from nmtbench.fileio import read_lines
from nmtbench.methods import bert_kd_soft_targets as soft_targets
from nmtbench.parts.beam_search import beam_search
from nmtbench.parts.mask_predict import mask_predict
from nmtbench.run_paths import RunPaths
from nmtbench.training.trainer import Trainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def bf16():
    return torch.autocast("cuda", dtype=torch.bfloat16)


@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_every_method_matches_its_cpu_outputs_on_cuda_in_fp32(name, variant, tiny_berts):
    model = build(name, variant, tiny_berts)
    batch = tiny_batch(model)
    on_cpu = outputs(model, batch)
    on_gpu = outputs(model.cuda(), batch.to("cuda"))
    for cpu, gpu in zip(on_cpu, on_gpu, strict=True):
        torch.testing.assert_close(gpu.cpu(), cpu, rtol=0, atol=1e-4)


@pytest.mark.parametrize("name, variant", CASE_IDS)
def test_every_method_trains_and_decodes_in_bf16_on_cuda(name, variant, tiny_berts):
    model = build(name, variant, tiny_berts).cuda()
    batch = tiny_batch(model).to("cuda")
    before = eval_loss(model, batch, precision=bf16)
    losses = train(model, batch, precision=bf16)
    after = eval_loss(model, batch, precision=bf16)
    assert all(map(math.isfinite, losses)) and after < before, (before, after)
    assert all(p.dtype == torch.float32 for p in model.parameters()), "autocast cast weights"
    v = BERT_VOCAB
    with bf16():
        if model.decoding == "at":
            hyps = beam_search(model, batch.src, beam=2, vocab=v,
                               max_len_a=1.0, max_len_b=3)
        elif model.decoding == "nat":
            hyps = mask_predict(model, batch.src, length_beam=2, iterations=2, vocab=v)
        else:  # a teacher: no decoding of its own
            return
    assert len(hyps) == 3 and all(t not in (v.pad, v.bos, v.eos) for h in hyps for t in h)


@pytest.mark.parametrize("method", ["transformer", "cmlm"])
def test_a_run_trained_on_cuda_resumes_there_and_decodes_on_cpu(method, toy_paths, tmp_path):
    cfg = {**CFG, "method": method, "max_epochs": 2}
    if method == "cmlm":
        cfg["decoding"] = "nat"
    run = tmp_path / "run"
    first = Trainer(run, cfg, toy_paths, device="cuda").run()
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    valid = [r["valid_loss"] for r in log if "valid_loss" in r]
    assert valid and all(map(math.isfinite, valid))
    # one more epoch on the GPU: resumes from the checkpoint, not from scratch
    resumed = Trainer(run, {**cfg, "max_epochs": 3}, toy_paths, device="cuda").run()
    assert resumed["steps"] > first["steps"]
    sources = read_lines(toy_paths.valid_src)[:8]
    hyps = {}
    for device in ("cuda", "cpu"):
        model, src_tok, tgt_tok, _ = load_run_model(run, device=device)
        assert next(model.parameters()).device.type == device
        hyps[device] = translate_lines(model, src_tok, tgt_tok, sources)
    assert len(hyps["cpu"]) == len(hyps["cuda"]) == 8
    assert any(hyps["cpu"]) and any(hyps["cuda"])


def test_soft_targets_dump_on_cuda_equals_the_cpu_dump(tmp_path):
    from tiny_checkpoints import TINY_TRAINING as TRAIN
    from tiny_checkpoints import save_tiny_bert, write_bert_corpus

    bert = tmp_path / "bert"
    save_tiny_bert(bert, seed=1)
    paths = write_bert_corpus(tmp_path)
    run = tmp_path / "teacher"
    Trainer(run, {"method": "bert-kd-teacher", "bert": str(bert), **TRAIN},
            RunPaths(**paths, src_tokenizer=str(bert), tgt_tokenizer=str(bert),
                     pretrained={"bert": str(bert)}), device="cuda").run()
    summaries = {}
    for device in ("cuda", "cpu"):
        summaries[device] = soft_targets.dump(
            load_run_model(run, device=device), run, (paths["train_src"], paths["train_tgt"]),
            (paths["valid_src"], paths["valid_tgt"]), tmp_path / f"{device}.safetensors",
            top_k=8, info=tmp_path / f"{device}.json")
    assert summaries["cuda"]["pairs"] == summaries["cpu"]["pairs"]
    assert abs(summaries["cuda"]["valid_masked_accuracy"]
               - summaries["cpu"]["valid_masked_accuracy"]) < 0.05

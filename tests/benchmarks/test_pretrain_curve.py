"""benchmarks/pretrain_curve.py: held-out scores along one pre-training, the same as the
workflow's pre-training makes at its end."""

import importlib.util
from pathlib import Path

import pytest

from nmtbench.training.pretraining import pretrain

_SPEC = importlib.util.spec_from_file_location(
    "pretrain_curve", Path(__file__).parents[2] / "benchmarks" / "pretrain_curve.py")
pretrain_curve = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(pretrain_curve)

TINY = {"model": "bert", "d_model": 32, "ffn_dim": 64, "n_heads": 2, "layers": 1,
        "max_positions": 64, "max_tokens": 256, "max_updates": 4, "warmup_updates": 1,
        "heldout_sentences": 20}


def test_the_curve_ends_where_the_workflows_pre_training_ends(toy_dir, tmp_path):
    """A point every 2 updates; the last is the held-out score `nmtbench pretrain` reports
    for the same settings (same batches, masks and schedule), and the extra corpus is read
    for training only (the held-out sentences stay the corpus's)."""
    corpus, tokenizer = [str(toy_dir / "mono.src")], str(toy_dir / "tok_src")
    extra = [str(toy_dir / "train.src")]
    result = pretrain_curve.measure(corpus, tokenizer, TINY, every=2, train_only=extra)
    assert [p["updates"] for p in result["points"]] == [2, 4]
    summary = pretrain(corpus, tokenizer, tmp_path / "bert", {**TINY, "log_interval": 2},
                       train_only=extra)
    assert result["points"][-1]["accuracy"] == pytest.approx(summary["heldout"]["accuracy"])
    assert result["heldout_sentences"] == 20 and result["train_sentences"] > 2000 - 20
    text = pretrain_curve.markdown("tiny", result, "python benchmarks/pretrain_curve.py ...")
    assert "| 4 | " in text and "held-out accuracy" in text

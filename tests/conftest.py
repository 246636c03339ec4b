"""Shared fixtures: a small toy world with trained WordPiece vocabularies (built once)."""

import pytest

from nmtbench.tokenization import train_wordpiece
from nmtbench.toyworld import WorldConfig, generate


@pytest.fixture(scope="session")
def toy_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("toy")
    generate(out, WorldConfig(seed=2), train_pairs=400, valid_pairs=40, test_pairs=40,
             mono_sentences=2000)
    for side, size in (("src", 600), ("tgt", 500)):
        train_wordpiece([out / f"mono.{side}", out / f"train.{side}"], out / f"tok_{side}", size)
    return out


@pytest.fixture(scope="session")
def toy_paths(toy_dir):
    """The trainer's `paths` for the toy corpus and its vocabularies."""
    return {"train_src": str(toy_dir / "train.src"), "train_tgt": str(toy_dir / "train.tgt"),
            "valid_src": str(toy_dir / "valid.src"), "valid_tgt": str(toy_dir / "valid.tgt"),
            "src_tokenizer": str(toy_dir / "tok_src"), "tgt_tokenizer": str(toy_dir / "tok_tgt")}

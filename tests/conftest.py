"""Shared fixtures, built once per session: a small toy world with trained WordPiece
vocabularies, and tiny random BERTs for the pre-trained checkpoint roles."""

import pytest
from tiny_checkpoints import TINY_BERTS, save_tiny_bert

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


@pytest.fixture(scope="session")
def tiny_berts(tmp_path_factory) -> dict[str, str]:
    """Checkpoint role -> directory of a tiny random BERT (masked LM) with its tokenizer."""
    root = tmp_path_factory.mktemp("contract_berts")
    for seed, role in enumerate(TINY_BERTS, start=1):
        save_tiny_bert(root / role, seed=seed)
    # deep fusion's decoder_init reads the target side, like tgt_bert
    return {role: str(root / role) for role in TINY_BERTS} | {
        "decoder_init": str(root / "tgt_bert"), "bert": str(root / "src_bert")}

"""Stand-ins for the hub checkpoints the papers name, made here: each the hub model's
configuration (`KNOWN_CONFIGS`: layers, heads, positions, vocabulary size), its widths divided
by `divisor` where disk forces it, random weights, and a vocabulary of exactly the hub's size
(bert-base-uncased's real one where ../shared/data has it; else WordPiece or byte-level BPE
pieces of the given text, filled up with pieces no text produces), in the hub's file layout."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from rehearsal_text import SHARED_DATA

from nmtbench.parts.pretrained import KNOWN_CONFIGS

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
UNCASED = {"bert-base-uncased"}
REAL_VOCABS = {"bert-base-uncased": SHARED_DATA / "bert" / "bert-base-uncased" / "vocab.txt.gz"}
EOT = "<|endoftext|>"


def stand_in_config(name: str, divisor: int):
    """The hub model's configuration, its widths (hidden, intermediate, GPT-2's embedding)
    divided by `divisor`."""
    from transformers import AutoConfig

    model_type, settings = KNOWN_CONFIGS[name]
    settings = dict(settings)
    for key in ("hidden_size", "intermediate_size", "n_embd"):
        if key in settings:
            settings[key] //= divisor
    return AutoConfig.for_model(model_type, **settings)


def write_stand_in(name: str, out: Path, divisor: int, text: list[str]) -> None:
    """`out/`: config.json, model.safetensors and the tokenizer files of `name`'s stand-in."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    config = stand_in_config(name, divisor)
    out.mkdir(parents=True, exist_ok=True)
    if config.model_type == "gpt2":
        _gpt2_tokenizer(out, config.vocab_size, text)
        auto = AutoModelForCausalLM
    else:
        _bert_tokenizer(name, out, config.vocab_size, text)
        auto = AutoModelForMaskedLM
    torch.manual_seed(sum(map(ord, name)))
    auto.from_config(config).save_pretrained(out)  # safetensors, as the hub serves them


def _bert_tokenizer(name: str, out: Path, size: int, text: list[str]) -> None:
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    lower = name in UNCASED
    if name in REAL_VOCABS and REAL_VOCABS[name].is_file():
        with gzip.open(REAL_VOCABS[name], "rt", encoding="utf-8") as f:
            pieces = [line.rstrip("\n") for line in f]
    else:
        wordpiece = BertWordPieceTokenizer(lowercase=lower, strip_accents=lower)
        wordpiece.train_from_iterator(text, vocab_size=size, special_tokens=BERT_SPECIALS,
                                      show_progress=False)
        vocab = wordpiece.get_vocab()
        pieces = sorted(vocab, key=vocab.get)
        pieces += [f"[unused{i}]" for i in range(size - len(pieces))]
    if len(pieces) != size:
        raise ValueError(f"{name}: {len(pieces)} pieces, not the hub's {size}")
    (out / "vocab.txt").write_text("".join(p + "\n" for p in pieces), encoding="utf-8")
    BertTokenizerFast(str(out / "vocab.txt"), do_lower_case=lower).save_pretrained(str(out))


def _gpt2_tokenizer(out: Path, size: int, text: list[str]) -> None:
    """GPT-2's layout: byte-level BPE, <|endoftext|> the last id and its only special token."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(text, vocab_size=size - 1, show_progress=False)
    vocab = bpe.get_vocab()
    pieces = sorted(vocab, key=vocab.get)
    pieces += [f"\u0120unused{i}" for i in range(size - 1 - len(pieces))]  # never merged to
    bpe.save_model(str(out))  # merges.txt (and vocab.json, written over next)
    (out / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate([*pieces, EOT])}))
    GPT2TokenizerFast(str(out / "vocab.json"), str(out / "merges.txt"), bos_token=EOT,
                      eos_token=EOT, unk_token=EOT).save_pretrained(str(out))

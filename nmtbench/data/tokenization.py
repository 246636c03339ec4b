"""Vocabularies in Hugging Face format.

The toy world trains its own BERT-style WordPiece vocabularies and saves them with
`save_pretrained`, so they load with `AutoTokenizer.from_pretrained(dir)`: the same call that
loads a real BERT checkpoint's vocabulary. Everything downstream sees only that interface.

A checkpoint's byte-level BPE (the public GPT-2's) has one special token, `<|endoftext|>`, which
GPT-2 reads between documents. Loaded here it marks both ends of a sentence (BOS and EOS: the
[CLS] and [SEP] of a BERT's `[CLS] x [SEP]`), and `[PAD]` and `[MASK]` follow its vocabulary
(`ADDED_TOKENS`), so it can be a side's vocabulary like any BERT's.

Targets keep their spacing. BERT's pre-tokenizer makes every punctuation character a word, so
`u.s.`, `12,000` and `well-known` would come back from the model as `u . s .`, `12 , 000` and
`well - known`, and no rule tells them from a spaced `word - word` (a fifth of WMT's dashes) or a
German list `1 , 2`. Read as targets (`load_tokenizer(..., target=True)`), a WordPiece vocabulary
splits the prepared (Moses-tokenized) text at spaces only, so a punctuation character inside a
Moses token is its continuation piece (`u ##. ##s ##.`: every BERT vocabulary, and every one
trained here, has `##x` for its characters), and joining continuations gives back the exact
prepared text: hypotheses are tokenized as their references are. It costs about 0.3% more
target pieces on real test sets; BERT decoders meet such pieces where pre-training saw the
character as a word. Byte-level BPE keeps spaces already.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nmtbench.errors import InputError, one_line
from nmtbench.fileio import atomic_directory, read_lines, refuse_foreign
from nmtbench.layout import VOCABULARY_SUMMARY_NAME

if TYPE_CHECKING:  # imported where used: planning the DAG does not load transformers
    from transformers import PreTrainedTokenizerBase

@dataclass(frozen=True)
class Vocab:
    """The special ids and size of one side's tokenizer."""

    size: int
    pad: int
    bos: int
    eos: int
    unk: int
    mask: int


SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# what a saved BERT tokenizer's directory holds
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "vocab.txt",
                   "special_tokens_map.json")
# and what `train_wordpiece` writes beside them: the settings it trained with, which the report
# compares with the config's (a record: left out of the directory's digest)
# The roles a vocabulary without them gains after its own ids, in this order
ADDED_TOKENS = {"pad_token": "[PAD]", "mask_token": "[MASK]"}


def train_wordpiece(corpora: list[str | Path], out_dir: str | Path, vocab_size: int,
                    lowercase: bool = False, min_frequency: int = 2) -> None:
    """Train a BERT WordPiece vocabulary on text files and save it in Hugging Face format
    (into a new directory, or one holding an earlier vocabulary's files alone)."""
    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import BertTokenizer

    refuse_foreign(out_dir, [*TOKENIZER_FILES, VOCABULARY_SUMMARY_NAME],
                   "vocabulary's directory")
    trainer = BertWordPieceTokenizer(lowercase=lowercase, strip_accents=False,
                                     clean_text=True, handle_chinese_chars=True)
    # The trainer numbers "##x" pieces in hash-map order, and ids break ties between equally
    # frequent merges, so the same corpus can give different vocabularies (huggingface/
    # tokenizers#1794). Declaring every "##x" up front, in sorted order, fixes their ids.
    # (read as every reader does: a leading byte-order mark is no character of the corpus)
    characters = sorted({ch for c in corpora for line in read_lines(c) for ch in line
                         if not ch.isspace()})
    if not characters:  # the trainer would save a vocabulary of special tokens only
        raise InputError(f"{', '.join(map(str, corpora))}: no text to train a vocabulary on")
    if lowercase:
        characters = sorted({ch.lower() for ch in characters})
    trainer.train([str(c) for c in corpora], vocab_size=vocab_size, min_frequency=min_frequency,
                  special_tokens=SPECIAL_TOKENS + [f"##{ch}" for ch in characters],
                  show_progress=False)
    tokenizer = BertTokenizer(vocab=trainer.get_vocab(), do_lower_case=lowercase,
                              strip_accents=False)
    # whole or not at all: a vocabulary cut short (a full disk) is never taken for one
    # (its summary alone marks it where Snakemake deleted the declared files before the job)
    with atomic_directory(out_dir, ("tokenizer_config.json", VOCABULARY_SUMMARY_NAME)) as tmp:
        tokenizer.save_pretrained(str(tmp))
        (tmp / VOCABULARY_SUMMARY_NAME).write_text(json.dumps(
            {"vocab_size": vocab_size, "lowercase": lowercase, "min_frequency": min_frequency},
            indent=2, sort_keys=True) + "\n", encoding="utf-8")


def load_tokenizer(name_or_dir: str | Path, target: bool = False) -> PreTrainedTokenizerBase:
    """Load a tokenizer from a hub name or a local directory; one with a BOS and an EOS but no
    [CLS] or [SEP] (GPT-2's) reads sentences between them and gains [PAD] and [MASK].
    `target`: the side a model writes, read so that decoding restores its spacing."""
    from transformers import AutoTokenizer

    path = Path(name_or_dir)
    if path.is_file():
        raise InputError(f"{path}: a file; a tokenizer is a directory (or a hub name)")
    if path.is_dir() and not any((path / name).is_file() for name in (
            "tokenizer_config.json", "tokenizer.json", "vocab.txt", "vocab.json")):
        raise InputError(f"{path}: no tokenizer there (none of tokenizer_config.json, "
                         "tokenizer.json, vocab.txt, vocab.json)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(name_or_dir))
    except (OSError, ValueError) as err:
        raise InputError(f"cannot load tokenizer {str(name_or_dir)!r}: {one_line(err)}") from None
    if tokenizer.cls_token is None and tokenizer.sep_token is None:
        _mark_sentences(tokenizer)
    if target:
        _keep_spacing(tokenizer)
    return tokenizer


def _keep_spacing(tokenizer: PreTrainedTokenizerBase) -> None:
    """Split a WordPiece vocabulary's text at spaces only, not at punctuation (module doc)."""
    from tokenizers import pre_tokenizers

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise InputError(f"tokenizer {tokenizer.name_or_path!r} has no fast (Rust) version, "
                         "which a target side needs to keep its spacing")
    if isinstance(backend.pre_tokenizer, pre_tokenizers.BertPreTokenizer):
        backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()


def _mark_sentences(tokenizer: PreTrainedTokenizerBase) -> None:
    """BOS and EOS as [CLS] and [SEP], added to every encoding as a BERT's are; the missing
    roles of `ADDED_TOKENS` appended to the vocabulary. Without a BOS, an EOS or a fast
    (Rust) tokenizer nothing changes, and `vocab_of` names the missing role."""
    from tokenizers.processors import TemplateProcessing

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if tokenizer.bos_token is None or tokenizer.eos_token is None or backend is None:
        return
    tokenizer.cls_token, tokenizer.sep_token = tokenizer.bos_token, tokenizer.eos_token
    tokenizer.add_special_tokens({role: token for role, token in ADDED_TOKENS.items()
                                  if getattr(tokenizer, role) is None})
    bos, eos = tokenizer.bos_token, tokenizer.eos_token
    backend.post_processor = TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} $B {eos}",
        special_tokens=[(t, tokenizer.convert_tokens_to_ids(t)) for t in dict.fromkeys((bos, eos))])


def vocab_of(tokenizer: PreTrainedTokenizerBase) -> Vocab:
    """The special ids the models need; BERT's [CLS]/[SEP] serve as BOS/EOS."""
    ids = {}
    for role, token in (("pad", tokenizer.pad_token), ("bos", tokenizer.cls_token),
                        ("eos", tokenizer.sep_token), ("unk", tokenizer.unk_token),
                        ("mask", tokenizer.mask_token)):
        if token is None:
            raise InputError(f"tokenizer {tokenizer.name_or_path!r} has no {role} token")
        ids[role] = tokenizer.convert_tokens_to_ids(token)
    return Vocab(size=len(tokenizer), **ids)


def encode_sources(tokenizer: PreTrainedTokenizerBase, lines: list[str],
                   bos: bool) -> list[list[int]]:
    """Source ids as the model reads them: BERT's `[CLS] x [SEP]` when it reads a BOS (the BERT
    methods), else `x [SEP]`, as fairseq's Transformer reads `x </s>`."""
    if bos:
        return tokenizer(lines, add_special_tokens=True)["input_ids"]
    return [ids + [tokenizer.sep_token_id]
            for ids in tokenizer(lines, add_special_tokens=False)["input_ids"]]


def decode(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> str:
    """The text a target tokenizer read: WordPiece continuations joined, other pieces
    separated by one space; byte-level BPE (GPT-2's) back to its exact text.

    Done on the token strings because the saved BERT decoders also "clean up" spaces before
    punctuation, which would break tokenized BLEU against Moses-tokenized references.
    """
    from tokenizers import decoders

    special = set(tokenizer.all_special_ids)
    tokens = tokenizer.convert_ids_to_tokens([i for i in ids if i not in special])
    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    if isinstance(decoder, decoders.ByteLevel):
        return decoder.decode(tokens).strip()
    return " ".join(tokens).replace(" ##", "")

"""WordPiece vocabularies in Hugging Face format.

The toy world trains its own BERT-style WordPiece vocabularies and saves them with
`save_pretrained`, so they load with `AutoTokenizer.from_pretrained(dir)`: the same call that
loads a real BERT checkpoint's vocabulary. Everything downstream sees only that interface.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nmtbench.errors import InputError, one_line
from nmtbench.fileio import read_lines
from nmtbench.method import Vocab

if TYPE_CHECKING:  # imported where used: planning the DAG does not load transformers
    from transformers import PreTrainedTokenizerBase

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_wordpiece(corpora: list[str | Path], out_dir: str | Path, vocab_size: int,
                    lowercase: bool = False, min_frequency: int = 2) -> None:
    """Train a BERT WordPiece vocabulary on text files and save it in Hugging Face format."""
    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import BertTokenizer

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
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out_dir))


def load_tokenizer(name_or_dir: str | Path) -> PreTrainedTokenizerBase:
    """Load a tokenizer from a hub name or a local directory."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(name_or_dir))
    except (OSError, ValueError) as err:
        raise InputError(f"cannot load tokenizer {str(name_or_dir)!r}: {one_line(err)}") from None


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
    """Word-level text: WordPiece continuations joined, other tokens separated by one space.

    Done on the token strings because the saved BERT decoders also "clean up" spaces before
    punctuation, which would break tokenized BLEU against Moses-tokenized references.
    """
    special = set(tokenizer.all_special_ids)
    tokens = tokenizer.convert_ids_to_tokens([i for i in ids if i not in special])
    return " ".join(tokens).replace(" ##", "")

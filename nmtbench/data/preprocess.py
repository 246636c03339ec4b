"""Text normalisation as the papers' scripts did it, on `sacremoses` (the Moses scripts in Python).

Prepared corpora hold Moses-tokenized text *without* Moses' XML escapes (`'` not `&apos;`): BERT
vocabularies have no `&apos;`, and tokenized BLEU is unchanged by the escapes (each one stands for
exactly one character of one token).
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections import Counter
from functools import partial

from nmtbench.data.pool import ordered_map

CHUNK = 2000  # sentences per worker task: large enough to amortise pickling


def _tokenize_chunk(lines: list[str], lang: str, normalize_punct: bool) -> list[str]:
    # imported where used: config checks import this module, sacremoses takes 0.25 s to load
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    tokenizer = MosesTokenizer(lang=lang)
    normalizer = MosesPunctNormalizer(lang=lang) if normalize_punct else None
    out = []
    for line in lines:
        if normalizer is not None:  # normalize-punctuation.perl | remove-non-printing-char.perl
            line = remove_non_printing(normalizer.normalize(line))
        out.append(tokenizer.tokenize(line, escape=False, return_str=True))
    return out


def moses_tokenize(lines: list[str], lang: str, normalize_punct: bool = False,
                   workers: int = 1) -> list[str]:
    """`tokenizer.perl -l lang` (no `-a`: BERT's WordPiece splits hyphens itself), optionally
    after the WMT scripts' punctuation normalisation; in parallel over `workers` processes."""
    chunks = [lines[i : i + CHUNK] for i in range(0, len(lines), CHUNK)]
    work = partial(_tokenize_chunk, lang=lang, normalize_punct=normalize_punct)
    return [line for chunk in ordered_map(work, chunks, workers) for line in chunk]


def remove_non_printing(line: str) -> str:
    """remove-non-printing-char.perl (`s/\\p{C}/ /g`): every "other" character (control,
    format, private use, unassigned) becomes a space."""
    return "".join(" " if unicodedata.category(ch).startswith("C") else ch for ch in line)


def unescape_moses(line: str) -> str:
    """Undo Moses' escapes (`&apos;` `&quot;` `&amp;` `&lt;` `&gt;` `&#91;` `&#93;` `&#124;`), for
    corpora published already tokenized (IWSLT15 En-Vi, the fairseq IWSLT14 files)."""
    return html.unescape(line)


def squeeze(line: str) -> str:
    """Collapse runs of whitespace to one space and trim, as clean-corpus-n.perl does."""
    return " ".join(line.split())


def clean_pairs(src: list[str], tgt: list[str], *, ratio: float, min_len: int,
                max_len: int) -> tuple[list[str], list[str], dict[str, int]]:
    """clean-corpus-n.perl: drop pairs with an empty side, a side outside [min_len, max_len]
    words, or a word-count ratio above `ratio` either way. Returns the counts per reason."""
    kept_src, kept_tgt, dropped = [], [], Counter()
    for s, t in zip(src, tgt, strict=True):
        s, t = squeeze(s), squeeze(t)
        ns, nt = len(s.split()), len(t.split())
        if ns == 0 or nt == 0:
            dropped["empty"] += 1
        elif not (min_len <= ns <= max_len and min_len <= nt <= max_len):
            dropped["length"] += 1
        elif ns / nt > ratio or nt / ns > ratio:
            dropped["ratio"] += 1
        else:
            kept_src.append(s)
            kept_tgt.append(t)
    return kept_src, kept_tgt, dict(dropped)


def drop_empty(src: list[str], tgt: list[str]) -> tuple[list[str], list[str], int]:
    """Pairs with a blank side cannot train or be scored; return the rest and how many went."""
    keep = [i for i, (s, t) in enumerate(zip(src, tgt, strict=True)) if s.strip() and t.strip()]
    return [src[i] for i in keep], [tgt[i] for i in keep], len(src) - len(keep)


_COMPOUND = re.compile(r"(\S)-(\S)")


def split_compounds(line: str) -> str:
    """tensor2tensor's get_ende_bleu.sh, used by the papers for WMT14 En-De tokenized BLEU:
    `s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g` (matches do not overlap, so "a-b-c" keeps "b-c")."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


_ROMANIAN_PLAIN = str.maketrans("ŞşŢţȘșȚțĂăÂâÎî", "SsTtSsTtAaAaIi")


def normalise_romanian(line: str) -> str:
    """Sennrich et al.'s WMT16 Romanian scripts (normalise-romanian.py, remove-diacritics.py):
    cedilla and comma-below letters alike lose their diacritics, as do ă, â and î, as the WMT16
    Ro-En systems the papers follow were trained."""
    return line.translate(_ROMANIAN_PLAIN)

"""The rehearsal's text: real sentences from ../shared/data where it holds the language pair of a
release (never committed: read where it is), the release fixtures' sentences elsewhere."""

from __future__ import annotations

import gzip
from functools import cache

from release_fixtures import ROOT, fixture_text

SHARED_DATA = ROOT.parent / "shared" / "data"
# corpus (release_fixtures.Text's) -> language -> the shared files whose lines it reads, in order
REAL = {
    "iwslt14-de-en": {lang: [f"iwslt14-de-en/valid.{lang}.gz", f"iwslt14-de-en/test.{lang}.gz"]
                      for lang in ("de", "en")},
    "wmt14-de-en": {lang: [f"wmt14-en-de/newstest2014.{lang}.gz"] for lang in ("de", "en")},
    "iwslt15-en-vi": {lang: [f"iwslt15-en-vi/tst2012.{lang}.gz", f"iwslt15-en-vi/tst2013.{lang}.gz"]
                      for lang in ("en", "vi")},
    "multi30k-de-en": {lang: [f"multi30k-de-en/train.{lang}.gz"] for lang in ("de", "en")},
}


@cache
def _shared_lines(corpus: str, lang: str) -> tuple[str, ...]:
    rows: list[str] = []
    for name in REAL[corpus][lang]:
        with gzip.open(SHARED_DATA / name, "rt", encoding="utf-8") as f:
            rows.extend(line.rstrip("\n").lstrip("\ufeff") for line in f)
    return tuple(rows)


def real_corpora() -> list[str]:
    """The corpora whose text is real here (both languages' files present)."""
    return [corpus for corpus, sides in REAL.items()
            if all((SHARED_DATA / name).is_file() for names in sides.values() for name in names)]


def rehearsal_text(corpus: str, lang: str, count: int, start: int = 0) -> list[str]:
    """`count` lines from `start` (wrapping round): the shared real ones where there are, else
    the fixture's."""
    if corpus not in real_corpora() or lang not in REAL[corpus]:
        return fixture_text(corpus, lang, count, start)
    rows = _shared_lines(corpus, lang)
    return [rows[(start + i) % len(rows)] for i in range(count)]


def vocabulary_text(lines_each: int = 2000) -> list[str]:
    """Every sentence the rehearsal's releases hold, of every language: what the stand-in
    checkpoints' vocabularies are trained on, so that the data is not all [UNK]."""
    corpora = ["iwslt14-de-en", "wmt14-de-en", "iwslt15-en-vi", "multi30k-de-en"]
    langs = ["de", "en", "fr", "it", "es", "nl", "ro", "vi", "zh"]
    return [line for corpus in corpora for lang in langs
            for line in rehearsal_text(corpus, lang, lines_each)]


"""Monolingual corpora made into sentences in a dataset's own processed format: target-side text to
back-translate, so that a back-translated pair looks like a training pair of the dataset, and
extra text for a checkpoint pre-trained here (`pretraining.<name>.extra_corpora`), so that it
reads what the dataset's side holds.

AB-Net's Figure 3b adds back-translated "English Wikipedia data, a subset of the training corpus
of BERT" to IWSLT14 De-En, and says no more. Choices made here:
- `english-wikipedia` is WikiText-103 raw (Merity et al., 2016): the text of the Good and
  Featured articles of English Wikipedia, a public, fixed and checksummed subset of it, 4M
  sentences or so in `wiki.train.raw` (enough for the figure's 2M).
- Its paragraphs come pre-tokenized (`word , word`, with `@-@` `@,@` `@.@` for a hyphen, comma or
  point inside a word or number): those are undone, the paragraph is Moses-detokenized, then
  split into sentences by the Moses sentence splitter (`sentence_splitter`, the port of
  split-sentences.perl), and each sentence goes through the dataset's recipe (Moses tokenizer,
  lowercasing for IWSLT14, ...), as the dataset's raw side does. Headings and blank lines
  are dropped.
- `iwslt14-train-sample` is the 4,600 IWSLT14 De-En training pairs johntzwei/nmt_iwslt sampled
  (`lr_samples/first`), each side a corpus of its language: beside Multi30k's training set, the
  only German and English text in ../shared/data that is no test or valid set (docs/data.md).
  They are fairseq's prepare-iwslt14.sh output (Moses-tokenized with escapes, lowercased, BPE):
  the BPE is joined, the escapes undone, a segment of several sentences split after each
  sentence's final `.` `?` `!` where a word follows (about one segment in eight; lowercased
  text gives Moses' splitter and tokenizer no capital to find the next sentence by), and each
  sentence detokenized and put through the recipe. The case lowercasing took is lost: a cased
  dataset's side reads this text lowercased.
- Sentences keep the order of the file (articles in turn); `max_sentences` takes the first N.
- Sentences outside the word-count bounds of the recipe's cleaning (IWSLT14: 1 to 175) are
  dropped, as the training pairs the back-translations join were; no other filter.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sacremoses import MosesDetokenizer
from sentence_splitter import SentenceSplitter

from nmtbench.data.casing import lowercased_sides
from nmtbench.data.corpora import Part, read_part
from nmtbench.data.pool import ordered_map
from nmtbench.data.preprocess import unescape_moses
from nmtbench.data.recipes import DOWNLOADS_DIR, process_side, recipe_for
from nmtbench.errors import InputError
from nmtbench.fileio import write_json, write_lines
from nmtbench.provenance import file_digest

log = logging.getLogger(__name__)

CHUNK = 200  # paragraphs per worker task (about a thousand sentences)
_ARTEFACT = re.compile(r" @([-,.])@ ")
_BPE = re.compile(r"@@( |$)")  # subword-nmt's continuation marker, as fairseq's --remove-bpe
# after a tokenized sentence's own final mark, before a word: where a lowercased segment's next
# sentence starts (Moses' sentence splitter and tokenizer look for a capital letter there)
_NEXT_SENTENCE = re.compile(r"(?<= [.?!]) (?=\w)")


def wikitext_paragraphs(lines: list[str]) -> list[str]:
    """WikiText's paragraphs, still tokenized, with its `@-@` `@,@` `@.@` joins undone: every
    line but the blank ones and the ` = Heading = ` / ` = = Section = = ` ones."""
    paragraphs = []
    for line in lines:
        text = line.strip()
        if text and not (text.startswith("= ") and text.endswith(" =")):
            paragraphs.append(_ARTEFACT.sub(r"\1", text))
    return paragraphs


def iwslt14_sentences(lines: list[str]) -> list[str]:
    """fairseq's BPE'd IWSLT14 segments as Moses-tokenized sentences: the subwords joined,
    Moses' escapes (`&apos;` `&quot;` ...) undone, so that the detokenizer reads the
    characters, and a segment of several sentences split after each but the last."""
    return [sentence for line in lines
            for sentence in _NEXT_SENTENCE.split(unescape_moses(_BPE.sub("", line)))]


@dataclass(frozen=True)
class Corpus:
    """A monolingual corpus: the downloaded part that holds each of its languages, the reader
    that turns a part's lines into paragraphs of Moses-tokenized text, and whether those are
    split into sentences (or are one each)."""

    parts: dict[str, Part]
    paragraphs: Callable[[list[str]], list[str]]
    split: bool = True


_IWSLT14_SAMPLE = "iwslt14.tokenized.de-en/lr_samples/first/train.{}"
CORPORA: dict[str, Corpus] = {
    "english-wikipedia": Corpus({"en": Part("wikitext", "wikitext-103-raw-v1.zip",
                                            "wikitext-103-raw/wiki.train.raw")},
                                wikitext_paragraphs),
    "iwslt14-train-sample": Corpus({lang: Part("nmt-iwslt", _IWSLT14_SAMPLE.format(lang))
                                    for lang in ("de", "en")}, iwslt14_sentences, split=False),
}


def corpus_for(corpus: str) -> Corpus:
    if corpus not in CORPORA:
        raise InputError(f"unknown monolingual corpus {corpus!r}; known: "
                         f"{', '.join(sorted(CORPORA))}")
    return CORPORA[corpus]


def manifest_path(out: str | Path) -> Path:
    """Where `prepare_monolingual` writes the manifest of `out`: beside it."""
    out = Path(out)
    return out.with_name(out.name + ".manifest.json")


def download_paths(corpus: str, lang: str) -> list[str]:
    """The downloaded files (under data/downloads/) the corpus's `lang` text is made from (a
    language `check_sources` found there)."""
    part = corpus_for(corpus).parts[lang]
    return [f"{DOWNLOADS_DIR}/{part.source}/{part.file}"]


def check_sources(dataset: str, spec: dict[str, Any], corpus: str,
                  sources: dict[str, Any], side: str = "tgt") -> None:
    """The corpus must be known, hold the language of the dataset's `side` (back-translation:
    the target), and have a download entry for it."""
    part = _checked(dataset, spec, corpus, side)[0]
    if part.file not in sources.get(part.source, {}).get("files", {}):
        raise InputError(f"config key 'sources.{part.source}.files.{part.file}' is missing "
                         f"(the monolingual corpus {corpus!r} of dataset {dataset!r} reads it)")


def _checked(dataset: str, spec: dict[str, Any], corpus: str,
             side: str) -> tuple[Part, Corpus]:
    """The part holding the corpus's text in the language of the dataset's `side`."""
    recipe_for(dataset, spec)  # a real dataset, its languages named
    found = corpus_for(corpus)
    lang = spec[f"{side}_lang"]
    if lang not in found.parts:
        role = {"src": "source", "tgt": "target"}[side]
        raise InputError(f"dataset {dataset!r}: the monolingual corpus {corpus!r} is "
                         f"{' and '.join(map(repr, found.parts))} text, but the {role} "
                         f"language is {lang!r}")
    return found.parts[lang], found


def prepare_monolingual(name: str, spec: dict[str, Any], corpus: str, downloads: str | Path,
                        out: str | Path, workers: int = 1, max_sentences: int | None = None,
                        side: str = "tgt") -> dict[str, Any]:
    """Write the corpus's sentences in the language of dataset `name`'s `side` (the first
    `max_sentences`, or all), processed as that side, one per line to `out`, and a manifest
    beside it (`manifest_path`).

    Paragraphs are processed in order, in chunks over `workers` processes, and no further than
    the paragraph that completes `max_sentences`."""
    if max_sentences is not None and max_sentences < 1:
        raise InputError(f"max_sentences {max_sentences}: expected a positive number")
    part, source = _checked(name, spec, corpus, side)
    lang = spec[f"{side}_lang"]
    clean = recipe_for(name, spec).clean
    bounds = (clean["min_len"], clean["max_len"]) if clean else (1, float("inf"))
    paragraphs = source.paragraphs(read_part(part, downloads))
    log.info("%s: %d paragraphs in %s", corpus, len(paragraphs), part.label())
    work = partial(_process_chunk, name=name, spec=spec, lang=lang, side=side,
                   split=source.split)
    kept: list[str] = []
    dropped: Counter[str] = Counter()
    read = 0
    with _processed(paragraphs, work, workers) as results:
        for sentences in results:
            read += 1
            for sentence in sentences:
                words = len(sentence.split())
                if bounds[0] <= words <= bounds[1]:
                    kept.append(sentence)
                else:
                    dropped["empty" if words == 0 else "length"] += 1
            if max_sentences is not None and len(kept) >= max_sentences:
                break
            if read % 100_000 == 0:
                log.info("%s: %d paragraphs read, %d sentences kept", corpus, read, len(kept))
    kept = kept[:max_sentences]
    if max_sentences is not None and len(kept) < max_sentences:
        log.warning("%s: only %d sentences, fewer than the %d asked for", corpus, len(kept),
                    max_sentences)
    write_lines(out, kept)
    input_file = f"{part.source}/{part.file}"
    manifest = {
        "dataset": name, "corpus": corpus, "lang": lang, "member": part.member,
        "inputs": {input_file: file_digest(Path(downloads) / input_file)},
        "max_sentences": max_sentences, "paragraphs": read, "sentences": len(kept),
        "length_filter": {k: clean[k] for k in ("min_len", "max_len")} if clean else None,
        "dropped": dict(dropped), "sha256": file_digest(out),
    }
    write_json(manifest_path(out), manifest)
    log.info("%s: %d sentences from %d paragraphs written to %s (dropped: %s)", corpus,
             len(kept), read, out, dict(dropped) or "none")
    return manifest


@contextmanager
def _processed(paragraphs: list[str], work: Callable[[list[str]], list[list[str]]],
               workers: int) -> Iterator[Iterator[list[str]]]:
    """Each paragraph's processed sentences, in order, computed lazily (a round of chunks at a
    time); the worker processes are released when the caller is done."""
    chunks = [paragraphs[i : i + CHUNK] for i in range(0, len(paragraphs), CHUNK)]
    with closing(ordered_map(work, chunks, workers)) as done:
        yield (sentences for chunk in done for sentences in chunk)


def _process_chunk(paragraphs: list[str], name: str, spec: dict[str, Any], lang: str,
                   side: str, split: bool) -> list[list[str]]:
    """Detokenize each paragraph and, where `split`, sentence-split it, then put all the
    sentences through the dataset's recipe at once, as its `side`; the sentences are returned
    grouped by paragraph."""
    detokenizer = MosesDetokenizer(lang=lang)
    splitter = SentenceSplitter(language=lang)
    text = [detokenizer.detokenize(p.split(), unescape=False) for p in paragraphs]
    sentences = [splitter.split(t) if split else [t] for t in text]
    recipe = recipe_for(name, spec)
    processed = process_side([s for group in sentences for s in group], lang, recipe,
                             side in lowercased_sides(spec, recipe.lowercase))
    grouped, start = [], 0
    for group in sentences:
        grouped.append(processed[start : start + len(group)])
        start += len(group)
    return grouped

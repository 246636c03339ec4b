"""Target-side monolingual corpora for back-translation, made into sentences in the dataset's own
processed format, so that a back-translated pair looks like a training pair of the dataset.

AB-Net's Figure 3b adds back-translated "English Wikipedia data, a subset of the training corpus
of BERT" to IWSLT14 De-En, and says no more. Choices made here:
- `english-wikipedia` is WikiText-103 raw (Merity et al., 2016): the text of the Good and
  Featured articles of English Wikipedia, a public, fixed and checksummed subset of it, 4M
  sentences or so in `wiki.train.raw` (enough for the figure's 2M).
- Its paragraphs come pre-tokenized (`word , word`, with `@-@` `@,@` `@.@` for a hyphen, comma or
  point inside a word or number): those are undone, the paragraph is Moses-detokenized, then
  split into sentences by the Moses sentence splitter (`sentence_splitter`, the port of
  split-sentences.perl), and each sentence goes through the dataset's recipe (Moses tokenizer,
  lowercasing for IWSLT14, ...), as the dataset's raw target side does. Headings and blank lines
  are dropped.
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
from nmtbench.data.recipes import DOWNLOADS_DIR, process_side, recipe_for
from nmtbench.errors import InputError
from nmtbench.fileio import write_json, write_lines
from nmtbench.provenance import file_digest

log = logging.getLogger(__name__)

CHUNK = 200  # paragraphs per worker task (about a thousand sentences)
_ARTEFACT = re.compile(r" @([-,.])@ ")


def wikitext_paragraphs(lines: list[str]) -> list[str]:
    """WikiText's paragraphs, still tokenized, with its `@-@` `@,@` `@.@` joins undone: every
    line but the blank ones and the ` = Heading = ` / ` = = Section = = ` ones."""
    paragraphs = []
    for line in lines:
        text = line.strip()
        if text and not (text.startswith("= ") and text.endswith(" =")):
            paragraphs.append(_ARTEFACT.sub(r"\1", text))
    return paragraphs


@dataclass(frozen=True)
class Corpus:
    """A monolingual corpus: its language, the downloaded part that holds it, and the reader
    that turns the part's lines into paragraphs of Moses-tokenized text."""

    lang: str
    part: Part
    paragraphs: Callable[[list[str]], list[str]]


CORPORA: dict[str, Corpus] = {
    "english-wikipedia": Corpus("en", Part("wikitext", "wikitext-103-raw-v1.zip",
                                           "wikitext-103-raw/wiki.train.raw"),
                                wikitext_paragraphs),
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


def download_paths(corpus: str) -> list[str]:
    """The downloaded files (under data/downloads/) the corpus is made from."""
    part = corpus_for(corpus).part
    return [f"{DOWNLOADS_DIR}/{part.source}/{part.file}"]


def check_sources(dataset: str, spec: dict[str, Any], corpus: str,
                  sources: dict[str, Any]) -> None:
    """The corpus must be known, in the dataset's target language, and have a download entry."""
    part = _checked(dataset, spec, corpus).part
    if part.file not in sources.get(part.source, {}).get("files", {}):
        raise InputError(f"config key 'sources.{part.source}.files.{part.file}' is missing "
                         f"(the monolingual corpus {corpus!r} of dataset {dataset!r} reads it)")


def _checked(dataset: str, spec: dict[str, Any], corpus: str) -> Corpus:
    recipe_for(dataset, spec)  # a real dataset, its languages named
    found = corpus_for(corpus)
    if found.lang != spec["tgt_lang"]:
        raise InputError(f"dataset {dataset!r}: the monolingual corpus {corpus!r} is "
                         f"{found.lang!r} text, but back-translation needs the target "
                         f"language {spec['tgt_lang']!r}")
    return found


def prepare_monolingual(name: str, spec: dict[str, Any], corpus: str, downloads: str | Path,
                        out: str | Path, workers: int = 1,
                        max_sentences: int | None = None) -> dict[str, Any]:
    """Write the corpus's sentences (the first `max_sentences`, or all), processed as dataset
    `name`'s target side, one per line to `out`, and a manifest beside it (`manifest_path`).

    Paragraphs are processed in order, in chunks over `workers` processes, and no further than
    the paragraph that completes `max_sentences`."""
    if max_sentences is not None and max_sentences < 1:
        raise InputError(f"max_sentences {max_sentences}: expected a positive number")
    source = _checked(name, spec, corpus)
    clean = recipe_for(name, spec).clean
    bounds = (clean["min_len"], clean["max_len"]) if clean else (1, float("inf"))
    paragraphs = source.paragraphs(read_part(source.part, downloads))
    log.info("%s: %d paragraphs in %s", corpus, len(paragraphs), source.part.label())
    work = partial(_process_chunk, name=name, spec=spec, lang=source.lang)
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
    input_file = f"{source.part.source}/{source.part.file}"
    manifest = {
        "dataset": name, "corpus": corpus, "lang": source.lang, "member": source.part.member,
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


def _process_chunk(paragraphs: list[str], name: str, spec: dict[str, Any],
                   lang: str) -> list[list[str]]:
    """Detokenize and sentence-split each paragraph, then put all the sentences through the
    dataset's recipe at once; the sentences are returned grouped by paragraph."""
    detokenizer = MosesDetokenizer(lang=lang)
    splitter = SentenceSplitter(language=lang)
    split = [splitter.split(detokenizer.detokenize(p.split(), unescape=False))
             for p in paragraphs]
    recipe = recipe_for(name, spec)  # as the dataset's target side
    processed = process_side([s for sentences in split for s in sentences], lang, recipe,
                             "tgt" in lowercased_sides(spec, recipe.lowercase))
    grouped, start = [], 0
    for sentences in split:
        grouped.append(processed[start : start + len(sentences)])
        start += len(sentences)
    return grouped

"""BLEU, always two ways: the papers' tokenized form and sacreBLEU with its signature; chrF.

The papers report Moses `multi-bleu.perl` on their own tokenization, which is not comparable
across groups; sacreBLEU on detokenized text is, and so is chrF, which MT papers now report
beside it. All come from the `sacrebleu` library so no score is computed by hand here.
"""

from __future__ import annotations

import os
import sys

from sacrebleu.metrics import BLEU, CHRF

from nmtbench.errors import InputError
from nmtbench.fileio import read_lines


def detokenize(lines: list[str], lang: str) -> list[str]:
    """Moses-detokenize whitespace-tokenized lines (what sacreBLEU expects as input)."""
    from sacremoses import MosesDetokenizer  # imported where used: training never needs it

    detok = MosesDetokenizer(lang=lang)
    return [detok.detokenize(line.split()) for line in lines]


def bleu(
    hyps_tok: list[str],
    refs_tok: list[str],
    hyps_detok: list[str],
    refs_detok: list[str],
    lowercase: bool,
) -> dict:
    """Score one corpus both ways, so every reported number has its comparable twin.

    `tokenized` equals `multi-bleu.perl [-lc]` on the tokenized text: whitespace split, no
    smoothing (a zero n-gram precision gives 0). `sacrebleu` is the standard 13a-tokenized score
    on the detokenized text, reported with its signature.
    """
    sizes = {len(hyps_tok), len(refs_tok), len(hyps_detok), len(refs_detok)}
    if len(sizes) != 1:
        raise ValueError(
            "bleu needs equally many lines: "
            f"hyps_tok={len(hyps_tok)} refs_tok={len(refs_tok)} "
            f"hyps_detok={len(hyps_detok)} refs_detok={len(refs_detok)}"
        )
    standard = BLEU(lowercase=lowercase)
    standard_score = standard.corpus_score(hyps_detok, [refs_detok])
    multi_bleu = multi_bleu_perl(lowercase)
    return {
        "sacrebleu": standard_score.score,
        "signature": str(standard.get_signature()),
        "tokenized": multi_bleu.corpus_score(hyps_tok, [refs_tok]).score,
        "tokenized_signature": str(multi_bleu.get_signature()),
    }


def chrf(hyps_detok: list[str], refs_detok: list[str], lowercase: bool) -> dict:
    """sacreBLEU's chrF (character 6-grams, beta 2) on detokenized text, with its signature."""
    metric = CHRF(lowercase=lowercase)
    return {"score": metric.corpus_score(hyps_detok, [refs_detok]).score,
            "signature": str(metric.get_signature())}


def multi_bleu_perl(lowercase: bool) -> BLEU:
    """sacreBLEU set up to equal `multi-bleu.perl [-lc]` on already tokenized text."""
    return BLEU(tokenize="none", smooth_method="none", lowercase=lowercase, force=True)


ROUGE_KINDS = ("rouge1", "rouge2", "rougeL")


def import_nltk() -> None:
    """Import nltk (rouge-score's stemmer and compare-mt's scorers load it) without
    scipy.stats, which nltk's collocation measures import if it is there and which nothing
    here calls: half a second of an evaluate or bootstrap job's one and a half. nltk takes
    the ImportError as scipy being absent; scipy.stats imports as usual afterwards."""
    if "nltk" in sys.modules or "scipy.stats" in sys.modules:
        return
    sys.modules["scipy.stats"] = None  # type: ignore[assignment]  # its import now fails
    try:
        import nltk  # noqa: F401
    finally:
        if "scipy.stats" in sys.modules and sys.modules["scipy.stats"] is None:
            del sys.modules["scipy.stats"]


def rouge_sentences(hyps: list[str], refs: list[str]) -> dict[str, list[float]]:
    """Each sentence's ROUGE-1/2/L F1 (0..1), from Google's `rouge-score` with Porter
    stemming, on the tokenized text (what Gigaword papers score)."""
    if len(hyps) != len(refs):
        raise ValueError(f"rouge needs equally many lines: hyps={len(hyps)} refs={len(refs)}")
    import_nltk()
    from rouge_score import rouge_scorer  # imported where used: it loads nltk

    scorer = rouge_scorer.RougeScorer(list(ROUGE_KINDS), use_stemmer=True)
    per_kind: dict[str, list[float]] = {kind: [] for kind in ROUGE_KINDS}
    for hyp, ref in zip(hyps, refs, strict=True):
        scores = scorer.score(ref, hyp)
        for kind in ROUGE_KINDS:
            per_kind[kind].append(scores[kind].fmeasure)
    return per_kind


def rouge(hyps: list[str], refs: list[str]) -> dict[str, float]:
    """ROUGE-1/2/L F1 (x100), averaged over sentences (rouge-score's own aggregate)."""
    return {kind: 100 * sum(f1) / max(len(f1), 1)
            for kind, f1 in rouge_sentences(hyps, refs).items()}


def score_files(
    hyp: str | os.PathLike,
    ref: str | os.PathLike,
    lowercase: bool = False,
    detok_lang: str | None = None,
) -> dict:
    """Score a hypothesis file against a reference file (`python -m nmtbench score`).

    Tokenized BLEU uses the files as given. sacreBLEU and chrF need detokenized text, so users
    whose files are tokenized pass `detok_lang` to Moses-detokenize both sides first.
    """
    hyps = read_lines(hyp)
    refs = read_lines(ref)
    if len(hyps) != len(refs):
        raise InputError(
            f"{hyp} has {len(hyps)} lines but {ref} has {len(refs)} lines; "
            "hypothesis and reference must be line-parallel"
        )
    if not refs:
        raise InputError(f"{hyp} and {ref} are empty: nothing to score")
    if detok_lang is None:
        hyps_detok, refs_detok = hyps, refs
    else:
        hyps_detok, refs_detok = detokenize(hyps, detok_lang), detokenize(refs, detok_lang)
    return {**bleu(hyps, refs, hyps_detok, refs_detok, lowercase),
            "chrf": chrf(hyps_detok, refs_detok, lowercase)}

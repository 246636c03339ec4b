"""compare-mt analyses of one system's output: paired bootstrap against a baseline (on BLEU,
sacreBLEU or a ROUGE F1), and BLEU by output-length bucket. Each works on the text its cell
scores, as the cell scores it: lowercased where the dataset is; tokenized BLEU with hyphenated
compounds split where the dataset's tokenized BLEU splits them (WMT14 En-De); sacreBLEU on
sacreBLEU's 13a tokens of the Moses-detokenized text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU

from nmtbench import provenance
from nmtbench.data.preprocess import split_compounds
from nmtbench.errors import InputError
from nmtbench.evaluation.metrics import (
    ROUGE_KINDS,
    detokenize,
    import_nltk,
    multi_bleu_perl,
    rouge_sentences,
)
from nmtbench.fileio import read_lines, write_json
from nmtbench.workflow.metric_registry import verdict

import_nltk()  # compare-mt imports nltk: without the scipy.stats nothing here reads
from compare_mt import scorers, sign_utils  # noqa: E402
from compare_mt.bucketers import LengthSentenceBucketer  # noqa: E402


def _corpus(path: str | Path, lowercase: bool, compound_split: bool,
            detok_lang: str | None = None) -> list[list[str]]:
    """A file's tokens as a cell scores them: the tokenized text (compounds split if asked),
    or with `detok_lang` sacreBLEU's 13a tokens of the Moses-detokenized text."""
    lines = [line.lower() if lowercase else line for line in read_lines(path)]
    if detok_lang is not None:
        from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

        tokenize = Tokenizer13a()
        return [tokenize(line).split() for line in detokenize(lines, detok_lang)]
    return [(split_compounds(line) if compound_split else line).split() for line in lines]


def _parallel(ref: str | Path, *outs: str | Path, lowercase: bool, compound_split: bool = False,
              detok_lang: str | None = None) -> list[list[list[str]]]:
    corpora = [_corpus(p, lowercase, compound_split, detok_lang) for p in (ref, *outs)]
    for path, corpus in zip(outs, corpora[1:], strict=True):
        if len(corpus) != len(corpora[0]):
            raise InputError(f"{path} has {len(corpus)} lines but {ref} has {len(corpora[0])}")
    if not corpora[0]:
        raise InputError(f"{', '.join(map(str, (ref, *outs)))} are empty: nothing to compare")
    return corpora


class TokenizedBleu(scorers.Scorer):
    """compare-mt's scorer interface with sacreBLEU's arithmetic: each resample is scored
    exactly as the tables' tokenized BLEU. compare-mt's own BleuScorer takes a zero n-gram
    precision as log 0 -> 0, i.e. as a precision of 1, so an output without a single matching
    trigram (an undertrained NAT model's) outscores a far better one."""

    def __init__(self, smooth_method: str = "none") -> None:
        # the corpora come lowercased if asked; sacreBLEU's own smoothing is "exp"
        self.bleu = BLEU(tokenize="none", smooth_method=smooth_method, force=True)

    def cache_stats(self, ref: list[list[str]], out: list[list[str]],
                    src: Any = None) -> list[list[int]]:
        return self.bleu._extract_corpus_statistics([" ".join(o) for o in out],
                                                    [[" ".join(r) for r in ref]])

    def score_cached_corpus(self, sent_ids: Any, cached_stats: list[list[int]],
                            ) -> tuple[float, None]:
        totals = np.sum([cached_stats[i] for i in sent_ids], axis=0)
        return self.bleu._compute_score_from_stats([int(x) for x in totals]).score, None


class RougeF1(scorers.Scorer):
    """compare-mt's scorer interface over one ROUGE F1 as the tables report it: the mean of
    rouge-score's sentence F1s (x100), so a resample is scored as the cell is."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def cache_stats(self, ref: list[list[str]], out: list[list[str]],
                    src: Any = None) -> list[float]:
        return rouge_sentences([" ".join(o) for o in out], [" ".join(r) for r in ref])[self.kind]

    def score_cached_corpus(self, sent_ids: Any, cached_stats: list[float],
                            ) -> tuple[float, None]:
        return 100 * float(np.mean([cached_stats[i] for i in sent_ids])), None


SCORERS = {"bleu": ("BLEU (compare-mt, tokenized)", TokenizedBleu),
           "sacrebleu": ("sacreBLEU (compare-mt, 13a tokens of Moses-detokenized text)",
                         lambda: TokenizedBleu(smooth_method="exp")),
           **{kind: (f"{kind} F1 (rouge-score, stemmed)", lambda kind=kind: RougeF1(kind))
              for kind in ROUGE_KINDS}}


def paired_bootstrap(hyp: str | Path, baseline: str | Path, ref: str | Path, out: str | Path, *,
                     samples: int, seed: int, lowercase: bool,
                     score: str = "bleu", compound_split: bool = False,
                     detok_lang: str = "en") -> dict[str, Any]:
    """compare-mt's paired bootstrap (half-size resamples) of `score` (metric_registry's
    BOOTSTRAP_SCORES): is `hyp` better than the baseline? `compound_split` splits hyphenated
    compounds before tokenized BLEU, as the dataset's does (ROUGE and sacreBLEU are scored
    without); sacreBLEU sees the text Moses-detokenized for `detok_lang`.

    p_better is the share of resamples where the system does not beat the baseline; a cell is
    marked significantly better when it is below 0.05 (and worse, symmetrically).
    """
    if score not in SCORERS:
        raise InputError(f"bootstrap score {score!r}: expected one of {', '.join(SCORERS)}")
    label, scorer = SCORERS[score]
    compound_split = compound_split and score == "bleu"
    detok = detok_lang if score == "sacrebleu" else None
    ref_c, hyp_c, base_c = _parallel(ref, hyp, baseline, lowercase=lowercase,
                                     compound_split=compound_split, detok_lang=detok)
    np.random.seed(seed)  # compare-mt samples with numpy's global generator
    wins, stats = sign_utils.eval_with_paired_bootstrap(
        ref_c, [hyp_c, base_c], None, scorer(), compare_directions=[(0, 1)],
        num_samples=samples)
    better, worse, _ = wins[0]
    result = {
        "samples": samples,
        "score": score,
        "metric": label,
        "lowercase": lowercase,
        "compound_split": compound_split,
        **({"detok_lang": detok} if detok else {}),
        "win_ratio": better,
        "loss_ratio": worse,
        "p_better": 1 - better,
        "p_worse": 1 - worse,
        "significance": verdict(1 - better, 1 - worse),
        "system": {k: float(v) for k, v in stats[0].items()},
        "baseline": {k: float(v) for k, v in stats[1].items()},
        # which hypotheses were compared, against which reference: the report checks them
        # against the metrics' own
        "hyps": [provenance.file_digest(hyp), provenance.file_digest(baseline)],
        "ref": provenance.file_digest(ref),
    }
    write_json(out, result)
    return result


def length_buckets(hyp: str | Path, ref: str | Path, out: str | Path, *, cutoffs: list[int],
                   lowercase: bool, compound_split: bool = False) -> dict[str, Any]:
    """BLEU per output-length bucket, with compare-mt's bucket boundaries and labels.

    compare-mt's length bucketer measures the reference; the papers bucket by the length of the
    generated output, so the output is what is measured here. Each bucket's BLEU is the tables'
    tokenized BLEU (multi-bleu.perl), compounds split where the cell splits them, so a bucket
    of every sentence equals the table cell; lengths are of the output as written.
    """
    if any(a >= b for a, b in zip(cutoffs, cutoffs[1:], strict=False)):
        raise InputError(f"bucket cutoffs {list(cutoffs)}: each must be larger than the one "
                         "before (compare-mt labels and fills the buckets in that order)")
    ref_c, hyp_c = _parallel(ref, hyp, lowercase=lowercase, compound_split=compound_split)
    bucketer = LengthSentenceBucketer(bucket_cutoffs=list(cutoffs))
    members: list[list[int]] = [[] for _ in bucketer.bucket_strs]
    for i, words in enumerate(_corpus(hyp, lowercase, compound_split=False)):
        members[bucketer.cutoff_into_bucket(len(words))].append(i)
    bleu = multi_bleu_perl(lowercase)
    buckets = []
    for label, index in zip(bucketer.bucket_strs, members, strict=True):
        score = bleu.corpus_score([" ".join(hyp_c[i]) for i in index],
                                  [[" ".join(ref_c[i]) for i in index]]).score if index else None
        buckets.append({"bucket": label, "sentences": len(index),
                        "bleu": score})
    result = {"cutoffs": list(cutoffs), "measure": "output length (tokens)",
              "metric": "tokenized BLEU (multi-bleu.perl)", "buckets": buckets,
              # what was bucketed: the report checks them against the cell's scores
              "hyp": provenance.file_digest(hyp), "ref": provenance.file_digest(ref)}
    write_json(out, result)
    return result

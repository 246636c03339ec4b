"""The metrics a table column or figure axis may name (papers/schema.yaml `$defs.metric`):
where each is read from, how it is labelled and printed, and which paired bootstrap against
the baseline marks it. Planning, the report and the figures read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nmtbench.records import COUNT, POSITIVE, SCORE, Bounds

# The languages sacreBLEU's input may be Moses-detokenized for (config `detok_lang`, the CLI's
# --detok-lang): those sacremoses ships Moses' resources for, and Vietnamese (IWSLT15 En-Vi),
# which Moses detokenizes with its generic rules.
DETOK_LANGS = ("as", "bn", "ca", "cs", "de", "el", "en", "es", "et", "fi", "fr", "ga", "gu",
               "hi", "hu", "is", "it", "kn", "lt", "lv", "ml", "mni", "mr", "nl", "or", "pa",
               "pl", "pt", "ro", "ru", "sk", "sl", "sv", "ta", "tdt", "te", "vi", "yue", "zh")


# What `nmtbench bootstrap --score` resamples: tokenized BLEU, sacreBLEU (each column's marks
# on its own BLEU), or one ROUGE F1 averaged over sentences.
BOOTSTRAP_SCORES = ("bleu", "sacrebleu", "rouge1", "rouge2", "rougeL")
P_VALUE = 0.05


def verdict(p_better: float, p_worse: float) -> str:
    """A paired bootstrap's finding from its two p-values: the job writes it, and the report
    refuses a record whose finding is not its p-values' (one edited by hand)."""
    return "better" if p_better < P_VALUE else "worse" if p_worse < P_VALUE else "none"


@dataclass(frozen=True)
class Metric:
    name: str
    source: Literal["metrics", "latency"]  # the run's metrics.<split>.<tag>.json or latency file
    keys: tuple[str, ...]  # the path to the number in that JSON file
    label: str
    pattern: str | None  # str.format pattern of one value; None: a parameter count (74M)
    # the score whose paired bootstrap (compare-mt) marks a cell better/worse than the
    # baseline: one of BOOTSTRAP_SCORES, None for a metric without a test
    significance: str | None = None
    quality: bool = False  # a score of the output, higher is better (BLEU, ROUGE)
    lower_is_better: bool = False  # latency, parameter counts
    decoded: bool = True  # measured on a decoding (False: a property of the trained model)
    bounds: Bounds = SCORE  # the values its job can write: the report refuses others

    def format(self, value: float) -> str:
        if self.pattern is None:
            return _count(value)
        return self.pattern.format(value)


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("bleu_tokenized", "metrics", ("bleu", "tokenized"), "BLEU (tokenized)", "{:.2f}",
           significance="bleu", quality=True),
    Metric("sacrebleu", "metrics", ("bleu", "sacrebleu"), "sacreBLEU", "{:.2f}",
           significance="sacrebleu", quality=True),
    # sacreBLEU's chrF on the detokenized text: no paper here reports it, and the bootstrap
    # resamples no character n-grams, so its cells carry no significance mark
    Metric("chrf", "metrics", ("chrf", "score"), "chrF", "{:.2f}", quality=True),
    Metric("rouge1", "metrics", ("rouge", "rouge1"), "ROUGE-1", "{:.2f}",
           significance="rouge1", quality=True),
    Metric("rouge2", "metrics", ("rouge", "rouge2"), "ROUGE-2", "{:.2f}",
           significance="rouge2", quality=True),
    Metric("rougeL", "metrics", ("rouge", "rougeL"), "ROUGE-L", "{:.2f}",
           significance="rougeL", quality=True),
    Metric("latency_ms", "latency", ("latency_ms", "median"), "latency (ms)", "{:.1f} ms",
           lower_is_better=True, bounds=POSITIVE),
    Metric("speedup", "latency", ("speedup",), "speedup", "{:.2f}x", bounds=POSITIVE),
    Metric("params_trained", "metrics", ("params", "trained"), "#trained parameters", None,
           lower_is_better=True, decoded=False, bounds=COUNT),
    Metric("params_total", "metrics", ("params", "total"), "#parameters", None,
           lower_is_better=True, decoded=False, bounds=Bounds(1, whole=True)),
)}


# The test sentences a latency job decodes first and does not time (the device warms up)
LATENCY_WARMUP = 5


def _count(value: float) -> str:
    """Parameter counts as the papers print them (74M), exact below a million."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:.1f}M".replace(".0M", "M")
    return f"{value:,.0f}"

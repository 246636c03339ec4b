"""Score one run's hypotheses and write its metrics file (BLEU both ways, params, timings)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmtbench import provenance
from nmtbench.data.preprocess import split_compounds
from nmtbench.errors import InputError
from nmtbench.evaluation.metrics import bleu, chrf, detokenize, rouge
from nmtbench.fileio import read_lines, write_json
from nmtbench.records import read_record

TRAINING = ("seconds", "steps", "epochs", "device", "best_valid_loss", "train_pairs")


@dataclass(frozen=True)
class Decoded:
    """A run's hypotheses of one split, and the run files that say what made them."""

    hyp: str | Path
    summary: str | Path  # the run's train_summary.json: parameter counts, training record
    config: str | Path  # the run's config.json: its method
    info: str | Path | None = None  # the decoding's record (copied into the metrics)


@dataclass(frozen=True)
class Scoring:
    """How a dataset's outputs are scored: its references and the settings of its config."""

    ref: str | Path  # tokenized, as the hypotheses are
    lowercase: bool
    detok_lang: str  # the Moses detokenizer's language before sacreBLEU
    raw_ref: str | Path | None = None  # untokenized, for sacreBLEU, where the data has one
    compound_split: bool = False  # hyphenated compounds split before tokenized BLEU


def score_text(hyps: list[str], refs: list[str], scoring: Scoring) -> dict[str, Any]:
    """Tokenized BLEU against the tokenized reference; sacreBLEU and chrF on detokenized text.

    The hypotheses are tokenized as the references are (the target tokenizer keeps the
    prepared text's spacing: nmtbench.data.tokenization), so a perfect translation scores 100.
    sacreBLEU and chrF see them Moses-detokenized, and see the raw reference when the dataset
    has one, else the detokenized tokenized reference. `compound_split` splits hyphenated
    compounds in both before tokenized BLEU, as the papers scored WMT14 En-De.
    """
    raw_refs = (read_lines(scoring.raw_ref) if scoring.raw_ref
                else detokenize(refs, scoring.detok_lang))
    hyps_detok = detokenize(hyps, scoring.detok_lang)
    for_bleu = split_compounds if scoring.compound_split else (lambda line: line)
    scores = bleu([for_bleu(h) for h in hyps], [for_bleu(r) for r in refs],
                  hyps_detok, raw_refs, lowercase=scoring.lowercase)
    # how it was scored, besides the signatures: the report compares them with the config's
    scores["compound_split"] = scoring.compound_split
    scores["detok_lang"] = scoring.detok_lang
    return {"bleu": scores, "chrf": chrf(hyps_detok, raw_refs, lowercase=scoring.lowercase)}


def evaluate_run(decoded: Decoded, split: str, scoring: Scoring,
                 out_path: str | Path) -> dict[str, Any]:
    """Score one run's hypotheses (`score_text`, ROUGE) and write its metrics file."""
    summary = read_record(decoded.summary, ("params", *TRAINING))
    config = read_record(decoded.config, ("experiment",))
    info = read_record(decoded.info) if decoded.info else {}
    hyp_path, ref_path = decoded.hyp, scoring.ref
    hyps = read_lines(hyp_path)
    refs = read_lines(ref_path)
    if len(hyps) != len(refs):
        raise InputError(f"{hyp_path} has {len(hyps)} lines but {ref_path} has {len(refs)}")
    if not refs:
        raise InputError(f"{hyp_path} and {ref_path} are empty: nothing to score")
    scores = score_text(hyps, refs, scoring)
    trained = provenance.file_digest(decoded.summary)
    if decoded.info and info.get(provenance.TRAINED) != trained:
        raise InputError(f"{hyp_path} was decoded from another training than the one in "
                         f"{decoded.summary} (or before it finished); delete it to decode again")
    metrics = {
        "method": config["experiment"]["method"],
        "split": split,
        **scores,
        "rouge": rouge(hyps, refs),
        "params": summary["params"],
        "train": {k: summary[k] for k in TRAINING},
        "decode": info,
        provenance.TRAINED: trained,
        "hyp": provenance.file_digest(hyp_path),  # the bootstrap compares these hypotheses
        "ref": provenance.file_digest(ref_path),  # the report compares it with the data's
    }
    write_json(out_path, metrics)
    return metrics

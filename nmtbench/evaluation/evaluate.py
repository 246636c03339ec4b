"""Score one run's hypotheses and write its metrics file (BLEU both ways, params, timings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nmtbench import provenance
from nmtbench.data.preprocess import split_compounds
from nmtbench.errors import InputError
from nmtbench.evaluation.metrics import bleu, detokenize, rouge
from nmtbench.fileio import read_lines, write_json
from nmtbench.records import read_record

TRAINING = ("seconds", "steps", "epochs", "device", "best_valid_loss", "train_pairs")


def evaluate_run(summary_path: str | Path, config_path: str | Path, split: str,
                 hyp_path: str | Path, ref_path: str | Path, out_path: str | Path, *,
                 lowercase: bool, detok_lang: str,
                 raw_ref_path: str | Path | None = None,
                 decode_info: str | Path | None = None,
                 compound_split: bool = False) -> dict[str, Any]:
    """Tokenized BLEU against the tokenized reference; sacreBLEU on detokenized text; ROUGE.

    The hypotheses are word-level tokenized text (the target tokenizer's words); sacreBLEU
    sees them Moses-detokenized, and sees the raw reference when the dataset has one, else the
    detokenized tokenized reference. `compound_split` splits hyphenated compounds in both
    before tokenized BLEU, as the papers scored WMT14 En-De. The run's train_summary.json
    and config.json give its parameter counts, training record and method.
    """
    summary = read_record(summary_path, ("params", *TRAINING))
    config = read_record(config_path, ("experiment",))
    decoded = read_record(decode_info) if decode_info else {}
    hyps = read_lines(hyp_path)
    refs = read_lines(ref_path)
    if len(hyps) != len(refs):
        raise InputError(f"{hyp_path} has {len(hyps)} lines but {ref_path} has {len(refs)}")
    if not refs:
        raise InputError(f"{hyp_path} and {ref_path} are empty: nothing to score")
    raw_refs = read_lines(raw_ref_path) if raw_ref_path else detokenize(refs, detok_lang)
    for_bleu = split_compounds if compound_split else (lambda line: line)
    scores = bleu([for_bleu(h) for h in hyps], [for_bleu(r) for r in refs],
                  detokenize(hyps, detok_lang), raw_refs, lowercase=lowercase)
    scores["compound_split"] = compound_split
    trained = provenance.file_digest(summary_path)
    if decode_info and decoded.get(provenance.TRAINED) != trained:
        raise InputError(f"{hyp_path} was decoded from another training than the one in "
                         f"{summary_path} (or before it finished); delete it to decode again")
    metrics = {
        "method": config["experiment"]["method"],
        "split": split,
        "bleu": scores,
        "rouge": rouge(hyps, refs),
        "params": summary["params"],
        "train": {k: summary[k] for k in TRAINING},
        "decode": decoded,
        provenance.TRAINED: trained,
        "hyp": provenance.file_digest(hyp_path),  # the bootstrap compares these hypotheses
    }
    write_json(out_path, metrics)
    return metrics

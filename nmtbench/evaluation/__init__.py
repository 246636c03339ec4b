"""Evaluation of trained runs: translation, BLEU and ROUGE, compare-mt analyses, decoding
latency and parameter counts."""

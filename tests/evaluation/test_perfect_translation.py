"""A perfect translation scores 100 on every real test set, through every kind of target vocabulary.

The reference, prepared as the dataset's recipe prepares it, is encoded by a target tokenizer,
decoded as a run's output is, and scored as a run is (`score_text`). Real test sets come from
`../shared/data` (skipped without it). The vocabulary kinds a config reads a target side with:
bert-base-uncased's own vocabulary (IWSLT14's and Multi30k's English), WordPiece trained on the
data (`vocab_size`; here on the text itself, so that its spacing alone is under test), which
stands for the cased BERTs too (bert-base-cased, bert-base-german-cased and mBERT read text as
it does: accents kept, and the text's case, lowercased where the dataset is), and GPT-2's
byte-level BPE. Every difference from the reference must be what the vocabulary's own
normaliser does to the text (`CANNOT_WRITE`).
"""

from __future__ import annotations

import functools
import gzip
from pathlib import Path

import pytest

from nmtbench.data.preprocess import unescape_moses
from nmtbench.data.recipes import process_side, recipe_for
from nmtbench.data.tokenization import decode, load_tokenizer, train_wordpiece
from nmtbench.evaluation.evaluate import Scoring, score_text
from nmtbench.evaluation.metrics import detokenize

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent")

WMT14 = {"kind": "wmt14", "src_lang": "en", "tgt_lang": "de"}
MULTI30K = {"kind": "multi30k", "src_lang": "de", "tgt_lang": "en"}
IWSLT15 = {"kind": "iwslt15", "src_lang": "en", "tgt_lang": "vi"}
# test set -> (file, language, how its reference is prepared, lowercased, compound split).
# IWSLT14's files are fairseq's prepared text already.
TEST_SETS = {
    "iwslt14.en": ("iwslt14-de-en/test.en.gz", "en", "prepared", True, False),
    "iwslt14.de": ("iwslt14-de-en/test.de.gz", "de", "prepared", True, False),
    "iwslt15.en": ("iwslt15-en-vi/tst2013.en.gz", "en", IWSLT15, False, False),
    "iwslt15.vi": ("iwslt15-en-vi/tst2013.vi.gz", "vi", IWSLT15, False, False),
    "newstest2014.en": ("wmt14-en-de/newstest2014.en.gz", "en", WMT14, False, False),
    "newstest2014.de": ("wmt14-en-de/newstest2014.de.gz", "de", WMT14, False, True),
    "newstest2013.en": ("wmt14-en-de/newstest2013.tok.en.gz", "en", WMT14, False, False),
    "newstest2013.de": ("wmt14-en-de/newstest2013.tok.de.gz", "de", WMT14, False, True),
    "multi30k.en": ("multi30k-de-en/test2016.en.gz", "en", MULTI30K, True, False),
    "multi30k.de": ("multi30k-de-en/test2016.de.gz", "de", MULTI30K, True, False),
}
# The vocabulary kinds configs read each with: every target may be a WordPiece trained on the
# data or GPT-2's byte-level BPE; these English ones are also read by bert-base-uncased
UNCASED_BERT_READS = ("iwslt14.en", "multi30k.en")
# Lines a vocabulary cannot write, each shortfall under 0.1: bert-base-uncased strips accents
# (its pre-training text was stripped), so "jürgen" comes back "jurgen" (7 lines); WordPiece's
# normaliser drops format characters, here a zero-width non-joiner standing alone (2 lines).
CANNOT_WRITE = {("iwslt14.en", "bert-base-uncased"): 7, ("iwslt14.de", "wordpiece"): 2}


def _read(name: str) -> list[str]:
    with gzip.open(DATA / name, "rt", encoding="utf-8-sig") as f:
        return [line.rstrip("\n") for line in f]


@functools.cache
def _reference(test_set: str) -> list[str]:
    """The reference as the dataset's recipe prepares it (the run's `prepared/test.tgt`)."""
    file, lang, prepare, lowercase, _ = TEST_SETS[test_set]
    lines = _read(file)
    if prepare == "prepared":
        return [unescape_moses(line) for line in lines]
    if file.endswith(".tok.en.gz") or file.endswith(".tok.de.gz"):  # newstest2013, tokenized
        lines = detokenize([line.replace(" ##AT##-##AT## ", "-") for line in lines], lang)
    recipe = recipe_for(prepare["kind"], {**prepare, "src_lang": lang,
                                          "tgt_lang": "en" if lang != "en" else "de"})
    return process_side(lines, lang, recipe, lowercase)


def _tokenizer(kind: str, lines: list[str], lowercase: bool, tmp: Path):
    tmp.mkdir()
    if kind == "bert-base-uncased":
        (tmp / "vocab.txt").write_bytes(gzip.decompress(
            (DATA / "bert" / "bert-base-uncased" / "vocab.txt.gz").read_bytes()))
        from transformers import BertTokenizerFast

        BertTokenizerFast(str(tmp / "vocab.txt"), do_lower_case=True).save_pretrained(str(tmp))
    elif kind == "wordpiece":
        (tmp.parent / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        train_wordpiece([tmp.parent / "corpus.txt"], tmp, vocab_size=4000, lowercase=lowercase)
    else:
        from tokenizers import ByteLevelBPETokenizer
        from transformers import GPT2TokenizerFast

        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(lines, vocab_size=4000, show_progress=False)
        bpe.add_special_tokens(["<|endoftext|>"])
        GPT2TokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>",
                          eos_token="<|endoftext|>").save_pretrained(str(tmp))
    return load_tokenizer(tmp, target=True)


CASES = [(test_set, kind) for test_set in TEST_SETS
         for kind in ("wordpiece", "byte-level",
                      *(("bert-base-uncased",) if test_set in UNCASED_BERT_READS else ()))]


@pytest.mark.parametrize(("test_set", "kind"), CASES, ids=[f"{s}-{k}" for s, k in CASES])
def test_the_reference_as_a_hypothesis_scores_100(test_set, kind, tmp_path):
    _, lang, _, lowercase, compound_split = TEST_SETS[test_set]
    refs = _reference(test_set)
    tokenizer = _tokenizer(kind, refs, lowercase, tmp_path / "vocabulary")
    hyps = [decode(tokenizer, ids)
            for ids in tokenizer(refs, add_special_tokens=True)["input_ids"]]
    (tmp_path / "ref.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    scores = score_text(hyps, refs, Scoring(tmp_path / "ref.txt", lowercase, lang,
                                            compound_split=compound_split))
    normalizer = tokenizer.backend_tokenizer.normalizer
    writable = [" ".join((normalizer.normalize_str(r) if normalizer else r).split()) for r in refs]
    assert hyps == writable  # no [UNK], no spacing lost: only the normaliser's own changes
    differ = sum(h != r for h, r in zip(hyps, refs, strict=True))
    assert differ == CANNOT_WRITE.get((test_set, kind), 0)
    bleu, sacrebleu, chrf = (scores["bleu"]["tokenized"], scores["bleu"]["sacrebleu"],
                             scores["chrf"]["score"])
    if differ:
        assert 99.9 < min(bleu, sacrebleu, chrf) < 100
    else:
        assert (bleu, sacrebleu, chrf) == pytest.approx((100, 100, 100), abs=1e-9)

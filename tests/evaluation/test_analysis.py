"""compare-mt analyses on hand-made files (paired bootstrap, length buckets), and ROUGE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU

from nmtbench.data.preprocess import split_compounds
from nmtbench.errors import InputError
from nmtbench.evaluation.analysis import RougeF1, length_buckets, paired_bootstrap
from nmtbench.evaluation.metrics import bleu, detokenize, rouge
from nmtbench.provenance import file_digest

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi "
         "rho sigma tau upsilon").split()
# 40 reference sentences of 8 tokens; `BAD` shares only some n-grams with them.
REFS = [" ".join(WORDS[(i + k) % 20] for k in range(8)) for i in range(40)]
BAD = [" ".join(WORDS[(i + 3 * k) % 20] for k in range(8)) for i in range(40)]
# Each half right: A on the first 20 sentences, B on the odd ones; neither is clearly better.
MIXED_A = [r if i < 20 else b for i, (r, b) in enumerate(zip(REFS, BAD, strict=True))]
MIXED_B = [r if i % 2 else b for i, (r, b) in enumerate(zip(REFS, BAD, strict=True))]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return {name: write(tmp_path / f"{name}.txt", lines) for name, lines in (
        ("ref", REFS), ("good", REFS), ("bad", BAD), ("a", MIXED_A), ("b", MIXED_B),
        ("upper", [r.upper() for r in REFS]))}


def bootstrap(files, hyp: str, baseline: str, out: Path, seed: int = 1,
              lowercase: bool = False, score: str = "bleu") -> dict:
    return paired_bootstrap(files[hyp], files[baseline], files["ref"], out, samples=200,
                            seed=seed, lowercase=lowercase, score=score)


# --- paired bootstrap --------------------------------------------------------------------------
def test_clearly_better_system(files, tmp_path: Path) -> None:
    out = tmp_path / "out" / "bootstrap.json"
    result = bootstrap(files, "good", "bad", out)
    assert result["significance"] == "better"
    assert (result["win_ratio"], result["loss_ratio"]) == (1.0, 0.0)
    assert (result["p_better"], result["p_worse"]) == (0.0, 1.0)
    assert result["samples"] == 200
    assert result["ref"] == file_digest(files["ref"])  # the report compares the metrics'
    assert result["system"]["mean"] == pytest.approx(100.0)
    assert result["baseline"]["mean"] < 100.0
    assert json.loads(out.read_text(encoding="utf-8")) == result


def test_clearly_worse_system(files, tmp_path: Path) -> None:
    result = bootstrap(files, "bad", "good", tmp_path / "b.json")
    assert result["significance"] == "worse"
    assert (result["win_ratio"], result["loss_ratio"]) == (0.0, 1.0)
    assert result["p_worse"] == 0.0


def test_identical_systems(files, tmp_path: Path) -> None:
    result = bootstrap(files, "a", "a", tmp_path / "b.json")
    assert result["significance"] == "none"
    assert (result["win_ratio"], result["loss_ratio"]) == (0.0, 0.0)
    assert result["system"] == result["baseline"]


def test_no_clear_winner(files, tmp_path: Path) -> None:
    result = bootstrap(files, "a", "b", tmp_path / "b.json")
    assert result["significance"] == "none"
    assert 0.2 < result["win_ratio"] < 0.8 and 0.2 < result["loss_ratio"] < 0.8


def test_deterministic_for_a_fixed_seed(files, tmp_path: Path) -> None:
    first = bootstrap(files, "a", "b", tmp_path / "1.json", seed=1)
    again = bootstrap(files, "a", "b", tmp_path / "2.json", seed=1)
    other = bootstrap(files, "a", "b", tmp_path / "3.json", seed=2)
    assert first == again
    assert (tmp_path / "1.json").read_bytes() == (tmp_path / "2.json").read_bytes()
    assert (other["win_ratio"], other["system"]) != (first["win_ratio"], first["system"])


def test_lowercase(files, tmp_path: Path) -> None:
    assert bootstrap(files, "upper", "a", tmp_path / "1.json")["significance"] == "worse"
    assert bootstrap(files, "upper", "a", tmp_path / "2.json",
                     lowercase=True)["significance"] == "better"


@pytest.mark.parametrize("kind", ["rouge1", "rouge2", "rougeL"])
def test_rouge_resamples_are_scored_as_the_tables_rouge(kind: str) -> None:
    """A resample's ROUGE is the mean of rouge-score's sentence F1s over it, as the cell is."""
    scorer = RougeF1(kind)
    stats = scorer.cache_stats([r.split() for r in REFS], [h.split() for h in MIXED_A])
    assert scorer.score_cached_corpus(range(40), stats)[0] == pytest.approx(
        rouge(MIXED_A, REFS)[kind])
    by_hand = rouge_scorer.RougeScorer([kind], use_stemmer=True)
    picked = [3, 3, 25, 30]  # a bootstrap resample draws with replacement
    expected = 100 * sum(by_hand.score(REFS[i], MIXED_A[i])[kind].fmeasure
                         for i in picked) / len(picked)
    assert scorer.score_cached_corpus(picked, stats)[0] == pytest.approx(expected)


def test_rouge_bootstrap_marks_a_system_on_rouge_where_bleu_sees_nothing(files,
                                                                          tmp_path: Path) -> None:
    # BAD shares unigrams but no trigram with the references: tokenized BLEU 0 against 0 for
    # a system with no words right at all, while its ROUGE-1 is clearly better
    write(tmp_path / "none.txt", ["omega " * 8] * 40)
    files["none"] = tmp_path / "none.txt"
    assert bootstrap(files, "bad", "none", tmp_path / "b.json")["significance"] == "none"
    result = bootstrap(files, "bad", "none", tmp_path / "r.json", score="rouge1")
    assert (result["significance"], result["score"]) == ("better", "rouge1")
    assert result["metric"].startswith("rouge1 F1")
    assert bootstrap(files, "none", "bad", tmp_path / "w.json",
                     score="rougeL")["significance"] == "worse"


def test_every_score_a_metric_is_marked_by_can_be_bootstrapped() -> None:
    from nmtbench.evaluation.analysis import SCORERS
    from nmtbench.workflow.metric_registry import BOOTSTRAP_SCORES, METRICS

    assert tuple(SCORERS) == BOOTSTRAP_SCORES
    assert {m.significance for m in METRICS.values()} - {None} == set(BOOTSTRAP_SCORES)


def test_an_unknown_bootstrap_score_is_an_error(files, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="bootstrap score 'meteor': expected one of bleu, "
                                         "sacrebleu, rouge1, rouge2, rougeL"):
        bootstrap(files, "good", "bad", tmp_path / "x.json", score="meteor")
    assert not (tmp_path / "x.json").exists()


def test_resamples_are_scored_as_the_tables_tokenized_bleu(files, tmp_path: Path) -> None:
    # BAD matches unigrams only: its BLEU is 0, as multi-bleu.perl says. compare-mt's own
    # scorer reads a zero precision as 1 and would give it about 40 BLEU, better than A's.
    result = bootstrap(files, "bad", "a", tmp_path / "b.json")
    assert result["system"]["median"] == 0.0
    assert result["significance"] == "worse"
    full = bleu(BAD, REFS, BAD, REFS, lowercase=False)["tokenized"]
    assert full == 0.0


@pytest.mark.parametrize("short", ["hyp", "baseline"])
def test_line_count_mismatch(files, tmp_path: Path, short: str) -> None:
    cut = write(tmp_path / "cut.txt", REFS[:39])
    hyp, baseline = (cut, files["bad"]) if short == "hyp" else (files["good"], cut)
    out = tmp_path / "b.json"
    with pytest.raises(InputError) as err:
        paired_bootstrap(hyp, baseline, files["ref"], out, samples=10, seed=1,
                         lowercase=False)
    assert str(err.value) == f"{cut} has 39 lines but {files['ref']} has 40"
    assert not out.exists()


# --- length buckets ----------------------------------------------------------------------------
def tokens(n: int, start: int = 0) -> list[str]:
    return [WORDS[(start + k) % 20] + str((start + k) // 20) for k in range(n)]


# (output, reference): output lengths 3, 7 | 8, 12, 15 | 16, 20 with cutoffs [8, 16]. The
# references' lengths (5, 9, 6, 12, 9, 10, 20) would bucket them differently (2 | 4 | 1).
PAIRS = [
    (tokens(3), tokens(5)),
    (tokens(7, 10), tokens(7, 10)[:5] + ["new", "words"] + tokens(7, 10)[5:]),
    (tokens(8, 20), tokens(6, 20)),
    (tokens(12, 30)[:5] + ["a,b"] + tokens(6, 36), tokens(11, 30)[:5] + ["a,b"]
     + tokens(5, 36) + ["other"]),  # "a,b" is one token (no re-tokenization)
    (tokens(15, 50), tokens(9, 50)),
    (tokens(16, 70), tokens(10, 70)),
    (tokens(20, 90), tokens(20, 90)),
]
HYPS = [" ".join(h) for h, _ in PAIRS]
BUCKET_REFS = [" ".join(r) for _, r in PAIRS]


def sacre_bleu(index: list[int], lowercase: bool = False) -> float:
    scorer = BLEU(tokenize="none", smooth_method="none", force=True, lowercase=lowercase)
    return scorer.corpus_score([HYPS[i] for i in index], [[BUCKET_REFS[i] for i in index]]).score


@pytest.fixture
def bucket_files(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "hyp.txt", HYPS), write(tmp_path / "ref.txt", BUCKET_REFS)


def test_buckets_by_output_length(bucket_files, tmp_path: Path) -> None:
    hyp, ref = bucket_files
    assert [len(h) for h, _ in PAIRS] == [3, 7, 8, 12, 15, 16, 20]
    out = tmp_path / "buckets.json"
    result = length_buckets(hyp, ref, out, cutoffs=[8, 16], lowercase=False)
    assert json.loads(out.read_text(encoding="utf-8")) == result
    assert result["cutoffs"] == [8, 16]
    members = {"<8": [0, 1], "[8,16)": [2, 3, 4], ">=16": [5, 6]}
    assert [b["bucket"] for b in result["buckets"]] == list(members)
    assert [b["sentences"] for b in result["buckets"]] == [2, 3, 2]
    for bucket, index in zip(result["buckets"], members.values(), strict=True):
        assert bucket["bleu"] == pytest.approx(sacre_bleu(index))
        assert 0 < bucket["bleu"] < 100
    # the buckets differ: scoring everything, or by reference length, would not give these
    assert len({round(b["bleu"], 6) for b in result["buckets"]}) == 3


def test_empty_bucket_has_no_bleu(bucket_files, tmp_path: Path) -> None:
    hyp, ref = bucket_files
    result = length_buckets(hyp, ref, tmp_path / "b.json", cutoffs=[8, 16, 30], lowercase=False)
    assert result["buckets"][-1] == {"bucket": ">=30", "sentences": 0, "bleu": None}
    assert result["buckets"][2]["bucket"] == "[16,30)"
    assert result["buckets"][2]["bleu"] == pytest.approx(sacre_bleu([5, 6]))


@pytest.mark.parametrize(("cutoffs", "labels", "sizes"), [
    ([8, 16], ["<8", "[8,16)", ">=16"], [2, 3, 2]),
    ([8, 9], ["<8", "8", ">=9"], [2, 1, 4]),  # compare-mt names a one-length bucket by it
    ([4, 13, 20], ["<4", "[4,13)", "[13,20)", ">=20"], [1, 3, 2, 1]),
])
def test_labels_as_compare_mt_names_them(bucket_files, tmp_path: Path, cutoffs, labels,
                                         sizes) -> None:
    hyp, ref = bucket_files
    result = length_buckets(hyp, ref, tmp_path / "b.json", cutoffs=cutoffs, lowercase=False)
    assert [b["bucket"] for b in result["buckets"]] == labels
    assert [b["sentences"] for b in result["buckets"]] == sizes
    if cutoffs[0] == 4:  # output 0 alone: no 4-gram, so unsmoothed BLEU is 0
        assert result["buckets"][0]["bleu"] == 0.0


def test_one_bucket_of_everything_equals_the_table_bleu(bucket_files, tmp_path: Path) -> None:
    hyp, ref = bucket_files
    result = length_buckets(hyp, ref, tmp_path / "b.json", cutoffs=[1000], lowercase=False)
    table = bleu(HYPS, BUCKET_REFS, HYPS, BUCKET_REFS, lowercase=False)["tokenized"]
    assert result["buckets"][0]["bleu"] == pytest.approx(table)
    assert result["buckets"][1] == {"bucket": ">=1000", "sentences": 0, "bleu": None}


def test_bucket_bleu_is_unsmoothed(tmp_path: Path) -> None:
    # no 4-gram of either output is in its reference: multi-bleu.perl says 0 (no smoothing)
    hyp = write(tmp_path / "hyp.txt", ["a b c x d e f", "g h i x j"])
    ref = write(tmp_path / "ref.txt", ["a b c d e f", "g h i j"])
    result = length_buckets(hyp, ref, tmp_path / "b.json", cutoffs=[6], lowercase=False)
    assert result["buckets"] == [{"bucket": "<6", "sentences": 1, "bleu": 0.0},
                                 {"bucket": ">=6", "sentences": 1, "bleu": 0.0}]


def test_buckets_lowercase(tmp_path: Path) -> None:
    hyp = write(tmp_path / "hyp.txt", [h.upper() for h in HYPS])
    ref = write(tmp_path / "ref.txt", BUCKET_REFS)
    cased = length_buckets(hyp, ref, tmp_path / "1.json", cutoffs=[8, 16], lowercase=False)
    lower = length_buckets(hyp, ref, tmp_path / "2.json", cutoffs=[8, 16], lowercase=True)
    assert [b["bleu"] for b in cased["buckets"]] == [0.0, 0.0, 0.0]
    assert [b["bleu"] for b in lower["buckets"]] == pytest.approx(
        [sacre_bleu([0, 1]), sacre_bleu([2, 3, 4]), sacre_bleu([5, 6])])


def test_buckets_line_count_mismatch(tmp_path: Path) -> None:
    hyp = write(tmp_path / "hyp.txt", HYPS[:-1])
    ref = write(tmp_path / "ref.txt", BUCKET_REFS)
    with pytest.raises(InputError, match=f"{hyp} has 6 lines but {ref} has 7"):
        length_buckets(hyp, ref, tmp_path / "b.json", cutoffs=[8], lowercase=False)


def test_buckets_cutoffs_must_increase(tmp_path: Path) -> None:
    """compare-mt takes [20, 10] and labels a bucket "[20,10)": refuse it."""
    hyp = write(tmp_path / "hyp.txt", HYPS)
    ref = write(tmp_path / "ref.txt", BUCKET_REFS)
    with pytest.raises(InputError, match=r"^bucket cutoffs \[20, 10\]: each must be larger"):
        length_buckets(hyp, ref, tmp_path / "b.json", cutoffs=[20, 10], lowercase=False)
    assert not (tmp_path / "b.json").exists()


def test_empty_files_are_refused_not_compared(tmp_path: Path) -> None:
    hyp, base, ref = (write(tmp_path / name, []) for name in ("hyp", "base", "ref"))
    with pytest.raises(InputError, match=f"^{ref}, {hyp}, {base} are empty: nothing to compare$"):
        paired_bootstrap(hyp, base, ref, tmp_path / "b.json", samples=10, seed=1,
                         lowercase=False)
    with pytest.raises(InputError, match="are empty: nothing to compare$"):
        length_buckets(hyp, ref, tmp_path / "k.json", cutoffs=[8], lowercase=False)


# --- ROUGE -------------------------------------------------------------------------------------
ROUGE_HYPS = ["the cat sat", "police killed the gunman", "cats are running fast"]
ROUGE_REFS = ["the cat sat on the mat", "police kill the gunman", "the cat runs"]


def test_rouge_matches_rouge_score() -> None:
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    per_sentence = [scorer.score(ref, hyp) for hyp, ref in zip(ROUGE_HYPS, ROUGE_REFS,
                                                               strict=True)]
    expected = {kind: 100 * sum(s[kind].fmeasure for s in per_sentence) / 3
                for kind in ("rouge1", "rouge2", "rougeL")}
    assert rouge(ROUGE_HYPS, ROUGE_REFS) == pytest.approx(expected)


def test_rouge_by_hand() -> None:
    # P = 3/3, R = 3/6: F1 = 2/3; bigrams P = 2/2, R = 2/5: F1 = 4/7; LCS = 3 as unigrams
    assert rouge(["the cat sat"], ["the cat sat on the mat"]) == pytest.approx(
        {"rouge1": 200 / 3, "rouge2": 400 / 7, "rougeL": 200 / 3})
    # Porter stemming: killed/kill match
    assert rouge(["police killed the gunman"], ["police kill the gunman"]) == pytest.approx(
        {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0})


def test_rouge_identical_text_is_100() -> None:
    assert rouge(ROUGE_REFS, ROUGE_REFS) == pytest.approx(
        {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0})


def test_rouge_needs_parallel_lines() -> None:
    with pytest.raises(ValueError, match="hyps=1 refs=2"):
        rouge(["a"], ["a", "b"])


# --- compound splitting (WMT14 En-De's tokenized BLEU) -----------------------------------------
COMPOUND_REFS = [f"der ski-weltcup {w} beginnt in zell-am-see" for w in WORDS]
COMPOUND_A = [f"der ski-weltcup {w} beginnt in zell" for w in WORDS]
COMPOUND_B = [f"der ski-alpin {w} beginnt in zell-am-see" for w in WORDS]


def test_the_bootstrap_splits_compounds_as_the_cell_does(tmp_path: Path) -> None:
    """With `compound_split`, the bootstrap scores exactly the split text the cell's tokenized
    BLEU scores (evaluate.py splits hypothesis and reference before BLEU), and ROUGE, which the
    cell scores unsplit, stays unsplit."""
    paths = {n: write(tmp_path / f"{n}.txt", lines) for n, lines in
             (("ref", COMPOUND_REFS), ("a", COMPOUND_A), ("b", COMPOUND_B))}
    split = {n: write(tmp_path / f"{n}.split.txt",
                      [split_compounds(line) for line in p.read_text().splitlines()])
             for n, p in paths.items()}

    def run(given: dict[str, Path], name: str, compound_split: bool, score: str = "bleu"):
        return paired_bootstrap(given["a"], given["b"], given["ref"], tmp_path / f"{name}.json",
                                samples=100, seed=3, lowercase=False, score=score,
                                compound_split=compound_split)

    splitting, presplit = run(paths, "splitting", True), run(split, "presplit", False)
    assert splitting["compound_split"] is True
    assert splitting["system"] == presplit["system"]
    assert splitting["baseline"] == presplit["baseline"]
    assert splitting["system"] != run(paths, "whole", False)["system"]  # the split matters
    rouge_run = run(paths, "rouge", True, score="rouge1")
    assert rouge_run["compound_split"] is False
    assert rouge_run["system"] == run(paths, "rouge-plain", False, score="rouge1")["system"]


def test_buckets_split_compounds_for_bleu_but_measure_the_output_as_written(
        tmp_path: Path) -> None:
    hyp = write(tmp_path / "hyp.txt", COMPOUND_B)
    ref = write(tmp_path / "ref.txt", COMPOUND_REFS)
    # every output is 6 tokens as written (12 once split): all fall in the bucket below 8
    result = length_buckets(hyp, ref, tmp_path / "b.json", cutoffs=[8], lowercase=False,
                            compound_split=True)
    split_h, split_r = ([split_compounds(x) for x in lines] for lines in (COMPOUND_B,
                                                                           COMPOUND_REFS))
    cell = bleu(split_h, split_r, COMPOUND_B, COMPOUND_REFS, lowercase=False)["tokenized"]
    assert result["buckets"][0]["sentences"] == len(COMPOUND_B)
    assert result["buckets"][0]["bleu"] == pytest.approx(cell)


def test_the_sacrebleu_bootstrap_scores_the_cells_sacrebleu(tmp_path: Path) -> None:
    """A sacreBLEU cell's marks come from resamples of sacreBLEU itself (13a tokens of the
    Moses-detokenized text), a tokenized BLEU cell's from tokenized BLEU: an output that
    differs from its reference in spacing alone is perfect to the one and not the other."""
    refs = [f"i don 't know , {w} said ." for w in WORDS]
    hyps = [f"i don't know , {w} said ." for w in WORDS]
    paths = {n: write(tmp_path / f"{n}.txt", lines) for n, lines in
             (("ref", refs), ("a", hyps), ("b", refs))}
    cell = bleu(hyps, refs, detokenize(hyps, "en"), detokenize(refs, "en"), lowercase=False)
    for score, cell_bleu in (("sacrebleu", cell["sacrebleu"]), ("bleu", cell["tokenized"])):
        result = paired_bootstrap(paths["a"], paths["b"], paths["ref"], tmp_path / "s.json",
                                  samples=20, seed=3, lowercase=False, score=score,
                                  detok_lang="en")
        # every sentence scores alike, so every resample scores the cell's number
        assert result["system"]["mean"] == pytest.approx(cell_bleu), score
    assert cell["sacrebleu"] == pytest.approx(100) and cell["tokenized"] < 70
    assert result["score"] == "bleu" and "detok_lang" not in result

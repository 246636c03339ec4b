"""BLEU against known `multi-bleu.perl` outputs, sacreBLEU signatures, and input errors.

Every expected tokenized BLEU below was printed by Moses `scripts/generic/multi-bleu.perl`
from github.com/moses-smt/mosesdecoder at commit 34452895f350bf097b21ee514a529a1dc542243c
(script blob 4394def3534a249b0268da2bb1f690d488a10176), run with perl 5.36 as
`perl multi-bleu.perl [-lc] ref < hyp` on the fixture texts of this file (each line + "\\n").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from nmtbench.errors import InputError
from nmtbench.evaluation.metrics import bleu, score_files
from nmtbench.fileio import read_lines

REPO = Path(__file__).resolve().parents[2]

REF_MAIN = [
    "The cat sat on the mat .",
    "There is a Cat on the mat , said John .",
    "It is raining in New York today .",
    "we will meet at the station at noon .",
]
HYP_MAIN = [
    "the cat sat on the mat .",
    "there is a cat on the mat , John said .",
    "It rains in new york today .",
    "we will meet at the station in the afternoon .",
]
# No 4-gram of the hypothesis occurs in the reference; 1- to 3-gram precisions are non-zero.
REF_ZERO4 = ["a b c d e f", "g h i j"]
HYP_ZERO4 = ["a b c x d e f", "g h i x j"]
# Every hypothesis n-gram is correct, but 13 hypothesis tokens against 18 reference tokens.
REF_SHORT = [
    "the quick brown fox jumps over the lazy dog",
    "a small house stands near the old river bank",
]
HYP_SHORT = ["the quick brown fox jumps", "a small house stands near the old river"]
REF_EMPTY = [
    "the cat sat on the mat .",
    "it is raining in new york today .",
    "we will meet at the station at noon .",
]
HYP_EMPTY = ["the cat sat on the mat .", "", "we will meet at the station at noon ."]
# multi-bleu.perl splits on runs of whitespace and ignores leading/trailing whitespace.
REF_WS = ["the cat sat on the mat .", "it is raining in new york today ."]
HYP_WS = [" the  cat sat\ton the mat . ", "it is raining  in york"]
# Sentences shorter than 3 tokens: no 3-grams at all, so multi-bleu.perl gives 0.
REF_TINY = ["a b", "c"]
HYP_TINY = ["a b", "c"]

# (hyp, ref, lowercase, multi-bleu.perl output)
MULTI_BLEU_CASES = {
    # BLEU = 100.00, 100.0/100.0/100.0/100.0 (BP=1.000, ratio=1.000, hyp_len=35, ref_len=35)
    "perfect": (REF_MAIN, REF_MAIN, False, 100.00),
    # BLEU = 44.87, 74.3/48.4/37.0/30.4 (BP=1.000, ratio=1.000, hyp_len=35, ref_len=35)
    "case-sensitive": (HYP_MAIN, REF_MAIN, False, 44.87),
    # -lc: BLEU = 71.07, 88.6/71.0/66.7/60.9 (BP=1.000, ratio=1.000, hyp_len=35, ref_len=35)
    "lowercase": (HYP_MAIN, REF_MAIN, True, 71.07),
    # BLEU = 0.00, 83.3/60.0/37.5/0.0 (BP=1.000, ratio=1.200, hyp_len=12, ref_len=10)
    "zero-4gram-precision": (HYP_ZERO4, REF_ZERO4, False, 0.00),
    # BLEU = 68.07, 100.0/100.0/100.0/100.0 (BP=0.681, ratio=0.722, hyp_len=13, ref_len=18)
    "brevity-penalty": (HYP_SHORT, REF_SHORT, False, 68.07),
    # BLEU = 60.65, 100.0/100.0/100.0/100.0 (BP=0.607, ratio=0.667, hyp_len=16, ref_len=24)
    "empty-hypothesis-line": (HYP_EMPTY, REF_EMPTY, False, 60.65),
    # BLEU = 70.10, 100.0/90.0/87.5/83.3 (BP=0.779, ratio=0.800, hyp_len=12, ref_len=15)
    "whitespace-runs": (HYP_WS, REF_WS, False, 70.10),
    # BLEU = 0.00, 100.0/100.0/0.0/0.0 (BP=1.000, ratio=1.000, hyp_len=3, ref_len=3)
    "no-3grams": (HYP_TINY, REF_TINY, False, 0.00),
}


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("case", sorted(MULTI_BLEU_CASES))
def test_tokenized_bleu_equals_multi_bleu_perl(case: str) -> None:
    hyps, refs, lowercase, expected = MULTI_BLEU_CASES[case]
    result = bleu(hyps, refs, hyps, refs, lowercase=lowercase)
    assert result["tokenized"] == pytest.approx(expected, abs=0.006)


def test_lowercase_changes_both_scores() -> None:
    cased = bleu(HYP_MAIN, REF_MAIN, HYP_MAIN, REF_MAIN, lowercase=False)
    lower = bleu(HYP_MAIN, REF_MAIN, HYP_MAIN, REF_MAIN, lowercase=True)
    assert lower["tokenized"] > cased["tokenized"] + 20
    assert lower["sacrebleu"] > cased["sacrebleu"] + 20
    assert "case:mixed" in cased["signature"]
    assert "case:lc" in lower["signature"]


def test_sacrebleu_is_13a_on_the_detokenized_side() -> None:
    hyps_detok = ["The cat sat on the mat.", "It rains in new york today."]
    refs_detok = ["The cat sat on the mat.", "It is raining in New York today."]
    result = bleu(["x"] * 2, ["y"] * 2, hyps_detok, refs_detok, lowercase=False)
    expected = BLEU(tokenize="13a").corpus_score(hyps_detok, [refs_detok]).score
    assert result["sacrebleu"] == pytest.approx(expected)
    assert result["sacrebleu"] > 0
    assert result["tokenized"] == 0.0
    assert "tok:13a" in result["signature"]
    assert "smooth:exp" in result["signature"]
    assert "tok:none" in result["tokenized_signature"]
    assert "smooth:none" in result["tokenized_signature"]


def test_bleu_rejects_unequal_lengths() -> None:
    with pytest.raises(ValueError, match="refs_tok=1"):
        bleu(["a", "b"], ["a"], ["a", "b"], ["a", "b"], lowercase=False)


def test_read_lines_splits_on_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "mixed.txt"
    path.write_bytes("a\rb\n\nc\x0bd\u2028e\nlast".encode())
    assert read_lines(path) == ["a\rb", "", "c\x0bd\u2028e", "last"]
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert read_lines(empty) == []


def test_read_lines_names_file_and_line_of_bad_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"fine\nalso fine\ncaf\xe9\n")
    with pytest.raises(InputError, match=r"latin1\.txt:3: not valid UTF-8"):
        read_lines(path)


def test_score_files_matches_multi_bleu(tmp_path: Path) -> None:
    hyp = write(tmp_path / "hyp.txt", HYP_MAIN)
    ref = write(tmp_path / "ref.txt", REF_MAIN)
    result = score_files(hyp, ref, lowercase=True)
    assert set(result) == {"sacrebleu", "signature", "tokenized", "tokenized_signature", "chrf"}
    assert result["tokenized"] == pytest.approx(71.07, abs=0.006)  # multi-bleu.perl -lc
    assert 0 < result["chrf"]["score"] < 100 and "nc:6|nw:0" in result["chrf"]["signature"]


def test_chrf_of_the_reference_is_100_and_follows_case(tmp_path: Path) -> None:
    ref = write(tmp_path / "ref.txt", REF_MAIN)
    upper = write(tmp_path / "upper.txt", [line.upper() for line in REF_MAIN])
    assert score_files(ref, ref)["chrf"]["score"] == pytest.approx(100)
    assert score_files(upper, ref)["chrf"]["score"] < 50
    assert score_files(upper, ref, lowercase=True)["chrf"]["score"] == pytest.approx(100)


def test_score_files_detokenizes_for_sacrebleu(tmp_path: Path) -> None:
    hyp = write(tmp_path / "hyp.tok", ["it &apos;s a cat .", "he said &quot; hello &quot; ."])
    ref = write(tmp_path / "ref.tok", ["it is a cat .", 'he said &quot; hello &quot; to me .'])
    detok = score_files(hyp, ref, detok_lang="en")
    raw = score_files(hyp, ref)
    # What Moses' English detokenizer makes of the files above, written out by hand.
    hyps_detok = ["it's a cat.", 'he said "hello".']
    refs_detok = ["it is a cat.", 'he said "hello" to me.']
    expected = BLEU().corpus_score(hyps_detok, [refs_detok]).score
    assert detok["sacrebleu"] == pytest.approx(expected)
    assert raw["sacrebleu"] != pytest.approx(expected)
    assert detok["tokenized"] == raw["tokenized"]


def test_score_files_line_count_mismatch_names_both_files(tmp_path: Path) -> None:
    hyp = write(tmp_path / "system.out", ["a b c", "d e f"])
    ref = write(tmp_path / "gold.ref", ["a b c", "d e f", "g h i"])
    with pytest.raises(InputError) as info:
        score_files(hyp, ref)
    message = str(info.value)
    assert "system.out" in message and "gold.ref" in message
    assert "2 lines" in message and "3 lines" in message
    assert "\n" not in message


def test_two_empty_files_are_refused_not_scored(tmp_path: Path) -> None:
    """sacreBLEU fails on an empty corpus with an IndexError deep inside; say it in a line."""
    hyp, ref = write(tmp_path / "hyp.txt", []), write(tmp_path / "ref.txt", [])
    with pytest.raises(InputError, match=f"^{hyp} and {ref} are empty: nothing to score$"):
        score_files(hyp, ref)


def test_every_detokenizer_language_of_the_papers_datasets_is_known() -> None:
    """config/paper.yaml's languages pass the detok_lang check (a list kept by hand)."""
    import yaml

    from nmtbench.workflow.metric_registry import DETOK_LANGS

    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    assert {d["detok_lang"] for d in paper["datasets"].values()} <= set(DETOK_LANGS)


def test_cli_score_prints_one_json_object(tmp_path: Path) -> None:
    hyp = write(tmp_path / "hyp.txt", HYP_MAIN)
    ref = write(tmp_path / "ref.txt", REF_MAIN)
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "nmtbench", "score", "--hyp", str(hyp), "--ref", str(ref),
         "--lowercase"],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": pythonpath},
        timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert isinstance(result, dict)
    assert {"sacrebleu", "signature", "tokenized"} <= set(result)
    assert result["tokenized"] == pytest.approx(71.07, abs=0.006)  # multi-bleu.perl -lc
    assert "case:lc" in result["signature"]


def test_rouge_and_compare_mt_load_nltk_without_scipy_stats():
    """nltk's collocation measures import scipy.stats (half a second of every evaluate and
    bootstrap job) and nothing here calls them: ROUGE and compare-mt load nltk without it,
    and it imports as usual afterwards."""
    code = ("import sys\n"
            "from nmtbench.evaluation import analysis\n"
            "from nmtbench.evaluation.metrics import rouge\n"
            "assert rouge(['a b c'], ['a b d'])['rouge1'] > 0\n"
            "assert 'nltk' in sys.modules and 'scipy.stats' not in sys.modules\n"
            "import scipy.stats\n"
            "assert scipy.stats.fisher_exact([[1, 2], [3, 4]])\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]

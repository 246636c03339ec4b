"""nmtbench.data.preprocess: the Moses/WMT text normalisation steps, against hand-checked
outputs."""

from __future__ import annotations

import pytest

from nmtbench.data.preprocess import (
    clean_pairs,
    drop_empty,
    moses_tokenize,
    normalise_romanian,
    remove_non_printing,
    split_compounds,
    squeeze,
    unescape_moses,
)


@pytest.mark.parametrize(("lang", "line", "expected"), [
    # English: punctuation split off, "n't" kept as "'t" on the next token, no XML escapes,
    # hyphens kept inside words (no -a).
    ("en", 'Hello, I don\'t know "this" | a-b & c.',
     'Hello , I don \'t know " this " | a-b & c .'),
    # non-breaking prefixes and abbreviations keep their periods; "$5.50" splits the currency
    ("en", "Mr. Smith paid $5.50 at 3 p.m. today.",
     "Mr. Smith paid $ 5.50 at 3 p.m. today ."),
    # German: decimal comma and thousands point stay inside numbers, compounds stay whole
    ("de", "Der Preis stieg um 3,5 Prozent auf 1.000 Euro, sagte der Rhein-Main-Verkehrsverbund.",
     "Der Preis stieg um 3,5 Prozent auf 1.000 Euro , sagte der Rhein-Main-Verkehrsverbund ."),
    # German ordinals ("3.") and "z.B." are not sentence ends
    ("de", "z.B. am 3. Mai 2014 kostete es 1.000,50 Euro.",
     "z.B. am 3. Mai 2014 kostete es 1.000,50 Euro ."),
    # French: the apostrophe stays with the elided word on its left
    ("fr", "L'homme a dit : « c'est l'heure ! »",
     "L' homme a dit : « c' est l' heure ! »"),
])
def test_moses_tokenize_fixture_sentences(lang, line, expected):
    """tokenizer.perl -l LANG output, without &apos;/&quot;/&amp;/&#124; escapes."""
    assert moses_tokenize([line], lang) == [expected]


def test_moses_tokenize_keeps_curly_quotes_without_normalisation():
    """Without normalize_punct the quotes pass through the tokenizer unchanged."""
    assert moses_tokenize(["Er sagte \u201eja\u201c und ging."], "de") == [
        "Er sagte \u201e ja \u201c und ging ."]


@pytest.mark.parametrize(("lang", "line", "expected"), [
    # curly quotes -> ", ellipsis -> "...", English moves "..." inside the closing quote, the
    # zero-width space (a format character) becomes a space and disappears in tokenization
    ("en", "He said \u201cyes\u201d\u2026 OK\u200b!", 'He said " yes ... " OK !'),
    # German low-high quotes -> "; the period stays after the quote outside English
    ("de", "Das ist \u201egut\u201c.", 'Das ist " gut " .'),
    # a control character (BEL) splits words like a space
    ("en", "bell\x07ring", "bell ring"),
])
def test_moses_tokenize_normalize_punct(lang, line, expected):
    """normalize-punctuation.perl | remove-non-printing-char.perl | tokenizer.perl."""
    assert moses_tokenize([line], lang, normalize_punct=True) == [expected]


def test_moses_tokenize_parallel_equals_serial_and_keeps_order():
    """Several chunks over two processes give the serial result, line for line in order."""
    lines = [f"Line {i}: it's {i}-th, \"ok\"." for i in range(4500)]
    serial = moses_tokenize(lines, "en", workers=1)
    parallel = moses_tokenize(lines, "en", workers=2)
    assert parallel == serial
    assert len(parallel) == len(lines)
    assert parallel[0] == 'Line 0 : it \'s 0-th , " ok " .'
    assert parallel[2001] == 'Line 2001 : it \'s 2001-th , " ok " .'
    assert parallel[-1] == 'Line 4499 : it \'s 4499-th , " ok " .'
    assert all(out.startswith(f"Line {i} :") for i, out in enumerate(parallel))


def test_moses_tokenize_empty_input():
    assert moses_tokenize([], "en", workers=2) == []


def test_remove_non_printing():
    """Every \\p{C} character (control incl. tab, format, private use) becomes a space."""
    assert remove_non_printing("a\x00b\u200bc\td\u00ade\u200ef\ue000g") == "a b c d e f g"
    assert remove_non_printing("plain ünïcödé") == "plain ünïcödé"


def test_split_compounds():
    """get_ende_bleu.sh's compound splitting: every `X-Y` between non-spaces is split, and
    matches do not overlap."""
    assert split_compounds("Ein Test-Fall und ein 3-4-Spiel") == (
        "Ein Test ##AT##-##AT## Fall und ein 3 ##AT##-##AT## 4-Spiel")
    assert split_compounds("a-b-c") == "a ##AT##-##AT## b-c"
    assert split_compounds("a-b-c-d") == "a ##AT##-##AT## b-c ##AT##-##AT## d"
    # a hyphen next to a space (a dash, a tokenized hyphen) is left alone
    assert split_compounds("a - b -c d-") == "a - b -c d-"


def test_squeeze():
    assert squeeze("  a \t b\u00a0 c  ") == "a b c"
    assert squeeze(" \t ") == ""


def test_clean_pairs_counts_and_order():
    """clean-corpus-n.perl with ratio 1.5, lengths 1..5: kept pairs in order (squeezed), and
    how many were dropped for each reason."""
    pairs = [
        ("a  b\tc", " x y z "),  # kept, whitespace squeezed
        ("", "x"),  # empty
        ("a", "   "),  # empty (blank)
        ("a b c d e f", "x y z w v"),  # length: 6 > 5
        ("a", "x y"),  # ratio 2 > 1.5
        ("a b", "x y z"),  # ratio exactly 1.5: kept
        ("a b c", "x y"),  # ratio exactly 1.5 the other way: kept
        ("a b c d", "x y"),  # ratio 2 > 1.5
        ("a b c d e", "v w x y z"),  # exactly max_len: kept
        ("a b c d e", "v w x y z q"),  # length on the target side
    ]
    src, tgt = [s for s, _ in pairs], [t for _, t in pairs]
    kept_src, kept_tgt, dropped = clean_pairs(src, tgt, ratio=1.5, min_len=1, max_len=5)
    assert kept_src == ["a b c", "a b", "a b c", "a b c d e"]
    assert kept_tgt == ["x y z", "x y z", "x y", "v w x y z"]
    assert dropped == {"empty": 2, "length": 2, "ratio": 2}


def test_clean_pairs_min_len():
    """Sides shorter than min_len are dropped as `length`."""
    kept_src, _, dropped = clean_pairs(["a", "a b"], ["x", "x y"], ratio=9, min_len=2,
                                       max_len=5)
    assert kept_src == ["a b"] and dropped == {"length": 1}


def test_clean_pairs_rejects_unaligned_input():
    with pytest.raises(ValueError):
        clean_pairs(["a", "b"], ["x"], ratio=1.5, min_len=1, max_len=5)


def test_drop_empty():
    """Pairs with a blank side go; the rest are kept unchanged and in order."""
    src = ["a  b", " ", "c", "d", ""]
    tgt = ["x", "y", "\t", "w", ""]
    assert drop_empty(src, tgt) == (["a  b", "d"], ["x", "w"], 3)
    assert drop_empty([], []) == ([], [], 0)


def test_unescape_moses():
    """Moses' escapes are undone."""
    assert unescape_moses("don &apos;t &quot;x&quot; &amp; &#124; &#91; &#93;") == (
        "don 't \"x\" & | [ ]")
    assert unescape_moses("&lt;b&gt;") == "<b>"
    # one level only: an escaped ampersand followed by text stays an entity-looking string
    assert unescape_moses("&amp;amp;") == "&amp;"


def test_normalise_romanian():
    """Cedilla and comma-below S/T and the a/i diacritics all lose their marks."""
    assert normalise_romanian("\u015ei \u0163ar\u0103, \u015fi \u0219 \u021b \u0103 \u00e2 "
                              "\u00ee \u0102 \u00c2 \u00ce") == "Si tara, si s t a a i A A I"
    assert normalise_romanian("\u0218\u021a\u015e\u0162") == "STST"
    assert normalise_romanian("plain ascii") == "plain ascii"

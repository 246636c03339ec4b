"""The toy world: deterministic, big enough, and shaped so translation needs reordering."""

import random
import re

import pytest

from nmtbench.data.toyworld import (
    NOUN_SUFFIX,
    SRC_DEFINITE,
    TGT_DETERMINER,
    ToyWorld,
    WorldConfig,
    distinct_sentences,
    generate,
)
from nmtbench.errors import InputError


@pytest.fixture(scope="module")
def world():
    return ToyWorld(WorldConfig(seed=3))


@pytest.fixture(scope="module")
def pairs(world):
    rng = random.Random(0)
    return [world.sample(rng) for _ in range(3000)]


def test_generation_is_deterministic(tmp_path):
    sizes = dict(train_pairs=50, valid_pairs=10, test_pairs=10, mono_sentences=30)
    generate(tmp_path / "a", WorldConfig(seed=5), **sizes)
    generate(tmp_path / "b", WorldConfig(seed=5), **sizes)
    generate(tmp_path / "c", WorldConfig(seed=6), **sizes)
    for name in ("train.src", "train.tgt", "test.tgt", "mono.src", "mono.tgt"):
        a = (tmp_path / "a" / name).read_text()
        assert a == (tmp_path / "b" / name).read_text()
        assert a != (tmp_path / "c" / name).read_text()


def test_split_sizes_and_no_overlap(tmp_path):
    counts = generate(tmp_path, WorldConfig(), train_pairs=300, valid_pairs=40, test_pairs=40,
                      mono_sentences=200)
    assert counts == {"train": 300, "valid": 40, "test": 40, "mono": 200}
    lines = {name: (tmp_path / name).read_text().splitlines()
             for name in ("train.src", "train.tgt", "valid.src", "test.src", "mono.src",
                          "mono.tgt")}
    assert [len(lines[n]) for n in lines] == [300, 300, 40, 40, 200, 200]
    assert not set(lines["test.src"]) & set(lines["train.src"])
    assert not set(lines["valid.src"]) & set(lines["train.src"])


def test_a_second_test_set_is_disjoint_and_leaves_the_other_splits_as_they_were(tmp_path):
    sizes = dict(train_pairs=300, valid_pairs=40, test_pairs=40, mono_sentences=20)
    counts = generate(tmp_path / "with", WorldConfig(), **sizes, test_official_pairs=30)
    generate(tmp_path / "without", WorldConfig(), **sizes)
    assert counts["test-official"] == 30
    read = {name: set((tmp_path / "with" / f"{name}.src").read_text().splitlines())
            for name in ("train", "valid", "test", "test-official")}
    assert len(read["test-official"]) == 30
    assert not read["test-official"] & (read["train"] | read["valid"] | read["test"])
    for name in ("train.src", "valid.tgt", "test.src", "mono.tgt"):
        assert ((tmp_path / "with" / name).read_text()
                == (tmp_path / "without" / name).read_text())
    assert not (tmp_path / "without" / "test-official.src").exists()


def test_lexicon_has_500_distinct_content_word_pairs(world):
    lexicon = world.lexicon
    assert lexicon.size >= 500
    src = [s for pairs in lexicon.words.values() for s, _ in pairs]
    tgt = [t for pairs in lexicon.words.values() for _, t in pairs]
    assert len(set(src)) == len(src) and len(set(tgt)) == len(tgt)
    assert not set(src) & set(tgt)  # no word can simply be copied across


def test_target_lengths_spread_from_3_to_60(pairs):
    lengths = [len(t.split()) for _, t in pairs]
    assert min(lengths) >= 3 and max(lengths) <= 60
    assert min(lengths) <= 5 and max(lengths) >= 40
    assert sum(length > 25 for length in lengths) > 0.05 * len(lengths)


def test_translation_is_a_function_of_the_source(pairs):
    translations = {}
    for src, tgt in pairs:
        assert translations.setdefault(src, tgt) == tgt


def test_word_order_differs(world, pairs):
    """Source verbs end the clause (before '.'); target verbs follow their subject."""
    verb_stems = {s for kind in ("intransitive", "transitive", "clausal")
                  for s, _ in world.lexicon.words[kind]}
    final_is_verb = sum(any(src.split()[-2].startswith(stem) for stem in verb_stems)
                        for src, _ in pairs)
    assert final_is_verb == len(pairs)
    tgt_verbs = {t for kind in ("intransitive", "transitive", "clausal")
                 for _, t in world.lexicon.words[kind]}
    final_tgt_verb = sum(re.sub("[zd]$", "", tgt.split()[-2]) in tgt_verbs for _, tgt in pairs)
    assert final_tgt_verb < 0.5 * len(pairs)


def test_source_marks_case_and_target_agrees(world):
    """OSV and SOV sources with the same meaning give the same target; case decides roles."""
    rng = random.Random(1)
    seen_osv = 0
    for _ in range(500):
        clause = world._clause(rng, 0)
        if clause.verb_kind != "transitive" or clause.subject is None:
            continue
        clause.osv = False
        sov_src, tgt = world._src_clause(clause), world._tgt_clause(clause)
        clause.osv = True
        osv_src = world._src_clause(clause)
        assert world._tgt_clause(clause) == tgt
        subject_word = world.lexicon.words["noun"][clause.subject.noun][0]
        nominative = subject_word + NOUN_SUFFIX[(clause.subject.number, "nom")]
        assert nominative in sov_src and nominative in osv_src
        seen_osv += sov_src != osv_src
    assert seen_osv > 20


def test_definiteness_and_number_are_marked_on_both_sides(pairs):
    plural_suffixes = {v for (number, _), v in NOUN_SUFFIX.items() if number == "pl"}
    assert any(SRC_DEFINITE in src.split() for src, _ in pairs)
    assert any(TGT_DETERMINER[("def", "sg")] in tgt.split() for _, tgt in pairs)
    assert any(any(w.endswith(tuple(plural_suffixes)) for w in src.split()) for src, _ in pairs)


def test_the_summarisation_task_pairs_a_sentence_with_its_core():
    """Toy Gigaword: the same meaning tree as translation's target, and its headline: the
    words it keeps come in the sentence's order, without determiners or modifiers."""
    translate, summarise = (ToyWorld(WorldConfig(seed=3, task=task))
                            for task in ("translate", "summarise"))
    rng_t, rng_s = random.Random(0), random.Random(0)
    shorter = 0
    for _ in range(500):
        sentence, headline = summarise.sample(rng_s)
        assert sentence == translate.sample(rng_t)[1]  # the translation task's target
        words, kept = sentence.split(), headline.split()
        assert kept and not set(kept) & {*TGT_DETERMINER.values(), "whic", "."}
        position = 0
        for word in kept:  # a subsequence of the sentence
            position = words.index(word, position) + 1
        shorter += len(kept) < len(words) - 1
    assert shorter > 400
    with pytest.raises(InputError, match="key 'task'"):
        WorldConfig(task="parse")


def test_a_world_larger_than_a_toy_world_holds_is_refused_before_a_draw(tmp_path):
    """Generated in one process's memory, a world of a billion pairs would run for a day and
    run out of memory: refused naming the key of its largest split, before any is drawn."""
    with pytest.raises(InputError, match=r"^key 'train_pairs': the world's splits would hold "
                                         r"1,000,000,003 sentences, more than the 10,000,000"):
        generate(tmp_path / "w", WorldConfig(), train_pairs=10**9, valid_pairs=1, test_pairs=1,
                 mono_sentences=1)
    assert not (tmp_path / "w").exists()


# a world of 40 distinct sentences: two nouns, two adjectives, one verb of each kind, no
# clause or phrase inside another, no adverb, and at most 4 target tokens
SMALL_WORLD = WorldConfig(max_target_tokens=4, nouns=2, adjectives=2, intransitive_verbs=1,
                          transitive_verbs=1, clausal_verbs=1, adverbs=1, p_relative=0,
                          p_complement=0, p_pp=0, p_adverb=0)


def test_the_distinct_sentences_a_world_makes_are_counted_before_a_draw():
    """The count is of the trees the sampler can draw in the length range: all of them, and
    no more, are found by drawing (here and on worlds with phrases inside phrases)."""
    rng = random.Random(0)
    drawn = {ToyWorld(SMALL_WORLD).sample(rng)[0] for _ in range(4000)}
    assert distinct_sentences(SMALL_WORLD, cap=10**6) == len(drawn) == 40
    assert distinct_sentences(WorldConfig(), cap=10**6) == 10**6  # counted up to the cap


def test_a_world_too_small_for_its_splits_is_refused_before_a_draw(tmp_path):
    """Found after 10,000 draws in a row of sentences already drawn otherwise (and at planning
    now): refused naming the first split the world's sentences cannot fill."""
    with pytest.raises(InputError, match=r"^key 'test_pairs': the world makes at most 40 "
                                         r"distinct sentences of 3 to 4 target tokens, too few "
                                         r"for 41 pairs \(train, valid and test, which share no "
                                         r"sentence\)"):
        generate(tmp_path / "w", SMALL_WORLD, train_pairs=30, valid_pairs=10, test_pairs=1,
                 mono_sentences=1)
    assert not (tmp_path / "w").exists()
    assert generate(tmp_path / "w", SMALL_WORLD, train_pairs=30, valid_pairs=5, test_pairs=5,
                    mono_sentences=1)["test"] == 5

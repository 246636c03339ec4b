"""The toy world: a synthetic language pair generated deterministically from a seed.

It mirrors the papers' setting (little parallel data, much monolingual data) at laptop scale, and
makes translation need what real translation needs:

- *reordering*: the source is verb-final (SOV, subordinate clauses verb-final, relative clauses
  before their noun, adjectives after their noun, postpositions); the target is SVO with
  adjectives before the noun, prepositions and relative clauses after their noun;
- *morphology and agreement*: source nouns carry number + case suffixes, adjectives agree with
  their noun, verbs carry tense and subject-number suffixes; the source may put the object first
  (OSV), so only case marks who does what; target verbs agree with their subject in number,
  and a relative-clause verb agrees with a head noun that the source places *after* it;
- *length spread*: recursive complement and relative clauses give targets of about 3 to 60 tokens.

The target is a deterministic function of the source (the source marks every feature the target
expresses), so 100 BLEU is attainable. Both sides are rendered from one meaning tree.

With `task: summarise` the world stands in for headline generation (Gigaword): a pair is a
target-language sentence and its headline, the same meaning tree cut to its core (each clause's
subject and object nouns and its verb, and a complement clause's core after "thet"; no
determiners, adjectives, relative clauses, prepositional phrases or adverbs).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from nmtbench.errors import InputError
from nmtbench.fileio import write_lines

# Source suffixes (one syllable each, so WordPiece can find them): number x case on nouns and
# adjectives, tense x subject number on verbs, tense on relative-clause verbs.
NOUN_SUFFIX = {
    ("sg", "nom"): "ra", ("pl", "nom"): "ri",
    ("sg", "acc"): "ko", ("pl", "acc"): "ki",
    ("sg", "obl"): "mu", ("pl", "obl"): "mi",
}
VERB_SUFFIX = {("pres", "sg"): "ta", ("pres", "pl"): "te",
               ("past", "sg"): "sa", ("past", "pl"): "se"}
REL_SUFFIX = {"pres": "nu", "past": "no"}
SRC_DEFINITE = "ze"  # particle after a definite noun phrase
SRC_COMPLEMENTIZER = "ke"  # after a verb-final complement clause

TGT_DETERMINER = {("def", "sg"): "tha", ("def", "pl"): "tha",
                  ("indef", "sg"): "ay", ("indef", "pl"): "sum"}
TGT_RELATIVE = "whic"
TGT_COMPLEMENTIZER = "thet"

# Spatial relations: target preposition / source postposition (function words, not lexicon).
RELATIONS = [("ina", "dalo"), ("ona", "pemu"), ("nir", "gosi"), ("undr", "valu"),
             ("wid", "nosa"), ("fro", "tiki"), ("tow", "bure"), ("behin", "somi")]

SRC_SYLLABLES = [c + v for c in "bdfgklmnpstvz" for v in "aeiou"]
TGT_SYLLABLES = [c + v for c in ["b", "ch", "d", "f", "g", "h", "j", "l", "m", "n", "p", "r",
                                 "sh", "t", "w", "y"] for v in ["a", "e", "i", "o", "oo", "ai"]]

CATEGORIES = ("noun", "adjective", "intransitive", "transitive", "clausal", "adverb")
TASKS = ("translate", "summarise")


@dataclass(frozen=True)
class WorldConfig:
    """Sizes and probabilities of the toy world; the defaults give about 520 content-word pairs."""

    seed: int = 1
    nouns: int = 220
    adjectives: int = 100
    intransitive_verbs: int = 60
    transitive_verbs: int = 100
    clausal_verbs: int = 10
    adverbs: int = 30
    max_target_tokens: int = 60
    min_target_tokens: int = 3
    p_relative: float = 0.3
    p_complement: float = 0.35
    p_pp: float = 0.35
    p_adverb: float = 0.2
    p_osv: float = 0.3
    depth_decay: float = 0.82
    task: str = "translate"  # or "summarise": a target-language sentence -> its headline

    def __post_init__(self) -> None:
        # types and ranges: config/schema.yaml's datasets.*.world
        # (nmtbench.workflow.config.check_world)
        if self.task not in TASKS:
            raise InputError(f"key 'task': {self.task!r}; known: {', '.join(TASKS)}")
        if self.min_target_tokens > self.max_target_tokens:
            raise InputError(f"key 'min_target_tokens': {self.min_target_tokens} is more than "
                             f"max_target_tokens ({self.max_target_tokens})")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> WorldConfig:
        """The world of these settings, checked: an unknown key, a value of the wrong type or
        out of range is an InputError naming the key."""
        known = [f.name for f in fields(cls)]
        if unknown := sorted(set(values) - set(known)):
            raise InputError(f"unknown key {unknown[0]!r}; known: {', '.join(known)}")
        return cls(**values)


# Draws in a row that may fail (a sentence of the wrong length, or one already drawn) before
# the world is taken to be unable to make what was asked (instead of drawing for ever)
MAX_FAILED_DRAWS = 10_000


@dataclass
class NounPhrase:
    noun: int
    number: str
    definite: bool
    adjectives: list[int]
    relative: Clause | None = None  # subject relative clause ("that sees the cat")
    pp: tuple[int, NounPhrase] | None = None  # (relation, noun phrase)


@dataclass
class Clause:
    verb_kind: str  # intransitive | transitive | clausal
    verb: int
    tense: str
    subject: NounPhrase | None  # None inside a relative clause (the head noun is the subject)
    obj: NounPhrase | None = None
    complement: Clause | None = None
    adverb: int | None = None
    pp: tuple[int, NounPhrase] | None = None
    osv: bool = False


@dataclass
class Lexicon:
    """Content-word pairs per category: (source stem, target word)."""

    words: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(len(v) for v in self.words.values())


def make_lexicon(cfg: WorldConfig) -> Lexicon:
    """Draw distinct source stems and target words for every content word."""
    rng = random.Random(f"lexicon-{cfg.seed}")
    sizes = (cfg.nouns, cfg.adjectives, cfg.intransitive_verbs, cfg.transitive_verbs,
             cfg.clausal_verbs, cfg.adverbs)
    counts = dict(zip(CATEGORIES, sizes, strict=True))
    reserved = set(NOUN_SUFFIX.values()) | set(VERB_SUFFIX.values()) | set(REL_SUFFIX.values())
    reserved |= {SRC_DEFINITE, SRC_COMPLEMENTIZER, TGT_RELATIVE, TGT_COMPLEMENTIZER}
    reserved |= set(TGT_DETERMINER.values()) | {w for pair in RELATIONS for w in pair}
    used = set(reserved)  # one set for both sides, so that no word can be copied across
    lexicon = Lexicon()
    for category, n in counts.items():
        pairs = []
        for _ in range(n):
            src = _fresh_word(rng, SRC_SYLLABLES, used, 2, 3)
            tgt = _fresh_word(rng, TGT_SYLLABLES, used, 1, 3)
            pairs.append((src, tgt))
        lexicon.words[category] = pairs
    return lexicon


def _fresh_word(rng: random.Random, syllables: list[str], used: set[str], lo: int, hi: int) -> str:
    # Target words may not end in "s"/"d": those letters are the plural and past endings.
    while True:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(lo, hi)))
        forms = {word, word + "s", word + "d", word + "z"}
        if not forms & used:
            used.update(forms)
            return word


class ToyWorld:
    """Samples meaning trees and renders them as (source, target) sentences."""

    def __init__(self, cfg: WorldConfig):
        self.cfg = cfg
        self.lexicon = make_lexicon(cfg)

    # --- sampling meanings -------------------------------------------------------------------
    def _noun_phrase(self, rng: random.Random, depth: int) -> NounPhrase:
        cfg = self.cfg
        decay = cfg.depth_decay ** depth
        n_adj = rng.choices([0, 1, 2], weights=[0.55, 0.35, 0.10])[0]
        np_ = NounPhrase(
            noun=rng.randrange(cfg.nouns),
            number=rng.choice(["sg", "pl"]),
            definite=rng.random() < 0.6,
            adjectives=rng.sample(range(cfg.adjectives), n_adj),
        )
        if rng.random() < cfg.p_relative * decay:
            np_.relative = self._clause(rng, depth + 1, relative=True)
        elif rng.random() < cfg.p_pp * decay:
            np_.pp = (rng.randrange(len(RELATIONS)), self._noun_phrase(rng, depth + 1))
        return np_

    def _clause(self, rng: random.Random, depth: int, relative: bool = False) -> Clause:
        cfg = self.cfg
        decay = cfg.depth_decay ** depth
        kinds = ["intransitive", "transitive", "clausal"]
        weights = [0.35, 0.5, cfg.p_complement * decay if not relative else 0.0]
        kind = rng.choices(kinds, weights=weights)[0]
        n_verbs = {"intransitive": cfg.intransitive_verbs, "transitive": cfg.transitive_verbs,
                   "clausal": cfg.clausal_verbs}[kind]
        clause = Clause(
            verb_kind=kind,
            verb=rng.randrange(n_verbs),
            tense=rng.choice(["pres", "past"]),
            subject=None if relative else self._noun_phrase(rng, depth + 1),
        )
        if kind == "transitive":
            clause.obj = self._noun_phrase(rng, depth + 1)
            clause.osv = not relative and rng.random() < cfg.p_osv
        if kind == "clausal":
            clause.complement = self._clause(rng, depth + 1)
        if not relative and rng.random() < cfg.p_adverb:
            clause.adverb = rng.randrange(cfg.adverbs)
        if not relative and rng.random() < cfg.p_pp * decay:
            clause.pp = (rng.randrange(len(RELATIONS)), self._noun_phrase(rng, depth + 1))
        return clause

    # --- rendering the target (SVO) ----------------------------------------------------------
    def _tgt_np(self, np_: NounPhrase) -> list[str]:
        words = self.lexicon.words
        out = [] if (not np_.definite and np_.number == "pl") else [
            TGT_DETERMINER[("def" if np_.definite else "indef", np_.number)]]
        out += [words["adjective"][a][1] for a in np_.adjectives]
        noun = words["noun"][np_.noun][1]
        out.append(noun + "s" if np_.number == "pl" else noun)
        if np_.relative is not None:
            out += [TGT_RELATIVE] + self._tgt_clause(np_.relative, head_number=np_.number)
        if np_.pp is not None:
            out += self._tgt_pp(np_.pp)
        return out

    def _tgt_pp(self, pp: tuple[int, NounPhrase]) -> list[str]:
        return [RELATIONS[pp[0]][0]] + self._tgt_np(pp[1])

    def _tgt_verb(self, clause: Clause, number: str) -> str:
        stem = self.lexicon.words[clause.verb_kind][clause.verb][1]
        if clause.tense == "past":
            return stem + "d"
        return stem + "z" if number == "sg" else stem

    def _tgt_clause(self, clause: Clause, head_number: str | None = None) -> list[str]:
        number = head_number if clause.subject is None else clause.subject.number
        out = [] if clause.subject is None else self._tgt_np(clause.subject)
        out.append(self._tgt_verb(clause, number))
        if clause.obj is not None:
            out += self._tgt_np(clause.obj)
        if clause.complement is not None:
            out += [TGT_COMPLEMENTIZER] + self._tgt_clause(clause.complement)
        if clause.pp is not None:
            out += self._tgt_pp(clause.pp)
        if clause.adverb is not None:
            out.append(self.lexicon.words["adverb"][clause.adverb][1])
        return out

    def _tgt_headline(self, clause: Clause, head_number: str | None = None) -> list[str]:
        """The clause's core: bare subject and object nouns, the verb, a complement's core."""
        def noun(np_: NounPhrase) -> str:
            word = self.lexicon.words["noun"][np_.noun][1]
            return word + "s" if np_.number == "pl" else word

        number = head_number if clause.subject is None else clause.subject.number
        out = [] if clause.subject is None else [noun(clause.subject)]
        out.append(self._tgt_verb(clause, number))
        if clause.obj is not None:
            out.append(noun(clause.obj))
        if clause.complement is not None:
            out += [TGT_COMPLEMENTIZER] + self._tgt_headline(clause.complement)
        return out

    # --- rendering the source (verb-final, case-marked) --------------------------------------
    def _src_np(self, np_: NounPhrase, case: str) -> list[str]:
        words = self.lexicon.words
        suffix = NOUN_SUFFIX[(np_.number, case)]
        out = []
        if np_.pp is not None:
            out += self._src_pp(np_.pp)
        if np_.relative is not None:
            out += self._src_clause(np_.relative)
        out.append(words["noun"][np_.noun][0] + suffix)
        out += [words["adjective"][a][0] + suffix for a in reversed(np_.adjectives)]
        if np_.definite:
            out.append(SRC_DEFINITE)
        return out

    def _src_pp(self, pp: tuple[int, NounPhrase]) -> list[str]:
        return self._src_np(pp[1], "obl") + [RELATIONS[pp[0]][1]]

    def _src_clause(self, clause: Clause) -> list[str]:
        words = self.lexicon.words
        out: list[str] = []
        if clause.adverb is not None:
            out.append(words["adverb"][clause.adverb][0])
        args = []
        if clause.subject is not None:
            args.append(self._src_np(clause.subject, "nom"))
        if clause.obj is not None:
            args.append(self._src_np(clause.obj, "acc"))
        if clause.osv:
            args.reverse()
        for arg in args:
            out += arg
        if clause.pp is not None:
            out += self._src_pp(clause.pp)
        if clause.complement is not None:
            out += self._src_clause(clause.complement) + [SRC_COMPLEMENTIZER]
        stem = words[clause.verb_kind][clause.verb][0]
        if clause.subject is None:
            out.append(stem + REL_SUFFIX[clause.tense])
        else:
            out.append(stem + VERB_SUFFIX[(clause.tense, clause.subject.number)])
        return out

    # --- sentences ---------------------------------------------------------------------------
    def sample(self, rng: random.Random) -> tuple[str, str]:
        """One (source, target) sentence pair within the configured target-length range (of
        the full sentence, with `task: summarise` the source)."""
        cfg = self.cfg
        for _ in range(MAX_FAILED_DRAWS):
            try:
                clause = self._clause(rng, 0)
                tgt = self._tgt_clause(clause) + ["."]
            except RecursionError:  # a tree hundreds of levels deep: far too long anyway
                continue
            if cfg.min_target_tokens <= len(tgt) <= cfg.max_target_tokens:
                if cfg.task == "summarise":
                    return " ".join(tgt), " ".join(self._tgt_headline(clause))
                return " ".join(self._src_clause(clause) + ["."]), " ".join(tgt)
        raise InputError(f"keys 'min_target_tokens', 'max_target_tokens': no sentence of "
                         f"{cfg.min_target_tokens} to {cfg.max_target_tokens} target tokens in "
                         f"{MAX_FAILED_DRAWS} draws")


SPLITS = ("train", "valid", "test", "mono")


# The sentences a toy world may hold in all: its generator keeps every pair's source (each
# split is drawn apart from the others) and a split's pairs in one process's memory, about
# 450 bytes a pair, and draws some 20,000 pairs a second: 10 million is 4 to 5 GB and about
# ten minutes, twice WMT14 En-De's training pairs. More is refused before any is drawn, and
# at planning (nmtbench.workflow.config), not by a job that runs out of memory hours in.
MAX_SENTENCES = 10_000_000


def check_sizes(train_pairs: int, valid_pairs: int, test_pairs: int, mono_sentences: int,
                test_official_pairs: int = 0) -> None:
    """The split sizes together within MAX_SENTENCES; else an InputError naming the key of
    the largest."""
    sizes = {"train_pairs": train_pairs, "valid_pairs": valid_pairs, "test_pairs": test_pairs,
             "test_official_pairs": test_official_pairs, "mono_sentences": mono_sentences}
    if (total := sum(sizes.values())) > MAX_SENTENCES:
        key = max(sizes, key=sizes.__getitem__)
        raise InputError(f"key '{key}': the world's splits would hold {total:,} sentences, "
                         f"more than the {MAX_SENTENCES:,} a toy world is generated with (in "
                         "one process's memory, about 450 bytes a pair); ask for fewer, or "
                         "use real data")


def _options(q: float) -> tuple[int, int]:
    """Whether a draw `rng.random() < q` can come out false, and true: (no, yes) as 0 or 1."""
    return int(q < 1), int(q > 0)


def _noun_phrase_heads(cfg: WorldConfig) -> list[int]:
    """A noun phrase's heads (determiner, adjectives, noun) by length; no determiner for an
    indefinite plural (1 of the 4 number x definiteness choices)."""
    n_adj, head = cfg.adjectives, [0] * 5
    for det, ways in ((0, 1), (1, 3)):
        for adjectives, choices in ((0, 1), (1, n_adj), (2, n_adj * (n_adj - 1))):
            head[det + adjectives + 1] += ways * choices * cfg.nouns
    return head


def distinct_sentences(cfg: WorldConfig, cap: int, max_length: int = 400) -> int:
    """At most how many distinct sentences the world can draw, counted up to `cap`: its meaning
    trees whose target falls in the length range (distinct sentences render distinct trees).
    Counted by target length, as the sampler draws them: a branch of probability 0 is never
    taken and one of probability 1 always. A range reaching past `max_length` tokens, which
    this does not count, gives `cap` (not known to be too few)."""
    if cfg.max_target_tokens > max_length:
        return cap
    top = cfg.max_target_tokens - 1  # the clause's tokens, without the final "."
    if top < 1:
        return 0
    deep = cfg.depth_decay  # each p at depth >= 1: p * decay**depth is 0, in (0, 1) or 1 alike
    head = _noun_phrase_heads(cfg)
    rel_no, rel_yes = _options(cfg.p_relative * deep)
    pp_no, pp_yes = _options(cfg.p_pp * deep)
    osv = sum(_options(cfg.p_osv))
    adv_no, adv_yes = _options(cfg.p_adverb)
    verbs = {kind: 2 * n for kind, n in (("i", cfg.intransitive_verbs),
                                         ("t", cfg.transitive_verbs), ("c", cfg.clausal_verbs))}
    size, relations = top + 1, len(RELATIONS)
    clip = functools.partial(min, cap)
    # deep (depth >= 1) arrays by target length: noun phrase, relative clause, clause
    np_, rel, kinds, subj_kinds, with_adv, clause = ([0] * size for _ in range(6))
    cl_ok = cfg.p_complement * deep > 0

    def step(length: int, kinds: list[int], subj_kinds: list[int], with_adv: list[int],
             clause: list[int], cl: bool, p_no: int, p_yes: int) -> None:
        # verb (1 token) with an object (transitive) or "thet" and a complement (clausal)
        value = verbs["i"] if length == 1 else 0
        value += verbs["t"] * osv * np_[length - 1] if length >= 2 else 0
        value += verbs["c"] * clause_deep[length - 2] if cl and length >= 3 else 0
        kinds[length] = clip(value)
        subj_kinds[length] = clip(sum(np_[i] * kinds[length - i] for i in range(1, length)))
        with_adv[length] = clip(adv_no * subj_kinds[length]
                                + adv_yes * cfg.adverbs * subj_kinds[length - 1])
        # a prepositional phrase: one of the relations and a noun phrase
        clause[length] = clip(p_no * with_adv[length] + p_yes * relations * sum(
            np_[j - 1] * with_adv[length - j] for j in range(2, length)))

    clause_deep = clause
    for length in range(1, size):
        # noun phrase: head, then a relative clause ("whic" + clause) or a prepositional
        # phrase or neither
        np_[length] = clip(sum(
            head[h] * ((rel_no * pp_no if length == h else 0)
                       + (rel_yes * rel[length - h - 1] if length - h >= 2 else 0)
                       + (rel_no * pp_yes * relations * np_[length - h - 1] if length - h >= 2
                          else 0))
            for h in range(1, min(5, length + 1))))
        # relative clause: its verb, and an object if transitive (no subject, adverb, pp)
        rel[length] = clip((verbs["i"] if length == 1 else 0)
                           + (verbs["t"] * np_[length - 1] if length >= 2 else 0))
        step(length, kinds, subj_kinds, with_adv, clause, cl_ok, pp_no, pp_yes)
    # the sentence's own clause, at depth 0 (decay**0: the settings' own probabilities)
    top_arrays = [[0] * size for _ in range(4)]
    top_no, top_yes = _options(cfg.p_pp)
    for length in range(1, size):
        step(length, *top_arrays, cfg.p_complement > 0, top_no, top_yes)
    return clip(sum(top_arrays[3][length - 1]
                    for length in range(max(cfg.min_target_tokens, 2), top + 2)))


def check_distinct(cfg: WorldConfig, train_pairs: int, valid_pairs: int, test_pairs: int,
                   test_official_pairs: int = 0) -> None:
    """The world's pairs (its splits never share a source sentence) within the distinct
    sentences it can make (`distinct_sentences`); else an InputError naming the key of the
    first split that could not be filled."""
    asked = 0
    sizes = (("train", train_pairs), ("valid", valid_pairs), ("test", test_pairs),
             ("test-official", test_official_pairs))
    total = sum(n for _, n in sizes)
    if (made := distinct_sentences(cfg, total)) >= total:
        return
    for i, (split, n) in enumerate(sizes):
        asked += n
        if asked > made:
            splits = [name for name, _ in sizes[:i + 1]]
            which = (f"{', '.join(splits[:-1])} and {splits[-1]}, which share no sentence"
                     if i else split)
            raise InputError(f"key '{size_key(split)}': the world makes at most {made:,} "
                             f"distinct sentences of {cfg.min_target_tokens} to "
                             f"{cfg.max_target_tokens} target tokens, too few for {asked:,} "
                             f"pairs ({which}); give it more words, a wider length range "
                             "or ask for fewer pairs")


def size_key(split: str) -> str:
    """The world's setting that sizes `split` (test-official: test_official_pairs)."""
    return f"{split.replace('-', '_')}_pairs"


def generate(out_dir: str | Path, cfg: WorldConfig, train_pairs: int, valid_pairs: int,
             test_pairs: int, mono_sentences: int, test_official_pairs: int = 0
             ) -> dict[str, int]:
    """Write train/valid/test.{src,tgt} and mono.{src,tgt} under out_dir, and
    test-official.{src,tgt} when `test_official_pairs` > 0 (a second test set, standing in
    for one a paper reports on beside its own test sample: Gigaword's official test set);
    return line counts.

    Each split draws from its own seeded stream, so changing one size leaves the others intact;
    pairs seen in an earlier split are redrawn so that valid and the test sets never overlap
    training data or each other. Monolingual corpora are independent samples on each side (not
    translations of each other). More pairs than the world can make (more than
    `check_distinct` counts, before a draw, or than its draws find), or more sentences than
    `check_sizes` lets it hold, is an InputError naming the key.
    """
    check_sizes(train_pairs, valid_pairs, test_pairs, mono_sentences, test_official_pairs)
    check_distinct(cfg, train_pairs, valid_pairs, test_pairs, test_official_pairs)
    world = ToyWorld(cfg)
    out = Path(out_dir)
    seen: set[str] = set()
    counts = {}
    sizes = [("train", train_pairs), ("valid", valid_pairs), ("test", test_pairs)]
    sizes += [("test-official", test_official_pairs)] if test_official_pairs else []
    for split, n in sizes:
        rng = random.Random(f"{split}-{cfg.seed}")
        src_lines, tgt_lines = [], []
        repeats = 0  # draws in a row that gave a sentence already drawn
        while len(src_lines) < n:
            src, tgt = world.sample(rng)
            if src in seen:
                repeats += 1
                if repeats == MAX_FAILED_DRAWS:
                    raise InputError(f"key '{size_key(split)}': the world makes "
                                     f"too few distinct sentences for {n} {split} pairs "
                                     f"({len(seen)} distinct ones drawn so far); give it more "
                                     "words or ask for fewer pairs")
                continue
            repeats = 0
            seen.add(src)
            src_lines.append(src)
            tgt_lines.append(tgt)
        write_lines(out / f"{split}.src", src_lines)
        write_lines(out / f"{split}.tgt", tgt_lines)
        counts[split] = n
    for side, index in (("src", 0), ("tgt", 1)):
        rng = random.Random(f"mono-{side}-{cfg.seed}")
        write_lines(out / f"mono.{side}", [world.sample(rng)[index] for _ in range(mono_sentences)])
    counts["mono"] = mono_sentences
    return counts

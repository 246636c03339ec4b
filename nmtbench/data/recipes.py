"""How each real dataset is made from its releases, as the papers (and the scripts they cite) did.

A recipe names the downloaded parts that make each split and the processing each side gets; the
URLs and pinned checksums of those downloads live in config (`sources`), so a mirror is one
config change. `prepare` runs a recipe and writes `train/valid/test.{src,tgt}` (and
`test-official.{src,tgt}` where the recipe has one) with a manifest
(line count and SHA-256 of every split, the filter counts, the checksums of the inputs).

Choices the papers leave open, made here:
- Moses tokenization without `-a` (BERT's WordPiece splits hyphens itself); WMT14 En-De's
  tokenized BLEU then splits compounds at scoring time (`compound_split`), as the papers did.
- IWSLT14 pairs other than De-En have no fairseq script: valid = dev2010, test =
  tst2010+tst2011+tst2012 (the official TED sets of the 2014 release), cleaned as De-En.
- Gigaword: C-MLM's 5k dev / 5k test-dev are drawn without overlap from the official
  validation set with seed 1 (the paper gives no seed).
- WMT18 En-Zh: only the corpora on statmt.org (News Commentary v13); CTNMT also used the UN and
  CWMT corpora, which need registration, so its En-Zh numbers are not comparable yet.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nmtbench.data import preprocess
from nmtbench.data.casing import lowercased_sides
from nmtbench.data.corpora import Part, read_parallel_parts
from nmtbench.errors import InputError
from nmtbench.fileio import atomic_directory
from nmtbench.provenance import file_digest

log = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")
# made only where the recipe has parts for it: a second test set a paper reports on beside its
# own test sample (Gigaword's official test set, beside C-MLM's test-dev sample)
OPTIONAL_SPLITS = ("test-official",)
DOWNLOADS_DIR = "data/downloads"
Pieces = list[tuple[Part, Part]]


@dataclass(frozen=True)
class Recipe:
    """The parts of each split (concatenated in order) and what each side goes through."""

    splits: dict[str, Pieces]
    tokenize: bool = True  # Moses tokenizer (False: the release is tokenized already)
    normalize_punct: bool = False  # the WMT scripts' normalize-punctuation + non-printing
    unescape: bool = False  # the release carries Moses escapes (&apos; ...)
    lowercase: bool = False  # where no cased checkpoint reads the side (nmtbench.data.casing)
    clean: dict[str, float] | None = None  # clean-corpus-n.perl on train: ratio, min/max_len
    transforms: dict[str, Callable[[str], str]] = field(default_factory=dict)  # per language
    carve: Callable[[dict[str, tuple[list[str], list[str]]]], dict[str, Any]] | None = None

    def parts(self) -> list[Part]:
        return [p for pieces in self.splits.values() for pair in pieces for p in pair]


def _pair(spec: dict[str, Any]) -> tuple[str, str]:
    return spec["src_lang"], spec["tgt_lang"]


def _other(spec: dict[str, Any]) -> str:
    """The non-English language of an X-En pair, in either direction."""
    src, tgt = _pair(spec)
    if "en" not in (src, tgt) or src == tgt:
        raise InputError(f"language pair {src}-{tgt}: this release pairs a language with English")
    return tgt if src == "en" else src


def _oriented(spec: dict[str, Any], make: Callable[[str], Part]) -> tuple[Part, Part]:
    src, tgt = _pair(spec)
    return make(src), make(tgt)


def _every_nth_to_valid(n: int):
    """prepare-iwslt14.sh: every n-th line of the cleaned training data is the valid set."""
    def carve(splits):
        src, tgt = splits["train"]
        held = [i for i in range(len(src)) if (i + 1) % n == 0]
        kept = [i for i in range(len(src)) if (i + 1) % n != 0]
        splits["valid"] = ([src[i] for i in held], [tgt[i] for i in held])
        splits["train"] = ([src[i] for i in kept], [tgt[i] for i in kept])
        return {"valid": f"every {n}th training pair"}
    return carve


def _sample_dev_and_testdev(size: int, seed: int):
    """C-MLM's Gigaword split: disjoint dev and test-dev samples of the official valid set."""
    def carve(splits):
        src, tgt = splits["valid"]
        if len(src) < 2 * size:
            raise InputError(f"gigaword: the validation set has {len(src)} pairs, fewer than "
                             f"the {2 * size} the dev/test-dev split needs")
        picked = random.Random(seed).sample(range(len(src)), 2 * size)
        dev, testdev = sorted(picked[:size]), sorted(picked[size:])
        splits["valid"] = ([src[i] for i in dev], [tgt[i] for i in dev])
        splits["test"] = ([src[i] for i in testdev], [tgt[i] for i in testdev])
        return {"valid": f"{size} sampled from the validation set (seed {seed})",
                "test": f"{size} others sampled from the validation set (seed {seed})"}
    return carve


def iwslt14(spec: dict[str, Any]) -> Recipe:
    """fairseq's prepare-iwslt14.sh: TED tags/XML, Moses tokenizer, clean 1.5/1/175, lowercase;
    De-En: valid = every 23rd training pair, test = dev2010 + TEDX.dev2012 + tst2010-2012."""
    x = _other(spec)
    source, file = ("fairseq", "iwslt14/de-en.tgz") if x == "de" else ("wit3",
                                                                       f"{x}/en/{x}-en.tgz")
    lang_pair = f"{x}-en"

    def xml(name):
        return _oriented(spec, lambda lang: Part(source, file, f"{lang_pair}/IWSLT14.{name}."
                                                 f"{lang_pair}.{lang}.xml", "iwslt-xml"))

    train = _oriented(spec, lambda lang: Part(source, file,
                                              f"{lang_pair}/train.tags.{lang_pair}.{lang}",
                                              "iwslt-tags"))
    if x == "de":
        tests = ["TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011", "TED.tst2012"]
        splits = {"train": [train], "test": [xml(name) for name in tests]}
        carve = _every_nth_to_valid(23)
    else:
        splits = {"train": [train], "valid": [xml("TED.dev2010")],
                  "test": [xml(f"TED.tst{year}") for year in (2010, 2011, 2012)]}
        carve = None
    return Recipe(splits, lowercase=True, clean={"ratio": 1.5, "min_len": 1, "max_len": 175},
                  carve=carve)


def iwslt15(spec: dict[str, Any]) -> Recipe:
    """Luong & Manning's preprocessed IWSLT15 En-Vi (Moses-tokenized, escaped): tst2012 valid,
    tst2013 test, taken as published (C-MLM)."""
    x = _other(spec)
    folder = f"iwslt15.en-{x}"

    def split(name):
        return [_oriented(spec, lambda lang: Part("stanford", f"{folder}/{name}.{lang}"))]

    return Recipe({"train": split("train"), "valid": split("tst2012"), "test": split("tst2013")},
                  tokenize=False, unescape=True)


WMT14_TRAIN = {  # fairseq's prepare-wmt14en2de.sh --icml17 (4.5M) and prepare-wmt14en2fr.sh
    "de": [("statmt", "wmt13/training-parallel-europarl-v7.tgz", "training/europarl-v7.{p}.{l}"),
           ("statmt", "wmt13/training-parallel-commoncrawl.tgz", "commoncrawl.{p}.{l}"),
           ("statmt", "wmt14/training-parallel-nc-v9.tgz", "training/news-commentary-v9.{p}.{l}")],
    "fr": [("statmt", "wmt13/training-parallel-europarl-v7.tgz", "training/europarl-v7.{p}.{l}"),
           ("statmt", "wmt13/training-parallel-commoncrawl.tgz", "commoncrawl.{p}.{l}"),
           ("statmt", "wmt13/training-parallel-un.tgz", "un/undoc.2000.{p}.{l}"),
           ("statmt", "wmt14/training-parallel-nc-v9.tgz", "training/news-commentary-v9.{p}.{l}"),
           ("statmt", "wmt10/training-giga-fren.tar", "giga-fren.release2.fixed.{l}.gz")],
}
WMT_CLEAN = {"ratio": 1.5, "min_len": 1, "max_len": 250}


def _sgm(spec, source, file, stem):
    """A WMT test set: `<stem>-src.<src>.sgm` and `<stem>-ref.<tgt>.sgm`."""
    src, tgt = _pair(spec)
    return (Part(source, file, f"{stem}-src.{src}.sgm", "sgm"),
            Part(source, file, f"{stem}-ref.{tgt}.sgm", "sgm"))


def _corpora(spec, table) -> Pieces:
    x = _other(spec)
    return [_oriented(spec, lambda lang, s=s, f=f, m=m: Part(s, f, m.format(p=f"{x}-en", l=lang)))
            for s, f, m in table]


def wmt14(spec: dict[str, Any]) -> Recipe:
    """WMT14 En-De (4.5M, Vaswani et al.) and En-Fr (36M): newstest2013 valid, the full
    newstest2014 (3003) test; punctuation normalised, Moses-tokenized, cleaned 1.5/1/250."""
    x = _other(spec)
    if x not in WMT14_TRAIN:
        raise InputError(f"wmt14: no recipe for {x}-en; known: de, fr")
    valid = _oriented(spec, lambda lang: Part("statmt", "wmt14/dev.tgz",
                                              f"dev/newstest2013.{lang}"))
    test = _sgm(spec, "statmt", "wmt14/test-full.tgz", f"test-full/newstest2014-{x}en")
    return Recipe({"train": _corpora(spec, WMT14_TRAIN[x]), "valid": [valid], "test": [test]},
                  normalize_punct=True, clean=WMT_CLEAN)


def wmt16(spec: dict[str, Any]) -> Recipe:
    """WMT16 Ro-En (Europarl v8 + SETIMES2, 0.6M), newsdev2016 valid, newstest2016 test;
    Romanian normalised and stripped of diacritics (Sennrich et al.); with
    `published_back_translations`, Sennrich et al.'s 2M back-translated pairs join the training
    data (AB-Net, BERT-fused)."""
    src, tgt = _pair(spec)
    if {src, tgt} != {"ro", "en"}:
        raise InputError(f"wmt16: no recipe for {src}-{tgt}; known: ro-en, en-ro")
    task = "wmt16/translation-task"
    train = [_oriented(spec, lambda lang: Part("statmt-data",
                                               f"{task}/training-parallel-ep-v8.tgz",
                                               f"training-parallel-ep-v8/europarl-v8.ro-en.{lang}")),
             _oriented(spec, lambda lang: Part("opus", "OPUS-SETIMES/v2/moses/en-ro.txt.zip",
                                               f"SETIMES.en-ro.{lang}"))]
    if spec.get("published_back_translations"):
        train.append(_oriented(spec, lambda lang: Part(
            "statmt-data", f"rsennrich/wmt16_backtranslations/ro-en/corpus.bt.ro-en.{lang}.gz")))
    valid = _sgm(spec, "statmt-data", f"{task}/dev-romanian-updated.tgz",
                 f"dev/newsdev2016-{src}{tgt}")
    test = _sgm(spec, "statmt-data", f"{task}/test.tgz", f"test/newstest2016-{src}{tgt}")
    return Recipe({"train": train, "valid": [valid], "test": [test]}, normalize_punct=True,
                  clean=WMT_CLEAN, transforms={"ro": preprocess.normalise_romanian})


def wmt18(spec: dict[str, Any]) -> Recipe:
    """WMT18 En-Zh, statmt.org corpora only (see the module note): newstest2017 valid,
    newstest2018 test."""
    task = "wmt18/translation-task"
    src, tgt = _pair(spec)
    train = _corpora(spec, [("statmt-data", f"{task}/training-parallel-nc-v13.tgz",
                             "training-parallel-nc-v13/news-commentary-v13.{p}.{l}")])
    valid = _sgm(spec, "statmt-data", f"{task}/dev.tgz", f"dev/newstest2017-{src}{tgt}")
    test = _sgm(spec, "statmt-data", f"{task}/test.tgz", f"test/newstest2018-{src}{tgt}")
    return Recipe({"train": train, "valid": [valid], "test": [test]}, normalize_punct=True,
                  clean=WMT_CLEAN)


def gigaword(spec: dict[str, Any]) -> Recipe:
    """Rush et al.'s Gigaword headlines (tokenized, lowercased, digits as #) as released; C-MLM's
    5k dev and 5k test-dev sampled from the validation set, and the official test set (1,951
    pairs) as split test-official."""
    def part(name):
        return (Part("gigaword", "org_data.tar.gz", f"org_data/{name}.src.txt"),
                Part("gigaword", "org_data.tar.gz", f"org_data/{name}.tgt.txt"))

    return Recipe({"train": [part("train")], "valid": [part("dev")],
                   "test-official": [part("test")]}, tokenize=False,
                  carve=_sample_dev_and_testdev(5000, seed=1))


def multi30k(spec: dict[str, Any]) -> Recipe:
    """Multi30k task 1 (Flickr30k En-De; 29000/1014/1000 with test2016), raw text from the
    official release, Moses-tokenized, case kept."""
    def split(name):
        return [_oriented(spec, lambda lang: Part("multi30k", f"{name}.{lang}.gz"))]

    return Recipe({"train": split("train"), "valid": split("val"),
                   "test": split("test_2016_flickr")})


RECIPES: dict[str, Callable[[dict[str, Any]], Recipe]] = {
    "iwslt14": iwslt14, "iwslt15": iwslt15, "wmt14": wmt14, "wmt16": wmt16, "wmt18": wmt18,
    "gigaword": gigaword, "multi30k": multi30k,
}


def recipe_for(name: str, spec: dict[str, Any]) -> Recipe:
    if spec.get("kind") not in RECIPES:  # a spec by hand (the CLI's --spec) may lack it
        raise InputError(f"dataset {name!r}: no recipe for kind {spec.get('kind')!r}; known: "
                         f"{', '.join(sorted(RECIPES))}")
    for key in ("src_lang", "tgt_lang"):
        if key not in spec:
            raise InputError(f"config key 'datasets.{name}.{key}' is missing (real datasets "
                             "name their languages)")
    return RECIPES[spec["kind"]](spec)


def optional_splits(name: str, datasets: dict[str, Any]) -> list[str]:
    """The OPTIONAL_SPLITS configured dataset `name` makes: a toy world's by its sizes, a
    reversed dataset's its original's, a real dataset's by its recipe."""
    spec = datasets[name]
    if spec["kind"] == "reversed":
        return optional_splits(spec["of"], datasets)
    if spec["kind"] == "toyworld":
        return ["test-official"] if spec.get("world", {}).get("test_official_pairs") else []
    return [split for split in OPTIONAL_SPLITS if split in recipe_for(name, spec).splits]


def download_paths(name: str, spec: dict[str, Any]) -> list[str]:
    """The downloaded files (under data/downloads/) the dataset's recipe reads."""
    return sorted({f"{DOWNLOADS_DIR}/{p.source}/{p.file}"
                   for p in recipe_for(name, spec).parts()})


def check_sources(name: str, spec: dict[str, Any], sources: dict[str, Any]) -> None:
    """Every file the recipe reads must have a download entry (URL and pinned checksum)."""
    for part in recipe_for(name, spec).parts():
        if part.file not in sources.get(part.source, {}).get("files", {}):
            raise InputError(f"config key 'sources.{part.source}.files.{part.file}' is missing "
                             f"(dataset {name!r} reads it)")


def prepare(name: str, spec: dict[str, Any], downloads: str | Path, out: str | Path,
            workers: int = 1) -> dict[str, Any]:
    """Run the dataset's recipe on the downloaded files and write its splits and manifest."""
    recipe = recipe_for(name, spec)
    src_lang, tgt_lang = _pair(spec)
    lowercased = lowercased_sides(spec, recipe.lowercase)
    splits: dict[str, tuple[list[str], list[str]]] = {}
    for split, pieces in recipe.splits.items():
        src, tgt = [], []
        for src_part, tgt_part in pieces:
            s, t = read_parallel_parts(src_part, tgt_part, downloads)
            log.info("%s %s: %d pairs from %s", name, split, len(s), src_part.label())
            src += s
            tgt += t
        splits[split] = (process_side(src, src_lang, recipe, "src" in lowercased, workers),
                         process_side(tgt, tgt_lang, recipe, "tgt" in lowercased, workers))
    counts: dict[str, Any] = {}
    if recipe.clean is not None:
        src, tgt = splits["train"]
        kept_src, kept_tgt, dropped = preprocess.clean_pairs(src, tgt, **recipe.clean)
        counts["train_filter"] = {**recipe.clean, "before": len(src), "kept": len(kept_src),
                                  "dropped": dropped}
        log.info("%s train: clean-corpus (%s) kept %d of %d pairs, dropped %s", name,
                 recipe.clean, len(kept_src), len(src), dropped)
        splits["train"] = (kept_src, kept_tgt)
    carved = recipe.carve(splits) if recipe.carve is not None else {}
    written = [*SPLITS, *(s for s in OPTIONAL_SPLITS if s in splits)]
    for split in written:
        src, tgt, gone = preprocess.drop_empty(*splits[split])
        if gone:
            log.warning("%s %s: dropped %d pairs with an empty side", name, split, gone)
            counts[f"{split}_empty_dropped"] = gone
        splits[split] = (src, tgt)
    files = {f"{p.source}/{p.file}" for p in recipe.parts()}  # an archive feeds several parts
    manifest = {
        "dataset": name, "kind": spec["kind"], "src_lang": src_lang, "tgt_lang": tgt_lang,
        "inputs": {f: file_digest(Path(downloads) / f) for f in sorted(files)},
        "splits": {}, "filters": counts, "carved": carved,
    }
    with atomic_directory(out, "manifest.json") as tmp:
        for split in written:
            for side, lines in zip(("src", "tgt"), splits[split], strict=True):
                text = "".join(line + "\n" for line in lines).encode("utf-8")
                (tmp / f"{split}.{side}").write_bytes(text)
                manifest["splits"][f"{split}.{side}"] = {
                    "lines": len(lines), "sha256": hashlib.sha256(text).hexdigest()}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    log.info("%s: %s pairs", name, ", ".join(f"{s} {len(splits[s][0])}" for s in written))
    return manifest


def process_side(lines: list[str], lang: str, recipe: Recipe, lowercase: bool,
                 workers: int = 1) -> list[str]:
    """One side through the recipe: unescape, per-language transform, Moses, and lowercasing
    where `lowercase` (`nmtbench.data.casing.lowercased_sides`)."""
    if recipe.unescape:
        lines = [preprocess.unescape_moses(line) for line in lines]
    if lang in recipe.transforms:
        lines = [recipe.transforms[lang](line) for line in lines]
    if recipe.tokenize:
        lines = preprocess.moses_tokenize(lines, lang, recipe.normalize_punct, workers)
    lines = [preprocess.squeeze(line) for line in lines]
    return [line.lower() for line in lines] if lowercase else lines

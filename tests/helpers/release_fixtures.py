"""Small stand-ins for the real MT releases, laid out as the originals are (same archive names,
member paths and file formats), and a loopback HTTP server to serve them.

`build_releases(root)` writes `root/<source>/<file>` for every file `config/config.yaml` lists
under `sources`, so the workflow's real download and prepare rules run on them unchanged except
for the base URLs and checksums, which `server_config` points at the fixtures.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import threading
import zipfile
from collections.abc import Callable
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

WORDS = {
    "en": "the house is small and the garden is green today".split(),
    "de": "das haus ist klein und der garten ist heute grün".split(),
    "fr": "la maison est petite et le jardin est vert aujourd'hui".split(),
    "it": "la casa è piccola e il giardino è verde oggi".split(),
    "ro": "casa este mică şi grădina este verde astăzi".split(),
    "vi": "ngôi nhà nhỏ và khu vườn thì xanh hôm nay".split(),
    "zh": "房子 很 小 花园 今天 是 绿色 的 和 了".split(),
    "es": "la casa es pequeña y el jardín es verde hoy".split(),
    "nl": "het huis is klein en de tuin is groen vandaag".split(),
}


def sentence(lang: str, i: int, n_words: int | None = None) -> str:
    """A deterministic sentence: `n_words` words (default 3-8) plus a final punctuation mark."""
    words = WORDS[lang]
    n = n_words if n_words is not None else 3 + i % 6
    text = " ".join(words[(i + k) % len(words)] for k in range(n))
    return f"{text.capitalize()}, {i}."


def lines(lang: str, count: int, start: int = 0) -> list[str]:
    return [sentence(lang, start + i) for i in range(count)]


# The text of one side of a release: (corpus, e.g. "wmt14-de-en"; language; count; first
# line) -> lines, the same line numbers aligned across a corpus' two languages.
Text = Callable[[str, str, int, int], list[str]]


def fixture_text(corpus: str, lang: str, count: int, start: int = 0) -> list[str]:
    """The fixture sentences, the same for every corpus."""
    return lines(lang, count, start)


def _text(rows: list[str]) -> bytes:
    return "".join(r + "\n" for r in rows).encode("utf-8")


def write_tar(path: Path, members: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "w" if path.suffix == ".tar" else "w:gz"  # .tgz, and gigaword's extensionless URL
    with tarfile.open(path, mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def write_zip(path: Path, members: dict[str, bytes]) -> None:
    """A deflated zip, its members dated alike so that the same members give the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2016, 9, 26, 0, 0, 0)), data)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def sgm(rows: list[str], setid: str, lang: str) -> bytes:
    segs = "".join(f'<seg id="{i + 1}"> {r} </seg>\n' for i, r in enumerate(rows))
    return (f'<srcset setid="{setid}" srclang="any">\n<doc docid="d1" sysid="ref" '
            f'lang="{lang}">\n<p>\n{segs}</p>\n</doc>\n</srcset>\n').encode()


# The IWSLT14 training "tags" file: metadata lines around each talk, as in the release.
IWSLT_TRAIN = 46  # sentence pairs in train.tags (two more are dropped by the cleaning)


def iwslt_tags(lang: str, rows: list[str]) -> bytes:
    head = ["<url>http://www.ted.com/talks/x.html</url>", "<keywords>talks</keywords>",
            "<talkid>1</talkid>", f"<title>{sentence(lang, 900)}</title>",
            f"<description>{sentence(lang, 901)}</description>"]
    return _text(head + rows)


def iwslt_xml(rows: list[str], lang: str) -> bytes:
    segs = "".join(f'<seg id="{i + 1}"> {r} </seg>\n' for i, r in enumerate(rows))
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<mteval>\n<refset lang="{lang}">\n'
            f'<doc docid="1">\n{segs}</doc>\n</refset>\n</mteval>\n').encode()


def iwslt14_archive(path: Path, x: str, tests: list[str], test_size: int = 3,
                    text: Text | None = None, scale: int = 1) -> None:
    pair = f"{x}-en"
    text = text or fixture_text
    members = {}
    for lang in (x, "en"):
        rows = text(f"iwslt14-{pair}", lang, IWSLT_TRAIN * scale, 0)
        rows.append(" ".join(["long"] * 200) + " .")  # over 175 words: cleaned away
        rows.append("a" if lang == x else "a b c d e f g")  # ratio 7 > 1.5: cleaned away
        members[f"{pair}/train.tags.{pair}.{lang}"] = iwslt_tags(lang, rows)
        for k, name in enumerate(tests):
            test_rows = [r.replace("'", "\u2019")
                         for r in text(f"iwslt14-{pair}", lang, test_size * scale,
                                       100 * k * scale)]
            members[f"{pair}/IWSLT14.{name}.{pair}.{lang}.xml"] = iwslt_xml(test_rows, lang)
    write_tar(path, members)


# WikiText-103 raw's layout: blank lines around ` = Title = ` headings, paragraphs tokenized,
# with `@-@` `@,@` `@.@` joining hyphenated words and numbers.
LONG = " ".join(["very"] * 180)  # over the 175 words IWSLT14's cleaning keeps
WIKITEXT_TRAIN = [
    " ", " = Valkyria Chronicles III = ", " ",
    " Senjō no Valkyria 3 is a tactical role @-@ playing game . Dr. Smith , who moved to the "
    "U.S. in 1 @,@ 998 , designed it . It sold 3 @.@ 5 million copies ! ",
    " ", " = = Gameplay = = ", " ",
    " The game 's battle system was kept from the first game . Players \" select \" each unit "
    "( one at a time ) . ",
    " He served in the U.S. Army for years . St. Louis got it first . ",
    " ", " = = = Reception = = = ", " ",
    f" Reviewers praised it . {LONG.capitalize()} long . It ended . ",
    " ",
]


def wikitext_archive(path: Path) -> None:
    """`wikitext-103-raw-v1.zip`: the three splits under `wikitext-103-raw/`."""
    other = [" ", " = Robert Boulter = ", " ", " Robert Boulter is an English actor . ", " "]
    write_zip(path, {"wikitext-103-raw/wiki.train.raw": _text(WIKITEXT_TRAIN),
                     "wikitext-103-raw/wiki.valid.raw": _text(other),
                     "wikitext-103-raw/wiki.test.raw": _text(other)})


# johntzwei/nmt_iwslt's IWSLT14 De-En training sample as prepare-iwslt14.sh writes it: Moses
# escapes, lowercased, BPE ('@@ ' continuations, also one at a line's end)
IWSLT14_SAMPLE_FILE = "iwslt14.tokenized.de-en/lr_samples/first/train.{lang}"
IWSLT14_SAMPLE = {
    "de": ["wir wuchsen auf und spiel@@ ten – mutter ist aus ka@@ p breton .",
           "&quot; so , da haben sie es . &quot;", "das ist die wahr@@"],
    "en": ["we grew up playing — mom &apos;s from cape breton , coinci@@ dentally .",
           "so there you go . that &apos;s the truth .", "it &apos;s a &quot; test &quot; ."],
}


def build_releases(root: Path, text: Text | None = None, scale: int = 1) -> None:
    """Every file of config.yaml's `sources`, small, in the real layout: the fixture sentences,
    or `text`'s (real ones where there are), `scale` times as many of each (Gigaword's
    validation set aside: it has the 10,000 pairs C-MLM's split samples already)."""
    text = text or fixture_text

    def rows(corpus: str, lang: str, count: int, start: int = 0) -> list[str]:
        return text(corpus, lang, count * scale, start * scale)

    iwslt14_archive(root / "fairseq/iwslt14/de-en.tgz", "de",
                    ["TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011", "TED.tst2012"],
                    text=text, scale=scale)
    for x in ("it", "es", "nl"):
        iwslt14_archive(root / f"wit3/{x}/en/{x}-en.tgz", x,
                        ["TED.dev2010", "TED.tst2010", "TED.tst2011", "TED.tst2012"],
                        text=text, scale=scale)
    for name, count, start in (("train", 20, 0), ("tst2012", 5, 0), ("tst2013", 4, 0)):
        for lang in ("en", "vi"):  # published tokenized, with Moses escapes; tst2013 has a BOM
            tokenized = [r.replace(",", " ,").replace(".", " .") + " don &apos;t"
                         for r in rows("iwslt15-en-vi", lang, count, start)]
            data = _text(tokenized)
            _write(root / f"stanford/iwslt15.en-vi/{name}.{lang}",
                   b"\xef\xbb\xbf" + data if name == "tst2013" else data)
    statmt = root / "statmt"
    write_tar(statmt / "wmt13/training-parallel-europarl-v7.tgz", {
        f"training/europarl-v7.{x}-en.{lang}": _text(rows(f"wmt14-{x}-en", lang, 10))
        for x in ("de", "fr") for lang in (x, "en")})
    write_tar(statmt / "wmt13/training-parallel-commoncrawl.tgz", {
        f"commoncrawl.{x}-en.{lang}": _text(rows(f"wmt14-{x}-en", lang, 6, 10))
        for x in ("de", "fr") for lang in (x, "en")})
    write_tar(statmt / "wmt14/training-parallel-nc-v9.tgz", {
        f"training/news-commentary-v9.{x}-en.{lang}": _text(rows(f"wmt14-{x}-en", lang, 4, 20))
        for x in ("de", "fr") for lang in (x, "en")})
    write_tar(statmt / "wmt13/training-parallel-un.tgz", {
        f"un/undoc.2000.fr-en.{lang}": _text(rows("wmt14-fr-en", lang, 3, 30))
        for lang in ("fr", "en")})
    write_tar(statmt / "wmt10/training-giga-fren.tar", {
        f"giga-fren.release2.fixed.{lang}.gz":
            gzip.compress(_text(rows("wmt14-fr-en", lang, 5, 40))) for lang in ("fr", "en")})
    write_tar(statmt / "wmt14/dev.tgz", {  # one English side for both pairs
        f"dev/newstest2013.{lang}": _text(rows("wmt14-de-en", lang, 7, 50))
        for lang in ("de", "en", "fr")})
    write_tar(statmt / "wmt14/test-full.tgz", {
        f"test-full/newstest2014-{x}en-{role}.{lang}.sgm":
            sgm(rows(f"wmt14-{x}-en", lang, 8, 60), "newstest2014", lang)
        for x in ("de", "fr") for role in ("src", "ref") for lang in (x, "en")})
    data = root / "statmt-data"
    task = data / "wmt16/translation-task"
    write_tar(task / "training-parallel-ep-v8.tgz", {
        f"training-parallel-ep-v8/europarl-v8.ro-en.{lang}": _text(rows("wmt16-ro-en", lang, 9))
        for lang in ("ro", "en")})
    write_tar(task / "dev-romanian-updated.tgz", {
        f"dev/newsdev2016-{pair}-{role}.{lang}.sgm":
            sgm(rows("wmt16-ro-en", lang, 6, 70), "newsdev2016", lang)
        for pair in ("roen", "enro") for role in ("src", "ref") for lang in ("ro", "en")})
    write_tar(task / "test.tgz", {
        f"test/newstest2016-{pair}-{role}.{lang}.sgm":
            sgm(rows("wmt16-ro-en", lang, 5, 80), "newstest2016", lang)
        for pair in ("roen", "enro") for role in ("src", "ref") for lang in ("ro", "en")})
    for lang in ("ro", "en"):
        _write(data / f"rsennrich/wmt16_backtranslations/ro-en/corpus.bt.ro-en.{lang}.gz",
               gzip.compress(_text(rows("wmt16-ro-en", lang, 12, 200))))
    write_zip(root / "opus/OPUS-SETIMES/v2/moses/en-ro.txt.zip",
              {f"SETIMES.en-ro.{lang}": _text(rows("wmt16-ro-en", lang, 8, 300))
               for lang in ("ro", "en")})
    task18 = data / "wmt18/translation-task"
    write_tar(task18 / "training-parallel-nc-v13.tgz", {
        f"training-parallel-nc-v13/news-commentary-v13.zh-en.{lang}":
            _text(rows("wmt18-zh-en", lang, 6)) for lang in ("zh", "en")})
    write_tar(task18 / "dev.tgz", {f"dev/newstest2017-enzh-{role}.{lang}.sgm":
                              sgm(rows("wmt18-zh-en", lang, 4, 20), "newstest2017", lang)
                              for role in ("src", "ref") for lang in ("en", "zh")})
    write_tar(task18 / "test.tgz", {f"test/newstest2018-enzh-{role}.{lang}.sgm":
                               sgm(rows("wmt18-zh-en", lang, 3, 30), "newstest2018", lang)
                               for role in ("src", "ref") for lang in ("en", "zh")})
    giga = {}
    for split, count in (("train", 30 * scale), ("dev", 10_050), ("test", 5 * scale)):
        giga[f"org_data/{split}.src.txt"] = _text([f"article {i} about # things"
                                                   for i in range(count)])
        giga[f"org_data/{split}.tgt.txt"] = _text([f"headline {i}" for i in range(count)])
    write_tar(root / "gigaword/uc", giga)  # served at the Google Drive URL's path
    wikitext_archive(root / "wikitext/wikitext-103-raw-v1.zip")
    for name, count in (("train", 25), ("val", 5), ("test_2016_flickr", 4)):
        for lang in ("de", "en"):
            _write(root / f"multi30k/{name}.{lang}.gz",
                   gzip.compress(_text(rows("multi30k-de-en", lang, count, 400)), mtime=0))
    for lang, sample in IWSLT14_SAMPLE.items():
        _write(root / "nmt-iwslt" / IWSLT14_SAMPLE_FILE.format(lang=lang), _text(sample))


def server_config(root: Path, base_url: str, out: Path, extra: dict | None = None) -> Path:
    """A config file pointing every source at the loopback server, each file pinned to the
    SHA-256 of the fixture served for it (any MD5 pin of the real file removed)."""
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    sources = {}
    for source, spec in default["sources"].items():
        files = {}
        for file, entry in spec["files"].items():
            served = root / source / entry.get("path", file).split("?")[0]
            digest = hashlib.sha256(served.read_bytes()).hexdigest()
            md5 = hashlib.md5(served.read_bytes(), usedforsecurity=False).hexdigest()
            files[file] = {"sha256": digest, "md5": md5}
        sources[source] = {"base_url": f"{base_url}/{source}", "files": files}
    config = {"sources": sources, **(extra or {})}
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    return out


SHARED_MULTI30K = ROOT.parent / "shared" / "data" / "multi30k-de-en"
# the shared copy's names -> the official release's (its MANIFEST.md)
MULTI30K_NAMES = {"train": "train", "val": "val", "test2016": "test_2016_flickr"}


def shared_multi30k_release(root: Path) -> dict:
    """The shared real Multi30k files, laid out under `root/multi30k/` as the official release
    names them; returns config `sources.multi30k.files` pinning each to what is served (the
    shared copy dropped a trailing blank line, so the release's MD5s do not hold)."""
    served = root / "multi30k"
    served.mkdir(parents=True, exist_ok=True)
    files = {}
    for ours, theirs in MULTI30K_NAMES.items():
        for lang in ("de", "en"):
            data = (SHARED_MULTI30K / f"{ours}.{lang}.gz").read_bytes()
            (served / f"{theirs}.{lang}.gz").write_bytes(data)
            files[f"{theirs}.{lang}.gz"] = {
                "sha256": hashlib.sha256(data).hexdigest(),
                "md5": hashlib.md5(data, usedforsecurity=False).hexdigest()}
    return files


SHARED_IWSLT14_SAMPLE = ROOT.parent / "shared" / "data" / "iwslt14-de-en" / "bpe10k"


def shared_iwslt14_sample(root: Path) -> dict:
    """The shared copy of the IWSLT14 training sample, uncompressed under `root/nmt-iwslt/` at
    its path in johntzwei/nmt_iwslt, as config.yaml's `sources.nmt-iwslt` (pins and all)
    fetches it; returns that source's files."""
    files = {}
    for lang in ("de", "en"):
        data = gzip.decompress((SHARED_IWSLT14_SAMPLE / f"train-sample4600.{lang}.gz")
                               .read_bytes())
        file = IWSLT14_SAMPLE_FILE.format(lang=lang)
        _write(root / "nmt-iwslt" / file, data)
        files[file] = {"sha256": hashlib.sha256(data).hexdigest()}
    return files


class Server:
    """`http.server` on 127.0.0.1 (`port`, else a free one) serving a directory, in a
    thread."""

    def __init__(self, directory: Path, port: int = 0):
        handler = partial(_QuietHandler, directory=str(directory))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass

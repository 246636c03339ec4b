"""The monolingual corpora: WikiText-103 raw for back-translation, laid out as the real zip
(tests/helpers/release_fixtures.py), comes out as the dataset's target side is prepared
(sentence-split, Moses-tokenized, lowercased for IWSLT14), headings and blank lines gone; the
IWSLT14 training sample, pre-training text, as either side (BPE joined, escapes undone); both
downloaded and made through the CLI as the workflow's rules run it."""

import hashlib
import json
import logging
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from release_fixtures import (
    IWSLT14_SAMPLE,
    IWSLT14_SAMPLE_FILE,
    LONG,
    SHARED_IWSLT14_SAMPLE,
    Server,
    build_releases,
    server_config,
    shared_iwslt14_sample,
    wikitext_archive,
)

from nmtbench.data import monolingual
from nmtbench.data.download import source_url
from nmtbench.data.monolingual import (
    check_sources,
    download_paths,
    manifest_path,
    prepare_monolingual,
    wikitext_paragraphs,
)
from nmtbench.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
IWSLT14 = {"kind": "iwslt14", "src_lang": "de", "tgt_lang": "en", "lowercase": True}
MULTI30K = {"kind": "multi30k", "src_lang": "de", "tgt_lang": "en", "lowercase": False}
CORPUS = "english-wikipedia"
SAMPLE = "iwslt14-train-sample"
ZIP = "wikitext/wikitext-103-raw-v1.zip"

# wiki.train.raw of the fixture, as IWSLT14's English side: one sentence a line, "Dr." and
# "U.S." kept within their sentences, the @-@ @,@ @.@ joins undone, the 181-word one dropped
EXPECTED = [
    "senjō no valkyria 3 is a tactical role-playing game .",
    "dr. smith , who moved to the u.s. in 1,998 , designed it .",
    "it sold 3.5 million copies !",
    "the game 's battle system was kept from the first game .",
    'players " select " each unit ( one at a time ) .',
    "he served in the u.s. army for years .",
    "st. louis got it first .",
    "reviewers praised it .",
    "it ended .",
]


@pytest.fixture
def downloads(tmp_path):
    folder = tmp_path / "downloads"
    wikitext_archive(folder / ZIP)
    return folder


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_wikitext_paragraphs_drop_headings_and_blank_lines_and_undo_the_joins():
    lines = [" ", "", " = Title = ", " = = Section = = ", " = = = Sub = = = ",
             " A well @-@ known , 1 @,@ 000 @,@ 000 and 3 @.@ 5 = 7 @-@ 3 . "]
    assert wikitext_paragraphs(lines) == ["A well-known , 1,000,000 and 3.5 = 7-3 ."]


def test_wikipedia_comes_out_as_iwslt14s_target_side(downloads, tmp_path):
    out = tmp_path / "prepared" / "mono.tgt"
    manifest = prepare_monolingual("iwslt14-de-en", IWSLT14, CORPUS, downloads, out)
    lines = read(out)
    assert lines == EXPECTED
    assert all(line.strip() and "=" not in line and "@" not in line for line in lines)
    assert not any(heading in "\n".join(lines) for heading in ("chronicles iii", "gameplay",
                                                                "reception", "boulter"))
    assert manifest == json.loads(manifest_path(out).read_text())
    assert manifest_path(out) == tmp_path / "prepared" / "mono.tgt.manifest.json"
    zipped = (downloads / ZIP).read_bytes()
    assert manifest == {
        "dataset": "iwslt14-de-en", "corpus": CORPUS, "lang": "en",
        "member": "wikitext-103-raw/wiki.train.raw",
        "inputs": {ZIP: hashlib.sha256(zipped).hexdigest()},
        "max_sentences": None, "paragraphs": 4, "sentences": 9,
        "length_filter": {"min_len": 1, "max_len": 175}, "dropped": {"length": 1},
        "sha256": hashlib.sha256(out.read_bytes()).hexdigest()}


def test_a_recipe_that_keeps_case_and_length_keeps_them(downloads, tmp_path):
    manifest = prepare_monolingual("multi30k-de-en", MULTI30K, CORPUS, downloads,
                                   tmp_path / "mono.tgt")
    lines = read(tmp_path / "mono.tgt")
    assert lines[:2] == ["Senjō no Valkyria 3 is a tactical role-playing game .",
                         "Dr. Smith , who moved to the U.S. in 1,998 , designed it ."]
    assert lines[-2] == f"{LONG.capitalize()} long ."  # no cleaning in Multi30k's recipe
    assert len(lines) == manifest["sentences"] == 10
    assert manifest["length_filter"] is None and manifest["dropped"] == {}


@pytest.mark.parametrize(("workers", "chunk"), [(1, 200), (2, 1)])
def test_max_sentences_keeps_the_first_and_reads_no_further(downloads, tmp_path, monkeypatch,
                                                            workers, chunk):
    monkeypatch.setattr(monolingual, "CHUNK", chunk)  # one paragraph a task: the pool's path
    for n, paragraphs in ((3, 1), (4, 2), (8, 4)):
        out = tmp_path / f"mono.{n}"
        manifest = prepare_monolingual("iwslt14-de-en", IWSLT14, CORPUS, downloads, out,
                                       workers=workers, max_sentences=n)
        assert read(out) == EXPECTED[:n]
        assert (manifest["sentences"], manifest["paragraphs"]) == (n, paragraphs)
        assert multiprocessing.active_children() == []  # stopped early, no worker left
    full = prepare_monolingual("iwslt14-de-en", IWSLT14, CORPUS, downloads,
                               tmp_path / "mono.all", workers=workers)
    assert read(tmp_path / "mono.all") == EXPECTED and full["paragraphs"] == 4


def test_asking_for_more_sentences_than_there_are_warns(downloads, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        manifest = prepare_monolingual("iwslt14-de-en", IWSLT14, CORPUS, downloads,
                                       tmp_path / "mono.tgt", max_sentences=100)
    assert manifest["sentences"] == 9 and manifest["max_sentences"] == 100
    assert "only 9 sentences, fewer than the 100 asked for" in caplog.text
    with pytest.raises(InputError, match=r"^max_sentences 0: expected a positive number$"):
        prepare_monolingual("iwslt14-de-en", IWSLT14, CORPUS, downloads, tmp_path / "x",
                            max_sentences=0)


def test_download_paths_and_the_default_configs_source():
    assert download_paths(CORPUS, "en") == ["data/downloads/wikitext/wikitext-103-raw-v1.zip"]
    check_sources("iwslt14-de-en", IWSLT14, CORPUS, DEFAULT["sources"])
    entry = DEFAULT["sources"]["wikitext"]
    assert source_url(entry, "wikitext-103-raw-v1.zip") == \
        "https://wikitext.smerity.com/wikitext-103-raw-v1.zip"
    assert len(entry["files"]["wikitext-103-raw-v1.zip"]["sha256"]) == 64


@pytest.mark.parametrize(("call", "message"), [
    (lambda: check_sources("iwslt14-de-en", IWSLT14, "german-news", DEFAULT["sources"]),
     "unknown monolingual corpus 'german-news'; known: english-wikipedia"),
    (lambda: download_paths("german-news", "de"),
     "unknown monolingual corpus 'german-news'; known: english-wikipedia, iwslt14-train-sample"),
    (lambda: check_sources("iwslt14-en-de", {**IWSLT14, "src_lang": "en", "tgt_lang": "de"},
                           CORPUS, DEFAULT["sources"]),
     "dataset 'iwslt14-en-de': the monolingual corpus 'english-wikipedia' is 'en' text, but "
     "the target language is 'de'"),
    (lambda: check_sources("wmt14-en-fr", {"kind": "wmt14", "src_lang": "en", "tgt_lang": "fr"},
                           SAMPLE, DEFAULT["sources"], side="tgt"),
     "dataset 'wmt14-en-fr': the monolingual corpus 'iwslt14-train-sample' is 'de' and 'en' "
     "text, but the target language is 'fr'"),
    (lambda: check_sources("multi30k-de-en", MULTI30K, SAMPLE,
                           {k: v for k, v in DEFAULT["sources"].items() if k != "nmt-iwslt"},
                           side="src"),
     "config key 'sources.nmt-iwslt.files.iwslt14.tokenized.de-en/lr_samples/first/train.de' "
     "is missing (the monolingual corpus 'iwslt14-train-sample' of dataset 'multi30k-de-en' "
     "reads it)"),
    (lambda: check_sources("iwslt14-de-en", IWSLT14, CORPUS,
                           {k: v for k, v in DEFAULT["sources"].items() if k != "wikitext"}),
     "config key 'sources.wikitext.files.wikitext-103-raw-v1.zip' is missing (the monolingual "
     "corpus 'english-wikipedia' of dataset 'iwslt14-de-en' reads it)"),
    (lambda: check_sources("toy", {"kind": "toyworld"}, CORPUS, DEFAULT["sources"]),
     "dataset 'toy': no recipe for kind 'toyworld'; known: "),
])
def test_bad_corpus_settings_fail_in_one_line(call, message):
    with pytest.raises(InputError) as err:
        call()
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_missing_download_fails_in_one_line(tmp_path):
    with pytest.raises(InputError, match=r"wikitext-103-raw-v1.zip: not downloaded \(expected "
                       r"by wikitext/wikitext-103-raw-v1.zip::wikitext-103-raw/wiki.train.raw"):
        prepare_monolingual("iwslt14-de-en", IWSLT14, CORPUS, tmp_path, tmp_path / "mono.tgt")
    assert not (tmp_path / "mono.tgt").exists()


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nmtbench", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_downloaded_from_its_configured_source_and_made_by_the_cli(tmp_path):
    """The zip comes through `download` (URL and pin as server_config gives them for the
    fixture), then `monolingual` makes the first five sentences with two workers."""
    served = tmp_path / "served"
    build_releases(served)
    with Server(served) as server:
        config = yaml.safe_load(server_config(served, server.url, tmp_path / "server.yaml")
                                .read_text())
        source = config["sources"]["wikitext"]
        pin = source["files"]["wikitext-103-raw-v1.zip"]["sha256"]
        downloaded = tmp_path / "data" / "downloads" / ZIP
        result = run_cli("download", "--url", source_url(source, "wikitext-103-raw-v1.zip"),
                         "--out", str(downloaded), "--sha256", pin, "--retries", "0", cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert hashlib.sha256(downloaded.read_bytes()).hexdigest() == pin
    out = tmp_path / "data" / "iwslt14-de-en" / "prepared" / "mono.tgt"
    args = ["monolingual", "--dataset", "iwslt14-de-en", "--spec", json.dumps(IWSLT14),
            "--downloads", str(tmp_path / "data" / "downloads"), "--out", str(out)]
    result = run_cli(*args, "--corpus", CORPUS, "--max-sentences", "5", "--workers", "2",
                     cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert read(out) == EXPECTED[:5]
    manifest = json.loads(manifest_path(out).read_text())
    assert manifest["inputs"] == {ZIP: pin} and manifest["sentences"] == 5

    out.unlink()
    result = run_cli(*args, "--corpus", "german-news", cwd=ROOT)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == ("error: unknown monolingual corpus "
                                                      "'german-news'; known: english-wikipedia, "
                                                      "iwslt14-train-sample")
    assert not out.exists()


# the fixture's sample (release_fixtures.IWSLT14_SAMPLE) as Multi30k's sides: BPE joined, Moses
# escapes undone, a segment of two sentences split in two, each one Moses-detokenized and
# tokenized again by the recipe (which keeps "mom 's" and quotes as its own text has them)
SAMPLE_SIDES = {
    "src": ["wir wuchsen auf und spielten – mutter ist aus kap breton .",
            '" so , da haben sie es . "', "das ist die wahr"],
    "tgt": ["we grew up playing — mom 's from cape breton , coincidentally .",
            "so there you go .", "that 's the truth .", "it 's a \" test \" ."],
}


def sample_downloads(folder: Path) -> Path:
    for lang, rows in IWSLT14_SAMPLE.items():
        path = folder / "nmt-iwslt" / IWSLT14_SAMPLE_FILE.format(lang=lang)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(row + "\n" for row in rows), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("side", "lang"), [("src", "de"), ("tgt", "en")])
def test_the_iwslt14_sample_comes_out_as_each_side_of_multi30k(tmp_path, side, lang):
    downloads = sample_downloads(tmp_path / "downloads")
    out = tmp_path / f"{SAMPLE}.{side}"
    manifest = prepare_monolingual("multi30k-de-en", MULTI30K, SAMPLE, downloads, out,
                                   side=side)
    assert read(out) == SAMPLE_SIDES[side]
    assert not any(mark in out.read_text() for mark in ("@@", "&apos;", "&quot;"))
    file = f"nmt-iwslt/{IWSLT14_SAMPLE_FILE.format(lang=lang)}"
    assert manifest["lang"] == lang and list(manifest["inputs"]) == [file]
    assert download_paths(SAMPLE, lang) == [f"data/downloads/{file}"]
    assert manifest["sentences"] == len(SAMPLE_SIDES[side]) and manifest["dropped"] == {}


def test_the_iwslt14_sample_goes_through_the_datasets_recipe(tmp_path):
    """WMT14's recipe normalises punctuation (the dash), IWSLT14's lowercases: the sample
    takes each dataset's own processing, as its raw text would."""
    downloads = sample_downloads(tmp_path / "downloads")
    prepare_monolingual("wmt14-de-en", {"kind": "wmt14", "src_lang": "de", "tgt_lang": "en"},
                        SAMPLE, downloads, tmp_path / "wmt14.src", side="src")
    assert read(tmp_path / "wmt14.src")[0] == \
        "wir wuchsen auf und spielten - mutter ist aus kap breton ."
    manifest = prepare_monolingual("iwslt14-de-en", IWSLT14, SAMPLE, downloads,
                                   tmp_path / "iwslt14.tgt")
    assert read(tmp_path / "iwslt14.tgt") == SAMPLE_SIDES["tgt"]
    assert manifest["length_filter"] == {"min_len": 1, "max_len": 175}


def test_the_iwslt14_sample_is_downloaded_at_its_pins_and_made_by_the_cli(tmp_path):
    """Both files come through `download` from the loopback server at config.yaml's paths,
    then `monolingual --side src` makes Multi30k's German side of the German one."""
    served = tmp_path / "served"
    build_releases(served)
    downloads = tmp_path / "data" / "downloads"
    with Server(served) as server:
        config = yaml.safe_load(server_config(served, server.url, tmp_path / "server.yaml")
                                .read_text())
        source = config["sources"]["nmt-iwslt"]
        assert set(source["files"]) == set(DEFAULT["sources"]["nmt-iwslt"]["files"])
        for file, pins in source["files"].items():
            result = run_cli("download", "--url", source_url(source, file), "--out",
                             str(downloads / "nmt-iwslt" / file), "--sha256", pins["sha256"],
                             "--retries", "0", cwd=ROOT)
            assert result.returncode == 0, result.stderr[-2000:]
    out = tmp_path / "data" / "multi30k-de-en" / "extra_corpora" / f"{SAMPLE}.src"
    result = run_cli("monolingual", "--dataset", "multi30k-de-en", "--spec",
                     json.dumps(MULTI30K), "--corpus", SAMPLE, "--side", "src", "--downloads",
                     str(downloads), "--out", str(out), cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert read(out) == SAMPLE_SIDES["src"]


def test_the_sample_is_pinned_at_its_real_url():
    entry = DEFAULT["sources"]["nmt-iwslt"]
    assert source_url(entry, IWSLT14_SAMPLE_FILE.format(lang="de")) == (
        "https://raw.githubusercontent.com/johntzwei/nmt_iwslt/"
        "7750e75a0379bacdc3ad2f49da883116a69b3691/iwslt14.tokenized.de-en/lr_samples/first/"
        "train.de")


@pytest.mark.skipif(not SHARED_IWSLT14_SAMPLE.is_dir(), reason="../shared/data is absent")
def test_the_pins_are_the_real_files(tmp_path):
    """The shared copy (the files at that commit) has the checksums config.yaml pins; its
    4,600 segments make more sentences, none with a BPE or escape mark left."""
    assert shared_iwslt14_sample(tmp_path) == DEFAULT["sources"]["nmt-iwslt"]["files"]
    manifest = prepare_monolingual("multi30k-de-en", MULTI30K, SAMPLE, tmp_path,
                                   tmp_path / "sample.tgt")
    text = (tmp_path / "sample.tgt").read_text(encoding="utf-8")
    assert manifest["paragraphs"] == manifest["sentences"] > 4600
    assert not any(mark in text for mark in ("@@", "&apos;", "&quot;"))

"""The real datasets' download and prepare rules, run by real snakemake against a loopback HTTP
server serving small releases laid out like the originals (tests/helpers/release_fixtures.py); and,
when ../shared/data is there, real Multi30k and IWSLT14 files through the same steps."""

import gzip
import hashlib
import html
import json
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from release_fixtures import (
    Server,
    build_releases,
    iwslt14_archive,
    iwslt_xml,
    server_config,
    shared_multi30k_release,
    write_tar,
)

from nmtbench.data.recipes import iwslt14, prepare, process_side

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
PAPER = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())

# Dataset -> expected (train, valid, test) pairs from the fixtures.
EXPECTED = {
    "iwslt14-de-en": (46, 2, 15),  # 50 lines (title, description kept), 2 cleaned, 23rd -> valid
    "iwslt14-en-it": (48, 3, 9),  # dev2010 valid; tst2010-2012 test
    "iwslt15-en-vi": (20, 5, 4),
    "wmt14-en-de": (20, 7, 8),  # europarl 10 + commoncrawl 6 + news-commentary 4
    "wmt14-en-fr": (28, 7, 8),  # + UN 3 + giga-fren 5
    "wmt16-ro-en-bt": (29, 6, 5),  # europarl 9 + SETIMES 8 + back-translations 12
    "wmt16-en-ro": (17, 6, 5),
    "wmt18-en-zh": (6, 4, 3),
    "gigaword": (30, 5000, 5000),
    "multi30k-de-en": (25, 5, 4),
}


def dataset_specs() -> dict:
    """The datasets above, and iwslt14-en-de, which IWSLT14 De-En's back-translation names;
    without their checkpoints, each recipe's own casing (fairseq lowercases IWSLT14)."""
    specs = {**PAPER["datasets"], **DEFAULT["datasets"]}
    return {name: {k: v for k, v in specs[name].items() if k not in ("checkpoints", "keep_case")}
            for name in [*EXPECTED, "iwslt14-en-de"]}


def snakemake(workdir: Path, configfile: Path, *targets: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(workdir), "--configfile", str(configfile), "--cores", "2",
           *targets]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    root = tmp_path_factory.mktemp("releases")
    build_releases(root)
    with Server(root) as server:
        yield root, server


@pytest.fixture(scope="module")
def prepared(releases, tmp_path_factory):
    """Every recipe, through the real download and prepare rules, in one snakemake run."""
    root, server = releases
    workdir = tmp_path_factory.mktemp("work")
    config = server_config(root, server.url, workdir / "server.yaml",
                           {"datasets": dataset_specs()})
    result = snakemake(workdir, config,
                       *(f"data/{name}/prepared/manifest.json" for name in EXPECTED),
                       "data/iwslt14-de-en/monolingual/mono.tgt")
    assert result.returncode == 0, result.stderr[-4000:]
    return workdir


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_recipe_prepares_its_splits_with_a_manifest(prepared, name):
    folder = prepared / "data" / name / "prepared"
    manifest = json.loads((folder / "manifest.json").read_text())
    for split, count in zip(("train", "valid", "test"), EXPECTED[name], strict=True):
        for side in ("src", "tgt"):
            path = folder / f"{split}.{side}"
            assert len(read(path)) == count, (name, split, side)
            entry = manifest["splits"][f"{split}.{side}"]
            assert entry == {"lines": count,
                             "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    for label, digest in manifest["inputs"].items():
        source_file = label.split("::")[0]
        downloaded = prepared / "data" / "downloads" / source_file
        assert digest == hashlib.sha256(downloaded.read_bytes()).hexdigest()


@pytest.mark.slow
def test_the_monolingual_corpus_is_downloaded_and_prepared_like_the_target_side(prepared):
    """IWSLT14 De-En back-translates English Wikipedia: the rule prepare_monolingual makes
    sentences from the served WikiText archive, lowercased and Moses-tokenized as IWSLT14's
    English side is."""
    folder = prepared / "data" / "iwslt14-de-en" / "monolingual"
    mono = read(folder / "mono.tgt")
    manifest = json.loads((folder / "mono.tgt.manifest.json").read_text())
    assert manifest["corpus"] == "english-wikipedia" and len(mono) >= 5
    assert manifest["sha256"] == hashlib.sha256(
        (folder / "mono.tgt").read_bytes()).hexdigest()
    assert "senjō no valkyria 3 is a tactical role-playing game ." in mono
    assert all(line == line.lower() and "@" not in line and "=" not in line for line in mono)


@pytest.mark.slow
def test_iwslt14_follows_prepare_iwslt14(prepared):
    """Tags dropped, cleaning counted, lowercased, every 23rd pair held out, test sets in order."""
    folder = prepared / "data" / "iwslt14-de-en" / "prepared"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["filters"]["train_filter"] == {
        "ratio": 1.5, "min_len": 1, "max_len": 175, "before": 50, "kept": 48,
        "dropped": {"length": 1, "ratio": 1}}
    train, valid, test = (read(folder / f"{s}.src") for s in ("train", "valid", "test"))
    text = "\n".join(train + valid + test)
    assert text == text.lower() and "<" not in text and "talks" not in text
    assert valid == ["das haus ist klein und , 20.", "klein und der garten , 43."]  # 23rd, 46th
    assert train[0] == "das haus ist , 900 ."  # the talk's title: fairseq keeps its text
    assert test[3] == "das haus ist klein und der garten , 100 ."  # TEDX.dev2012 after dev2010


@pytest.mark.slow
def test_a_side_a_cased_bert_reads_keeps_its_case(prepared, tmp_path):
    """IWSLT14 De-En as config/paper.yaml gives it: German read by bert-base-german-cased keeps
    its capitals, English (bert-base-uncased) is lowercased as fairseq's recipe does."""
    spec = {**dataset_specs()["iwslt14-de-en"],
            "checkpoints": {"src": "bert-base-german-cased", "tgt": "bert-base-uncased"}}
    prepare("iwslt14-de-en", spec, prepared / "data" / "downloads", tmp_path)
    lowered = read(prepared / "data" / "iwslt14-de-en" / "prepared" / "train.src")
    german, english = read(tmp_path / "train.src"), read(tmp_path / "train.tgt")
    assert [line.lower() for line in german] == lowered and german != lowered
    assert german[0] == "Das haus ist , 900 ."  # the fixture's talk title
    assert english == [line.lower() for line in english]


@pytest.mark.slow
def test_each_release_is_normalised_as_its_paper_did(prepared):
    data = prepared / "data"
    vi = read(data / "iwslt15-en-vi" / "prepared" / "test.src")
    assert vi[0] == "The house is , 0 . don 't"  # escapes undone, BOM gone, no re-tokenizing
    ro = read(data / "wmt16-ro-en-bt" / "prepared" / "train.src")
    assert ro[1] == "Este mica si gradina , 1 ."  # Romanian diacritics gone (Sennrich et al.)
    assert read(data / "wmt16-en-ro" / "prepared" / "train.tgt")[:2] == ro[:2]
    fr = read(data / "wmt14-en-fr" / "prepared" / "train.tgt")
    assert "aujourd' hui" in "\n".join(fr)  # Moses' French apostrophe rule
    giga = data / "gigaword" / "prepared"
    valid, test = set(read(giga / "valid.src")), set(read(giga / "test.src"))
    assert len(valid) == len(test) == 5000 and not valid & test  # disjoint samples of dev
    # the official test set (org_data/test.*): Table 5's split of its own
    assert read(giga / "test-official.src") == [f"article {i} about # things" for i in range(5)]
    assert read(giga / "test-official.tgt") == [f"headline {i}" for i in range(5)]
    assert read(data / "multi30k-de-en" / "prepared" / "test.src")[0] == \
        "Das haus ist klein und der garten , 400 ."  # Moses-tokenized, case kept


@pytest.mark.slow
def test_a_rerun_downloads_and_prepares_nothing(prepared):
    config = prepared / "server.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
         "--directory", str(prepared), "--configfile", str(config), "-n",
         *(f"data/{name}/prepared/manifest.json" for name in EXPECTED)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Nothing to be done" in result.stdout + result.stderr


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nmtbench", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_a_wrong_checksum_fails_the_rule_in_one_line_and_keeps_nothing(releases, tmp_path):
    root, server = releases
    config = server_config(root, server.url, tmp_path / "server.yaml",
                           {"datasets": {"multi30k-de-en": dataset_specs()["multi30k-de-en"]}})
    pinned = yaml.safe_load(config.read_text())
    pinned["sources"]["multi30k"]["files"]["val.de.gz"]["sha256"] = "0" * 64
    config.write_text(yaml.safe_dump(pinned))
    result = snakemake(tmp_path, config, "data/downloads/multi30k/val.de.gz")
    assert result.returncode != 0
    log = (tmp_path / "logs" / "download" / "multi30k" / "val.de.gz.log").read_text()
    error = [line for line in log.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "checksum mismatch" in error[0] and "0" * 64 in error[0]
    assert "Traceback" not in log
    assert not (tmp_path / "data" / "downloads" / "multi30k" / "val.de.gz").exists()


def test_a_corrupted_archive_fails_preparation_in_one_line(tmp_path):
    """A release whose bytes are broken (but pinned as they are) stops `prepare` with the
    archive named, and leaves no prepared split behind."""
    downloads = tmp_path / "downloads"
    archive = downloads / "fairseq" / "iwslt14" / "de-en.tgz"
    iwslt14_archive(archive, "de", ["TED.dev2010", "TEDX.dev2012", "TED.tst2010",
                                    "TED.tst2011", "TED.tst2012"])
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    spec = json.dumps(dataset_specs()["iwslt14-de-en"])
    result = run_cli("prepare", "--dataset", "iwslt14-de-en", "--spec", spec, "--downloads",
                     str(downloads), "--out", str(tmp_path / "prepared"), cwd=ROOT)
    assert result.returncode == 2
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: ") and "de-en.tgz" in error
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "prepared").exists()


# --- real data from ../shared/data ---------------------------------------------------------

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is absent")


@needs_shared
@pytest.mark.slow
def test_real_multi30k_through_the_real_rules(tmp_path):
    """The shared Multi30k files, served in the official release's layout, prepared by the
    workflow's own download and prepare rules: 29000 / 1014 / 1000 pairs."""
    files = shared_multi30k_release(tmp_path / "served")
    workdir = tmp_path / "work"
    workdir.mkdir()
    with Server(tmp_path / "served") as server:
        config = workdir / "real.yaml"
        config.write_text(yaml.safe_dump({
            "sources": {"multi30k": {"base_url": f"{server.url}/multi30k", "files": files}},
            "datasets": {"multi30k-de-en": dataset_specs()["multi30k-de-en"]}}))
        result = snakemake(workdir, config, "data/multi30k-de-en/prepared/manifest.json")
    assert result.returncode == 0, result.stderr[-3000:]
    folder = workdir / "data" / "multi30k-de-en" / "prepared"
    counts = {k: v["lines"] for k, v in
              json.loads((folder / "manifest.json").read_text())["splits"].items()}
    assert counts == {"train.src": 29000, "train.tgt": 29000, "valid.src": 1014,
                      "valid.tgt": 1014, "test.src": 1000, "test.tgt": 1000}
    raw = gzip.decompress((SHARED / "multi30k-de-en" / "test2016.en.gz").read_bytes())
    first_raw = raw.decode().splitlines()[0]
    first = read(folder / "test.tgt")[0]
    assert first.replace(" ", "") == first_raw.replace(" ", "")  # same sentence, tokenized
    assert first != first_raw  # ... and Moses split off its punctuation


def shared_iwslt(split: str, lang: str) -> list[str]:
    raw = gzip.decompress((SHARED / "iwslt14-de-en" / f"{split}.{lang}.gz").read_bytes())
    return raw.decode("utf-8").splitlines()


@needs_shared
@pytest.mark.slow
def test_real_iwslt14_test_set_through_the_iwslt14_recipe(tmp_path):
    """fairseq's 6750 test lines, put back into the release's five TED XML files, come out of
    the IWSLT14 recipe (XML segments, Moses, lowercase) all there and in order. The lines are
    tokenized already and Moses is not idempotent ("we 're" -> "we ' re"), so each must equal
    its input up to whitespace, not exactly."""
    downloads = tmp_path / "downloads"
    archive = downloads / "fairseq" / "iwslt14" / "de-en.tgz"
    iwslt14_archive(archive, "de", ["TED.dev2010", "TEDX.dev2012", "TED.tst2010",
                                    "TED.tst2011", "TED.tst2012"])
    tests = {lang: [html.unescape(line) for line in shared_iwslt("test", lang)]
             for lang in ("de", "en")}
    _replace_test_sets(archive, tests)
    manifest = prepare("iwslt14-de-en", dataset_specs()["iwslt14-de-en"], downloads,
                       tmp_path / "prepared", workers=2)
    assert manifest["splits"]["test.src"]["lines"] == manifest["splits"]["test.tgt"]["lines"] \
        == 6750
    for lang, side in (("de", "src"), ("en", "tgt")):
        ours = read(tmp_path / "prepared" / f"test.{side}")
        for i, (a, b) in enumerate(zip(ours, tests[lang], strict=True)):
            assert a.split() and a.replace(" ", "") == b.replace(" ", ""), (lang, i)
        assert ours[-1] == tests[lang][-1]


def _replace_test_sets(archive: Path, tests: dict[str, list[str]]) -> None:
    """Rewrite the fixture archive's five test XML files with the given lines, in order."""
    names = ["TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011", "TED.tst2012"]
    n = len(tests["de"])
    bounds = [round(k * n / len(names)) for k in range(len(names) + 1)]
    with tarfile.open(archive) as old:
        members = {m.name: old.extractfile(m).read() for m in old.getmembers()}
    for k, name in enumerate(names):
        for lang in ("de", "en"):
            members[f"de-en/IWSLT14.{name}.de-en.{lang}.xml"] = iwslt_xml(
                tests[lang][bounds[k]:bounds[k + 1]], lang)
    write_tar(archive, members)


@needs_shared
def test_real_iwslt14_valid_set_normalised_and_wordpieced_in_order(tmp_path):
    """fairseq's 7283 valid pairs (tokenized, escaped) get the recipe's normalisation (escapes
    undone, lowercase) and bert-base-uncased's WordPiece, every line kept and in order."""
    from nmtbench.data.tokenization import decode, load_tokenizer
    from nmtbench.parts.batches import Bitext

    checkpoint = tmp_path / "bert-base-uncased"  # the vocabulary files of a hub snapshot
    checkpoint.mkdir()
    (checkpoint / "vocab.txt").write_bytes(gzip.decompress(
        (SHARED / "bert" / "bert-base-uncased" / "vocab.txt.gz").read_bytes()))
    (checkpoint / "tokenizer_config.json").write_text(
        '{"do_lower_case": true, "tokenizer_class": "BertTokenizer"}')
    (checkpoint / "config.json").write_text('{"model_type": "bert"}')
    tokenizer = load_tokenizer(checkpoint)
    assert len(tokenizer) == 30522
    published = replace(iwslt14({"src_lang": "de", "tgt_lang": "en"}), tokenize=False,
                        unescape=True)
    sides = {}
    for lang, side in (("de", "src"), ("en", "tgt")):
        lines = shared_iwslt("valid", lang)
        sides[side] = process_side(lines, lang, published, lowercase=True)
        assert len(sides[side]) == 7283
        assert sides[side][5] == html.unescape(lines[5]).lower()
        (tmp_path / f"valid.{side}").write_text("\n".join(sides[side]) + "\n")
    assert not any("&apos;" in line for line in sides["tgt"])
    data = Bitext.load(tmp_path / "valid.src", tmp_path / "valid.tgt", tokenizer, tokenizer)
    assert len(data) == 7283
    for i in (0, 3641, 7282):  # first, middle, last: the same sentence comes back
        words = decode(tokenizer, data.tgt[i])
        assert words.replace(" ", "") == sides["tgt"][i].replace(" ", "")

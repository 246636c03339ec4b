"""nmtbench.data.corpora: reading members of downloaded archives in the releases' formats."""

from __future__ import annotations

import gzip
import io
import random
import tarfile
import zipfile
from pathlib import Path

import pytest

from nmtbench.data.corpora import Part, read_parallel_parts, read_part
from nmtbench.errors import InputError

SGM = (
    '<refset setid="newstest2014" srclang="any" trglang="de">\n'
    '<doc sysid="ref" docid="1" genre="news" origlang="en">\n'
    "<p>\n"
    '<seg id="1">  Hello world.  </seg>\n'
    '<seg id="2">It\u2019s a <b>test</b> &amp; more.</seg>\n'
    "</p>\n"
    '<seg id="3">\tLast one.\t</seg>\n'
    "</doc>\n</refset>\n"
)

TAGS = (
    "<url>http://www.ted.com/talks/x.html</url>\n"
    "<keywords>talks, science</keywords>\n"
    "<talkid>1</talkid>\n"
    "<title>A title</title>\n"
    "<description>What it is about.</description>\n"
    "First sentence.\n"
    "It\u2019s the second.\n"
)


def _tar(path: Path, members: dict[str, bytes], mode: str = "w:gz") -> None:
    with tarfile.open(path, mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def _zip(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


@pytest.fixture
def downloads(tmp_path):
    """data/downloads/<source>/<file> with each container kind the releases come in."""
    root = tmp_path / "downloads"
    src = root / "src"
    (src / "wmt14").mkdir(parents=True)
    _tar(src / "wmt14" / "dev.tgz", {
        "dev/newstest2014-ref.de.sgm": SGM.encode(),
        "dev/train.tags.de-en.de": TAGS.encode(),
        "dev/plain.en": b"one\ntwo\nthree\n",
        "dev/plain.de": b"eins\nzwei\n",
    })
    _zip(src / "en-ro.txt.zip", {
        "SETIMES.en-ro.ro": "\ufeffAm\u0103 \r\nB \r\nC\r\n".encode(),
        "SETIMES.en-ro.en": b"A\nB\nC\n",
    })
    _tar(src / "data.tar", {"sub/test.de.gz": gzip.compress("\ufefferste\nzweite".encode())},
         mode="w")
    (src / "val.en.gz").write_bytes(gzip.compress(b"a\r\nb\r\n"))
    (src / "plain.txt").write_bytes("\ufeffx\r\ny\r\n\r\nz".encode())
    return root


@pytest.mark.parametrize(("part", "expected"), [
    (Part("src", "wmt14/dev.tgz", "dev/plain.en"), ["one", "two", "three"]),
    # zip member: the BOM is dropped, CRLF ends lines, other trailing spaces stay
    (Part("src", "en-ro.txt.zip", "SETIMES.en-ro.ro"), ["Am\u0103 ", "B ", "C"]),
    # a gzip member of an uncompressed tar (no final newline)
    (Part("src", "data.tar", "sub/test.de.gz"), ["erste", "zweite"]),
    # a plain gzip file
    (Part("src", "val.en.gz"), ["a", "b"]),
    # a plain file: empty lines are kept as sentences
    (Part("src", "plain.txt"), ["x", "y", "", "z"]),
])
def test_read_part_text_in_each_container(downloads, part, expected):
    """text format: one sentence per line, whatever holds the file."""
    assert read_part(part, downloads) == expected


def test_read_part_sgm(downloads):
    """sgm: only <seg> contents, whitespace around them trimmed, the rest untouched."""
    part = Part("src", "wmt14/dev.tgz", "dev/newstest2014-ref.de.sgm", "sgm")
    assert read_part(part, downloads) == [
        "Hello world.", "It\u2019s a <b>test</b> &amp; more.", "Last one."]


def test_read_part_iwslt_xml(downloads):
    """iwslt-xml: as sgm, and U+2019 becomes an ASCII apostrophe (prepare-iwslt14.sh)."""
    part = Part("src", "wmt14/dev.tgz", "dev/newstest2014-ref.de.sgm", "iwslt-xml")
    assert read_part(part, downloads) == [
        "Hello world.", "It's a <b>test</b> &amp; more.", "Last one."]


def test_read_part_iwslt_tags(downloads):
    """iwslt-tags: url/keywords/talkid lines dropped, title/description tags stripped with their
    text kept, U+2019 left alone."""
    part = Part("src", "wmt14/dev.tgz", "dev/train.tags.de-en.de", "iwslt-tags")
    assert read_part(part, downloads) == [
        "A title", "What it is about.", "First sentence.", "It\u2019s the second."]


def test_read_part_bom_and_crlf_in_sgm(tmp_path):
    """A BOM and CRLF line ends do not leak into sgm segments."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "t.sgm").write_bytes(
        '\ufeff<seg id="1">a b</seg>\r\n<seg id="2"> c </seg>\r\n'.encode())
    assert read_part(Part("s", "t.sgm", fmt="sgm"), tmp_path) == ["a b", "c"]


def test_read_part_invalid_utf8_replaced_and_logged(tmp_path, caplog):
    """Bad bytes become U+FFFD (a real U+FFFD in the text is not counted as bad)."""
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "bad.txt").write_bytes(b"ok\nbad \xff here\n" + "\ufffd\n".encode())
    with caplog.at_level("WARNING", logger="nmtbench.data.corpora"):
        lines = read_part(Part("s", "bad.txt"), tmp_path)
    assert lines == ["ok", "bad \ufffd here", "\ufffd"]
    assert "1 invalid UTF-8" in caplog.text


def test_unknown_format(downloads):
    with pytest.raises(InputError, match="unknown format 'xml'"):
        read_part(Part("src", "plain.txt", fmt="xml"), downloads)


@pytest.mark.parametrize("file", ["wmt14/dev.tgz", "en-ro.txt.zip", "data.tar"])
def test_missing_member_names_archive_and_member(downloads, file):
    """A member the archive lacks: one line naming the archive and the member."""
    with pytest.raises(InputError) as err:
        read_part(Part("src", file, "nope/train.en"), downloads)
    message = str(err.value)
    assert "\n" not in message
    assert str(downloads / "src" / file) in message
    assert "nope/train.en" in message


def test_missing_file_names_path(downloads):
    """A file not downloaded: the error names its path."""
    with pytest.raises(InputError) as err:
        read_part(Part("src", "wmt14/test.tgz", "x"), downloads)
    assert str(downloads / "src" / "wmt14" / "test.tgz") in str(err.value)
    assert "not downloaded" in str(err.value)


def test_corrupt_archive_is_one_line_error(downloads):
    """Random bytes named .tgz: an InputError of one line naming the file."""
    path = downloads / "src" / "broken.tgz"
    path.write_bytes(random.Random(0).randbytes(4096))
    with pytest.raises(InputError) as err:
        read_part(Part("src", "broken.tgz", "a.txt"), downloads)
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value), str(err.value)


def test_corrupt_archive_is_input_error(downloads):
    """Random bytes named .tgz or .zip raise InputError (not a raw tarfile/zipfile error)."""
    for name in ("broken.tgz", "broken.zip"):
        path = downloads / "src" / name
        path.write_bytes(random.Random(1).randbytes(4096))
        with pytest.raises(InputError, match="unreadable archive"):
            read_part(Part("src", name, "a.txt"), downloads)


def test_corrupt_gzip_file_is_one_line_error(downloads):
    """A plain .gz file that is not gzip data: one line naming the part."""
    (downloads / "src" / "bad.en.gz").write_bytes(b"not gzip at all\n")
    with pytest.raises(InputError) as err:
        read_part(Part("src", "bad.en.gz"), downloads)
    assert "src/bad.en.gz" in str(err.value) and "corrupt gzip" in str(err.value)
    assert "\n" not in str(err.value)


def test_truncated_gzip_file_is_input_error(downloads):
    """A gzip file cut short raises InputError."""
    data = gzip.compress(random.Random(2).randbytes(10_000))
    (downloads / "src" / "cut.en.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="corrupt gzip"):
        read_part(Part("src", "cut.en.gz"), downloads)


def test_damaged_gzip_body_is_input_error(downloads):
    """A gzip file whose compressed body is damaged raises InputError, not zlib.error."""
    data = bytearray(gzip.compress(b"hello world " * 1000))
    for i in range(20, 60):
        data[i] ^= 0xFF
    (downloads / "src" / "damaged.en.gz").write_bytes(bytes(data))
    with pytest.raises(InputError, match="corrupt gzip"):
        read_part(Part("src", "damaged.en.gz"), downloads)


def test_read_parallel_parts(downloads):
    """Aligned parts come back as two equally long lists."""
    src = Part("src", "en-ro.txt.zip", "SETIMES.en-ro.en")
    tgt = Part("src", "en-ro.txt.zip", "SETIMES.en-ro.ro")
    assert read_parallel_parts(src, tgt, downloads) == (["A", "B", "C"], ["Am\u0103 ", "B ", "C"])


def test_read_parallel_parts_count_mismatch_names_both(downloads):
    """Different sentence counts: one line naming both parts and their counts."""
    src = Part("src", "wmt14/dev.tgz", "dev/plain.en")
    tgt = Part("src", "wmt14/dev.tgz", "dev/plain.de")
    with pytest.raises(InputError) as err:
        read_parallel_parts(src, tgt, downloads)
    message = str(err.value)
    assert "\n" not in message
    assert "src/wmt14/dev.tgz::dev/plain.en has 3" in message
    assert "src/wmt14/dev.tgz::dev/plain.de has 2" in message


def test_part_label():
    assert Part("statmt", "wmt14/dev.tgz", "dev/x.sgm", "sgm").label() == (
        "statmt/wmt14/dev.tgz::dev/x.sgm")
    assert Part("multi30k", "val.en.gz").label() == "multi30k/val.en.gz"

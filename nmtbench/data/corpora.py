"""Reading the downloaded releases: a text member of a tar/zip archive (or a plain/gzip file) in
one of the formats the MT releases use (plain lines, WMT/IWSLT SGML-XML segments, IWSLT TED
training "tags" files)."""

from __future__ import annotations

import gzip
import logging
import re
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from nmtbench.errors import InputError

log = logging.getLogger(__name__)

FORMATS = ("text", "sgm", "iwslt-xml", "iwslt-tags")
_SEG = re.compile(r"<seg[^>]*>\s*(.*?)\s*</seg>")
_TAG_LINES = ("<url>", "<talkid>", "<keywords>")
_TAGS = re.compile(r"</?(title|description)>")


@dataclass(frozen=True)
class Part:
    """One side of a corpus: `member` of the downloaded `source`/`file` (None: the file itself)."""

    source: str
    file: str
    member: str | None = None
    fmt: str = "text"

    def label(self) -> str:
        return f"{self.source}/{self.file}" + (f"::{self.member}" if self.member else "")


def read_part(part: Part, downloads: str | Path) -> list[str]:
    """The part's sentences, one per line of the result."""
    raw = _member_bytes(Path(downloads) / part.source / part.file, part.member, part.label())
    text = _decode(raw, part.label())
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line.rstrip("\r") for line in lines]
    if part.fmt == "text":
        return lines
    if part.fmt in ("sgm", "iwslt-xml"):
        segments = [m.group(1) for line in lines if (m := _SEG.search(line))]
        if part.fmt == "iwslt-xml":  # prepare-iwslt14.sh: sed -e "s/\’/\'/g" on dev/test
            segments = [s.replace("\u2019", "'") for s in segments]
        return segments
    if part.fmt == "iwslt-tags":  # prepare-iwslt14.sh: drop metadata lines, strip two tags
        return [_TAGS.sub("", line) for line in lines
                if not any(tag in line for tag in _TAG_LINES)]
    raise InputError(f"{part.label()}: unknown format {part.fmt!r}; known: {', '.join(FORMATS)}")


def read_parallel_parts(src: Part, tgt: Part, downloads: str | Path) -> tuple[list[str],
                                                                                list[str]]:
    s, t = read_part(src, downloads), read_part(tgt, downloads)
    if len(s) != len(t):
        raise InputError(f"{src.label()} has {len(s)} sentences but {tgt.label()} has {len(t)}: "
                         "the release is not sentence-aligned as expected")
    return s, t


def _member_bytes(path: Path, member: str | None, label: str) -> bytes:
    if not path.is_file():
        raise InputError(f"{path}: not downloaded (expected by {label})")
    try:
        if member is None:
            data = path.read_bytes()
        elif zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                data = archive.read(member)
        else:
            with tarfile.open(path) as archive:
                handle = archive.extractfile(member)
                if handle is None:
                    raise KeyError(member)
                data = handle.read()
    except KeyError:
        raise InputError(f"{path}: has no member {member!r}") from None
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, OSError) as err:
        reason = " ".join(str(err).split())  # tarfile's messages span several lines
        raise InputError(f"{path}: unreadable archive ({type(err).__name__}: {reason})") from None
    if (member or path.name).endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:
            raise InputError(f"{label}: corrupt gzip data ({err})") from None
    return data


def _decode(raw: bytes, label: str) -> str:
    """UTF-8 (a byte-order mark dropped); bad bytes become U+FFFD and are counted in the log,
    as a few web-crawled corpora have them."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        clean = raw.decode("utf-8", errors="ignore").count("\ufffd")  # U+FFFD already there
        text = raw.decode("utf-8", errors="replace")
        log.warning("%s: %d invalid UTF-8 sequences replaced by U+FFFD", label,
                    text.count("\ufffd") - clean)
    return text.removeprefix("\ufeff")

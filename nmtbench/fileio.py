"""Text files: strict reading (lines, JSON lines), and atomic writes (a killed job never leaves
a file that looks finished)."""

from __future__ import annotations

import codecs
import errno
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from nmtbench.errors import InputError

log = logging.getLogger(__name__)


def _umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_OS_ERROR = re.compile(r"\(os error (\d+)\)")  # how Rust prints the OS's error


def temp_dir_failure(err: OSError) -> OSError | None:
    """The OS's reason behind tempfile's "No usable temporary directory" (a library calls
    `tempfile.gettempdir()` on import), which names neither a directory nor why: a small
    write tried in the first directory it tries (TMPDIR, else /tmp) gives the reason, and
    that directory; None for any other error."""
    if err.filename is not None or not str(err).startswith(
            f"[Errno {errno.ENOENT}] No usable temporary directory"):
        return None
    directory = next((os.environ[k] for k in ("TMPDIR", "TEMP", "TMP") if os.environ.get(k)),
                     "/tmp")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".nmtbench-probe-")
        try:
            os.write(fd, b"probe")
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as found:
        reason = found.strerror or str(found)
        if hint := _HINTS.get(found.errno):
            reason += f": {hint}"
        return OSError(found.errno, f"no temporary file can be written there ({reason}); make "
                       "room there or set TMPDIR to a directory with room", directory)
    return None


_HINTS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
          errno.EFBIG: "a file-size limit is set, ulimit -f"}


def _failed_write(err: Exception, path: Path) -> OSError | None:
    """The OSError behind a write that torch or a Rust library (safetensors, tokenizers)
    reported in its own words (a full disk, a file-size limit), naming `path`; None for any
    other error."""
    if (code := _OS_ERROR.search(str(err))) and int(code[1]) in errno.errorcode:
        return OSError(int(code[1]), os.strerror(int(code[1])), str(path))
    if isinstance(err, RuntimeError) and "inline_container" in str(err):  # torch.save's writer
        return OSError(errno.EIO, "torch could not write it (is the disk full?)", str(path))
    return None


@contextmanager
def _writes_to(path: Path) -> Iterator[None]:
    """Re-raise a write that failed inside torch, safetensors or tokenizers as the OSError it
    stands for, which commands report in one line."""
    try:
        yield
    except Exception as err:
        if (failed := _failed_write(err, path)) is None:
            raise
        raise failed from err


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds.

    The file gets the mode a plain `open(path, "w")` would give (mkstemp makes it 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with _writes_to(path):
            yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextmanager
def atomic_directory(path: str | os.PathLike, marker: str | tuple[str, ...]) -> Iterator[Path]:
    """Yield a temporary directory beside `path`; it replaces `path` only if the block
    succeeds, so a killed job never leaves a directory that looks finished. What it holds gets
    the modes a plain mkdir and open(path, "w") would give (safetensors writes 0600 files).

    What `path` holds is replaced only if it is an earlier output of the same command (it
    holds `marker`, a file that command always writes, or one of several: a record the
    workflow does not declare stays where Snakemake deleted the declared files before the
    job) or an empty directory: any other directory or file there is refused with one line,
    never deleted."""
    path = Path(path)
    markers = (marker,) if isinstance(marker, str) else marker
    if path.is_dir() and any(path.iterdir()) and not any((path / m).is_file() for m in markers):
        raise InputError(f"{path}: a directory that is not an earlier output of this command "
                         f"(it has no {' or '.join(markers)}); write to a new directory")
    if path.exists() and not path.is_dir():
        raise InputError(f"{path}: a file, not a directory; write to a new directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}."))
    try:
        with _writes_to(path):
            yield tmp
        mask = _umask()
        for item in [tmp, *tmp.rglob("*")]:  # mkdtemp makes the directory 0700
            os.chmod(item, (0o777 if item.is_dir() else 0o666) & ~mask)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def refuse_overlap(outputs: dict[str, str | os.PathLike],
                   inputs: Iterator[str | os.PathLike] | list[str | os.PathLike]) -> None:
    """One line if a path a command writes (`outputs`: option -> path) is, contains or lies
    inside a path it reads: written there, the command would destroy its own input."""
    read = [(Path(p), Path(p).resolve()) for p in inputs]
    for option, out in outputs.items():
        target = Path(out).resolve()
        for given, source in read:
            if target == source:
                relation = "is"
            elif source.is_relative_to(target):
                relation = "contains"
            elif target.is_relative_to(source):
                relation = "lies inside"
            else:
                continue
            raise InputError(f"{option} {out} {relation} the input {given}: the command would "
                             "overwrite what it reads; write to another path")


def refuse_shared_outputs(outputs: dict[str, str | os.PathLike]) -> None:
    """One line if two of a command's outputs are one path, or one lies inside the other:
    the later written would replace the earlier (`decode --out X --info X` would leave the
    decoding's record and lose its hypotheses)."""
    written = [(option, Path(out), Path(out).resolve()) for option, out in outputs.items()]
    for i, (option, out, target) in enumerate(written):
        for other, given, source in written[i + 1:]:
            if target == source or target.is_relative_to(source) or source.is_relative_to(
                    target):
                raise InputError(f"{option} {out} and {other} {given} are one path or one "
                                 "holds the other: one would replace the other; write to "
                                 "another path")


def refuse_foreign(directory: str | os.PathLike, patterns: list[str], what: str) -> None:
    """A directory a command writes into may hold only what that command writes there (glob
    `patterns`; names starting with "." are temporary files and locks): anything else is
    another command's (a checkpoint's weights, a run's log) and would be replaced by it or
    mixed into it. One line naming the first such entry."""
    directory = Path(directory)
    if not directory.is_dir():
        return
    for entry in sorted(directory.iterdir()):
        if not entry.name.startswith(".") and not any(fnmatch(entry.name, p) for p in patterns):
            raise InputError(f"{directory}: it holds {entry.name}, which no {what} holds; "
                             "write to a new directory")


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_lines(path: str | os.PathLike, lines: list[str]) -> None:
    write_text(path, "".join(line + "\n" for line in lines))


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_lines(path: str | Path, allow_empty: bool = True) -> list[str]:
    """Read a UTF-8 text file as lines split on "\\n" only (so numbers match `wc -l`/`sed`).

    Bad bytes, or empty lines where they are not allowed, raise an error naming the line. A
    byte-order mark at the start is dropped, with a warning: it is not text (kept, it would
    make the first word of identical files differ, and BLEU with it).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    if raw.startswith(codecs.BOM_UTF8):
        log.warning("%s: dropped a UTF-8 byte-order mark at the start of the file", path)
        raw = raw[len(codecs.BOM_UTF8):]
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, start=1):
        try:
            text = line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as err:
            raise InputError(f"{path}:{number}: not valid UTF-8 ({err.reason} at byte "
                             f"{err.start + 1})") from None
        if not allow_empty and not text.strip():
            raise InputError(f"{path}:{number}: empty line in a parallel corpus")
        out.append(text)
    return out


def read_json(path: str | os.PathLike) -> Any:
    """A JSON result file, or None when no job has written it yet (a killed job leaves none)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not valid UTF-8") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: line {err.lineno}: invalid JSON ({err.msg})") from None


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines log (one object a line), as a killed writer leaves it: an
    incomplete last line (no newline, not JSON) is dropped with a warning; any other line that
    is not a JSON object raises an error naming it."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    lines = raw.split(b"\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            if number == len(lines):  # no newline after it: the writer was killed mid-line
                log.warning("%s: line %d: dropped an incomplete last line", path, number)
                break
            reason = (f"invalid JSON ({err.msg})" if isinstance(err, json.JSONDecodeError)
                      else "not valid UTF-8")
            raise InputError(f"{path}: line {number}: {reason}") from None
        if not isinstance(record, dict):
            raise InputError(f"{path}: line {number}: not a JSON object")
        records.append(record)
    return records

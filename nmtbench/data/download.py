"""Downloads that either finish verified or leave nothing behind.

Each file streams into a temporary file beside its destination while its SHA-256 is computed;
only a complete file whose checksum equals the one pinned in config is renamed into place. Network
hiccups (timeouts, resets, 5xx, 429, a connection cut short) are retried with exponential backoff;
anything else (404, a checksum mismatch) fails at once with one line.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tqdm import tqdm

from nmtbench.errors import InputError
from nmtbench.fileio import atomic_path

log = logging.getLogger(__name__)

BLOCK = 1 << 20
TRANSIENT_HTTP = {408, 425, 429, 500, 502, 503, 504}


class TransientError(Exception):
    """A failure worth retrying."""


def source_url(source: dict[str, Any], file: str) -> str:
    """A `sources` entry's URL for one of its files: base_url / (path or the file name)."""
    return f"{source['base_url'].rstrip('/')}/{source['files'][file].get('path', file)}"


def download(url: str, out: str | Path, sha256: str | None, *, md5: str | None = None,
             retries: int = 5, backoff: float = 2.0, timeout: float = 60.0) -> str:
    """Fetch `url` to `out` and return its SHA-256. The content must match every checksum
    given; where only an MD5 was ever published (sacreBLEU's, torchtext's) that one is checked.
    With neither (not pinned yet) any content is accepted and its SHA-256 logged, to pin."""
    out = Path(out)
    _check_url(url, out)
    if out.is_dir():
        raise InputError(f"{out}: is a directory; --out names the file to write")
    expected = {k: v.lower() for k, v in (("sha256", sha256), ("md5", md5)) if v is not None}
    for kind, value in expected.items():
        if len(value) != hashlib.new(kind).digest_size * 2 or value.strip("0123456789abcdef"):
            raise InputError(f"{out}: the pinned {kind} {value!r} is not a hex digest")
    for attempt in range(retries + 1):
        try:
            with atomic_path(out) as tmp:
                got = _fetch(url, tmp, timeout, out)
                for kind, value in expected.items():
                    if got[kind] != value:
                        raise InputError(f"{out}: checksum mismatch: expected {kind} {value}, "
                                         f"got {got[kind]} (from {url})")
            if not expected:
                log.warning("%s: no checksum pinned in config; its sha256 is %s", out,
                            got["sha256"])
            return got["sha256"]
        except TransientError as err:
            if attempt == retries:
                raise InputError(f"{out}: download from {url} failed after {retries + 1} "
                                 f"attempts: {err}") from None
            wait = backoff * 2**attempt
            log.warning("%s: %s; retrying in %.0f s (%d/%d)", out, err, wait, attempt + 1,
                        retries)
            time.sleep(wait)
    raise AssertionError("unreachable")


def _check_url(url: str, out: Path) -> None:
    """A URL that cannot be fetched (no scheme, no host, a local file that is not one) fails
    at once: retrying it would only wait."""
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # parsed when read: a port out of range raises ValueError
    except ValueError as err:
        raise InputError(f"{out}: malformed URL {url!r} ({err})") from None
    if parts.scheme == "file":
        path = Path(urllib.request.url2pathname(parts.path))
        if not path.is_file():
            raise InputError(f"{out}: {url} is not a file")
    elif parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{out}: malformed URL {url!r} (expected http://, https:// or "
                         "file:// and a host)")


def _fetch(url: str, dest: Path, timeout: float, out: Path) -> dict[str, str]:
    """Stream one attempt into `dest`; return the content's SHA-256 and MD5."""
    digests = {"sha256": hashlib.sha256(), "md5": hashlib.md5(usedforsecurity=False)}
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length is not None else None
            received = 0
            with open(dest, "wb") as f, tqdm(total=total, unit="B", unit_scale=True,
                                             desc=out.name, mininterval=2.0) as bar:
                while block := response.read(BLOCK):
                    f.write(block)
                    for digest in digests.values():
                        digest.update(block)
                    received += len(block)
                    bar.update(len(block))
    except urllib.error.HTTPError as err:
        if err.code in TRANSIENT_HTTP:
            raise TransientError(f"HTTP {err.code} {err.reason}") from None
        raise InputError(f"{out}: {url} answered HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError,
            TimeoutError) as err:
        reason = getattr(err, "reason", None) or err
        raise TransientError(f"{type(err).__name__}: {reason}") from None
    if total is not None and received < total:
        raise TransientError(f"truncated: received {received} of {total} bytes")
    return {kind: digest.hexdigest() for kind, digest in digests.items()}

"""nmtbench.data.download against a local HTTP server: verified, atomic, retried downloads."""

from __future__ import annotations

import hashlib
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from nmtbench.data import download as download_module
from nmtbench.data.download import download, source_url
from nmtbench.errors import InputError
from nmtbench.provenance import file_digest

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Route:
    """What the server answers on one path."""

    body: bytes
    fail_first: int = 0  # answer `fail_code` to this many requests, then serve the body
    fail_code: int = 503
    truncate_to: int | None = None  # send only this many bytes but the full Content-Length
    chunk: int | None = None  # serve slowly: `chunk` bytes every `delay` seconds
    delay: float = 0.0


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass

    def do_GET(self):
        hits = self.server.record(self.path)
        route = self.server.routes.get(self.path)
        if route is None:
            self.send_error(404)
            return
        if hits <= route.fail_first:
            self.send_error(route.fail_code)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(route.body)))
        self.end_headers()
        if route.truncate_to is not None:
            self.wfile.write(route.body[: route.truncate_to])
            self.wfile.flush()
            self.close_connection = True  # cut the connection short of Content-Length
            return
        step = route.chunk or len(route.body)
        try:
            for start in range(0, len(route.body), step):
                self.wfile.write(route.body[start : start + step])
                self.wfile.flush()
                if route.delay:
                    time.sleep(route.delay)
        except (BrokenPipeError, ConnectionResetError):  # the client was killed
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes: dict[str, Route] = {}
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()

    def record(self, path: str) -> int:
        with self._lock:
            self.hits[path] += 1
            return self.hits[path]

    def serve(self, path: str, body: bytes, **kwargs) -> str:
        self.routes[path] = Route(body, **kwargs)
        return self.url(path)

    def url(self, path: str) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}{path}"

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture
def server():
    httpd = _Server()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    """Requests to the local server must not go through a proxy from the environment."""
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")


def _payload(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _leftovers(directory: Path, out: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p != out)


def _one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_good_download_writes_exact_bytes_and_returns_checksum(server, tmp_path):
    """A verified download (several blocks long) lands at `out` byte for byte, nothing else."""
    body = _payload(2 * download_module.BLOCK + 12345)
    url = server.serve("/data.bin", body)
    out = tmp_path / "sub" / "data.bin"
    got = download(url, out, _sha(body), retries=0, backoff=0, timeout=10)
    assert got == _sha(body)
    assert out.read_bytes() == body
    assert file_digest(out) == _sha(body)
    assert _leftovers(out.parent, out) == []
    assert server.hits["/data.bin"] == 1


def test_pinned_checksum_is_case_insensitive(server, tmp_path):
    """A checksum pinned in upper case matches the lower-case digest."""
    body = b"hello\n"
    url = server.serve("/h.txt", body)
    assert download(url, tmp_path / "h.txt", _sha(body).upper(), retries=0) == _sha(body)


def test_checksum_mismatch_is_one_line_and_leaves_nothing(server, tmp_path):
    """A wrong pin fails at once with one line naming the file and both checksums; no file at
    `out` and no temporary file remain."""
    body = _payload(50_000)
    url = server.serve("/c.tgz", body)
    out = tmp_path / "c.tgz"
    wrong = "0" * 64
    with pytest.raises(InputError) as err:
        download(url, out, wrong, retries=3, backoff=0, timeout=10)
    message = _one_line(err)
    assert str(out) in message
    assert wrong in message
    assert _sha(body) in message
    assert not out.exists()
    assert _leftovers(tmp_path, out) == []
    assert server.hits["/c.tgz"] == 1  # a mismatch is not retried


def test_failed_download_keeps_existing_file(server, tmp_path):
    """A failing download never replaces (or deletes) what is already at `out`."""
    url = server.serve("/k.txt", b"new content")
    out = tmp_path / "k.txt"
    out.write_bytes(b"old content")
    with pytest.raises(InputError):
        download(url, out, "1" * 64, retries=0)
    assert out.read_bytes() == b"old content"
    assert _leftovers(tmp_path, out) == []


def test_transient_503_is_retried_then_succeeds(server, tmp_path):
    """Two 503 answers are retried; the third request serves the file."""
    body = _payload(10_000, seed=1)
    url = server.serve("/busy.bin", body, fail_first=2)
    out = tmp_path / "busy.bin"
    assert download(url, out, _sha(body), retries=3, backoff=0, timeout=10) == _sha(body)
    assert out.read_bytes() == body
    assert server.hits["/busy.bin"] == 3
    assert _leftovers(tmp_path, out) == []


def test_429_is_retried(server, tmp_path):
    """Too Many Requests counts as transient."""
    url = server.serve("/rate.bin", b"x", fail_first=1, fail_code=429)
    assert download(url, tmp_path / "rate.bin", _sha(b"x"), retries=1, backoff=0) == _sha(b"x")
    assert server.hits["/rate.bin"] == 2


def test_backoff_doubles_between_attempts(server, tmp_path, monkeypatch):
    """The waits between attempts are backoff, 2*backoff, 4*backoff, ..."""
    waits = []
    monkeypatch.setattr(download_module, "time", SimpleNamespace(sleep=waits.append))
    url = server.serve("/slowstart.bin", b"y", fail_first=3)
    download(url, tmp_path / "slowstart.bin", _sha(b"y"), retries=5, backoff=1.5)
    assert waits == [1.5, 3.0, 6.0]


def test_persistent_503_exhausts_retries(server, tmp_path):
    """A server that never recovers gives one line after retries + 1 attempts; no file."""
    url = server.serve("/down.bin", b"z", fail_first=100)
    out = tmp_path / "down.bin"
    with pytest.raises(InputError) as err:
        download(url, out, None, retries=2, backoff=0, timeout=10)
    message = _one_line(err)
    assert str(out) in message and url in message and "503" in message
    assert server.hits["/down.bin"] == 3
    assert not out.exists()
    assert _leftovers(tmp_path, out) == []


def test_404_fails_at_once(server, tmp_path):
    """A missing URL is not retried: exactly one request, one line naming the URL."""
    url = server.url("/missing.tgz")
    out = tmp_path / "missing.tgz"
    with pytest.raises(InputError) as err:
        download(url, out, None, retries=5, backoff=0, timeout=10)
    message = _one_line(err)
    assert url in message and "404" in message
    assert server.hits["/missing.tgz"] == 1
    assert not out.exists()
    assert _leftovers(tmp_path, out) == []


def test_truncated_body_is_retried_then_fails(server, tmp_path):
    """A body shorter than its Content-Length is retried; after all attempts the error is one
    line mentioning the truncation, and nothing is left at `out`."""
    body = _payload(100_000, seed=2)
    url = server.serve("/cut.bin", body, truncate_to=30_000)
    out = tmp_path / "cut.bin"
    with pytest.raises(InputError) as err:
        download(url, out, _sha(body), retries=2, backoff=0, timeout=10)
    message = _one_line(err)
    assert "truncated" in message
    assert str(out) in message
    assert server.hits["/cut.bin"] == 3  # retries=2: the first attempt and two more
    assert not out.exists()
    assert _leftovers(tmp_path, out) == []


def test_truncated_body_fails_even_without_pin(server, tmp_path):
    """An unpinned download must not accept a short body either."""
    url = server.serve("/cut2.bin", _payload(5_000), truncate_to=10)
    out = tmp_path / "cut2.bin"
    with pytest.raises(InputError, match="truncated"):
        download(url, out, None, retries=0, backoff=0, timeout=10)
    assert not out.exists()


def test_connection_refused_is_retried_then_fails(tmp_path):
    """No server at all: a transient network error, retried, then one line."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/x.bin"
    out = tmp_path / "x.bin"
    with pytest.raises(InputError) as err:
        download(url, out, None, retries=1, backoff=0, timeout=5)
    message = _one_line(err)
    assert "after 2 attempts" in message and url in message
    assert not out.exists()


@pytest.mark.parametrize("url, reason", [
    ("notaurl", "malformed URL 'notaurl' (expected http://, https:// or file:// and a host)"),
    ("ht!tp://x/y", "malformed URL 'ht!tp://x/y' (expected"),
    ("http:///a.tgz", "malformed URL 'http:///a.tgz' (expected"),
    ("http://[::1/a.tgz", "malformed URL 'http://[::1/a.tgz' (Invalid IPv6 URL)"),
    ("http://host:99999/a.tgz", "malformed URL 'http://host:99999/a.tgz' (Port out of range"),
])
def test_a_malformed_url_fails_at_once_with_one_line(tmp_path, monkeypatch, url, reason):
    """Not retried (with the default backoff, five retries of a typo wait a minute)."""
    monkeypatch.setattr(download_module.time, "sleep", lambda s: pytest.fail("retried"))
    out = tmp_path / "a.tgz"
    with pytest.raises(InputError) as err:
        download(url, out, None)
    assert _one_line(err).startswith(f"{out}: {reason}")
    assert not out.exists()


def test_a_file_url_must_name_a_file_and_out_must_not_be_a_directory(tmp_path):
    with pytest.raises(InputError) as err:
        download(f"file://{tmp_path}", tmp_path / "x", None)
    assert _one_line(err) == f"{tmp_path / 'x'}: file://{tmp_path} is not a file"
    source = tmp_path / "source.txt"
    source.write_text("text\n")
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError) as err:
        download(f"file://{source}", tmp_path / "dir", None)
    assert _one_line(err) == f"{tmp_path / 'dir'}: is a directory; --out names the file to write"
    with pytest.raises(InputError, match="the pinned sha256 'abc' is not a hex digest"):
        download(f"file://{source}", tmp_path / "y", "abc")


def test_unpinned_download_accepts_and_returns_checksum(server, tmp_path, caplog):
    """`sha256=None` accepts any content, returns its checksum and logs it for pinning."""
    body = _payload(7_777, seed=3)
    url = server.serve("/new.bin", body)
    out = tmp_path / "new.bin"
    with caplog.at_level("WARNING", logger="nmtbench.data.download"):
        got = download(url, out, None, retries=0)
    assert got == _sha(body)
    assert out.read_bytes() == body
    assert _sha(body) in caplog.text


def test_md5_pin_alone_is_checked(server, tmp_path):
    """Where only an MD5 is pinned it is checked; the SHA-256 is still returned."""
    body = _payload(3_000, seed=6)
    url = server.serve("/m.tgz", body)
    md5 = hashlib.md5(body).hexdigest()
    assert download(url, tmp_path / "m.tgz", None, md5=md5.upper(), retries=0) == _sha(body)
    assert (tmp_path / "m.tgz").read_bytes() == body

    with pytest.raises(InputError) as err:
        download(url, tmp_path / "m2.tgz", None, md5="0" * 32, retries=0)
    message = _one_line(err)
    assert "md5" in message and "0" * 32 in message and md5 in message
    assert not (tmp_path / "m2.tgz").exists()


def test_every_pinned_checksum_must_match(server, tmp_path):
    """A right SHA-256 does not excuse a wrong MD5 (nor the other way round)."""
    body = b"both pinned"
    url = server.serve("/b.txt", body)
    out = tmp_path / "b.txt"
    with pytest.raises(InputError, match="md5"):
        download(url, out, _sha(body), md5="1" * 32, retries=0)
    with pytest.raises(InputError, match="sha256"):
        download(url, out, "2" * 64, md5=hashlib.md5(body).hexdigest(), retries=0)
    assert not out.exists()
    assert _leftovers(tmp_path, out) == []


def _cli(url: str, out: Path, sha256: str) -> list[str]:
    return [sys.executable, "-m", "nmtbench", "download", "--url", url, "--out", str(out),
            "--sha256", sha256, "--retries", "0"]


def test_killed_download_leaves_no_file_and_rerun_completes(server, tmp_path):
    """`kill -9` mid-download leaves nothing at `out` (at most a hidden `.NAME.*.tmp` partial);
    running the command again completes the verified file."""
    body = _payload(3 << 20, seed=4)
    url = server.serve("/big.tgz", body, chunk=64 << 10, delay=0.03)
    out = tmp_path / "downloads" / "big.tgz"
    command = _cli(url, out, _sha(body))
    partial = re.compile(r"\.big\.tgz\..+\.tmp")

    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            if out.parent.is_dir() and any(partial.fullmatch(p.name) and p.stat().st_size > 0
                                           for p in out.parent.iterdir()):
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the download ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    assert not out.exists()
    left = _leftovers(out.parent, out)
    assert left and all(partial.fullmatch(name) for name in left), left
    assert all((out.parent / name).stat().st_size < len(body) for name in left)

    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == body
    assert file_digest(out) == _sha(body)
    assert server.hits["/big.tgz"] == 2


def test_cli_mismatch_exits_2_with_one_error_line(server, tmp_path):
    """The CLI reports a checksum mismatch as one `error:` line and status 2, no traceback."""
    url = server.serve("/cli.bin", b"payload")
    out = tmp_path / "cli.bin"
    done = subprocess.run(_cli(url, out, "f" * 64), cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "checksum mismatch" in errors[0] and str(out) in errors[0]
    assert not out.exists()


def test_source_url_joins_base_and_file():
    """base_url / file, with or without a trailing slash on base_url."""
    files = {"wmt13/dev.tgz": {"sha256": None}}
    for base in ("http://www.statmt.org", "http://www.statmt.org/"):
        assert (source_url({"base_url": base, "files": files}, "wmt13/dev.tgz")
                == "http://www.statmt.org/wmt13/dev.tgz")


def test_source_url_uses_path_override():
    """A file's `path` replaces its name in the URL (the local name stays the key)."""
    source = {"base_url": "https://mirror.example/data/",
              "files": {"en-ro.tgz": {"sha256": None, "path": "v2/release/en-ro-2016.tgz"}}}
    assert source_url(source, "en-ro.tgz") == "https://mirror.example/data/v2/release/en-ro-2016.tgz"


def test_sha256_of_matches_hashlib(tmp_path):
    """sha256_of hashes the whole file, across block boundaries."""
    data = _payload(download_module.BLOCK + 1, seed=5)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_digest(path) == _sha(data)
    (tmp_path / "empty").write_bytes(b"")
    assert file_digest(tmp_path / "empty") == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")

"""Fetching one file over HTTPS, resumably, with its size and hash checked.

Only ``notewell model use`` and ``model get`` call this, when the user runs them: nothing
else in notewell opens a network connection. Standard library only (``urllib``). The bytes
go to ``<dest>.part`` first, with ``<dest>.part.json`` saying which URL and size they belong to;
an interrupted download (a cut connection, Ctrl-C) leaves both, and the next try asks
for the rest with an HTTP ``Range`` request. A server that ignores ``Range`` (a ``200``
with the whole file) restarts the file from its first byte. The received file must have
the size the server announced (``Content-Length``, ``Content-Range`` or the Hugging Face
hub's ``X-Linked-Size``), be within ``SIZE_TOLERANCE`` of the size the caller expects,
and, when the hub states the file's sha256 (``X-Linked-Etag`` on its redirect to the
storage, for files kept with Git LFS), have that sha256; a file that fails is deleted
and refused. Only then is it renamed to ``dest``.

Imports ``model.files``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from notewell.model.files import ModelError, sha256_file

# How far the received size may be from the expected one: the hub shows sizes rounded to
# three digits ("34 MB"), so 5% is wide enough for that and narrow enough to refuse
# another file (the float export is four times the size of the quantized one).
SIZE_TOLERANCE = 0.05
BLOCK = 1 << 20  # bytes read at a time
TIMEOUT = 30.0  # seconds without a byte before a download counts as interrupted
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class DownloadError(ModelError):
    """A download that did not complete or was refused; the message says what happened
    and what to do next. Nothing is switched."""


class Bar(Protocol):
    def advance(self, n: int = 1) -> None: ...

    def close(self) -> None: ...


Progress = Callable[[str, int], Bar]  # (label, total bytes) -> a bar


@dataclass(frozen=True)
class Fetched:
    path: str
    bytes: int
    sha256: str
    hub_sha256: str | None  # the sha256 the server stated, checked against ``sha256``


def check_url(url: str) -> None:
    """HTTPS only, except to this machine (tests serve files on 127.0.0.1)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and _loopback(parts.hostname)):
        return
    raise DownloadError(f"{url} is not an https:// address; notewell downloads models over "
                        "HTTPS only (plain http:// only from 127.0.0.1 or localhost)")


def _loopback(host: str | None) -> bool:
    return host in ("127.0.0.1", "localhost", "::1")


def fetch(url: str, dest: str, expected_bytes: int, *, progress: Progress | None = None,
          label: str = "", timeout: float = TIMEOUT) -> Fetched:
    """Download ``url`` to ``dest`` (resuming ``dest + ".part"``) and check it; raises
    ``DownloadError``. ``expected_bytes`` is the size the file should have, give or take
    ``SIZE_TOLERANCE``."""
    check_url(url)
    part, note = dest + ".part", dest + ".part.json"
    have = _resumable(part, note, url)
    redirects = _Redirects()
    opener = urllib.request.build_opener(redirects)
    request = urllib.request.Request(url, headers={
        "User-Agent": "notewell", "Accept-Encoding": "identity",
        **({"Range": f"bytes={have}-"} if have else {})})
    host = urllib.parse.urlsplit(url).netloc
    try:
        response = opener.open(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        whole = re.match(r"bytes \*/(\d+)$", e.headers.get("Content-Range", "") or "")
        if e.code == 416 and have and whole and int(whole.group(1)) == have:
            # Every byte arrived before the last try stopped: check them.
            return _finish(url, part, note, dest, expected_bytes, have, have,
                           redirects.linked.get("sha256"))
        if e.code == 416 and have:  # the part does not fit the file: start over
            _discard(part, note)
            return fetch(url, dest, expected_bytes, progress=progress, label=label,
                         timeout=timeout)
        raise DownloadError(f"{url} answered HTTP {e.code} {e.reason}: the hub does not "
                            "serve this file now; try again later, or update notewell "
                            "(its catalog names the files)") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise DownloadError(f"cannot reach {host} ({reason}): check the network "
                            "connection and run the command again; nothing was changed"
                            + (" (the part already downloaded is kept)" if have else "")
                            ) from None
    with response:
        start, total = _extent(response, have)
        linked = {**redirects.linked, **_linked(response.headers)}
        if linked.get("size", "").isdigit():
            total = int(linked["size"])
        if total is not None:
            _check_size(url, total, expected_bytes, "the server announces")
        resumed = have if start else 0  # a 200 to a range request: start over, cleanly
        _write_note(note, url, total)
        bar = progress(label or os.path.basename(dest), total or expected_bytes) \
            if progress else None
        try:
            received = _receive(response, part, resumed, bar, url, total)
        finally:
            if bar is not None:
                bar.close()
    return _finish(url, part, note, dest, expected_bytes, received, total,
                   linked.get("sha256"))


def _receive(response, part: str, have: int, bar: Bar | None, url: str,
             total: int | None) -> int:
    """Append the response's body to ``part`` after its first ``have`` bytes; the bytes
    it then holds."""
    received = have
    if bar is not None and have:
        bar.advance(have)
    try:
        with open(part, "r+b" if have else "wb") as f:
            f.seek(have)
            f.truncate()
            while True:
                try:
                    block = response.read(BLOCK)
                except (OSError, ValueError, http.client.HTTPException) as e:
                    # a cut connection, a timeout
                    raise DownloadError(_interrupted(url, received, total, e)) from None
                if not block:
                    return received
                f.write(block)
                received += len(block)
                if bar is not None:
                    bar.advance(len(block))
    except OSError as e:  # the disk: full, or the folder gone
        raise DownloadError(f"cannot write {part}: {e}; make room and run the command "
                            "again to resume it; nothing was changed") from None


def _finish(url: str, part: str, note: str, dest: str, expected_bytes: int, received: int,
            total: int | None, hub_sha: str | None) -> Fetched:
    """Check the whole ``part`` (size announced, size expected, the hub's sha256) and move
    it to ``dest``; a file that fails is deleted."""
    if total is not None and received < total:
        raise DownloadError(_interrupted(url, received, total, "the connection closed"))
    if total is not None and received > total:
        _discard(part, note)
        raise DownloadError(f"{url} sent {received} bytes where it announced {total}; "
                            "the file was deleted: run the command again")
    try:
        _check_size(url, received, expected_bytes, "received")
    except DownloadError:
        _discard(part, note)
        raise
    digest = sha256_file(part)
    if hub_sha is not None and digest != hub_sha:
        _discard(part, note)
        raise DownloadError(f"{url}: the file received has sha256 {digest[:12]}…, the hub "
                            f"states {hub_sha[:12]}…; it was damaged on the way and was "
                            "deleted: run the command again")
    os.replace(part, dest)
    with contextlib.suppress(FileNotFoundError):
        os.remove(note)
    return Fetched(dest, received, digest, hub_sha)


def _resumable(part: str, note: str, url: str) -> int:
    """Bytes of an earlier try at this same URL that can be kept (0: none)."""
    try:
        size = os.path.getsize(part)
        with open(note, encoding="utf-8") as f:
            known = json.load(f)
    except (OSError, ValueError):
        _discard(part, note)
        return 0
    if not isinstance(known, dict) or known.get("url") != url:
        _discard(part, note)  # another revision's bytes: never mixed in
        return 0
    return size


def _write_note(note: str, url: str, total: int | None) -> None:
    os.makedirs(os.path.dirname(note) or ".", mode=0o700, exist_ok=True)
    with open(note, "w", encoding="utf-8") as f:
        json.dump({"url": url, "bytes": total}, f)


def _discard(*files: str) -> None:
    for path in files:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _extent(response, have: int) -> tuple[int, int | None]:
    """Where the body starts in the file and the file's whole size (None: unknown)."""
    length = response.headers.get("Content-Length")
    if response.status == 206:
        found = re.match(r"bytes (\d+)-\d+/(\d+|\*)", response.headers.get(
            "Content-Range", ""))
        if found is None or int(found.group(1)) != have:
            raise DownloadError("the server answered a resumed download with the wrong "
                                "part of the file; run the command again")
        whole = found.group(2)
        return have, int(whole) if whole.isdigit() else None
    return 0, int(length) if length and length.isdigit() else None


def _linked(headers) -> dict:
    """What the Hugging Face hub says of a file kept with Git LFS: its size and sha256."""
    out = {}
    size = headers.get("X-Linked-Size")
    if size:
        out["size"] = size.strip()
    etag = (headers.get("X-Linked-Etag") or "").strip().removeprefix("W/").strip('"')
    if _SHA256.match(etag):
        out["sha256"] = etag
    return out


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows the hub's redirect to its storage, keeping what the redirect said of the
    file (the storage's own answer does not say it), and never to plain http."""

    def __init__(self) -> None:
        self.linked: dict = {}

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.linked.update(_linked(headers))
        check_url(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _check_size(url: str, size: int, expected: int, what: str) -> None:
    if abs(size - expected) > expected * SIZE_TOLERANCE:
        raise DownloadError(f"{url}: {what} {size:,} bytes where notewell expects about "
                            f"{expected:,}; refused (not the file notewell knows)")


def _interrupted(url: str, received: int, total: int | None, why) -> str:
    of = f" of {total:,}" if total else ""
    return (f"the download of {url} stopped after {received:,}{of} bytes ({why}); run the "
            "command again to resume it; nothing was changed")


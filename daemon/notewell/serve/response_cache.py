"""Prepared responses: the daemon's last answers, reused while the index has not changed.

A launcher asks the same query again and again (backspacing, Alfred re-running the
script filter, Raycast re-rendering), and a repeated search costs the daemon as much as a
new one minus the query embedding: 7 ms of the 20 ms a keystroke took at 5,000 chunks
(bench/keystroke.py). A repeat is answered from here in microseconds.

An answer is reused only while ``PRAGMA data_version`` of one connection held for the
purpose is unchanged: SQLite changes it whenever any other connection commits, in this
process (the sync thread) or another (a CLI ``notewell index``), so no write is missed.
Entries are also dropped after ``ttl`` seconds, so nothing time-dependent in an answer
(the "index is N minutes behind" hint) goes stale for long. Only the last 32 are kept: an
Alfred answer of 20 items is about 60 KB of text, and up to four times that in memory as a
Python string with non-Latin-1 characters (256 entries cost the daemon 60 MB).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable


class ResponseCache:
    def __init__(self, connect: Callable[[str], object], max_entries: int = 32,
                 ttl: float = 30.0) -> None:
        self._connect = connect
        self._max = max_entries
        self._ttl = ttl
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[tuple, float, object]] = OrderedDict()
        self._path: str | None = None
        self._conn = None

    def version(self, path: str) -> tuple | None:
        """A token that changes whenever the index file at ``path`` is written to, or
        ``None`` when it cannot be read (then nothing is cached: the search itself will
        say what is wrong)."""
        with self._lock:
            try:
                if path != self._path:
                    self._close()
                    self._conn = self._connect(path)
                    self._path = path
                row = self._conn.execute("PRAGMA data_version").fetchone()  # type: ignore
            except Exception:
                self._close()
                return None
            return (path, row[0])

    def get(self, key: Hashable, version: tuple) -> object | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            stored, at, value = entry
            if stored != version or time.monotonic() - at > self._ttl:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, version: tuple, value: object) -> None:
        with self._lock:
            self._entries[key] = (version, time.monotonic(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        conn, self._conn, self._path = self._conn, None, None
        self._entries.clear()
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()  # type: ignore[attr-defined]

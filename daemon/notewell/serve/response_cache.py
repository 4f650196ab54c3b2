"""Prepared responses: the daemon's last answers, reused while the index has not changed.

A launcher asks the same query again and again (backspacing, Alfred re-running the
script filter, Raycast re-rendering), and a repeated search costs the daemon as much as a
new one minus the query embedding: 7 ms of the 20 ms a keystroke took at 5,000 chunks
(bench/keystroke.py). A repeat is answered from here in microseconds.

An answer is reused only while the index file's ``WriteStamp`` (``index.stamp``: ``PRAGMA
data_version`` of a connection held for the purpose) is unchanged: it moves whenever any
other connection commits, in this process (the sync thread) or another (a CLI ``notewell
index``), so no write is missed. Entries are also dropped after ``ttl`` seconds, so
nothing time-dependent in an answer (the "index is N minutes behind" hint) goes stale for
long. Only the last 32 are kept: an Alfred answer of 20 items is about 60 KB of text, and
up to four times that in memory as a Python string with non-Latin-1 characters (256
entries cost the daemon 60 MB).

May import ``index.stamp`` and ``clock``; used by ``handlers``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.index.stamp import WriteStamp


class ResponseCache:
    def __init__(self, max_entries: int = 32, ttl: float = 30.0,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._max = max_entries
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[tuple, float, object]] = OrderedDict()
        self._stamp = WriteStamp()
        self._path: str | None = None

    def version(self, path: str) -> tuple | None:
        """A token that changes whenever the index file at ``path`` is written to, or
        ``None`` when it cannot be read (then nothing is cached: the search itself will
        say what is wrong)."""
        with self._lock:
            version = self._stamp.version(path)
            if version is None or path != self._path:
                # Another file, or none readable: nothing kept can be reused.
                self._entries.clear()
                self._path = path if version is not None else None
            return version

    def get(self, key: Hashable, version: tuple) -> object | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            stored, at, value = entry
            if stored != version or self._clock.monotonic() - at > self._ttl:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, version: tuple, value: object) -> None:
        with self._lock:
            self._entries[key] = (version, self._clock.monotonic(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def close(self) -> None:
        with self._lock:
            self._stamp.close()
            self._path = None
            self._entries.clear()

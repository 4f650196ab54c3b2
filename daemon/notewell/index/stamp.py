"""A stamp that moves whenever an index file is written to, by anyone.

``PRAGMA data_version`` on a connection changes whenever another connection commits to the
same file, in this process (the daemon's sync thread) or another (a CLI ``notewell
index``). So ``WriteStamp`` keeps one connection of its own, used for nothing else: no
commit of its own could hide one from it. The daemon's prepared responses
(``serve.response_cache``) are reused only while it stands still.

May import ``index.database`` (for ``connect``) and nothing else of notewell.
"""

from __future__ import annotations

import contextlib
import threading

import apsw

from notewell.index.schema import connect


class WriteStamp:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: str | None = None
        self._conn: apsw.Connection | None = None

    def version(self, path: str) -> tuple | None:
        """A token that changes whenever any connection commits to the index file at
        ``path``; ``None`` when it cannot be read. A new ``path`` replaces the old one."""
        with self._lock:
            try:
                if path != self._path:
                    self._close()
                    self._conn = connect(path)
                    self._path = path
                row = self._conn.execute("PRAGMA data_version").fetchone()
            except Exception:
                self._close()
                return None
            return (path, row[0])

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        conn, self._conn, self._path = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

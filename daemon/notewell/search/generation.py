"""Index generations: one index file with its searcher, taken whole by each request.

A ``Generation`` pairs an ``Index`` with the ``Searcher`` (and the caches) built on it; the
pair never changes, so a request that takes one generation at its start and uses it
throughout never looks up the chunk ids of one file in another. ``Generations`` owns the
current one: switching to a new file is one reference assignment under its lock. The one
it replaces is retired: closed, and its file deleted, when the last request holding it
lets go (a count of holders), never after a fixed time.

May import ``index`` and ``search.searcher``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from notewell.index import store
from notewell.index.database import Index
from notewell.search.searcher import Searcher

log = logging.getLogger(__name__)
T = TypeVar("T")
_numbers = itertools.count(1)


class Generation:
    """One index file and what reads it. ``index``, ``searcher`` and ``number`` never
    change; the holder count and the derived values (``remember``) are under ``_lock``."""

    def __init__(self, index: Index, searcher: Searcher) -> None:
        self.index = index
        self.searcher = searcher
        self.number = next(_numbers)  # tells generations apart in logs and tests
        self._lock = threading.Lock()
        self._holders = 0
        self._retired = False
        self._delete_file = False
        self._on_closed: Callable[[Generation], None] | None = None
        self.closed = False
        self._derived: dict[str, tuple[object, object]] = {}

    def remember(self, name: str, stamp: object, make: Callable[[], T]) -> T:
        """The value ``make`` derives from this index as of ``stamp`` (the index's content
        stamp), made again only when the stamp moves. Two threads may make it at the same
        time; the value is never changed once made, so either copy serves."""
        with self._lock:
            kept = self._derived.get(name)
        if kept is not None and kept[0] == stamp:
            return kept[1]  # type: ignore[return-value]
        value = make()
        with self._lock:
            self._derived[name] = (stamp, value)
        return value

    def _hold(self) -> None:
        with self._lock:
            if self.closed:  # Generations hands out only its current one, never closed
                raise RuntimeError(f"index generation {self.number} is closed")
            self._holders += 1

    def _release(self) -> None:
        with self._lock:
            self._holders -= 1
            idle = self._retired and self._holders == 0 and not self.closed
        if idle:
            self._close()

    def _retire(self, delete_file: bool, on_closed: Callable[[Generation], None]) -> None:
        with self._lock:
            self._retired, self._delete_file, self._on_closed = True, delete_file, on_closed
            idle = self._holders == 0 and not self.closed
        if idle:
            self._close()

    def _close(self) -> None:
        # Runs once, on the thread that saw the last holder go (or retired it idle).
        with self._lock:
            if self.closed:
                return
            self.closed = True
        try:
            self.index.close()
        except Exception:
            log.exception("closing the replaced index %s failed", self.index.path)
        if self._delete_file:
            with contextlib.suppress(OSError):
                store.remove_file(self.index.path)
        if self._on_closed is not None:
            self._on_closed(self)


class Generations:
    """The owner of the current generation. Requests ``use()`` it; ``switch`` replaces it;
    retired generations close as their last holder lets go."""

    def __init__(self, first: Generation, index_dir: str) -> None:
        self.index_dir = index_dir
        self._lock = threading.Lock()  # guards _current and _retired
        self._current = first
        self._retired: list[Generation] = []  # replaced, still held by a request

    @property
    def current(self) -> Generation:
        """The generation new requests get. Not held: for one-thread callers and status."""
        return self._current

    @contextlib.contextmanager
    def use(self) -> Iterator[Generation]:
        """Hold the current generation for the ``with`` block: it stays open (and its file
        on disk) until the block ends, whatever replaces it meanwhile."""
        with self._lock:  # no switch between reading it and holding it
            gen = self._current
            gen._hold()
        try:
            yield gen
        finally:
            gen._release()

    def switch(self, new: Generation) -> Generation:
        """Make ``new`` current and retire the one it replaces (returned): closed, and its
        file deleted when it is not ``new``'s, once no request holds it."""
        with self._lock:
            old, self._current = self._current, new
            self._retired.append(old)
        delete = old.index.path not in (new.index.path, ":memory:")
        old._retire(delete, self._closed)
        return old

    def close(self) -> None:
        """Retire the current generation too (at shutdown): closed once idle, kept on disk."""
        with self._lock:
            gen = self._current
        gen._retire(False, lambda _: None)

    def _closed(self, gen: Generation) -> None:
        with self._lock:
            self._retired.remove(gen)
            idle, keep = not self._retired, self._current.index.path
        if idle and any(path == keep for _, path in store.generations(self.index_dir)):
            # Older files nobody opened (several rebuilds between two looks) go too.
            with contextlib.suppress(OSError):
                store.remove_old(self.index_dir, keep=keep)

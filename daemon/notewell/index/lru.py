"""A small least-recently-used map, safe to share between the daemon's worker threads.

What typing asks for keystroke after keystroke is kept in these: chunks' index terms
(``reads``), query vectors, nearest passages and notes' mean vectors (``search``). One map
per kind, shared by every thread: per-thread copies grew the daemon by 130 MB under load
at 100k chunks. Imports nothing of notewell.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class SharedLRU(Generic[K, V]):
    """A small least-recently-used map, safe to share between the worker threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def get_many(self, keys: Iterable[K]) -> dict[K, V]:
        with self._lock:
            found = {k: self._items[k] for k in keys if k in self._items}
            for k in found:
                self._items.move_to_end(k)
        return found

    def put_many(self, items: dict[K, V]) -> None:
        with self._lock:
            self._items.update(items)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

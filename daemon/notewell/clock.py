"""The time as notewell reads it: one ``Clock`` passed to whatever decides by time.

The watcher's debounce, the background loop's backoff and lag, the prepared responses'
expiry, the socket's frame and idle deadlines, the daemon's stop budget and relative
dates ("7d") read a ``Clock`` rather than the ``time`` module, so tests
drive them with a fake one instead of sleeping through wall-clock windows. Imports
nothing of notewell.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Where the watcher and the daemon's background loop read the time."""

    def monotonic(self) -> float: ...  # for intervals: debounce, backoff, delays

    def time(self) -> float: ...  # wall clock, for people: since when an index lags


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


SYSTEM_CLOCK: Clock = SystemClock()

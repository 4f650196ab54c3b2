"""Progress lines for long work (index builds, downloads) on stderr, with rate and time
left.

On a terminal the line redraws in place; elsewhere (logs, CI) a line is printed at most
every few seconds so logs stay readable. ``Relay`` hands the same progress to someone
else to show: the daemon sends it to the command that asked for the work."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from notewell.clock import SYSTEM_CLOCK, Clock


class Progress:
    def __init__(self, label: str, total: int, unit: str = "notes",
                 stream: TextIO | None = None, every: float = 2.0,
                 clock: Clock = SYSTEM_CLOCK, scale: float = 1) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.scale = scale  # counts are divided by it when shown (bytes as MB: 1e6)
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = 0.1 if self.tty else every
        self.done = 0
        self.clock = clock  # the rate, the time left, and how often a line is printed
        self.start = clock.monotonic()
        self._last = 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = self.clock.monotonic()
        if now - self._last >= self.every or self.done >= self.total:
            self._last = now
            self._draw(now)

    def line(self, now: float | None = None) -> str:
        now = now or self.clock.monotonic()
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "-" * (width - filled)
        if self.scale == 1:
            counts = f"{self.done}/{self.total}"
        else:
            counts = f"{self.done / self.scale:,.1f}/{self.total / self.scale:,.1f}"
        return (f"{self.label} [{bar}] {counts} {self.unit} "
                f"{rate / self.scale:,.1f}/s, {_clock(left)} left")

    def _draw(self, now: float) -> None:
        if self.tty:
            self.stream.write("\r" + self.line(now) + "\x1b[K")
        else:
            self.stream.write(self.line(now) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.total:
            self.stream.write("\n")
            self.stream.flush()


class Relay:
    """Progress as events ``{"label", "done", "total"}`` for ``emit``: at each whole percent
    and at the end, so a long sync sends about a hundred, whatever its size."""

    def __init__(self, label: str, total: int, emit: Callable[[dict], None]) -> None:
        self.label, self.total, self.emit = label, total, emit
        self.done = 0
        self._percent = -1

    def advance(self, n: int = 1) -> None:
        self.done += n
        percent = self.done * 100 // self.total if self.total else 100
        if percent > self._percent:
            self._percent = percent
            self.emit({"label": self.label, "done": self.done, "total": self.total})

    def close(self) -> None:
        pass


def _clock(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    return f"{seconds // 60}:{seconds % 60:02d}"

"""Dates as people and agents write them, read into spans of Unix seconds.

Accepted: an ISO date (``2025-03-01``), a month (``2025-06``: the whole month), a year
(``2025``), an ISO date and time (``2025-03-01T14:30``, with or without a UTC offset),
``today``, ``yesterday``, and a time ago: ``7d``, ``2w``, ``3m``, ``1y`` (days, weeks,
calendar months, calendar years before the clock's now). Calendar dates are read in local
time unless a time zone is given, so "2025-03-01" is that day as the user lived it.

A filter reads a span as a half-open bound: ``modified_after=X`` keeps notes modified at
or after X's start, ``modified_before=X`` those modified before X's start, so
``after=2025-06, before=2025-07`` is exactly June. Pure computation; imports only
``clock``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

from notewell.clock import SYSTEM_CLOCK, Clock

ACCEPTED = ("an ISO date (2025-03-01), a month (2025-06), a year (2025), an ISO date and "
            "time (2025-03-01T14:30), today, yesterday, or a time ago: 7d, 2w, 3m, 1y "
            "(days, weeks, months, years)")

_YEAR = re.compile(r"(\d{4})")
_MONTH = re.compile(r"(\d{4})-(\d{1,2})")
_DAY = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_AGO = re.compile(r"(\d{1,5})\s*(d|w|m|y)")


class DateError(ValueError):
    """A date that cannot be read; the message names it and shows the accepted forms."""

    def __init__(self, text: str, name: str | None = None) -> None:
        shown = text if len(text) <= 40 else text[:40] + "…"
        where = f"{name}: " if name else ""
        super().__init__(f"{where}cannot read {shown!r} as a date; use {ACCEPTED}")
        self.text = text
        self.name = name


@dataclass(frozen=True)
class Span:
    """``[start, end)`` in Unix seconds."""

    start: float
    end: float


def parse(text: str, clock: Clock = SYSTEM_CLOCK, tz: tzinfo | None = None,
          name: str | None = None) -> Span:
    """The span ``text`` names. ``tz``: the zone calendar dates are read in (default: the
    machine's local time); ``name``: the argument, for the error message."""
    s = text.strip().lower() if isinstance(text, str) else ""
    if not s:
        raise DateError(str(text), name)
    now = datetime.fromtimestamp(clock.time(), tz)
    try:
        if s in ("today", "yesterday"):
            day = now.date() - timedelta(days=1 if s == "yesterday" else 0)
            return _days(day, day + timedelta(days=1), tz)
        if m := _AGO.fullmatch(s):
            start = _ago(now, int(m.group(1)), m.group(2))
            return Span(start.timestamp(), now.timestamp())
        if m := _DAY.fullmatch(s):
            day = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            return _days(day, day + timedelta(days=1), tz)
        if m := _MONTH.fullmatch(s):
            first = date(int(m.group(1)), int(m.group(2)), 1)
            return _days(first, _add_months(first, 1), tz)
        if m := _YEAR.fullmatch(s):
            first = date(int(m.group(1)), 1, 1)
            return _days(first, date(first.year + 1, 1, 1), tz)
        if "t" in s or " " in s:
            moment = datetime.fromisoformat(s.upper().replace("Z", "+00:00"))
            if moment.tzinfo is None and tz is not None:
                moment = moment.replace(tzinfo=tz)
            return Span(moment.timestamp(), moment.timestamp() + 60)
    except (ValueError, OverflowError, OSError):
        pass
    raise DateError(text, name)


def bound(value: str | float | int | None, clock: Clock = SYSTEM_CLOCK,
          tz: tzinfo | None = None, name: str | None = None) -> float | None:
    """A filter bound in Unix seconds: the start of the span ``value`` names, a number
    taken as Unix seconds as it is, ``None`` for no bound."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise DateError(str(value), name)
    if isinstance(value, (int, float)):
        return float(value)
    return parse(value, clock, tz, name).start


def _days(first: date, after: date, tz: tzinfo | None) -> Span:
    return Span(_midnight(first, tz), _midnight(after, tz))


def _midnight(day: date, tz: tzinfo | None) -> float:
    # A naive datetime's timestamp() is local time with the day's own UTC offset (DST).
    return datetime(day.year, day.month, day.day, tzinfo=tz).timestamp()


def _ago(now: datetime, n: int, unit: str) -> datetime:
    if unit in ("d", "w"):
        return now - timedelta(days=n * (7 if unit == "w" else 1))
    months = n if unit == "m" else 12 * n
    return _add_months(now, -months)


def _add_months(when, months: int):
    """``when`` moved by whole calendar months, the day clamped to the month's length
    (31 March minus one month is 28 or 29 February)."""
    index = when.year * 12 + (when.month - 1) + months
    year, month = divmod(index, 12)
    month += 1
    if not 1 <= year <= 9999:
        raise ValueError("year out of range")
    last = (date(year + (month == 12), month % 12 + 1, 1) - timedelta(days=1)).day
    return when.replace(year=year, month=month, day=min(when.day, last))

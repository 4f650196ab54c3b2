"""Dates as agents and people write them: ISO days, months, years, times ago."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from notewell.search import dates
from reliability_helpers import FakeClock

UTC = timezone.utc
# 2025-03-31 12:00 UTC: month arithmetic must clamp the day (no 31 February).
NOW = datetime(2025, 3, 31, 12, 0, tzinfo=UTC).timestamp()


def ts(*args) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


def parse(text: str) -> dates.Span:
    return dates.parse(text, FakeClock(NOW), tz=UTC)


@pytest.mark.parametrize(("text", "start", "end"), [
    ("2025-03-01", ts(2025, 3, 1), ts(2025, 3, 2)),
    ("2025-3-1", ts(2025, 3, 1), ts(2025, 3, 2)),
    ("2025-06", ts(2025, 6, 1), ts(2025, 7, 1)),
    ("2025-12", ts(2025, 12, 1), ts(2026, 1, 1)),
    ("2024-02", ts(2024, 2, 1), ts(2024, 3, 1)),
    ("2025", ts(2025, 1, 1), ts(2026, 1, 1)),
    (" 2025 ", ts(2025, 1, 1), ts(2026, 1, 1)),
    ("today", ts(2025, 3, 31), ts(2025, 4, 1)),
    ("Yesterday", ts(2025, 3, 30), ts(2025, 3, 31)),
    ("2025-03-01T14:30", ts(2025, 3, 1, 14, 30), ts(2025, 3, 1, 14, 31)),
    ("2025-03-01T14:30:00Z", ts(2025, 3, 1, 14, 30), ts(2025, 3, 1, 14, 31)),
])
def test_calendar_forms_name_their_whole_span(text, start, end):
    assert parse(text) == dates.Span(start, end)


@pytest.mark.parametrize(("text", "start"), [
    ("7d", ts(2025, 3, 24, 12)),
    ("2w", ts(2025, 3, 17, 12)),
    ("1m", ts(2025, 2, 28, 12)),  # clamped: February has no 31st
    ("3m", ts(2024, 12, 31, 12)),
    ("13m", ts(2024, 2, 29, 12)),  # a leap year's February
    ("1y", ts(2024, 3, 31, 12)),
    ("0d", ts(2025, 3, 31, 12)),
    ("7D", ts(2025, 3, 24, 12)),
])
def test_times_ago_count_back_from_the_clocks_now(text, start):
    assert parse(text) == dates.Span(start, NOW)


def test_times_ago_follow_the_injected_clock():
    clock = FakeClock(NOW)
    first = dates.parse("7d", clock, tz=UTC)
    clock.advance(86_400)
    assert dates.parse("7d", clock, tz=UTC).start == first.start + 86_400


@pytest.mark.parametrize("text", [
    "", "  ", "last week", "2025-13", "2025-02-30", "7x", "d7", "-7d", "2025/03/01",
    "12025", "99999999d", "March", "2025-03-01T25:00", "1e9", "x" * 500,
])
def test_unreadable_dates_raise_an_error_that_shows_the_accepted_forms(text):
    with pytest.raises(dates.DateError) as e:
        parse(text)
    message = str(e.value)
    for form in ("2025-03-01", "2025-06", "2025", "7d", "2w", "3m", "1y"):
        assert form in message
    assert len(message) < 400  # a long input is cut in the message


def test_the_error_names_the_argument():
    with pytest.raises(dates.DateError, match=r"^modified_after: cannot read 'soon'"):
        dates.parse("soon", name="modified_after")


def test_bounds_are_span_starts_numbers_stay_and_none_is_no_bound():
    clock = FakeClock(NOW)
    assert dates.bound("2025-06", clock, tz=UTC) == ts(2025, 6, 1)
    assert dates.bound(1_700_000_000, clock) == 1_700_000_000.0
    assert dates.bound(12.5, clock) == 12.5
    assert dates.bound(None, clock) is None
    with pytest.raises(dates.DateError):
        dates.bound(True, clock)


def test_local_time_is_the_default_zone():
    span = dates.parse("2025-03-01", FakeClock(NOW))
    local = datetime(2025, 3, 1).astimezone()
    assert span.start == local.timestamp()
    assert span.end - span.start in (82_800, 86_400, 90_000)  # 23, 24 or 25 hours (DST)
    assert timedelta(seconds=span.end - span.start) <= timedelta(hours=25)

"""The notes a query's filters allow: ``#tag`` (nested tags included), ``in:source``, and
dates: modified (typed as ``after:``, ``before:``, ``since:`` or given as arguments) and
created (``created:``, where the source knows it).

Filters restrict both retrievers before ranking, so a filtered search is exact (one that
admits most passages filters the unfiltered retrievers' deeper best instead, with the same
results: ``Searcher.broad``); a filter that matches nothing says so instead of being
dropped. May import
``search.query``, ``search.dates`` and the read interface (``index.reads.Reads``); no SQL.
"""

from __future__ import annotations

import dataclasses

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.index.reads import Reads
from notewell.search import dates
from notewell.search.query import Query

CREATED_HELP = ("only Bear notes and notes with 'created' or 'date' in their frontmatter "
                "know when they were created")


def with_dates(q: Query, clock: Clock = SYSTEM_CLOCK) -> Query:
    """``q`` with its typed date filters read into bounds (tightening any given as
    arguments): ``after:X``/``since:X`` from X's start, ``before:X`` until X's start,
    ``created:X`` within X's span. Raises ``dates.DateError`` naming the filter (its
    message lists the accepted forms): a filter that cannot be read is never dropped."""
    if not q.dates:
        return q
    after, before = q.modified_after, q.modified_before
    c_after, c_before = q.created_after, q.created_before
    for name, text in q.dates:
        span = dates.parse(text, clock, name=f"{name}:{text}")
        if name in ("after", "since"):
            after = span.start if after is None else max(after, span.start)
        elif name == "before":
            before = span.start if before is None else min(before, span.start)
        else:
            c_after = span.start if c_after is None else max(c_after, span.start)
            c_before = span.end if c_before is None else min(c_before, span.end)
    return dataclasses.replace(q, modified_after=after, modified_before=before,
                               created_after=c_after, created_before=c_before, dates=())


def allowed(q: Query, reads: Reads) -> tuple[set[int] | None, list[str]]:
    """The note rows the query's filters allow (``None``: no filter) and notices for
    filters that match nothing."""
    if not q.filtered:
        return None, []
    found: set[int] | None = None
    notices = []
    for tag in q.tags:
        ids = reads.tagged(tag)
        if not ids:
            notices.append(f"No notes are tagged #{tag}.")
        found = ids if found is None else found & ids
    if q.sources:
        known = reads.sources()
        for name in q.sources:
            if name not in known:
                notices.append(f"No source is named {name!r} (in:{name}).")
        ids = set().union(*map(reads.in_source, q.sources))
        found = ids if found is None else found & ids
    if q.modified_after is not None or q.modified_before is not None:
        ids = reads.modified_between(q.modified_after, q.modified_before)
        if not ids:
            notices.append("No note was modified in that time.")
        found = ids if found is None else found & ids
    if q.created_after is not None or q.created_before is not None:
        ids = reads.created_between(q.created_after, q.created_before)
        if not ids:
            notices.append(f"No note was created in that time ({CREATED_HELP}).")
        else:
            undated = reads.undated_created()
            if undated:
                notices.append(f"created: leaves out {undated} note"
                               f"{'s' if undated != 1 else ''} without a creation date "
                               f"({CREATED_HELP}).")
        found = ids if found is None else found & ids
    if found is not None and not found and not notices:
        notices.append("No note matches all of these filters together.")
    return found, notices

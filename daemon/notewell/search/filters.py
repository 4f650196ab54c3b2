"""The notes a query's filters allow: ``#tag`` (nested tags included), ``in:source`` and
the modification dates given as arguments.

Filters restrict both retrievers before ranking, never after, so a filtered search is
exact; a filter that matches nothing says so instead of being dropped. May import
``search.query`` and the read interface (``index.reads.Reads``); no SQL.
"""

from __future__ import annotations

from notewell.index.reads import Reads
from notewell.search.query import Query


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
        ids = set()
        for name in q.sources:
            ids |= reads.in_source(name)
        found = ids if found is None else found & ids
    if q.modified_after is not None or q.modified_before is not None:
        ids = reads.modified_between(q.modified_after, q.modified_before)
        if not ids:
            notices.append("No note was modified in that time.")
        found = ids if found is None else found & ids
    if found is not None and not found and not notices:
        notices.append("No note matches all of these filters together.")
    return found, notices

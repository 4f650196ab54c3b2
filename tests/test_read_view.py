"""A request reads through one view: the freshness stamps are read once, at its start, and
which side (an in-memory copy or SQLite) answers each read is fixed then. Getters of the
copies load nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import apsw
from index_helpers import current_copies
from notewell.index.copy_reads import CopyReads
from notewell.index.reads import SqlReads
from notewell.search.query import parse

# What the copies and caches follow: ``sql.freshness`` reads all three in one statement.
FRESHNESS = ("data_version", "chunks_epoch", "vectors_epoch")
QUERIES = ["sourdough bread", "lisbon tram", "postg", "walnut", "#food bread",
           "in:notes vacuum", "banana walnuts loaf"]


@contextmanager
def counting(db: apsw.Connection) -> Iterator[list[str]]:
    """The freshness statements run on ``db`` inside the block."""
    seen: list[str] = []

    def trace(cursor, statement, bindings) -> bool:
        if any(word in statement for word in FRESHNESS):
            seen.append(statement)
        return True

    db.exec_trace = trace
    try:
        yield seen
    finally:
        db.exec_trace = None


def freshness_per_search(engine) -> list[int]:
    with engine.reading() as view:
        view.search("warm up")
    counts = []
    for q in QUERIES:
        with counting(engine.index.db) as seen, engine.reading() as view:
            assert view.search(q) is not None
        counts.append(len(seen))
    return counts


def test_a_search_on_a_warm_engine_reads_the_stamps_once(engine):
    """As a daemon: both copies loaded. Before the view, one search ran 18-25 (demo notes)."""
    engine.index.warm_vectors(wait=True)
    engine.index.warm_keywords(wait=True)
    with engine.reading() as view:
        assert isinstance(view.reads, CopyReads)  # the copies answer
    assert max(freshness_per_search(engine)) <= 1


def test_a_search_from_sqlite_reads_the_stamps_once(engine):
    """As a one-shot command: no copy. Before the view, 11 per search."""
    engine.index.copies.settings.vectors = False
    engine.index.copies.settings.keywords = False
    with engine.reading() as view:
        assert type(view.reads) is SqlReads
    assert max(freshness_per_search(engine)) <= 1


def test_a_view_keeps_the_side_it_took_at_its_start(engine):
    engine.index.warm_vectors(wait=True)
    engine.index.warm_keywords(wait=True)
    with engine.reading() as view:
        engine.index.copies.settings.keywords = False  # as if the copy went stale now
        engine.index.copies.settings.vectors = False
        with counting(engine.index.db) as seen:
            hits = view.search("sourdough bread").hits
        assert hits and not seen  # no stamp read again, the copies still answer
        terms = view.searcher.query_terms(parse("bread"))
        assert view.reads.scoring_copy(terms, view.searcher.ranking.bm25_columns) is not None
    with engine.reading() as later:
        assert type(later.reads) is SqlReads  # a new request decides again


def test_the_current_copies_load_nothing(engine):
    state = engine.index.copies.state
    assert current_copies(engine.index).keywords is None and state()["keywords"] == "not loaded"
    engine.index.warm_keywords(wait=True)
    assert current_copies(engine.index).keywords is not None and state()["keywords"] == "loaded"

"""Dates typed in the query box: ``after:``, ``before:``, ``since:`` (modified) and
``created:``, read with ``search.dates`` on the engine's clock, combined with ``#tag``
and ``in:``; an unreadable one is a notice with the accepted forms, never ignored."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime

import pytest
from index_helpers import current_copies
from notewell import config
from notewell.engine import Engine
from notewell.launcher import alfred
from notewell.notes import Hit
from notewell.search import dates, filters
from notewell.search.query import parse
from reliability_helpers import FakeClock

DAY = 86_400.0
NOW = time.mktime((2025, 6, 15, 12, 0, 0, 0, 0, -1))  # local noon, as the user lives it


def local(y: int, m: int, d: int) -> float:
    return datetime(y, m, d).timestamp()


def test_parse_keeps_typed_dates_apart_from_the_words():
    q = parse("after:2025-03 #work Since:7d vacuum created:2024 before:2025-06 ")
    assert q.text == "vacuum" and q.words == ("vacuum",) and q.tags == ("work",)
    assert q.dates == (("after", "2025-03"), ("since", "7d"), ("created", "2024"),
                       ("before", "2025-06"))
    assert q.filtered and q.dated
    # Only name:value is a filter: a bare "after" is a word.
    assert parse("after the storm").words == ("after", "the", "storm")


def test_with_dates_reads_spans_and_tightens_bounds():
    clock = FakeClock(NOW)
    q = filters.with_dates(parse("after:2025-03 before:2025-06 since:30d x"), clock)
    assert q.modified_after == NOW - 30 * DAY  # the later of March 1st and 30 days ago
    assert q.modified_before == local(2025, 6, 1)
    assert q.dates == () and q.dated
    c = filters.with_dates(parse("created:2024 x"), clock)
    assert (c.created_after, c.created_before) == (local(2024, 1, 1), local(2025, 1, 1))
    with pytest.raises(dates.DateError) as e:
        filters.with_dates(parse("since:7x x"), clock)
    assert str(e.value).startswith("since:7x: cannot read") and "2025-03-01" in str(e.value)


@pytest.fixture
def dated_engine(notes_config, notes_dir, fake_embedder, home):
    # Modified: vacuum 3 days ago, bread 40 days ago, lisbon last year, undo 10 days ago.
    ages = {"db/postgres-vacuum.md": 3, "kitchen/banana-bread.md": 40,
            "travel/lisbon.md": 400, "git/undo-commit.md": 10}
    for rel, days in ages.items():
        os.utime(notes_dir / rel, (NOW - days * DAY, NOW - days * DAY))
    (notes_dir / "kitchen" / "banana-bread.md").write_text(
        "---\ncreated: 2023-05-02\n---\n" + (notes_dir / "kitchen" / "banana-bread.md")
        .read_text())
    os.utime(notes_dir / "kitchen" / "banana-bread.md", (NOW - 40 * DAY, NOW - 40 * DAY))
    e = Engine(notes_config, embedder=fake_embedder, clock=FakeClock(NOW))
    e.sync()
    yield e
    e.close()


def ids(result):
    return [h.note_id for h in result.hits]


def test_since_after_before_filter_on_modified(dated_engine):
    e = dated_engine
    with e.reading() as view:
        assert set(ids(view.search("since:7d postgres"))) == {"notes:db/postgres-vacuum.md"}
        assert ids(view.search("since:7d bread", mode="bm25")) == []
        assert set(ids(view.search("since:2w"))) == {"notes:db/postgres-vacuum.md",
                                                  "notes:git/undo-commit.md"}
        assert set(ids(view.search("before:2025 lisbon"))) == {"notes:travel/lisbon.md"}
        assert ids(view.search("after:2025 lisbon", mode="bm25")) == []


def test_an_empty_query_lists_the_span_newest_first(dated_engine):
    with dated_engine.reading() as view:
        assert ids(view.search("since:3m")) == [
            "notes:db/postgres-vacuum.md", "notes:git/undo-commit.md",
            "notes:kitchen/banana-bread.md"]


def test_dates_combine_with_tags_and_sources(dated_engine):
    e = dated_engine
    with e.reading() as view:
        assert ids(view.search("#recipes since:3m")) == ["notes:kitchen/banana-bread.md"]
        assert ids(view.search("#recipes since:1w")) == []  # notice: no note in that time
        assert ids(view.search("in:notes since:5d")) == ["notes:db/postgres-vacuum.md"]
    # Typed and given bounds tighten each other.
    with e.reading() as view:
        assert ids(view.search("since:3m", modified_before="2w")) == [
            "notes:kitchen/banana-bread.md"]


def test_an_unreadable_date_is_a_notice_never_a_silent_fallback(dated_engine):
    with dated_engine.reading() as view:
        r = view.search("since:7x postgres")
    assert r.hits == [] and len(r.notices) == 1
    assert "cannot read '7x'" in r.notices[0] and "2w" in r.notices[0]
    (item,) = json.loads(alfred.results_feedback(r.hits, r.notices, "since:7x postgres")
                         )["items"]
    assert item["title"].startswith("since:7x: cannot read") and "2025-06" in item["subtitle"]


def test_created_uses_frontmatter_and_says_what_it_leaves_out(dated_engine):
    with dated_engine.reading() as view:
        r = view.search("created:2023")
    assert ids(r) == ["notes:kitchen/banana-bread.md"]
    assert any("without a creation date" in n for n in r.notices)
    with dated_engine.reading() as view:
        r = view.search("created:2020")
    assert r.hits == [] and "No note was created in that time" in r.notices[0]


def test_subtitle_shows_the_date_while_a_date_filter_is_on():
    hit = Hit(note_id="n:a", title="A", source="n", kind="markdown", url="file:///a",
              path="/a", tags=[], heading_path="Sec", snippet="s", passage="p", score=1.0,
              modified=local(2025, 3, 4) + 3600)
    assert alfred.hit_item(hit, "q", dated=True)["subtitle"].startswith("2025-03-04 · Sec")
    assert alfred.hit_item(hit, "q")["subtitle"].startswith("Sec")


def test_bear_creation_dates_are_filterable(tmp_path, home, fake_embedder):
    from bear_fixture import build

    fx = build(str(tmp_path / "bear" / "database.sqlite"))
    config.save(config.Config(sources=(config.SourceConfig("bear", "bear", fx.path),)))
    e = Engine(config.load(), embedder=fake_embedder, clock=FakeClock(NOW))
    try:
        e.sync()
        # The sourdough note was created in July 2023; the others in November 2023.
        with e.reading() as view:
            r = view.search("created:2023-07")
        assert ids(r) == ["bear:A1B2C3D4-0001-4000-8000-000000000001"]
        assert not any("without a creation date" in n for n in r.notices)
    finally:
        e.close()
        fx.close()


BROAD = ["since:1y postgres vacuum", "since:2m bread", "since:2m", "after:2024 how to undo",
         "before:2025-06-14 tram lisbon", "since:1y #recipes banana", "since:7d postgres",
         "since:1y zzz nothing"]


def _ranked(engine, ranking, raw, mode):
    from notewell.search.searcher import Searcher

    result = Searcher(engine.index, engine.embedder, ranking).run(
        filters.with_dates(parse(raw), FakeClock(NOW)), mode=mode)
    return [(h.note_id, round(h.score, 4)) for h in result.hits]


@pytest.mark.parametrize("k", [80, 2])
@pytest.mark.parametrize("margin", [1.5, 0.3])
@pytest.mark.parametrize("quantized", [False, True])
def test_a_broad_filter_applied_after_retrieval_finds_what_the_filtered_path_does(
        dated_engine, k, margin, quantized, monkeypatch):
    from notewell.search.ranking import Ranking

    e = dated_engine
    if quantized:  # int8 vectors in the copy, and filtered k-NN from the copies too
        monkeypatch.setattr(e.index.copies.settings, "exact_limit", 1)
        monkeypatch.setattr(e.index.copies.settings, "within_from", 0)
    e.index.warm_keywords(wait=True)
    e.index.warm_vectors(wait=True)
    assert current_copies(e.index).vectors.quantized == quantized
    filtered = Ranking(dense_k=k, bm25_k=k, post_filter_share=2.0)  # never after
    after = Ranking(dense_k=k, bm25_k=k, post_filter_share=0.0, post_filter_margin=margin)
    unfiltered = []  # BM25 calls without a filter: the path after retrieval was taken
    from notewell.index.reads import SqlReads  # CopyReads's too: each view is new

    bm25 = SqlReads.bm25
    monkeypatch.setattr(SqlReads, "bm25", lambda self, terms, n, w, b, notes=None: (
        unfiltered.append(notes is None), bm25(self, terms, n, w, b, notes))[1])
    for raw in BROAD:
        for mode in ("hybrid", "bm25", "dense"):
            assert _ranked(e, after, raw, mode) == _ranked(e, filtered, raw, mode), (raw, mode)
    assert any(unfiltered)


def test_the_searcher_reads_typed_dates_on_the_engines_clock(dated_engine):
    """A query run on the engine's searcher (as the evaluation and ``recent`` run it)
    reads "since:7d" on the engine's clock, as ``Engine.search`` does, not the system's:
    on the system clock (years after NOW) no note would be that recent."""
    searcher = dated_engine.generations.current.searcher
    hits = searcher.run(parse("since:7d postgres vacuum"), mode="bm25").hits
    assert [h.note_id for h in hits] == ["notes:db/postgres-vacuum.md"]
    with dated_engine.reading() as view:
        assert [h.note_id for h in view.search("since:7d postgres vacuum",
                                                       mode="bm25").hits] == \
            ["notes:db/postgres-vacuum.md"]


def test_a_filter_admitting_most_passages_is_broad(dated_engine):
    from notewell.search.searcher import Searcher

    e = dated_engine
    e.index.warm_keywords(wait=True)
    s = Searcher(e.index, e.embedder)
    everything = e.index.reads.modified_between(None, None)
    assert s.broad(everything) == pytest.approx(1.0)
    recent = e.index.reads.modified_between(NOW - 7 * DAY, None)  # one note of many
    assert 0 < len(recent) < len(everything) and s.broad(recent) is None
    assert s.broad(None) is None

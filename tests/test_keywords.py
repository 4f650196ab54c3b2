"""The in-memory keyword copy (``notewell.index.keywords``) scores as FTS5's ``bm25()`` does."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
from index_helpers import current_copies, vocabulary_docs
from notewell.index.copy_reads import CopyReads
from notewell.search.query import parse
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher

QUERIES = ["postgres vacuum", "banana bread walnuts", "bread", "the remote branch",
           "lisbon tram", "vac", "ba", "recipes", "garden notes daily", "zzz nothing"]


@pytest.fixture
def copy(engine, notes_dir):
    (notes_dir / "extra.md").write_text(
        "---\naliases: [Kitchen log]\ntags: [recipes, home/garden]\n---\n"
        "# Bread bread bread\n\n## Daily notes\n\nBanana bread again, the walnuts on top. "
        "Bread is daily; bread is life. #recipes\n")
    engine.sync()
    engine.index.warm_keywords(wait=True)
    found = current_copies(engine.index).keywords
    assert found is not None
    return found


def fts5(engine, q) -> list[tuple[int, float]]:
    s = Searcher(engine.index, engine.embedder)
    match = " OR ".join(t.phrase for t in s.query_terms(q))
    return [(c, -score) for c, score in engine.index.reads.fts5_bm25(match, 1000)]


@pytest.mark.parametrize("raw", QUERIES)
def test_scores_match_fts5_bm25(engine, copy, raw):
    q = parse(raw)
    terms = Searcher(engine.index, engine.embedder).query_terms(q)
    mine = copy.bm25([(t.tokens[0], t.prefix) for t in terms], 1000)
    theirs = fts5(engine, q)
    assert [c for c, _ in mine] == [c for c, _ in theirs] or (
        sorted(mine) == pytest.approx(sorted(theirs), rel=1e-4))
    assert dict(mine) == pytest.approx(dict(theirs), rel=1e-4, abs=1e-6)


def test_scores_in_small_blocks_one_query_after_another_match_fts5(engine, copy,
                                                                   monkeypatch):
    # Postings are scored a block at a time into a score array kept between queries.
    monkeypatch.setattr(copy, "postings_block", 3)
    for raw in QUERIES + QUERIES[::-1]:
        q = parse(raw)
        terms = Searcher(engine.index, engine.embedder).query_terms(q)
        mine = copy.bm25([(t.tokens[0], t.prefix) for t in terms], 1000)
        assert dict(mine) == pytest.approx(dict(fts5(engine, q)), rel=1e-4, abs=1e-6), raw


def test_coverage_from_the_copy_matches_coverage_from_tokenized_passages(engine, copy):
    s = Searcher(engine.index, engine.embedder)
    for raw in QUERIES:
        q = parse(raw)
        ids = [c for c, _ in fts5(engine, q)]
        from_copy = s.coverage(q, ids)
        engine.index.copies.settings.keywords = False
        from_text = Searcher(engine.index, engine.embedder).coverage(q, ids)
        engine.index.copies.settings.keywords = True
        assert from_copy[1] == pytest.approx(from_text[1])
        assert from_copy[0] == pytest.approx(from_text[0])


def test_a_sync_brings_the_copy_along_and_it_still_scores_like_fts5(engine, copy,
                                                                     notes_dir):
    (notes_dir / "new.md").write_text("# Sourdough starter\n\nFeed the bread starter twice.\n")
    (notes_dir / "extra.md").write_text("# Bread, once\n\nOnly one loaf of bread now.\n")
    (notes_dir / "travel" / "lisbon.md").unlink()
    engine.sync()
    moved = current_copies(engine.index).keywords
    assert moved is not None and moved is not copy  # followed, not rebuilt
    assert moved.base_size == copy.base_size and moved.delta
    with engine.reading() as view:
        assert view.search("sourdough starter").hits[0].note_id == "notes:new.md"
    for raw in [*QUERIES, "sourdough", "loaf bread", "tram"]:
        q = parse(raw)
        terms = Searcher(engine.index, engine.embedder).query_terms(q)
        mine = dict(moved.bm25([(t.tokens[0], t.prefix) for t in terms], 1000))
        assert mine == pytest.approx(dict(fts5(engine, q)), rel=1e-4, abs=1e-6), raw


def assert_ids_as_in_sqlite(engine, copy) -> None:
    rows = engine.index.db.execute("SELECT id, note, embedding FROM chunks").fetchall()
    ids = [r[0] for r in rows] + [10**9]
    notes, vectors = copy.owners(ids)
    assert list(zip(ids, notes.tolist(), vectors.tolist())) == [*map(tuple, rows),
                                                                 (10**9, -1, -1)]
    for column, lookup, held in ((1, copy.chunks_of_notes, copy.notes),
                                 (2, copy.chunks_of_vectors, copy.vectors)):
        keys = sorted({r[column] for r in rows}, reverse=True)  # any order in
        at = lookup([*keys, 10**9])
        found = [(int(copy.chunk_ids[i]), int(held[i])) for i in at]
        assert sorted(found) == sorted((r[0], r[column]) for r in rows)
        assert [k for _, k in found] == sorted(k for _, k in found)  # grouped, ascending
        assert not len(lookup([10**9]))


def test_the_copy_knows_each_chunks_note_and_vector_as_sqlite_does(engine, copy, notes_dir):
    assert_ids_as_in_sqlite(engine, copy)
    # A passage word for word in two notes shares one stored vector; an edit and a removal
    # leave chunks masked in the copy it follows with.
    gone = engine.index.db.execute(
        "SELECT c.id, c.note, c.embedding FROM chunks c JOIN notes n ON n.id = c.note "
        "WHERE n.note_id = 'notes:travel/lisbon.md'").fetchall()
    assert gone
    (notes_dir / "twin.md").write_text((notes_dir / "extra.md").read_text())
    (notes_dir / "new.md").write_text("# Sourdough starter\n\nFeed the bread starter.\n")
    (notes_dir / "travel" / "lisbon.md").unlink()
    engine.sync()
    moved = current_copies(engine.index).keywords
    assert moved is not None and moved is not copy and moved.alive is not None
    shared = engine.index.db.execute(
        "SELECT count(*) FROM (SELECT embedding FROM chunks GROUP BY embedding "
        "HAVING count(*) > 1)").fetchone()[0]
    assert shared
    assert_ids_as_in_sqlite(engine, moved)
    assert (moved.owners([c for c, _, _ in gone])[0] == -1).all()
    assert not len(moved.chunks_of_notes([gone[0][1]]))
    assert not len(moved.chunks_of_vectors([e for _, _, e in gone]))


@pytest.mark.parametrize("vector_copy", [True, False])
def test_search_answers_the_same_with_the_ids_from_sqlite(engine, copy, notes_dir,
                                                          vector_copy):
    # A near-copy of a note (its mean vector, read by id, folds it into the original), and
    # the vectors from the in-memory copy or, as while it loads, from SQLite.
    (notes_dir / "twin.md").write_text((notes_dir / "extra.md").read_text() + "\nAgain.\n")
    engine.sync()
    engine.index.warm_keywords(wait=True)
    engine.index.copies.settings.vectors = vector_copy
    for raw in [*QUERIES, "banana bread walnuts daily", "similar:notes:extra.md"]:
        with engine.reading() as view:
            with_copy = view.search(raw).hits
        engine.index.copies.settings.keywords = False
        with engine.reading() as view:
            without = view.search(raw).hits
        engine.index.copies.settings.keywords = True
        assert [(h.note_id, h.snippet) for h in with_copy] == [
            (h.note_id, h.snippet) for h in without], raw
        assert [h.score for h in with_copy] == pytest.approx([h.score for h in without])
    with engine.reading() as view:
        shown = [h.note_id for h in view.search("banana bread walnuts daily").hits]
    assert ("notes:extra.md" in shown) != ("notes:twin.md" in shown)


def test_a_write_by_another_process_makes_the_copy_stale_until_rebuilt(engine, copy,
                                                                       notes_dir):
    from notewell.index.database import Index

    other = Index(engine.index.path, engine.index.settings)  # another writer, same file
    other.delete_note("notes:travel/lisbon.md")
    other.close()
    assert current_copies(engine.index).keywords is None  # FTS5 answers meanwhile ...
    with engine.reading() as view:
        assert "notes:travel/lisbon.md" not in [h.note_id for h in view.search("lisbon").hits]
    engine.index.warm_keywords(wait=True)  # ... until the new copy is in
    fresh = current_copies(engine.index).keywords
    assert fresh is not None and fresh.delta == {} and fresh.chunks == copy.chunks - 1


def test_many_changes_ask_for_a_rebuild_instead(engine, copy):
    rows = [(10_000 + i, 1, 1, f"t{i}", "", f"word{i} body", "") for i in range(600)]
    from notewell.index.terms import Tokens

    assert copy.with_changes([], rows, Tokens(engine.index.db), "e") is None


def test_many_removals_ask_for_a_rebuild_too(engine):
    # Past the threshold in removals alone (a folder deleted note by note), no delta.
    from notewell.index.keywords import COLUMN_WEIGHTS, build
    from notewell.index.terms import Tokens

    tokens = Tokens(engine.index.db)
    base = build([(i, i, i, f"t{i}", "", f"word{i} body", "") for i in range(1, 700)],
                 tokens, COLUMN_WEIGHTS, "e")
    assert base.with_changes(list(range(1, 10)), [], tokens, "e2") is not None
    assert base.with_changes(list(range(1, 600)), [], tokens, "e2") is None


def test_search_uses_the_copy_only_when_it_scores_like_fts5(engine, copy):
    s = Searcher(engine.index, engine.embedder)
    reads, columns = engine.index.reads, s.ranking.bm25_columns
    assert reads.scoring_copy(s.query_terms(parse("bread")), columns) is copy
    assert reads.scoring_copy(s.query_terms(parse("snake_case")), columns) is None  # 2 tokens
    other = Searcher(engine.index, engine.embedder,
                     dataclasses.replace(Ranking(), bm25_columns=(1.0, 1.0, 1.0, 1.0)))
    assert reads.scoring_copy(other.query_terms(parse("bread")),
                              other.ranking.bm25_columns) is None


def test_the_copy_serves_the_vocabulary_fts5_would_give(engine, copy):
    from notewell.index.terms import read_vocabulary

    fts = read_vocabulary(engine.index.db)
    assert engine.index.reads.vocabulary() is copy.vocabulary()
    assert vocabulary_docs(copy.vocabulary()) == vocabulary_docs(fts)
    assert copy.vocabulary().chunks == fts.chunks


def test_a_copy_that_followed_from_a_near_empty_index_knows_the_new_words(engine, notes_dir):
    """A daemon builds its copy at start, often before its first sync has written much:
    the notes then arrive through ``with_changes``, and their words must count in the
    vocabulary (their coverage came out 0 and keyword hits lost all weight)."""
    for path in notes_dir.rglob("*.md"):
        path.unlink()
    engine.sync()
    engine.index.warm_keywords(wait=True)
    empty = current_copies(engine.index).keywords
    assert empty is not None and empty.chunks == 0
    (notes_dir / "fresh.md").write_text("# Quokka census\n\nCounting quokkas on Rottnest.\n")
    engine.sync()
    moved = current_copies(engine.index).keywords
    assert moved is not None and moved.base_size == 0
    vocab = engine.index.reads.vocabulary()
    assert vocab.df("quokka") == 1 and vocab.prefix_df("quok") == 1
    assert "quokka" in vocab.starting_with("quo")
    q = parse("quokka cens")
    ids = [c for c, _ in Searcher(engine.index, engine.embedder).bm25(q)]
    cover, _ = Searcher(engine.index, engine.embedder).coverage(q, ids)
    assert ids and cover[ids[0]] == pytest.approx(1.0)
    with engine.reading() as view:
        assert view.search("quokka cens").hits[0].note_id == "notes:fresh.md"


def test_ids_beyond_int32_are_kept_wide_and_never_match_by_wrapping(engine):
    from notewell.index.keywords import COLUMN_WEIGHTS, build
    from notewell.index.terms import Tokens

    tokens = Tokens(engine.index.db)
    small = build([(1, 7, 9, "a", "", "b", ""), (2, 2**31 - 2, 9, "c", "", "d", "")], tokens,
                  COLUMN_WEIGHTS, "e")
    assert small.notes.dtype == np.int32
    # 2**32 + 7 wraps to 7 as int32: it must not find note 7's chunk.
    assert small.chunks_of_notes([2**32 + 7, 2**31 - 2]).tolist() == [1]
    assert small.owners([1, 2, 3])[0].tolist() == [7, 2**31 - 2, -1]
    wide = build([(1, 7, 9, "a", "", "b", ""), (2, 2**40, 2**35, "c", "", "d", "")], tokens,
                 COLUMN_WEIGHTS, "e")
    assert wide.notes.dtype == np.int64
    assert wide.chunks_of_notes([2**40]).tolist() == [1]
    assert wide.chunks_of_vectors([2**35, 9]).tolist() == [0, 1]


def test_a_prefix_sums_its_terms_alike_by_sorting_or_by_counting():
    from notewell.index.keywords import _summed

    rng = np.random.default_rng(3)
    docs = np.concatenate([np.sort(rng.choice(300, 120, replace=False)) for _ in range(3)])
    weights = rng.random(len(docs)).astype(np.float32)
    by_sort = _summed(docs.astype(np.int32), weights, 10**6)  # few postings for the size
    by_count = _summed(docs.astype(np.int32), weights, 300)  # many
    assert by_sort[0].tolist() == by_count[0].tolist() == sorted(set(docs.tolist()))
    assert by_sort[1] == pytest.approx(by_count[1], rel=1e-6)
    assert [len(a) for a in _summed(docs[:0], weights[:0], 10)] == [0, 0]


def test_together_from_the_copy_matches_fts5(engine, copy):
    from notewell.search.terms import QueryTerm

    def term(word, prefix=False):
        tokens = tuple(engine.index.reads.query_tokens(word, prefix))
        return QueryTerm(word, f'"{word}"*' if prefix else f'"{word}"', tokens, prefix, 1, 1.0)

    cases = [("walnuts", ["banana"]), ("walnuts", ["lisbon"]), ("lisb", ["tram"]),
             ("lisb", ["walnuts", "vacuum"]), ("vacuum", ["postgres"])]
    reads = engine.index.reads
    assert isinstance(reads, CopyReads)
    for word, others in cases:
        prefix = word == "lisb"
        args = (term(word, prefix), [term(w) for w in others])
        from_copy = reads.together(*args)
        engine.index.copies.settings.keywords = False
        from_fts5 = engine.index.reads.together(*args)  # a view taken now: SQLite's
        engine.index.copies.settings.keywords = True
        assert from_copy == from_fts5, (word, others)
    assert reads.together(term("walnuts"), [term("banana")])
    assert not reads.together(term("walnuts"), [term("lisbon")])


def test_a_stale_keyword_copy_is_rebuilt_once_the_chunks_stay_still(tmp_path):
    # Time on the injected clock: the rebuild waits for keywords_quiet seconds without
    # a change, however long the test itself takes.
    from helpers import write_notes
    from notewell.config import SourceConfig
    from notewell.index.database import Index
    from notewell.index.schema import BuildSettings, connect
    from notewell.ingest.chunking import ChunkSettings
    from notewell.ingest.sync import Syncer
    from notewell.model.fake import FakeEmbedder
    from notewell.sources import open_source
    from reliability_helpers import FakeClock

    folder = write_notes(tmp_path / "notes", {"a.md": "# A\n\nbanana bread\n"})
    source = open_source(SourceConfig("notes", "markdown", str(folder)))
    settings = BuildSettings("fake-hash:64", 64, ChunkSettings().fingerprint())
    path, clock = str(tmp_path / "index.sqlite"), FakeClock()
    index = Index(path, settings, clock=clock)
    Syncer(index, FakeEmbedder(), ChunkSettings()).sync(source)
    index.warm_keywords(wait=True)
    assert current_copies(index).keywords is not None
    writer = Index(path, settings)  # another writer: this index's copy is not brought along
    (folder / "b.md").write_text("# B\n\nwalnut loaf\n")
    Syncer(writer, FakeEmbedder(), ChunkSettings()).sync(source)
    opened = threading.Event()  # a loader opens its connection: a build started
    index.copies.connect = lambda p: (opened.set(), connect(p))[1]

    def build_started() -> bool:
        index.ensure_copies()  # what a read view and the sync thread's wake ask
        return index.copies.state()["keywords"] == "loading" or opened.is_set()

    assert not build_started() and current_copies(index).keywords is None  # changed just now
    clock.advance(index.copies.settings.keywords_quiet - 0.5)
    assert not build_started() and current_copies(index).keywords is None
    clock.advance(0.5)
    assert build_started() and opened.wait(30)  # built behind
    index.warm_keywords(wait=True)
    assert current_copies(index).keywords is not None
    writer.close()
    index.close()

"""The index file: extension loading, round trips, settings recorded and enforced, rebuilds."""

from __future__ import annotations

import dataclasses
import sqlite3
import sys

import apsw
import numpy as np
import pytest
from helpers import RecordingEmbedder
from index_helpers import SETTINGS, index_at_schema, make_note, store_note, vocabulary_docs
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.index import database, schema, store
from notewell.index.database import Index
from notewell.index.schema import BuildSettings, IndexCorrupt, IndexMismatch, connect
from notewell.ingest.chunking import ChunkSettings
from notewell.model.fake import FakeEmbedder
from notewell.notes import Note


def test_apsw_loads_sqlite_vec_and_fts5_on_this_python():
    conn = connect(":memory:")
    assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    conn.execute("INSERT INTO t VALUES ('running shoes')")
    assert conn.execute("SELECT count(*) FROM t WHERE t MATCH 'run'").fetchone()[0] == 1
    # Record why apsw: the standard module may not be able to load extensions at all.
    stdlib = hasattr(sqlite3.connect(":memory:"), "enable_load_extension")
    print(f"{sys.version.split()[0]}: stdlib sqlite3 extension loading: {stdlib}")



def test_round_trip_knn_bm25_and_delete(tmp_path, fake_embedder):
    index = Index(str(tmp_path / "i.sqlite"), SETTINGS)
    store_note(index, fake_embedder, make_note("s:a", "postgres vacuum analyze planner", ["db"]))
    store_note(index, fake_embedder, make_note("s:b", "banana bread recipe with walnuts"))
    assert index.counts() == {"notes": 2, "chunks": 2, "embeddings": 2}
    q = fake_embedder.embed_batch(["postgres vacuum"])[0]
    emb_id, distance = index.reads.knn(q, 1)[0]
    chunk_note_id = index.db.execute(
        "SELECT n.note_id FROM chunks c JOIN notes n ON n.id = c.note WHERE c.embedding = ?",
        (emb_id,)).fetchone()[0]
    assert chunk_note_id == "s:a" and distance < 0.5
    assert len(index.reads.fts5_bm25('"banana"', 5)) == 1
    index.delete_note("s:b")
    assert index.reads.fts5_bm25('"banana"', 5) == []
    assert index.counts()["notes"] == 1
    # the vector stays (content-addressed) until pruning decides it is not worth keeping
    assert index.counts()["embeddings"] == 2


def test_replacing_a_note_keeps_fts_and_chunks_one_to_one(tmp_path, fake_embedder):
    index = Index(str(tmp_path / "i.sqlite"), SETTINGS)
    for text in ("first version words", "second version words", "third words"):
        store_note(index, fake_embedder, make_note("s:a", text))
    chunks = index.db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    fts = index.db.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
    assert chunks == fts == 1
    bm25 = index.reads.fts5_bm25
    assert bm25('"first"', 5) == [] and len(bm25('"third"', 5)) == 1


def test_same_text_is_embedded_once(tmp_path, fake_embedder):
    index = Index(str(tmp_path / "i.sqlite"), SETTINGS)
    assert store_note(index, fake_embedder, make_note("s:a", "identical body text"))
    assert store_note(index, fake_embedder, make_note("s:a", "identical body text")) == []


def test_settings_are_recorded_and_a_mismatch_is_refused(tmp_path):
    path = str(tmp_path / "i.sqlite")
    Index(path, SETTINGS).close()
    meta = schema.read_meta(Index(path, SETTINGS).db)
    assert meta["embedder"] == "fake-hash:64" and meta["chunker"] == SETTINGS.chunker
    other = BuildSettings("fake-hash:64", 64, ChunkSettings(max_pieces=99).fingerprint())
    with pytest.raises(IndexMismatch, match="next sync re-chunks it"):
        Index(path, other)
    assert Index(path, other, other_chunker_ok=True).other_chunker == SETTINGS.chunker


def test_a_file_that_is_not_a_database_is_reported(tmp_path):
    path = tmp_path / "i.sqlite"
    path.write_bytes(b"this is not sqlite" * 1000)
    with pytest.raises(IndexCorrupt):
        Index(str(path), SETTINGS)


def test_corrupt_index_is_moved_aside_not_deleted(tmp_path):
    d = tmp_path / "index"
    d.mkdir()
    (d / "index-1.sqlite").write_bytes(b"garbage" * 5000)
    index = store.open_current(SETTINGS, str(d))
    assert index.counts()["notes"] == 0 and not index.integrity_check()
    kept = [p.name for p in d.iterdir() if ".corrupt-" in p.name]
    assert kept and (d / kept[0]).read_bytes().startswith(b"garbage")


def test_rebuild_after_settings_change_swaps_in_a_new_generation(tmp_path, notes_dir,
                                                                 fake_embedder):
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(notes_dir), ("private/**",)),))
    d = str(tmp_path / "index")
    engine = Engine(cfg, embedder=fake_embedder, index_dir=d)
    engine.sync()
    first = engine.index.path
    with engine.reading() as view:
        n = view.status()["notes"]
    engine.close()
    changed = ChunkSettings(max_pieces=120)
    from notewell.engine import rebuild
    from notewell.sources import open_source

    calls_before = len(fake_embedder.calls)
    final, reports = rebuild([open_source(s) for s in cfg.sources], fake_embedder, changed, d)
    assert final != first and store.current_path(d) == final
    engine = Engine(cfg, embedder=fake_embedder, chunker=changed, index_dir=d)
    with engine.reading() as view:
        assert view.status()["notes"] == n and engine.index.other_chunker is None
    # these notes are single-chunk, so their text hashes are unchanged: nothing re-embedded
    assert len(fake_embedder.calls) == calls_before
    assert reports[0].reused > 0 and reports[0].embedded == 0
    with engine.reading() as view:
        hits = view.search("postgres vacuum").hits
    assert hits and hits[0].note_id == "notes:db/postgres-vacuum.md"


def test_an_index_cut_by_another_chunker_answers_until_the_next_sync_re_chunks_it(
        tmp_path, notes_dir):
    """An upgrade that changes the chunker needs no manual rebuild: the old file answers,
    and the next sync rebuilds it beside, embedding only the passages whose text changed."""
    long = " ".join(f"Sentence {i} about sourdough starters and rye flour." for i in range(60))
    (notes_dir / "long.md").write_text(f"# Bread\n\n{long}\n")
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(notes_dir), ("private/**",)),))
    d = str(tmp_path / "index")
    model = RecordingEmbedder()
    engine = Engine(cfg, embedder=model, index_dir=d)
    engine.sync()
    first, before = engine.index.path, set(model.texts)
    engine.close()

    changed = ChunkSettings(max_pieces=60, min_pieces=20, overlap_pieces=10)
    assert Engine(cfg, embedder=model, index_dir=d).index.other_chunker is None
    engine = Engine(cfg, embedder=model, chunker=changed, index_dir=d)
    assert engine.index.other_chunker == ChunkSettings().fingerprint()
    with engine.reading() as view:
        assert view.status()["re_chunking"] and view.status()["chunker"] == (
            ChunkSettings().fingerprint())
        assert view.search("postgres vacuum").hits[0].note_id == "notes:db/postgres-vacuum.md"
    model.texts.clear()
    reports = engine.sync()
    assert engine.index.path != first and store.current_path(d) == engine.index.path
    assert engine.index.other_chunker is None and schema.read_meta(engine.index.db)["chunker"] == (
        changed.fingerprint())
    with engine.reading() as view:
        assert not view.status()["re_chunking"]
    # Only the long note is cut differently: its new passages are all that was embedded.
    assert model.texts and all("sourdough" in t for t in model.texts)
    assert not set(model.texts) & before
    assert sum(r.embedded for r in reports) == len(model.texts)
    with engine.reading() as view:
        assert view.search("postgres vacuum").hits[0].note_id == "notes:db/postgres-vacuum.md"
    engine.close()
    assert Engine(cfg, embedder=model, chunker=changed, index_dir=d).index.other_chunker is None


def test_a_source_that_cannot_be_read_keeps_the_old_index_until_a_later_try(tmp_path,
                                                                           notes_dir):
    """Re-chunking never drops the notes of a source it could not read: the build is not
    published, and the next try takes its vectors in instead of embedding them again."""
    long = " ".join(f"Sentence {i} about sourdough starters and rye flour." for i in range(60))
    (notes_dir / "long.md").write_text(f"# Bread\n\n{long}\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "tea.md").write_text("# Tea\n\n" + " ".join(
        f"Line {i} on steeping green tea leaves." for i in range(60)) + "\n")
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(notes_dir), ("private/**",)),
                          SourceConfig("other", "markdown", str(other))))
    d = str(tmp_path / "index")
    model = RecordingEmbedder()
    engine = Engine(cfg, embedder=model, index_dir=d)
    engine.sync()
    first = engine.index.path
    engine.close()

    changed = ChunkSettings(max_pieces=60, min_pieces=20, overlap_pieces=10)
    engine = Engine(cfg, embedder=model, chunker=changed, index_dir=d)
    moved = tmp_path / "other-away"
    other.rename(moved)  # the source cannot be read
    model.texts.clear()
    reports = engine.sync()
    assert [r.source for r in reports if r.error] == ["other"]
    assert engine.index.path == first and engine.index.other_chunker is not None
    assert store.current_path(d) == first
    embedded_once = set(model.texts)
    assert embedded_once and all("sourdough" in t for t in embedded_once)
    with engine.reading() as view:
        assert view.search("green tea").hits[0].note_id == "other:tea.md"

    moved.rename(other)
    model.texts.clear()
    reports = engine.sync()
    assert not any(r.error for r in reports) and engine.index.path != first
    assert engine.index.other_chunker is None
    assert model.texts and all("steeping" in t for t in model.texts)  # the bread: not again
    with engine.reading() as view:
        assert view.search("green tea").hits[0].note_id == "other:tea.md"
    engine.close()


def test_another_model_is_still_refused_until_rebuilt(tmp_path, notes_dir, fake_embedder):
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(notes_dir)),))
    d = str(tmp_path / "index")
    Engine(cfg, embedder=fake_embedder, index_dir=d).close()
    with pytest.raises(IndexMismatch, match="another model"):
        Engine(cfg, embedder=FakeEmbedder(dim=32), index_dir=d)


def test_vectors_round_trip_exactly(tmp_path):
    index = Index(str(tmp_path / "i.sqlite"), SETTINGS)
    v = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    index.add_embeddings(["a", "b", "c"], v)
    blob = index.db.execute("SELECT embedding FROM vectors WHERE rowid = 2").fetchone()[0]
    assert np.array_equal(np.frombuffer(blob, dtype=np.float32), v[1])



def test_migration_2_refills_the_keyword_index_with_prefix_indexes(tmp_path, fake_embedder,
                                                                   monkeypatch):
    from notewell.index.terms import read_vocabulary

    path = str(tmp_path / "i.sqlite")
    old = index_at_schema(path, monkeypatch, 1)
    store_note(old, fake_embedder, Note(
        note_id="s:a", source="s", kind="markdown", title="Café notes", text="Daily journal "
        "template for the garden.", url="file:///a", tags=("home/garden",),
        aliases=("Kitchen log",), fingerprint="f"))
    store_note(old, fake_embedder, make_note("s:b", "## Plans\n\nPublish notes to GitHub pages"))
    before = vocabulary_docs(read_vocabulary(old.db))
    old.close()
    new = Index(path, SETTINGS)
    assert new.db.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    assert "prefix" in new.db.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()[0]
    assert vocabulary_docs(read_vocabulary(new.db)) == before  # the same terms in the same chunks
    assert new.consistency_problems() == []
    bm25 = new.reads.fts5_bm25
    assert len(bm25('"jo"*', 5)) == 1 and len(bm25('"kitch"*', 5)) == 1
    new.close()


def test_migration_3_moves_vectors_into_small_chunks_and_keeps_them(tmp_path, monkeypatch):
    path = str(tmp_path / "i.sqlite")
    old = index_at_schema(path, monkeypatch, 2)
    v = np.random.default_rng(3).standard_normal((150, 64)).astype(np.float32)
    old.add_embeddings([f"h{i}" for i in range(150)], v)
    ids = [r[0] for r in old.db.execute("SELECT id FROM embeddings ORDER BY id")]
    with old.db:
        old.db.execute("DELETE FROM vectors WHERE rowid = ?", (ids[7],))  # a gap
    old.close()
    new = Index(path, SETTINGS)
    assert new.db.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    sql = new.db.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()[0]
    assert f"chunk_size={schema.VECTOR_CHUNK}" in sql
    assert new.db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'vectors_moving'"
                          ).fetchone()[0] == 0
    rows = dict(new.db.execute("SELECT rowid, embedding FROM vectors"))
    assert sorted(rows) == sorted(set(ids) - {ids[7]})
    for i, rowid in enumerate(ids):
        if rowid != ids[7]:
            assert np.array_equal(np.frombuffer(rows[rowid], dtype=np.float32), v[i])
    # k-NN still answers from the moved vectors (sqlite-vec's own scan).
    new.copies.settings.vectors = False
    assert new.reads.knn(v[20], 1)[0][0] == ids[20]
    new.close()


def test_an_upgrade_is_kept_when_compacting_after_it_fails(tmp_path, monkeypatch, caplog):
    """VACUUM after the upgrade refused (here: no room for the copy it writes): the upgrade
    stays committed, the failure is logged, and the index opens and answers."""
    path = str(tmp_path / "i.sqlite")
    old = index_at_schema(path, monkeypatch, 2)
    v = np.random.default_rng(4).standard_normal((20, 64)).astype(np.float32)
    old.add_embeddings([f"h{i}" for i in range(20)], v)
    old.close()

    class DiskFull:
        def __init__(self, conn):
            self._conn = conn

        def __getattr__(self, name):
            return getattr(self._conn, name)

        def __enter__(self):
            return self._conn.__enter__()

        def __exit__(self, *exc):
            return self._conn.__exit__(*exc)

        def execute(self, sql, *args):
            if sql == "VACUUM":
                raise apsw.FullError("database or disk is full")
            return self._conn.execute(sql, *args)

    monkeypatch.setattr(database, "connect", lambda p: DiskFull(connect(p)))
    with caplog.at_level("WARNING", logger="notewell.index.schema"):
        new = Index(path, SETTINGS)
    assert new.db.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    new.copies.settings.vectors = False
    assert new.reads.knn(v[3], 1)[0][0] == 4  # the fourth vector stored, found after the move
    new.close()
    assert "could not compact" in caplog.text and "disk is full" in caplog.text


def test_carry_notes_copies_the_kept_notes_rows_and_vectors(tmp_path, fake_embedder):
    """A rebuild takes the rows of notes it cannot read from the live file: the same
    passages, tags, dates and vectors, linked one to one; only the notes asked for."""
    live = Index(str(tmp_path / "live.sqlite"), SETTINGS)
    kept = dataclasses.replace(make_note("s:a", "# Vacuum\n\npostgres vacuum analyze planner",
                                     ["db/pg"]), created=1.0e9, modified=1.5e9)
    store_note(live, fake_embedder, kept)
    store_note(live, fake_embedder, make_note("s:b", "banana bread recipe with walnuts"))
    live.checkpoint()
    fresh = Index(str(tmp_path / "fresh.sqlite"), SETTINGS)
    assert fresh.carry_notes(live.path, "s", lambda n: n == "s:a") == 1
    assert fresh.carry_notes(live.path, "other", lambda n: True) == 0
    assert fresh.consistency_problems() == []
    assert set(fresh.stored_notes("s")) == {"s:a"}
    row = fresh.reads.note_record("s:a")
    assert (row.modified, row.title) == (1.5e9, "a")
    assert fresh.reads.tag_notes() and [t for t, _ in fresh.reads.tag_notes()] == ["db/pg"]
    q = fake_embedder.embed_batch(["postgres vacuum"])[0]
    assert fresh.reads.knn(q, 1)[0][1] == live.reads.knn(q, 1)[0][1]
    assert len(fresh.reads.fts5_bm25('"vacuum"', 5)) == 1
    # Read again once it can be: another fingerprint and content hash than any file's.
    assert fresh.stored_notes("s")["s:a"].fingerprint == ""
    assert fresh.stored_notes("s")["s:a"].content_hash == ""
    # Another model's file has no vectors to give: nothing carried, and the caller knows.
    other = Index(str(tmp_path / "other.sqlite"), BuildSettings("other:64", 64,
                                                                SETTINGS.chunker))
    assert other.carry_notes(live.path, "s", lambda n: True) is None
    assert other.counts()["notes"] == 0
    for index in (live, fresh, other):
        index.close()

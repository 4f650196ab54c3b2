"""Incremental sync with no work repeated: unchanged notes untouched, one edited paragraph
re-embeds exactly its chunk, moves keep their vectors, deletions disappear, a crash
re-embeds nothing done, Bear edits and tag-only changes, the "behind" bookkeeping, and
searches answered from the last commit while a sync runs."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from bear_fixture import build
from helpers import GatedEmbedder, RecordingEmbedder, write_notes
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.ingest.chunking import ChunkSettings, chunk_note
from notewell.ingest.sync import Syncer
from notewell.notes import Chunk
from notewell.sources import open_source

CHUNKER = ChunkSettings()
SETTINGS = BuildSettings("fake-hash:64", 64, CHUNKER.fingerprint())

PARA = ("The {w} section explains how the {w} part of the system behaves under load, "
        "which knobs matter, what the defaults are, and why we changed them last spring "
        "after the incident with the overnight batch jobs and the slow replica.")


def long_note(title: str, words: list[str], edited: str | None = None) -> str:
    parts = [f"# {title}\n"]
    for w in words:
        body = PARA.format(w=w)
        if w == edited:
            body = body.replace("last spring", "in the autumn release")
        parts.append(f"## {w.title()}\n\n{body}\n\n{body.replace('The ', 'Again the ')}\n")
    return "\n".join(parts)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_notes(tmp_path / "notes", {
        "ops/runbook.md": long_note("Runbook", ["alpha", "bravo", "charlie", "delta"]),
        "home/tap.md": "# Fix the kitchen tap\n\nTurn off the water under the sink first.\n",
        "travel/lisbon.md": "# Lisbon\n\nTram 28 and pastel de nata. #travel\n",
    })


def md(root: Path, name: str = "notes"):
    return open_source(SourceConfig(name, "markdown", str(root)))


def setup(tmp_path: Path):
    index = Index(str(tmp_path / "index.sqlite"), SETTINGS)
    emb = RecordingEmbedder()
    return index, emb, Syncer(index, emb, CHUNKER)


def hashes(title: str, text: str) -> set[str]:
    return {Chunk.text_hash(c.embed_text(title)) for c in chunk_note(title, text, CHUNKER)}


def test_second_sync_touches_nothing(tmp_path, folder, monkeypatch):
    index, emb, syncer = setup(tmp_path)
    first = syncer.sync(md(folder))
    assert (first.added, first.embedded) == (3, len(emb.texts)) and first.embedded > 3
    writes = []
    monkeypatch.setattr(index, "replace_note", lambda *a: writes.append(a))
    monkeypatch.setattr(index, "touch_note", lambda *a, **k: writes.append(a))
    again = syncer.sync(md(folder))
    assert (again.unchanged, again.embedded, writes) == (3, 0, [])
    # A save without a change (new mtime) records the fingerprint, nothing else.
    os.utime(folder / "home/tap.md", (1, 1))
    third = syncer.sync(md(folder))
    assert (third.updated, third.embedded, len(writes)) == (0, 0, 1)


def test_one_paragraph_edit_reembeds_exactly_the_changed_chunk(tmp_path, folder):
    index, emb, syncer = setup(tmp_path)
    syncer.sync(md(folder))
    before = long_note("Runbook", ["alpha", "bravo", "charlie", "delta"])
    after = long_note("Runbook", ["alpha", "bravo", "charlie", "delta"], edited="charlie")
    changed = hashes("Runbook", after) - hashes("Runbook", before)
    assert len(changed) == 1 and len(chunk_note("Runbook", after, CHUNKER)) == 4
    (folder / "ops/runbook.md").write_text(after)
    emb.texts.clear()
    report = syncer.sync(md(folder))
    # The three unchanged passages and the title vector are reused.
    assert (report.updated, report.embedded, report.reused) == (1, 1, 4)
    assert {Chunk.text_hash(t) for t in emb.texts} == changed
    rows = index.db.execute("SELECT count(*) FROM chunks c JOIN notes n ON n.id = c.note "
                            "WHERE n.note_id = 'notes:ops/runbook.md'").fetchone()[0]
    assert rows == 4


def test_a_note_is_found_by_its_path_and_an_upgrade_reads_it_again_without_embedding(
        tmp_path, folder):
    """A Dendron-style page titled "CLI" answers to the words of its file name; notes read by
    a notewell that did not index paths yet (fingerprints without the read version) are
    read again once, and nothing is embedded again."""
    from notewell.search.query import parse
    from notewell.search.searcher import Searcher

    (folder / "dendron.topic.pod.cli.md").write_text(
        "---\ntitle: CLI\n---\n\nOptions: --configPath, --wsRoot.\n")
    index, emb, syncer = setup(tmp_path)
    syncer.sync(md(folder))
    hits = Searcher(index, emb).run(parse("topic pod"), mode="bm25").hits
    assert hits[0].note_id == "notes:dendron.topic.pod.cli.md"
    with index.db:  # as an older notewell wrote them: mtime:size
        index.db.execute("UPDATE notes SET fingerprint = substr(fingerprint, 3)")
    emb.texts.clear()
    report = syncer.sync(md(folder))
    assert (report.updated + report.unchanged, report.embedded, emb.texts) == (4, 0, [])
    assert syncer.sync(md(folder)).unchanged == 4


def test_move_and_rename_keep_embeddings_delete_disappears(tmp_path, folder):
    index, emb, syncer = setup(tmp_path)
    syncer.sync(md(folder))
    (folder / "archive").mkdir()
    os.rename(folder / "ops/runbook.md", folder / "archive/runbook.md")  # moved
    os.rename(folder / "home/tap.md", folder / "home/kitchen-tap.md")  # renamed, H1 title
    emb.texts.clear()
    report = syncer.sync(md(folder))
    # Every passage vector is reused; the title vectors read the new paths.
    assert (report.added, report.deleted, report.embedded) == (2, 2, 2)
    assert sorted(t.split("\n")[1] for t in emb.texts) == ["archive/runbook",
                                                             "home/kitchen-tap"]
    (folder / "travel/lisbon.md").unlink()
    report = syncer.sync(md(folder))
    assert report.deleted == 1
    ids = {r[0] for r in index.db.execute("SELECT note_id FROM notes")}
    assert ids == {"notes:archive/runbook.md", "notes:home/kitchen-tap.md"}
    assert index.db.execute("SELECT count(*) FROM note_tags").fetchone()[0] == 0


def test_a_crash_between_vectors_and_rows_reembeds_nothing(tmp_path, folder, monkeypatch):
    index, emb, syncer = setup(tmp_path)

    def crash(*a, **k):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(index, "replace_note", crash)
    with pytest.raises(KeyboardInterrupt):
        syncer.sync(md(folder))
    done = len(emb.texts)
    assert done > 0 and index.counts()["notes"] == 0  # vectors committed, no notes yet
    monkeypatch.undo()
    emb.texts.clear()
    report = syncer.sync(md(folder))
    assert (report.added, report.embedded, report.reused) == (3, 0, done)


def test_bear_edit_tag_only_trash_and_archive(tmp_path):
    fx = build(str(tmp_path / "bear" / "database.sqlite"))
    index, emb, syncer = setup(tmp_path)
    src = open_source(SourceConfig("bear", "bear", fx.path))
    assert syncer.sync(src).added == 4
    uid = "A1B2C3D4-0007-4000-8000-000000000007"
    tags = lambda: {r[0] for r in index.db.execute(  # noqa: E731
        "SELECT t.tag FROM note_tags t JOIN notes n ON n.id = t.note WHERE n.note_id = ?",
        (f"bear:{uid}",))}
    assert tags() == {"work/projects/apollo"}

    fx.add_tag(uid, "launch")  # join table only
    emb.texts.clear()
    report = syncer.sync(src)
    assert (report.updated, report.embedded, report.unchanged) == (1, 0, 3)
    assert tags() == {"work/projects/apollo", "launch"}

    old = fx.conn.execute("SELECT ZTEXT FROM ZSFNOTE WHERE ZUNIQUEIDENTIFIER = ?",
                          (uid,)).fetchone()[0]
    fx.edit_text(uid, old.replace("ten customers", "twelve customers"))
    report = syncer.sync(src)
    assert (report.updated, report.embedded) == (1, 1)

    fx.set_archived("A1B2C3D4-0001-4000-8000-000000000001")
    report = syncer.sync(src)
    assert report.updated == 1
    assert index.db.execute("SELECT archived FROM notes WHERE note_id = ?",
                            ("bear:A1B2C3D4-0001-4000-8000-000000000001",)).fetchone()[0] == 1

    fx.trash(uid)
    assert syncer.sync(src).deleted == 1
    fx.delete_row("A1B2C3D4-0002-4000-8000-000000000002")
    assert syncer.sync(src).deleted == 1
    assert index.counts()["notes"] == 2
    fx.close()


def source_row(index: Index, name: str) -> dict:
    return next(r for r in index.source_rows() if r["name"] == name)


def test_behind_since_tracks_failures_and_unfinished_syncs(tmp_path, folder):
    index, emb, syncer = setup(tmp_path)
    missing = open_source(SourceConfig("gone", "markdown", str(tmp_path / "nowhere")))
    report = syncer.sync(missing)
    row = source_row(index, "gone")
    assert report.error and row["last_error"] and row["behind_since"] and not row["last_sync"]
    first_failure = row["behind_since"]
    time.sleep(0.01)
    syncer.sync(missing)
    assert source_row(index, "gone")["behind_since"] == first_failure  # since the first
    write_notes(tmp_path / "nowhere", {"a.md": "# A\n"})
    syncer.sync(missing)
    row = source_row(index, "gone")
    assert row["last_error"] is None and row["behind_since"] is None and row["last_sync"]

    stop_after = iter(range(2))
    stopper = Syncer(index, emb, CHUNKER, should_stop=lambda: next(stop_after, None) is None)
    report = stopper.sync(md(folder, "stopped"))
    row = source_row(index, "stopped")
    assert report.pending == 1 and row["pending"] == 1 and row["behind_since"]
    report = syncer.sync(md(folder, "stopped"))
    row = source_row(index, "stopped")
    assert report.added == 1 and row["pending"] == 0 and row["behind_since"] is None


def test_searches_answer_from_the_last_commit_while_a_sync_runs(tmp_path, folder):
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(folder)),))
    emb = GatedEmbedder()
    engine = Engine(cfg, embedder=emb, index_dir=str(tmp_path / "idx"))
    engine.sync()
    write_notes(folder, {"new/a.md": "# Sourdough\n\nFeed the starter with rye flour.\n",
                         "new/b.md": "# Bicycle\n\nPump the tyres to six bar.\n"})
    emb.block = True
    worker = threading.Thread(target=engine.sync)
    worker.start()
    try:
        assert emb.inside.wait(10)  # the sync is in the middle of embedding
        with engine.reading() as view:
            hits = view.search("kitchen tap water", limit=5).hits
        assert not emb.passed.is_set()  # answered while the sync is held in the model
        assert hits and hits[0].note_id == "notes:home/tap.md"
        with engine.reading() as view:
            assert not view.search("sourdough starter rye", limit=5, mode="bm25").hits
    finally:
        emb.gate.set()
        worker.join(10)
    with engine.reading() as view:
        assert view.search("sourdough starter rye", limit=5, mode="bm25").hits
    engine.close()


def test_an_unreadable_note_is_read_again_only_after_the_retry_interval(tmp_path, folder):
    from notewell.ingest.sync import RETRY_UNREADABLE
    from reliability_helpers import FakeClock

    (folder / "binary.md").write_bytes(b"\x00\x01 not text")
    index = Index(str(tmp_path / "index.sqlite"), SETTINGS)
    clock = FakeClock()
    syncer = Syncer(index, RecordingEmbedder(), CHUNKER, clock=clock)
    src = md(folder)
    reads: list[str] = []
    real_load = src.load
    first = syncer.sync(src)
    assert len(first.warnings) == 1 and "binary.md" in first.warnings[0]
    src.load = lambda note_id: reads.append(note_id) or real_load(note_id)
    clock.advance(RETRY_UNREADABLE - 1)
    assert syncer.sync(src).warnings == [] and reads == []
    clock.advance(1)  # the interval has passed: read again, still unreadable
    assert len(syncer.sync(src).warnings) == 1 and reads == ["notes:binary.md"]
    index.close()


def test_progress_lines_on_a_fake_clock():
    import io

    from notewell.ingest.progress import Progress
    from reliability_helpers import FakeClock

    clock, out = FakeClock(), io.StringIO()
    bar = Progress("indexing notes", 10, stream=out, every=2.0, clock=clock)
    clock.advance(1.0)
    bar.advance()  # the first line at once
    clock.advance(1.0)
    bar.advance()  # 1 s after the last line: none (a log gets one every 2 s)
    clock.advance(1.0)
    bar.advance(2)
    assert out.getvalue().splitlines() == [
        "indexing notes [##----------------------] 1/10 notes 1.0/s, 0:09 left",
        "indexing notes [#########---------------] 4/10 notes 1.3/s, 0:05 left"]

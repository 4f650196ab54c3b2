"""The Bear source over generated Bear 2 and Bear 1 databases, in WAL and rollback mode:
what is indexed and what is skipped, tags, dates, links, unknown layouts, locks, and that
the database is never written."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from bear_fixture import CORE_DATA_EPOCH, FixtureNote, build
from notewell.config import SourceConfig
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.ingest.chunking import ChunkSettings
from notewell.ingest.sync import Syncer
from notewell.model.fake import FakeEmbedder
from notewell.search.query import parse
from notewell.sources import SourceError
from notewell.sources.bear import (
    BearSource,
    bear_body,
    bear_url,
    detect_schema,
    find_database,
    minimal_tags,
)

SOURDOUGH = "A1B2C3D4-0001-4000-8000-000000000001"
SHORTCUTS = "A1B2C3D4-0002-4000-8000-000000000002"
PACKING = "A1B2C3D4-0003-4000-8000-000000000003"
TRASHED = "A1B2C3D4-0004-4000-8000-000000000004"
ENCRYPTED = "A1B2C3D4-0005-4000-8000-000000000005"
GONE = "A1B2C3D4-0006-4000-8000-000000000006"
MEETING = "A1B2C3D4-0007-4000-8000-000000000007"
VISIBLE = {SOURDOUGH, SHORTCUTS, PACKING, MEETING}
LAYOUTS = [("bear2", "Z_5TAGS"), ("bear1", "Z_7TAGS"), ("bear1-early", "Z_6TAGS")]


def bear(path: str | Path, **options) -> BearSource:
    return BearSource(SourceConfig("bear", "bear", str(path), (), options),
                      lock_retry_seconds=options.pop("lock_retry_seconds", 5.0))


def uuids(src: BearSource) -> set[str]:
    return {s.note_id.split(":", 1)[1] for s in src.scan()}


@pytest.fixture(params=["wal", "delete"])
def journal(request) -> str:
    return request.param


# Spaces in the folder name: the file: URI must percent-encode them.
@pytest.mark.parametrize("schema,join", LAYOUTS)
def test_layouts_index_visible_notes_only(tmp_path, schema, join, journal):
    fx = build(str(tmp_path / "Application Data" / "database.sqlite"), schema, journal)
    src = bear(fx.path)
    assert uuids(src) == VISIBLE  # trashed, encrypted, permanently deleted are skipped
    conn = sqlite3.connect(f"file:{fx.path}?mode=ro", uri=True)
    assert detect_schema(conn, fx.path).join_table == join
    conn.close()
    for uuid in (TRASHED, ENCRYPTED, GONE):
        assert src.load(f"bear:{uuid}") is None
    note = src.load(f"bear:{SOURDOUGH}")
    # Tags come from the note-tag join table, not the pinned-in-tags one (pinned: travel).
    assert note.tags == ("kitchen", "recipes/bread")
    fx.close()


def test_note_fields(tmp_path):
    fx = build(str(tmp_path / "db.sqlite"))
    src = bear(fx.path)
    list(src.scan())
    note = src.load(f"bear:{SOURDOUGH}")
    assert note.title == "Sourdough starter" and note.kind == "bear" and note.path is None
    assert note.note_id == f"bear:{SOURDOUGH}" and note.source == "bear"
    # Title line and the tag-only line are gone; the body stays.
    assert note.text.startswith("Feed the starter twice a day")
    assert "#recipes" not in note.text and "#kitchen" not in note.text
    assert note.created == pytest.approx(1_690_000_000.0)  # Core Data seconds since 2001
    assert note.modified == pytest.approx(1_700_000_100.0)
    assert note.url == f"bear://x-callback-url/open-note?id={SOURDOUGH}"
    assert not note.archived
    # The cheap scan and the full load agree, so an unchanged note is never re-read.
    assert {s.note_id: s.fingerprint for s in src.scan()}[note.note_id] == note.fingerprint
    packing = src.load(f"bear:{PACKING}")
    assert packing.archived and packing.text == "Passport, charger, adapter for UK sockets."
    fx.close()


def test_multi_word_tag_reads_as_words_and_code_is_untouched(tmp_path):
    fx = build(str(tmp_path / "db.sqlite"))
    note = bear(fx.path).load(f"bear:{SHORTCUTS}")
    assert note.tags == ("tips and tricks",)
    assert "A few tips and tricks for the terminal" in note.text
    assert "#not-a-tag in code" in note.text  # inside a code fence: left alone
    fx.close()


def test_nested_tags_keep_the_full_path_only():
    assert minimal_tags(["work", "work/projects", "work/projects/apollo", "home"]) == [
        "home", "work/projects/apollo"]
    assert minimal_tags(["Work", "work/x"]) == ["work/x"]


def test_bear_body_strips_only_real_tags():
    text = ("# Title\n#alpha #two words#\n\nA line with #alpha inside and #other.\n"
            "[image:ABC/photo.jpg]\n![a cat](cat.png)<!-- {\"width\":200} -->\n"
            "See [[Other note|the other]].")
    body = bear_body(text, "Title", ["alpha", "two words"])
    assert body.startswith("A line with")  # the title and tag-only lines are gone
    assert "A line with alpha inside and #other." in body  # #other is not one of its tags
    assert "image:" not in body and "width" not in body and "a cat" in body
    assert "See the other." in body


def test_passage_url_encodes_heading(tmp_path):
    fx = build(str(tmp_path / "db.sqlite"))
    src = bear(fx.path)
    note = src.load(f"bear:{MEETING}")
    url = src.passage_url(note, "Decisions & next steps")
    assert url == (f"bear://x-callback-url/open-note?id={MEETING}"
                   "&header=Decisions%20%26%20next%20steps")
    assert "+" not in bear_url("a b", "c d")
    assert src.passage_url(note, None) == note.url
    fx.close()


def test_include_archived_false(tmp_path):
    fx = build(str(tmp_path / "db.sqlite"))
    src = bear(fx.path, include_archived=False)
    assert uuids(src) == VISIBLE - {PACKING}
    assert src.load(f"bear:{PACKING}") is None
    assert uuids(bear(fx.path, include_archived="false")) == VISIBLE - {PACKING}
    fx.close()


def test_reads_what_is_only_in_the_wal(tmp_path):
    fx = build(str(tmp_path / "db.sqlite"), journal="wal")
    fx.checkpoint()
    src = bear(fx.path)
    list(src.scan())
    fx.edit_text(SOURDOUGH, "# Sourdough starter\n\nNow fed with spelt flour.\n")
    assert Path(fx.path + "-wal").stat().st_size > 0  # the edit lives in the WAL only
    assert "spelt" in src.load(f"bear:{SOURDOUGH}").text  # immutable=1 would miss it
    fx.close()


def sha(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def test_database_is_byte_identical_after_indexing_and_syncing(tmp_path, journal):
    fx = build(str(tmp_path / "Bear Data" / "database.sqlite"), "bear2", journal)
    before = {s: sha(fx.path + s) for s in ("", "-wal", "-journal")}
    assert before[""] is not None
    src = bear(fx.path)
    index = Index(str(tmp_path / "index.sqlite"), BuildSettings("fake-hash:64", 64, "c"))
    syncer = Syncer(index, FakeEmbedder(), ChunkSettings())
    first = syncer.sync(src)
    assert first.added == 4 and first.error is None
    assert src.change_token() == src.change_token()
    again = syncer.sync(src)
    assert again.unchanged == 4 and not again.changed
    # Writing through our connection is refused outright (only the private connection
    # itself can show it: nothing public writes).
    with pytest.raises(sqlite3.OperationalError):
        src._conn.execute("UPDATE ZSFNOTE SET ZTITLE = 'x'")
    src.close()
    index.close()
    assert {s: sha(fx.path + s) for s in before} == before
    fx.close()


def test_change_token_sees_commits_tag_only_included(tmp_path, journal):
    fx = build(str(tmp_path / "db.sqlite"), journal=journal)
    src = bear(fx.path)
    t0 = src.change_token()
    list(src.scan())
    src.load(f"bear:{SOURDOUGH}")
    assert src.change_token() == t0  # our own reads change nothing
    stub0 = {s.note_id: s.fingerprint for s in src.scan()}
    fx.add_tag(SHORTCUTS, "terminal")  # join table only; modification date untouched
    t1 = src.change_token()
    assert t1 != t0
    stub1 = {s.note_id: s.fingerprint for s in src.scan()}
    assert stub1[f"bear:{SHORTCUTS}"] != stub0[f"bear:{SHORTCUTS}"]
    assert stub1[f"bear:{SOURDOUGH}"] == stub0[f"bear:{SOURDOUGH}"]
    assert "terminal" in src.load(f"bear:{SHORTCUTS}").tags
    fx.close()


def test_unknown_layouts_are_clear_errors(tmp_path):
    fx = build(str(tmp_path / "a.sqlite"))
    fx.conn.execute("DROP TABLE Z_5TAGS")  # only the pinned-in-tags table is left
    fx.close()
    with pytest.raises(SourceError, match=r"Z_5NOTES and Z_13TAGS"):
        list(bear(fx.path).scan())

    fx = build(str(tmp_path / "b.sqlite"))
    fx.conn.execute("ALTER TABLE ZSFNOTE RENAME COLUMN ZTEXT TO ZBODY")
    fx.close()
    with pytest.raises(SourceError, match=r"ZSFNOTE\.ZTEXT"):
        list(bear(fx.path).scan())

    fx = build(str(tmp_path / "c.sqlite"))
    fx.conn.execute("DROP TABLE ZSFNOTETAG")
    fx.close()
    with pytest.raises(SourceError, match="table ZSFNOTETAG"):
        list(bear(fx.path).scan())

    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(SourceError, match="read-only"):
        list(bear(junk).scan())


def test_join_table_derived_from_entity_numbers(tmp_path):
    fx = build(str(tmp_path / "db.sqlite"))
    # Renumber the entities as another Bear version might: the join table follows.
    fx.conn.execute("ALTER TABLE Z_5TAGS RENAME TO Z_9TAGS")
    fx.conn.execute("ALTER TABLE Z_9TAGS RENAME COLUMN Z_5NOTES TO Z_9NOTES")
    fx.conn.execute("UPDATE Z_PRIMARYKEY SET Z_NAME = 'SFOld' WHERE Z_ENT = 9")
    fx.conn.execute("UPDATE Z_PRIMARYKEY SET Z_NAME = 'SFNoteConflict' WHERE Z_ENT = 5")
    fx.conn.execute("UPDATE Z_PRIMARYKEY SET Z_NAME = 'SFNote' WHERE Z_ENT = 9")
    schema = detect_schema(fx.conn, fx.path)
    assert (schema.join_table, schema.join_note, schema.join_tag) == (
        "Z_9TAGS", "Z_9NOTES", "Z_13TAGS")
    fx.close()


def test_missing_database_names_the_fix(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        list(bear(tmp_path / "nope.sqlite").scan())
    assert bear(tmp_path / "nope.sqlite").change_token().startswith("unavailable:")


def test_default_location_lookup(tmp_path):
    assert find_database(str(tmp_path)) is None
    old = tmp_path / "Library/Containers/net.shinyfrog.bear/Data/Documents/Application Data"
    old.mkdir(parents=True)
    (old / "database.sqlite").write_bytes(b"")
    assert find_database(str(tmp_path)) == str(old / "database.sqlite")
    new = tmp_path / ("Library/Group Containers/9K33E3U3T4.net.shinyfrog.bear/"
                      "Application Data")
    new.mkdir(parents=True)
    (new / "database.sqlite").write_bytes(b"")
    assert find_database(str(tmp_path)) == str(new / "database.sqlite")  # Bear 2 first


def test_path_may_name_the_folder(tmp_path):
    fx = build(str(tmp_path / "Application Data" / "database.sqlite"))
    assert uuids(bear(tmp_path / "Application Data")) == VISIBLE
    fx.close()


def test_locked_database_is_retried_then_reported(tmp_path):
    # The back-off sleeps on a fake clock: how long the lock is waited out is counted,
    # not lived through.
    from reliability_helpers import FakeClock

    fx = build(str(tmp_path / "db.sqlite"), journal="delete")
    clock, waits, release_after = FakeClock(), [], [0]

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.advance(seconds)
        if len(waits) == release_after[0]:
            fx.conn.execute("COMMIT")  # Bear's write ends while we back off

    src = BearSource(SourceConfig("bear", "bear", fx.path), lock_retry_seconds=1.0,
                     clock=clock, sleep=sleep)
    list(src.scan())
    fx.conn.execute("BEGIN EXCLUSIVE")  # Bear in the middle of a write
    with pytest.raises(SourceError, match="stayed locked for 1 s"):
        list(src.scan())
    # Backed off, doubling, for the budget and not beyond (a next wait of 0.5 s would be).
    assert waits == [0.02, 0.04, 0.08, 0.16, 0.32]
    # A lock released while we back off is waited out.
    waits.clear()
    release_after[0] = 3
    assert uuids(src) == VISIBLE and len(waits) == 3
    fx.close()


def test_untitled_note_and_empty_title(tmp_path):
    notes = [FixtureNote("", "Just a first line\n\nand more text.",
                         uuid="A1B2C3D4-0009-4000-8000-000000000009")]
    fx = build(str(tmp_path / "db.sqlite"), notes=notes)
    note = bear(fx.path).load("bear:A1B2C3D4-0009-4000-8000-000000000009")
    assert note.title == "Just a first line"
    assert note.text.strip() == "and more text."
    fx.close()


def test_dates_are_core_data_not_unix(tmp_path):
    fx = build(str(tmp_path / "db.sqlite"))
    raw = fx.conn.execute("SELECT ZCREATIONDATE FROM ZSFNOTE WHERE ZUNIQUEIDENTIFIER = ?",
                          (SOURDOUGH,)).fetchone()[0]
    assert raw == pytest.approx(1_690_000_000.0 - CORE_DATA_EPOCH)
    assert bear(fx.path).load(f"bear:{SOURDOUGH}").created == pytest.approx(1_690_000_000.0)
    fx.close()


def test_fixture_script_writes_a_database(tmp_path):
    from bear_fixture import main

    out = tmp_path / "x" / "database.sqlite"
    assert main([str(out), "--schema", "bear1", "--journal", "delete"]) == 0
    assert uuids(bear(out)) == VISIBLE


# -- attachments: the text Bear extracted from images (OCR) and PDFs ---------------------


def _indexed(tmp_path, fx):
    from notewell.search.searcher import Searcher

    src = bear(fx.path)
    index = Index(str(tmp_path / "index.sqlite"), BuildSettings("fake-hash:64", 64, "c"))
    syncer = Syncer(index, FakeEmbedder(), ChunkSettings())
    return src, index, syncer, Searcher(index, FakeEmbedder())


def test_attachment_text_is_read_with_its_note(tmp_path):
    fx = build(str(tmp_path / "db.sqlite"))
    src = bear(fx.path)
    list(src.scan())
    note = src.load(f"bear:{SOURDOUGH}")
    # The PDF with text is in; the image Bear has not read (no ZSEARCHTEXT) is not.
    assert [a.name for a in note.attachments] == ["feeding-schedule.pdf"]
    assert "discard half" in note.attachments[0].pages[0]
    assert note.attachments[0].url is None  # Enter opens the note in Bear
    # A file removed from its note (ZUNUSED) is left out.
    assert src.load(f"bear:{SHORTCUTS}").attachments == ()
    assert {s.note_id: s.fingerprint for s in src.scan()}[note.note_id] == note.fingerprint
    fx.close()


def test_a_word_only_in_a_scanned_image_finds_its_note(tmp_path):
    fx = build(str(tmp_path / "db.sqlite"))
    src, index, syncer, searcher = _indexed(tmp_path, fx)
    report = syncer.sync(src)
    assert report.added == 4 and not report.warnings
    hits = searcher.run(parse("telemetry dashboard latency"), mode="bm25").hits
    assert hits and hits[0].note_id == f"bear:{MEETING}"
    assert hits[0].attachment == "whiteboard.jpg"
    assert hits[0].heading_path == "\U0001f4ce whiteboard.jpg"
    assert hits[0].url == f"bear://x-callback-url/open-note?id={MEETING}"
    # The note's own passages say nothing of an attachment.
    own = searcher.run(parse("Apollo beta customers"), mode="bm25").hits[0]
    assert own.note_id == f"bear:{MEETING}" and own.attachment is None
    # Files of a trashed note and files removed from their note are not indexed.
    assert searcher.run(parse("quasar invoice"), mode="bm25").hits == []
    assert searcher.run(parse("zygomorphic"), mode="bm25").hits == []
    index.close()
    fx.close()


def test_attachment_passages_counted(tmp_path):
    fx = build(str(tmp_path / "db.sqlite"))
    src, index, syncer, _ = _indexed(tmp_path, fx)
    syncer.sync(src)
    rows = index.db.execute("SELECT count(*) FROM chunks WHERE heading_path LIKE ?",
                            ("\U0001f4ce %",)).fetchone()[0]
    assert rows == 2  # the sourdough PDF and the whiteboard photo
    index.close()
    fx.close()


def test_ocr_finishing_later_is_seen_by_sync(tmp_path):
    """Bear fills ZSEARCHTEXT after the note was saved, without touching the note."""
    fx = build(str(tmp_path / "db.sqlite"))
    src, index, syncer, searcher = _indexed(tmp_path, fx)
    syncer.sync(src)
    assert searcher.run(parse("crumb loaf"), mode="bm25").hits == []
    before = src.change_token()
    fx.set_search_text("jar.jpg", "crumb photo of the second loaf")
    assert src.change_token() != before
    report = syncer.sync(src)
    assert report.updated == 1 and report.unchanged == 3
    hits = searcher.run(parse("crumb loaf"), mode="bm25").hits
    assert hits[0].note_id == f"bear:{SOURDOUGH}" and hits[0].attachment == "jar.jpg"
    # Removed again (the file taken out of the note): its passages go too.
    fx.conn.execute("UPDATE ZSFNOTEFILE SET ZUNUSED = 1, Z_OPT = Z_OPT + 1 "
                    "WHERE ZFILENAME = 'jar.jpg'")
    assert syncer.sync(src).updated == 1
    assert searcher.run(parse("crumb loaf"), mode="bm25").hits == []
    index.close()
    fx.close()


@pytest.mark.parametrize("schema", ["bear1", "bear1-early"])
def test_older_layouts_with_and_without_search_text(tmp_path, schema):
    fx = build(str(tmp_path / "db.sqlite"), schema)
    src = bear(fx.path)
    list(src.scan())
    note = src.load(f"bear:{MEETING}")
    # bear1-early's ZSFNOTEFILE has no ZSEARCHTEXT: notes still index, without attachments.
    assert bool(note.attachments) == (schema == "bear1")
    fx.close()

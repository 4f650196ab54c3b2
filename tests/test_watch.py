"""Change detection: file-system events and polling, Bear's change token, debouncing, and
the daemon applying edits on its own within seconds, with a hint when it falls behind.
Debounce, backoff, lag and index retirement run on a fake clock: nothing here waits out a
time window; only real file events and a real daemon are polled for."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from bear_fixture import build
from helpers import start_daemon, stepped_background, write_notes
from notewell import config
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.engine import rebuild as rebuild_beside
from notewell.index import schema
from notewell.ingest.chunking import ChunkSettings
from notewell.ingest.sync import SyncReport
from notewell.ingest.watch import ChangeWatcher, relevant_path, scan_digest
from notewell.model.fake import FakeEmbedder
from notewell.serve.background import Background
from notewell.serve.daemon import Daemon
from notewell.sources import open_source
from reliability_helpers import FakeClock


def wait_for(predicate, timeout: float = 5.0, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = write_notes(tmp_path / "vault", {"a.md": "# A\n\nalpha\n", "sub/b.md": "# B\n"})
    (root / ".obsidian").mkdir()
    return root


def md_source(root: Path):
    return open_source(SourceConfig("notes", "markdown", str(root)))


def test_relevant_paths():
    assert relevant_path("/v/a.md", False) and relevant_path("/v/b.MARKDOWN", False)
    assert relevant_path("/v/folder", True)
    assert not relevant_path("/v/image.png", False)
    assert not relevant_path("/v/.git/index", False)
    assert not relevant_path("/v/.obsidian/workspace.json", False)
    assert relevant_path("/v/.obsidian/app.json", False)  # excluded files may change


def test_polling_sees_changes_and_debounces(folder):
    clock = FakeClock()  # steps are binary fractions, so the comparisons are exact
    w = ChangeWatcher([md_source(folder)], use_events=False, debounce=0.25, poll_seconds=0.125,
                      token_seconds=0.02, clock=clock)
    w.start()
    try:
        assert w.mode == {"notes": "polling"}
        w.check_now()
        assert w.dirty_since() == {}  # the baseline is not a change
        (folder / "c.md").write_text("# C\n")
        clock.advance(0.125)  # the next scan is due: the poller finds the new note
        assert wait_for(lambda: "notes" in w.dirty_since(), 3)
        assert w.take_due() == {}  # not quiet for `debounce` yet
        clock.advance(0.25)
        assert w.take_due()
        assert w.dirty_since() == {}  # taken: no longer dirty
    finally:
        w.stop()


def test_debounce_and_max_delay(folder):
    clock = FakeClock()
    w = ChangeWatcher([md_source(folder)], use_events=False, debounce=0.25, max_delay=0.5,
                      clock=clock)
    w.mark("notes")
    assert w.take_due() == {} and 0.0 < w.next_due_in() <= 0.25
    due, waited = {}, 0.0
    while waited < 0.75 and not due:  # a burst of saves, every 0.125 s
        w.mark("notes")
        clock.advance(0.125)
        waited += 0.125
        due = w.take_due()
    assert "notes" in due  # max_delay cut the burst short
    assert waited == 0.5  # exactly max_delay after the first change
    assert w.next_due_in() is None
    w.force()
    assert w.next_due_in() == 0.0 and set(w.take_due()) == {"notes"}
    w.mark_later(["notes"], 0.25)
    assert w.take_due() == {} and "notes" in w.dirty_since()
    assert w.next_due_in() == 0.25
    clock.advance(0.125)
    assert w.take_due() == {}
    clock.advance(0.125)
    assert set(w.take_due()) == {"notes"}


def test_debounce_waits_for_a_quiet_spell_and_says_when_it_ends(folder):
    clock = FakeClock()
    w = ChangeWatcher([md_source(folder)], use_events=False, debounce=1.0, max_delay=10.0,
                      clock=clock)
    first_seen = clock.time()
    w.mark("notes")
    clock.advance(0.75)
    w.mark("notes")  # another save: the quiet second starts again
    assert w.next_due_in() == 1.0
    clock.advance(0.875)
    assert w.take_due() == {} and w.next_due_in() == 0.125
    clock.advance(0.125)
    assert w.take_due() == {"notes": first_seen}  # with when its first change was seen
    assert w.dirty_since() == {} and w.next_due_in() is None


def test_file_system_events(folder):
    pytest.importorskip("watchdog")
    clock = FakeClock()
    w = ChangeWatcher([md_source(folder)], use_events=True, debounce=0.125,
                      poll_seconds=3600, rescan_seconds=3600, clock=clock)
    marks: list[tuple[dict, str]] = []  # each change: what was dirty when it came, and why
    mark = w.mark

    def recording_mark(name: str, why: str = "") -> None:
        marks.append((w.dirty_since(), why))
        mark(name, why)

    w.mark = recording_mark
    w.start()
    try:
        assert w.mode == {"notes": "events"}
        (folder / "notes.txt").write_text("not a note")
        (folder / ".obsidian" / "workspace.json").write_text("{}")
        (folder / "a.md").read_text()  # our own reads must not look like changes
        (folder / "sub" / "b.md").write_text("# B\n\nedited\n")
        assert wait_for(lambda: "notes" in w.dirty_since(), 3)
        # Events arrive in order: all of the above had been handled, and none of them
        # marked anything, when the edit of b.md did.
        assert marks[0][0] == {} and marks[0][1].endswith("b.md")
        clock.advance(0.125)
        assert set(w.take_due()) == {"notes"}
        (folder / "sub").rename(folder / "moved")
        assert wait_for(lambda: "notes" in w.dirty_since(), 3)
        assert wait_for(lambda: any(why.startswith("moved ") for _, why in marks), 3)
    finally:
        w.stop()


def test_the_daemons_own_reads_send_no_events_at_all(folder, monkeypatch):
    """Only changes are subscribed to: a scan opening every note wakes no watchdog thread
    (inotify's mask), not merely an event the handler then drops."""
    watchdog_events = pytest.importorskip("watchdog.events")
    seen: list[str] = []
    dispatch = watchdog_events.FileSystemEventHandler.dispatch

    def recording_dispatch(handler, event) -> None:
        seen.append(f"{event.event_type} {os.fsdecode(event.src_path)}")
        dispatch(handler, event)

    monkeypatch.setattr(watchdog_events.FileSystemEventHandler, "dispatch", recording_dispatch)
    w = ChangeWatcher([md_source(folder)], use_events=True, rescan_seconds=3600)
    w.start()
    try:
        scan_digest(w.sources["notes"])  # reads, as a sync or rescan does
        (folder / "a.md").read_text()
        (folder / "z.md").write_text("# Z\n")  # then a change, which does arrive
        assert wait_for(lambda: any(e.endswith("z.md") for e in seen), 3)
        assert not [e for e in seen if not e.endswith("z.md")], seen
    finally:
        w.stop()


def test_bear_change_token(tmp_path):
    fx = build(str(tmp_path / "bear" / "database.sqlite"))
    src = open_source(SourceConfig("bear", "bear", fx.path))
    w = ChangeWatcher([src], use_events=True, debounce=0.1, token_seconds=0.05)
    w.start()
    try:
        assert w.mode == {"bear": "token"}
        w.check_now()  # the token read again, unchanged: no change
        assert w.dirty_since() == {}
        fx.add_tag("A1B2C3D4-0002-4000-8000-000000000002", "terminal")
        assert wait_for(lambda: "bear" in w.dirty_since(), 3)
    finally:
        w.stop()
        src.close()
        fx.close()


class RecordingEvent(threading.Event):
    """The poller's wake-up event, recording how long each sleep may last and each poke."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []
        self.pokes = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        return super().wait(timeout)

    def set(self) -> None:
        self.pokes += 1
        super().set()


def test_an_idle_poller_sleeps_until_its_next_scheduled_read(tmp_path, folder):
    """No wake-up every second: with file events, the next look is the safety rescan (or
    Bear's safety token read); without them, the poll; a token without events, every
    ``token_seconds``."""
    pytest.importorskip("watchdog")
    clock = FakeClock()
    fx = build(str(tmp_path / "bear" / "database.sqlite"))
    bear = open_source(SourceConfig("bear", "bear", fx.path))
    cases = [([md_source(folder)], True, 300.0), ([bear], True, 60.0),
             ([md_source(folder)], False, 5.0), ([bear], False, 1.0)]
    try:
        for sources, events, expected in cases:
            w = ChangeWatcher(sources, use_events=events, poll_seconds=5.0, token_seconds=1.0,
                              token_safety_seconds=60.0, rescan_seconds=300.0, clock=clock)
            w._poke = RecordingEvent()
            w.start()
            try:
                assert w.next_check_in() == expected
                assert wait_for(lambda w=w: w._poke.timeouts, 3)
                assert w._poke.timeouts[0] == expected, (sources, events)
                if events and sources[0] is bear:  # an event: read now, and 1 s later
                    w._poke.set()
                    assert wait_for(lambda w=w: len(w._poke.timeouts) > 1, 3)
                    assert w._poke.timeouts[1] == 1.0
            finally:
                w.stop()
    finally:
        bear.close()
        fx.close()


def test_bear_changes_arrive_by_file_events_without_polling(tmp_path):
    """Bear's database folder is watched: a commit is seen at once, with the token's poll
    an hour away; the -shm file readers touch pokes nothing."""
    pytest.importorskip("watchdog")
    fx = build(str(tmp_path / "bear" / "database.sqlite"))
    src = open_source(SourceConfig("bear", "bear", fx.path))
    w = ChangeWatcher([src], use_events=True, debounce=0.1, token_seconds=3600,
                      token_safety_seconds=3600)
    w._poke = RecordingEvent()
    w.start()
    try:
        assert w.mode == {"bear": "token"} and w.next_check_in() > 3000
        # Not the database's own -shm: SQLite maps it, and writing it from here could break
        # the fixture's connection. One "created" event of a -shm file, then the marker's.
        (tmp_path / "index-shm").write_bytes(b"\0" * 8)
        os.replace(tmp_path / "index-shm", tmp_path / "bear" / "other.sqlite-shm")
        (tmp_path / "marker").write_text("after the -shm write")
        os.replace(tmp_path / "marker", tmp_path / "bear" / "marker")  # one event
        assert wait_for(lambda: w._poke.pokes >= 1, 3)
        assert w._poke.pokes == 1  # events arrive in order: the -shm one poked nothing
        assert w.dirty_since() == {}  # a poke reads the token; unchanged, nothing to do
        fx.add_tag("A1B2C3D4-0002-4000-8000-000000000002", "terminal")
        assert wait_for(lambda: "bear" in w.dirty_since(), 3)
    finally:
        w.stop()
        src.close()
        fx.close()


def test_scan_digest_reports_errors(tmp_path, folder):
    assert scan_digest(md_source(folder)) != scan_digest(md_source(tmp_path / "none"))
    assert scan_digest(md_source(tmp_path / "none")).startswith("error:")


def test_lag_hint_in_search_results(tmp_path, folder):
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(folder)),))
    engine = Engine(cfg, embedder=FakeEmbedder(), index_dir=str(tmp_path / "idx"))
    engine.sync()
    clock = FakeClock()
    d = Daemon(cfg, engine_factory=lambda c: engine, clock=clock)
    assert d.background.start_engine() and d.background.state == "ready"
    try:
        def search(fmt: str) -> dict:
            reply = d.handlers.handle({"op": "search", "query": "alpha", "format": fmt})
            assert reply["ok"], reply
            return reply["result"]

        assert json.loads(search("alfred")["alfred"])["items"][0]["title"] == "A"
        assert "behind" not in search("json")
        # A sync stopped with changes left unapplied: the index lags from now on.
        d.background.note_reports([SyncReport("notes", pending=2)])
        clock.advance(20)  # recent: no hint yet
        assert json.loads(search("alfred")["alfred"])["items"][0]["title"] == "A"
        clock.advance(165)
        items = json.loads(search("alfred")["alfred"])["items"]
        assert items[0]["title"] == "Index is 3 minutes behind" and not items[0]["valid"]
        assert items[1]["title"] == "A"
        d.background.note_reports([SyncReport("notes", error="database is locked")])
        items = json.loads(search("alfred")["alfred"])["items"]
        assert "keeps failing: database is locked" in items[0]["subtitle"]
        assert search("json")["behind"]["minutes"] == 3
        status = d.handlers.handle({"op": "status"})["result"]
        assert status["behind"] == {"minutes": 3, "sources": ["notes"]}
        # A successful sync clears it.
        d.background.note_reports(engine.sync())
        assert d.background.lag() is None and d.background.errors == {}
    finally:
        d.shutdown()



def test_the_loop_syncs_a_change_once_it_has_been_quiet_for_the_debounce(tmp_path, folder):
    clock = FakeClock()
    with stepped_background(tmp_path, folder, clock, poll_seconds=5.0, debounce=1.0) as bg:
        assert [r["added"] for r in bg.last_reports] == [2]
        first = bg.last_reports
        assert bg.next_wait() == 5.0  # nothing pending: sleep a poll
        (folder / "c.md").write_text("# C\n\ngamma\n")
        bg.watcher.check_now()
        assert bg.next_wait() == 1.0
        clock.advance(0.75)
        bg.step()
        assert bg.last_reports is first  # not quiet for a second yet: no sync
        (folder / "c.md").write_text("# C\n\ngamma delta\n")
        bg.watcher.check_now()  # another save: the quiet second starts again
        clock.advance(0.75)
        bg.step()
        assert bg.last_reports is first and bg.next_wait() == 0.25
        clock.advance(0.25)
        bg.step()
        assert [(r["added"], r["updated"]) for r in bg.last_reports] == [(1, 0)]
        assert bg.next_wait() == 5.0 and bg.lag() is None  # a poll: the sync's after-work
        clock.advance(10.0)
        assert bg.next_wait() == 60.0  # settled and idle: a minute, not every poll
        (folder / "c.md").write_text("# C\n\ngamma delta epsilon\n")
        bg.watcher.check_now()
        assert bg.next_wait() == 1.0  # a change wakes it at its debounce


def test_failing_syncs_back_off_and_show_as_lag_after_a_minute(tmp_path, folder):
    clock = FakeClock()
    with stepped_background(tmp_path, folder, clock, poll_seconds=5.0) as bg:
        engine = bg.engine
        tries: list[float] = []

        def locked(**_):
            tries.append(clock.monotonic() - start)
            raise RuntimeError("database is locked")

        engine.sync = locked
        start = clock.monotonic()
        bg.request_sync()
        bg.step()
        assert tries == [0.0] and bg.errors == {"notes": "RuntimeError: database is locked"}
        lags = []
        for delay in (5.0, 10.0, 20.0, 40.0, 60.0, 60.0):  # doubling, at most a minute
            assert bg.watcher.next_due_in() == delay
            clock.advance(delay - 0.5)
            bg.step()
            assert len(tries) == len(lags) + 1  # not due yet
            clock.advance(0.5)
            bg.step()
            assert len(tries) == len(lags) + 2
            lags.append(bg.lag())
        assert tries == [0.0, 5.0, 15.0, 35.0, 75.0, 135.0, 195.0]
        assert lags[:3] == [None, None, None]  # under a minute behind: no hint
        error = ("notes", "RuntimeError: database is locked")
        assert lags[3:] == [{"minutes": m, "sources": ["notes"], "error": error}
                            for m in (1, 2, 3)]
        del engine.sync  # the source works again
        clock.advance(60.0)
        bg.step()
        assert [r["error"] for r in bg.last_reports] == [None]
        assert bg.errors == {} and bg.lag() is None and bg.watcher.next_due_in() is None
        engine.sync = locked  # a new failure starts the backoff over
        bg.request_sync()
        bg.step()
        assert bg.watcher.next_due_in() == 5.0


def test_a_rebuilt_index_is_switched_to_and_the_old_one_closed_when_its_last_reader_ends(
        tmp_path, folder):
    clock = FakeClock()
    with stepped_background(tmp_path, folder, clock) as bg:
        engine = bg.engine
        old = engine.index
        newer, _ = rebuild_beside(engine.sources, FakeEmbedder(), engine.chunker,
                                  engine.index_dir)
        with engine.reading() as view:  # a request running on the old file
            held = view.generation
            bg.step()  # nothing due: it looks for a newer generation, and switches
            assert engine.generations.current.index.path == newer
            assert held.index is old and view.index_path == old.path  # it keeps its own
            clock.advance(3600.0)  # however long it runs
            bg.step()
            assert not held.closed and os.path.exists(old.path)
            assert view.search("alpha").hits
        assert held.closed and not os.path.exists(old.path)
        with engine.reading() as view:
            assert engine.index.path == newer and view.search("alpha").hits
        assert bg.state == "ready"


def test_after_an_upgrade_that_changes_the_chunker_the_loop_re_chunks_the_index(tmp_path,
                                                                              folder):
    """The daemon answers from the old file while it builds the new one beside, switches
    to it, and closes the old one once no request holds it."""
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(folder)),))
    before = Engine(cfg, embedder=FakeEmbedder(), index_dir=str(tmp_path / "idx"))
    before.sync()
    old_path = before.index.path
    before.close()
    clock = FakeClock()
    changed = ChunkSettings(max_pieces=99)
    engine = Engine(cfg, embedder=FakeEmbedder(), chunker=changed,
                    index_dir=str(tmp_path / "idx"))
    old = engine.index
    with engine.reading() as view:
        assert old.other_chunker is not None and view.search("alpha").hits
    bg = Background(lambda: engine, threading.Event(), use_events=False, clock=clock)
    assert bg.start_engine() and bg.state == "ready"
    bg.start_watching()
    try:
        bg.request_sync()
        bg.step()
        assert engine.index is not old and engine.index.other_chunker is None
        assert schema.read_meta(engine.index.db)["chunker"] == changed.fingerprint()
        assert [r["unchanged"] + r["added"] for r in bg.last_reports] == [2]
        # Nothing held the old file: closed and deleted at the switch.
        with engine.reading() as view:
            assert view.search("alpha").hits and not os.path.exists(old_path)
        assert bg.state == "ready"
    finally:
        bg.watcher.stop()
        engine.close()


@pytest.fixture
def daemon_home(home: Path, tmp_path: Path):
    notes = write_notes(tmp_path / "live", {"a.md": "# Alpha\n\nThe first note.\n"})
    fx = build(str(tmp_path / "Bear Data" / "database.sqlite"))
    config.save(Config(sources=(SourceConfig("notes", "markdown", str(notes)),
                                SourceConfig("bear", "bear", fx.path))))
    d = start_daemon(home, poll=5.0)
    yield d, notes, fx
    d.stop()
    fx.close()


def hits(d, query: str) -> list[str]:
    reply = d.ask("search", query=query, limit=5, mode="bm25")
    return [h["note_id"] for h in reply["result"]["hits"]] if reply["ok"] else []


def test_daemon_applies_edits_on_its_own(daemon_home):
    d, notes, fx = daemon_home
    assert wait_for(lambda: hits(d, "first note"), 20)
    status = d.ask("status")["result"]
    assert status["watching"]["bear"] == "token"
    assert status["watching"]["notes"] in ("events", "polling")
    (notes / "zebra.md").write_text("# Zebra crossing\n\nStripes on the road.\n")
    fx.edit_text("A1B2C3D4-0002-4000-8000-000000000002",
                 "# Keyboard shortcuts\n\nUse xylophone mallets on the keyboard.\n")
    assert wait_for(lambda: hits(d, "zebra stripes") == ["notes:zebra.md"], 8)
    assert wait_for(lambda: hits(d, "xylophone mallets") == [
        "bear:A1B2C3D4-0002-4000-8000-000000000002"], 8)  # no `notewell sync` asked
    (notes / "zebra.md").unlink()
    assert wait_for(lambda: hits(d, "zebra stripes") == [], 8)

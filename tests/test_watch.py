"""Change detection: file-system events and polling, Bear's change token, debouncing, and
the daemon applying edits on its own within seconds, with a hint when it falls behind."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from bear_fixture import build
from helpers import start_daemon, write_notes
from notewell import config
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.ingest.watch import ChangeWatcher, relevant_path, scan_digest
from notewell.model.fake import FakeEmbedder
from notewell.serve.daemon import Daemon
from notewell.sources import open_source


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
    w = ChangeWatcher([md_source(folder)], use_events=False, debounce=0.2, poll_seconds=0.1)
    w.start()
    try:
        assert w.mode == {"notes": "polling"}
        w.check_now()
        assert w.dirty_since() == {}  # the baseline is not a change
        (folder / "c.md").write_text("# C\n")
        assert wait_for(lambda: "notes" in w.dirty_since(), 3)
        assert wait_for(lambda: w.take_due(), 3)
        assert w.dirty_since() == {}  # taken: no longer dirty
    finally:
        w.stop()


def test_debounce_and_max_delay(folder):
    w = ChangeWatcher([md_source(folder)], use_events=False, debounce=0.3, max_delay=0.6)
    w.mark("notes")
    assert w.take_due() == {} and 0.0 < w.next_due_in() <= 0.3
    deadline = time.monotonic() + 0.9
    due = {}
    while time.monotonic() < deadline and not due:  # a burst of saves, every 0.1 s
        w.mark("notes")
        time.sleep(0.1)
        due = w.take_due()
    assert "notes" in due  # max_delay cut the burst short
    assert w.next_due_in() is None
    w.force()
    assert w.next_due_in() == 0.0 and set(w.take_due()) == {"notes"}
    w.mark_later(["notes"], 0.3)
    assert w.take_due() == {} and "notes" in w.dirty_since()
    time.sleep(0.35)
    assert set(w.take_due()) == {"notes"}


def test_file_system_events(folder):
    pytest.importorskip("watchdog")
    w = ChangeWatcher([md_source(folder)], use_events=True, debounce=0.1,
                      poll_seconds=3600, rescan_seconds=3600)
    w.start()
    try:
        assert w.mode == {"notes": "events"}
        (folder / "notes.txt").write_text("not a note")
        (folder / ".obsidian" / "workspace.json").write_text("{}")
        (folder / "a.md").read_text()  # our own reads must not look like changes
        time.sleep(0.5)
        assert w.dirty_since() == {}
        (folder / "sub" / "b.md").write_text("# B\n\nedited\n")
        assert wait_for(lambda: "notes" in w.dirty_since(), 3)
        w.take_due()
        (folder / "sub").rename(folder / "moved")
        assert wait_for(lambda: "notes" in w.dirty_since(), 3)
    finally:
        w.stop()


def test_bear_change_token(tmp_path):
    fx = build(str(tmp_path / "bear" / "database.sqlite"))
    src = open_source(SourceConfig("bear", "bear", fx.path))
    w = ChangeWatcher([src], use_events=True, debounce=0.1, token_seconds=0.05)
    w.start()
    try:
        assert w.mode == {"bear": "token"}
        time.sleep(0.2)
        assert w.dirty_since() == {}
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
    d = Daemon(cfg, engine_factory=lambda c: engine)
    d.engine, d.state = engine, "ready"
    try:
        def search(fmt: str) -> dict:
            reply = d.handle({"op": "search", "query": "alpha", "format": fmt})
            assert reply["ok"], reply
            return reply["result"]

        assert json.loads(search("alfred")["alfred"])["items"][0]["title"] == "A"
        assert "behind" not in search("json")
        d.behind["notes"] = time.time() - 20  # recent: no hint yet
        assert json.loads(search("alfred")["alfred"])["items"][0]["title"] == "A"
        d.behind["notes"] = time.time() - 185
        items = json.loads(search("alfred")["alfred"])["items"]
        assert items[0]["title"] == "Index is 3 minutes behind" and not items[0]["valid"]
        assert items[1]["title"] == "A"
        d.errors["notes"] = "database is locked"
        items = json.loads(search("alfred")["alfred"])["items"]
        assert "keeps failing: database is locked" in items[0]["subtitle"]
        assert search("json")["behind"]["minutes"] == 3
        status = d.handle({"op": "status"})["result"]
        assert status["behind"] == {"minutes": 3, "sources": ["notes"]}
        # A successful sync clears it.
        d._note_reports(engine.sync())
        assert d.lag() is None and d.errors == {}
    finally:
        d._pool.shutdown()
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
    start = time.monotonic()
    (notes / "zebra.md").write_text("# Zebra crossing\n\nStripes on the road.\n")
    fx.edit_text("A1B2C3D4-0002-4000-8000-000000000002",
                 "# Keyboard shortcuts\n\nUse xylophone mallets on the keyboard.\n")
    assert wait_for(lambda: hits(d, "zebra stripes") == ["notes:zebra.md"], 8)
    assert wait_for(lambda: hits(d, "xylophone mallets") == [
        "bear:A1B2C3D4-0002-4000-8000-000000000002"], 8)
    elapsed = time.monotonic() - start
    assert elapsed < 8  # no `notewell sync`, no poll of five seconds per source
    (notes / "zebra.md").unlink()
    assert wait_for(lambda: hits(d, "zebra stripes") == [], 8)

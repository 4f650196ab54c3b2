"""Damage found while the daemon runs: pages of the live index overwritten under it.

A read or a sync that meets ``CorruptError`` has the file checked, moved aside as
``*.corrupt-<time>`` and rebuilt from the sources, as at start: status says
"rebuilding", searches get the rebuilding item meanwhile and results after. ``doctor``
runs SQLite's ``quick_check`` on the index."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import apsw
from helpers import GatedEmbedder
from notewell.index import store
from notewell.ops import doctor
from reliability_helpers import inproc_daemon, markdown_config, write_corpus


def _overwrite_pages(path: Path) -> None:
    """Every page but the header page, overwritten in place, as a bad disk or another
    program would: the file keeps its name, size and open handles."""
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(4096)
        f.write(b"\xa5" * (size - 4096))


def _wait(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_pages_overwritten_under_a_running_daemon_are_moved_aside_and_rebuilt(home, tmp_path):
    root = write_corpus(tmp_path / "notes", 20)
    cfg = markdown_config(root)
    model = GatedEmbedder()
    with inproc_daemon(cfg, embedder=model) as d:
        assert d.handlers.handle({"op": "search", "query": "zq5x"})["result"]["hits"]
        live = Path(d.background.engine.index.path)
        d.background.engine.index.checkpoint()  # every page in the file, none only in the WAL
        _overwrite_pages(live)
        model.block = True  # the rebuild's embedding waits: "rebuilding" can be seen
        # The next sync (a changed note) meets the damage.
        (root / "n003.md").write_text("# Changed\n\nzq3x moved on.\n")
        d.background.request_sync()
        assert model.inside.wait(20), "no rebuild started"
        status = d.handlers.handle({"op": "status"})["result"]
        assert status["state"] == "rebuilding"
        moved = status["rebuilding"]["moved_to"]
        assert moved.startswith(str(live) + ".corrupt-") and Path(moved).exists()
        assert Path(store.current_path(str(live.parent))) != live
        doc = json.loads(d.handlers.handle({"op": "search", "query": "zq5x", "format": "alfred"})[
            "result"]["alfred"])
        assert "rebuilding" in doc["items"][0]["title"]
        model.gate.set()
        _wait(lambda: d.background.state == "ready")
        hits = d.handlers.handle({"op": "search", "query": "zq5x"})["result"]["hits"]
        assert hits[0]["note_id"] == "notes:n005.md"
        status = d.handlers.handle({"op": "status"})["result"]
        assert status["notes"] == 20 and status["sources"][0]["last_error"] is None
        assert d.handlers.handle({"op": "search", "query": "zq3x"})["result"]["hits"][0][
            "note_id"] == "notes:n003.md"  # the change that met the damage is in
    kept = [p for p in live.parent.iterdir() if ".corrupt-" in p.name
            and not p.name.endswith(("-wal", "-shm"))]
    assert [str(p) for p in kept] == [moved]  # moved aside, never deleted


def test_a_damaged_search_is_answered_in_words_and_the_file_checked(home, tmp_path):
    """A read that meets the damage first (before any sync) gets an error that says what
    is going on, and the sync thread moves the file aside: "rebuilding" follows."""
    root = write_corpus(tmp_path / "notes", 12)
    cfg = markdown_config(root)
    with inproc_daemon(cfg) as d:
        d.background.engine.index.checkpoint()
        live = Path(d.background.engine.index.path)
        _overwrite_pages(live)
        # A reader that has not cached the pages: a fresh thread's connection.
        out: list[dict] = []
        t = threading.Thread(target=lambda: out.append(d.handlers.handle({"op": "status"})))
        t.start()
        t.join()
        assert not out[0]["ok"] and out[0]["error"]["code"] == "damaged", out
        assert "rebuilding it from your notes" in out[0]["error"]["message"]

        def answers() -> bool:
            reply = d.handlers.handle({"op": "search", "query": "zq5x"})
            return reply["ok"] and bool(reply["result"]["hits"])

        _wait(answers)
        assert [p for p in live.parent.iterdir() if p.name.startswith(live.name + ".corrupt-")]
        assert d.background.engine.index.path != str(live)


def test_doctor_runs_quick_check_on_the_index(home, tmp_path):
    from notewell.engine import Engine
    from notewell.model.fake import FakeEmbedder

    root = write_corpus(tmp_path / "notes", 12)
    cfg = markdown_config(root)
    engine = Engine(cfg, embedder=FakeEmbedder())
    engine.sync()
    engine.index.checkpoint()
    engine.close()
    assert doctor.check_index(FakeEmbedder).status == "ok"
    path = Path(store.current_path())
    db = apsw.Connection(str(path))
    pages = [n for (n,) in db.execute("SELECT pageno FROM dbstat WHERE name = 'chunks'")]
    page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with open(path, "r+b") as f:  # the passages' pages: what `describe` reads is intact
        for n in pages:
            f.seek((n - 1) * page)
            f.write(b"\xa5" * page)
    check = doctor.check_index(FakeEmbedder)
    assert check.status == "FAIL" and "damaged" in check.detail, check
    assert "agent restart" in check.fix

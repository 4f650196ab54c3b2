"""Folders that cannot be read never delete their notes (issue 28.1): a root or subfolder
that cannot be listed (macOS privacy controls, permissions, a share gone) keeps its rows,
the source says which folder and what to do (status, doctor, the launcher's hint), and
nothing is embedded again when access comes back. The tests run as root here, where
chmod denies nothing, so ``os.scandir`` is made to raise for the folder instead."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from helpers import RecordingEmbedder, write_notes
from notewell import config
from notewell.cli import main
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.model.fake import FakeEmbedder
from notewell.ops import doctor
from notewell.serve.daemon import Daemon
from notewell.sources.folder import unreadable_error
from reliability_helpers import FakeClock

NOTES = {
    "a.md": "# Alpha\n\nAlpha notes about the garden shed.\n",
    "work/b.md": "# Bravo\n\nBravo notes about the quarterly report.\n",
    "work/deep/c.md": "# Charlie\n\nCharlie notes about the deep archive.\n",
    "home/d.md": "# Delta\n\nDelta notes about the kitchen tap.\n",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_notes(tmp_path / "notes", NOTES)


def engine_for(tmp_path: Path, root: Path, kind: str = "markdown") -> Engine:
    cfg = Config(sources=(SourceConfig("notes", kind, str(root)),))
    return Engine(cfg, embedder=RecordingEmbedder(), index_dir=str(tmp_path / "idx"))


def deny(monkeypatch, *folders: Path, error: int = errno.EPERM) -> None:
    """``os.scandir`` of each of ``folders`` fails as macOS fails a binary without the
    Files and Folders grant (EPERM), or with ``error``."""
    real = os.scandir
    refused = {os.path.realpath(f) for f in folders}

    def scandir(path="."):
        if os.path.realpath(os.fsdecode(path)) in refused:
            raise OSError(error, os.strerror(error), os.fsdecode(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def ids(engine: Engine) -> set[str]:
    return set(engine.index.stored_notes("notes"))


def source_status(engine: Engine) -> dict:
    with engine.reading() as view:
        return view.status()["sources"][0]


@pytest.mark.parametrize("kind", ["markdown", "obsidian"])
def test_an_unreadable_root_keeps_every_note(tmp_path, folder, monkeypatch, kind):
    (folder / ".obsidian").mkdir()
    engine = engine_for(tmp_path, folder, kind)
    engine.sync()
    before = ids(engine)
    assert len(before) == 4
    deny(monkeypatch, folder)
    [report] = engine.sync()
    assert report.deleted == 0 and ids(engine) == before
    assert str(folder) in report.error and "Operation not permitted" in report.error
    assert "kept as they were" in report.error and "readable by the user" in report.error
    assert source_status(engine)["last_error"] == report.error
    engine.close()


def test_an_unreadable_subfolder_keeps_its_notes_and_the_rest_syncs(tmp_path, folder,
                                                                    monkeypatch):
    engine = engine_for(tmp_path, folder)
    engine.sync()
    before = ids(engine)
    deny(monkeypatch, folder / "work")
    write_notes(folder, {"home/e.md": "# Echo\n\nA new note beside.\n"})
    (folder / "home" / "d.md").unlink()
    [report] = engine.sync()
    # work/ and work/deep/ are kept; the readable part is synced as usual.
    assert ids(engine) == before - {"notes:home/d.md"} | {"notes:home/e.md"}
    assert (report.added, report.deleted) == (1, 1)
    assert str(folder / "work") in report.error and "deep" not in report.error
    row = source_status(engine)
    assert row["last_error"] == report.error and row["notes"] == 4
    # Access back: the same notes, nothing embedded again, the error gone.
    monkeypatch.undo()
    embedder = engine.embedder
    embedder.texts.clear()
    [report] = engine.sync()
    assert report.error is None and report.deleted == 0 and embedder.texts == []
    assert ids(engine) == before - {"notes:home/d.md"} | {"notes:home/e.md"}
    assert source_status(engine)["last_error"] is None
    engine.close()


def test_a_folder_on_a_disk_gone_keeps_its_notes_too(tmp_path, folder, monkeypatch):
    engine = engine_for(tmp_path, folder)
    engine.sync()
    deny(monkeypatch, folder / "home", error=errno.EIO)
    [report] = engine.sync()
    assert report.deleted == 0 and len(ids(engine)) == 4
    assert "disk or network share" in report.error
    engine.close()


def test_a_vanished_root_keeps_every_note(tmp_path, folder):
    engine = engine_for(tmp_path, folder)
    engine.sync()
    before = ids(engine)
    folder.rename(tmp_path / "elsewhere")
    [report] = engine.sync()
    assert "is not a folder" in report.error and report.deleted == 0
    assert ids(engine) == before
    (tmp_path / "elsewhere").rename(folder)
    engine.embedder.texts.clear()
    [report] = engine.sync()
    assert report.error is None and engine.embedder.texts == [] and ids(engine) == before
    engine.close()


def test_the_message_names_the_folder_and_the_fix_on_macos(tmp_path):
    denied = PermissionError(errno.EPERM, "Operation not permitted")
    mac = unreadable_error("notes", "/Users/a/Documents", {"Work": denied}, "darwin")
    assert mac.denied and "/Users/a/Documents/Work (Operation not permitted)" in str(mac)
    assert "Files and Folders" in str(mac)
    assert "`notewell doctor` names the binary to allow" in str(mac)
    many = unreadable_error("notes", "/r", {str(i): denied for i in range(5)}, "darwin")
    assert "and 2 more" in str(many)
    gone = unreadable_error("notes", "/Volumes/nas", {"": OSError(errno.ENOTCONN, "gone")})
    assert not gone.denied and "disk or network share" in str(gone)


def test_a_file_that_cannot_be_stat_ed_is_kept(tmp_path, folder, monkeypatch):
    engine = engine_for(tmp_path, folder)
    engine.sync()
    real = os.DirEntry.stat if hasattr(os.DirEntry, "stat") else None
    assert real is not None
    # DirEntry cannot be patched; a scandir that hands out entries whose stat fails can.
    real_scandir = os.scandir

    class Entry:
        def __init__(self, entry):
            self._e, self.name, self.path = entry, entry.name, entry.path

        def is_dir(self):
            return self._e.is_dir()

        def is_file(self):
            return self._e.is_file()

        def stat(self):
            if self.name == "a.md":
                raise PermissionError(errno.EACCES, "Permission denied", self.path)
            return self._e.stat()

    monkeypatch.setattr(os, "scandir", lambda p=".": [Entry(e) for e in real_scandir(p)])
    [report] = engine.sync()
    assert report.deleted == 0 and "notes:a.md" in ids(engine)
    assert str(folder / "a.md") in report.error
    engine.close()


def test_doctor_and_the_launcher_show_an_unreadable_folder(tmp_path, folder, monkeypatch,
                                                           home):
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(folder)),))
    deny(monkeypatch, folder / "work")
    check = doctor.check_source(cfg.sources[0], "darwin")
    assert check.status == doctor.FAIL and str(folder / "work") in check.detail
    assert "Full Disk Access" in check.fix  # doctor names the binary to allow
    monkeypatch.undo()
    assert doctor.check_source(cfg.sources[0], "darwin").status == doctor.OK

    engine = engine_for(tmp_path, folder)
    engine.sync()
    clock = FakeClock()
    d = Daemon(cfg, engine_factory=lambda c: engine, clock=clock)
    assert d.background.start_engine() and d.background.state == "ready"
    try:
        deny(monkeypatch, folder / "work")
        d.background.note_reports(engine.sync())
        clock.advance(120)
        reply = d.handlers.handle({"op": "search", "query": "bravo", "format": "alfred"})
        items = json.loads(reply["result"]["alfred"])["items"]
        assert "keeps failing" in items[0]["subtitle"]
        assert str(folder / "work") in items[0]["subtitle"]
        assert items[1]["title"] == "Bravo"  # still found
        status = d.handlers.handle({"op": "status"})["result"]
        assert str(folder / "work") in status["sources"][0]["last_error"]
    finally:
        d.shutdown()


def test_notewell_index_and_status_say_it(folder, monkeypatch, home, capsys):
    """What the issue reproduced: `notewell index` printed "3 deleted" and no error."""
    config.save(Config(sources=(SourceConfig("notes", "markdown", str(folder)),)))
    assert main(["index"], embedder=FakeEmbedder) == 0
    deny(monkeypatch, folder / "work")
    main(["index"], embedder=FakeEmbedder)
    out = capsys.readouterr()
    assert "deleted" not in out.out.replace("0 deleted", "")
    assert str(folder / "work") in out.out + out.err
    assert main(["status"], embedder=FakeEmbedder) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "notes (markdown)" in x)
    assert "4 notes" in line and "ERROR: not allowed to read source 'notes': cannot list" in line
    assert main(["status", "--json"], embedder=FakeEmbedder) == 0
    row = json.loads(capsys.readouterr().out)["sources"][0]
    assert row["notes"] == 4 and str(folder / "work") in row["last_error"]


def test_an_unreadable_subfolder_keeps_its_notes_through_a_rebuild(tmp_path, folder,
                                                                  monkeypatch):
    """A full rebuild (the daemon's rebuild_all round, `notewell index --rebuild`) carries
    the unreadable folder's rows over from the live index and is published; the error
    still says which folder, and nothing is embedded for the carried notes."""
    engine = engine_for(tmp_path, folder)
    engine.sync()
    before, first = ids(engine), engine.index.path
    deny(monkeypatch, folder / "work")
    engine.embedder.texts.clear()
    [report] = engine.sync(rebuild_all=True)
    assert engine.index.path != first  # published
    assert ids(engine) == before and report.carried == 2 and report.deleted == 0
    assert str(folder / "work") in report.error
    assert source_status(engine)["last_error"] == report.error
    with engine.reading() as view:
        assert [h.note_id for h in view.search("deep archive", mode="bm25").hits] == [
            "notes:work/deep/c.md"]
    assert not [t for t in engine.embedder.texts if "Bravo" in t or "Charlie" in t]
    # Access back: read again, as the carried rows ask; nothing embedded.
    monkeypatch.undo()
    engine.embedder.texts.clear()
    [report] = engine.sync()
    assert report.error is None and (report.updated, report.unchanged) == (2, 2)
    assert engine.embedder.texts == [] and ids(engine) == before
    engine.close()


def test_notewell_index_rebuild_with_an_unreadable_subfolder_is_published(
        folder, monkeypatch, home, capsys):
    config.save(Config(sources=(SourceConfig("notes", "markdown", str(folder)),)))
    assert main(["index"], embedder=FakeEmbedder) == 0
    deny(monkeypatch, folder / "work")
    main(["index", "--rebuild"], embedder=FakeEmbedder)
    out = capsys.readouterr()
    assert "not rebuilt" not in out.err and str(folder / "work") in out.out + out.err
    assert main(["status", "--json"], embedder=FakeEmbedder) == 0
    row = json.loads(capsys.readouterr().out)["sources"][0]
    assert row["notes"] == 4 and str(folder / "work") in row["last_error"]
    assert main(["search", "--json", "--mode", "bm25", "quarterly report"],
                embedder=FakeEmbedder) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["note_id"] for h in hits] == ["notes:work/b.md"]

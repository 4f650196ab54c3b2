"""Files iCloud Drive keeps online only (issue 28.4) are neither deleted from the index nor
downloaded by a sync: a ``.Name.md.icloud`` placeholder (older macOS) or a "dataless" file
(``SF_DATALESS`` in ``st_flags``, faked here: Linux has no ``st_flags``) keeps its rows,
is never opened, is counted in ``status``, and is read once it is back."""

from __future__ import annotations

import builtins
import json
import os
from pathlib import Path

import pytest
from helpers import RecordingEmbedder, write_notes
from notewell import config
from notewell.cli import main
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.ingest.chunking import ChunkSettings
from notewell.model.fake import FakeEmbedder
from notewell.sources import folder as listing
from notewell.wire import paths
from pdf_fixture import write_pdf

NOTES = {
    "a.md": "# Alpha\n\nAlpha notes about the garden shed.\n",
    "trips/b.md": "# Bravo\n\nBravo notes about the ferry to the islands.\n",
    "trips/c.md": "# Charlie\n\nCharlie notes about the night train.\n",
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_notes(tmp_path / "iCloud Drive", NOTES)


def engine_for(tmp_path: Path, root: Path, **options) -> Engine:
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(root), (), options),))
    return Engine(cfg, embedder=RecordingEmbedder(), index_dir=str(tmp_path / "idx"))


def offload(monkeypatch, *paths: Path) -> set[tuple[int, int]]:
    """Make ``paths`` dataless as iCloud would: stat works, the flag is set."""
    gone = {(os.stat(p).st_dev, os.stat(p).st_ino) for p in paths}
    monkeypatch.setattr(listing, "is_dataless",
                        lambda st: (st.st_dev, st.st_ino) in gone)
    return gone


def opened(monkeypatch) -> list[str]:
    """Every path opened for reading from now on."""
    seen: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def spy(fn):
        def wrapper(path, *a, **k):
            if isinstance(path, (str, bytes, os.PathLike)):
                seen.append(os.fsdecode(path))
            return fn(path, *a, **k)
        return wrapper

    monkeypatch.setattr(builtins, "open", spy(real_open))
    monkeypatch.setattr(os, "open", spy(real_os_open))
    return seen


def ids(engine: Engine) -> set[str]:
    return set(engine.index.stored_notes("notes"))


def found(engine: Engine, words: str) -> list[str]:
    with engine.reading() as view:
        return [h.note_id for h in view.search(words, mode="bm25").hits]


def test_a_placeholder_keeps_its_note_and_the_download_embeds_nothing(tmp_path, root):
    engine = engine_for(tmp_path, root)
    engine.sync()
    text = (root / "trips/b.md").read_bytes()
    (root / "trips/b.md").unlink()  # iCloud evicted it: a placeholder stands in its place
    (root / "trips/.b.md.icloud").write_bytes(b"bplist00 placeholder")
    (root / ".new.md.icloud").write_bytes(b"bplist00 never downloaded")
    [report] = engine.sync()
    assert report.deleted == 0 and report.added == 0 and report.offloaded == 2
    assert ids(engine) == {"notes:a.md", "notes:trips/b.md", "notes:trips/c.md"}
    assert found(engine, "ferry islands") == ["notes:trips/b.md"]
    with engine.reading() as view:
        assert view.status()["sources"][0]["offloaded"] == 2
    # Downloaded again (the placeholder goes): read, and nothing new to embed.
    (root / "trips/b.md").write_bytes(text)
    (root / "trips/.b.md.icloud").unlink()
    engine.embedder.texts.clear()
    [report] = engine.sync()
    assert report.offloaded == 1 and report.deleted == 0 and engine.embedder.texts == []
    with engine.reading() as view:
        assert view.status()["sources"][0]["offloaded"] == 1
    engine.close()


def test_a_dataless_file_is_never_opened_and_keeps_its_rows(tmp_path, root, monkeypatch):
    engine = engine_for(tmp_path, root)
    engine.sync()
    offload(monkeypatch, root / "a.md", root / "trips/c.md")
    write_notes(root, {"trips/c.md": "# Charlie\n\nEdited on another Mac, still in iCloud.\n"})
    seen = opened(monkeypatch)
    [report] = engine.sync()
    assert not [p for p in seen if p.endswith(("a.md", "c.md"))]
    assert (report.deleted, report.updated, report.offloaded) == (0, 0, 2)
    assert len(ids(engine)) == 3 and found(engine, "night train") == ["notes:trips/c.md"]
    # Downloaded: the edit made on the other Mac is read.
    offload(monkeypatch)
    [report] = engine.sync()
    assert (report.updated, report.offloaded) == (1, 0)
    assert found(engine, "another mac") == ["notes:trips/c.md"]
    engine.close()


def test_a_dataless_folder_is_not_listed_and_keeps_its_notes(tmp_path, root, monkeypatch):
    engine = engine_for(tmp_path, root)
    engine.sync()
    offload(monkeypatch, root / "trips")
    listed: list[str] = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p=".": listed.append(os.fsdecode(p)) or real(p))
    [report] = engine.sync()
    assert not [p for p in listed if "trips" in p]
    assert report.deleted == 0 and report.offloaded == 2 and len(ids(engine)) == 3
    engine.close()


def test_a_linked_pdf_in_icloud_is_read_once_downloaded(tmp_path, root, monkeypatch):
    write_pdf(root / "manual.pdf", ["Flue gauge readings for the boiler."])
    write_notes(root, {"boiler.md": "# Boiler\n\nSee [the manual](manual.pdf).\n"})
    offload(monkeypatch, root / "manual.pdf")
    engine = engine_for(tmp_path, root)
    source = engine.sources[0]
    [report] = engine.sync()
    assert source.pdfs.reads == 0 and any("in iCloud" in w for w in report.warnings)
    assert found(engine, "flue gauge") == []
    offload(monkeypatch)  # downloaded: the note's fingerprint changes, the PDF is read
    [report] = engine.sync()
    assert report.updated == 1 and source.pdfs.reads == 1
    assert found(engine, "flue gauge") == ["notes:boiler.md"]
    engine.close()


def test_status_counts_notes_in_icloud(root, home, capsys):
    config.save(Config(sources=(SourceConfig("notes", "markdown", str(root)),)))
    assert main(["index"], embedder=FakeEmbedder) == 0
    (root / "a.md").unlink()
    (root / ".a.md.icloud").write_bytes(b"bplist00")
    assert main(["index"], embedder=FakeEmbedder) == 0
    capsys.readouterr()
    assert main(["status"], embedder=FakeEmbedder) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "notes (markdown)" in x)
    assert "3 notes" in line and "1 note in iCloud, not downloaded" in line
    assert main(["status", "--json"], embedder=FakeEmbedder) == 0
    assert json.loads(capsys.readouterr().out)["sources"][0]["offloaded"] == 1


def test_the_flag_is_read_from_st_flags():
    class Stat:
        st_flags = listing.SF_DATALESS | 0x20

    assert listing.is_dataless(Stat()) and not listing.is_dataless(os.stat("."))


def test_a_loose_pdf_in_icloud_keeps_its_rows(tmp_path, root, monkeypatch):
    write_pdf(root / "scan.pdf", ["Tenancy agreement for the flat."])
    engine = engine_for(tmp_path, root, pdfs="all")
    engine.sync()
    assert found(engine, "tenancy agreement") == ["notes:scan.pdf"]
    offload(monkeypatch, root / "scan.pdf")
    reads = engine.sources[0].pdfs.reads
    [report] = engine.sync()
    assert (report.deleted, report.offloaded) == (0, 1)
    assert engine.sources[0].pdfs.reads == reads
    assert found(engine, "tenancy agreement") == ["notes:scan.pdf"]
    engine.close()


def test_an_offloaded_note_survives_a_rebuild_and_nothing_is_embedded_for_it(
        root, home, monkeypatch, capsys):
    """`notewell index --rebuild` (no daemon) carries the offloaded notes' rows over from
    the live index: still found, never opened, nothing embedded for them."""
    config.save(Config(sources=(SourceConfig("notes", "markdown", str(root)),)))
    assert main(["index"], embedder=FakeEmbedder) == 0
    (root / "a.md").unlink()
    (root / ".a.md.icloud").write_bytes(b"bplist00")
    offload(monkeypatch, root / "trips/c.md")
    seen = opened(monkeypatch)
    model = RecordingEmbedder()
    assert main(["index", "--rebuild"], embedder=lambda: model) == 0
    assert "not rebuilt" not in capsys.readouterr().err
    assert not [p for p in seen if p.endswith(("a.md", "c.md"))]
    assert not [t for t in model.texts if "Alpha" in t or "Charlie" in t]
    engine = Engine(config.load(), embedder=FakeEmbedder(), index_dir=paths.index_dir())
    try:
        assert ids(engine) == {"notes:a.md", "notes:trips/b.md", "notes:trips/c.md"}
        assert found(engine, "garden shed") == ["notes:a.md"]
        assert found(engine, "night train") == ["notes:trips/c.md"]
        with engine.reading() as view:
            assert view.status()["sources"][0]["offloaded"] == 2
    finally:
        engine.close()


def test_an_offloaded_note_survives_the_re_chunk_after_an_upgrade(tmp_path, root,
                                                                  monkeypatch):
    """An index cut by another chunker is rebuilt beside by the next sync: the offloaded
    note keeps its rows (cut as before) and is re-cut once downloaded."""
    engine = engine_for(tmp_path, root)
    engine.sync()
    first = engine.index.path
    engine.close()
    offload(monkeypatch, root / "trips/b.md")
    changed = ChunkSettings(max_pieces=60, min_pieces=20, overlap_pieces=10)
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(root)),))
    engine = Engine(cfg, embedder=RecordingEmbedder(), chunker=changed,
                    index_dir=str(tmp_path / "idx"))
    assert engine.index.other_chunker is not None
    [report] = engine.sync()
    assert engine.index.path != first and engine.index.other_chunker is None
    assert report.carried == 1 and report.offloaded == 1 and report.error is None
    assert ids(engine) == {"notes:a.md", "notes:trips/b.md", "notes:trips/c.md"}
    assert found(engine, "ferry islands") == ["notes:trips/b.md"]
    assert not [t for t in engine.embedder.texts if "Bravo" in t]
    # Downloaded: read again (its carried rows say so), its vectors reused.
    offload(monkeypatch)
    [report] = engine.sync()
    assert (report.updated, report.embedded) == (1, 0)
    assert found(engine, "ferry islands") == ["notes:trips/b.md"]
    engine.close()

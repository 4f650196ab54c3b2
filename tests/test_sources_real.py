"""The sources over the real collections in ../shared/data (skipped when absent): every
note parses, titles and tags look right, and the edit/rename/delete cycle on a copy of real
notes does no repeated work. The `bench` test measures first-index speed and the time to apply
a one-note edit with the real model."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from helpers import SHARED
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.ingest.chunking import ChunkSettings, chunk_note
from notewell.model.fake import FakeEmbedder
from notewell.notes import Chunk
from notewell.sources import open_source

TIL = SHARED / "til-jbranchaud" / "notes"
DENDRON = SHARED / "dendron-vault" / "notes"

pytestmark = pytest.mark.skipif(not TIL.is_dir() or not DENDRON.is_dir(),
                                reason="../shared/data is not here")


def test_every_real_note_parses():
    for name, root in (("til", TIL), ("dendron", DENDRON)):
        src = open_source(SourceConfig(name, "markdown", str(root)))
        stubs = list(src.scan())
        assert len(stubs) > 900
        notes = [src.load(s.note_id) for s in stubs]
        assert all(n is not None and n.title.strip() for n in notes)
        if name == "til":
            # Every TIL note opens with "# Title": the title is that line, never the file.
            assert all(not re.fullmatch(r"[a-z0-9-]+", n.title) for n in notes)
        else:
            # Dendron notes carry a frontmatter title and write links [[label|target]].
            vaults = next(n for n in notes if n.note_id == "dendron:dendron.tutorial.vaults.md")
            assert vaults.title == "Vaults"
            assert "Use the Create New Vault command" in vaults.text
            assert "dendron://" not in vaults.text
        for n in notes:
            for tag in n.tags:
                assert tag and not tag.isdigit() and "#" not in tag, (n.note_id, tag)


def _copy(tmp_path: Path, folders: list[str]) -> Path:
    root = tmp_path / "til"
    for f in folders:
        shutil.copytree(TIL / f, root / f)
    return root


def test_edit_rename_delete_cycle_on_real_notes(tmp_path):
    root = _copy(tmp_path, ["git", "sed"])
    engine = Engine(Config(sources=(SourceConfig("til", "markdown", str(root)),)),
                    embedder=FakeEmbedder(), index_dir=str(tmp_path / "idx"))
    first = engine.sync()[0]
    assert first.added == len(list(root.rglob("*.md"))) and first.error is None
    assert engine.sync()[0].embedded == 0

    # One paragraph of the longest note changes: exactly the chunks that hold it re-embed.
    path = max(root.rglob("*.md"), key=lambda p: len(p.read_text()))
    before = path.read_text()
    paras = before.split("\n\n")
    i = next(k for k, p in enumerate(paras) if k > 1 and p.strip() and not p.startswith(
        ("```", "#", "-", "*", "|")))
    paras[i] = paras[i] + " This sentence was added in an edit."
    after = "\n\n".join(paras)
    path.write_text(after)
    title = before.splitlines()[0].lstrip("# ").strip()
    ck = ChunkSettings()
    old = {Chunk.text_hash(c.embed_text(title)) for c in chunk_note(title, before, ck)}
    new = {Chunk.text_hash(c.embed_text(title)) for c in chunk_note(title, after, ck)}
    report = engine.sync()[0]
    assert report.updated == 1 and report.embedded == len(new - old) >= 1

    (root / "git").rename(root / "version-control")  # every git note moves
    report = engine.sync()[0]
    # No passage is embedded again; each moved note's title vector reads its new path.
    assert report.added == report.deleted > 100 and report.embedded == report.added
    victim = next((root / "sed").glob("*.md"))
    victim.unlink()
    assert engine.sync()[0].deleted == 1
    with engine.reading() as view:
        assert view.search(victim.stem.replace("-", " "), mode="bm25").hits[0].note_id != (
            f"til:sed/{victim.name}")
    engine.close()


@pytest.mark.bench
def test_real_model_figures(tmp_path, real_embedder):
    """First index of ~300 real notes with the real model, then one one-note edit."""
    root = _copy(tmp_path, ["postgres", "sed", "tmux", "mac", "zsh", "docker", "sqlite"])
    n = len(list(root.rglob("*.md")))
    engine = Engine(Config(sources=(SourceConfig("til", "markdown", str(root)),)),
                    embedder=real_embedder, index_dir=str(tmp_path / "idx"))
    start = time.monotonic()
    report = engine.sync()[0]
    first = time.monotonic() - start
    note = root / "postgres" / sorted(p.name for p in (root / "postgres").glob("*.md"))[0]
    note.write_text(note.read_text() + "\n\nOne more paragraph, written in an edit.\n")
    start = time.monotonic()
    edit = engine.sync()[0]
    applied = time.monotonic() - start
    print(f"\nfirst index: {n} notes, {report.embedded} chunks in {first:.1f} s = "
          f"{n / first:.1f} notes/s; one-note edit applied in {applied * 1000:.0f} ms "
          f"({edit.embedded} chunk re-embedded)")
    assert report.added == n and edit.updated == 1 and edit.embedded == 1
    engine.close()

"""Unicode as macOS hands it out (issue 28.3): Alfred passes scripts decomposed text (NFD),
and file names typed in Finder (and some files' text) are NFD too. Queries (every op, on
the daemon's side) and indexed text meet in NFC, so a word finds its note whichever form
either came in."""

from __future__ import annotations

import json
import shutil
import unicodedata
from pathlib import Path

import pytest
from helpers import RecordingEmbedder, subprocess_env, write_notes
from launcher_helpers import run_zsh
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.sources import markdown


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


NOTES = {
    "dessert.md": "# Crème brûlée\n\nA custard with a burnt sugar crust. #dessert\n",
    "party.md": "# Party plans\n\nGalettes for the village fête at Noël. #fête\n",
    "seoul.md": "# 서울 여행\n\n서울에서 먹은 음식과 시장.\n",
    "glass.md": "# ガラス工房\n\nガラスの作り方と、ぶどう畑の見学。\n",
}
# (query, the note it finds): an accented Latin word, an accented tag, Hangul (NFD splits
# each syllable into jamo), Japanese with dakuten (ガ is カ + U+3099 in NFD).
CASES = [("brûlée", "dessert.md"), ("#fête galettes", "party.md"), ("서울", "seoul.md"),
         ("ガラス", "glass.md"), ("ぶどう", "glass.md")]


@pytest.fixture
def unicode_notes(notes_dir: Path) -> Path:
    return write_notes(notes_dir, NOTES)


@pytest.fixture
def engine(tmp_path: Path, unicode_notes: Path):
    e = Engine(Config(sources=(SourceConfig("notes", "markdown", str(unicode_notes)),)),
               embedder=RecordingEmbedder(), index_dir=str(tmp_path / "idx"))
    e.sync()
    yield e
    e.close()


def ids(result) -> list[str]:
    return [h.note_id for h in result.hits]


@pytest.mark.parametrize("query,note", CASES)
@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_a_decomposed_query_finds_what_the_composed_one_finds(engine, query, note, mode):
    assert nfd(query) != query
    with engine.reading() as view:
        composed = ids(view.search(query, mode=mode))
    assert f"notes:{note}" in composed
    if mode == "bm25":  # the fake model's vectors mean nothing: keywords alone rank it
        assert composed[0] == f"notes:{note}"
    with engine.reading() as view:
        assert ids(view.search(nfd(query), mode=mode)) == composed


def test_decomposed_tags_in_arguments_and_completions(engine):
    with engine.reading() as view:
        assert ids(view.search("galettes", tags=[nfd("fête")])) == ["notes:party.md"]
        assert [t["tag"] for t in view.tag_completions(nfd("#fê"))] == ["fête"]
        assert [t["tag"] for t in view.tags(prefix=nfd("fê"))] == ["fête"]
        assert ids(view.recent(tags=[nfd("#fête")])) == ["notes:party.md"]


def test_a_decomposed_note_is_found_by_a_composed_query(engine, unicode_notes):
    name = nfd("Crêpes-à-Noël.md")
    (unicode_notes / name).write_text(nfd("# Crêpes\n\nLes crêpes du réveillon. #fête\n\n"
                                                  "## Pâte\n\nFarine, œufs, lait.\n"),
                                      encoding="utf-8")
    engine.sync()
    with engine.reading() as view:
        [hit] = [h for h in view.search("crêpes réveillon", mode="bm25").hits]
    assert hit.note_id == f"notes:{name}"  # the file's own name: it opens
    assert hit.title == "Crêpes" and unicodedata.is_normalized("NFC", hit.title)
    assert hit.tags == ["fête"]
    with engine.reading() as view:
        assert ids(view.search("à-Noël", mode="bm25"))[0] == hit.note_id  # its name, an alias
    # The note id through Alfred (``similar:ID``) may come back composed.
    with engine.reading() as view:
        assert view.search(f"similar:{unicodedata.normalize('NFC', hit.note_id)}").hits
        page = view.note(hit.note_id, heading=nfd("Pâte"))
    assert "Farine" in page["text"]


def test_notes_indexed_decomposed_are_read_once_more(tmp_path, unicode_notes, monkeypatch):
    """An index from before: the NFD note is re-read and re-embedded, no other note is."""
    (unicode_notes / "nfd.md").write_text(nfd("# Pâté\n\nPâté en croûte.\n"), encoding="utf-8")
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(unicode_notes)),))
    monkeypatch.setattr(markdown, "_READ", 2)
    monkeypatch.setattr(markdown, "nfc", lambda text: text)
    monkeypatch.setattr(markdown, "nfc_note", lambda note: note)
    old = Engine(cfg, embedder=RecordingEmbedder(), index_dir=str(tmp_path / "idx"))
    old.sync()
    old.close()
    monkeypatch.undo()
    engine = Engine(cfg, embedder=RecordingEmbedder(), index_dir=str(tmp_path / "idx"))
    [report] = engine.sync()
    total = len(engine.index.stored_notes("notes"))
    assert report.updated == 1 and report.unchanged == total - 1
    assert engine.embedder.texts and all("Pâté" in t for t in engine.embedder.texts)
    with engine.reading() as view:
        assert ids(view.search("pâté croûte", mode="bm25")) == ["notes:nfd.md"]
    engine.close()


def alfred_items(out) -> list[tuple]:
    assert out.returncode == 0 and out.stderr == b"", out.stderr
    items = json.loads(out.stdout)["items"]
    return [(i.get("uid"), i["title"], i.get("arg")) for i in items]


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_alfred_s_decomposed_queries_through_the_zsh_client(unicode_notes, daemon, home,
                                                            marker):
    env = subprocess_env(home, NOTEWELL_PYTHON=str(marker))
    for query, note in CASES:
        composed = alfred_items(run_zsh(env, query))
        assert any(note in (arg or "") for _, _, arg in composed), query
        assert alfred_items(run_zsh(env, nfd(query))) == composed, query


def test_a_loose_pdf_named_in_finder_is_titled_in_nfc(tmp_path):
    from pdf_fixture import write_pdf

    root = tmp_path / "notes"
    root.mkdir()
    write_pdf(root / nfd("Relevé de compte.pdf"), ["Solde du mois."])
    e = Engine(Config(sources=(SourceConfig("notes", "markdown", str(root), (),
                                            {"pdfs": "all"}),)),
               embedder=RecordingEmbedder(), index_dir=str(tmp_path / "idx"))
    e.sync()
    with e.reading() as view:
        [hit] = view.search("relevé", mode="bm25").hits
    assert hit.title == "Relevé de compte" and unicodedata.is_normalized("NFC", hit.title)
    # Its fingerprint asks for one more read of a PDF so named (not of any other).
    [stub] = e.sources[0].scan()
    assert stub.fingerprint.endswith(":nfc")
    e.close()

"""PDFs of Markdown folders and Obsidian vaults: the PDFs a note links or embeds are
passages of the note (page in the heading path, Enter opens the file); with
``pdfs = "all"`` other PDFs are notes of their own. Unchanged PDFs are never read again;
a PDF that cannot be read is one warning and never stops a sync."""

from __future__ import annotations

from pathlib import Path

import pytest
from notewell.config import SourceConfig
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.ingest.chunking import ChunkSettings
from notewell.ingest.sync import Syncer
from notewell.model.fake import FakeEmbedder
from notewell.search.query import parse
from notewell.search.searcher import Searcher
from notewell.sources.markdown import MarkdownSource
from notewell.sources.obsidian import ObsidianSource
from pdf_fixture import write_encrypted, write_pdf


@pytest.fixture
def folder(tmp_path) -> Path:
    root = tmp_path / "notes"
    write_pdf(root / "files" / "boiler-manual.pdf",
              ["Boiler manual\nReset the boiler by holding the red button.",
               "Annual service: check the flue and the pressure gauge."])
    write_pdf(root / "files" / "loose-receipt.pdf", ["Receipt for a quixotic teapot"])
    write_pdf(root / "private" / "salary.pdf", ["zanzibar confidential salary"])
    (root / "home.md").write_text(
        "# Home\n\nThe boiler manual: ![[boiler-manual.pdf]]\n\n"
        "Old copy: [manual](files/boiler-manual.pdf) and [payslip](private/salary.pdf)\n"
        "and [outside](../elsewhere.pdf).\n")
    (root / "other.md").write_text("# Other\n\nNothing attached here.\n")
    return root


class Setup:
    def __init__(self, tmp_path: Path, src) -> None:
        self.src = src
        self.index = Index(str(tmp_path / "index.sqlite"), BuildSettings("fake-hash:64", 64,
                                                                          "c"))
        self.syncer = Syncer(self.index, FakeEmbedder(), ChunkSettings())
        self.searcher = Searcher(self.index, FakeEmbedder())

    def find(self, query: str):
        return self.searcher.run(parse(query), mode="bm25").hits

    def close(self) -> None:
        self.index.close()


def setup(tmp_path, root, kind="markdown", **options) -> Setup:
    cls = ObsidianSource if kind == "obsidian" else MarkdownSource
    return Setup(tmp_path, cls(SourceConfig("notes", kind, str(root), ("private/**",),
                                            options)))


def test_linked_pdf_pages_are_passages_of_the_note(tmp_path, folder):
    s = setup(tmp_path, folder)
    report = s.syncer.sync(s.src)
    assert report.added == 2 and not report.warnings and report.error is None
    hit = s.find("flue pressure gauge")[0]
    assert hit.note_id == "notes:home.md" and hit.attachment == "boiler-manual.pdf"
    assert hit.heading_path == "\U0001f4ce boiler-manual.pdf > page 2"
    assert hit.url == "file://" + str(folder / "files" / "boiler-manual.pdf")
    # The same PDF linked twice is read and indexed once.
    n = s.index.db.execute("SELECT count(*) FROM chunks WHERE heading_path LIKE ?",
                           ("\U0001f4ce %",)).fetchone()[0]
    assert n == 2
    # Excluded folders stay excluded, links out of the folder are not followed, and a
    # PDF no note links is not indexed without pdfs = "all".
    assert s.find("zanzibar") == [] and s.find("quixotic teapot") == []
    s.close()


def test_unchanged_pdfs_are_not_read_again_and_changes_are_seen(tmp_path, folder):
    s = setup(tmp_path, folder)
    s.syncer.sync(s.src)
    reads = s.src.pdfs.reads
    assert s.syncer.sync(s.src).unchanged == 2 and s.src.pdfs.reads == reads
    # Editing the note re-reads the note, not its unchanged PDF.
    (folder / "home.md").write_text((folder / "home.md").read_text() + "\nMore.\n")
    assert s.syncer.sync(s.src).updated == 1 and s.src.pdfs.reads == reads
    # A changed PDF changes its note's fingerprint: re-indexed without touching the note.
    write_pdf(folder / "files" / "boiler-manual.pdf", ["Boiler manual v2: descale yearly."])
    report = s.syncer.sync(s.src)
    assert report.updated == 1 and s.src.pdfs.reads == reads + 1
    assert s.find("descale")[0].note_id == "notes:home.md"
    assert s.find("flue") == []  # the old page 2 is gone
    s.close()


def test_unreadable_pdfs_warn_once_and_the_note_is_still_indexed(tmp_path, folder):
    write_encrypted(folder / "files" / "locked.pdf", ["hidden words"])
    (folder / "files" / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a pdf")
    write_pdf(folder / "files" / "huge.pdf", ["big " * 2000])
    (folder / "bad.md").write_text("# Bad\n\n[a](files/locked.pdf) [b](files/broken.pdf) "
                                   "[c](files/huge.pdf) [d](files/boiler-manual.pdf)\n")
    s = setup(tmp_path, folder, pdf_max_mb=0.004)
    report = s.syncer.sync(s.src)
    assert report.error is None and report.added == 3
    warned = sorted(w.split(": ", 1)[1] for w in report.warnings)
    assert len(report.warnings) == 3, report.warnings
    assert any("encrypted" in w for w in warned) and any("not a readable PDF" in w
                                                         for w in warned)
    assert any("limit for a PDF" in w for w in warned)
    assert s.find("descale") == [] and s.find("red button")[0].note_id in (
        "notes:bad.md", "notes:home.md")
    assert "notes:bad.md" in [h.note_id for h in s.find("boiler red button")]
    # Nothing changed: nothing read, nothing warned again.
    again = s.syncer.sync(s.src)
    assert again.warnings == [] and again.unchanged == 3
    s.close()


def test_pdfs_all_makes_loose_pdfs_notes_of_their_own(tmp_path, folder):
    s = setup(tmp_path, folder, pdfs="all")
    report = s.syncer.sync(s.src)
    assert report.added == 3  # two notes and the loose receipt; the manual is linked
    hit = s.find("quixotic teapot")[0]
    assert hit.note_id == "notes:files/loose-receipt.pdf" and hit.title == "loose-receipt"
    assert hit.url.endswith("/files/loose-receipt.pdf")
    assert [h.note_id for h in s.find("flue gauge")] == ["notes:home.md"]
    assert s.find("zanzibar") == []  # exclude globs apply to PDFs too
    s.close()


def test_pdfs_none(tmp_path, folder):
    s = setup(tmp_path, folder, pdfs="none")
    s.syncer.sync(s.src)
    assert s.find("flue gauge") == [] and s.src.pdfs.reads == 0
    s.close()


def test_obsidian_finds_an_embedded_pdf_by_its_name(tmp_path):
    vault = tmp_path / "Vault"
    (vault / ".obsidian").mkdir(parents=True)
    write_pdf(vault / "attachments" / "Lease Contract.pdf", ["Notice period: three months"])
    (vault / "notes").mkdir()
    (vault / "notes" / "flat.md").write_text("# Flat\n\n![[Lease Contract.pdf#page=1]]\n")
    s = setup(tmp_path, vault, "obsidian")
    s.syncer.sync(s.src)
    hit = s.find("notice period")[0]
    assert hit.note_id == "notes:notes/flat.md" and hit.attachment == "Lease Contract.pdf"
    s.close()


def test_an_index_from_before_pdfs_reads_every_note_once_more(tmp_path, folder):
    """Notes indexed by a notewell that read no PDFs and no frontmatter dates: the new
    fingerprint makes one sync read them again, which brings their PDFs and dates in
    without embedding anything already stored."""
    (folder / "other.md").write_text("---\ncreated: 2024-02-03\n---\n# Other\n\nNothing.\n")
    s = setup(tmp_path, folder, pdfs="none")
    s.syncer.sync(s.src)
    s.index.db.execute("UPDATE notes SET fingerprint = substr(fingerprint, 3), created = NULL")
    s.src = MarkdownSource(SourceConfig("notes", "markdown", str(folder), ("private/**",)))
    report = s.syncer.sync(s.src)
    # home.md gains its PDF's passages; other.md only its creation date (no new content).
    assert report.updated == 1 and report.unchanged == 1 and report.embedded == 2
    assert s.find("flue gauge")[0].note_id == "notes:home.md"
    created = s.index.db.execute("SELECT created FROM notes WHERE note_id = 'notes:other.md'"
                                 ).fetchone()[0]
    assert created is not None
    again = s.syncer.sync(s.src)
    assert again.unchanged == 2 and again.embedded == 0
    s.close()


@pytest.mark.parametrize("option,value", [("pdfs", "some"), ("pdfs", 1), ("pdf_max_mb", 0),
                                          ("pdf_max_mb", "big")])
def test_bad_pdf_options_are_config_errors(option, value):
    from notewell import config

    with pytest.raises(config.ConfigError, match=option):
        config.parse({"sources": [{"name": "n", "type": "markdown", "path": "/tmp",
                                   option: value}]})

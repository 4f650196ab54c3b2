"""Links out of a source's folder (issue 36.3): a note, or a PDF it links, is read only
where its path resolves inside the folder. Links inside keep working; a file or folder
link out is skipped at the scan, counted in ``status`` and named by ``doctor``; a link
swapped in after the scan is refused when the note is read (``show``/``get_note``
included)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import subprocess_env, write_notes
from notewell import config
from notewell.config import Config, SourceConfig
from notewell.engine import Engine, NoteNotFound
from notewell.model.fake import FakeEmbedder
from notewell.ops import doctor
from notewell.sources import SourceWarning, folder
from notewell.sources.base import LinkOut
from notewell.sources.markdown import MarkdownSource
from pdf_fixture import write_pdf

SECRET = "zanzibarsecret root:*:19000:0:99999:7:::"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Files of the same machine outside any source: what no link may hand out."""
    return write_notes(tmp_path / "elsewhere", {
        "shadow.md": f"# Shadow\n\n{SECRET}\n",
        "ssh/id_ed25519.md": f"# Key\n\n{SECRET} private key\n",
    })


@pytest.fixture
def root(tmp_path: Path, outside: Path) -> Path:
    r = write_notes(tmp_path / "notes", {
        "a.md": "# Alpha\n\nThe alpha note about sourdough.\n",
        "real/inner.md": "# Inner\n\nA note about kombucha.\n",
    })
    (r / "alias.md").symlink_to("a.md")  # a file link inside
    (r / "linked").symlink_to(r / "real", target_is_directory=True)  # a folder link inside
    (r / "shadow.md").symlink_to(outside / "shadow.md")  # a file link out
    (r / "keys").symlink_to(outside / "ssh", target_is_directory=True)  # a folder link out
    (r / "up.md").symlink_to("../elsewhere/shadow.md")  # relative, out
    return r


def source(root: Path, **options) -> MarkdownSource:
    return MarkdownSource(SourceConfig("notes", "markdown", str(root), (), options))


def test_the_scan_skips_links_out_and_follows_links_in(root):
    src = source(root)
    listing = src.scan()
    # ``linked`` is ``real``: a folder is listed once, by whichever path comes first.
    assert {s.note_id for s in listing} == {
        "notes:a.md", "notes:alias.md", "notes:real/inner.md"}
    assert listing.links_out == ("keys/", "shadow.md", "up.md")
    assert src.load("notes:alias.md").title == "Alpha"
    assert src.load("notes:linked/inner.md").title == "Inner"


def test_no_text_from_outside_reaches_the_index_and_status_counts_the_links(
        root, home, outside):
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(root)),))
    engine = Engine(cfg, embedder=FakeEmbedder())
    [report] = engine.sync()
    assert report.links_out == 3 and report.added == 3
    with engine.reading() as view:
        assert view.search("zanzibarsecret", mode="bm25").hits == []
        assert view.search("kombucha", mode="bm25").hits  # through the folder link inside
        [src] = view.status()["sources"]
    assert (src["links_out"], src["link_out"]) == (3, "keys/")
    with pytest.raises(NoteNotFound), engine.reading() as view:  # never indexed, so never shown
        view.note("notes:shadow.md")
    engine.close()


def test_status_text_says_how_many_links_were_skipped(root, home):
    config.save(Config(sources=(SourceConfig("notes", "markdown", str(root)),)))
    env = subprocess_env(home)
    run = [sys.executable, "-m", "notewell.model.fake"]
    subprocess.run([*run, "index"], env=env, capture_output=True, check=True, timeout=60)
    out = subprocess.run([*run, "status"], env=env, capture_output=True, text=True,
                         timeout=60).stdout
    assert "3 links out of the folder skipped (e.g. keys/)" in out


def test_doctor_names_a_link_out(root, outside):
    check = doctor.check_source(SourceConfig("notes", "markdown", str(root)), "linux")
    assert check.status == doctor.WARN
    assert "3 links out of the folder skipped" in check.detail
    assert f"keys/ -> {os.path.realpath(outside / 'ssh')}" in check.detail


def test_a_link_swapped_in_after_the_scan_is_not_read(root, outside, home):
    """The indexed note ``a.md`` becomes a link to a file outside: reading it (a sync's
    load, ``show``/MCP ``get_note``) refuses, and the next scan drops it."""
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(root)),))
    engine = Engine(cfg, embedder=FakeEmbedder())
    engine.sync()
    with engine.reading() as view:
        assert view.note("notes:a.md")["title"] == "Alpha"
    (root / "a.md").unlink()
    (root / "a.md").symlink_to(outside / "shadow.md")
    with (pytest.raises(NoteNotFound, match="outside the source's folder") as e,
          engine.reading() as view):
        view.note("notes:a.md")
    assert SECRET not in str(e.value)
    with pytest.raises(LinkOut):
        engine.sources[0].load("notes:a.md")
    engine.sync()
    assert "notes:a.md" not in set(engine.index.stored_notes("notes"))
    engine.close()


def test_a_folder_swapped_for_a_link_out_is_not_read(root, outside):
    src = source(root)
    src.scan()
    (root / "real" / "inner.md").unlink()
    (root / "real").rmdir()
    (root / "real").symlink_to(outside / "ssh", target_is_directory=True)
    (outside / "ssh" / "inner.md").write_text(f"# Inner\n\n{SECRET}\n")
    with pytest.raises(LinkOut):
        src.load("notes:real/inner.md")


def test_a_link_swapped_between_the_check_and_the_open_fails_to_open(root, outside,
                                                                    monkeypatch):
    """The race: ``linked/inner.md`` resolves inside (``real/inner.md``), then ``real``
    becomes a link out before it is opened; the step-by-step open refuses the link."""
    (outside / "ssh" / "inner.md").write_text(f"# Inner\n\n{SECRET}\n")
    real_realpath = os.path.realpath

    def resolve_then_swap(path, *a, **k):
        resolved = real_realpath(path, *a, **k)
        if str(path).endswith("inner.md") and not (root / "real").is_symlink():
            for f in (root / "real").iterdir():
                f.unlink()
            (root / "real").rmdir()
            (root / "real").symlink_to(outside / "ssh", target_is_directory=True)
        return resolved

    monkeypatch.setattr(os.path, "realpath", resolve_then_swap)
    with pytest.raises(SourceWarning) as e:
        source(root).load("notes:linked/inner.md")
    assert SECRET not in str(e.value)


def test_open_inside_refuses_paths_that_climb_out(root):
    with pytest.raises(LinkOut):
        folder.open_inside(str(root), "../elsewhere/shadow.md")
    with pytest.raises(LinkOut):
        folder.open_inside(str(root), "/etc/passwd")
    os.close(folder.open_inside(str(root), "linked/inner.md"))  # a link inside opens


def test_a_linked_pdf_that_links_out_is_not_read(tmp_path, root, outside):
    write_pdf(outside / "payslip.pdf", ["zanzibar confidential salary"])
    write_pdf(root / "manual.pdf", ["Boiler manual: hold the red button"])
    (root / "payslip.pdf").symlink_to(outside / "payslip.pdf")
    (root / "boiler.md").write_text("# Boiler\n\n![[manual.pdf]] and ![[payslip.pdf]]\n")
    src = source(root, pdfs="all")
    listing = src.scan()
    assert "payslip.pdf" in listing.links_out
    assert "notes:payslip.pdf" not in {s.note_id for s in listing}
    note = src.load("notes:boiler.md")
    assert [a.name for a in note.attachments] == ["manual.pdf"]
    assert src.pdfs.reads == 1
    # Swapped after the scan: the linked PDF is left out, a loose one refused.
    write_pdf(root / "loose.pdf", ["A loose receipt"])
    assert "notes:loose.pdf" in {s.note_id for s in src.scan()}
    for name in ("manual.pdf", "loose.pdf"):
        (root / name).unlink()
        (root / name).symlink_to(outside / "payslip.pdf")
    assert src.load("notes:boiler.md").attachments == ()
    with pytest.raises(LinkOut):
        src.load("notes:loose.pdf")
    assert src.pdfs.reads == 1

"""Open at the match (issue 35.4): each passage knows the line it starts on in its file
(frontmatter counted), and a Markdown source's ``url_template`` opens there with ``{line}``;
Obsidian and Bear keep their heading links."""

from __future__ import annotations

from pathlib import Path

import pytest
from notewell import config
from notewell.engine import Engine
from notewell.ingest.chunking import ChunkSettings, chunk_note, start_lines
from notewell.sources import open_source

FRONT = "---\ntitle: Deep\ntags: [x]\n---\n"  # four lines before the body


def deep_note() -> str:
    filler = " ".join(f"word{i}" for i in range(60))
    sections = [f"## Part {i}\n\nSome text of part {i}. {filler}\n" for i in range(6)]
    sections[4] = f"## Part 4\n\nThe zanzibar clause lives here. {filler}\n"
    return FRONT + "# Deep\n\n" + "\n".join(sections)


def file_line(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def engine_with(home: Path, root: Path, kind: str, template: str | None, fake_embedder):
    options = {"url_template": template} if template else {}
    cfg = config.Config(sources=(config.SourceConfig("notes", kind, str(root), (), options),))
    config.save(cfg)
    e = Engine(config.load(), embedder=fake_embedder)
    e.sync()
    return e


# The templates docs/configuration.md gives for each editor.
@pytest.mark.parametrize("template", [
    "vscode://file/{path}:{line}",
    "x-bbedit://open?url=file://{path}&line={line}",
    "subl://open?url=file://{path}&line={line}",
    "zed://file/{path}:{line}",
])
def test_a_deep_passage_opens_at_its_line(home, tmp_path, fake_embedder, template):
    want = template
    root = tmp_path / "notes"
    root.mkdir()
    text = deep_note()
    (root / "deep.md").write_text(text)
    e = engine_with(home, root, "markdown", template, fake_embedder)
    try:
        with e.reading() as view:
            hit = view.search("zanzibar clause").hits[0]
        line = file_line(text, "## Part 4")
        assert line > 20
        assert hit.url == want.replace("{path}", str(root / "deep.md")).replace(
            "{line}", str(line))
        # The note's own link (no passage) opens at its start.
        assert e.index.db.execute("SELECT url FROM notes").fetchone()[0] == want.replace(
            "{path}", str(root / "deep.md")).replace("{line}", "1")
    finally:
        e.close()


def test_without_line_in_the_template_links_are_as_before(home, tmp_path, fake_embedder):
    root = tmp_path / "notes"
    root.mkdir()
    (root / "deep.md").write_text(deep_note())
    e = engine_with(home, root, "markdown", "x-bbedit://open?url=file://{path}", fake_embedder)
    try:
        with e.reading() as view:
            assert view.search("zanzibar").hits[0].url == f"x-bbedit://open?url=file://{root}/deep.md"
    finally:
        e.close()


def test_obsidian_keeps_heading_links_and_takes_a_line_template(home, tmp_path, fake_embedder):
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    text = deep_note()
    (vault / "deep.md").write_text(text)
    e = engine_with(home, vault, "obsidian", None, fake_embedder)
    try:
        with e.reading() as view:
            assert view.search("zanzibar clause").hits[0].url.endswith("&file=deep%23Part%204")
    finally:
        e.close()
    e = engine_with(home, vault, "obsidian", "zed://file/{path}:{line}", fake_embedder)
    try:
        e.sync(rebuild_all=True)  # a changed template: links are cut again by a rebuild
        with e.reading() as view:
            assert view.search("zanzibar clause").hits[0].url == (
                f"zed://file/{vault}/deep.md:{file_line(text, '## Part 4')}")
    finally:
        e.close()


def test_bear_keeps_its_heading_links():
    from notewell.notes import Note

    src = open_source(config.SourceConfig("bear", "bear", None))
    note = Note("bear:A", "bear", "bear", "T", "x", "bear://x-callback-url/open-note?id=A")
    assert src.passage_url(note, "Setup", 42).endswith("&header=Setup")


def test_chunks_know_their_lines_with_frontmatter_counted(tmp_path):
    text = deep_note()
    src = open_source(config.SourceConfig("notes", "markdown", str(tmp_path), ()))
    (tmp_path / "deep.md").write_text(text)
    note = src.load("notes:deep.md")
    assert note.body_line == 5  # after four lines of frontmatter
    from notewell.ingest.chunking import note_chunks

    chunks = [c for c, _ in note_chunks(note)]
    assert len(chunks) >= 6
    for c in chunks:
        first = c.text.split("\n", 1)[0]
        assert text.split("\n")[c.line - 1].startswith(first), (c.line, first)
    # Windows of one long paragraph overlap: each starts on its own line or a later one.
    long = "Intro.\n\n" + "\n".join(f"Sentence number {i} goes on a while." for i in range(200))
    lines = [c.line for c in chunk_note("", long, ChunkSettings())]
    assert lines[0] == 1 and lines == sorted(lines) and lines[-1] > 100
    assert start_lines("a\nb\nc", ["b", "zzz", "c"], 10) == [11, None, 12]

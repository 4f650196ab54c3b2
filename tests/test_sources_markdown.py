"""Markdown folders: titles, tags, wikilinks, exclusion (never read), URLs."""

from __future__ import annotations

import builtins
import os
from pathlib import Path

import pytest
from helpers import write_notes
from notewell.config import SourceConfig, glob_to_regex
from notewell.sources import SourceError
from notewell.sources.frontmatter import split_frontmatter
from notewell.sources.markdown import MarkdownSource
from notewell.sources.markdown_text import (
    collect_tags,
    first_heading,
    inline_tags,
    render_links,
)


def source(root: Path, exclude: tuple[str, ...] = (), **options) -> MarkdownSource:
    return MarkdownSource(SourceConfig("notes", "markdown", str(root), exclude, options))


@pytest.mark.parametrize("body,title", [
    ("# Title\nbody", "Title"),
    ("\n\n# Spaced title #\nbody", "Spaced title"),
    ("<!-- generated -->\n#inbox #todo\n\n# After tags\nbody", "After tags"),
    ("![banner](banner.png)\n# After an image\n", "After an image"),
    ("Setext title\n============\nbody", "Setext title"),
    ("Prose first.\n\n# A section, not the title", None),
    ("## Only an H2\n\n# Later H1", None),
    ("```\n# a comment in code\n```\n# Later", None),
    ("#tag-only\n\nprose", None),
    ("", None),
])
def test_first_heading(body, title):
    assert first_heading(body) == title


def test_title_falls_back_to_file_name(tmp_path):
    root = write_notes(tmp_path / "n", {"dir/my note.md": "Prose first.\n\n# Section\n",
                                        "fm.md": "---\ntitle: From frontmatter\n---\n# H1\n"})
    src = source(root)
    assert src.load("notes:dir/my note.md").title == "my note"
    assert src.load("notes:fm.md").title == "From frontmatter"


@pytest.mark.parametrize("link,text", [
    ("[[Note]]", "Note"),
    ("[[Note|shown text]]", "shown text"),
    ("[[Note#Heading]]", "Note > Heading"),
    ("[[Note#Heading|alias]]", "alias"),
    ("[[Note#One#Two]]", "Note > One > Two"),
    ("[[#Local heading]]", "Local heading"),
    ("[[Note#^block-id]]", "Note"),
    ("| [[Note\\|in a table]] |", "| in a table |"),
    ("![[embedded.png]]", ""),
    ("![[Other note#Section]] tail", " tail"),
    # Dendron writes [[label|target]]; the label is what a reader sees.
    ("[[Create a vault|dendron://site/dendron.topic.vaults#create]]", "Create a vault"),
    ("[[lookupConfirm|dendron.ref.config#lookupconfirm]]", "lookupConfirm"),
])
def test_render_links(link, text):
    assert render_links(link) == text


def test_inline_tag_edge_cases():
    body = ("#top at the start, mid #nested/tag/deep, (#in-parens), #under_score.\n"
            "not tags: #123 #2024/05 C#sharp a#b [link](#anchor) [x](http://h/#frag)\n"
            "`#inline-code` <!-- #commented --> %%#obsidian-comment%%\n"
            '<iframe style="border: 1px solid #ccc;"\n  title="#multi-line"></iframe>\n'
            "```\n#fenced\n```\n# Heading is not a tag\n#trailing/ #dash-\n")
    assert inline_tags(body) == ["top", "nested/tag/deep", "in-parens", "under_score",
                                 "trailing", "dash"]


def test_tags_from_frontmatter_shapes():
    for fm, want in [
        ("tags: [a, b/c]", ["a", "b/c"]),
        ("tags:\n  - a\n  - '#b'", ["a", "b"]),
        ("tags: a, b", ["a", "b"]),
        ("tags: a b", ["a", "b"]),
        ("tag: single", ["single"]),
        ("tags: [Work]\ntag: work", ["Work"]),
    ]:
        meta, body = split_frontmatter(f"---\n{fm}\n---\nbody\n")
        assert collect_tags(meta, body) == want, fm
    # Case-insensitive, the first spelling wins.
    assert collect_tags({"tags": ["Work"]}, "#work #a #A") == ["Work", "a"]


def test_frontmatter_values_over_several_lines_and_quoted():
    # Shapes from the Dendron vault (folded and literal titles, '' and \U escapes) and
    # from hand-written notes that are not valid YAML (an unquoted colon).
    for fm, want in [
        ("title: >-\n  Getting Things Done\n  with Dendron\ndesc: x",
         "Getting Things Done with Dendron"),
        ("title: |\n  Two\n  lines\n", "Two\nlines"),
        ("title: a long\n  plain title\ntags:\n  - t", "a long plain title"),
        ("title: 'Cal Newport''s Blog: Thinking'", "Cal Newport's Blog: Thinking"),
        ('title: "Welcome \\U0001F332 \\"here\\""', 'Welcome 🌲 "here"'),
        ("title: Meeting: Q3 plan", "Meeting: Q3 plan"),
    ]:
        meta, _ = split_frontmatter(f"---\n{fm}\n---\nbody\n")
        assert meta["title"] == want, fm
    meta, _ = split_frontmatter("---\ntitle: a\n  b\ntags:\n  - x\n  - y\n---\n")
    assert meta == {"title": "a b", "tags": ["x", "y"]}


def test_excluded_folders_are_never_read(tmp_path, monkeypatch):
    root = write_notes(tmp_path / "n", {"a.md": "# A\n", "private/secret.md": "# S\n",
                                        "deep/private/also.md": "# S2\n", "x.tmp.md": "# T\n",
                                        "keep/b.markdown": "# B\n"})
    touched: list[str] = []
    real_open, real_scandir, real_stat = builtins.open, os.scandir, os.stat

    real_os_open = os.open

    def spy(fn):
        def wrapper(path, *a, **k):
            if isinstance(path, (str, bytes, os.PathLike)):
                touched.append(os.fsdecode(path))
            return fn(path, *a, **k)
        return wrapper

    monkeypatch.setattr(builtins, "open", spy(real_open))
    monkeypatch.setattr(os, "open", spy(real_os_open))
    monkeypatch.setattr(os, "scandir", spy(real_scandir))
    monkeypatch.setattr(os, "stat", spy(real_stat))
    src = source(root, ("private/", "*.tmp.md"))  # a folder name: excluded at any depth
    ids = sorted(s.note_id for s in src.scan())
    for note_id in ids:
        src.load(note_id)
    assert ids == ["notes:a.md", "notes:keep/b.markdown"]
    rel = [os.path.relpath(p, root) for p in touched]
    assert not [p for p in rel if "private" in p or "tmp" in p]
    # Even asked by id, an excluded note is not opened.
    assert src.load("notes:private/secret.md") is None
    assert src.load("notes:deep/private/also.md") is None
    assert not [p for p in touched if "private" in os.path.relpath(p, root)]


def test_glob_semantics():
    assert glob_to_regex("private/**").match("private/a/b.md")
    assert not glob_to_regex("private/**").match("deep/private/a.md")  # anchored
    assert glob_to_regex("private/").match("deep/private/a.md")
    assert not glob_to_regex("private/**").match("notprivate/a.md")
    assert glob_to_regex("*.tmp.md").match("deep/x.tmp.md")  # no '/': any depth
    assert not glob_to_regex("docs/*.md").match("docs/sub/a.md")
    assert glob_to_regex("docs/**/*.md").match("docs/sub/a.md")


def test_urls(tmp_path):
    root = write_notes(tmp_path / "my notes", {"a b.md": "# A\n"})
    note = source(root).load("notes:a b.md")
    assert note.url == "file://" + str(root).replace(" ", "%20") + "/a%20b.md"
    templ = source(root, url_template="x-bbedit://open?url=file://{path}&rel={rel}")
    assert templ.load("notes:a b.md").url.endswith("/a%20b.md&rel=a%20b.md")


def test_missing_folder_is_a_source_error(tmp_path):
    with pytest.raises(SourceError, match="not a folder"):
        list(source(tmp_path / "nope").scan())

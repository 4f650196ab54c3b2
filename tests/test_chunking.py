"""The chunker follows the author's structure and keeps passages inside the model window."""

from __future__ import annotations

import itertools

from notewell.ingest.chunking import ChunkSettings, chunk_note, count_pieces, split_sections

S = ChunkSettings()


def words(n: int, word: str = "alpha") -> str:
    return " ".join(f"{word}{i}." if i % 12 == 11 else f"{word}{i}" for i in range(n))


def test_nested_headings_keep_their_path():
    text = (f"# Guide\n\n## Install\n\n{words(60)}\n\n### On macOS\n\n{words(60, 'mac')}\n\n"
            f"## Use\n\n{words(60, 'use')}\n")
    chunks = chunk_note("Guide", text)
    assert [c.heading_path for c in chunks] == [("Install",), ("Install", "On macOS"), ("Use",)]
    assert chunks[1].anchor == "On macOS"
    assert chunks[1].embed_text("Guide").startswith("Guide > Install > On macOS\n")


def test_title_h1_is_not_repeated_in_the_path():
    chunks = chunk_note("Guide", "# Guide\n\n" + words(60))
    assert chunks[0].heading_path == ()


def test_hash_lines_inside_code_fences_are_not_headings():
    text = ("# Script\n\n```bash\n# install deps\npip install x\n## not a heading either\n```\n\n"
            + words(50))
    sections = split_sections(text, "Script")
    assert len(sections) == 1
    assert "# install deps" in sections[0].text
    chunks = chunk_note("Script", text)
    assert all(c.heading_path == () for c in chunks)


def test_tilde_fences_and_longer_fences_nest_correctly():
    text = "````md\n```\n# inside\n```\n````\n\n## Real\n\n" + words(50)
    sections = split_sections(text, "")
    assert [s.path for s in sections] == [(), ("Real",)]


def test_text_without_headings_is_windowed_with_overlap():
    text = words(600)
    chunks = chunk_note("Plain", text)
    assert len(chunks) > 3
    assert all(count_pieces(c.text) <= S.max_pieces for c in chunks)
    # consecutive windows share text (the overlap), and nothing is lost
    for a, b in itertools.pairwise(chunks):
        assert set(a.text.split()) & set(b.text.split())
    covered = set().union(*(c.text.replace(".", "").split() for c in chunks))
    assert {f"alpha{i}" for i in range(600)} <= covered


def test_huge_section_is_split_within_budget():
    para = "\n\n".join(words(80, f"p{i}x") for i in range(10))
    chunks = chunk_note("Big", f"## Huge\n\n{para}")
    assert len(chunks) >= 5
    assert all(c.heading_path == ("Huge",) for c in chunks)
    assert all(count_pieces(c.text) <= S.max_pieces for c in chunks)


def test_a_single_giant_line_is_cut_into_windows():
    text = "x" * 10 + " " + " ".join(["token"] * 2000)
    chunks = chunk_note("Line", text)
    assert len(chunks) > 5
    assert all(count_pieces(c.text) <= S.max_pieces for c in chunks)


def test_tiny_sections_merge_into_a_neighbour():
    text = "## A\n\nshort a\n\n## B\n\nshort b\n\n## C\n\n" + words(80)
    chunks = chunk_note("T", text)
    assert len(chunks) == 1
    # merged headings stay searchable in the text
    assert "## B" in chunks[0].text and "short b" in chunks[0].text


def test_empty_note_yields_its_title_and_blank_note_nothing():
    assert [c.text for c in chunk_note("Only a title", "")] == ["Only a title"]
    assert chunk_note("", "  \n\n ") == []


def test_non_ascii_text_is_kept_intact():
    text = ("# Crème brûlée\n\n## Zubereitung\n\nÜber Nacht kühlen. 卵黄と砂糖を混ぜる。 🍮 "
            + words(50))
    chunks = chunk_note("Crème brûlée", text)
    assert chunks[0].heading_path == ("Zubereitung",)
    assert "卵黄と砂糖を混ぜる" in chunks[0].text and "🍮" in chunks[0].text


def test_chunking_is_deterministic_and_settings_have_a_fingerprint():
    text = words(500)
    assert chunk_note("a", text) == chunk_note("a", text)
    assert S.fingerprint() != ChunkSettings(max_pieces=100).fingerprint()

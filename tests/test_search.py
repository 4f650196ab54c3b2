"""Hybrid search over a small corpus (fake embedder): filters, grouping, snippets, safety."""

from __future__ import annotations

import pytest
from notewell.search.presentation import snippet


def ids(result):
    return [h.note_id for h in result.hits]


def test_each_note_appears_once_with_its_best_passage(engine, notes_dir):
    filler = " ".join(f"word{i}" for i in range(60))
    (notes_dir / "git" / "long.md").write_text(
        f"# Git notes\n\n## Stashing\n\nStash work in progress. {filler}\n\n"
        f"## Tags\n\nPush annotated tags to the remote. {filler}\n\n"
        f"## Remote branches\n\nPrune stale remote tracking branches. {filler}\n")
    engine.sync()
    with engine.reading() as view:
        hits = view.search("prune stale remote tracking branches").hits
    assert [h.note_id for h in hits].count("notes:git/long.md") == 1
    top = hits[0]
    assert top.note_id == "notes:git/long.md"
    assert top.heading_path == "Remote branches"
    assert top.snippet.startswith("Prune stale remote tracking branches")
    assert "Remote branches" not in top.passage.splitlines()[0]


def test_excluded_folder_is_not_indexed(engine):
    with engine.reading() as view:
        assert "notes:private/secret.md" not in ids(view.search("wifi password hunter2"))
    n = engine.index.db.execute("SELECT count(*) FROM notes WHERE path LIKE '%private%'")
    assert n.fetchone()[0] == 0


def test_last_word_is_a_prefix_while_typing(engine):
    with engine.reading() as view:
        assert ids(view.search("postg"))[0] == "notes:db/postgres-vacuum.md"
        assert ids(view.search("banan"))[0] == "notes:kitchen/banana-bread.md"


def test_tag_filter_includes_nested_children_and_intersects(engine):
    with engine.reading() as view:
        assert ids(view.search("#db vacuum")) == ["notes:db/postgres-vacuum.md"]
        assert ids(view.search("#recipes #baking bread")) == ["notes:kitchen/banana-bread.md"]
        assert ids(view.search("#recipes #travel")) == []


def test_filter_that_matches_nothing_says_so_and_never_falls_back(engine):
    with engine.reading() as view:
        r = view.search("#nosuchtag bread")
    assert r.hits == [] and "#nosuchtag" in r.notices[0]
    with engine.reading() as view:
        r = view.search("in:elsewhere bread")
    assert r.hits == [] and "elsewhere" in r.notices[0]
    with engine.reading() as view:
        assert ids(view.search("in:notes lisbon"))[0] == "notes:travel/lisbon.md"


@pytest.mark.parametrize("q", ['"', "*", "NEAR(", "AND", "-", ":", 'a" OR "b', "col:x*",
                               "(((", "^", "\x00\x01", "   ", "x" * 100_000])
def test_fts_syntax_and_junk_are_searched_as_text(engine, q):
    with engine.reading() as view:
        result = view.search(q)
    assert isinstance(result.hits, list)


def test_empty_query_lists_recent_notes(engine):
    with engine.reading() as view:
        assert len(view.search("").hits) == 4


def test_similar_excludes_the_note_itself(engine):
    with engine.reading() as view:
        hits = view.similar("notes:git/undo-commit.md")
    assert hits and "notes:git/undo-commit.md" not in [h.note_id for h in hits]
    with engine.reading() as view:
        assert view.similar("notes:nope") == []


def test_dense_and_bm25_modes_are_available(engine):
    with engine.reading() as view:
        assert ids(view.search("tram", mode="bm25")) == ["notes:travel/lisbon.md"]
        assert view.search("tram", mode="dense").hits


def test_snippet_is_the_matching_sentence_not_the_start():
    text = "Intro sentence here. Another unrelated line. The vacuum runs nightly at 3am."
    assert snippet(text, ("vacuum",), False).startswith("The vacuum runs nightly")
    assert snippet(text, ("zzz",), False).startswith("Intro sentence")
    assert snippet("## Heading\nBody text.", (), False) == "Body text."
    assert snippet("#recipes #home/garden\nBody text.", (), False) == "Body text."


def test_note_signature_cache_follows_index_changes(engine, notes_dir):
    import numpy as np

    db = engine.index.db
    # The newest note: replacing it reuses its rowid, so only invalidation can help.
    rowid, note_id = db.execute("SELECT id, note_id FROM notes ORDER BY id DESC").fetchone()
    path = notes_dir / note_id.split(":", 1)[1]
    before = engine.searcher.signatures([rowid])[rowid]
    assert np.array_equal(before, engine.searcher.signatures([rowid])[rowid])
    path.write_text("# Changed\n\nKayak trips on the fjord at dawn, paddles and dry bags.\n")
    engine.sync()
    assert db.execute("SELECT id FROM notes WHERE note_id = ?", (note_id,)).fetchone()[0] == rowid
    assert not np.allclose(before, engine.searcher.signatures([rowid])[rowid])


def test_near_duplicates_are_folded_past_the_first_batch_of_hits(engine, notes_dir):
    """Signatures are read a batch of notes at a time (limit + 5), as hits are read: a
    copy met after the first batch is still recognised as one."""
    body = " ".join(f"glacier{i}" for i in range(40))
    (notes_dir / "dups").mkdir()
    (notes_dir / "dups" / "original.md").write_text(f"# Glaciers\n\n{body}\n")
    for i in range(1, 10):  # nine copies: with limit=2 they run past the first batch of 7
        (notes_dir / "dups" / f"original ({i}).md").write_text(
            f"# Glaciers\n\n{body} copy{i}\n")
    (notes_dir / "dups" / "moraine.md").write_text(
        "# Moraines\n\nglacier0 left a moraine of till and boulders in the valley.\n")
    engine.sync()
    with engine.reading() as view:
        found = ids(view.search("glacier0 glacier1 glacier2 glacier3", limit=2))
    assert len(found) == 2 and found[0].startswith("notes:dups/original"), found
    assert found[1] == "notes:dups/moraine.md", found


def test_a_blank_title_is_no_sign_of_a_copy():
    """Two notes titled alike fold at a lower similarity than others; two without a title
    (``eval --self`` hides every title) are not titled alike."""
    import numpy as np
    from notewell.search.presentation import Shown
    from notewell.search.ranking import Ranking

    a = np.array([1.0, 0.0], dtype=np.float32)
    b = np.array([0.93, (1 - 0.93**2) ** 0.5], dtype=np.float32)  # cosine 0.93
    for title, folded in (("Weekly review", True), ("", False)):
        shown = Shown(Ranking(), 10)
        shown.add(a, title)
        assert shown.near_duplicate(b, title) is folded
        assert not shown.near_duplicate(b, "Another title")

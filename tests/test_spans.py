"""Why a note matched (issue 35.3): the spans of the query's words in each hit's passage and
snippet, as FTS5 reads words (stems, the word being typed, accents, CJK pairs, typos), the
nearest sentence for a hit found by meaning alone, and a note's next best passages."""

from __future__ import annotations

import pytest
from notewell.search.spans import merged, nearest_sentence, sentences


def marked(text: str, spans) -> list[str]:
    return [text[s:e] for s, e in spans]


def hit_of(result, note_id: str):
    return next(h for h in result.hits if h.note_id == note_id)


@pytest.fixture
def words_engine(engine, notes_dir):
    (notes_dir / "runs.md").write_text(
        "# Runner\n\nIntro line without the word.\nShe was running the nightly "
        "backups. Runs finish by six.\n")
    (notes_dir / "cafe.md").write_text("# Visits\n\nThe Café in Porto was crowded.\n")
    (notes_dir / "tokyo.md").write_text("# 旅行\n\n我住在东京附近。每天坐电车。\n")
    engine.sync()
    return engine


def test_stemmed_words_are_marked_where_the_passage_has_them(words_engine):
    hit = hit_of(words_engine.search("runs ", mode="bm25"), "notes:runs.md")
    assert marked(hit.passage, hit.spans) == ["running", "Runs"]
    assert hit.snippet == "Runs finish by six."
    assert marked(hit.snippet, hit.snippet_spans) == ["Runs"]


def test_the_word_being_typed_marks_the_words_it_starts(words_engine):
    hit = hit_of(words_engine.search("nightly back", mode="bm25"), "notes:runs.md")
    assert marked(hit.passage, hit.spans) == ["nightly", "backups"]


def test_accents_are_folded_as_the_index_folds_them(words_engine):
    hit = hit_of(words_engine.search("cafe ", mode="bm25"), "notes:cafe.md")
    assert marked(hit.passage, hit.spans) == ["Café"]
    # Offsets are characters, not UTF-8 bytes: what follows the accent is found too.
    hit = hit_of(words_engine.search("café porto ", mode="bm25"), "notes:cafe.md")
    assert marked(hit.passage, hit.spans) == ["Café", "Porto"]


def test_cjk_pairs_are_marked_as_written(words_engine):
    hit = hit_of(words_engine.search("东京附近", mode="bm25"), "notes:tokyo.md")
    assert marked(hit.passage, hit.spans) == ["东京附近"]  # three pairs, one span
    hit = hit_of(words_engine.search("电车", mode="bm25"), "notes:tokyo.md")
    assert marked(hit.passage, hit.spans) == ["电车"]


def test_a_typo_marks_the_word_meant(engine):
    hit = hit_of(engine.search("postgress vaccum", mode="bm25"), "notes:db/postgres-vacuum.md")
    assert [w.lower() for w in marked(hit.passage, hit.spans)] == ["vacuum"]
    # Being typed: corrected as a prefix.
    hit = hit_of(engine.search("bananna", mode="bm25"), "notes:kitchen/banana-bread.md")
    assert marked(hit.passage, hit.spans) == ["bananas"]


def test_a_hit_by_meaning_alone_marks_its_nearest_sentence(words_engine):
    # No word of the query is in the passage; "nightshift" shares "nigh" with "nightly".
    hit = hit_of(words_engine.search("nightshift", mode="dense", limit=50), "notes:runs.md")
    assert marked(hit.passage, hit.spans) == ["She was running the nightly backups."]


def test_nearest_sentence_prefers_shared_word_beginnings_then_the_first():
    text = "Alpha beta.\nThe organization of files matters. Gamma."
    assert marked(text, [nearest_sentence(text, ("organise", "folders"))]) == [
        "The organization of files matters."]
    assert marked(text, [nearest_sentence(text, ("zebra",))]) == ["Alpha beta."]
    assert marked(text, sentences(text)) == [
        "Alpha beta.", "The organization of files matters.", "Gamma."]
    assert merged([(5, 7), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 7)]


def test_recent_and_similar_notes_mark_nothing(engine):
    assert all(h.spans == [] for h in engine.searcher.recent(5))
    hits = engine.searcher.similar("notes:kitchen/banana-bread.md")
    assert hits and all(h.spans == [] for h in hits)


def test_json_hits_keep_every_key_and_add_spans_and_passages(engine):
    hit = engine.search("vacuum ").hits[0].to_dict()
    old = {"note_id", "title", "source", "kind", "url", "path", "tags", "heading_path",
           "snippet", "passage", "score", "modified", "archived", "attachment"}
    assert old < set(hit)
    assert set(hit) - old == {"spans", "snippet_spans", "passages"}
    assert [hit["passage"][s:e] for s, e in hit["spans"]] == ["VACUUM"]
    assert hit["passages"] == [{"text": hit["passage"], "heading_path": hit["heading_path"],
                                "spans": hit["spans"], "score": hit["score"]}]


def test_a_json_search_lists_the_notes_next_best_passages(engine, notes_dir):
    filler = " ".join(f"word{i}" for i in range(60))
    (notes_dir / "long.md").write_text(
        f"# Garden\n\n## Soil\n\nCompost the soil in spring. {filler}\n\n"
        f"## Water\n\nWater the compost heap weekly. {filler}\n\n"
        f"## Light\n\nTomatoes want compost and sun. {filler}\n\n"
        f"## Other\n\nNothing here. {filler}\n")
    engine.sync()
    one = hit_of(engine.search("compost ", mode="bm25"), "notes:long.md")
    assert len(one.passages) == 1
    hit = hit_of(engine.search("compost ", mode="bm25", passages=3), "notes:long.md")
    assert len(hit.passages) == 3
    assert hit.passages[0]["text"] == hit.passage
    scores = [p["score"] for p in hit.passages]
    assert scores == sorted(scores, reverse=True)
    for p in hit.passages:
        assert [p["text"][s:e].lower() for s, e in p["spans"]] == ["compost"]
    assert {p["heading_path"] for p in hit.passages} == {"Soil", "Water", "Light"}

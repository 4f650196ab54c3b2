"""Typos: a word the index does not know is read as the word meant (``search.terms``),
found with the tokenizer's own stems (one edit) or ``index.terms.NearTerms`` (two)."""

from __future__ import annotations

import dataclasses

import pytest
from notewell.index.terms import NearTerms, Vocabulary, edit_distance
from notewell.search.query import parse
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher
from notewell.search.terms import corrected_text, edits1


def ids(result):
    return [h.note_id for h in result.hits]


@pytest.mark.parametrize("a,b,d", [("reciev", "receiv", 1), ("vaccum", "vacuum", 1),
                                   ("secrt", "secret", 1), ("postgress", "postgresql", 2),
                                   ("abc", "abc", 0), ("kitten", "sitting", 3)])
def test_edit_distance_counts_a_swap_as_one(a, b, d):
    assert edit_distance(a, b, 3) == d
    assert edit_distance(a, b, d - 1) == d if d else True  # stops early past the limit


def test_near_terms_finds_exactly_what_a_full_comparison_finds():
    terms = sorted({"receiv", "recip", "vacuum", "vaccin", "postgresql", "postgr", "secret",
                    "secur", "kubernet", "abc", "été", "x"})
    near = NearTerms(terms)
    for word in ("reciev", "vaccum", "postgress", "secrt", "kubernets", "ete", "zzzz"):
        for k in (1, 2):
            want = sorted((t, edit_distance(word, t, k)) for t in terms
                          if t != word and edit_distance(word, t, k) <= k)
            assert sorted(near.within(word, k)) == want, (word, k)


def test_edits1_holds_each_kind_of_typo_once():
    found = edits1("abc")
    assert "ab" in found and "bac" in found and "abd" in found and "abcd" in found
    assert len(found) == len(set(found)) and "abc" not in found


def test_vocabulary_near_includes_terms_added_since_the_build():
    v = Vocabulary(["receiv"], __import__("numpy").array([3]), 10, extra={"vacuum": 2})
    assert sorted(v.near("vaccum", 1)) == [("vacuum", 1)]


@pytest.mark.parametrize("typo,meant", [
    ("postgress vaccum", "notes:db/postgres-vacuum.md"),
    ("bananna bread", "notes:kitchen/banana-bread.md"),
    ("lisbno weekend", "notes:travel/lisbon.md"),
    ("plannr statistics", "notes:db/postgres-vacuum.md"),
])
def test_typos_find_the_note_meant(engine, typo, meant):
    for mode in ("bm25", "hybrid"):
        assert ids(engine.search(typo, mode=mode))[0] == meant, mode


def test_without_typo_tolerance_the_typo_finds_nothing_by_keywords(engine):
    engine.searcher.ranking = dataclasses.replace(engine.searcher.ranking, typos=False)
    assert ids(engine.search("bananna", mode="bm25")) == []
    engine.searcher.ranking = Ranking()
    assert ids(engine.search("bananna ", mode="bm25")) == ["notes:kitchen/banana-bread.md"]


def test_the_word_being_typed_is_corrected_as_a_prefix(engine):
    # "vaccu" has no completion in the index; "vacu" (a doubled letter dropped) and
    # "vacuu" (one replaced) have.
    assert ids(engine.search("vaccu", mode="bm25"))[0] == "notes:db/postgres-vacuum.md"
    found = engine.searcher.query_terms(parse("vaccu"))
    assert [(t.correction, t.prefix) for t in found] in ([("vacu", True)], [("vacuu", True)])
    # A letter that was not doubled is never dropped from a prefix (it would make a
    # shorter, vaguer one: "login" -> "logi*").
    assert engine.searcher.query_terms(parse("bananz"))[0].correction == "banana"
    assert all(t.correction != "bana" for t in engine.searcher.query_terms(parse("banaz")))


def test_real_words_the_notes_do_not_use_are_not_typos(engine):
    engine.searcher.embedder.knows = lambda w: w in {"snowy", "tramcar"}  # a model's words
    try:
        assert engine.searcher.query_terms(parse("snowy "))[0].correction is None
        assert engine.searcher.query_terms(parse("snowy "))[0].df == 0
    finally:
        del engine.searcher.embedder.knows


def test_known_words_are_left_alone(engine):
    found = engine.searcher.query_terms(parse("banana bread "))
    assert all(t.correction is None for t in found)
    # Short words are too ambiguous to correct.
    assert all(t.correction is None for t in engine.searcher.query_terms(parse("tra ")))


def test_the_model_reads_the_corrected_words(engine):
    q = parse("bananna bread ")
    assert engine.searcher.dense_text(q) == "banana bread"
    assert corrected_text("Bananna bread", engine.searcher.query_terms(q)) == "banana bread"


def test_snippet_shows_the_sentence_with_the_word_meant(engine):
    hit = engine.search("ripe banannas", mode="bm25").hits[0]
    assert "ripe bananas" in hit.snippet


def test_a_rare_word_close_to_a_common_one_gets_both(engine, notes_dir):
    for i in range(31):
        (notes_dir / f"mail{i}.md").write_text(f"# Mail {i}\n\nWe receive invoices daily.\n")
    (notes_dir / "typo.md").write_text("# Typo\n\nPlease recieve the parcel.\n")
    engine.sync()
    found = engine.searcher.query_terms(parse("recieve "))
    assert [(t.correction, t.df) for t in found] == [(None, 1), ("receive", 31)]
    hits = ids(engine.search("recieve ", mode="bm25", limit=40))
    assert "notes:typo.md" in hits and "notes:mail0.md" in hits
    assert engine.searcher.dense_text(parse("recieve ")) == "recieve receive"


def test_a_correction_weighs_less_than_a_typed_word_in_coverage():
    import numpy as np
    from notewell.search.fusion import coverage
    from notewell.search.terms import QueryTerm

    typed = QueryTerm("bread", '"bread"', ("bread",), False, 3, 2.0)
    guess = QueryTerm("bananna", '"banana"', ("banana",), False, 3, 2.0, "banana", 0.5)
    held = np.array([[1, 0, 1], [0, 1, 1]], dtype=bool)  # chunks: bread, banana, both
    cover, mass = coverage([typed, guess], held, [10, 11, 12])
    assert mass == pytest.approx(3.0)
    assert cover == pytest.approx({10: 2 / 3, 11: 1 / 3, 12: 1.0})


def test_a_chunk_with_the_word_meant_is_trusted_less_than_with_the_word_typed(engine,
                                                                              notes_dir):
    (notes_dir / "toast.md").write_text("# Toast\n\nSlice the bread thin.\n")
    (notes_dir / "smoothie.md").write_text("# Smoothie\n\nOne banana, frozen.\n")
    engine.sync()
    q = parse("bananna bread ")
    guess = next(t for t in engine.searcher.query_terms(q) if t.correction)
    assert (guess.correction, guess.weight) == ("banana", Ranking().typo_coverage)
    chunks = [c for c, _ in engine.searcher.bm25(q)]
    assert len(chunks) == 3  # banana bread, toast, smoothie
    reduced, _ = engine.searcher.coverage(q, chunks)
    whole = Searcher(engine.index, engine.embedder, Ranking(typo_coverage=1.0))
    full, _ = whole.coverage(q, chunks)
    assert sorted(reduced.values())[-1] == pytest.approx(1.0) == sorted(full.values())[-1]
    # Less of the query's information lies in the guess: the note with only the word
    # meant covers less of it, the one with the word as typed more.
    assert sum(reduced[c] < full[c] - 0.05 for c in chunks) == 1
    assert sum(reduced[c] > full[c] + 0.05 for c in chunks) == 1


def test_the_word_being_typed_keeps_its_correction_only_beside_the_querys_words(engine,
                                                                                notes_dir):
    (notes_dir / "brot.md").write_text("# Roggenbrot\n\nDunkles Brot mit Sauerteig.\n")
    (notes_dir / "machine.md").write_text("# Laundry\n\nThe washing machine broke.\n")
    engine.sync()

    def fixes(text):
        return [(t.word, t.correction) for t in engine.searcher.query_terms(parse(text))
                if t.correction]

    assert fixes("machen") == [("machen", "machin")]  # nothing else to go by
    assert fixes("washing machen") == [("machen", "machin")]  # "washing machine"
    # No passage holds "machin*" beside "dunkles" or "brot": a German word, as typed.
    found = engine.searcher.query_terms(parse("dunkles brot machen"))
    assert [(t.word, t.correction, t.prefix) for t in found] == [
        ("dunkles", None, False), ("brot", None, False), ("machen", None, True)]
    assert engine.searcher.dense_text(parse("dunkles brot machen")) == "dunkles brot machen"

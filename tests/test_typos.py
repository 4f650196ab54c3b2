"""Typos: a word the index does not know is read as the word meant (``search.terms``),
found with the tokenizer's own stems (one edit) or ``index.terms.NearTerms`` (two); a
real word (``search.lexicon``, wordfreq's lists) never is; the model reads only strong
corrections; and the typo sets ``notewell eval --typos`` seeds (``evaluation.typos``)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import subprocess

import msgpack
import numpy as np
import pytest
from helpers import notewell_command, subprocess_env
from notewell.evaluation import typos as typo_sets
from notewell.evaluation.metrics import EvalQuery, load_golden
from notewell.index.terms import NearTerms, Vocabulary, edit_distance
from notewell.ops.demo import demo_golden_path
from notewell.search import lexicon
from notewell.search.lexicon import Lexicon, LexiconError
from notewell.search.query import parse
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher
from notewell.search.terms import corrected_text, edits1, query_terms


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
        with engine.reading() as view:
            assert ids(view.search(typo, mode=mode))[0] == meant, mode


def test_without_typo_tolerance_the_typo_finds_nothing_by_keywords(engine):
    engine.searcher.ranking = dataclasses.replace(engine.searcher.ranking, typos=False)
    with engine.reading() as view:
        assert ids(view.search("bananna", mode="bm25")) == []
    engine.searcher.ranking = Ranking()
    with engine.reading() as view:
        assert ids(view.search("bananna ", mode="bm25")) == ["notes:kitchen/banana-bread.md"]


def test_the_word_being_typed_is_corrected_as_a_prefix(engine):
    # "vaccu" has no completion in the index; "vacu" (a doubled letter dropped) and
    # "vacuu" (one replaced) have.
    with engine.reading() as view:
        assert ids(view.search("vaccu", mode="bm25"))[0] == "notes:db/postgres-vacuum.md"
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
    with engine.reading() as view:
        hit = view.search("ripe banannas", mode="bm25").hits[0]
    assert "ripe bananas" in hit.snippet


def test_a_rare_word_close_to_a_common_one_gets_both(engine, notes_dir):
    for i in range(31):
        (notes_dir / f"mail{i}.md").write_text(f"# Mail {i}\n\nWe receive invoices daily.\n")
    (notes_dir / "typo.md").write_text("# Typo\n\nPlease recieve the parcel.\n")
    engine.sync()
    found = engine.searcher.query_terms(parse("recieve "))
    assert [(t.correction, t.df) for t in found] == [(None, 1), ("receive", 31)]
    with engine.reading() as view:
        hits = ids(view.search("recieve ", mode="bm25", limit=40))
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

    assert fixes("machne") == [("machne", "machine")]  # nothing else to go by
    assert fixes("washing machne") == [("machne", "machine")]  # "washing machine"
    # No passage holds "machine*" beside "dunkles" or "brot": as typed.
    found = engine.searcher.query_terms(parse("dunkles brot machne"))
    assert [(t.word, t.correction, t.prefix) for t in found] == [
        ("dunkles", None, False), ("brot", None, False), ("machne", None, True)]
    assert engine.searcher.dense_text(parse("dunkles brot machne")) == "dunkles brot machne"
    # "machen" is German (wordfreq: Zipf 6.0), never a typo, whatever else is typed.
    assert fixes("machen") == fixes("washing machen") == []


# -- real words: wordfreq's lists ------------------------------------------------------------


def test_the_lexicon_holds_wordfreqs_own_frequencies():
    from wordfreq import zipf_frequency

    words = lexicon.shared()
    assert words is not None and len(words) > 500_000
    for word in ("recieve", "vaccum", "laggy", "maggy", "shred", "shared", "postgress",
                 "machen", "brot", "comida", "the"):
        mine = words.zipf_by_language(word)
        for lang, z in zip(lexicon.LANGUAGES, mine):
            assert z == pytest.approx(zipf_frequency(word, lang, "large"), abs=0.026), word
    assert words.zipf("Shred") == words.zipf("shred") == pytest.approx(3.32, abs=0.026)
    assert words.zipf("postgress") == 0.0


def test_unreadable_word_lists_say_what_to_do(tmp_path):
    with pytest.raises(LexiconError, match="missing; reinstall wordfreq"):
        lexicon.read(("en",), str(tmp_path))
    (tmp_path / "large_en.msgpack.gz").write_bytes(b"not gzip")
    with pytest.raises(LexiconError, match="cannot be read"):
        lexicon.read(("en",), str(tmp_path))
    (tmp_path / "large_en.msgpack.gz").write_bytes(
        gzip.compress(msgpack.packb([{"format": "cB", "version": 2}, ["the"]])))
    with pytest.raises(LexiconError, match="cBpack format 1"):
        lexicon.read(("en",), str(tmp_path))
    (tmp_path / "large_en.msgpack.gz").write_bytes(gzip.compress(msgpack.packb(
        [{"format": "cB", "version": 1}, [], ["the"], ["shred", "don't", "süß"]])))
    words = lexicon.read(("en",), str(tmp_path))
    assert len(words) == 2 and words.zipf_by_language("shred") == (9.0,)  # 8.98, in 1/20s


def _fixes(searcher, text):
    return [(t.word, t.correction, t.strong) for t in searcher.query_terms(parse(text))
            if t.correction]


def test_a_real_word_is_never_corrected_and_a_misspelling_still_is(engine, notes_dir):
    # The cases: "shred" was read as "shared", "laggy" as "maggy".
    for i in range(40):
        (notes_dir / f"team{i}.md").write_text(f"# Team {i}\n\nFiles shared with the team.\n")
    (notes_dir / "dog.md").write_text("# Maggy\n\nMaggy the dog.\n")
    (notes_dir / "mail.md").write_text("# Mail\n\nWe receive invoices and machines.\n")
    engine.sync()
    s = engine.searcher
    assert _fixes(s, "shred ") == []  # Zipf 3.32: a word, though no note holds it
    assert _fixes(s, "laggy ") == []  # 2.21; "maggy" (2.08) is no commoner
    assert _fixes(s, "machen ") == []  # German
    assert s.dense_text(parse("shred something so nobody can recover it ")) == \
        "shred something so nobody can recover it"
    # Common misspellings, in the lists but far rarer than the word meant, and words
    # the lists do not hold at all, are corrected, and the model reads the correction.
    assert _fixes(s, "recieve ") == [("recieve", "receive", True)]  # 2.75 -> 4.85
    assert _fixes(s, "vaccum ") == [("vaccum", "vacuum", True)]  # 1.82 -> 4.09
    assert _fixes(s, "postgress ") == [("postgress", "postgres", True)]  # 0 -> 1.96
    assert s.dense_text(parse("recieve invoices ")) == "receive invoices"


def lexicon_of(words: dict[str, tuple[float, ...]]) -> Lexicon:
    """A lexicon of the given words and their Zipf values per language."""
    keys = np.array([hash(w) for w in words], dtype=np.int64)
    rows = np.array([[round(z * lexicon._STEP) for z in zs] for zs in words.values()],
                    dtype=np.uint8).reshape(len(words), len(lexicon.LANGUAGES))
    order = np.argsort(keys)
    return Lexicon(keys[order], rows[order])


def test_a_rarer_word_needs_a_correction_far_commoner_in_its_own_language(engine, notes_dir):
    (notes_dir / "rules.md").write_text("# Regeln\n\nJede Regel gilt, auch im Frühling.\n")
    (notes_dir / "garden.md").write_text("# Garden\n\nCut a sprig of thyme in spring.\n"
                                         "Spring onions. Spring rain. Spring again.\n")
    engine.sync()
    words = lexicon_of({  # Zipf in English, German, Spanish
        "regex": (2.2, 2.0, 1.2), "regel": (1.55, 5.0, 1.2),
        "sping": (2.45, 0.0, 0.0), "spring": (4.9, 3.8, 3.4),
        "kleider": (0.0, 3.2, 0.0), "kleiner": (0.0, 4.4, 0.0),
        "regeln": (1.0, 4.5, 0.0)})
    s = Searcher(engine.index, engine.embedder, words=words)
    # "regel" is German, "regex" English: not 30 times commoner in English.
    assert _fixes(s, "regex ") == []
    assert _fixes(s, "sping ") == [("sping", "spring", True)]  # 2.45 -> 4.9 in English
    # No list holds "regxl": any indexed word one edit away, the model reads it.
    assert _fixes(s, "regxl ") == [("regxl", "regel", True)]
    s = Searcher(engine.index, engine.embedder, Ranking(typo_zipf_gap=2.5), words=words)
    assert _fixes(s, "sping ") == []  # 2.45 more is needed: 4.9 is not enough
    s = Searcher(engine.index, engine.embedder, Ranking(typo_real_zipf=2.4), words=words)
    assert _fixes(s, "sping ") == []  # a word from 2.4 on


def test_a_weak_correction_is_looked_up_but_the_model_reads_the_word_typed(engine, notes_dir):
    # No list holds "kubectx" or "kubectl"; one note holds the first, 31 the second:
    # only the index speaks for the correction, and the note says the word exists.
    for i in range(31):
        (notes_dir / f"k8s{i}.md").write_text(f"# Pods {i}\n\nkubectl get pods -n web{i}\n")
    (notes_dir / "ctx.md").write_text("# Contexts\n\nkubectx switches clusters.\n")
    engine.sync()
    s = engine.searcher
    assert _fixes(s, "kubectx ") == [("kubectx", "kubectl", False)]
    assert s.dense_text(parse("kubectx clusters ")) == "kubectx clusters"
    hits = [h.note_id for h in s.run(parse("kubectx "), mode="bm25", limit=40).hits]
    assert "notes:ctx.md" in hits and "notes:k8s0.md" in hits  # keywords: both
    # A strong correction beside a word some note holds: the model reads both.
    for i in range(31):
        (notes_dir / f"mail{i}.md").write_text(f"# Mail {i}\n\nWe receive invoices.\n")
    (notes_dir / "typo.md").write_text("# Typo\n\nPlease recieve the parcel.\n")
    engine.sync()
    assert _fixes(engine.searcher, "recieve ") == [("recieve", "receive", True)]
    assert engine.searcher.dense_text(parse("recieve ")) == "recieve receive"


def test_a_four_letter_word_is_read_only_as_a_real_word_and_only_by_keywords(engine,
                                                                            notes_dir):
    (notes_dir / "keys.md").write_text("# Keyboard\n\nKeep the sds layer note.\n")
    engine.sync()
    s = engine.searcher
    assert _fixes(s, "ntoe ") == [("ntoe", "note", False)]  # "note": Zipf 5.05
    assert s.dense_text(parse("ntoe layer ")) == "ntoe layer"
    assert _fixes(s, "sbds ") == []  # "sds" is held (Zipf 3.0), but shorter
    assert _fixes(s, "kepe ") == [("kepe", "keep", False)]
    assert _fixes(s, "nte ") == []  # three letters: never
    s = Searcher(engine.index, engine.embedder, Ranking(typo_short_letters=5))
    assert _fixes(s, "ntoe ") == []


def test_without_word_lists_no_word_is_corrected(engine):
    q = parse("bananna bread ")
    found = query_terms(q, engine.index.reads, Ranking(), None, lambda: None)
    assert [t.correction for t in found] == [None, None]
    found = query_terms(q, engine.index.reads, Ranking(), None, lexicon.shared)
    assert [t.correction for t in found] == ["banana", None]


def test_a_query_reads_most_like_the_language_its_words_are_commonest_in():
    words = lexicon.shared()
    assert words is not None
    for query, lang in (("erly seeed release", "en"), ("dunkles brot selbst machen", "de"),
                        ("pan casero sin levadura", "es")):
        assert lexicon.LANGUAGES[words.language(query.split(" "))] == lang
    assert words.language(["postgress", "xqzv"]) is None


def test_the_daemon_reads_the_word_lists_while_warming_up():
    from helpers import REPO

    source = (REPO / "daemon/notewell/serve/background.py").read_text()
    warm = source[source.index("def run(self)"):source.index("def start_engine")]
    assert "lexicon.shared()" in warm  # the keystroke client: tests/test_architecture.py


# -- the seeded typo sets ----------------------------------------------------------------------


def test_the_seeder_gives_the_same_typos_on_every_machine():
    # Pinned: SHA-256 draws, not ``random``, so these never change.
    assert typo_sets.seed_typos("postgres vacuum settings", "q1") == \
        "posgtres vvacuum settings"
    assert typo_sets.seed_typos("Banana bread with ripe bananas", "demo-7") == \
        "Banana bdead with ripe banqnas"
    assert typo_sets.seed_typos("git log -p", "x") == "git log -p"  # no word of 4 letters
    again = [typo_sets.seed_typos(q.text, q.id) for q in load_golden(demo_golden_path())]
    assert again == [typo_sets.seed_typos(q.text, q.id) for q in load_golden(
        demo_golden_path())]
    assert typo_sets.seed_typos("postgres vacuum settings", "q1", seed="other") != \
        "posgtres vvacuum settings"


def test_each_seeded_typo_is_one_edit_on_its_own_long_word():
    queries = load_golden(demo_golden_path())
    kinds = set()
    for q in typo_sets.typo_set(queries):
        clean = next(c for c in queries if c.id == q.id).text
        before, after = (re.findall(r"[A-Za-z]+|[^A-Za-z]+", t) for t in (clean, q.text))
        assert len(before) == len(after), (clean, q.text)
        changed = [(a, b) for a, b in zip(before, after) if a != b]
        assert 1 <= len(changed) <= 2, (clean, q.text)
        for a, b in changed:
            assert len(a) >= typo_sets.MIN_LETTERS and edit_distance(a, b, 2) == 1, (a, b)
            kinds.add("drop" if len(b) < len(a) else "double" if len(b) > len(a)
                      else "swap" if sorted(a) == sorted(b) else "neighbour")
    assert kinds == set(typo_sets.KINDS)


def test_the_typo_set_is_the_english_queries():
    queries = [EvalQuery("1", "dunkles brot backen", {"a": 1}, "de"),
               EvalQuery("2", "sourdough starter", {"a": 1}, "exact"),
               EvalQuery("3", "sourdough starter", {"a": 1}, "en"),
               EvalQuery("4", "红烧肉怎么做", {"a": 1}, "zh")]
    assert [q.id for q in typo_sets.typo_set(queries)] == ["2", "3"]
    assert typo_sets.NEIGHBOURS["g"] == "tyfhvb" and typo_sets.NEIGHBOURS["q"] == "wa"


def test_eval_typos_scores_clean_and_seeded_typos_with_correction_on_and_off(home, tmp_path,
                                                                           notes_dir):
    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(json.dumps(row) for row in [
        {"id": "b", "query": "banana", "relevant": ["kitchen/banana-bread.md"],
         "type": "exact"},
        {"id": "v", "query": "vacuum", "relevant": ["db/postgres-vacuum.md"],
         "type": "exact"},
        {"id": "de", "query": "lissabon wochenende", "relevant": ["travel/lisbon.md"],
         "type": "de"}]) + "\n")
    out = subprocess.run(notewell_command("eval", "--typos", "--golden", str(golden),
                                          "--notes", str(notes_dir), "--json",
                                          "--methods", "bm25"),
                         capture_output=True, text=True, timeout=120, env=subprocess_env(home))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["queries"] == {"clean": 3, "typos": 2, "seeded": 2}
    assert set(doc) == {"queries", "clean", "clean_off", "typos", "typos_off",
                        "clean_english", "worse"}
    assert doc["clean"]["bm25"]["all"]["recall@5"] == doc["clean_off"]["bm25"]["all"][
        "recall@5"]
    # Keywords find nothing for a word typed wrong unless it is corrected.
    assert doc["typos"]["bm25"]["all"]["recall@5"] == 1.0
    assert doc["typos_off"]["bm25"]["all"]["recall@5"] == 0.0
    assert all(w["set"] in ("clean", "typos") for w in doc["worse"])
    table = subprocess.run(notewell_command("eval", "--typos", "--golden", str(golden),
                                            "--notes", str(notes_dir), "--methods", "bm25"),
                           capture_output=True, text=True, timeout=120,
                           env=subprocess_env(home))
    assert table.returncode == 0 and "typos/clean R@5" in table.stdout
    both = subprocess.run(notewell_command("eval", "--typos", "--no-typos"),
                          capture_output=True, text=True, timeout=60, env=subprocess_env(home))
    assert both.returncode == 2 and "not allowed with" in both.stderr

"""The keyword side's view of words (``notewell.index.terms``): FTS5's tokenizer and the
vocabulary with document frequencies, and how search uses them."""

from __future__ import annotations

import dataclasses

from index_helpers import vocabulary_docs
from notewell.index.copies import CopySettings
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.index.terms import Tokens, Vocabulary, read_vocabulary
from notewell.notes import Chunk, Note
from notewell.search.query import parse
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher


def test_prefix_df_sums_the_terms_under_the_prefix_capped_at_all_chunks():
    v = Vocabulary.from_pairs([("post", 3), ("postgr", 2), ("potato", 1), ("pos", 9)], 10)
    assert v.df("postgr") == 2 and v.df("nothing") == 0
    assert v.prefix_df("post") == 5
    assert v.prefix_df("po") == 10  # 15 capped: a chunk may hold several of them
    assert v.prefix_df("zz") == 0


def test_idf_falls_with_frequency_and_never_goes_negative():
    v = Vocabulary.from_pairs([], 1000)
    assert v.idf(1) > v.idf(10) > v.idf(500) > v.idf(1000) > 0


def note(i: int, text: str) -> tuple[Note, list]:
    n = Note(note_id=f"n:{i}", source="n", kind="markdown", title=f"Note {i}", text=text,
             url=f"file:///{i}", tags=("cooking/baking",), fingerprint=str(i))
    return n, [(Chunk(seq=0, heading_path=("Café",), anchor=None, text=text), n.url,
                f"h{i}")]


def test_tokens_are_the_terms_fts5_indexed(tmp_path):
    idx = Index(":memory:", BuildSettings("fake", 4, "c"))
    text = "Running the Crème brûlée recipes — twice, with x_y and 42°C."
    n, chunks = note(1, text)
    idx.add_embeddings(["h1"], [[1.0, 0.0, 0.0, 0.0]])
    idx.replace_note(n, chunks)
    indexed = set(vocabulary_docs(read_vocabulary(idx.db)))
    tokens = Tokens(idx.db)
    mine = set(tokens.terms("\n".join(("Note 1", "Café", text, "cooking/baking"))))
    assert mine == indexed
    assert tokens.terms("Running", query=True) == ["run"]
    assert tokens.prefix("Crè") == ["cre"]
    assert tokens.prefix("snake_ca") == ["snake", "ca"]
    idx.close()


def test_the_vocabulary_follows_edits(tmp_path):
    # FTS5's vocabulary, read again after each edit: the keyword copy's (which a view may
    # have loaded in the background meanwhile) lets a removed chunk's terms count on, by
    # design (``KeywordIndex.vocabulary``), so it stays off here.
    idx = Index(str(tmp_path / "i.db"), BuildSettings("fake", 4, "c"),
                CopySettings(vectors=False, keywords=False))
    idx.add_embeddings(["h1", "h2"], [[1.0, 0, 0, 0], [0, 1.0, 0, 0]])
    idx.replace_note(*note(1, "apples and pears"))
    assert idx.reads.vocabulary().df("appl") == 1
    idx.replace_note(*note(2, "apples again"))
    assert idx.reads.vocabulary().df("appl") == 2 and idx.reads.vocabulary().chunks == 2
    idx.delete_note("n:1")
    assert idx.reads.vocabulary().df("pear") == 0
    idx.close()


def test_bm25_leaves_out_the_commonest_words_beyond_its_budget(engine):
    # FTS5's budget (the keyword copy has its own, ``keyword_row_budget``), whatever a
    # view's background loads have got to meanwhile.
    engine.index.copies.settings.vectors = False
    engine.index.copies.settings.keywords = False
    q = parse("the banana ")
    full = Searcher(engine.index, engine.embedder)
    common = full.query_terms(q)[0]
    assert common.word == "the" and common.df > full.query_terms(q)[1].df
    tight = Searcher(engine.index, engine.embedder,
                     dataclasses.replace(Ranking(), bm25_row_budget=1))
    found = {c for c, _ in tight.bm25(q)}
    # Only chunks with the rarer word are scored; coverage still counts "the".
    banana = {c for c, _ in full.bm25(parse("banana "))}
    assert found == banana
    assert len({c for c, _ in full.bm25(q)}) > len(found)
    cover, mass = tight.coverage(q, sorted(found))
    assert mass == sum(t.idf for t in tight.query_terms(q))
    assert all(0 < share <= 1 for share in cover.values())

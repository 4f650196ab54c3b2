"""The ranking knobs, in one place: how deep each retriever looks, how fusion weighs them,
when a typed word is completed, when two notes count as one.

May import ``index.keywords`` (FTS5's column weights) and nothing else of notewell.
"""

from __future__ import annotations

from dataclasses import dataclass

from notewell.index.keywords import COLUMN_WEIGHTS


@dataclass(frozen=True)
class Ranking:
    """Ranking knobs; defaults tuned on SciFact's train split and the demo golden set
    (``notewell eval``), where a broad range of them scores within 0.003 nDCG@10."""

    dense_k: int = 80
    bm25_k: int = 80
    # Weight of the (min-max scaled) cosine; BM25 gets the rest.
    dense_share: float = 0.6
    # A note's dense evidence is its best passage's cosine plus this share of its title
    # vector's lead over it (``max(0, title cosine - passage cosine)``); the title vectors
    # among the k-NN's nearest also make their notes candidates. 0: titles unused.
    # Measured (docs/search-quality.md, "Real note collections"): Recall@5 +0.02 on both
    # real collections, where adding the whole lead to every passage did no better.
    title_lead: float = 0.5
    # Trust in a keyword match (see ``fusion``): it rises from 0 at this share of the
    # query's IDF mass to 1 at all of it, raised to ``coverage_power`` ...
    coverage_floor: float = 0.4
    coverage_power: float = 2.0
    # ... or from 0 to 1 as the matched IDF mass itself goes from low to high (about 2
    # and 4 rare words), whichever is larger.
    matched_idf_low: float = 8.0
    matched_idf_high: float = 20.0
    # FTS5 column weights: title, heading path, passage, tags.
    bm25_columns: tuple[float, float, float, float] = COLUMN_WEIGHTS
    # A fragment this short is too ambiguous to embed while it is being typed, unless
    # it can be completed from the words of this many top keyword hits.
    min_partial_for_dense: int = 4
    complete_from: int = 20
    # The BM25 query leaves out the commonest words once the chunks holding the words
    # exceed this many (coverage still counts them): see ``index.reads.Reads.bm25``.
    bm25_row_budget: int = 40_000
    # The same for the in-memory keyword copy, where a chunk costs ~50x less to score.
    keyword_row_budget: int = 200_000
    # Notes whose mean passage vectors are this close are one note shown twice; with
    # the same title (an import's " (1)" ignored), a lower bar is enough.
    duplicate_similarity: float = 0.97
    duplicate_similarity_same_title: float = 0.9
    # A filter that admits at least this share of the notes (``since:1y`` in most note
    # collections) is applied to the unfiltered retrievers' best, fetched
    # ``post_filter_margin`` times as deep as the share needs, rather than to the
    # retrievers themselves: the unfiltered ones answer from the in-memory copies, the
    # filtered ones scan every allowed chunk. Too few survivors: the filtered path.
    post_filter_share: float = 0.5
    post_filter_margin: float = 1.5
    # Typos (``search.terms.correct``): a word of at least ``typo_min_letters`` letters
    # that no passage holds is read as the commonest indexed word one edit away (two when
    # its stem has ``typo_long_word`` letters; the word being typed: one, as a prefix).
    # Shorter words were mostly abbreviations on SciFact ("sbds" is not "sds"): one of
    # ``typo_short_letters`` is read only as a real word no shorter ("ntoe": "note"),
    # and only by keywords. A word held by at most ``typo_rare_df`` passages also gets a
    # close word held by ``typo_common_ratio`` times as many, beside itself.
    typos: bool = True
    typo_min_letters: int = 5
    typo_short_letters: int = 4
    typo_long_word: int = 9
    typo_rare_df: int = 3
    typo_common_ratio: float = 30.0
    # A word English, German or Spanish use at least ``typo_real_zipf`` on the Zipf scale
    # (``search.lexicon``; 3.0: once per million words) is a word, never a typo: "shred"
    # (3.32) is not "shared". A rarer word the lists hold is corrected only to one
    # ``typo_zipf_gap`` more common in the query's language (1.5: 30 times): common
    # misspellings ("recieve" 2.75, "vaccum" 1.82) are read as meant, rare words ("laggy"
    # 2.21, whose indexed neighbour "maggy" is 2.08) as typed.
    typo_real_zipf: float = 3.0
    typo_zipf_gap: float = 1.5
    # What a correction weighs in coverage (``fusion.coverage``) against a word as typed:
    # a guess found in a passage is no evidence that the passage is what the query asks
    # for (SciFact: "tocopheryl" read as "tocopherol" found the wrong abstracts). It still
    # finds BM25's candidates and the model reads it.
    typo_coverage: float = 0.5

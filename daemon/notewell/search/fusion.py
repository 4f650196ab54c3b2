"""Fusion: the candidates of both retrievers scored together.

A convex combination of the cosine (min-max scaled over the candidates) and of BM25
(over the best BM25) scaled by how far the keyword match can be trusted: a match on most
of the query's information counts fully, a match on one word of a short paraphrase hardly
at all, so fusion keeps what either side alone gets right. How much of the query's
information a chunk matches is its coverage: the share of the query words' IDF mass
among the words it holds; a typo's correction counts at ``QueryTerm.weight`` of its IDF (a
guess is weaker evidence than a word as typed).

Pure arithmetic over what ``searcher`` gathered; imports ``search.ranking`` and
``search.terms`` only.
"""

from __future__ import annotations

import numpy as np

from notewell.search.ranking import Ranking
from notewell.search.terms import QueryTerm


def ramp(x: float, low: float, high: float) -> float:
    """0 below ``low``, 1 above ``high``, linear between."""
    return min(1.0, max(0.0, (x - low) / (high - low)))


def coverage(terms: list[QueryTerm], held: np.ndarray, chunk_ids: list[int]
             ) -> tuple[dict[int, float], float]:
    """Each chunk's share of the query's IDF mass (0..1) and that mass, from ``held``
    (``Reads.holds``: one row per term, one column per chunk)."""
    total = sum(t.idf * t.weight for t in terms) or 1.0
    share = np.zeros(len(chunk_ids))
    for t, row in zip(terms, held):
        share += row * (t.idf * t.weight / total)
    return dict(zip(chunk_ids, share.tolist())), total


def trust(r: Ranking, share: float, mass: float) -> float:
    """How much a keyword match is worth: full when the chunk holds most of the query's
    information (coverage near 1: the exact words) or a lot of it in absolute terms (a
    long query matched on many rare words), nothing for one word of a short paraphrase."""
    return max(ramp(share, r.coverage_floor, 1.0) ** r.coverage_power,
               ramp(share * mass, r.matched_idf_low, r.matched_idf_high))


def keyword_only(lexical: list[tuple[int, float]]) -> dict[int, float]:
    """BM25 scores over the best one, when there is nothing to fuse them with."""
    best = max(s for _, s in lexical) or 1.0
    return {c: s / best for c, s in lexical}


def combine(r: Ranking, cosine: dict[int, float], lexical: list[tuple[int, float]],
            cover: dict[int, float], mass: float) -> dict[int, float]:
    """``dense_share * cosine (min-max scaled) + (1 - dense_share) * BM25 / best BM25 *
    trust`` for every chunk with a cosine (``cosine``: every candidate of both sides)."""
    best_bm25 = max(s for _, s in lexical) or 1.0
    low, high = min(cosine.values()), max(cosine.values())
    spread = (high - low) or 1.0
    scores = {c: r.dense_share * (v - low) / spread for c, v in cosine.items()}
    for chunk_id, score in lexical:
        if chunk_id not in scores:
            # Gone since the keyword side found it (a sync committed in between): nothing
            # to rank or show.
            continue
        share = cover.get(chunk_id, 0.0)
        scores[chunk_id] += (1.0 - r.dense_share) * score / best_bm25 * trust(r, share, mass)
    return scores

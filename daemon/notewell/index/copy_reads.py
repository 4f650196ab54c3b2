"""The copy side of the read interface (``CopyReads``), and the one place a request's
view is taken (``open_view``): which side answers each read is decided there, once.

``open_view`` reads the stamps in one query (``sql.freshness``), lets ``Copies`` bring
along what is cheap and start a background load of what is behind
(``Copies.ensure_loading``), and takes the copies current as of those stamps
(``Copies.current``). With none, the view is ``reads.SqlReads``; else ``CopyReads``,
which answers from the vector copy what needs vectors and from the keyword copy what
needs words or ids, each for the whole view, and asks SQLite (its base class) for what
only the file holds, or for a retriever whose copy is not current.

May import ``index.reads``, ``index.copies``, ``index.sql``, ``index.keywords``,
``index.vector_cache``; never ``index.database``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apsw
import numpy as np

from notewell.index import sql
from notewell.index.copies import Copies, CopySettings
from notewell.index.keywords import KeywordIndex
from notewell.index.reads import Pairs, ReadCaches, Reads, SqlReads, Term, _unit
from notewell.index.sql import Freshness
from notewell.index.terms import Vocabulary
from notewell.index.vector_cache import VectorCache


def open_view(db: apsw.Connection, copies: Copies, caches: ReadCaches) -> Reads:
    """The reads one request makes, on this thread's connection ``db``: one freshness
    query, then each read's side fixed for the view's life."""
    fresh = sql.freshness(db)
    copies.ensure_loading(fresh, db)
    held = copies.current(fresh)
    if held.vectors is None and held.keywords is None:
        return SqlReads(db, fresh, caches, copies.dim, held.vocabulary)
    return CopyReads(db, fresh, caches, copies.dim, held.vocabulary, held.vectors,
                     held.keywords, copies.settings)


class CopyReads(SqlReads):
    """Reads answered from the in-memory copies current at the view's start: the vector
    copy (``vectors``) and the keyword copy (``keywords``); where one is None, that
    retriever's reads are SQLite's, as are passages, filters and notes by id."""

    def __init__(self, db: apsw.Connection, fresh: Freshness, caches: ReadCaches, dim: int,
                 vocab: Vocabulary | None, vectors: VectorCache | None,
                 keywords: KeywordIndex | None, settings: CopySettings) -> None:
        super().__init__(db, fresh, caches, dim, vocab)
        self._vectors = vectors
        self._keywords = keywords
        self._settings = settings

    # -- vectors ------------------------------------------------------------------------------

    def knn(self, vector: np.ndarray, k: int) -> Pairs:
        """From ``exact_head_from`` vectors the best ``exact_head`` are re-scored with
        their float vectors: int8 scores (within 1e-3) cannot order near-ties there."""
        cache, s = self._vectors, self._settings
        if cache is None:
            return super().knn(vector, k)
        if cache.quantized and cache.n >= s.exact_head_from:
            found = cache.search(vector, max(k, s.exact_head))
            return self._exact_head(vector, found, s.exact_head)[:k]
        return cache.search(vector, k)

    def _exact_head(self, vector: np.ndarray, found: Pairs, size: int) -> Pairs:
        """``found`` with its first ``size`` distances made exact and re-ordered."""
        head = found[:size]
        stored = sql.stored_vectors(self._db, [i for i, _ in head])
        q = _unit(vector)
        exact = [(i, float(1.0 - stored[i] @ q) if i in stored else d) for i, d in head]
        return sorted(exact, key=lambda x: (x[1], x[0])) + found[size:]

    def _knn_within(self, vector: np.ndarray, k: int, notes: list[int] | set[int]) -> Pairs:
        found = self._within_copies(vector, k, notes)
        return found if found is not None else super()._knn_within(vector, k, notes)

    def _titles_within(self, vector: np.ndarray, k: int, notes: list[int] | set[int]
                       ) -> Pairs:
        """From the vector copy (re-scored with float vectors when quantized) when it
        holds them all, else sqlite-vec's exact scan."""
        cache = self._vectors
        if cache is None:
            return super()._titles_within(vector, k, notes)
        rows = self.titles_of(notes)
        if not rows:
            return []
        found, matrix = cache.matrix([v for _, v in rows])
        if not found.all():  # a vector the copy does not hold yet
            return super()._titles_within(vector, k, notes)
        norms = np.maximum(np.linalg.norm(matrix, axis=1), 1e-12)
        dist = (1.0 - (matrix @ _unit(vector)) / norms).tolist()
        pairs = sorted(((n, d, v) for (n, v), d in zip(rows, dist)),
                       key=lambda x: (x[1], x[0]))
        if cache.quantized:
            pairs = sorted(self._float_distances(
                vector, pairs[:k + self._settings.within_margin]),
                key=lambda x: (x[1], x[0]))
        return [(n, d) for n, d, _ in pairs[:k]]

    def _titles_of_vectors(self, vector_ids: list[int]) -> list[tuple[int, int]]:
        copy = self._keywords
        if copy is None:
            return super()._titles_of_vectors(vector_ids)
        return copy.titles.of_vectors(vector_ids)

    def exact_nearest(self, vector: np.ndarray, found: Pairs, k: int) -> Pairs:
        """When the copy is quantized, the best ``k + within_margin`` of ``found``
        re-scored with their float vectors."""
        cache = self._vectors
        if cache is None or not cache.quantized:
            return found[:k]
        head = found[:k + self._settings.within_margin]
        vec = {c: e for c, _, e in self.owners([c for c, _ in head])}
        exact = self._float_distances(vector, [(c, d, vec.get(c, -1)) for c, d in head])
        exact.sort(key=lambda x: (x[1], x[0]))
        return [(c, d) for c, d, _ in exact[:k]]

    def exact_titles(self, vector: np.ndarray, titles: Pairs) -> Pairs:
        """``titles`` re-scored with their float vectors when the copy is quantized."""
        cache = self._vectors
        if cache is None or not cache.quantized or not titles:
            return titles
        vec = dict(self.titles_of([n for n, _ in titles]))
        exact = self._float_distances(vector, [(n, d, vec.get(n, -1)) for n, d in titles])
        return sorted(((n, d) for n, d, _ in exact), key=lambda x: (x[1], x[0]))

    def _float_distances(self, vector: np.ndarray, pairs: list[tuple[int, float, int]]
                         ) -> list[tuple[int, float, int]]:
        """``pairs`` (chunk id, cosine distance, vector id) with each distance computed
        again from the stored float vector (kept as it is where none is stored)."""
        stored = sql.stored_vectors(self._db, sorted({v for _, _, v in pairs}))
        q = _unit(vector)
        return [(c, float(1.0 - (stored[v] @ q) / max(float(np.linalg.norm(stored[v])),
                                                      1e-12)) if v in stored else d, v)
                for c, d, v in pairs]

    def note_share(self, notes: set[int]) -> float | None:
        copy = self._keywords
        count = copy.note_count() if copy is not None else 0
        return min(1.0, len(notes) / count) if count else None

    def _within_copies(self, vector: np.ndarray, k: int, notes: Iterable[int]
                       ) -> Pairs | None:
        """The ``k`` nearest chunks of ``notes`` from the in-memory copies, or None when
        they cannot answer (missing, or too few allowed chunks to be worth it: SQLite's
        exact scan answers then). Exact up to ``exact_limit`` vectors; beyond, the best
        ``k + within_margin`` by int8 scores are re-scored with their float vectors."""
        s, copy, cache = self._settings, self._keywords, self._vectors
        if copy is None or cache is None:
            return None
        at = copy.chunks_of_notes(notes if isinstance(notes, (list, set)) else list(notes))
        if len(at) <= s.within_from:
            return None
        chunk_ids, vec_ids = copy.chunk_ids[at], copy.vectors[at]
        q = _unit(vector)
        dist = np.empty(len(at), dtype=np.float32)
        block = 8192  # decoded int8 rows: 12 MB at a time, not the whole copy
        for start in range(0, len(at), block):
            found, rows = cache.matrix(vec_ids[start:start + block])
            if not found.all():
                return None  # a vector the copy does not hold yet: SQLite answers
            norms = np.maximum(np.linalg.norm(rows, axis=1), 1e-12)
            dist[start:start + len(rows)] = 1.0 - (rows @ q) / norms
        head = min(len(dist), k + (s.within_margin if cache.quantized else 0))
        order = (np.argpartition(dist, head - 1)[:head] if head < len(dist)
                 else np.arange(len(dist)))
        pairs = [(int(chunk_ids[i]), float(dist[i]), int(vec_ids[i])) for i in order]
        if cache.quantized:
            pairs = self._float_distances(vector, pairs)
        pairs.sort(key=lambda x: (x[1], x[0]))
        return [(c, d) for c, d, _ in pairs[:k]]

    def vector_matrix(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        cache = self._vectors
        if cache is None:
            return super().vector_matrix(ids)
        return cache.matrix(list(ids))

    # -- ids: vectors to chunks to notes ---------------------------------------------------------

    def chunks_of_vectors(self, vector_ids: list[int]) -> Iterable[tuple[int, int]]:
        copy = self._keywords
        if copy is None:
            return super().chunks_of_vectors(vector_ids)
        at = copy.chunks_of_vectors(vector_ids)
        return zip(copy.chunk_ids[at].tolist(), copy.vectors[at].tolist())

    def owners(self, chunk_ids: list[int]) -> list[tuple[int, int, int]]:
        copy = self._keywords
        if copy is None:
            return super().owners(chunk_ids)
        notes, vectors = copy.owners(chunk_ids)
        return [(c, n, e) for c, n, e in zip(chunk_ids, notes.tolist(), vectors.tolist())
                if n >= 0]

    def titles_of(self, notes: Iterable[int]) -> list[tuple[int, int]]:
        copy = self._keywords
        if copy is None:
            return super().titles_of(notes)
        return copy.titles.of_notes(notes if isinstance(notes, (list, set)) else list(notes))

    def note_chunks(self, notes: list[int]) -> list[tuple[int, int, int]]:
        copy = self._keywords
        if copy is None:
            return super().note_chunks(notes)
        at = copy.chunks_of_notes(notes)
        return list(zip(copy.chunk_ids[at].tolist(), copy.notes[at].tolist(),
                        copy.vectors[at].tolist()))

    def note_vectors(self, notes: list[int]) -> tuple[np.ndarray, np.ndarray]:
        copy = self._keywords
        if copy is None:
            return super().note_vectors(notes)
        at = copy.chunks_of_notes(notes)
        return copy.notes[at], copy.vectors[at]

    # -- words ----------------------------------------------------------------------------------

    def scoring_copy(self, terms: Sequence[Term], weights: Sequence[float]
                     ) -> KeywordIndex | None:
        copy = self._keywords
        if copy is None or copy.weights != tuple(weights):
            return None
        return copy if all(len(t.tokens) == 1 for t in terms) else None

    def holds(self, terms: Sequence[Term], chunk_ids: list[int]) -> np.ndarray:
        """From the keyword copy's posting lists when every word is a single term: no
        chunk is read."""
        copy = self._keywords
        if copy is None or not all(len(t.tokens) == 1 for t in terms):
            return super().holds(terms, chunk_ids)
        positions = copy.positions(chunk_ids)
        rows = [copy.holds(positions, t.tokens[0], t.prefix) for t in terms]
        return np.array(rows, dtype=bool).reshape(len(terms), len(chunk_ids))

    def together(self, term: Term, others: Sequence[Term]) -> bool:
        copy = self._keywords
        if copy is None or not all(len(t.tokens) == 1 for t in (term, *others)):
            return super().together(term, others)
        docs, _ = copy.postings(term.tokens[0], term.prefix)
        return any(bool(copy.holds(docs, t.tokens[0], t.prefix).any()) for t in others)

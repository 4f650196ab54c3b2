"""The daemon's in-memory copy of the keyword index: BM25 as FTS5 computes it, in numpy.

FTS5 in the index file is the record, and answers whenever this copy cannot (while it
loads or after a change, for filtered queries, for a word that is several tokens). But
FTS5 scores a query by visiting every chunk that holds any of its words, reading each
one's column sizes from disk: 42 ms p50 at 100,000 chunks, 346 ms at 1M
(bench/search_latency.py; 1.9 and 5.7 ms from this copy). This copy keeps,
for every indexed term, the chunks that hold it and how often (weighted by column, as
``bm25()`` weighs them), so a query is a few vector operations over posting arrays.

The copy is built from the chunks' text with FTS5's own tokenizer (``terms.Tokens``), so
it holds the same terms; a test checks its scores against ``bm25()`` itself. It follows
the index by the ``chunks_epoch`` meta value, which every chunk write changes: a copy of
another epoch is not used, and a new one is built behind the searches.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from array import array
from collections.abc import Iterable, Sequence

import numpy as np

from .terms import Tokens, Vocabulary

K1, B = 1.2, 0.75  # FTS5's bm25() constants
# Column weights for title, heading path, passage and tags (search.Ranking's default).
COLUMN_WEIGHTS = (4.0, 2.0, 1.0, 2.0)
_MAX_FREQ = 255  # weighted term frequency per chunk, stored in a byte (saturated long before)


class KeywordIndex:
    """Posting lists of one index's chunks in compressed sparse rows: ``docs`` and
    ``freqs`` hold, term after term (in sorted order), the chunks (as positions in
    ``chunk_ids``) holding it and its column-weighted frequency there."""

    def __init__(self, terms: list[str], offsets: np.ndarray, docs: np.ndarray,
                 freqs: np.ndarray, chunk_ids: np.ndarray, lengths: np.ndarray,
                 weights: tuple[float, ...], epoch: str) -> None:
        self.terms = terms
        self.term_index = {t: i for i, t in enumerate(terms)}
        self.offsets = offsets
        self.docs = docs
        self.freqs = freqs
        self.chunk_ids = chunk_ids
        self.lengths = lengths
        avg_length = float(lengths.mean()) if len(lengths) else 1.0
        # BM25's length normalisation per chunk, fixed for the copy's life.
        self.norm = (K1 * (1 - B + B * lengths / avg_length)).astype(np.float32)
        self.weights = weights
        self.epoch = epoch
        order = np.argsort(chunk_ids, kind="stable")
        self._sorted_ids, self._order = chunk_ids[order], order
        self._recent: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._recent_lock = threading.Lock()
        self._vocabulary: Vocabulary | None = None

    def vocabulary(self) -> Vocabulary:
        """The copy's terms and document frequencies as a ``terms.Vocabulary``, sharing its
        term list rather than holding a second one."""
        if self._vocabulary is None:
            self._vocabulary = Vocabulary(self.terms, np.diff(self.offsets), self.chunks,
                                          self.epoch, self.term_index)
        return self._vocabulary

    @property
    def chunks(self) -> int:
        return len(self.chunk_ids)

    def nbytes(self) -> int:
        arrays = (self.offsets, self.docs, self.freqs, self.chunk_ids, self.lengths,
                  self._sorted_ids, self._order)
        return sum(a.nbytes for a in arrays)

    # -- reading --------------------------------------------------------------------------

    def postings(self, term: str, prefix: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(chunk positions, ascending; weighted frequency) for a term, or for every term
        starting with it (one entry per chunk, frequencies summed). Kept for the last few
        terms asked: typing asks for the same ones keystroke after keystroke."""
        key = (term, prefix)
        found = self._recent.get(key)
        if found is None:
            found = self._postings(term, prefix)
            with self._recent_lock:
                self._recent[key] = found
                while len(self._recent) > 8:
                    self._recent.pop(next(iter(self._recent)))
        return found

    def _postings(self, term: str, prefix: bool) -> tuple[np.ndarray, np.ndarray]:
        if not prefix:
            i = self.term_index.get(term)
            if i is None:
                return _EMPTY_DOCS, _EMPTY_FREQS
            lo, hi = self.offsets[i], self.offsets[i + 1]
            return self.docs[lo:hi], self.freqs[lo:hi].astype(np.float32)
        first = bisect.bisect_left(self.terms, term)
        last = bisect.bisect_left(self.terms, term + "\U0010ffff", first)
        lo, hi = self.offsets[first], self.offsets[last]
        if last - first == 1:
            return self.docs[lo:hi], self.freqs[lo:hi].astype(np.float32)
        # Summed per chunk through a dense count: linear, where sorting was n log n.
        summed = np.bincount(self.docs[lo:hi], weights=self.freqs[lo:hi],
                             minlength=self.chunks)
        docs = np.flatnonzero(summed).astype(np.int32)
        return docs, summed[docs].astype(np.float32)

    def holds(self, chunk_ids: Sequence[int], term: str, prefix: bool = False) -> np.ndarray:
        """For each of ``chunk_ids``, whether it holds ``term`` (or a term starting with it)."""
        docs, _ = self.postings(term, prefix)
        positions = self.positions(chunk_ids)
        if not len(docs):
            return np.zeros(len(positions), dtype=bool)
        at = np.minimum(np.searchsorted(docs, positions), len(docs) - 1)
        return (positions >= 0) & (docs[at] == positions)

    def positions(self, chunk_ids: Sequence[int]) -> np.ndarray:
        """The positions of ``chunk_ids`` (-1 where a chunk is not in the copy)."""
        wanted = np.asarray(chunk_ids, dtype=np.int64)
        if not len(self._sorted_ids):
            return np.full(len(wanted), -1)
        at = np.minimum(np.searchsorted(self._sorted_ids, wanted), len(self._sorted_ids) - 1)
        return np.where(self._sorted_ids[at] == wanted, self._order[at], -1)

    # -- scoring --------------------------------------------------------------------------

    def bm25(self, phrases: Sequence[tuple[str, bool]], k: int) -> list[tuple[int, float]]:
        """(chunk id, BM25 score, higher is better) of the ``k`` best chunks holding any of
        ``phrases`` ((term, is_prefix) pairs), scored as FTS5's ``bm25()`` with this copy's
        column weights."""
        n = self.chunks
        if not n or not phrases:
            return []
        scores = np.zeros(n, dtype=np.float32)
        norm = self.norm
        for term, prefix in phrases:
            docs, freqs = self.postings(term, prefix)
            if not len(docs):
                continue
            hits = len(docs)
            idf = math.log((n - hits + 0.5) / (hits + 0.5))
            idf = idf if idf > 0 else 1e-6  # as FTS5: a word in most chunks weighs ~nothing
            scores[docs] += idf * freqs * (K1 + 1) / (freqs + norm[docs])
        # Every chunk holding a word scored above zero (the IDF floor sees to that).
        candidates = np.flatnonzero(scores)
        if not len(candidates):
            return []
        values = scores[candidates]
        if len(candidates) > k:
            top = np.argpartition(-values, k - 1)[:k]
            candidates, values = candidates[top], values[top]
        ids = self.chunk_ids[candidates]
        order = np.lexsort((ids, -values))
        return [(int(ids[i]), float(values[i])) for i in order]


_EMPTY_DOCS = np.zeros(0, dtype=np.int32)
_EMPTY_FREQS = np.zeros(0, dtype=np.float32)


def columns(title: str, aliases: Sequence[str], heading: str | Sequence[str], text: str,
            tags: Sequence[str]) -> tuple[str, str, str, str]:
    """A chunk's four FTS5 columns (title, heading, body, tags) as ``Index`` writes them."""
    heading_text = heading.replace(" > ", " ") if isinstance(heading, str) else " ".join(
        heading)
    return " ".join((title, *aliases)), heading_text, text, " ".join(tags)


def usable_weights(weights: Sequence[float]) -> bool:
    """The copy stores column-weighted frequencies as integers: whole weights only."""
    return all(float(w).is_integer() and w >= 0 for w in weights)


def build(rows: Iterable[tuple[int, str, str, str, str]], tokens: Tokens,
          weights: tuple[float, ...], epoch: str = "",
          cancelled=lambda: False) -> KeywordIndex | None:
    """A copy from ``(chunk id, title, heading, body, tags)`` rows, the four FTS5 columns as
    they were indexed; None if ``cancelled()`` turns true on the way."""
    postings: dict[str, tuple[array, array]] = {}
    chunk_ids = array("q")
    lengths = array("H")
    for position, (chunk_id, *columns) in enumerate(rows):
        if position % 8 == 0:
            # Hand the GIL over: this loop is pure Python for seconds on a large index,
            # and a search waiting on it took 137 ms instead of 10 (bench: 100k chunks).
            time.sleep(0)
            if position % 4096 == 0 and cancelled():
                return None
        counts: dict[str, float] = {}
        length = 0
        for text, weight in zip(columns, weights):
            found = tokens.terms(text or "")
            length += len(found)
            for term in found:
                counts[term] = counts.get(term, 0.0) + weight
        chunk_ids.append(chunk_id)
        lengths.append(min(length, 65535))
        for term, freq in counts.items():
            entry = postings.get(term)
            if entry is None:
                entry = postings[term] = (array("i"), array("B"))
            entry[0].append(position)
            entry[1].append(min(round(freq), _MAX_FREQ))
    terms = sorted(postings)
    offsets = np.zeros(len(terms) + 1, dtype=np.int64)
    for i, term in enumerate(terms):
        offsets[i + 1] = offsets[i] + len(postings[term][0])
    docs = np.empty(int(offsets[-1]), dtype=np.int32)
    freqs = np.empty(int(offsets[-1]), dtype=np.uint8)
    for i, term in enumerate(terms):
        d, f = postings.pop(term)
        docs[offsets[i]:offsets[i + 1]] = np.frombuffer(d, dtype=np.int32)
        freqs[offsets[i]:offsets[i + 1]] = np.frombuffer(f, dtype=np.uint8)
    return KeywordIndex(terms, offsets, docs, freqs, np.frombuffer(chunk_ids, dtype=np.int64),
                        np.frombuffer(lengths, dtype=np.uint16).astype(np.float32), weights,
                        epoch)

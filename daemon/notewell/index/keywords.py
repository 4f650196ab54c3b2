"""The daemon's in-memory copy of the keyword index: BM25 as FTS5 computes it, in numpy.

FTS5 in the index file is the record, and answers whenever this copy cannot (while it
loads or after a change, for filtered queries, for a word that is several tokens). But
FTS5 scores a query by visiting every chunk that holds any of its words, reading each
one's column sizes from disk: 42 ms p50 at 100,000 chunks, 346 ms at 1M
(bench/search_latency.py; 1.9 and 5.7 ms from this copy). This copy keeps,
for every indexed term, the chunks that hold it and how often (weighted by column, as
``bm25()`` weighs them), so a query is a few vector operations over posting arrays.

It also keeps each chunk's note and stored vector, and each note's title vector, read in
the same pass: a search maps k-NN vectors to chunks and titles, chunks to notes and notes
to their vectors here, where four SQLite lookups per query took 0.9 ms at 100,000 chunks.

The copy is built from the chunks' text with FTS5's own tokenizer (``terms.Tokens``), so
it holds the same terms; a test checks its scores against ``bm25()`` itself. It follows
the index by the ``chunks_epoch`` meta value, which every chunk write changes: a copy of
another epoch is not used, and a new one is built behind the searches (``copies``).

May import ``index.terms``, ``index.cjk`` and ``index.topk``.
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from collections.abc import Iterable, Sequence

import numpy as np

from notewell.index.cjk import segment
from notewell.index.terms import Tokens, Vocabulary, prefix_range
from notewell.index.topk import top

K1, B = 1.2, 0.75  # FTS5's bm25() constants
# Column weights for title, heading path, passage and tags (search.Ranking's default).
COLUMN_WEIGHTS = (4.0, 2.0, 1.0, 2.0)
_MAX_FREQ = 255  # weighted term frequency per chunk, stored in a byte (saturated long before)
# A chunk as the copy reads it: chunk id, note row, embedding id, the four FTS5 columns.
Row = tuple[int, int, int, str, str, str, str]


class KeywordIndex:
    """Posting lists of one index's chunks in compressed sparse rows: ``docs`` and
    ``freqs`` hold, term after term (in sorted order), the chunks (as positions in
    ``chunk_ids``) holding it and its column-weighted frequency there. ``notes`` and
    ``vectors`` hold each chunk's note row and embedding id, by the same positions."""

    # Postings scored per step: 64 KB temporaries, under the daemon's 128 KB mmap threshold
    # (``memory.limit_heaps``), where a whole list's were mapped and faulted in afresh for
    # every word of every query: BM25 at 100k 1.57-1.64 -> 1.20-1.34 ms in the daemon's
    # heap settings (466 -> 180 page faults a query).
    postings_block = 16_384

    def __init__(self, terms: list[str], offsets: np.ndarray, docs: np.ndarray,
                 freqs: np.ndarray, chunk_ids: np.ndarray, lengths: np.ndarray,
                 weights: tuple[float, ...], epoch: str, *, notes: np.ndarray,
                 vectors: np.ndarray,
                 delta: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
                 alive: np.ndarray | None = None, base_size: int | None = None,
                 term_index: dict[str, int] | None = None,
                 titles: Titles | None = None) -> None:
        # The base: the posting lists as built, shared (never changed) by every copy
        # derived from this one with ``with_changes``.
        self.terms = terms
        self.term_index = term_index if term_index is not None else {
            t: i for i, t in enumerate(terms)}
        self.offsets = offsets
        self.docs = docs
        self.freqs = freqs
        self.base_size = len(chunk_ids) if base_size is None else base_size
        # Chunks added since (positions from ``base_size`` on) and which chunks are gone.
        self.delta = delta or {}
        self._delta_terms = sorted(self.delta)
        self.alive = alive
        self.chunk_ids = chunk_ids
        self.lengths = lengths
        live = lengths if alive is None else lengths[alive]
        avg_length = float(live.mean()) if len(live) else 1.0
        # BM25's length normalisation per chunk, as FTS5 computes it over the live chunks.
        self.norm = (K1 * (1 - B + B * lengths / avg_length)).astype(np.float32)
        self.weights = weights
        self.epoch = epoch
        self._live = len(chunk_ids) if alive is None else int(alive.sum())
        self.notes, self.vectors = _narrow(notes), _narrow(vectors)
        self.titles = titles if titles is not None else Titles.of([])
        # The live chunks sorted by each id column, for lookups by chunk, note or vector.
        # Rows come nearly sorted by all three, which a stable sort takes in about one pass.
        self._by_chunk = _Sorted(chunk_ids, alive)
        self._by_note = _Sorted(self.notes, alive)
        self._by_vector = _Sorted(self.vectors, alive)
        self._recent: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._recent_lock = threading.Lock()
        self._buffers = threading.local()  # per worker thread: see ``_scores``
        self._vocabulary: Vocabulary | None = None

    def vocabulary(self) -> Vocabulary:
        """The copy's terms and document frequencies as a ``terms.Vocabulary``, sharing its
        term list rather than holding a second one; chunks added since the build count
        too (removed ones are not subtracted: a frequency a few edits high weighs the
        same)."""
        if self._vocabulary is None:
            self._vocabulary = Vocabulary(
                self.terms, np.diff(self.offsets), self.chunks, self.epoch, self.term_index,
                extra={t: len(docs) for t, (docs, _) in self.delta.items()})
        return self._vocabulary

    @property
    def chunks(self) -> int:
        """Chunks in the copy now (added ones in, removed ones out)."""
        return self._live

    def nbytes(self) -> int:
        arrays = [self.offsets, self.docs, self.freqs, self.chunk_ids, self.lengths,
                  self.norm, self.notes, self.vectors]
        arrays += [a for s in (self._by_chunk, self._by_note, self._by_vector)
                   for a in (s.keys, s.order)]
        arrays += [a for pair in self.delta.values() for a in pair]
        return sum(a.nbytes for a in arrays) + self.titles.nbytes()

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
        size = len(self.chunk_ids)
        if not prefix:
            i = self.term_index.get(term)
            parts = [] if i is None else [(self.docs[self.offsets[i]:self.offsets[i + 1]],
                                           self.freqs[self.offsets[i]:self.offsets[i + 1]])]
            if term in self.delta:
                parts.append(self.delta[term])
            if not parts:
                return _EMPTY_DOCS, _EMPTY_FREQS
            docs = np.concatenate([d for d, _ in parts]) if len(parts) > 1 else parts[0][0]
            freqs = np.concatenate([f for _, f in parts]).astype(np.float32)
        else:
            first, last = prefix_range(self.terms, term)
            lo, hi = self.offsets[first], self.offsets[last]
            extra = self._delta_terms[slice(*prefix_range(self._delta_terms, term))]
            if last - first == 1 and not extra:
                docs, freqs = self.docs[lo:hi], self.freqs[lo:hi].astype(np.float32)
            else:
                all_docs = np.concatenate([self.docs[lo:hi]] + [self.delta[t][0] for t in extra])
                weights = np.concatenate([self.freqs[lo:hi].astype(np.float32)]
                                         + [self.delta[t][1] for t in extra])
                docs, freqs = _summed(all_docs, weights, size)
        if self.alive is not None:
            keep = self.alive[docs]
            docs, freqs = docs[keep], freqs[keep]
        return docs, freqs

    def with_changes(self, removed: Sequence[int], added: Sequence[Row], tokens: Tokens,
                     epoch: str, gone_notes: Sequence[int] = (),
                     new_titles: Sequence[tuple[int, int]] = ()) -> KeywordIndex | None:
        """A copy with the chunks ``removed`` gone and ``added`` (rows as for ``build``)
        in, and the title vectors of ``gone_notes`` gone and ``new_titles`` (note row,
        vector id) in, sharing this one's posting lists: what a sync of a few notes costs
        instead of a rebuild. None once the chunks added and removed since the base
        outgrow a tenth of it (a folder deleted note by note included): rebuild then."""
        alive = (np.ones(len(self.chunk_ids), dtype=bool) if self.alive is None
                 else self.alive.copy())
        gone = self.positions(removed)
        alive[gone[gone >= 0]] = False
        changed = len(self.chunk_ids) - self.base_size + len(added) + int(len(alive)
                                                                          - alive.sum())
        if changed > max(500, self.base_size // 10):
            return None
        fresh = build(added, tokens, self.weights, epoch, start=len(self.chunk_ids))
        assert fresh is not None
        delta = {t: pair for t, pair in self.delta.items()}
        for term, i in fresh.term_index.items():
            lo, hi = fresh.offsets[i], fresh.offsets[i + 1]
            docs, freqs = fresh.docs[lo:hi], fresh.freqs[lo:hi].astype(np.float32)
            if term in delta:
                docs = np.concatenate((delta[term][0], docs))
                freqs = np.concatenate((delta[term][1], freqs))
            delta[term] = (docs, freqs)
        return KeywordIndex(
            self.terms, self.offsets, self.docs, self.freqs,
            np.concatenate((self.chunk_ids, fresh.chunk_ids)),
            np.concatenate((self.lengths, fresh.lengths)), self.weights, epoch,
            notes=np.concatenate((self.notes, fresh.notes)),
            vectors=np.concatenate((self.vectors, fresh.vectors)), delta=delta,
            alive=np.concatenate((alive, np.ones(len(added), dtype=bool))),
            base_size=self.base_size, term_index=self.term_index,
            titles=self.titles.with_changes(gone_notes, new_titles))

    def holds(self, positions: np.ndarray, term: str, prefix: bool = False) -> np.ndarray:
        """For each chunk at ``positions`` (``positions(chunk_ids)``, -1 for one not here),
        whether it holds ``term`` (or a term starting with it)."""
        docs, _ = self.postings(term, prefix)
        if not len(docs):
            return np.zeros(len(positions), dtype=bool)
        at = np.minimum(np.searchsorted(docs, positions), len(docs) - 1)
        return (positions >= 0) & (docs[at] == positions)

    def positions(self, chunk_ids: Sequence[int]) -> np.ndarray:
        """The positions of ``chunk_ids`` (-1 where a chunk is not in the copy)."""
        return self._by_chunk.first(chunk_ids)

    def owners(self, chunk_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Each chunk's note row and embedding id (-1 for a chunk not in the copy)."""
        at = self.positions(chunk_ids)
        here = at >= 0
        return np.where(here, self.notes[at], -1), np.where(here, self.vectors[at], -1)

    def chunks_of_vectors(self, vector_ids: Iterable[int]) -> np.ndarray:
        """Positions of the chunks stored with any of ``vector_ids`` (a passage repeated
        word for word shares one vector), grouped by vector id, ascending."""
        return self._by_vector.all(vector_ids)

    def note_count(self) -> int:
        """How many notes the copy's chunks belong to."""
        keys = self._by_note.keys
        return int(np.count_nonzero(keys[1:] != keys[:-1])) + 1 if len(keys) else 0

    def chunks_of_notes(self, note_ids: Iterable[int]) -> np.ndarray:
        """Positions of the chunks of any of ``note_ids``, grouped by note, ascending."""
        return self._by_note.all(note_ids)

    # -- scoring --------------------------------------------------------------------------

    def _scores(self) -> np.ndarray:
        """This thread's score per chunk, zeroed: kept rather than allocated per query,
        since an array this size is mapped afresh (and faulted in) on every allocation
        under the daemon's mmap threshold."""
        scores = getattr(self._buffers, "scores", None)
        if scores is None:
            scores = self._buffers.scores = np.zeros(len(self.chunk_ids), dtype=np.float32)
        else:
            scores.fill(0.0)
        return scores

    def bm25(self, phrases: Sequence[tuple[str, bool]], k: int) -> list[tuple[int, float]]:
        """(chunk id, BM25 score, higher is better) of the ``k`` best chunks holding any of
        ``phrases`` ((term, is_prefix) pairs), scored as FTS5's ``bm25()`` with this copy's
        column weights."""
        n = self.chunks
        if not n or not phrases:
            return []
        scores = self._scores()
        norm, block = self.norm, self.postings_block
        for term, prefix in phrases:
            docs, freqs = self.postings(term, prefix)
            if not len(docs):
                continue
            hits = len(docs)
            idf = math.log((n - hits + 0.5) / (hits + 0.5))
            idf = idf if idf > 0 else 1e-6  # as FTS5: a word in most chunks weighs ~nothing
            # idf * f * (K1 + 1) / (f + norm), in place, a block of postings at a time: see
            # ``postings_block``.
            for start in range(0, hits, block):
                d, f = docs[start:start + block], freqs[start:start + block]
                w = norm[d]
                w += f
                np.divide(f, w, out=w)
                w *= idf * (K1 + 1)
                scores[d] += w
        # Every chunk holding a word scored above zero (the IDF floor sees to that). The
        # best straight from all the scores: 0.05 ms at 100k, where the chunks above zero
        # and then ``argpartition`` over them took 0.09 + 0.19.
        candidates = top(scores, k)
        candidates = candidates[scores[candidates] > 0]
        values = scores[candidates]
        ids = self.chunk_ids[candidates]
        order = np.lexsort((ids, -values))
        return [(int(ids[i]), float(values[i])) for i in order]


class Titles:
    """The notes' title vectors (note row, vector id), sorted both ways: which notes a
    k-NN's vectors name, and each candidate note's title vector, without SQLite."""

    def __init__(self, notes: np.ndarray, vectors: np.ndarray,
                 alive: np.ndarray | None = None) -> None:
        self.notes, self.vectors, self.alive = _narrow(notes), _narrow(vectors), alive
        self._by_note = _Sorted(self.notes, alive)
        self._by_vector = _Sorted(self.vectors, alive)

    @classmethod
    def of(cls, rows: Iterable[tuple[int, int]]) -> Titles:
        pairs = np.array(list(rows), dtype=np.int64).reshape(-1, 2)
        return cls(pairs[:, 0], pairs[:, 1])

    def of_notes(self, notes: Iterable[int]) -> list[tuple[int, int]]:
        """(note row, vector id) of the title vectors of ``notes``."""
        return self._pairs(self._by_note.all(notes))

    def of_vectors(self, vectors: Iterable[int]) -> list[tuple[int, int]]:
        """(note row, vector id) of every note whose title vector is one of ``vectors``."""
        return self._pairs(self._by_vector.all(vectors))

    def _pairs(self, at: np.ndarray) -> list[tuple[int, int]]:
        return list(zip(self.notes[at].tolist(), self.vectors[at].tolist()))

    def with_changes(self, gone_notes: Sequence[int], new: Sequence[tuple[int, int]]
                     ) -> Titles:
        if not len(gone_notes) and not len(new):
            return self
        alive = (np.ones(len(self.notes), dtype=bool) if self.alive is None
                 else self.alive.copy())
        gone = self._by_note.first(gone_notes)
        alive[gone[gone >= 0]] = False
        added = np.array(list(new), dtype=np.int64).reshape(-1, 2)
        return Titles(np.concatenate((self.notes, added[:, 0])),
                      np.concatenate((self.vectors, added[:, 1])),
                      np.concatenate((alive, np.ones(len(added), dtype=bool))))

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.notes, self.vectors, self._by_note.keys,
                                      self._by_note.order, self._by_vector.keys,
                                      self._by_vector.order))


def _summed(docs: np.ndarray, weights: np.ndarray, size: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """Each chunk of ``docs`` once (ascending) with its ``weights`` summed: what a prefix
    of several terms holds. Few postings are sorted; many are counted over every chunk,
    which costs the same however few there are (0.43 ms at 100k chunks for 500 postings
    in the daemon's heap settings, where sorting took 0.014; sorting catches up near a
    third of the chunks: 60,000 postings 1.33 ms against 0.89)."""
    if not len(docs):
        return _EMPTY_DOCS, _EMPTY_FREQS
    if len(docs) * 3 < size:
        order = np.argsort(docs, kind="stable")
        docs, weights = docs[order], weights[order]
        starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
        return docs[starts].astype(np.int32), np.add.reduceat(weights, starts).astype(
            np.float32)
    summed = np.bincount(docs, weights=weights, minlength=size)
    found = np.flatnonzero(summed > 0).astype(np.int32)  # see ``bm25``
    return found, summed[found].astype(np.float32)


def _narrow(ids: np.ndarray) -> np.ndarray:
    """Row ids as int32 when they all fit (any real index: 2 MB less at 100k chunks),
    leaving room above for ``_Sorted._wanted``'s clip."""
    fits = not len(ids) or (int(ids.min()) >= -1 and int(ids.max()) < _INT32_MAX)
    return ids.astype(np.int32) if fits else ids


_INT32_MAX = 2**31 - 1


class _Sorted:
    """The live positions of one id column in the order of its ids, for binary search."""

    def __init__(self, column: np.ndarray, alive: np.ndarray | None) -> None:
        order = np.argsort(column, kind="stable")
        if alive is not None:
            order = order[alive[order]]
        self.keys, self.order = column[order], order.astype(np.int32)

    def _wanted(self, ids: Iterable[int]) -> np.ndarray:
        """``ids`` in the keys' type, so a search does not widen (copy) the keys; an id
        outside int32's range becomes one no chunk has."""
        wanted = np.asarray(ids if isinstance(ids, np.ndarray) else list(ids), dtype=np.int64)
        if self.keys.dtype == np.int32:
            wanted = np.clip(wanted, -2, _INT32_MAX).astype(np.int32)
        return wanted

    def first(self, ids: Iterable[int]) -> np.ndarray:
        """A position holding each of ``ids`` (-1 for none)."""
        wanted = self._wanted(ids)
        if not len(self.keys):
            return np.full(len(wanted), -1)
        at = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        return np.where(self.keys[at] == wanted, self.order[at], -1)

    def all(self, ids: Iterable[int]) -> np.ndarray:
        """Every position holding any of ``ids``, grouped by id, ascending."""
        wanted = np.unique(self._wanted(ids))
        low = np.searchsorted(self.keys, wanted, "left")
        counts = np.searchsorted(self.keys, wanted, "right") - low
        total = int(counts.sum())
        if not total:
            return np.zeros(0, dtype=np.int32)
        # Runs ``low[i] .. low[i] + counts[i]`` laid end to end, in one vector expression.
        ends = np.cumsum(counts)
        return self.order[np.repeat(low - ends + counts, counts) + np.arange(total)]


_EMPTY_DOCS = np.zeros(0, dtype=np.int32)
_EMPTY_FREQS = np.zeros(0, dtype=np.float32)


def columns(title: str, aliases: Sequence[str], heading: str | Sequence[str], text: str,
            tags: Sequence[str]) -> tuple[str, str, str, str]:
    """A chunk's four FTS5 columns (title, heading, body, tags) as ``Index`` writes them,
    Chinese, Japanese and Korean runs as bigrams (``cjk``; other text unchanged)."""
    heading_text = heading.replace(" > ", " ") if isinstance(heading, str) else " ".join(
        heading)
    return (segment(" ".join((title, *aliases))), segment(heading_text), segment(text),
            segment(" ".join(tags)))


def build(rows: Iterable[Row], tokens: Tokens, weights: tuple[float, ...], epoch: str = "",
          cancelled=lambda: False, start: int = 0,
          titles: Iterable[tuple[int, int]] = ()) -> KeywordIndex | None:
    """A copy from ``(chunk id, note row, embedding id, title, heading, body, tags)`` rows,
    the four FTS5 columns as they were indexed (positions counted from ``start``), and the
    notes' ``titles`` (note row, vector id); None if ``cancelled()`` turns true on the
    way."""
    postings: dict[str, tuple[array, array]] = {}
    chunk_ids, notes, vectors = array("q"), array("q"), array("q")
    lengths = array("H")
    for position, (chunk_id, note, vector, *columns) in enumerate(rows):
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
        notes.append(note)
        vectors.append(vector)
        lengths.append(min(length, 65535))
        for term, freq in counts.items():
            entry = postings.get(term)
            if entry is None:
                entry = postings[term] = (array("i"), array("B"))
            entry[0].append(start + position)
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
                        epoch, notes=np.frombuffer(notes, dtype=np.int64),
                        vectors=np.frombuffer(vectors, dtype=np.int64),
                        titles=Titles.of(titles))

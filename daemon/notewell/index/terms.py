"""Words as the keyword index sees them: FTS5's own tokenizer, and how rare each word is.

Ranking asks two things about words on every keystroke: how rare each query word is (its
weight, and whether it is common enough to leave out of the BM25 query, where scoring every
chunk that holds "the" cost tens of milliseconds at 100,000 chunks), and which query words
each candidate passage holds (its coverage). FTS5 answers both only by walking whole
posting lists. The daemon's keyword copy (``keywords.py``) answers both from memory; until
it is built, and in one-shot commands, the vocabulary comes from one scan of ``fts5vocab``
(0.3 s for 100,000 chunks) and the few candidate passages are run through FTS5's
tokenizer (5 us each). Either way the answers match what FTS5 itself indexed: the same
stems, the same diacritics folding, the same CJK pairs. Imports ``index.cjk``.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable

import apsw
import numpy as np

from notewell.index.cjk import segment_query

# The tokenizer of ``chunks_fts`` as its CREATE statement spells it, and as apsw takes it.
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
TOKENIZER = (FTS_TOKENIZER.split()[0], FTS_TOKENIZER.split()[1:])
_LAST = "\U0010ffff"


def prefix_range(terms: list[str], prefix: str) -> tuple[int, int]:
    """The slice of the sorted ``terms`` that start with ``prefix``."""
    lo = bisect.bisect_left(terms, prefix)
    return lo, bisect.bisect_left(terms, prefix + _LAST, lo)


class Vocabulary:
    """The indexed terms of one index (sorted) with their document frequencies (chunks
    holding them), and the number of chunks."""

    def __init__(self, terms: list[str], dfs: np.ndarray, chunks: int, stamp: object = None,
                 index: dict[str, int] | None = None,
                 extra: dict[str, int] | None = None) -> None:
        self.terms = terms
        self.index = index if index is not None else {t: i for i, t in enumerate(terms)}
        self.dfs = dfs
        self.cumulative = np.concatenate(([0], np.cumsum(dfs, dtype=np.int64)))
        self.chunks = chunks
        self.stamp = stamp
        # Chunks holding each term beyond ``dfs`` (a keyword copy's chunks added since it
        # was built), kept apart so ``terms`` can stay shared with the copy.
        self.extra = extra or {}
        self._extra_terms = sorted(self.extra)
        # Typo corrections found against these terms (``search.terms.correct``): a new
        # vocabulary, after any change, starts without them.
        self.corrections: dict[tuple, object] = {}

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, int]], chunks: int,
                   stamp: object = None) -> Vocabulary:
        ordered = sorted(pairs)
        return cls([t for t, _ in ordered], np.array([n for _, n in ordered], dtype=np.int64),
                   chunks, stamp)

    def has(self, term: str) -> bool:
        """Whether some chunk holds ``term`` (without counting them)."""
        return term in self.index or term in self.extra

    def has_prefix(self, prefix: str) -> bool:
        """Whether some indexed term starts with ``prefix``."""
        lo = bisect.bisect_left(self.terms, prefix)
        if lo < len(self.terms) and self.terms[lo].startswith(prefix):
            return True
        return bool(self._extra_range(prefix))

    def df(self, term: str) -> int:
        i = self.index.get(term)
        return (0 if i is None else int(self.dfs[i])) + self.extra.get(term, 0)

    def _extra_range(self, prefix: str) -> list[str]:
        lo, hi = prefix_range(self._extra_terms, prefix)
        return self._extra_terms[lo:hi]

    def prefix_df(self, prefix: str) -> int:
        """Chunks holding some term that starts with ``prefix``: the sum over those terms,
        an upper bound (a chunk may hold several), capped at all chunks."""
        lo, hi = prefix_range(self.terms, prefix)
        added = sum(self.extra[t] for t in self._extra_range(prefix))
        return min(int(self.cumulative[hi] - self.cumulative[lo]) + added, self.chunks)

    def starting_with(self, prefix: str) -> list[str]:
        lo, hi = prefix_range(self.terms, prefix)
        found = self.terms[lo:hi]
        more = [t for t in self._extra_range(prefix) if t not in self.index]
        return found + more if more else found

    def near(self, term: str, k: int) -> list[tuple[str, int]]:
        """(term, edit distance) of the indexed terms within ``k`` edits of ``term``."""
        found = near_terms(self.terms).within(term, k) if self.terms else []
        known = {t for t, _ in found}
        for extra in self._extra_terms:  # terms only in chunks added since the build
            if extra not in known and extra not in self.index and extra != term:
                d = edit_distance(term, extra, k)
                if d <= k:
                    found.append((extra, d))
        return found

    def idf(self, df: int) -> float:
        """BM25's IDF in the form that never goes negative for very common words."""
        n = max(self.chunks, df)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def read_vocabulary(conn: apsw.Connection, stamp: object = None) -> Vocabulary:
    """Every term of ``chunks_fts`` with its document frequency, in one read transaction."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab "
                 "USING fts5vocab(main, chunks_fts, 'row')")
    with conn:
        rows = conn.execute("SELECT term, doc FROM temp.chunks_vocab").fetchall()
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    return Vocabulary.from_pairs(rows, chunks, stamp)


_WORDS_KEPT = 20_000  # ``Tokens.word_terms``: a few MB at most


class Tokens:
    """FTS5's tokenizer on one connection: query words and passages become index terms."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._tokenize = conn.fts5_tokenizer(*TOKENIZER)
        # ``word_terms``'s answers: this object's own, as it is its one thread's.
        self._words: dict[str, tuple[tuple[int, int, str], ...]] = {}

    def terms(self, text: str, query: bool = False) -> list[str]:
        """``text``'s terms; a query's CJK runs are cut into pairs first (``cjk``), as a
        passage's were before they were indexed."""
        if query:
            text = segment_query(text)
        flags = apsw.FTS5_TOKENIZE_QUERY if query else apsw.FTS5_TOKENIZE_DOCUMENT
        # Without offsets or colocated tokens apsw gives plain strings.
        return self._tokenize(text.encode("utf-8", "replace"), flags, None,
                              include_offsets=False, include_colocated=False)

    def located(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, term) of each of a passage's terms, in UTF-8 byte offsets of
        ``text`` (no CJK pairs: a run of those characters is one term here)."""
        return self._tokenize(text.encode("utf-8", "replace"), apsw.FTS5_TOKENIZE_DOCUMENT,
                              None, include_offsets=True, include_colocated=False)

    def word_terms(self, word: str) -> tuple[tuple[int, int, str], ...]:
        """``located`` for one word, kept: the launcher's list marks the same few words
        keystroke after keystroke."""
        found = self._words.get(word)
        if found is None:
            if len(self._words) >= _WORDS_KEPT:
                self._words.clear()
            found = self._words[word] = tuple(self.located(word))
        return found

    def prefix(self, fragment: str) -> list[str]:
        """A word being typed, as FTS5 reads it for a prefix query (its last term is the
        prefix; a word like ``snake_ca`` is two terms)."""
        flags = apsw.FTS5_TOKENIZE_QUERY | apsw.FTS5_TOKENIZE_PREFIX
        fragment = segment_query(fragment)
        return self._tokenize(fragment.encode("utf-8", "replace"), flags, None,
                              include_offsets=False, include_colocated=False)


# -- near terms: typo tolerance -------------------------------------------------------------

_LETTERS = 27  # a-z, and one bucket for every other character


def edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance (insert, delete, substitute, swap two neighbours)
    between ``a`` and ``b``, or ``limit + 1`` as soon as it must exceed ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = ca != cb
            best = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                best = min(best, prev2[j - 2] + 1)
            row[j] = best
        if min(row) > limit:
            return limit + 1
        prev2, prev = prev, row
    return prev[-1]


class NearTerms:
    """The index terms within a small edit distance of a word, found without comparing it
    to every term: terms are kept by length, and a term can only be within ``k`` edits if
    the sets of letters differ in at most ``2k`` letters (one popcount over all terms of a
    near length) and the letter counts in at most ``2k`` (on the few left); only those
    few are compared letter by letter."""

    def __init__(self, terms: list[str]) -> None:
        lengths = np.fromiter(map(len, terms), dtype=np.int64, count=len(terms))
        order = np.argsort(lengths, kind="stable")
        self.terms = terms
        self.order = order
        self.lengths = lengths[order]
        codes = np.frombuffer("".join(terms).encode("utf-32-le"), dtype=np.uint32)
        letters = np.minimum(codes - np.uint32(97), np.uint32(_LETTERS - 1)).astype(np.int64)
        owner = np.repeat(np.arange(len(terms), dtype=np.int64), lengths)
        counts = np.bincount(owner * _LETTERS + letters, minlength=len(terms) * _LETTERS)
        counts = np.minimum(counts.reshape(len(terms), _LETTERS), 255).astype(np.uint8)
        self.counts = counts[order]
        bits = (self.counts > 0).astype(np.uint32) << np.arange(_LETTERS, dtype=np.uint32)
        self.masks = np.bitwise_or.reduce(bits, axis=1)

    @staticmethod
    def _signature(word: str) -> tuple[np.ndarray, int]:
        counts = np.zeros(_LETTERS, dtype=np.int16)
        for ch in word:
            counts[min(ord(ch) - 97, _LETTERS - 1) if ord(ch) >= 97 else _LETTERS - 1] += 1
        mask = 0
        for i in np.flatnonzero(counts).tolist():
            mask |= 1 << i
        return counts, mask

    def within(self, word: str, k: int) -> list[tuple[str, int]]:
        """(term, distance) of every term within ``k`` edits of ``word`` (itself excluded)."""
        lo = int(np.searchsorted(self.lengths, len(word) - k, "left"))
        hi = int(np.searchsorted(self.lengths, len(word) + k, "right"))
        if lo >= hi:
            return []
        counts, mask = self._signature(word)
        close = np.bitwise_count(self.masks[lo:hi] ^ np.uint32(mask)) <= 2 * k
        rows = np.flatnonzero(close) + lo
        if len(rows):
            diff = np.abs(self.counts[rows].astype(np.int16) - counts).sum(axis=1)
            rows = rows[diff <= 2 * k]
        out = []
        for row in rows.tolist():
            term = self.terms[int(self.order[row])]
            if term != word:
                d = edit_distance(word, term, k)
                if d <= k:
                    out.append((term, d))
        return out


_NEAR_LOCK = threading.Lock()
_NEAR: dict[int, tuple[list[str], NearTerms]] = {}  # by the term list's identity


def near_terms(terms: list[str]) -> NearTerms:
    """The ``NearTerms`` of a sorted term list, built once per list (a keyword copy and the
    copies a sync derives from it share one list)."""
    with _NEAR_LOCK:
        found = _NEAR.get(id(terms))
        if found is not None and found[0] is terms:
            return found[1]
    near = NearTerms(terms)
    with _NEAR_LOCK:
        if len(_NEAR) >= 2:
            _NEAR.pop(next(iter(_NEAR)))
        _NEAR[id(terms)] = (terms, near)
    return near

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

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, int]], chunks: int,
                   stamp: object = None) -> Vocabulary:
        ordered = sorted(pairs)
        return cls([t for t, _ in ordered], np.array([n for _, n in ordered], dtype=np.int64),
                   chunks, stamp)

    @property
    def docs(self) -> dict[str, int]:
        found = {t: int(self.dfs[i]) for t, i in self.index.items()}
        for t, n in self.extra.items():
            found[t] = found.get(t, 0) + n
        return found

    def df(self, term: str) -> int:
        i = self.index.get(term)
        return (0 if i is None else int(self.dfs[i])) + self.extra.get(term, 0)

    def _extra_range(self, prefix: str) -> list[str]:
        lo, hi = prefix_range(self._extra_terms, prefix)
        return self._extra_terms[lo:hi]

    def _range(self, prefix: str) -> tuple[int, int]:
        return prefix_range(self.terms, prefix)

    def prefix_df(self, prefix: str) -> int:
        """Chunks holding some term that starts with ``prefix``: the sum over those terms,
        an upper bound (a chunk may hold several), capped at all chunks."""
        lo, hi = self._range(prefix)
        added = sum(self.extra[t] for t in self._extra_range(prefix))
        return min(int(self.cumulative[hi] - self.cumulative[lo]) + added, self.chunks)

    def starting_with(self, prefix: str) -> list[str]:
        lo, hi = self._range(prefix)
        found = self.terms[lo:hi]
        more = [t for t in self._extra_range(prefix) if t not in self.index]
        return found + more if more else found

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


class Tokens:
    """FTS5's tokenizer on one connection: query words and passages become index terms."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._tokenize = conn.fts5_tokenizer(*TOKENIZER)

    def terms(self, text: str, query: bool = False) -> list[str]:
        """``text``'s terms; a query's CJK runs are cut into pairs first (``cjk``), as a
        passage's were before they were indexed."""
        if query:
            text = segment_query(text)
        flags = apsw.FTS5_TOKENIZE_QUERY if query else apsw.FTS5_TOKENIZE_DOCUMENT
        # Without offsets or colocated tokens apsw gives plain strings.
        return self._tokenize(text.encode("utf-8", "replace"), flags, None,
                              include_offsets=False, include_colocated=False)

    def prefix(self, fragment: str) -> list[str]:
        """A word being typed, as FTS5 reads it for a prefix query (its last term is the
        prefix; a word like ``snake_ca`` is two terms)."""
        flags = apsw.FTS5_TOKENIZE_QUERY | apsw.FTS5_TOKENIZE_PREFIX
        fragment = segment_query(fragment)
        return self._tokenize(fragment.encode("utf-8", "replace"), flags, None,
                              include_offsets=False, include_colocated=False)

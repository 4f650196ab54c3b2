"""The one read interface search uses (``Reads``): every question a query asks of the
index (and the few ``notewell eval`` adds), and its SQLite side (``SqlReads``), which
holds the SQL of each (``sql`` only the stamps and the rows the copies are read from).

A request reads through one view, taken at its start (``copy_reads.open_view``): the
stamps are read once (``sql.freshness``), and which side answers each read is fixed then
for the whole request: ``copy_reads.CopyReads`` where an in-memory copy is current (k-NN,
vectors by id, BM25, which chunks hold a word, the ids that map vectors to chunks, titles
and notes), ``SqlReads`` for the rest and for everything when none is (one-shot
commands, copies still loading). What only the file holds (passages, filters, notes by id)
always comes from SQLite. The answers are the same either way, up to the vector copy's
quantization beyond ``CopySettings.exact_limit`` vectors; the caller never knows which
side answered, and a view never mixes a copy's answer with SQLite's for one retriever.

Filtered BM25 stays with SQLite, which scans only the allowed notes' chunks; filtered
k-NN too, up to ``CopySettings.within_from`` allowed chunks (beyond, sqlite-vec's scan
reads one vector per chunk: seconds at 100,000, so the copies score them, see
``CopyReads._within_copies``). The keyword copy with a mask of allowed notes would
remove no path (FTS5 still answers words of several terms, and one-shot commands) and
would change results at scale (the copy's larger row budget keeps common words FTS5's
leaves out).

May import ``index.sql``, ``index.keywords``, ``index.terms``, ``index.lru``; never
``index.database`` (the ``Index`` hands in its connection).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import apsw
import numpy as np

from notewell.index import sql
from notewell.index.keywords import COLUMN_WEIGHTS, KeywordIndex
from notewell.index.lru import SharedLRU
from notewell.index.sql import Freshness
from notewell.index.terms import Tokens, Vocabulary, read_vocabulary

_CHUNK_TERMS_CACHED = 2_000  # chunks' index terms, shared by the worker threads: ~5 MB


class Term(Protocol):
    """A query word as BM25 and coverage need it (``search.terms.QueryTerm``)."""

    @property
    def phrase(self) -> str: ...  # its FTS5 phrase, e.g. ``"postg"*``

    @property
    def tokens(self) -> tuple[str, ...]: ...  # its index terms, the last a prefix if typed

    @property
    def prefix(self) -> bool: ...

    @property
    def df(self) -> int: ...  # chunks holding it


@dataclass(frozen=True)
class RowBudget:
    """Postings one BM25 query may score, by which side answers: beyond it the commonest
    words are left out (they cost the most and weigh the least)."""

    copy: int
    fts5: int


Pairs = list[tuple[int, float]]


class Passage(NamedTuple):
    """Everything a hit shows, for one chunk."""

    chunk_id: int
    note: int  # the note's row
    heading: str
    url: str
    text: str
    vector: int
    note_id: str
    title: str
    source: str
    kind: str
    path: str | None
    tags: str  # JSON
    modified: float | None
    archived: int
    content_hash: str


class NoteRecord(NamedTuple):
    """A note's row as the index holds it (its text lives in its source)."""

    row: int
    note_id: str
    source: str
    kind: str
    title: str
    path: str | None
    url: str
    tags: str  # JSON
    created: float | None
    modified: float | None
    archived: int


class ReadCaches:
    """What the views of one index share across requests: the chunks' index terms
    (``SqlReads.holds`` without the keyword copy), dropped when a thread sees the index
    change, and each thread's FTS5 tokenizer."""

    def __init__(self) -> None:
        self.chunk_terms: SharedLRU[int, frozenset[str]] = SharedLRU(_CHUNK_TERMS_CACHED)
        self.local = threading.local()


class SqlReads:
    """Reads of one index from SQLite, on one connection, as of the stamps ``fresh``
    read at the view's start (``vocab``: the vocabulary to weigh words by; None: FTS5's,
    read on first use)."""

    def __init__(self, db: apsw.Connection, fresh: Freshness, caches: ReadCaches, dim: int,
                 vocab: Vocabulary | None = None) -> None:
        self._db = db
        self.fresh = fresh
        self._caches = caches
        self.dim = dim
        self._vocab = vocab

    # -- stamps -------------------------------------------------------------------------------

    def stamp(self) -> tuple[int, int, int]:
        """Moves whenever this view's connection sees a commit, by any connection: what
        is cached from the index (ids may be reused) is dropped when it moves. Per
        connection: each thread reads through its own. Read once, at the view's start."""
        return self.fresh.version

    def content_stamp(self) -> tuple[str, int, str]:
        """Moves whenever chunks or vectors change, through any connection: results cached
        under it stay right until it moves. Read once, at the view's start."""
        return (*self.fresh.vector_state, self.fresh.chunks_epoch)

    # -- vectors ------------------------------------------------------------------------------

    def knn(self, vector: np.ndarray, k: int) -> Pairs:
        """(vector id, cosine distance) of the ``k`` nearest stored vectors: sqlite-vec's
        exact scan (the copy: exact up to ``exact_limit`` vectors, quantized with
        recall@10 >= 0.98 beyond)."""
        rows = self._db.execute(
            "SELECT rowid, distance FROM vectors WHERE embedding MATCH ? AND k = ? "
            "ORDER BY distance", (np.asarray(vector, dtype=np.float32).tobytes(), k))
        return [(r[0], r[1]) for r in rows]

    def nearest_chunks(self, vector: np.ndarray, k: int, notes: Iterable[int] | None = None
                       ) -> Pairs:
        """(chunk id, cosine distance) nearest first, equal distances by chunk id: the
        chunks of the ``k`` nearest vectors (title vectors among them are left out), or
        exactly the ``k`` nearest chunks of ``notes`` (note rows) when given."""
        return self.nearest(vector, k, notes, titles=False)[0]

    def nearest(self, vector: np.ndarray, k: int, notes: Iterable[int] | None = None,
                titles: bool = True) -> tuple[Pairs, Pairs]:
        """The passages and the notes' title vectors nearest to ``vector``: (chunk id,
        cosine distance) as ``nearest_chunks``, and (note row, cosine distance) of the
        title vectors among the ``k`` nearest vectors, or of the ``k`` nearest titles of
        ``notes`` when given. Both nearest first, equal distances by id."""
        if notes is not None:
            notes = notes if isinstance(notes, (list, set)) else list(notes)
            found = self._knn_within(vector, k, notes)
            return found, self._titles_within(vector, k, notes) if titles else []
        nearest = self.knn(vector, k)
        if not nearest:
            return [], []
        dist = dict(nearest)
        chunks = sorted(((c, dist[e]) for c, e in self.chunks_of_vectors(list(dist))),
                        key=lambda x: (x[1], x[0]))
        if not titles:
            return chunks, []
        named = self._titles_of_vectors(list(dist))
        return chunks, sorted(((n, dist[e]) for n, e in named), key=lambda x: (x[1], x[0]))

    def _knn_within(self, vector: np.ndarray, k: int, notes: list[int] | set[int]) -> Pairs:
        """The ``k`` nearest chunks of ``notes``: (chunk id, cosine distance), exact."""
        return self._nearest_of("chunks", "id", vector, k, notes)

    def _titles_within(self, vector: np.ndarray, k: int, notes: list[int] | set[int]
                       ) -> Pairs:
        """The ``k`` nearest title vectors of ``notes``: (note row, cosine distance)."""
        return self._nearest_of("titles", "note", vector, k, notes)

    def _nearest_of(self, table: str, key: str, vector: np.ndarray, k: int,
                    notes: Iterable[int]) -> Pairs:
        """(``key``, cosine distance) of the ``k`` rows of ``table`` (chunks or titles)
        of ``notes`` nearest to ``vector``: sqlite-vec's exact distance, by note list."""
        rows = self._db.execute(
            f"SELECT t.{key}, vec_distance_cosine(v.embedding, ?) AS d FROM {table} t "
            "JOIN vectors v ON v.rowid = t.embedding "
            "WHERE t.note IN (SELECT value FROM json_each(?)) ORDER BY d LIMIT ?",
            (np.asarray(vector, dtype=np.float32).tobytes(), json.dumps(sorted(notes)), k))
        return [(r[0], r[1]) for r in rows]

    def _titles_of_vectors(self, vector_ids: list[int]) -> list[tuple[int, int]]:
        """(note row, vector id) of every note whose title vector is one of ``vector_ids``."""
        return self._rows_in("SELECT note, embedding FROM titles", "embedding", vector_ids)

    def exact_nearest(self, vector: np.ndarray, found: Pairs, k: int) -> Pairs:
        """The ``k`` nearest of ``found`` (chunk id, cosine distance; nearest first) as
        ``nearest_chunks`` gives a filter's (exact here already; a quantized copy
        re-scores its best with their float vectors)."""
        return found[:k]

    def exact_titles(self, vector: np.ndarray, titles: Pairs) -> Pairs:
        """``titles`` (note row, cosine distance) as ``nearest`` gives a filter's, nearest
        first (exact here already)."""
        return titles

    def note_share(self, notes: set[int]) -> float | None:
        """The share of the index's notes that ``notes`` (note rows) are, from the keyword
        copy; None without one."""
        return None

    def vector_matrix(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Which vector ids are stored (a mask over ``ids``) and their vectors as the rows
        of one matrix (from the vector copy: exact, or decoded from int8 within ~1e-3 when
        quantized)."""
        rows = sql.stored_vectors(self._db, ids)
        found = np.array([i in rows for i in ids], dtype=bool)
        matrix = (np.stack([rows[i] for i in ids if i in rows]) if rows
                  else np.zeros((0, self.dim), dtype=np.float32))
        return found, matrix

    # -- ids: vectors to chunks to notes ---------------------------------------------------------

    def chunks_of_vectors(self, vector_ids: list[int]) -> Iterable[tuple[int, int]]:
        """(chunk id, vector id) of every chunk stored with one of ``vector_ids`` (a
        passage repeated word for word shares one vector)."""
        return self._rows_in("SELECT id, embedding FROM chunks", "embedding", vector_ids)

    def owners(self, chunk_ids: list[int]) -> list[tuple[int, int, int]]:
        """(chunk id, note row, vector id) of those of ``chunk_ids`` still indexed."""
        return self._rows_in("SELECT id, note, embedding FROM chunks", "id", chunk_ids)

    def titles_of(self, notes: Iterable[int]) -> list[tuple[int, int]]:
        """(note row, vector id) of the title vectors of ``notes`` that have one."""
        return self._rows_in("SELECT note, embedding FROM titles", "note", notes)

    def note_chunks(self, notes: list[int]) -> list[tuple[int, int, int]]:
        """(chunk id, note row, vector id) of every chunk of ``notes``."""
        return self._rows_in("SELECT id, note, embedding FROM chunks", "note", notes)

    def note_vectors(self, notes: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(note row, vector id) of every chunk of ``notes``, grouped by note, so each
        note's passages are one run of rows."""
        rows = self._rows_in("SELECT note, embedding FROM chunks", "note", notes,
                             " ORDER BY note")
        return (np.array([r[0] for r in rows], dtype=np.int64),
                np.array([r[1] for r in rows], dtype=np.int64))

    def _rows_in(self, select: str, column: str, ids: Iterable[int], then: str = ""
                 ) -> list:
        """The rows of ``select`` whose ``column`` is one of ``ids``: the ids go to SQLite
        as one JSON array (``json_each``), one statement of any length, prepared once."""
        return self._db.execute(f"{select} WHERE {column} IN (SELECT value FROM "
                                f"json_each(?)){then}", (sql.json_ids(ids),)).fetchall()

    # -- words ----------------------------------------------------------------------------------

    def vocabulary(self) -> Vocabulary:
        """The indexed terms with the number of chunks holding each (for IDF)."""
        if self._vocab is None:
            self._vocab = read_vocabulary(self._db, self.fresh.chunks_epoch)
        return self._vocab

    def _tokens(self) -> Tokens:
        """FTS5's tokenizer on this view's connection (kept per thread)."""
        db, local = self._db, self._caches.local
        if getattr(local, "db", None) is not db:
            local.db, local.tokens = db, Tokens(db)
        return local.tokens

    def query_tokens(self, word: str, prefix: bool) -> list[str]:
        """A query word as FTS5 reads it: its index terms, the last a prefix if ``prefix``
        (a word like ``snake_ca`` is two terms)."""
        tokens = self._tokens()
        return tokens.prefix(word) if prefix else tokens.terms(word, query=True)

    def located_terms(self, text: str) -> list[tuple[int, int, str]]:
        """A passage's terms as FTS5 reads them, with their UTF-8 byte offsets in ``text``
        (what ``search.spans`` marks)."""
        return self._tokens().located(text)

    def word_terms(self, word: str) -> tuple[tuple[int, int, str], ...]:
        """``located_terms`` of one word (kept by this thread's tokenizer)."""
        return self._tokens().word_terms(word)

    def scoring_copy(self, terms: Sequence[Term], weights: Sequence[float]
                     ) -> KeywordIndex | None:
        """The keyword copy, when it scores ``terms`` as FTS5 would: built with these
        column weights, and every word a single term (never, from SQLite)."""
        return None

    def bm25(self, terms: Sequence[Term], k: int, weights: Sequence[float], budget: RowBudget,
             notes: Iterable[int] | None = None) -> Pairs:
        """(chunk id, BM25 score: higher is better) of the ``k`` best chunks holding any
        of ``terms``, over the chunks of ``notes`` (note rows) when given; scored as FTS5's
        ``bm25()`` with these column weights, from the keyword copy when it can."""
        if not terms:
            return []
        copy = self.scoring_copy(terms, weights) if notes is None else None
        # Rarest first, words join while the chunks they hold fit the budget: FTS5 floors
        # the IDF of a word in half the chunks near zero.
        limit = budget.copy if copy is not None else budget.fts5
        kept, rows = [], 0
        for t in sorted(terms, key=lambda t: t.df):
            if kept and rows + t.df > limit:
                break
            kept.append(t)
            rows += t.df
        if copy is not None:
            return copy.bm25([(t.tokens[0], t.prefix) for t in kept], k)
        match = " OR ".join(t.phrase for t in kept)
        return [(c, -s) for c, s in self.fts5_bm25(match, k, weights, notes)]

    def fts5_bm25(self, match: str, k: int, weights: Sequence[float] = COLUMN_WEIGHTS,
                  notes: Iterable[int] | None = None) -> Pairs:
        """(chunk id, ``bm25()``: lower is better) for an FTS5 MATCH expression, from FTS5
        itself (what ``bm25`` answers with when the copy cannot; benchmarks time it)."""
        w = ", ".join(str(float(x)) for x in weights)
        within, args = "", (match, k)
        if notes is not None:
            # "+rowid": FTS5 must not take the IN list as its rowid constraint, which runs
            # the MATCH once per allowed chunk (19 s at 10k chunks for a date filter
            # allowing all); with the plus, the MATCH runs once and each hit is tested
            # against the list, built once.
            within = ("AND +rowid IN (SELECT id FROM chunks WHERE note IN "
                      "(SELECT value FROM json_each(?))) ")
            args = (match, json.dumps(sorted(notes)), k)
        rows = self._db.execute(
            f"SELECT rowid, bm25(chunks_fts, {w}) AS s FROM chunks_fts "
            f"WHERE chunks_fts MATCH ? {within}ORDER BY s LIMIT ?", args)
        return [(r[0], r[1]) for r in rows]

    def holds(self, terms: Sequence[Term], chunk_ids: list[int]) -> np.ndarray:
        """Whether each chunk holds each word: one row of ``chunk_ids`` per term. A typed
        word is held through any term it may complete to; a word of several terms
        (``snake_case``) through all of them."""
        held = self._chunk_terms_of(chunk_ids)
        vocab = self.vocabulary()
        rows = []
        for t in terms:
            completions = (frozenset(vocab.starting_with(t.tokens[-1])) if t.prefix
                           else frozenset())
            rows.append([_held(t, held.get(c, frozenset()), completions) for c in chunk_ids])
        return np.array(rows, dtype=bool).reshape(len(terms), len(chunk_ids))

    def together(self, term: Term, others: Sequence[Term]) -> bool:
        """Whether some chunk holds ``term`` and any of ``others``."""
        match = f"{term.phrase} AND ({' OR '.join(t.phrase for t in others)})"
        return bool(self.fts5_bm25(match, 1))

    def _chunk_terms_of(self, chunk_ids: list[int]) -> dict[int, frozenset[str]]:
        """The index terms of each chunk, as FTS5 tokenized its four columns (interned,
        kept for typing's next keystrokes until the index changes)."""
        stamp, local, cache = self.stamp(), self._caches.local, self._caches.chunk_terms
        if getattr(local, "stamp", None) != stamp:
            local.stamp = stamp
            cache.clear()
        tokens = self._tokens()
        found = cache.get_many(chunk_ids)
        missing = [c for c in chunk_ids if c not in found]
        if missing:
            fresh = {chunk_id: frozenset(map(sys.intern, tokens.terms("\n".join(columns))))
                     for chunk_id, *columns in sql.keyword_columns(self._db, missing)}
            cache.put_many(fresh)
            found.update(fresh)
        return found

    def titles_and_texts(self, chunk_ids: Sequence[int]) -> list[tuple[str, str]]:
        """(note title, passage) of each of ``chunk_ids``: what a typed word completes from."""
        return self._rows_in("SELECT n.title, c.text FROM chunks c JOIN notes n "
                             "ON n.id = c.note", "c.id", chunk_ids)

    # -- notes and passages -------------------------------------------------------------------

    def passages(self, chunk_ids: Sequence[int]) -> list[Passage]:
        """Everything a hit shows, for those of ``chunk_ids`` still indexed, in order."""
        rows = {r[0]: r for r in self._rows_in(
            "SELECT c.id, c.note, c.heading_path, c.url, c.text, c.embedding, n.note_id, "
            "n.title, n.source, n.kind, n.path, n.tags, n.modified, n.archived, "
            "n.content_hash FROM chunks c JOIN notes n ON n.id = c.note", "c.id", chunk_ids)}
        return [Passage(*rows[c]) for c in chunk_ids if c in rows]

    def recent_notes(self, limit: int, notes: set[int] | None = None) -> list[int]:
        """The ``limit`` most recently modified notes (rows), of ``notes`` when given."""
        found = [r[0] for r in self._db.execute(
            "SELECT id FROM notes ORDER BY modified DESC NULLS LAST LIMIT ?",
            (limit if notes is None else 1_000_000,))]
        return [n for n in found if notes is None or n in notes][:limit]

    def first_chunk(self, note: int) -> int | None:
        row = self._db.execute("SELECT id FROM chunks WHERE note = ? ORDER BY seq LIMIT 1",
                               (note,)).fetchone()
        return row[0] if row else None

    def note_row(self, note_id: str) -> int | None:
        row = self._db.execute("SELECT id FROM notes WHERE note_id = ?", (note_id,)).fetchone()
        return row[0] if row else None

    def chunk_count(self, note: int) -> int:
        return self._db.execute("SELECT count(*) FROM chunks WHERE note = ?",
                                (note,)).fetchone()[0]

    def note_record(self, note_id: str) -> NoteRecord | None:
        """The note's row (title, source, path, url, tags, dates), None if not indexed."""
        row = self._db.execute(
            "SELECT id, note_id, source, kind, title, path, url, tags, created, modified, "
            "archived FROM notes WHERE note_id = ?", (note_id,)).fetchone()
        return NoteRecord(*row) if row else None

    # -- filters ---------------------------------------------------------------------------

    def tagged(self, tag: str) -> set[int]:
        """Note rows tagged ``tag`` or a tag nested under it (``tag/...``), any case."""
        return {r[0] for r in self._db.execute(
            "SELECT note FROM note_tags WHERE tag = ? OR tag LIKE ? ESCAPE '\\'",
            (tag, _like_escape(tag) + "/%"))}

    def sources(self) -> set[str]:
        """The names of the sources with notes in the index."""
        return {r[0] for r in self._db.execute("SELECT DISTINCT source FROM notes")}

    def in_source(self, name: str) -> set[int]:
        """Note rows of source ``name``."""
        return {r[0] for r in self._db.execute("SELECT id FROM notes WHERE source = ?",
                                               (name,))}

    def modified_between(self, after: float | None, before: float | None) -> set[int]:
        """Note rows modified in ``[after, before)`` (Unix seconds; None: unbounded);
        notes without a modification date match no date bound."""
        return self._dated("modified", after, before)

    def created_between(self, after: float | None, before: float | None) -> set[int]:
        """Note rows created in ``[after, before)`` (notes without a creation date: none)."""
        return self._dated("created", after, before)

    def _dated(self, column: str, after: float | None, before: float | None) -> set[int]:
        """Note rows whose ``column`` lies in ``[after, before)``, from its index
        (migration 5): only plain bounds let SQLite use it, not ``(? IS NULL OR ...)``."""
        where, args = [f"{column} IS NOT NULL"], []
        if after is not None:
            where.append(f"{column} >= ?")
            args.append(after)
        if before is not None:
            where.append(f"{column} < ?")
            args.append(before)
        # One JSON row rather than a row per note: 10 ms instead of 17 for 33,000 notes.
        found = self._db.execute(f"SELECT json_group_array(id) FROM notes INDEXED BY "
                                 f"notes_{column} WHERE {' AND '.join(where)}",
                                 args).fetchone()[0]
        return set(json.loads(found))

    def undated_created(self) -> int:
        """How many notes have no creation date (their source does not know it)."""
        return self._db.execute("SELECT count(*) FROM notes WHERE created IS NULL"
                                ).fetchone()[0]

    def tag_notes(self) -> list[tuple[str, int]]:
        """(tag, note row) for every tag of every note, tags as indexed (lower case)."""
        return self._db.execute("SELECT tag, note FROM note_tags").fetchall()

    # -- for ``notewell eval`` ------------------------------------------------------------

    def note_paths(self) -> dict[str, str | None]:
        """Each note's path (None for notes without one), by note id."""
        return dict(self._db.execute("SELECT note_id, path FROM notes").fetchall())

    def keyword_baseline(self, words: Sequence[str], limit: int,
                         notes: Iterable[int] | None = None) -> list[str]:
        """Note ids ranked by how many of ``words`` their title and passages contain
        (``LIKE '%word%'``), ties by note id: the naive baseline ``notewell eval`` shows."""
        hit = "max(n.title || ' ' || c.text LIKE ? ESCAPE '\\')"
        where = ""
        args: list = [f"%{_like_escape(w)}%" for w in words]
        if notes is not None:
            where = "WHERE c.note IN (SELECT value FROM json_each(?)) "
            args.append(json.dumps(sorted(notes)))
        rows = self._db.execute(
            f"SELECT n.note_id, {' + '.join([hit] * len(words))} AS hits FROM chunks c "
            f"JOIN notes n ON n.id = c.note {where}GROUP BY c.note HAVING hits > 0 "
            "ORDER BY hits DESC, n.note_id LIMIT ?", (*args, limit))
        return [r[0] for r in rows]


# What search asks of the index, answered by one view for one request: ``SqlReads``'s
# reads, which ``copy_reads.CopyReads`` (a subclass) answers from the copies where it can.
Reads = SqlReads


def _held(term: Term, terms: frozenset[str], completions: frozenset[str]) -> bool:
    if term.prefix:
        return not completions.isdisjoint(terms) and all(t in terms for t in term.tokens[:-1])
    return all(t in terms for t in term.tokens)


def _like_escape(text: str) -> str:
    """``text`` as a literal inside a SQL ``LIKE`` pattern written with ``ESCAPE '\\'``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` as float32 at unit length (a zero vector stays near zero)."""
    q = np.asarray(vector, dtype=np.float32)
    return q / max(float(np.linalg.norm(q)), 1e-12)

"""The reads SQLite answers: one function per read, each over a connection.

``reads.Reads`` calls these when no in-memory copy can answer (one-shot commands, a copy
still loading, a filtered query) and for what only the file holds (passages, filters,
notes by id). ``copies`` reads the rows its copies are built from here too. Nothing here
decides between SQLite and a copy.

Ids go to SQLite as one JSON array (``json_each``) rather than one ``?`` per id: one
statement of any length, prepared once. May import ``index.keywords`` (the columns a
chunk is indexed under) and nothing else of notewell.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import apsw
import numpy as np

from notewell.index import keywords


def _ids(ids: Iterable[int]) -> str:
    return json.dumps(list(ids))


# -- the state the copies follow ----------------------------------------------------------


def chunks_epoch(db: apsw.Connection) -> str:
    """Moved by every write that changes chunks (``Index``): what the keyword copy, the
    vocabulary and the searcher's caches follow."""
    row = db.execute("SELECT value FROM meta WHERE key = 'chunks_epoch'").fetchone()
    return row[0] if row else ""


def vector_state(db: apsw.Connection) -> tuple[str, int]:
    """What ties a vector copy to the index: the epoch (changed by every deletion) and the
    highest vector id (new vectors get higher ones)."""
    row = db.execute(
        "SELECT (SELECT value FROM meta WHERE key = 'vectors_epoch'), "
        "(SELECT max(id) FROM embeddings)").fetchone()
    return row[0] or "", row[1] or 0


class Freshness(NamedTuple):
    """Every stamp the copies and caches follow, read in one statement: what a read view
    is taken at (``reads.open_view``)."""

    version: tuple[int, int, int]  # ``data_version``: moves with any commit
    chunks_epoch: str
    vectors_epoch: str
    max_vector: int  # the highest vector id

    @property
    def vector_state(self) -> tuple[str, int]:
        return self.vectors_epoch, self.max_vector


def freshness(db: apsw.Connection) -> Freshness:
    """``data_version``, ``chunks_epoch`` and ``vector_state`` in one query."""
    row = db.execute(
        "SELECT (SELECT data_version FROM pragma_data_version()), "
        "(SELECT value FROM meta WHERE key = 'chunks_epoch'), "
        "(SELECT value FROM meta WHERE key = 'vectors_epoch'), "
        "(SELECT max(id) FROM embeddings)").fetchone()
    return Freshness((id(db), row[0], db.total_changes()), row[1] or "", row[2] or "",
                     row[3] or 0)


# -- vectors ---------------------------------------------------------------------------------


def all_vectors(db: apsw.Connection) -> apsw.Cursor:
    """(vector id, float32 bytes) of every stored vector."""
    return db.execute("SELECT rowid, embedding FROM vectors")


def vectors_between(db: apsw.Connection, low: int, high: int) -> list[tuple[int, bytes]]:
    """(vector id, float32 bytes) of the vectors with ids in ``(low, high]``, ascending."""
    return db.execute(
        "SELECT e.id, v.embedding FROM embeddings e JOIN vectors v "
        "ON v.rowid = e.id WHERE e.id > ? AND e.id <= ? ORDER BY e.id", (low, high)).fetchall()


def stored_vectors(db: apsw.Connection, ids: Iterable[int]) -> dict[int, np.ndarray]:
    """Float vectors, one point lookup each: ``vec0`` answers ``rowid IN (...)`` by scanning
    every chunk of vectors (320 ms at 1M), a lookup in ~40 us (it walks the overflow pages
    of its chunk's blob: 96 KB since migration 3)."""
    out = {}
    # As Python ints: apsw binds a numpy integer as a blob, which matches no rowid.
    for i in dict.fromkeys(map(int, ids)):
        row = db.execute("SELECT embedding FROM vectors WHERE rowid = ?", (i,)).fetchone()
        if row is not None:
            out[i] = np.frombuffer(row[0], dtype=np.float32)
    return out


def knn(db: apsw.Connection, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
    """(vector id, cosine distance) of the ``k`` nearest: sqlite-vec's exact scan."""
    rows = db.execute(
        "SELECT rowid, distance FROM vectors WHERE embedding MATCH ? AND k = ? "
        "ORDER BY distance", (np.asarray(vector, dtype=np.float32).tobytes(), k))
    return [(r[0], r[1]) for r in rows]


def knn_within(db: apsw.Connection, vector: np.ndarray, k: int, notes: Iterable[int]
               ) -> list[tuple[int, float]]:
    """(chunk id, cosine distance) of the ``k`` nearest chunks of ``notes``: exact."""
    rows = db.execute(
        "SELECT c.id, vec_distance_cosine(v.embedding, ?) AS d FROM chunks c "
        "JOIN vectors v ON v.rowid = c.embedding "
        "WHERE c.note IN (SELECT value FROM json_each(?)) ORDER BY d LIMIT ?",
        (np.asarray(vector, dtype=np.float32).tobytes(), json.dumps(sorted(notes)), k))
    return [(r[0], r[1]) for r in rows]


def titles_within(db: apsw.Connection, vector: np.ndarray, k: int, notes: Iterable[int]
                  ) -> list[tuple[int, float]]:
    """(note row, cosine distance) of the ``k`` nearest title vectors of ``notes``: exact."""
    rows = db.execute(
        "SELECT t.note, vec_distance_cosine(v.embedding, ?) AS d FROM titles t "
        "JOIN vectors v ON v.rowid = t.embedding "
        "WHERE t.note IN (SELECT value FROM json_each(?)) ORDER BY d LIMIT ?",
        (np.asarray(vector, dtype=np.float32).tobytes(), json.dumps(sorted(notes)), k))
    return [(r[0], r[1]) for r in rows]


# -- ids ---------------------------------------------------------------------------------------


def titles_of_vectors(db: apsw.Connection, vector_ids: Sequence[int]
                      ) -> list[tuple[int, int]]:
    """(note row, vector id) of every note whose title vector is one of ``vector_ids``."""
    return db.execute("SELECT note, embedding FROM titles WHERE embedding IN "
                      "(SELECT value FROM json_each(?))", (_ids(vector_ids),)).fetchall()


def title_rows(db: apsw.Connection) -> list[tuple[int, int]]:
    """(note row, vector id) of every title vector, as the keyword copy holds them."""
    return db.execute("SELECT note, embedding FROM titles").fetchall()


def titles_of_notes(db: apsw.Connection, notes: Iterable[int]) -> list[tuple[int, int]]:
    """(note row, vector id) of the title vectors of ``notes`` (notes without one left out)."""
    return db.execute("SELECT note, embedding FROM titles WHERE note IN "
                      "(SELECT value FROM json_each(?))", (_ids(notes),)).fetchall()


def note_chunks(db: apsw.Connection, notes: Iterable[int]) -> list[tuple[int, int, int]]:
    """(chunk id, note row, vector id) of every chunk of ``notes``."""
    return db.execute("SELECT id, note, embedding FROM chunks WHERE note IN "
                      "(SELECT value FROM json_each(?))", (_ids(notes),)).fetchall()


def chunks_of_vectors(db: apsw.Connection, vector_ids: Sequence[int]
                      ) -> list[tuple[int, int]]:
    """(chunk id, vector id) of every chunk stored with one of ``vector_ids``."""
    return db.execute("SELECT id, embedding FROM chunks WHERE embedding IN "
                      "(SELECT value FROM json_each(?))", (_ids(vector_ids),)).fetchall()


def owners(db: apsw.Connection, chunk_ids: Sequence[int]) -> list[tuple[int, int, int]]:
    """(chunk id, note row, vector id) of those of ``chunk_ids`` still indexed."""
    return db.execute("SELECT id, note, embedding FROM chunks WHERE id IN "
                      "(SELECT value FROM json_each(?))", (_ids(chunk_ids),)).fetchall()


def note_vectors(db: apsw.Connection, notes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(note row, vector id) of every chunk of ``notes``, grouped by note."""
    rows = db.execute("SELECT note, embedding FROM chunks WHERE note IN "
                      "(SELECT value FROM json_each(?)) ORDER BY note", (_ids(notes),)
                      ).fetchall()
    return (np.array([r[0] for r in rows], dtype=np.int64),
            np.array([r[1] for r in rows], dtype=np.int64))


# -- keywords ----------------------------------------------------------------------------------


def bm25(db: apsw.Connection, match: str, k: int, weights: Sequence[float],
         notes: Iterable[int] | None = None) -> list[tuple[int, float]]:
    """(chunk id, ``bm25()``: lower is better) for an FTS5 MATCH expression, over the
    chunks of ``notes`` (note rows) when given."""
    w = ", ".join(str(float(x)) for x in weights)
    within, args = "", (match, k)
    if notes is not None:
        # "+rowid": FTS5 must not take the IN list as its rowid constraint, which runs the
        # MATCH once per allowed chunk (19 s at 10k chunks for a date filter allowing
        # all); with the plus, the MATCH runs once and each hit is tested against the
        # list, built once.
        within = ("AND +rowid IN (SELECT id FROM chunks WHERE note IN "
                  "(SELECT value FROM json_each(?))) ")
        args = (match, json.dumps(sorted(notes)), k)
    rows = db.execute(
        f"SELECT rowid, bm25(chunks_fts, {w}) AS s FROM chunks_fts "
        f"WHERE chunks_fts MATCH ? {within}ORDER BY s LIMIT ?", args)
    return [(r[0], r[1]) for r in rows]


_KEYWORD_ROWS = ("SELECT c.id, c.note, c.embedding, n.title, n.aliases, c.heading_path, "
                 "c.text, n.tags FROM chunks c JOIN notes n ON n.id = c.note")


def _keyword_rows(rows: Iterable[tuple]) -> Iterator[keywords.Row]:
    for chunk_id, note, vector, title, aliases, heading, text, tags in rows:
        yield (chunk_id, note, vector, *keywords.columns(title, json.loads(aliases), heading,
                                                         text, json.loads(tags)))


def keyword_rows(db: apsw.Connection) -> Iterator[keywords.Row]:
    """Every chunk as the keyword copy reads it: (chunk id, note row, vector id, the four
    FTS5 columns as indexed), by chunk id."""
    return _keyword_rows(db.execute(_KEYWORD_ROWS + " ORDER BY c.id"))


def keyword_columns(db: apsw.Connection, chunk_ids: Sequence[int]
                    ) -> Iterator[tuple[int, str, str, str, str]]:
    """(chunk id, its four FTS5 columns as they were indexed) for ``chunk_ids``."""
    rows = _keyword_rows(db.execute(
        _KEYWORD_ROWS + " WHERE c.id IN (SELECT value FROM json_each(?))",
        (_ids(chunk_ids),)))
    return ((chunk_id, *columns) for chunk_id, _, _, *columns in rows)


def titles_and_texts(db: apsw.Connection, chunk_ids: Sequence[int]) -> list[tuple[str, str]]:
    """(note title, passage) of each of ``chunk_ids``."""
    return db.execute("SELECT n.title, c.text FROM chunks c JOIN notes n ON n.id = c.note "
                      "WHERE c.id IN (SELECT value FROM json_each(?))", (_ids(chunk_ids),)
                      ).fetchall()


# -- notes and passages --------------------------------------------------------------------------


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


def passages(db: apsw.Connection, chunk_ids: Sequence[int]) -> list[Passage]:
    """The passages of those of ``chunk_ids`` still indexed, in that order."""
    rows = {r[0]: r for r in db.execute(
        "SELECT c.id, c.note, c.heading_path, c.url, c.text, c.embedding, n.note_id, "
        "n.title, n.source, n.kind, n.path, n.tags, n.modified, n.archived, "
        "n.content_hash FROM chunks c JOIN notes n ON n.id = c.note "
        "WHERE c.id IN (SELECT value FROM json_each(?))", (_ids(chunk_ids),))}
    return [Passage(*rows[c]) for c in chunk_ids if c in rows]


def recent(db: apsw.Connection, limit: int) -> list[int]:
    """Note rows, most recently modified first."""
    return [r[0] for r in db.execute(
        "SELECT id FROM notes ORDER BY modified DESC NULLS LAST LIMIT ?", (limit,))]


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


def note_record(db: apsw.Connection, note_id: str) -> NoteRecord | None:
    row = db.execute(
        "SELECT id, note_id, source, kind, title, path, url, tags, created, modified, "
        "archived FROM notes WHERE note_id = ?", (note_id,)).fetchone()
    return NoteRecord(*row) if row else None


def first_chunk(db: apsw.Connection, note: int) -> int | None:
    row = db.execute("SELECT id FROM chunks WHERE note = ? ORDER BY seq LIMIT 1",
                     (note,)).fetchone()
    return row[0] if row else None


def note_row(db: apsw.Connection, note_id: str) -> int | None:
    row = db.execute("SELECT id FROM notes WHERE note_id = ?", (note_id,)).fetchone()
    return row[0] if row else None


def chunk_count(db: apsw.Connection, note: int) -> int:
    return db.execute("SELECT count(*) FROM chunks WHERE note = ?", (note,)).fetchone()[0]


def note_paths(db: apsw.Connection) -> dict[str, str | None]:
    return dict(db.execute("SELECT note_id, path FROM notes").fetchall())


# -- filters -------------------------------------------------------------------------------------


def like_escape(text: str) -> str:
    """``text`` as a literal inside a SQL ``LIKE`` pattern written with ``ESCAPE '\\'``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def tagged(db: apsw.Connection, tag: str) -> set[int]:
    """Note rows tagged ``tag`` or a tag nested under it (``tag/...``), any case."""
    return {r[0] for r in db.execute(
        "SELECT note FROM note_tags WHERE tag = ? OR tag LIKE ? ESCAPE '\\'",
        (tag, like_escape(tag) + "/%"))}


def sources(db: apsw.Connection) -> set[str]:
    """The names of the sources with notes in the index."""
    return {r[0] for r in db.execute("SELECT DISTINCT source FROM notes")}


def in_source(db: apsw.Connection, name: str) -> set[int]:
    return {r[0] for r in db.execute("SELECT id FROM notes WHERE source = ?", (name,))}


def modified_between(db: apsw.Connection, after: float | None, before: float | None
                     ) -> set[int]:
    """Note rows modified at or after ``after`` and before ``before`` (either may be
    None: no bound). Notes without a modification date match no date bound."""
    return _dated(db, "modified", after, before)


def created_between(db: apsw.Connection, after: float | None, before: float | None
                    ) -> set[int]:
    """Note rows created at or after ``after`` and before ``before``; notes whose source
    gave no creation date match no bound."""
    return _dated(db, "created", after, before)


def _dated(db: apsw.Connection, column: str, after: float | None, before: float | None
           ) -> set[int]:
    """Note rows whose ``column`` lies in ``[after, before)``, from its index (migration
    5): only plain bounds let SQLite use it, not ``(? IS NULL OR ...)``."""
    where, args = [f"{column} IS NOT NULL"], []
    if after is not None:
        where.append(f"{column} >= ?")
        args.append(after)
    if before is not None:
        where.append(f"{column} < ?")
        args.append(before)
    # One JSON row rather than a row per note: 10 ms instead of 17 for 33,000 notes.
    found = db.execute(f"SELECT json_group_array(id) FROM notes INDEXED BY notes_{column} "
                       f"WHERE {' AND '.join(where)}", args).fetchone()[0]
    return set(json.loads(found))


def undated_created(db: apsw.Connection) -> int:
    """How many notes have no creation date."""
    return db.execute("SELECT count(*) FROM notes WHERE created IS NULL").fetchone()[0]


def tag_notes(db: apsw.Connection) -> list[tuple[str, int]]:
    """(tag, note row) for every tag of every note, tags as indexed (lower case)."""
    return db.execute("SELECT tag, note FROM note_tags").fetchall()


def keyword_baseline(db: apsw.Connection, words: Sequence[str], limit: int,
                     notes: Iterable[int] | None = None) -> list[str]:
    """``notewell eval``'s naive baseline: note ids ranked by how many of ``words`` their
    title and passages contain (``LIKE '%word%'``), ties by note id."""
    hit = "max(n.title || ' ' || c.text LIKE ? ESCAPE '\\')"
    where = ""
    args: list = [f"%{like_escape(w)}%" for w in words]
    if notes is not None:
        where = "WHERE c.note IN (SELECT value FROM json_each(?)) "
        args.append(json.dumps(sorted(notes)))
    rows = db.execute(
        f"SELECT n.note_id, {' + '.join([hit] * len(words))} AS hits FROM chunks c "
        f"JOIN notes n ON n.id = c.note {where}GROUP BY c.note HAVING hits > 0 "
        "ORDER BY hits DESC, n.note_id LIMIT ?", (*args, limit))
    return [r[0] for r in rows]

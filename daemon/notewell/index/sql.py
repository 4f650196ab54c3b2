"""The reads the copies make of SQLite, one function each over a connection: the stamps
they follow (``freshness``, read once per view), and the rows they are built from.

``copies`` builds and brings along its copies from these; ``reads`` takes the stored
float vectors and a chunk's indexed words from here too, and holds the SQL of every
other read search makes (``SqlReads``). Nothing here decides between SQLite and a copy.

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


def json_ids(ids: Iterable[int]) -> str:
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


def title_rows(db: apsw.Connection) -> list[tuple[int, int]]:
    """(note row, vector id) of every title vector, as the keyword copy holds them."""
    return db.execute("SELECT note, embedding FROM titles").fetchall()


# -- keywords ----------------------------------------------------------------------------------


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
        (json_ids(chunk_ids),)))
    return ((chunk_id, *columns) for chunk_id, _, _, *columns in rows)

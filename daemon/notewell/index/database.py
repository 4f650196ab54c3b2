"""The index: one SQLite file with notes, chunks, an FTS5 table and a sqlite-vec table.

Owns ``Index``: its per-thread connections, opening a file (``schema`` upgrades and
checks it; a damaged one raises ``IndexCorrupt`` for ``store`` to move aside), every write
(one transaction per note, each moving the stamps the in-memory copies follow), the
record of each source's syncs, and the counts ``notewell status`` shows. An ``Index``
holds its ``copies`` (``copies.Copies``: the daemon's in-memory copies and their loader
threads) and hands out read views (``view``: the one read interface search uses, its
side, a copy or SQLite, decided once per view). Ranking lives in ``search``.

Vectors are content-addressed: ``embeddings`` maps the sha256 of a chunk's embedded text
to a row id, and the ``vectors`` vec0 table holds the vector under that id. Editing one
paragraph re-embeds one chunk; renaming a file or rebuilding after a crash re-embeds none.

We use apsw rather than the standard ``sqlite3`` module: many Pythons (Apple's among them)
are built without extension loading, and apsw ships its own SQLite with FTS5 everywhere.

May import the other modules of ``index`` (never ``store``, which imports this), ``notes``
and ``memory``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import apsw
import numpy as np

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.index import keywords, schema, sql
from notewell.index.copies import Copies, CopySettings
from notewell.index.copy_reads import open_view
from notewell.index.reads import ReadCaches, Reads, SqlReads
from notewell.index.schema import BuildSettings, ChunkerChanged, IndexCorrupt, connect
from notewell.notes import Chunk, Note

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredNote:
    rowid: int
    note_id: str
    fingerprint: str
    content_hash: str
    url: str = ""  # where the note opens, and its file: a sync compares them with the
    path: str | None = None  # source's, so a moved folder moves its links


class Index:
    """A notewell index file. Safe to share between threads: each thread gets its own
    connection, and SQLite's WAL lets readers see the last commit while a sync writes."""

    def __init__(self, path: str, settings: BuildSettings,
                 copies: CopySettings | None = None, *,
                 other_chunker_ok: bool = False, clock: Clock = SYSTEM_CLOCK) -> None:
        self.path = path
        self.settings = settings
        self._local = threading.local()
        self._conns: list[apsw.Connection] = []
        self._conns_lock = threading.Lock()
        self.copies = Copies(path, settings.dim, lambda: self.db, copies, clock)
        self._read_caches = ReadCaches()
        # Set by ``store.open_current`` when this file replaced a damaged one: the daemon
        # reports "rebuilding" until a first full sync has filled it again.
        self.recovered_from: str | None = None
        # The chunker that cut this file, when not ``settings.chunker`` (opened with
        # ``other_chunker_ok``): it still answers; ``Engine.sync`` re-chunks it beside.
        self.other_chunker: str | None = None
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._prepare(other_chunker_ok)

    # -- connections and schema --------------------------------------------------------

    @property
    def db(self) -> apsw.Connection:
        """This thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.path == ":memory:" and self._conns:
                conn = self._conns[0]  # one in-memory database, shared
            else:
                conn = connect(self.path)
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    def close(self) -> None:
        self.copies.close()
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()

    def _prepare(self, other_chunker_ok: bool) -> None:
        # A truncated or overwritten file may pass the header check and fail on the first
        # page read: either way it is a damaged index, for ``store`` to move aside.
        try:
            schema.upgrade(self.db, self.path, self.settings)
        except ChunkerChanged as e:
            if not other_chunker_ok:
                self.close()
                raise
            self.other_chunker = e.stored
        except (apsw.CorruptError, apsw.NotADBError) as e:
            self.close()
            raise IndexCorrupt(f"{self.path} is damaged: {e}") from None
        except BaseException:  # a full disk, say: no connection (and fd) left open
            self.close()
            raise

    def integrity_check(self, quick: bool = False) -> list[str]:
        return schema.integrity_problems(self.db, quick)

    def consistency_problems(self) -> list[str]:
        """See ``schema.consistency_problems``: empty when notes, chunks, FTS rows and
        vectors are linked one to one."""
        return schema.consistency_problems(self.db)

    def checkpoint(self) -> None:
        """Move the WAL's pages into the file and empty it (before a file is published)."""
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- the in-memory copies, as the daemon drives them (see ``copies``) -----------------

    def warm_vectors(self, wait: bool = False) -> None:
        self.copies.warm_vectors(wait)

    def warm_keywords(self, wait: bool = False) -> None:
        self.copies.warm_keywords(wait)

    def ensure_copies(self) -> None:
        """Start loading the copies that are behind the file (the sync thread, at each
        wake: the keyword copy is rebuilt once the chunks are still, and a failed load is
        retried, even when nobody searches)."""
        db = self.db
        self.copies.ensure_loading(sql.freshness(db), db)

    # -- reads ------------------------------------------------------------------------------

    def view(self) -> Reads:
        """A read view on this thread's connection: which side answers each read (an
        in-memory copy or SQLite) is decided now, once, for as long as it is used
        (``copy_reads.open_view``). A request takes one at its start."""
        return open_view(self.db, self.copies, self._read_caches)

    def sql_view(self) -> Reads:
        """A read view of SQLite alone, the copies left as they are: the sync thread's
        few reads (which sources hold notes) need none."""
        db = self.db
        return SqlReads(db, sql.freshness(db), self._read_caches, self.settings.dim)

    @property
    def reads(self) -> Reads:
        """A fresh view (``view``), for one-shot callers: each use decides again."""
        return self.view()

    # -- writes ------------------------------------------------------------------------

    def stored_notes(self, source: str) -> dict[str, StoredNote]:
        rows = self.db.execute(
            "SELECT id, note_id, fingerprint, content_hash, url, path FROM notes "
            "WHERE source = ?",
            (source,),
        )
        return {r[1]: StoredNote(*r) for r in rows}

    def missing_embeddings(self, hashes: Iterable[str]) -> set[str]:
        wanted = set(hashes)
        if not wanted:
            return set()
        # One JSON array, as the reads send ids: one statement for any number of hashes.
        found = self.db.execute("SELECT hash FROM embeddings WHERE hash IN "
                                "(SELECT value FROM json_each(?))", (json.dumps(list(wanted)),))
        return wanted - {r[0] for r in found}

    def add_embeddings(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Store vectors by content hash, in one transaction (a crash keeps all or none)."""
        with self.db:
            for h, vec in zip(hashes, vectors):
                self._add_embedding(h, vec)

    def _add_embedding(self, h: str, vec: np.ndarray) -> int:
        row = self.db.execute("SELECT id FROM embeddings WHERE hash = ?", (h,)).fetchone()
        if row:
            return row[0]
        self.db.execute("INSERT INTO embeddings(hash) VALUES (?)", (h,))
        rowid = self.db.last_insert_rowid()
        self.db.execute(
            "INSERT INTO vectors(rowid, embedding) VALUES (?, ?)",
            (rowid, np.asarray(vec, dtype=np.float32).tobytes()),
        )
        return rowid

    def replace_note(self, note: Note, chunks: Sequence[tuple[Chunk, str, str]],
                     content_hash: str | None = None, title: str | None = None) -> None:
        """Replace a note's rows in one transaction.

        ``chunks`` holds (chunk, url, embedding hash); ``title``, the embedding hash of the
        note's title vector (None: none); every hash must already be stored with
        ``add_embeddings``. ``content_hash``: what to record instead of the note's own
        (``carry_notes``)."""
        removed: list[int] = []
        added: list[keywords.Row] = []
        titled: list[tuple[int, int]] = []
        with self.db:
            before = sql.chunks_epoch(self.db)
            old = self.db.execute(
                "SELECT id FROM notes WHERE note_id = ?", (note.note_id,)
            ).fetchone()
            if old:
                removed = self._delete_rows(old[0])
            self.db.execute(
                """INSERT INTO notes(note_id, source, kind, title, path, url, tags, aliases,
                   created, modified, archived, fingerprint, content_hash, indexed_at)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                (
                    note.note_id, note.source, note.kind, note.title, note.path, note.url,
                    json.dumps(list(note.tags)), json.dumps(list(note.aliases)),
                    note.created, note.modified, int(note.archived), note.fingerprint,
                    note.content_hash if content_hash is None else content_hash, time.time(),
                ),
            )
            rowid = self.db.last_insert_rowid()
            for tag in {t.lower() for t in note.tags}:
                self.db.execute("INSERT INTO note_tags(note, tag) VALUES (?, ?)", (rowid, tag))
            if title is not None:
                emb = self.db.execute("SELECT id FROM embeddings WHERE hash = ?",
                                      (title,)).fetchone()
                if emb is None:
                    raise ValueError(f"no stored embedding for the title of {note.note_id}")
                # A vector only: no chunk, no FTS row (the title is in every chunk's).
                self.db.execute("INSERT INTO titles(note, embedding) VALUES (?, ?)",
                                (rowid, emb[0]))
                titled.append((rowid, emb[0]))
            self._chunks_changed()
            for chunk, url, h in chunks:
                emb = self.db.execute("SELECT id FROM embeddings WHERE hash = ?", (h,)).fetchone()
                if emb is None:
                    raise ValueError(f"no stored embedding for chunk {chunk.seq} of {note.note_id}")
                self.db.execute(
                    """INSERT INTO chunks(note, seq, heading_path, anchor, url, text, embedding)
                       VALUES (?,?,?,?,?,?,?)""",
                    (rowid, chunk.seq, " > ".join(chunk.heading_path), chunk.anchor, url,
                     chunk.text, emb[0]),
                )
                row = (self.db.last_insert_rowid(), *keywords.columns(
                    note.title, note.aliases, chunk.heading_path, chunk.text, note.tags))
                self.db.execute(
                    "INSERT INTO chunks_fts(rowid, title, heading, body, tags) VALUES (?,?,?,?,?)",
                    row)
                added.append((row[0], rowid, emb[0], *row[1:]))
        self.copies.follow(before, removed, added, [old[0]] if old else [], titled)

    def touch_note(self, note_id: str, fingerprint: str, url: str | None = None,
                   created: float | None = None, modified: float | None = None) -> None:
        """Record a new fingerprint (and link, dates when given) for a note whose content
        did not change."""
        with self.db:
            self.db.execute(
                "UPDATE notes SET fingerprint = ?, url = coalesce(?, url), "
                "created = coalesce(?, created), modified = coalesce(?, modified) "
                "WHERE note_id = ?",
                (fingerprint, url, created, modified, note_id),
            )

    def delete_note(self, note_id: str) -> None:
        removed: list[int] = []
        with self.db:
            before = sql.chunks_epoch(self.db)
            row = self.db.execute("SELECT id FROM notes WHERE note_id = ?", (note_id,)).fetchone()
            if row:
                self._chunks_changed()
                removed = self._delete_rows(row[0])
        if row:
            self.copies.follow(before, removed, [], [row[0]])

    def _chunks_changed(self) -> None:
        """Inside a write transaction that changes chunks: move ``chunks_epoch``, which the
        in-memory copies (keywords, vocabulary) and the searcher's caches follow."""
        self.db.execute("INSERT INTO meta(key, value) VALUES ('chunks_epoch', ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (os.urandom(8).hex(),))

    def _delete_rows(self, rowid: int) -> list[int]:
        """Delete a note's rows; returns the ids of the chunks that went. The caller moves
        the chunks epoch (once per transaction)."""
        chunk_ids = [r[0] for r in self.db.execute("SELECT id FROM chunks WHERE note = ?",
                                                   (rowid,))]
        # Virtual tables see no foreign keys: clear the FTS rows by hand first.
        self.db.execute(
            "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE note = ?)",
            (rowid,),
        )
        self.db.execute("DELETE FROM notes WHERE id = ?", (rowid,))
        return chunk_ids

    def drop_source(self, source: str) -> int:
        ids = [r[0] for r in self.db.execute("SELECT note_id FROM notes WHERE source = ?",
                                             (source,))]
        for note_id in ids:
            self.delete_note(note_id)
        with self.db:
            self.db.execute("DELETE FROM sources WHERE name = ?", (source,))
        return len(ids)

    def prune_embeddings(self, keep_ratio: float = 0.2) -> int:
        """Drop vectors no chunk or title uses once they exceed ``keep_ratio`` of the live
        ones (kept until then so a renamed or re-added note costs no model time)."""
        unused = self.db.execute(f"SELECT count(*) FROM embeddings WHERE {_UNUSED}"
                                 ).fetchone()[0]
        live = self.db.execute("SELECT count(*) FROM embeddings").fetchone()[0] - unused
        if unused <= max(200, keep_ratio * live):
            return 0
        with self.db:
            # Ids may be reused after a deletion: a new epoch tells in-memory copies of the
            # vectors (``vector_cache``) to reload rather than extend.
            schema.write_meta(self.db, "vectors_epoch", os.urandom(8).hex())
            self.db.execute(
                f"DELETE FROM vectors WHERE rowid IN (SELECT id FROM embeddings WHERE {_UNUSED})")
            self.db.execute(f"DELETE FROM embeddings WHERE {_UNUSED}")
        return unused

    def record_sync(self, source: str, kind: str, error: str | None = None,
                    pending: int = 0, offloaded: int | None = None,
                    links_out: Sequence[str] = ()) -> None:
        """``offloaded``: notes a cloud drive keeps online only, None when the scan could
        not tell (the last count stays, as do ``links_out``: the links out of the source's
        folder the scan skipped)."""
        now = time.time()
        # behind_since: since when the index has not reflected the source (changes left
        # to apply, or failing syncs); cleared by a complete, error-free sync.
        behind = now if error is not None or pending else None
        state = None if offloaded is None else json.dumps(
            {"offloaded": offloaded, "links_out": len(links_out),
             "link_out": links_out[0] if links_out else None})
        with self.db:
            self.db.execute(
                """INSERT INTO sources(name, kind, last_sync, last_error, pending, behind_since,
                                       state)
                   VALUES (?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(name) DO UPDATE SET kind = excluded.kind,
                     last_sync = CASE WHEN excluded.last_error IS NULL
                                 THEN excluded.last_sync ELSE sources.last_sync END,
                     last_error = excluded.last_error, pending = excluded.pending,
                     behind_since = CASE WHEN excluded.behind_since IS NULL THEN NULL
                                    ELSE coalesce(sources.behind_since, excluded.behind_since)
                                    END,
                     state = coalesce(excluded.state, sources.state)""",
                (source, kind, now if error is None else None, error, pending, behind, state),
            )

    def mark_pending(self, source: str, kind: str, pending: int) -> None:
        """Record that a sync found ``pending`` notes to apply (seen by `status` meanwhile)."""
        with self.db:
            self.db.execute(
                """INSERT INTO sources(name, kind, pending, behind_since) VALUES (?, ?, ?, ?)
                   ON CONFLICT(name) DO UPDATE SET pending = excluded.pending,
                     behind_since = coalesce(sources.behind_since, excluded.behind_since)""",
                (source, kind, pending, time.time()),
            )

    def import_vectors(self, path: str) -> None:
        """Store every vector of the index file at ``path``, if it was built with this
        embedder, under the same content hashes: a rebuild beside it then embeds only
        what is new. Best effort: a damaged file has nothing to give."""
        if not os.path.exists(path):
            return
        old = None
        try:
            old = connect(path)
            if schema.read_meta(old).get("embedder") != self.settings.embedder:
                return
            rows = old.execute(
                "SELECT e.hash, v.embedding FROM embeddings e JOIN vectors v ON v.rowid = e.id")
            batch_h: list[str] = []
            batch_v: list[np.ndarray] = []
            for h, blob in rows:
                batch_h.append(h)
                batch_v.append(np.frombuffer(blob, dtype=np.float32))
                if len(batch_h) >= 2000:
                    self.add_embeddings(batch_h, np.stack(batch_v))
                    batch_h, batch_v = [], []
            if batch_h:
                self.add_embeddings(batch_h, np.stack(batch_v))
        except Exception as e:  # a damaged old index has nothing to give; rebuild from scratch
            log.warning("could not reuse vectors from %s: %s", path, e)
        finally:
            if old is not None:
                old.close()

    def carry_notes(self, path: str, source: str, keep: Callable[[str], bool]
                    ) -> int | None:
        """Copy from the index file at ``path`` the rows of ``source``'s notes for which
        ``keep(note_id)`` is true (a rebuild: notes its scan could not read), with their
        vectors; returns how many, or None when that file's rows cannot be used (another
        model, damaged). A missing file has nothing to carry: 0. The passages keep the
        cut of the chunker that made them; an empty fingerprint and content hash make the
        first sync that can read a note read and cut it again (its vectors reused)."""
        if not os.path.exists(path):
            return 0
        old = None
        try:
            old = connect(path)
            meta = schema.read_meta(old)
            if (meta.get("embedder"), meta.get("dim")) != (self.settings.embedder,
                                                           str(self.settings.dim)):
                return None
            # A file of an older schema (never opened by this notewell) has no titles.
            has_titles = old.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                     "AND name = 'titles'").fetchone() is not None
            notes = [r for r in old.execute(
                """SELECT id, note_id, kind, title, path, url, tags, aliases, created,
                          modified, archived FROM notes WHERE source = ?""", (source,))
                     if keep(r[1])]
            for rowid, note_id, kind, title, file, url, tags, aliases, created, modified, \
                    archived in notes:
                chunks = old.execute(
                    """SELECT c.seq, c.heading_path, c.anchor, c.url, c.text, e.hash,
                              v.embedding
                       FROM chunks c JOIN embeddings e ON e.id = c.embedding
                       JOIN vectors v ON v.rowid = e.id WHERE c.note = ? ORDER BY c.seq""",
                    (rowid,)).fetchall()
                named = old.execute(
                    """SELECT e.hash, v.embedding FROM titles t
                       JOIN embeddings e ON e.id = t.embedding
                       JOIN vectors v ON v.rowid = e.id WHERE t.note = ?""", (rowid,)
                ).fetchall() if has_titles else []
                vectors = [(c[5], c[6]) for c in chunks] + named
                if vectors:
                    self.add_embeddings([h for h, _ in vectors], np.stack(
                        [np.frombuffer(v, dtype=np.float32) for _, v in vectors]))
                note = Note(note_id=note_id, source=source, kind=kind, title=title, text="",
                            url=url, path=file, tags=tuple(json.loads(tags)),
                            aliases=tuple(json.loads(aliases)), created=created,
                            modified=modified, archived=bool(archived))
                self.replace_note(note, [
                    (Chunk(seq, tuple(heading.split(" > ")) if heading else (), text,
                           anchor), chunk_url, h)
                    for seq, heading, anchor, chunk_url, text, h, _ in chunks],
                    content_hash="", title=named[0][0] if named else None)
            return len(notes)
        except Exception as e:  # a damaged old index has nothing to give
            log.warning("could not carry notes over from %s: %s", path, e)
            return None
        finally:
            if old is not None:
                old.close()

    # -- status ---------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        one = self.db.execute
        return {
            "notes": one("SELECT count(*) FROM notes").fetchone()[0],
            "chunks": one("SELECT count(*) FROM chunks").fetchone()[0],
            "embeddings": one("SELECT count(*) FROM embeddings").fetchone()[0],
        }

    def source_rows(self) -> list[dict]:
        rows = self.db.execute(
            """SELECT s.name, s.kind, s.last_sync, s.last_error, s.pending,
                      (SELECT count(*) FROM notes n WHERE n.source = s.name),
                      (SELECT count(*) FROM chunks c JOIN notes n ON n.id = c.note
                       WHERE n.source = s.name), s.behind_since, s.state
               FROM sources s ORDER BY s.name"""
        )
        keys = ("name", "kind", "last_sync", "last_error", "pending", "notes", "chunks",
                "behind_since")
        out = []
        for *values, state in rows:
            row = dict(zip(keys, values))
            row["offloaded"] = int(_state(state).get("offloaded") or 0)
            row["links_out"] = int(_state(state).get("links_out") or 0)
            row["link_out"] = _state(state).get("link_out")
            out.append(row)
        return out


# A stored vector that no passage and no title uses.
_UNUSED = ("id NOT IN (SELECT embedding FROM chunks) "
           "AND id NOT IN (SELECT embedding FROM titles)")


def _state(text: str | None) -> dict:
    """A source's ``state`` column: JSON counts a sync leaves for ``status``."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}

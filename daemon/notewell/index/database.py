"""The index: one SQLite file with notes, chunks, an FTS5 table and a sqlite-vec table.

Owns the schema (numbered migrations), the record of which embedder and chunker built
the index (never mixed: a mismatch raises ``IndexMismatch``), writes (one transaction per
note) and the two raw retrievers (vector k-NN and BM25). Ranking lives in ``search``.

Vectors are content-addressed: ``embeddings`` maps the sha256 of a chunk's embedded text
to a row id, and the ``vectors`` vec0 table holds the vector under that id. Editing one
paragraph re-embeds one chunk; renaming a file or rebuilding after a crash re-embeds none.

We use apsw rather than the standard ``sqlite3`` module: many Pythons (Apple's among them)
are built without extension loading, and apsw ships its own SQLite with FTS5 everywhere.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import apsw
import numpy as np
import sqlite_vec

from notewell.index import keywords
from notewell.index.keywords import COLUMN_WEIGHTS, KeywordIndex
from notewell.index.terms import FTS_TOKENIZER, Tokens, Vocabulary, read_vocabulary
from notewell.index.vector_cache import VectorCache
from notewell.memory import release_memory
from notewell.notes import Chunk, Note

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3
# Vectors per vec0 chunk, since the schema version that moved them (migration 3).
VECTOR_CHUNK = 64
VECTORS_MOVED = 3
# From this many vectors, k-NN re-scores its best 20 with their float vectors from SQLite
# (point lookups, ~40 us each in chunks of 64): on the synthetic 1M corpus (100 noisy
# copies of each passage) int8 scores alone give recall@10 0.973; at 100k 0.993 without.
EXACT_HEAD_FROM = 250_000
EXACT_HEAD = 20
# Up to this many vectors the in-memory copy is read on the query's own thread (a few
# milliseconds, once); beyond, in the background while sqlite-vec's exact scan answers
# (8 ms at 5,000 vectors, 75 at 100,000; the copy answers in 0.3-2 ms).
VECTOR_LOAD_INLINE = 2000
# Up to this many chunks the vocabulary is re-read on the query's thread after a change
# (about 3 ms per 1,000 chunks); beyond, in the background.
VOCAB_LOAD_INLINE = 5_000
# Seconds the chunks must stay unchanged before the keyword copy is rebuilt.
KEYWORDS_QUIET = 2.0
# New vectors fetched on the query's own thread (an edit adds a few); more load behind it.
VECTOR_PULL_INLINE = 256


class IndexProblem(Exception):
    """Base for index problems the user can act on."""


class IndexMismatch(IndexProblem):
    """The index was built with another model, chunker or schema."""


class IndexCorrupt(IndexProblem):
    """The file is not a usable SQLite database."""


def _migrations(dim: int) -> list[list[str]]:
    """Migration N brings ``user_version`` from N to N+1. Append; never edit a shipped one."""
    return [
        [
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            """CREATE TABLE sources (
                name TEXT PRIMARY KEY, kind TEXT NOT NULL, last_sync REAL, last_error TEXT,
                pending INTEGER NOT NULL DEFAULT 0, behind_since REAL, state TEXT)""",
            """CREATE TABLE notes (
                id INTEGER PRIMARY KEY, note_id TEXT NOT NULL UNIQUE, source TEXT NOT NULL,
                kind TEXT NOT NULL, title TEXT NOT NULL, path TEXT, url TEXT NOT NULL,
                tags TEXT NOT NULL DEFAULT '[]', aliases TEXT NOT NULL DEFAULT '[]',
                created REAL, modified REAL, archived INTEGER NOT NULL DEFAULT 0,
                fingerprint TEXT NOT NULL, content_hash TEXT NOT NULL, indexed_at REAL)""",
            "CREATE INDEX notes_source ON notes(source)",
            """CREATE TABLE note_tags (
                note INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
                tag TEXT NOT NULL COLLATE NOCASE, PRIMARY KEY (note, tag)) WITHOUT ROWID""",
            "CREATE INDEX note_tags_tag ON note_tags(tag)",
            "CREATE TABLE embeddings (id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE)",
            """CREATE TABLE chunks (
                id INTEGER PRIMARY KEY,
                note INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
                seq INTEGER NOT NULL, heading_path TEXT NOT NULL, anchor TEXT,
                url TEXT NOT NULL, text TEXT NOT NULL,
                embedding INTEGER NOT NULL REFERENCES embeddings(id))""",
            "CREATE INDEX chunks_note ON chunks(note, seq)",
            "CREATE INDEX chunks_embedding ON chunks(embedding)",
            f"""CREATE VIRTUAL TABLE chunks_fts USING fts5(
                title, heading, body, tags, content='', contentless_delete=1,
                tokenize='{FTS_TOKENIZER}')""",
            f"""CREATE VIRTUAL TABLE vectors USING vec0(
                embedding float[{dim}] distance_metric=cosine)""",
        ],
        # 2: prefix indexes for the word being typed ("da*", "dai*"): FTS5 answered those
        # by expanding every matching term, 25-35% of a keystroke's BM25 time.
        [
            f"""CREATE VIRTUAL TABLE chunks_fts_new USING fts5(
                title, heading, body, tags, content='', contentless_delete=1,
                tokenize='{FTS_TOKENIZER}', prefix='2 3')""",
            """INSERT INTO chunks_fts_new(rowid, title, heading, body, tags)
               SELECT c.id,
                      n.title || coalesce((SELECT ' ' || group_concat(value, ' ')
                                           FROM json_each(n.aliases)), ''),
                      replace(c.heading_path, ' > ', ' '), c.text,
                      coalesce((SELECT group_concat(value, ' ') FROM json_each(n.tags)), '')
               FROM chunks c JOIN notes n ON n.id = c.note""",
            "DROP TABLE chunks_fts",
            "ALTER TABLE chunks_fts_new RENAME TO chunks_fts",
        ],
        # 3: vectors in chunks of 64 instead of vec0's 1,024. vec0 reads one vector by
        # walking the overflow pages of its chunk's blob (1.5 MB at 1,024): measured on
        # 200,000 vectors, a point lookup took 0.22 ms instead of 0.04, reading every
        # vector (the in-memory copy's load) 14.3 s instead of 0.95, an insert 48 us
        # instead of 10; its own exact scan took the same. vec0 cannot be renamed, so the
        # rows go through a plain table.
        [
            "CREATE TABLE vectors_moving (id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)",
            "INSERT INTO vectors_moving SELECT rowid, embedding FROM vectors",
            "DROP TABLE vectors",
            f"""CREATE VIRTUAL TABLE vectors USING vec0(
                embedding float[{dim}] distance_metric=cosine, chunk_size={VECTOR_CHUNK})""",
            "INSERT INTO vectors(rowid, embedding) SELECT id, embedding FROM vectors_moving",
            "DROP TABLE vectors_moving",
        ],
    ]


@dataclass(frozen=True)
class BuildSettings:
    """What the index records about how it was built; all must match to reuse it."""

    embedder: str
    dim: int
    chunker: str

    def as_meta(self) -> dict[str, str]:
        return {"embedder": self.embedder, "dim": str(self.dim), "chunker": self.chunker}


@dataclass(frozen=True)
class StoredNote:
    rowid: int
    note_id: str
    fingerprint: str
    content_hash: str


def connect(path: str) -> apsw.Connection:
    """A connection with sqlite-vec loaded and the pragmas notewell relies on."""
    flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    conn = apsw.Connection(path, flags=flags)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.set_busy_timeout(5000)
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    # 1 MB of page cache per connection (SQLite's default is 2): the daemon keeps one per
    # worker thread, and the in-memory copies answer the scans that would need more.
    conn.execute("PRAGMA cache_size=-1024")
    return conn


class Index:
    """A notewell index file. Safe to share between threads: each thread gets its own
    connection, and SQLite's WAL lets readers see the last commit while a sync writes."""

    def __init__(self, path: str, settings: BuildSettings) -> None:
        self.path = path
        self.settings = settings
        self._local = threading.local()
        self._conns: list[apsw.Connection] = []
        self._conns_lock = threading.Lock()
        # The in-memory copy of the vectors that k-NN and re-scoring read (see
        # ``vector_cache``); ``use_vector_copy = False`` leaves every k-NN to sqlite-vec
        # (benchmarks compare the two).
        self.use_vector_copy = True
        self.vector_load_inline = VECTOR_LOAD_INLINE
        self._vcache: VectorCache | None = None
        self._vcache_lock = threading.Lock()
        self._loading: dict[str, threading.Thread] = {}  # background loads by name
        self._vocab: Vocabulary | None = None
        # The in-memory keyword copy (``keywords``), built behind the searches.
        self.use_keyword_copy = True
        self._keywords: KeywordIndex | None = None
        self._epoch_seen: tuple[str, float] = ("", 0.0)
        self._closed = False
        # Set by ``store.open_current`` when this file replaced a damaged one: the daemon
        # reports "rebuilding" until a first full sync has filled it again.
        self.recovered_from: str | None = None
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._prepare()

    # -- connections and schema --------------------------------------------------------

    @property
    def db(self) -> apsw.Connection:
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
        self._closed = True
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()

    def _prepare(self) -> None:
        # A truncated or overwritten file may pass the header check and fail on the first
        # page read: either way it is a damaged index, for ``store`` to move aside.
        try:
            self._migrate()
        except (apsw.CorruptError, apsw.NotADBError) as e:
            self.close()
            raise IndexCorrupt(f"{self.path} is damaged: {e}") from None
        except IndexCorrupt:
            self.close()
            raise

    def _migrate(self) -> None:
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
        except apsw.NotADBError:
            raise IndexCorrupt(f"{self.path} is not a SQLite database") from None
        migrations = _migrations(self.settings.dim)
        if version > len(migrations):
            raise IndexMismatch(
                f"index schema {version} is newer than this notewell ({len(migrations)}): "
                "upgrade notewell or run `notewell index --rebuild`"
            )
        if version == 0:
            tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise IndexCorrupt(f"{self.path} holds tables but no notewell schema")
        if 0 < version < len(migrations):
            log.info("upgrading %s from schema %d to %d, once%s", self.path, version,
                     len(migrations), " (moving the vectors: about 15 s per 100,000)"
                     if version < VECTORS_MOVED else "")
        for n in range(version, len(migrations)):
            with self.db:
                for statement in migrations[n]:
                    self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version={n + 1}")
        if 0 < version < VECTORS_MOVED:
            self._compact()  # the old vectors' pages are free now
        with self.db:
            stored = self.meta()
            if not stored:
                for key, value in self.settings.as_meta().items():
                    self.set_meta(key, value)
                self.set_meta("created", str(time.time()))
        self.check_settings()

    def _compact(self) -> None:
        """Give free pages back to the file system (2.3 s at 100k chunks). Best effort:
        on a disk without room for the copy VACUUM writes (or any other refusal) the
        pages stay free in the file and later writes reuse them."""
        try:
            self.db.execute("VACUUM")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except apsw.Error as e:
            log.warning("could not compact %s (%s); its free pages will be reused",
                        self.path, e)

    def check_settings(self) -> None:
        stored = self.meta()
        for key, want in self.settings.as_meta().items():
            have = stored.get(key)
            if have != want:
                raise IndexMismatch(
                    f"the index was built with {key} {have!r}, but notewell now uses "
                    f"{want!r}: run `notewell index --rebuild`"
                )

    def integrity_check(self, quick: bool = False) -> list[str]:
        pragma = "quick_check" if quick else "integrity_check"
        try:
            rows = self.db.execute(f"PRAGMA {pragma}").fetchall()
        except (apsw.CorruptError, apsw.NotADBError) as e:
            return [f"{pragma} failed: {e}"]
        return [line for r in rows if r[0] != "ok" for line in str(r[0]).splitlines()]

    def consistency_problems(self) -> list[str]:
        """What breaks the one-to-one links between notes, chunks, FTS rows and vectors
        (empty when consistent). Slower than ``integrity_check``: for tests and
        ``bench/load.py``.

        Every chunk belongs to a note and has exactly one FTS row and one stored vector;
        every FTS row is a chunk's; ``embeddings`` and ``vectors`` hold the same ids (a
        vector no chunk uses is allowed: it is kept for reuse until pruned)."""
        one = self.db.execute
        problems: list[str] = []

        def ids(sql: str) -> set[int]:
            return {r[0] for r in one(sql)}

        try:
            problems += self.integrity_check()
            problems += [f"foreign key: {r}" for r in one("PRAGMA foreign_key_check")]
            one("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 0)")
        except apsw.Error as e:
            problems.append(f"check failed: {type(e).__name__}: {e}")
        chunks = ids("SELECT id FROM chunks")
        fts = ids("SELECT rowid FROM chunks_fts")
        embeddings = ids("SELECT id FROM embeddings")
        vectors = ids("SELECT rowid FROM vectors")
        for label, found in (
            ("chunks without an FTS row", chunks - fts),
            ("FTS rows without a chunk", fts - chunks),
            ("embeddings without a vector", embeddings - vectors),
            ("vectors without an embedding row", vectors - embeddings),
            ("chunks whose embedding is missing",
             ids("SELECT id FROM chunks WHERE embedding NOT IN (SELECT id FROM embeddings)")),
            ("chunks of missing notes",
             ids("SELECT id FROM chunks WHERE note NOT IN (SELECT id FROM notes)")),
            ("tags of missing notes",
             ids("SELECT note FROM note_tags WHERE note NOT IN (SELECT id FROM notes)")),
        ):
            if found:
                problems.append(f"{len(found)} {label} (e.g. {sorted(found)[:5]})")
        dup = one("SELECT note, seq FROM chunks GROUP BY note, seq HAVING count(*) > 1"
                  ).fetchall()
        if dup:
            problems.append(f"{len(dup)} duplicate (note, seq) chunk pairs, e.g. {dup[:3]}")
        return problems

    def meta(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT key, value FROM meta").fetchall())

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # -- writes ------------------------------------------------------------------------

    def stored_notes(self, source: str) -> dict[str, StoredNote]:
        rows = self.db.execute(
            "SELECT id, note_id, fingerprint, content_hash FROM notes WHERE source = ?",
            (source,),
        )
        return {r[1]: StoredNote(*r) for r in rows}

    def missing_embeddings(self, hashes: Iterable[str]) -> set[str]:
        wanted = set(hashes)
        if not wanted:
            return set()
        found = set()
        items = list(wanted)
        for i in range(0, len(items), 500):
            part = items[i : i + 500]
            marks = ",".join("?" * len(part))
            found.update(
                r[0]
                for r in self.db.execute(
                    f"SELECT hash FROM embeddings WHERE hash IN ({marks})", part
                )
            )
        return wanted - found

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

    def replace_note(self, note: Note, chunks: Sequence[tuple[Chunk, str, str]]) -> None:
        """Replace a note's rows in one transaction.

        ``chunks`` holds (chunk, url, embedding hash); every hash must already be stored
        with ``add_embeddings``."""
        removed: list[int] = []
        added: list[keywords.Row] = []
        with self.db:
            before = self.chunks_epoch()
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
                    note.content_hash, time.time(),
                ),
            )
            rowid = self.db.last_insert_rowid()
            for tag in {t.lower() for t in note.tags}:
                self.db.execute("INSERT INTO note_tags(note, tag) VALUES (?, ?)", (rowid, tag))
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
        self._keywords_follow(before, removed, added)

    def touch_note(self, note_id: str, fingerprint: str, url: str | None = None) -> None:
        """Record a new fingerprint for a note whose content did not change."""
        with self.db:
            self.db.execute(
                "UPDATE notes SET fingerprint = ?, url = coalesce(?, url) WHERE note_id = ?",
                (fingerprint, url, note_id),
            )

    def delete_note(self, note_id: str) -> None:
        removed: list[int] = []
        with self.db:
            before = self.chunks_epoch()
            row = self.db.execute("SELECT id FROM notes WHERE note_id = ?", (note_id,)).fetchone()
            if row:
                self._chunks_changed()
                removed = self._delete_rows(row[0])
        if removed:
            self._keywords_follow(before, removed, [])

    def _keywords_follow(self, before: str, removed: list[int],
                         added: list[keywords.Row]) -> None:
        """After a committed write that took the chunks from epoch ``before`` to now: bring
        a keyword copy that was current along (``KeywordIndex.with_changes``), so a sync of
        a few notes does not cost a rebuild; a stale copy waits for one."""
        copy = self._keywords
        if copy is None or copy.epoch != before or self.path == ":memory:":
            return
        moved = copy.with_changes(removed, added, Tokens(self.db), self.chunks_epoch())
        if moved is not None:  # else too much changed: stale, rebuilt once writes settle
            self._keywords = moved

    def _chunks_changed(self) -> None:
        """Inside a write transaction that changes chunks: move ``chunks_epoch``, which the
        in-memory copies (keywords, vocabulary) and the searcher's caches follow."""
        self.db.execute("INSERT INTO meta(key, value) VALUES ('chunks_epoch', ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (os.urandom(8).hex(),))

    def chunks_epoch(self) -> str:
        return _chunks_epoch(self.db)

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
        """Drop vectors no chunk uses once they exceed ``keep_ratio`` of the live ones
        (kept until then so a renamed or re-added note costs no model time)."""
        unused = self.db.execute(
            "SELECT count(*) FROM embeddings WHERE id NOT IN (SELECT embedding FROM chunks)"
        ).fetchone()[0]
        live = self.db.execute("SELECT count(*) FROM embeddings").fetchone()[0] - unused
        if unused <= max(200, keep_ratio * live):
            return 0
        with self.db:
            # Ids may be reused after a deletion: a new epoch tells in-memory copies of the
            # vectors (``vector_cache``) to reload rather than extend.
            self.set_meta("vectors_epoch", os.urandom(8).hex())
            self.db.execute(
                "DELETE FROM vectors WHERE rowid IN "
                "(SELECT id FROM embeddings WHERE id NOT IN (SELECT embedding FROM chunks))"
            )
            self.db.execute(
                "DELETE FROM embeddings WHERE id NOT IN (SELECT embedding FROM chunks)"
            )
        return unused

    def record_sync(self, source: str, kind: str, error: str | None = None,
                    pending: int = 0) -> None:
        now = time.time()
        # behind_since: since when the index has not reflected the source (changes left
        # to apply, or failing syncs); cleared by a complete, error-free sync.
        behind = now if error is not None or pending else None
        with self.db:
            self.db.execute(
                """INSERT INTO sources(name, kind, last_sync, last_error, pending, behind_since)
                   VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT(name) DO UPDATE SET kind = excluded.kind,
                     last_sync = CASE WHEN excluded.last_error IS NULL
                                 THEN excluded.last_sync ELSE sources.last_sync END,
                     last_error = excluded.last_error, pending = excluded.pending,
                     behind_since = CASE WHEN excluded.behind_since IS NULL THEN NULL
                                    ELSE coalesce(sources.behind_since, excluded.behind_since)
                                    END""",
                (source, kind, now if error is None else None, error, pending, behind),
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

    # -- reads ---------------------------------------------------------------------------

    def knn(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(embedding id, cosine distance) of the ``k`` nearest stored vectors.

        From the in-memory copy (``vector_cache``: exact up to 5,000 vectors, quantized
        with recall@10 >= 0.98 beyond), read on the spot for small indexes; sqlite-vec
        answers exactly while a large index's copy loads, or with ``use_vector_copy`` off.
        From ``EXACT_HEAD_FROM`` vectors, the best ``EXACT_HEAD`` are re-scored with
        their float vectors: int8 scores (within 1e-3) cannot order near-ties there."""
        cache = self._vector_cache()
        if cache is not None:
            if cache.quantized and cache.n >= EXACT_HEAD_FROM:
                return self._exact_head(vector, cache.search(vector, max(k, EXACT_HEAD)))[:k]
            return cache.search(vector, k)
        rows = self.db.execute(
            "SELECT rowid, distance FROM vectors WHERE embedding MATCH ? AND k = ? "
            "ORDER BY distance",
            (np.asarray(vector, dtype=np.float32).tobytes(), k),
        )
        return [(r[0], r[1]) for r in rows]

    def _exact_head(self, vector: np.ndarray, found: list[tuple[int, float]]
                    ) -> list[tuple[int, float]]:
        """``found`` with its first ``EXACT_HEAD`` distances made exact and re-ordered."""
        head = found[:EXACT_HEAD]
        stored = self._stored_vectors([i for i, _ in head])
        q = np.asarray(vector, dtype=np.float32)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        exact = [(i, float(1.0 - stored[i] @ q) if i in stored else d) for i, d in head]
        return sorted(exact, key=lambda x: (x[1], x[0])) + found[EXACT_HEAD:]

    def _stored_vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Float vectors from SQLite, one point lookup each: ``vec0`` answers ``rowid IN
        (...)`` by scanning every chunk of vectors (320 ms at 1M), a lookup in ~40 us
        (it walks the overflow pages of its chunk's blob: 96 KB since migration 3)."""
        out = {}
        # As Python ints: apsw binds a numpy integer as a blob, which matches no rowid.
        for i in dict.fromkeys(map(int, ids)):
            row = self.db.execute("SELECT embedding FROM vectors WHERE rowid = ?",
                                  (i,)).fetchone()
            if row is not None:
                out[i] = np.frombuffer(row[0], dtype=np.float32)
        return out

    # -- the in-memory vector copy -----------------------------------------------------------

    def _vector_cache(self) -> VectorCache | None:
        """The in-memory copy to answer from, or ``None`` for the exact scan in SQLite.

        Up to date after a few new vectors (an edit: fetched here, ~20 us each). After
        many (a bulk sync) it answers without the newest while they load in the
        background; after a deletion (a new epoch) it is not used until reloaded. A small
        index (or ":memory:", whose rows no other connection sees) is read here and now."""
        if self._closed or not self.use_vector_copy:
            return None
        epoch, max_id = _vector_state(self.db)
        cache = self._vcache
        if cache is not None and cache.epoch == epoch:
            if cache.max_id == max_id:
                return cache
            if max_id - cache.max_id <= VECTOR_PULL_INLINE and self._pull(cache, self.db):
                return cache
        if self.path == ":memory:" or max_id <= self.vector_load_inline:
            with self._vcache_lock:
                self._vcache = _read_vectors(self.db, self.settings.dim)
            return self._vcache
        self.warm_vectors()
        return cache if cache is not None and cache.epoch == epoch else None

    def content_stamp(self) -> tuple[str, int, str]:
        """Changes whenever chunks or vectors change, through any connection: results
        cached under it stay right until it moves."""
        return (*_vector_state(self.db), self.chunks_epoch())

    def vector_matrix(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Which embedding ids are stored (a mask over ``ids``) and their vectors as the
        rows of one matrix: from the in-memory copy (exact, or decoded from int8 within
        ~1e-3 when quantized), or from SQLite while the copy loads."""
        cache = self._vector_cache()
        if cache is not None:
            return cache.matrix(list(ids))
        rows = self._stored_vectors(ids)
        found = np.array([i in rows for i in ids], dtype=bool)
        matrix = (np.stack([rows[i] for i in ids if i in rows]) if rows
                  else np.zeros((0, self.settings.dim), dtype=np.float32))
        return found, matrix

    def warm_vectors(self, wait: bool = False) -> None:
        """Load (or bring up to date) the in-memory vector copy in a background thread;
        a daemon calls this at start so the first query does not pay for it."""
        if self.path == ":memory:" or self._closed or not self.use_vector_copy:
            return
        self._in_background("vectors", self._load_vectors, wait)

    def _in_background(self, what: str, load: Callable[[apsw.Connection], None],
                       wait: bool = False) -> None:
        """Run ``load`` on a connection of its own in a background thread, one per
        ``what`` at a time."""
        with self._vcache_lock:
            thread = self._loading.get(what)
            if thread is None:
                thread = self._loading[what] = threading.Thread(
                    target=self._run_loader, args=(what, load), name=f"notewell-{what}",
                    daemon=True)
                thread.start()
        if wait:
            thread.join()

    def _run_loader(self, what: str, load: Callable[[apsw.Connection], None]) -> None:
        conn = None
        try:
            conn = connect(self.path)
            load(conn)
        except apsw.Error:  # closed or replaced meanwhile: the next query starts again
            pass
        finally:
            if conn is not None:
                conn.close()
            release_memory()  # loading goes through batches several times a copy's size
            with self._vcache_lock:
                self._loading.pop(what, None)

    def _pull(self, cache: VectorCache, db: apsw.Connection) -> bool:
        """Append vectors newer than the cache's; ``False`` if the epoch moved meanwhile."""
        with self._vcache_lock:
            if cache.max_id >= _vector_state(db)[1]:
                return True
            with db:  # one read transaction: the state and the rows agree
                epoch, max_id = _vector_state(db)
                if epoch != cache.epoch:
                    return False
                rows = db.execute(
                    "SELECT e.id, v.embedding FROM embeddings e JOIN vectors v "
                    "ON v.rowid = e.id WHERE e.id > ? AND e.id <= ? ORDER BY e.id",
                    (cache.max_id, max_id)).fetchall()
            _append_rows(cache, rows, max_id)
            return True

    def _load_vectors(self, conn: apsw.Connection) -> None:
        cache = self._vcache
        epoch, _ = _vector_state(conn)
        if cache is None or cache.epoch != epoch or not self._pull(cache, conn):
            cache = _read_vectors(conn, self.settings.dim, lambda: self._closed)
            if cache is not None:
                self._vcache = cache

    def vocabulary(self) -> Vocabulary:
        """The indexed terms with their document frequencies (``terms.Vocabulary``).

        The keyword copy's when it is current, else read from FTS5 here after a change on
        a small index. A large one answers with the last it has (the copy's, or FTS5's
        read in the background): document frequencies that lag an edit by a moment weigh
        words all the same."""
        stamp = self.chunks_epoch()
        copy = self._keywords if self.use_keyword_copy else None
        if copy is not None and (copy.epoch == stamp or copy.chunks > VOCAB_LOAD_INLINE):
            self._vocab = None  # the copy's own serves; no second list of every term
            return copy.vocabulary()
        vocab = self._vocab
        if vocab is not None and vocab.stamp == stamp:
            return vocab
        if vocab is None or vocab.chunks <= VOCAB_LOAD_INLINE or self.path == ":memory:":
            self._vocab = read_vocabulary(self.db, stamp)
            return self._vocab
        self._in_background("vocabulary", self._load_vocabulary)
        return vocab

    def _load_vocabulary(self, conn: apsw.Connection) -> None:
        self._vocab = read_vocabulary(conn, _chunks_epoch(conn))

    def copies(self) -> dict[str, int | None]:
        """Bytes held by the in-memory copies (vectors, keywords); None where not loaded."""
        vectors, words = self._vcache, self._keywords
        return {"vectors": vectors.nbytes() if vectors is not None else None,
                "keywords": words.nbytes() if words is not None else None}

    def keywords(self) -> KeywordIndex | None:
        """The in-memory keyword copy (``keywords``) if it matches the index now; else None
        (FTS5 answers) while a new one is built behind."""
        if self._closed or not self.use_keyword_copy:
            return None
        epoch, now = self.chunks_epoch(), time.monotonic()
        copy = self._keywords
        if copy is not None and copy.epoch == epoch:
            return copy
        # Rebuild once the chunks have been still for a moment: during a burst of edits
        # a rebuild would compete with the syncs (one edit in 10,000 notes became
        # searchable in 0.76 s instead of 0.3) and be stale before it finished.
        if self._epoch_seen[0] != epoch:
            self._epoch_seen = (epoch, now)
        if copy is None or now - self._epoch_seen[1] >= KEYWORDS_QUIET:
            self.warm_keywords()
        return None

    def warm_keywords(self, wait: bool = False) -> None:
        """Build the keyword copy (in the background unless ``wait``)."""
        if self._closed or not self.use_keyword_copy:
            return
        if self.path == ":memory:":  # no other connection sees its rows: build here
            self._keywords = _read_keywords(self.db)
            return
        self._in_background("keywords", self._load_keywords, wait)

    def _load_keywords(self, conn: apsw.Connection) -> None:
        copy = _read_keywords(conn, lambda: self._closed)
        if copy is not None:
            self._keywords = copy

    def bm25(self, match: str, k: int, weights: Sequence[float] = COLUMN_WEIGHTS,
             notes: Iterable[int] | None = None) -> list[tuple[int, float]]:
        """(chunk id, bm25 score, lower is better) for an FTS5 MATCH expression, over the
        chunks of ``notes`` (note rowids) when given."""
        w = ", ".join(str(float(x)) for x in weights)
        within, args = "", (match, k)
        if notes is not None:
            within = ("AND rowid IN (SELECT id FROM chunks WHERE note IN "
                      "(SELECT value FROM json_each(?))) ")
            args = (match, json.dumps(sorted(notes)), k)
        rows = self.db.execute(
            f"SELECT rowid, bm25(chunks_fts, {w}) AS s FROM chunks_fts "
            f"WHERE chunks_fts MATCH ? {within}ORDER BY s LIMIT ?", args)
        return [(r[0], r[1]) for r in rows]

    def keyword_columns(self, chunk_ids: Iterable[int]
                        ) -> Iterator[tuple[int, str, str, str, str]]:
        """(chunk id, its four FTS5 columns as they were indexed) for ``chunk_ids``."""
        rows = _keyword_rows(self.db.execute(
            _KEYWORD_ROWS + " WHERE c.id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(chunk_ids)),)))
        return ((chunk_id, *columns) for chunk_id, _, _, *columns in rows)

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
                       WHERE n.source = s.name), s.behind_since
               FROM sources s ORDER BY s.name"""
        )
        keys = ("name", "kind", "last_sync", "last_error", "pending", "notes", "chunks",
                "behind_since")
        return [dict(zip(keys, r)) for r in rows]


def _chunks_epoch(db: apsw.Connection) -> str:
    row = db.execute("SELECT value FROM meta WHERE key = 'chunks_epoch'").fetchone()
    return row[0] if row else ""


_KEYWORD_ROWS = ("SELECT c.id, c.note, c.embedding, n.title, n.aliases, c.heading_path, "
                 "c.text, n.tags FROM chunks c JOIN notes n ON n.id = c.note")


def _keyword_rows(rows: Iterable[tuple]) -> Iterator[keywords.Row]:
    """Rows of ``_KEYWORD_ROWS`` as (chunk id, note row, embedding id, the four FTS5
    columns as indexed)."""
    for chunk_id, note, vector, title, aliases, heading, text, tags in rows:
        yield (chunk_id, note, vector, *keywords.columns(title, json.loads(aliases), heading,
                                                         text, json.loads(tags)))


def _read_keywords(conn: apsw.Connection, cancelled: Callable[[], bool] = lambda: False
                   ) -> KeywordIndex | None:
    """A keyword copy of every chunk, read in one transaction (None if cancelled)."""
    with conn:  # the epoch and the rows agree
        epoch = _chunks_epoch(conn)
        rows = conn.execute(_KEYWORD_ROWS + " ORDER BY c.id")
        return keywords.build(_keyword_rows(rows), Tokens(conn), COLUMN_WEIGHTS, epoch,
                              cancelled)


def _vector_state(db: apsw.Connection) -> tuple[str, int]:
    """What ties a vector copy to the index: the epoch (changed by every deletion) and the
    highest vector id (new vectors get higher ones)."""
    row = db.execute(
        "SELECT (SELECT value FROM meta WHERE key = 'vectors_epoch'), "
        "(SELECT max(id) FROM embeddings)").fetchone()
    return row[0] or "", row[1] or 0


def _read_vectors(conn: apsw.Connection, dim: int,
                  cancelled: Callable[[], bool] = lambda: False) -> VectorCache | None:
    """A new copy of every stored vector, read in one transaction (None if cancelled)."""
    cache = VectorCache(dim)
    with conn:
        cache.epoch, max_id = _vector_state(conn)
        batch: list[tuple[int, bytes]] = []
        for row in conn.execute("SELECT rowid, embedding FROM vectors"):
            batch.append(row)
            if len(batch) >= 8192:
                _append_rows(cache, batch)
                batch = []
                if cancelled():
                    return None
        _append_rows(cache, batch, max_id)
    return cache


def _append_rows(cache: VectorCache, rows: list[tuple[int, bytes]], max_id: int = 0) -> None:
    if rows:
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        cache.append(ids, vectors.reshape(len(rows), cache.dim), max_id)
    elif max_id:
        cache.max_id = max(cache.max_id, max_id)

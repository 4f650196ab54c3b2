"""The index file's format: schema, numbered migrations, and the checks on a file.

Owns ``SCHEMA_VERSION`` and the numbered migrations that reach it (``_migrate_N``, listed
in ``MIGRATIONS``: append one; never edit a shipped one), ``connect`` (a connection with
sqlite-vec loaded and the pragmas notewell relies on), ``BuildSettings`` (the embedder and
chunker an index records, never mixed: a mismatch raises ``IndexMismatch``), the ``meta``
table, the errors an unusable file raises, and the checks: integrity, the one-to-one links
between notes, chunks, FTS rows and vectors, and what ``notewell doctor`` reads without
opening an ``Index`` (``probe``, ``describe``).

May import ``index.terms`` (the tokenizer the FTS5 table is created with) and
``index.cjk`` (what migration 4 writes), nothing else of notewell.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import apsw
import sqlite_vec

from notewell.index.cjk import has_cjk, segment
from notewell.index.terms import FTS_TOKENIZER

log = logging.getLogger(__name__)

# Vectors per vec0 chunk, since the schema version that moved them (migration 3).
VECTOR_CHUNK = 64
VECTORS_MOVED = 3


class IndexProblem(Exception):
    """Base for index problems the user can act on."""


class IndexMismatch(IndexProblem):
    """The index was built with another model, chunker or schema."""


class ChunkerChanged(IndexMismatch):
    """The index was cut by another chunker, with the same model: its vectors still answer
    queries, and a rebuild beside it embeds only the passages whose text changed."""

    def __init__(self, message: str, stored: str) -> None:
        super().__init__(message)
        self.stored = stored


class IndexCorrupt(IndexProblem):
    """The file is not a usable SQLite database."""


# The FTS5 columns of every chunk as ``keywords.columns`` writes them, before CJK pairs.
_FTS_COLUMNS = """SELECT c.id,
           n.title || coalesce((SELECT ' ' || group_concat(value, ' ')
                                FROM json_each(n.aliases)), ''),
           replace(c.heading_path, ' > ', ' '), c.text,
           coalesce((SELECT group_concat(value, ' ') FROM json_each(n.tags)), '')
    FROM chunks c JOIN notes n ON n.id = c.note"""


def _migrate_1(db: apsw.Connection, dim: int) -> None:
    """The first schema: meta, sources, notes and their tags, content-addressed
    embeddings, chunks, the FTS5 table and the sqlite-vec table of ``dim`` floats."""
    for statement in (
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
    ):
        db.execute(statement)


def _migrate_2(db: apsw.Connection, dim: int) -> None:
    """Prefix indexes for the word being typed ("da*", "dai*"): FTS5 answered those by
    expanding every matching term, 25-35% of a keystroke's BM25 time. The FTS table is
    refilled from the chunks."""
    db.execute(f"""CREATE VIRTUAL TABLE chunks_fts_new USING fts5(
        title, heading, body, tags, content='', contentless_delete=1,
        tokenize='{FTS_TOKENIZER}', prefix='2 3')""")
    db.execute("INSERT INTO chunks_fts_new(rowid, title, heading, body, tags) "
               + _FTS_COLUMNS)
    db.execute("DROP TABLE chunks_fts")
    db.execute("ALTER TABLE chunks_fts_new RENAME TO chunks_fts")


def _migrate_3(db: apsw.Connection, dim: int) -> None:
    """Vectors in vec0 chunks of ``VECTOR_CHUNK`` (64) instead of 1,024. vec0 reads one
    vector by walking the overflow pages of its chunk's blob (1.5 MB at 1,024): measured
    on 200,000 vectors, a point lookup took 0.22 ms instead of 0.04, reading every vector
    (the in-memory copy's load) 14.3 s instead of 0.95, an insert 48 us instead of 10;
    its own exact scan took the same. vec0 cannot be renamed, so the rows go through a
    plain table. ``upgrade`` compacts the file afterwards."""
    for statement in (
        "CREATE TABLE vectors_moving (id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)",
        "INSERT INTO vectors_moving SELECT rowid, embedding FROM vectors",
        "DROP TABLE vectors",
        f"""CREATE VIRTUAL TABLE vectors USING vec0(
            embedding float[{dim}] distance_metric=cosine, chunk_size={VECTOR_CHUNK})""",
        "INSERT INTO vectors(rowid, embedding) SELECT id, embedding FROM vectors_moving",
        "DROP TABLE vectors_moving",
    ):
        db.execute(statement)


def _migrate_4(db: apsw.Connection, dim: int) -> None:
    """FTS rows of chunks with Chinese, Japanese or Korean text rewritten with those runs
    as character pairs (``cjk``); other rows, whose text is unchanged by it, are left as
    they are (an English index rewrites nothing)."""
    todo = [row for row in db.execute(_FTS_COLUMNS) if any(has_cjk(x) for x in row[1:])]
    if todo:
        log.info("re-indexing %d passages with Chinese, Japanese or Korean text", len(todo))
    for done, (rowid, *columns) in enumerate(todo, 1):
        db.execute("DELETE FROM chunks_fts WHERE rowid = ?", (rowid,))
        db.execute("INSERT INTO chunks_fts(rowid, title, heading, body, tags) "
                   "VALUES (?, ?, ?, ?, ?)", (rowid, *(segment(x) for x in columns)))
        if done % 5000 == 0:
            log.info("re-indexed %d of %d passages", done, len(todo))
    if todo:  # the keyword copies follow this value
        db.execute("INSERT INTO meta(key, value) VALUES ('chunks_epoch', "
                   "lower(hex(randomblob(8)))) "
                   "ON CONFLICT(key) DO UPDATE SET value = excluded.value")


def _migrate_5(db: apsw.Connection, dim: int) -> None:
    """Indexes of the notes' dates: date filters read the notes of a span from them, not
    from every row of the notes table (29 ms for ``since:1y`` over 33,000 notes, the
    table's pages beyond the 1 MB page cache each time)."""
    db.execute("CREATE INDEX notes_modified ON notes(modified)")
    db.execute("CREATE INDEX notes_created ON notes(created)")


def _migrate_6(db: apsw.Connection, dim: int) -> None:
    """A title vector per note (chunker version 2, the ``titles`` table): a vector of the
    note's title alone, found by k-NN with the passages' but never shown or searched by
    keyword. Empty until the chunker's next sync re-chunks the index beside."""
    db.execute("""CREATE TABLE titles (
        note INTEGER PRIMARY KEY REFERENCES notes(id) ON DELETE CASCADE,
        embedding INTEGER NOT NULL REFERENCES embeddings(id))""")
    db.execute("CREATE INDEX titles_embedding ON titles(embedding)")


# Migration N, ``MIGRATIONS[N - 1]``, brings ``user_version`` from N - 1 to N, in one
# transaction: ``def _migrate_N(db, dim)`` with a docstring saying what it does, and its
# entry here. Append; never edit a shipped one.
Migration = Callable[[apsw.Connection, int], None]
MIGRATIONS: list[Migration] = [
    _migrate_1, _migrate_2, _migrate_3, _migrate_4, _migrate_5, _migrate_6,
]
SCHEMA_VERSION = len(MIGRATIONS)


def migrations(dim: int) -> list[Callable[[apsw.Connection], None]]:
    """The migrations for vectors of ``dim`` floats, in order (``upgrade`` runs those past
    the file's ``user_version``)."""
    return [functools.partial(m, dim=dim) for m in MIGRATIONS]


@dataclass(frozen=True)
class BuildSettings:
    """What the index records about how it was built; all must match to reuse it."""

    embedder: str
    dim: int
    chunker: str

    def as_meta(self) -> dict[str, str]:
        return {"embedder": self.embedder, "dim": str(self.dim), "chunker": self.chunker}


def connect(path: str) -> apsw.Connection:
    """A connection with sqlite-vec loaded and the pragmas notewell relies on."""
    flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    conn = apsw.Connection(path, flags=flags)
    try:
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        conn.set_busy_timeout(5000)
        if path != ":memory:":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        # 1 MB of page cache per connection (SQLite's default is 2): the daemon keeps one
        # per worker thread, and the in-memory copies answer the scans that would need more.
        conn.execute("PRAGMA cache_size=-1024")
    except BaseException:  # a full disk refuses the WAL: leave no file open
        conn.close()
        raise
    return conn


# -- opening a file -----------------------------------------------------------------------


def upgrade(db: apsw.Connection, path: str, settings: BuildSettings) -> None:
    """Bring the file at ``path`` to ``SCHEMA_VERSION`` (creating it when empty), record
    ``settings`` in a new one and check them against an old one. Raises ``IndexCorrupt``
    for a file that is not a notewell index, ``IndexMismatch`` for another build."""
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
    except apsw.NotADBError:
        raise IndexCorrupt(f"{path} is not a SQLite database") from None
    steps = migrations(settings.dim)
    if version > len(steps):
        raise IndexMismatch(
            f"index schema {version} is newer than this notewell ({len(steps)}): "
            "upgrade notewell or run `notewell index --rebuild`"
        )
    if version == 0:
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if tables:
            raise IndexCorrupt(f"{path} holds tables but no notewell schema")
    if 0 < version < len(steps):
        log.info("upgrading %s from schema %d to %d, once%s", path, version, len(steps),
                 " (moving the vectors: about 15 s per 100,000)"
                 if version < VECTORS_MOVED else "")
    for n in range(version, len(steps)):
        with db:
            steps[n](db)
            db.execute(f"PRAGMA user_version={n + 1}")
    if 0 < version < VECTORS_MOVED:
        _compact(db, path)  # the old vectors' pages are free now
    with db:
        if not read_meta(db):
            for key, value in settings.as_meta().items():
                write_meta(db, key, value)
            write_meta(db, "created", str(time.time()))
    check_settings(db, settings)


def _compact(db: apsw.Connection, path: str) -> None:
    """Give free pages back to the file system (2.3 s at 100k chunks). Best effort: on a
    disk without room for the copy VACUUM writes (or any other refusal) the pages stay
    free in the file and later writes reuse them."""
    try:
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except apsw.Error as e:
        log.warning("could not compact %s (%s); its free pages will be reused", path, e)


def check_settings(db: apsw.Connection, settings: BuildSettings) -> None:
    stored = read_meta(db)
    for key, want in settings.as_meta().items():
        have = stored.get(key)
        if have != want and key in ("embedder", "dim"):
            raise IndexMismatch(
                f"the index was built with another model ({stored.get('embedder')!r}, "
                f"{stored.get('dim')} dimensions) than notewell now uses ({settings.embedder!r}, "
                f"{settings.dim}): run `notewell index --rebuild` (the old model's vectors "
                "are kept, so switching back re-embeds nothing)"
            )
        if have != want and key == "chunker":
            raise ChunkerChanged(
                f"the index was cut by chunker {have!r}, but notewell now uses {want!r}: "
                "the next sync re-chunks it (`notewell index`, or the daemon on its own), "
                "embedding only the passages whose text changed", have or "")
        if have != want:
            raise IndexMismatch(
                f"the index was built with {key} {have!r}, but notewell now uses "
                f"{want!r}: run `notewell index --rebuild`"
            )


def read_meta(db: apsw.Connection) -> dict[str, str]:
    return dict(db.execute("SELECT key, value FROM meta").fetchall())


def write_meta(db: apsw.Connection, key: str, value: str) -> None:
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))


# -- checks -------------------------------------------------------------------------------


def integrity_problems(db: apsw.Connection, quick: bool = False) -> list[str]:
    """SQLite's own check (``quick_check`` if ``quick``): the lines that are not "ok"."""
    pragma = "quick_check" if quick else "integrity_check"
    try:
        rows = db.execute(f"PRAGMA {pragma}").fetchall()
    except (apsw.CorruptError, apsw.NotADBError) as e:
        return [f"{pragma} failed: {e}"]
    return [line for r in rows if r[0] != "ok" for line in str(r[0]).splitlines()]


def file_problems(path: str) -> list[str]:
    """``quick_check`` of the file at ``path`` on a connection of its own, read only: it
    reads every page from the file, not from a page another connection cached (so it
    sees pages overwritten under a running daemon). A file that cannot be read is one
    problem too."""
    try:
        db = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as e:
        return [f"cannot be opened: {type(e).__name__}: {e}"]
    try:
        return integrity_problems(db, quick=True)
    except apsw.Error as e:
        return [f"quick_check failed: {type(e).__name__}: {e}"]
    finally:
        db.close()


def consistency_problems(db: apsw.Connection) -> list[str]:
    """What breaks the one-to-one links between notes, chunks, FTS rows and vectors (empty
    when consistent). Slower than ``integrity_problems``: for tests and ``bench/load.py``.

    Every chunk belongs to a note and has exactly one FTS row and one stored vector; every
    FTS row is a chunk's; a title vector belongs to a note and is stored; ``embeddings``
    and ``vectors`` hold the same ids (a vector no chunk or title uses is allowed: it is
    kept for reuse until pruned)."""
    one = db.execute
    problems: list[str] = []

    def ids(sql: str) -> set[int]:
        return {r[0] for r in one(sql)}

    try:
        problems += integrity_problems(db)
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
        ("title vectors of missing notes",
         ids("SELECT note FROM titles WHERE note NOT IN (SELECT id FROM notes)")),
        ("title vectors whose embedding is missing",
         ids("SELECT note FROM titles WHERE embedding NOT IN (SELECT id FROM embeddings)")),
    ):
        if found:
            problems.append(f"{len(found)} {label} (e.g. {sorted(found)[:5]})")
    dup = one("SELECT note, seq FROM chunks GROUP BY note, seq HAVING count(*) > 1").fetchall()
    if dup:
        problems.append(f"{len(dup)} duplicate (note, seq) chunk pairs, e.g. {dup[:3]}")
    return problems


def probe() -> tuple[str, str]:
    """(SQLite version, sqlite-vec version) once both load, with FTS5, in a scratch
    database; raises whatever stops them."""
    db = connect(":memory:")
    try:
        vec = db.execute("SELECT vec_version()").fetchone()[0]
        db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    finally:
        db.close()
    return apsw.sqlite_lib_version(), vec


class FileSummary(NamedTuple):
    version: int  # the schema version (``PRAGMA user_version``)
    meta: dict[str, str]
    notes: int


def describe(path: str) -> FileSummary:
    """What an index file says about itself, read only (nothing migrated or created);
    raises ``apsw.Error`` for a file that cannot be read."""
    db = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return FileSummary(db.execute("PRAGMA user_version").fetchone()[0], read_meta(db),
                           db.execute("SELECT count(*) FROM notes").fetchone()[0])
    finally:
        db.close()

"""Bear (macOS): notes read from Bear's Core Data SQLite database, which is never written.

Read-only by construction: the database is opened through a ``file:`` URI with
``mode=ro`` (the OS file descriptor itself is read-only), ``PRAGMA query_only=ON`` is set,
every read is one short transaction, and "database is locked" is retried with back-off.
``immutable=1`` is never used: it would ignore the WAL, where a running Bear keeps its
latest writes. Rollback-journal and WAL databases both work.

The layout is discovered, not assumed: the note-tag join table's name changes with Core
Data's entity numbers (``Z_5TAGS(Z_5NOTES, Z_13TAGS)`` in Bear 2, ``Z_7TAGS(Z_7NOTES,
Z_14TAGS)`` in late Bear 1), so it is derived from ``Z_PRIMARYKEY`` and checked with
``PRAGMA table_info``. A layout that lacks what notewell needs is a ``SourceError`` naming
the missing pieces, never an empty index.

Attachments: Bear keeps the text it extracts from a note's images (OCR) and PDFs in
``ZSFNOTEFILE.ZSEARCHTEXT``, one row per file linked by ``ZNOTE``. Files with text (not
removed from the note, ``ZUNUSED``; not deleted or encrypted) come with their note as
``Attachment``s; a database without the table or column indexes notes without them.

Change detection is cheap: ``PRAGMA data_version`` on one long-lived read-only connection
changes whenever Bear commits, tag-only changes included; a note's fingerprint covers its
modification date, ``Z_OPT`` and its tag titles, because Bear's add-tags action changes
the join table without touching the note's modification date; and its files' ``Z_PK``,
``Z_OPT`` and text length, because OCR finishes after the note was saved.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.config import SourceConfig
from notewell.notes import Attachment, Note, NoteStub, nfc, nfc_note
from notewell.sources.base import SourceDenied, SourceError, access_problem, is_denied
from notewell.sources.markdown_text import iter_fenced, render_links, strip_comments

log = logging.getLogger(__name__)

T = TypeVar("T")

CORE_DATA_EPOCH = 978307200.0  # 2001-01-01T00:00:00Z: Core Data dates count from here

# Bear 2 and late Bear 1 share the group container; older Bear 1 used its sandbox.
DEFAULT_LOCATIONS = (
    "~/Library/Group Containers/9K33E3U3T4.net.shinyfrog.bear/Application Data/database.sqlite",
    "~/Library/Containers/net.shinyfrog.bear/Data/Documents/Application Data/database.sqlite",
    "~/Library/Containers/net.shinyfrog.bear/Data/Library/Application Support/"
    "net.shinyfrog.bear/database.sqlite",
)

REQUIRED_NOTE_COLUMNS = ("Z_PK", "ZUNIQUEIDENTIFIER", "ZTITLE", "ZTEXT", "ZMODIFICATIONDATE",
                         "ZTRASHED")
REQUIRED_TAG_COLUMNS = ("Z_PK", "ZTITLE")
# Bear keeps the text it extracts from a note's images (OCR) and PDFs in ZSFNOTEFILE (one
# row per file, ZNOTE -> ZSFNOTE.Z_PK); images and videos are sub-entities in the same table.
FILE_COLUMNS = ("Z_PK", "ZNOTE", "ZSEARCHTEXT")
KNOWN_LAYOUTS = {(5, 13): "Bear 2", (7, 14): "Bear 1 (1.7+)"}

LOCK_RETRY_SECONDS = 5.0


def find_database(home: str | None = None) -> str | None:
    """The first of Bear's known database locations that exists, or ``None``."""
    for loc in DEFAULT_LOCATIONS:
        path = os.path.join(home, loc[2:]) if home else os.path.expanduser(loc)
        if os.path.isfile(path):
            return path
    return None


def core_data_to_unix(value: float | None) -> float | None:
    return None if value is None else float(value) + CORE_DATA_EPOCH


def bear_url(uuid: str, header: str | None = None) -> str:
    # quote() writes a space as %20; Bear does not read '+' as a space.
    url = "bear://x-callback-url/open-note?id=" + urllib.parse.quote(uuid, safe="")
    if header:
        url += "&header=" + urllib.parse.quote(header, safe="")
    return url


@dataclass(frozen=True)
class BearSchema:
    """Where things are in this database."""

    join_table: str
    join_note: str  # column holding the note's Z_PK
    join_tag: str  # column holding the tag's Z_PK
    note_columns: frozenset[str]
    label: str
    # ZSFNOTEFILE's columns when it holds what attachment text needs (ZNOTE, ZSEARCHTEXT);
    # empty when it does not: notes are then indexed without their attachments.
    file_columns: frozenset[str] = frozenset()

    def has(self, column: str) -> bool:
        return column in self.note_columns

    @property
    def files(self) -> bool:
        return bool(self.file_columns)


def _table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def detect_schema(conn: sqlite3.Connection, where: str) -> BearSchema:
    """Find the note, tag and join tables; ``SourceError`` naming whatever is missing."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = [f"table {t}" for t in ("ZSFNOTE", "ZSFNOTETAG", "Z_PRIMARYKEY") if t not in tables]
    if missing:
        raise _schema_error(where, missing)
    note_cols = set(_table_columns(conn, "ZSFNOTE"))
    tag_cols = set(_table_columns(conn, "ZSFNOTETAG"))
    missing += [f"column ZSFNOTE.{c}" for c in REQUIRED_NOTE_COLUMNS if c not in note_cols]
    missing += [f"column ZSFNOTETAG.{c}" for c in REQUIRED_TAG_COLUMNS if c not in tag_cols]
    entities = dict(conn.execute(
        "SELECT Z_NAME, Z_ENT FROM Z_PRIMARYKEY WHERE Z_NAME IN ('SFNote', 'SFNoteTag')"))
    missing += [f"entity {e} in Z_PRIMARYKEY" for e in ("SFNote", "SFNoteTag")
                if e not in entities]
    if missing:
        raise _schema_error(where, missing)
    n, t = int(entities["SFNote"]), int(entities["SFNoteTag"])
    # Core Data names a many-to-many table after one side's entity number and relationship,
    # and its columns after each side's entity number and the inverse relationship.
    want_note, want_tag = f"Z_{n}NOTES", f"Z_{t}TAGS"
    others = sorted(name for name in tables if re.fullmatch(r"Z_\d+[A-Z]+", name))
    candidates = [f"Z_{n}TAGS", f"Z_{t}NOTES", *others]
    for table in dict.fromkeys(candidates):
        if table not in tables:
            continue
        cols = {c.upper() for c in _table_columns(conn, table)}
        if want_note in cols and want_tag in cols:
            label = KNOWN_LAYOUTS.get((n, t), f"SFNote={n}, SFNoteTag={t}")
            file_cols = (set(_table_columns(conn, "ZSFNOTEFILE")) if "ZSFNOTEFILE" in tables
                         else set())
            if not all(c in file_cols for c in FILE_COLUMNS):
                if file_cols:
                    log.info("bear: ZSFNOTEFILE has no %s; attachments are not indexed",
                             ", ".join(c for c in FILE_COLUMNS if c not in file_cols))
                file_cols = set()
            return BearSchema(table, want_note, want_tag, frozenset(note_cols), label,
                              frozenset(file_cols))
    raise _schema_error(where, [f"note-tag join table with columns {want_note} and {want_tag} "
                                f"(expected Z_{n}TAGS)"])


def _schema_error(where: str, missing: list[str]) -> SourceError:
    return SourceError(
        f"Bear's database at {where} has a layout notewell does not know (missing: "
        f"{'; '.join(missing)}). A Bear update may have changed it: update notewell, and "
        "if that does not help, report this message. Nothing was indexed from Bear.")


def minimal_tags(titles: list[str]) -> list[str]:
    """Bear joins a note to a nested tag's full path and to every parent; keep the paths
    (``#work`` still finds ``work/projects`` in searches)."""
    clean = [t.strip().strip("#").strip() for t in titles if t and t.strip()]
    lowered = {t.lower() for t in clean}
    out = [t for t in clean if not any(o.startswith(t.lower() + "/") for o in lowered)]
    return sorted(dict.fromkeys(out), key=str.lower)


# Bear 1 attachment markers, and images. No run crosses a "[" (where the next one may
# start), so each runs in linear time on any note (sources.markdown).
_ATTACHMENT = re.compile(r"\[(?:image|file|assets?):[^\[\]\n]+\]")
_IMAGE = re.compile(r"!\[([^\[\]\n]*)\]\([^()\n]*\)")


def bear_body(text: str, title: str, tags: list[str]) -> str:
    """The note's Markdown as notewell indexes it: the title line dropped (the title is
    indexed on its own), tag-only lines dropped, tags in prose read as words, attachment
    markers and image metadata removed, wikilinks as their visible text."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    first, _, rest = text.partition("\n")
    if first.lstrip("#").strip() == title.strip():
        text = rest
    text = strip_comments(text, (("<!--", "-->"),), "")  # Bear 2's image sizes
    text = _IMAGE.sub(lambda m: m.group(1), text)
    text = _ATTACHMENT.sub("", text)
    tag_rx = _tag_regex(tags)
    out: list[str] = []
    for line, in_code in iter_fenced(text.split("\n")):
        if in_code or tag_rx is None or "#" not in line:
            out.append(line)
            continue
        if line.strip() and not tag_rx.sub("", line).strip():
            continue  # a line of tags only: the tags are indexed as tags
        out.append(tag_rx.sub(lambda m: m.group(1), line))
    return render_links("\n".join(out)).strip("\n")


def _tag_regex(tags: list[str]) -> re.Pattern[str] | None:
    """``#tag``, ``#nested/tag`` and ``#multi word tag#`` for this note's own tags only, so
    a ``#`` that Bear did not read as a tag is left alone."""
    names = sorted({t for t in tags if t}, key=len, reverse=True)
    if not names:
        return None
    alt = "|".join(re.escape(t) for t in names)
    return re.compile(rf"(?<![^\s(\[])#({alt})(?:#|(?=[\s.,;:!?)\]]|$))", re.I)


# How notes are read, in every fingerprint: a notewell that reads notes differently reads
# each once more (2: text in NFC); only the notes whose passages changed are embedded.
_READ = 2


def _fingerprint(modified: float | None, opt: int | None, archived: int | None,
                 tag_titles: list[str], files: list[tuple] | None = None) -> str:
    h = hashlib.sha1("\x00".join(sorted(tag_titles)).encode("utf-8", "surrogatepass"))
    out = f"{_READ}:{modified!r}:{opt}:{int(bool(archived))}:{h.hexdigest()[:12]}"
    if files:
        # Bear fills ZSEARCHTEXT after the note was saved (OCR runs later) without touching
        # the note's modification date; each file row's Z_OPT moves with every save of it.
        f = hashlib.sha1(repr(sorted(files)).encode("utf-8", "surrogatepass"))
        out += f":f{f.hexdigest()[:12]}"
    return out


def _raise_if_denied(path: str) -> None:
    """``SourceDenied`` when ``path`` is there but this process may not open it (macOS
    privacy controls), so it is never reported as missing."""
    problem = access_problem(path)
    if problem is not None and is_denied(problem):
        raise SourceDenied("Bear's database", path, problem)


def _is_lock_error(e: sqlite3.OperationalError) -> bool:
    msg = str(e).lower()
    return "locked" in msg or "busy" in msg


class BearSource:
    kind = "bear"

    def __init__(self, config: SourceConfig, lock_retry_seconds: float = LOCK_RETRY_SECONDS,
                 clock: Clock = SYSTEM_CLOCK, sleep: Callable[[float], None] = time.sleep
                 ) -> None:
        self.config = config
        # How long Bear's lock has been waited out, and the wait between tries.
        self._clock, self._sleep = clock, sleep
        archived = config.options.get("include_archived", True)
        if isinstance(archived, str):  # tolerate include_archived = "false"
            archived = archived.strip().lower() not in ("false", "no", "0", "off")
        self.include_archived = bool(archived)
        self.lock_retry_seconds = lock_retry_seconds
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._schema: BearSchema | None = None
        self._file_id: tuple[int, int] | None = None
        self._generation = 0
        self._pks: dict[str, int] = {}

    @property
    def name(self) -> str:
        return self.config.name

    # -- the database ---------------------------------------------------------------------

    def db_path(self) -> str:
        path = self.config.path
        if path:
            if os.path.isdir(path):
                path = os.path.join(path, "database.sqlite")
            if not os.path.isfile(path):
                _raise_if_denied(path)  # there, but refused: isfile cannot tell
                raise SourceError(f"Bear database {path} does not exist: fix 'path' for source "
                                  f"{self.name!r} in config.toml (or remove it to use "
                                  "Bear's default location)")
            return path
        found = find_database()
        if found is None:
            for loc in DEFAULT_LOCATIONS:  # there, but refused: isfile cannot tell
                _raise_if_denied(os.path.expanduser(loc))
            raise SourceError(
                "Bear's database was not found in its usual places "
                f"({', '.join(DEFAULT_LOCATIONS[:2])}); is Bear installed and opened once? "
                f"Otherwise set 'path' for source {self.name!r} in config.toml")
        return found

    def _connection(self) -> tuple[sqlite3.Connection, BearSchema]:
        """The long-lived read-only connection, reopened when the file was replaced."""
        path = self.db_path()
        try:
            st = os.stat(path)
        except OSError as e:
            if is_denied(e):
                raise SourceDenied("Bear's database", path, e) from None
            raise SourceError(f"cannot read Bear's database {path}: {e.strerror}") from None
        file_id = (st.st_dev, st.st_ino)
        if self._conn is not None and self._schema is not None and file_id == self._file_id:
            return self._conn, self._schema
        self.close()
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None,
                                   check_same_thread=False, timeout=0.25)
            conn.execute("PRAGMA query_only=ON")
            schema = self._retry(lambda: detect_schema(conn, path), conn)
        except sqlite3.DatabaseError as e:
            _raise_if_denied(path)  # SQLite says "unable to open database file"
            raise SourceError(f"cannot open Bear's database {path} read-only: {e}. If Bear "
                              "is updating, this clears up by itself") from None
        self._conn, self._schema, self._file_id = conn, schema, file_id
        self._generation += 1
        log.info("bear: %s read-only (%s, tags in %s)", path, schema.label, schema.join_table)
        return conn, schema

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
            self._conn, self._schema, self._file_id = None, None, None

    def _retry(self, read: Callable[[], T], conn: sqlite3.Connection) -> T:
        """Run ``read`` in one short read transaction, retrying while Bear holds a lock."""
        deadline = self._clock.monotonic() + self.lock_retry_seconds
        delay = 0.02
        while True:
            try:
                conn.execute("BEGIN")
                try:
                    return read()
                finally:
                    conn.execute("COMMIT")  # a read transaction: ends the snapshot
            except sqlite3.OperationalError as e:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if not _is_lock_error(e):
                    raise
                if self._clock.monotonic() + delay > deadline:
                    raise SourceError(
                        f"Bear's database stayed locked for {self.lock_retry_seconds:.0f} s; "
                        "the next sync will try again") from None
                self._sleep(delay)
                delay = min(delay * 2, 0.5)

    def _read(self, read: Callable[[sqlite3.Connection, BearSchema], T]) -> T:
        with self._lock:
            conn, schema = self._connection()
            try:
                return self._retry(lambda: read(conn, schema), conn)
            except sqlite3.DatabaseError as e:
                # The file changed under us (a Bear migration): start over next time.
                self.close()
                raise SourceError(f"reading Bear's database failed: {e}; the next sync will "
                                  "reopen it") from None

    # -- the Source protocol ------------------------------------------------------------------

    def _where(self, schema: BearSchema) -> str:
        conds = ["n.ZUNIQUEIDENTIFIER IS NOT NULL", "coalesce(n.ZTRASHED, 0) = 0",
                 "n.ZTEXT IS NOT NULL"]  # an encrypted note has no ZTEXT
        if schema.has("ZPERMANENTLYDELETED"):
            conds.append("coalesce(n.ZPERMANENTLYDELETED, 0) = 0")
        if schema.has("ZENCRYPTED"):
            conds.append("coalesce(n.ZENCRYPTED, 0) = 0")
        if not self.include_archived and schema.has("ZARCHIVED"):
            conds.append("coalesce(n.ZARCHIVED, 0) = 0")
        return " AND ".join(conds)

    @staticmethod
    def _col(schema: BearSchema, column: str, default: str = "NULL") -> str:
        return f"n.{column}" if schema.has(column) else default

    @staticmethod
    def _file_where(schema: BearSchema) -> str:
        conds = ["f.ZNOTE IS NOT NULL", "f.ZSEARCHTEXT IS NOT NULL",
                 "trim(f.ZSEARCHTEXT) != ''"]
        for column in ("ZUNUSED", "ZPERMANENTLYDELETED", "ZENCRYPTED"):
            if column in schema.file_columns:
                conds.append(f"coalesce(f.{column}, 0) = 0")
        return " AND ".join(conds)

    @classmethod
    def _file_key(cls, schema: BearSchema) -> str:
        """What identifies a version of a file's text: its row, its Core Data save
        counter, and its text's length."""
        opt = "f.Z_OPT" if "Z_OPT" in schema.file_columns else "NULL"
        return f"f.Z_PK, {opt}, length(f.ZSEARCHTEXT)"

    def _all_files(self, conn: sqlite3.Connection, schema: BearSchema
                   ) -> dict[int, list[tuple]]:
        out: dict[int, list[tuple]] = {}
        if not schema.files:
            return out
        for note, *key in conn.execute(
                f"SELECT f.ZNOTE, {self._file_key(schema)} FROM ZSFNOTEFILE f "
                f"WHERE {self._file_where(schema)}"):
            out.setdefault(note, []).append(tuple(key))
        return out

    def _attachments(self, conn: sqlite3.Connection, schema: BearSchema, pk: int
                     ) -> tuple[list[tuple], tuple[Attachment, ...]]:
        """A note's files with text: their keys (for the fingerprint) and the text."""
        if not schema.files:
            return [], ()
        name = "f.ZFILENAME" if "ZFILENAME" in schema.file_columns else "NULL"
        order = "f.ZINDEX, f.Z_PK" if "ZINDEX" in schema.file_columns else "f.Z_PK"
        keys, found = [], []
        for *key, filename, text in conn.execute(
                f"SELECT {self._file_key(schema)}, {name}, f.ZSEARCHTEXT FROM ZSFNOTEFILE f "
                f"WHERE f.ZNOTE = ? AND {self._file_where(schema)} ORDER BY {order}", (pk,)):
            keys.append(tuple(key))
            found.append(Attachment(filename or "attachment", (text,)))
        return keys, tuple(found)

    def scan(self) -> Iterator[NoteStub]:
        def read(conn: sqlite3.Connection, schema: BearSchema) -> list[NoteStub]:
            tags = self._all_tags(conn, schema)
            files = self._all_files(conn, schema)
            rows = conn.execute(
                f"SELECT n.Z_PK, n.ZUNIQUEIDENTIFIER, n.ZMODIFICATIONDATE, "
                f"{self._col(schema, 'Z_OPT')}, {self._col(schema, 'ZARCHIVED', '0')} "
                f"FROM ZSFNOTE n WHERE {self._where(schema)}").fetchall()
            pks, stubs = {}, []
            for pk, uuid, modified, opt, archived in rows:
                pks[uuid] = pk
                stubs.append(NoteStub(f"{self.name}:{uuid}",
                                      _fingerprint(modified, opt, archived, tags.get(pk, []),
                                                   files.get(pk))))
            self._pks = pks
            return stubs

        yield from self._read(read)

    @staticmethod
    def _all_tags(conn: sqlite3.Connection, schema: BearSchema) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for pk, title in conn.execute(
                f"SELECT j.{schema.join_note}, t.ZTITLE FROM {schema.join_table} j "
                f"JOIN ZSFNOTETAG t ON t.Z_PK = j.{schema.join_tag} WHERE t.ZTITLE IS NOT NULL"):
            out.setdefault(pk, []).append(title)
        return out

    def load(self, note_id: str) -> Note | None:
        uuid = note_id.split(":", 1)[1]

        def read(conn: sqlite3.Connection, schema: BearSchema) -> Note | None:
            cols = (f"n.Z_PK, n.ZUNIQUEIDENTIFIER, n.ZTITLE, n.ZTEXT, n.ZMODIFICATIONDATE, "
                    f"{self._col(schema, 'ZCREATIONDATE')}, {self._col(schema, 'Z_OPT')}, "
                    f"{self._col(schema, 'ZARCHIVED', '0')}")
            where = self._where(schema)
            row = None
            pk = self._pks.get(uuid)
            if pk is not None:
                row = conn.execute(f"SELECT {cols} FROM ZSFNOTE n WHERE n.Z_PK = ? AND "
                                   f"n.ZUNIQUEIDENTIFIER = ? AND {where}", (pk, uuid)).fetchone()
            if row is None:
                row = conn.execute(f"SELECT {cols} FROM ZSFNOTE n WHERE n.ZUNIQUEIDENTIFIER = ? "
                                   f"AND {where}", (uuid,)).fetchone()
            if row is None:
                return None  # trashed, deleted, encrypted or archived-and-excluded
            pk, uuid_, title, text, modified, created, opt, archived = row
            titles = [r[0] for r in conn.execute(
                f"SELECT t.ZTITLE FROM {schema.join_table} j JOIN ZSFNOTETAG t "
                f"ON t.Z_PK = j.{schema.join_tag} WHERE j.{schema.join_note} = ? "
                f"AND t.ZTITLE IS NOT NULL", (pk,))]
            keys, attachments = self._attachments(conn, schema, pk)
            return self._note(note_id, uuid_, title, text, modified, created, opt, archived,
                              titles, keys, attachments)

        return self._read(read)

    def _note(self, note_id: str, uuid: str, title: str | None, text: str, modified: float,
              created: float | None, opt: int | None, archived: int | None,
              tag_titles: list[str], file_keys: list[tuple] | None = None,
              attachments: tuple[Attachment, ...] = ()) -> Note:
        # In NFC before the tags are matched in the text (``nfc_note``); the fingerprint
        # keeps the tags as the scan sees them.
        title, text = nfc((title or "").strip()), nfc(text)
        tags = [nfc(t) for t in tag_titles]
        if not title:
            first = text.strip().split("\n", 1)[0]
            title = first.lstrip("#").strip()[:120] or "Untitled"
        return nfc_note(Note(
            note_id=note_id,
            source=self.name,
            kind=self.kind,
            title=title,
            text=bear_body(text, title, tags),
            url=bear_url(uuid),
            path=None,
            tags=tuple(minimal_tags(tags)),
            created=core_data_to_unix(created),
            modified=core_data_to_unix(modified),
            archived=bool(archived),
            fingerprint=_fingerprint(modified, opt, archived, tag_titles, file_keys),
            attachments=attachments,
        ))

    def new_note_url(self, title: str, tags: tuple[str, ...] = ()) -> str | None:
        """Bear's own ``create`` action, with the query's ``#tags``: Bear writes the note."""
        if not title.strip():
            return None
        url = "bear://x-callback-url/create?title=" + urllib.parse.quote(title.strip(), safe="")
        if tags:
            url += "&tags=" + urllib.parse.quote(",".join(tags), safe="")
        return url

    def passage_url(self, note: Note, anchor: str | None, line: int | None = None) -> str:
        if not anchor:
            return note.url
        return note.url + "&header=" + urllib.parse.quote(anchor, safe="")

    def change_token(self) -> str | None:
        """Changes whenever any connection commits to Bear's database (``data_version``
        on our long-lived connection), or when the file is replaced."""
        with self._lock:
            try:
                conn, _ = self._connection()
                version = conn.execute("PRAGMA data_version").fetchone()[0]
            except SourceError as e:
                return f"unavailable:{e}"
            except sqlite3.Error as e:
                self.close()
                return f"unavailable:{e}"
            return f"{self._generation}:{version}"

    def watch_paths(self) -> list[str]:
        try:
            return [os.path.dirname(self.db_path())]
        except SourceError:
            return []

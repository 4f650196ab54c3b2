"""Builds Bear databases for tests: the real Core Data table and column names, in Bear 2
and Bear 1 layouts, in rollback-journal or WAL mode.

The default note set covers what the Bear source must handle: a nested tag (stored as the
full path plus its parent row), a multi-word tag, trashed, archived, encrypted and
permanently deleted notes, unused tag rows, and (in the Bear 2 layout) a pinned-in-tag join
table whose name a pattern match would confuse with the note-tag join table.

Attachments live in ``ZSFNOTEFILE`` with Bear 2's real columns (one row per file, images
and PDFs alike, ``ZNOTE`` -> ``ZSFNOTE.Z_PK``, the text Bear extracted in ``ZSEARCHTEXT``):
a PDF with text, an image Bear has not read (no text), a file of a trashed note, a file
removed from its note (``ZUNUSED``), and a scanned whiteboard whose words appear nowhere
in its note's text. The early Bear 1 layout has no ``ZSEARCHTEXT``, so a database without
it is covered too.

``BearFixture`` then plays Bear: edit a note's text, add a tag without touching the
modification date (what Bear's add-tags action does), trash, add and delete notes.

As a script: ``python tests/bear_fixture.py OUT.sqlite [--schema bear2|bear1|bear1-early]
[--journal wal|delete]``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import uuid as uuidlib
from dataclasses import dataclass, field

CORE_DATA_EPOCH = 978307200.0  # 2001-01-01T00:00:00Z in Unix seconds


@dataclass(frozen=True)
class Layout:
    """What differs between Bear versions: entity numbers (hence the join table's name)
    and a few columns."""

    name: str
    entities: tuple[tuple[int, str, int], ...]  # (Z_ENT, Z_NAME, Z_SUPER)
    note_ent: int
    tag_ent: int
    extra_note_columns: tuple[str, ...]
    pinned_join: bool  # Bear 2's Z_5PINNEDINTAGS, the trap for name matching


_COMMON_NOTE_COLUMNS = (
    "Z_PK INTEGER PRIMARY KEY", "Z_ENT INTEGER", "Z_OPT INTEGER", "ZARCHIVED INTEGER",
    "ZHASFILES INTEGER", "ZHASIMAGES INTEGER", "ZHASSOURCECODE INTEGER", "ZLOCKED INTEGER",
    "ZORDER INTEGER", "ZPINNED INTEGER", "ZSHOWNINTODAYWIDGET INTEGER", "ZSKIPSYNC INTEGER",
    "ZTODOCOMPLETED INTEGER", "ZTODOINCOMPLETED INTEGER", "ZTRASHED INTEGER",
    "ZFOLDER INTEGER", "ZSERVERDATA INTEGER", "ZARCHIVEDDATE TIMESTAMP",
    "ZCONFLICTUNIQUEIDENTIFIERDATE TIMESTAMP", "ZCREATIONDATE TIMESTAMP",
    "ZLOCKEDDATE TIMESTAMP", "ZMODIFICATIONDATE TIMESTAMP", "ZORDERDATE TIMESTAMP",
    "ZPINNEDDATE TIMESTAMP", "ZTRASHEDDATE TIMESTAMP", "ZCONFLICTUNIQUEIDENTIFIER VARCHAR",
    "ZLASTEDITINGDEVICE VARCHAR", "ZTEXT VARCHAR", "ZTITLE VARCHAR",
    "ZUNIQUEIDENTIFIER VARCHAR", "ZVECTORCLOCK BLOB",
)

LAYOUTS = {
    "bear2": Layout(
        "bear2",
        ((1, "SFAttachment", 0), (2, "SFNoteFile", 1), (3, "SFNoteImage", 1),
         (4, "SFNoteVideo", 1), (5, "SFNote", 0), (6, "SFNoteBackLink", 0),
         (7, "SFNoteConflict", 0), (8, "SFNoteFileOld", 0), (9, "SFNoteFileSync", 0),
         (10, "SFNoteImageOld", 0), (11, "SFNoteSearchHistory", 0), (12, "SFNoteStats", 0),
         (13, "SFNoteTag", 0), (14, "SFNoteTodo", 0)),
        5, 13,
        ("ZENCRYPTED INTEGER", "ZPERMANENTLYDELETED INTEGER", "ZVERSION INTEGER",
         "ZENCRYPTIONUNIQUEIDENTIFIER VARCHAR", "ZSUBTITLE VARCHAR", "ZENCRYPTEDDATA BLOB"),
        True,
    ),
    "bear1": Layout(  # late Bear 1 (1.7+): Z_7TAGS(Z_7NOTES, Z_14TAGS)
        "bear1",
        ((1, "SFAttachment", 0), (2, "SFNoteFile", 1), (3, "SFNoteImage", 1),
         (4, "SFExternalLink", 0), (5, "SFFolder", 0), (6, "SFLocation", 0),
         (7, "SFNote", 0), (8, "SFNoteBackLink", 0), (9, "SFNoteConflict", 0),
         (10, "SFNoteFileOld", 0), (11, "SFNoteImageOld", 0), (12, "SFNoteSearchHistory", 0),
         (13, "SFNoteStats", 0), (14, "SFNoteTag", 0)),
        7, 14,
        ("ZENCRYPTED INTEGER", "ZPERMANENTLYDELETED INTEGER", "ZENCRYPTEDDATA BLOB"),
        False,
    ),
    "bear1-early": Layout(  # early Bear 1: no encryption, no permanent deletion yet
        "bear1-early",
        ((1, "SFAttachment", 0), (2, "SFNoteFile", 1), (3, "SFNoteImage", 1),
         (4, "SFFolder", 0), (5, "SFLocation", 0), (6, "SFNote", 0),
         (7, "SFNoteBackLink", 0), (8, "SFNoteConflict", 0), (9, "SFNoteFileOld", 0),
         (10, "SFNoteImageOld", 0), (11, "SFNoteSearchHistory", 0), (12, "SFNoteStats", 0),
         (13, "SFNoteTag", 0)),
        6, 13,
        (),
        False,
    ),
}


# ZSFNOTEFILE as Bear 2 has it (SFNoteFile with its SFNoteImage / SFNoteVideo sub-entities).
_FILE_COLUMNS = (
    "Z_PK INTEGER PRIMARY KEY", "Z_ENT INTEGER", "Z_OPT INTEGER", "ZDOWNLOADED INTEGER",
    "ZENCRYPTED INTEGER", "ZFILESIZE INTEGER", "ZINDEX INTEGER",
    "ZPERMANENTLYDELETED INTEGER", "ZSKIPSYNC INTEGER", "ZUNUSED INTEGER",
    "ZUPLOADED INTEGER", "ZVERSION INTEGER", "ZNOTE INTEGER", "ZSERVERDATA INTEGER",
    "ZANIMATED INTEGER", "ZHEIGHT INTEGER", "ZWIDTH INTEGER", "ZDURATION INTEGER",
    "ZHEIGHT1 INTEGER", "ZWIDTH1 INTEGER", "ZCREATIONDATE TIMESTAMP",
    "ZINSERTIONDATE TIMESTAMP", "ZMODIFICATIONDATE TIMESTAMP", "ZUNUSEDDATE TIMESTAMP",
    "ZUPLOADEDDATE TIMESTAMP", "ZSEARCHTEXTDATE TIMESTAMP", "ZLASTEDITINGDEVICE VARCHAR",
    "ZENCRYPTIONUNIQUEIDENTIFIER VARCHAR", "ZFILENAME VARCHAR",
    "ZNORMALIZEDFILEEXTENSION VARCHAR", "ZSEARCHTEXT VARCHAR", "ZUNIQUEIDENTIFIER VARCHAR",
    "ZENCRYPTEDDATA BLOB",
)


@dataclass(frozen=True)
class FixtureFile:
    """One attachment row: an image (SFNoteImage) or another file (SFNoteFile)."""

    filename: str
    search_text: str | None = None  # what Bear's OCR / PDF reader found; None: not read
    image: bool = False
    unused: bool = False  # removed from the note's text; Bear keeps the row a while


@dataclass
class FixtureNote:
    title: str
    text: str | None  # None for an encrypted note
    tags: tuple[str, ...] = ()  # full paths; parent rows are added as Bear does
    uuid: str = field(default_factory=lambda: str(uuidlib.uuid4()).upper())
    created: float = 1_700_000_000.0  # Unix seconds
    modified: float = 1_700_000_000.0
    trashed: bool = False
    archived: bool = False
    encrypted: bool = False
    deleted: bool = False  # ZPERMANENTLYDELETED
    pinned_in: tuple[str, ...] = ()  # tags this note is pinned in (Bear 2 only)
    files: tuple[FixtureFile, ...] = ()


def default_notes() -> list[FixtureNote]:
    """One note per case the Bear source must get right; uuids are fixed for tests."""
    return [
        FixtureNote(
            "Sourdough starter",
            "# Sourdough starter\n#recipes/bread #kitchen\n\n"
            "Feed the starter twice a day with equal weights of rye flour and water.\n\n"
            "## Troubleshooting mould\n\n"
            "Grey liquid on top is hooch, not mould: pour it off and feed more often. "
            "Pink or orange streaks mean the starter must be thrown away.\n",
            ("recipes/bread", "kitchen"), uuid="A1B2C3D4-0001-4000-8000-000000000001",
            created=1_690_000_000.0, modified=1_700_000_100.0, pinned_in=("travel",),
            files=(
                FixtureFile("feeding-schedule.pdf", "Feeding schedule\nMorning: 50 g rye, "
                            "50 g water.\nEvening: discard half, then feed again. Keep at "
                            "24 degrees Celsius."),
                FixtureFile("jar.jpg", None, image=True),  # not read by Bear (yet)
            )),
        FixtureNote(
            "Keyboard shortcuts",
            "# Keyboard shortcuts\n\nA few #tips and tricks# for the terminal: ctrl-r "
            "searches history, ctrl-a jumps to the start of the line.\n\n"
            "```sh\n#not-a-tag in code\nbind -P\n```\n",
            ("tips and tricks",), uuid="A1B2C3D4-0002-4000-8000-000000000002",
            files=(FixtureFile("old-cheatsheet.png", "zygomorphic tmux prefix cheatsheet",
                               image=True, unused=True),)),
        FixtureNote(
            "Old packing list",
            "# Old packing list\n#travel\n\nPassport, charger, adapter for UK sockets.\n",
            ("travel",), uuid="A1B2C3D4-0003-4000-8000-000000000003", archived=True),
        FixtureNote(
            "Deleted draft",
            "# Deleted draft\n\nThis draft went to the trash and must not be found.\n",
            uuid="A1B2C3D4-0004-4000-8000-000000000004", trashed=True,
            files=(FixtureFile("trashed-scan.pdf", "quasar invoice from a trashed note"),)),
        FixtureNote(
            "Bank PINs", None, uuid="A1B2C3D4-0005-4000-8000-000000000005", encrypted=True),
        FixtureNote(
            "Gone for good",
            "# Gone for good\n\nPermanently deleted; Bear keeps the row until sync.\n",
            uuid="A1B2C3D4-0006-4000-8000-000000000006", deleted=True),
        FixtureNote(
            "Meeting notes: Q3 planning",
            "# Meeting notes: Q3 planning\n#work/projects/apollo\n\n"
            "## Decisions & next steps\n\n"
            "Ship the Apollo beta to ten customers before the end of September.\n\n"
            "![](whiteboard.jpg)\n",
            ("work/projects/apollo",), uuid="A1B2C3D4-0007-4000-8000-000000000007",
            # A photo of the whiteboard: these words are nowhere in the note's text.
            files=(FixtureFile("whiteboard.jpg", "RISKS\ntelemetry dashboard latency\n"
                               "staging cluster capacity\nOWNER: Priya", image=True),)),
    ]


UNUSED_TAGS = ("unused", "someday/maybe")


class BearFixture:
    """A Bear database on disk and a read-write connection that plays Bear."""

    def __init__(self, path: str, layout: Layout, journal: str) -> None:
        self.path = path
        self.layout = layout
        self.journal = journal
        # check_same_thread=False: tests release Bear's lock from a timer thread.
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA synchronous=OFF")  # test data: no fsync per statement
        if journal == "wal":
            self.conn.execute("PRAGMA journal_mode=WAL")
            # Like a running Bear: recent writes stay in the -wal file, not the main file.
            self.conn.execute("PRAGMA wal_autocheckpoint=0")
        else:
            self.conn.execute("PRAGMA journal_mode=DELETE")

    # -- names ----------------------------------------------------------------------------

    @property
    def join_table(self) -> str:
        return f"Z_{self.layout.note_ent}TAGS"

    @property
    def join_note(self) -> str:
        return f"Z_{self.layout.note_ent}NOTES"

    @property
    def join_tag(self) -> str:
        return f"Z_{self.layout.tag_ent}TAGS"

    # -- schema and data --------------------------------------------------------------------

    def create_schema(self) -> None:
        lay, db = self.layout, self.conn
        db.execute("CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, "
                   "Z_SUPER INTEGER, Z_MAX INTEGER)")
        db.execute("CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255),"
                   " Z_PLIST BLOB)")
        db.execute("CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB)")
        for ent, name, sup in lay.entities:
            db.execute("INSERT INTO Z_PRIMARYKEY VALUES (?,?,?,0)", (ent, name, sup))
        db.execute("INSERT INTO Z_METADATA VALUES (1, ?, x'62706c6973743030')",
                   (str(uuidlib.uuid4()).upper(),))
        cols = ", ".join(_COMMON_NOTE_COLUMNS + lay.extra_note_columns)
        db.execute(f"CREATE TABLE ZSFNOTE ({cols})")
        db.execute("CREATE INDEX ZSFNOTE_ZUNIQUEIDENTIFIER_INDEX ON ZSFNOTE (ZUNIQUEIDENTIFIER)")
        db.execute("CREATE TABLE ZSFNOTETAG (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, "
                   "Z_OPT INTEGER, ZISROOT INTEGER, ZPINNED INTEGER, ZSORTING INTEGER, "
                   "ZSORTINGDIRECTION INTEGER, ZMODIFICATIONDATE TIMESTAMP, "
                   "ZPINNEDDATE TIMESTAMP, ZTAGCON VARCHAR, ZTITLE VARCHAR, "
                   "ZUNIQUEIDENTIFIER VARCHAR)")
        n, t = lay.note_ent, lay.tag_ent
        if lay.pinned_join:
            # Sorts before Z_5TAGS and ends in TAGS: a name pattern would pick it.
            db.execute(f"CREATE TABLE Z_{n}PINNEDINTAGS (Z_{n}PINNEDNOTES INTEGER, "
                       f"Z_{t}PINNEDINTAGS INTEGER, PRIMARY KEY (Z_{n}PINNEDNOTES, "
                       f"Z_{t}PINNEDINTAGS))")
        db.execute(f"CREATE TABLE {self.join_table} ({self.join_note} INTEGER, "
                   f"{self.join_tag} INTEGER, PRIMARY KEY ({self.join_note}, {self.join_tag}))")
        db.execute(f"CREATE INDEX {self.join_table}_{self.join_tag}_INDEX ON "
                   f"{self.join_table} ({self.join_tag}, {self.join_note})")
        file_cols = [c for c in _FILE_COLUMNS
                     if lay.name != "bear1-early" or not c.startswith("ZSEARCHTEXT")]
        db.execute(f"CREATE TABLE ZSFNOTEFILE ({', '.join(file_cols)})")
        db.execute("CREATE INDEX ZSFNOTEFILE_ZNOTE_INDEX ON ZSFNOTEFILE (ZNOTE)")

    def has_column(self, name: str) -> bool:
        return any(r[1] == name for r in self.conn.execute("PRAGMA table_info(ZSFNOTE)"))

    def tag_pk(self, title: str) -> int:
        row = self.conn.execute("SELECT Z_PK FROM ZSFNOTETAG WHERE ZTITLE = ?",
                                (title,)).fetchone()
        if row:
            return row[0]
        cur = self.conn.execute(
            "INSERT INTO ZSFNOTETAG (Z_ENT, Z_OPT, ZISROOT, ZTITLE, ZUNIQUEIDENTIFIER, "
            "ZMODIFICATIONDATE) VALUES (?, 1, ?, ?, ?, ?)",
            (self.layout.tag_ent, int("/" not in title), title,
             str(uuidlib.uuid4()).upper(), 700_000_000.0))
        return cur.lastrowid

    def add_note(self, note: FixtureNote) -> int:
        db = self.conn
        values = {
            "Z_ENT": self.layout.note_ent, "Z_OPT": 1, "ZARCHIVED": int(note.archived),
            "ZTRASHED": int(note.trashed), "ZPINNED": 0, "ZLOCKED": 0,
            "ZCREATIONDATE": note.created - CORE_DATA_EPOCH,
            "ZMODIFICATIONDATE": note.modified - CORE_DATA_EPOCH,
            "ZTITLE": note.title, "ZTEXT": None if note.encrypted else note.text,
            "ZUNIQUEIDENTIFIER": note.uuid, "ZLASTEDITINGDEVICE": "fixture",
        }
        if note.trashed:
            values["ZTRASHEDDATE"] = note.modified - CORE_DATA_EPOCH
        if self.has_column("ZENCRYPTED"):
            values["ZENCRYPTED"] = int(note.encrypted)
            if note.encrypted:
                values["ZENCRYPTEDDATA"] = os.urandom(48)
        elif note.encrypted:
            raise ValueError(f"layout {self.layout.name} has no encrypted notes")
        if self.has_column("ZPERMANENTLYDELETED"):
            values["ZPERMANENTLYDELETED"] = int(note.deleted)
        elif note.deleted:
            raise ValueError(f"layout {self.layout.name} has no permanent deletion")
        marks = ",".join("?" * len(values))
        cur = db.execute(f"INSERT INTO ZSFNOTE ({','.join(values)}) VALUES ({marks})",
                         tuple(values.values()))
        pk = cur.lastrowid
        for tag in note.tags:
            self._join(pk, tag)
        if self.layout.pinned_join:
            n = self.layout.note_ent
            for tag in note.pinned_in:
                db.execute(f"INSERT INTO Z_{n}PINNEDINTAGS VALUES (?, ?)", (pk, self.tag_pk(tag)))
        for i, f in enumerate(note.files):
            self.add_file(pk, f, i, note.modified)
        return pk

    @property
    def has_search_text(self) -> bool:
        return any(r[1] == "ZSEARCHTEXT" for r in
                   self.conn.execute("PRAGMA table_info(ZSFNOTEFILE)"))

    def _entity(self, name: str) -> int:
        return next(ent for ent, n, _ in self.layout.entities if n == name)

    def add_file(self, note_pk: int, f: FixtureFile, index: int = 0,
                 when: float = 1_700_000_000.0) -> int:
        values = {
            "Z_ENT": self._entity("SFNoteImage" if f.image else "SFNoteFile"), "Z_OPT": 1,
            "ZDOWNLOADED": 1, "ZENCRYPTED": 0, "ZFILESIZE": 1000 + len(f.search_text or ""),
            "ZINDEX": index, "ZPERMANENTLYDELETED": 0, "ZUNUSED": int(f.unused),
            "ZUPLOADED": 1, "ZVERSION": 1, "ZNOTE": note_pk,
            "ZCREATIONDATE": when - CORE_DATA_EPOCH, "ZINSERTIONDATE": when - CORE_DATA_EPOCH,
            "ZMODIFICATIONDATE": when - CORE_DATA_EPOCH, "ZFILENAME": f.filename,
            "ZNORMALIZEDFILEEXTENSION": f.filename.rsplit(".", 1)[-1].lower(),
            "ZUNIQUEIDENTIFIER": str(uuidlib.uuid4()).upper(),
        }
        if self.has_search_text:
            values["ZSEARCHTEXT"] = f.search_text
            if f.search_text is not None:
                values["ZSEARCHTEXTDATE"] = when - CORE_DATA_EPOCH
        marks = ",".join("?" * len(values))
        cur = self.conn.execute(f"INSERT INTO ZSFNOTEFILE ({','.join(values)}) VALUES ({marks})",
                                tuple(values.values()))
        return cur.lastrowid

    def set_search_text(self, filename: str, text: str | None) -> None:
        """What Bear does when its OCR finishes: the file row changes, the note does not."""
        self.conn.execute(
            "UPDATE ZSFNOTEFILE SET ZSEARCHTEXT = ?, ZSEARCHTEXTDATE = ?, Z_OPT = Z_OPT + 1 "
            "WHERE ZFILENAME = ?", (text, self._max_modified() + 60.0 - CORE_DATA_EPOCH,
                                    filename))

    def attach(self, uuid: str, f: FixtureFile) -> int:
        return self.add_file(self._pk(uuid), f, 99)

    def _join(self, pk: int, tag: str) -> None:
        # Bear joins a note to the full path of a nested tag and to every parent.
        parts = tag.split("/")
        for i in range(1, len(parts) + 1):
            self.conn.execute(f"INSERT OR IGNORE INTO {self.join_table} VALUES (?, ?)",
                              (pk, self.tag_pk("/".join(parts[:i]))))

    def _pk(self, uuid: str) -> int:
        row = self.conn.execute("SELECT Z_PK FROM ZSFNOTE WHERE ZUNIQUEIDENTIFIER = ?",
                                (uuid,)).fetchone()
        if row is None:
            raise KeyError(uuid)
        return row[0]

    # -- playing Bear -----------------------------------------------------------------------

    def edit_text(self, uuid: str, text: str, modified: float | None = None) -> None:
        first = text.lstrip().split("\n", 1)[0].lstrip("#").strip()
        mod = (modified if modified is not None else self._max_modified() + 60.0)
        self.conn.execute(
            "UPDATE ZSFNOTE SET ZTEXT = ?, ZTITLE = ?, ZMODIFICATIONDATE = ?, "
            "Z_OPT = Z_OPT + 1 WHERE ZUNIQUEIDENTIFIER = ?",
            (text, first, mod - CORE_DATA_EPOCH, uuid))

    def add_tag(self, uuid: str, tag: str) -> None:
        """Only the join table changes: no modification date, no Z_OPT on the note."""
        self._join(self._pk(uuid), tag)

    def trash(self, uuid: str) -> None:
        self.conn.execute("UPDATE ZSFNOTE SET ZTRASHED = 1, Z_OPT = Z_OPT + 1 "
                          "WHERE ZUNIQUEIDENTIFIER = ?", (uuid,))

    def set_archived(self, uuid: str, archived: bool = True) -> None:
        self.conn.execute("UPDATE ZSFNOTE SET ZARCHIVED = ?, Z_OPT = Z_OPT + 1 "
                          "WHERE ZUNIQUEIDENTIFIER = ?", (int(archived), uuid))

    def delete_row(self, uuid: str) -> None:
        pk = self._pk(uuid)
        self.conn.execute(f"DELETE FROM {self.join_table} WHERE {self.join_note} = ?", (pk,))
        self.conn.execute("DELETE FROM ZSFNOTE WHERE Z_PK = ?", (pk,))

    def _max_modified(self) -> float:
        row = self.conn.execute("SELECT max(ZMODIFICATIONDATE) FROM ZSFNOTE").fetchone()
        return (row[0] or 0.0) + CORE_DATA_EPOCH

    def checkpoint(self) -> None:
        if self.journal == "wal":
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self.conn.close()


def build(path: str, schema: str = "bear2", journal: str = "wal",
          notes: list[FixtureNote] | None = None, unused_tags: tuple[str, ...] = UNUSED_TAGS
          ) -> BearFixture:
    """A new Bear database at ``path`` (replacing one there), left open for edits."""
    if schema not in LAYOUTS:
        raise ValueError(f"schema must be one of {', '.join(LAYOUTS)}")
    if journal not in ("wal", "delete"):
        raise ValueError("journal must be wal or delete")
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fx = BearFixture(path, LAYOUTS[schema], journal)
    layout = LAYOUTS[schema]
    fx.conn.execute("BEGIN")
    fx.create_schema()
    for note in default_notes() if notes is None else notes:
        if note.encrypted and "ZENCRYPTED INTEGER" not in layout.extra_note_columns:
            continue
        if note.deleted and "ZPERMANENTLYDELETED INTEGER" not in layout.extra_note_columns:
            continue
        fx.add_note(note)
    for tag in unused_tags:
        fx.tag_pk(tag)
    fx.conn.execute("COMMIT")
    return fx


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write a Bear test database.")
    p.add_argument("out", help="the database file to write")
    p.add_argument("--schema", choices=sorted(LAYOUTS), default="bear2")
    p.add_argument("--journal", choices=("wal", "delete"), default="wal")
    args = p.parse_args(argv)
    fx = build(args.out, args.schema, args.journal)
    fx.checkpoint()
    fx.close()
    print(f"wrote {args.out} ({args.schema}, {args.journal})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

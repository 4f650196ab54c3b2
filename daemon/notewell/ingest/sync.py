"""Bringing the index in line with the sources, doing no work twice.

Per source: a cheap scan gives every note's fingerprint; notes whose fingerprint is
unchanged are skipped without being read; a note whose fingerprint changed but whose
content hash did not only gets its new fingerprint; otherwise the note is re-chunked, only
chunks whose text hash has no stored vector are embedded, and the note's rows are replaced
in one transaction. Vectors are committed before the notes that use them, so a crash at
any point leaves a consistent index and the next sync re-embeds nothing already stored.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.index.database import Index, StoredNote
from notewell.ingest.chunking import ChunkSettings, note_chunks, title_text
from notewell.ingest.progress import Progress, Relay
from notewell.model.embedding import Embedder
from notewell.notes import Chunk, Note, NoteStub
from notewell.sources import Listing, Source, SourceError, SourceWarning
from notewell.sources.base import FolderUnreadable

log = logging.getLogger(__name__)

NOTES_PER_BATCH = 32
# Texts per model call while syncing. Each step is committed and a stop request is
# honoured between steps, so SIGTERM waits for one small model call at most; batches of
# 4 to 16 embed at the same rate (measured: 10.2-10.9 chunks/s on the loaded 2-core box).
EMBED_STEP = 8
RETRY_UNREADABLE = 600.0
# Where a sync's progress goes, by label and total: a bar on stderr (``True``), or the
# caller's own, such as the daemon relaying it to the command that asked.
ProgressBars = Callable[[str, int], Progress | Relay]


@dataclass
class SyncReport:
    source: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    embedded: int = 0  # texts sent to the model: passages and titles
    reused: int = 0  # passages and titles whose vector was already stored
    pending: int = 0  # changed notes left unapplied (the sync was stopped)
    offloaded: int = 0  # notes a cloud drive keeps online only: kept as indexed, not read
    links_out: int = 0  # links resolving outside the source's folder: skipped, not read
    carried: int = 0  # a rebuild: notes it could not read, their rows from the live index
    # A rebuild: every note the scan could not read (``error``'s folders, offloaded) was
    # carried over, so the build lacks nothing of this source and may be published.
    carried_all: bool = False
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)  # every field, in order


class UnreadableNotes:
    """The notes that could not be read, per source object: note id -> (fingerprint,
    message, when). Such a note is not read again until it changes or ``RETRY_UNREADABLE``
    passes, and the same failure is logged once, so each bad file costs one warning, not
    one per sync. Owned by whoever syncs the same sources over time (the ``Engine``; a
    ``Syncer`` made without one keeps its own); used only by the syncing thread."""

    def __init__(self) -> None:
        self._seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def of(self, source: Source) -> dict[str, tuple[str, str, float]]:
        try:
            return self._seen.setdefault(source, {})
        except TypeError:  # a source that cannot be weakly referenced: warn every sync
            return {}


@dataclass
class Diff:
    """What a scan means for the index, before any note is read."""

    gone: list[str]  # stored notes the scan no longer lists, nor keeps: to delete
    todo: list[NoteStub]  # notes new or with another fingerprint: to read
    unchanged: int  # listed with the fingerprint stored
    offloaded: int  # kept as indexed, online only (``Listing.offloaded_count``)


def diff(listing: Listing, stored: Mapping[str, StoredNote]) -> Diff:
    """Compare a scan with the stored fingerprints (no I/O)."""
    stubs = {s.note_id: s for s in listing}
    gone = [n for n in stored.keys() - stubs.keys()
            if not listing.keeps(n)]  # not seen, not gone: unreadable or offloaded
    todo = [s for s in stubs.values()
            if s.note_id not in stored or stored[s.note_id].fingerprint != s.fingerprint]
    return Diff(gone, todo, len(stubs) - len(todo), listing.offloaded_count(stored))


# What reading one changed note tells the sync to do (``Loaded.action``).
SKIP = "skip"  # nothing: unreadable a moment ago, or gone and never stored
UNREADABLE = "unreadable"  # keep its old rows (dropping them would lose results)
GONE = "gone"  # delete its rows
TOUCH = "touch"  # same content where it was: record the new fingerprint and dates
WRITE = "write"  # new or changed: cut, embed what is missing, replace its rows


@dataclass
class Loaded:
    action: str
    note: Note | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class Written:
    """What one batch's write did: the notes written, and how many texts it embedded and
    reused (of the notes left unwritten too)."""

    notes: list[Note]
    embedded: int
    reused: int


class Syncer:
    """One sync of a source runs four steps, each its own method: ``scan`` (the cheap
    listing), ``diff`` (against the stored fingerprints), ``load`` (each changed note
    read, and what to do with it) and ``write`` (a batch embedded and stored); ``sync``
    runs them and counts once what happened."""

    def __init__(self, index: Index, embedder: Embedder, chunker: ChunkSettings,
                 should_stop: Callable[[], bool] = lambda: False,
                 clock: Clock = SYSTEM_CLOCK, carry_from: str | None = None,
                 unreadable: UnreadableNotes | None = None) -> None:
        self.index = index
        self.embedder = embedder
        self.chunker = chunker
        self.should_stop = should_stop
        self.clock = clock  # when an unreadable note is read again; the report's seconds
        # A rebuild writing a fresh index: the live index file, whose rows of the notes a
        # scan keeps but cannot read (offloaded, under an unreadable folder) are carried.
        self.carry_from = carry_from
        self.unreadable = unreadable if unreadable is not None else UnreadableNotes()

    def sync(self, source: Source, progress: bool | ProgressBars = False) -> SyncReport:
        report = SyncReport(source.name)
        start = self.clock.monotonic()
        try:
            listing = self.scan(source)
        except SourceError as e:
            report.error = str(e)
            self.index.record_sync(source.name, source.kind, error=report.error)
            log.warning("%s", e if isinstance(e, FolderUnreadable) else
                        f"source {source.name}: {e}")
            return report
        if listing.error is not None:
            # Some folders could not be listed: their notes stay, the rest is synced.
            report.error = str(listing.error)
            log.warning("%s", listing.error)
        self._carry(source, listing, {s.note_id for s in listing}, report)
        stored = self.index.stored_notes(source.name)
        plan = diff(listing, stored)
        for note_id in plan.gone:
            self.index.delete_note(note_id)
        if plan.todo:
            # `status` and the launcher's "behind" hint see this while the sync runs.
            self.index.mark_pending(source.name, source.kind, len(plan.todo))
        bar = self._bar(source, progress, len(plan.todo))
        done = 0  # notes of ``plan.todo`` considered before a stop request
        vanished = touched = 0
        written: list[Note] = []
        unwritten: list[Note] = []  # loaded, left for the next sync (stopped mid-embedding)
        batch: list[Note] = []
        for stub in plan.todo:
            if self.should_stop():
                break
            done += 1
            loaded = self.load(source, stub, stored.get(stub.note_id))
            report.warnings += loaded.warnings
            if loaded.action == WRITE:
                batch.append(loaded.note)
                if len(batch) >= NOTES_PER_BATCH:
                    self._write_batch(source, batch, report, written, unwritten, bar)
                    batch = []
                continue
            if loaded.action == TOUCH:
                note = loaded.note
                # Dates are not content: a note read again may bring one it lacked
                # (frontmatter ``created``, read since issue 19).
                self.index.touch_note(note.note_id, note.fingerprint, note.url,
                                      note.created, note.modified)
                touched += 1
            elif loaded.action == GONE:
                self.index.delete_note(stub.note_id)
                vanished += 1
            if bar:
                bar.advance()
        if batch:
            self._write_batch(source, batch, report, written, unwritten, bar)
        if bar:
            bar.close()
        self.index.prune_embeddings()
        report.deleted = len(plan.gone) + vanished
        report.unchanged = plan.unchanged + touched
        report.updated = sum(1 for n in written if n.note_id in stored)
        report.added = len(written) - report.updated
        report.pending = len(plan.todo) - done + len(unwritten)
        report.offloaded = plan.offloaded
        report.links_out = len(listing.links_out)
        self.index.record_sync(source.name, source.kind, error=report.error,
                               pending=report.pending, offloaded=report.offloaded,
                               links_out=listing.links_out)
        report.seconds = round(self.clock.monotonic() - start, 3)
        return report

    # -- the steps ----------------------------------------------------------------------------

    def scan(self, source: Source) -> Listing:
        """Every note of the source with its fingerprint; raises ``SourceError``."""
        found = source.scan()
        return found if isinstance(found, Listing) else Listing(found)

    def load(self, source: Source, stub: NoteStub, old: StoredNote | None) -> Loaded:
        """Read one note whose fingerprint changed, and say what to do with it."""
        memo = self.unreadable.of(source)
        seen = memo.get(stub.note_id)
        now = self.clock.monotonic()
        if seen and seen[0] == stub.fingerprint and now - seen[2] < RETRY_UNREADABLE:
            return Loaded(SKIP)
        try:
            note = source.load(stub.note_id)
            message = None
        except SourceWarning as e:
            message = str(e)
        except Exception as e:  # a reader bug on one odd file must not stop the rest
            message = f"{stub.note_id}: could not be read ({type(e).__name__}); skipped"
        if message is not None:
            if not seen or seen[1] != message:
                log.warning("%s", message)
            memo[stub.note_id] = (stub.fingerprint, message, now)
            return Loaded(UNREADABLE, warnings=[message])
        memo.pop(stub.note_id, None)
        if note is None:
            return Loaded(GONE if old else SKIP)
        warnings = list(note.warnings)  # logged once per file where it was found
        # Same content at the same place: a moved folder or another url_template changes
        # the links of every passage, so such a note is written again (no vector is).
        if (old and old.content_hash == note.content_hash
                and (old.url, old.path) == (note.url, note.path)):
            return Loaded(TOUCH, note, warnings)
        return Loaded(WRITE, note, warnings)

    def write(self, source: Source, notes: list[Note]) -> Written:
        """Embed what is missing, then replace each note's rows. A stop requested while
        embedding leaves out the notes whose vectors are not all stored: they keep their
        old rows and fingerprint, so the next sync picks them up and reuses these
        vectors."""
        planned: list[tuple[Note, list[tuple[Chunk, str, str]], str | None]] = []
        texts: dict[str, str] = {}
        for note in notes:
            rows = []
            for chunk, url in note_chunks(note, self.chunker):
                text = chunk.embed_text(note.title)
                h = Chunk.text_hash(text)
                texts[h] = text
                rows.append((chunk, url or source.passage_url(note, chunk.anchor, chunk.line), h))
            title, th = title_text(note, self.chunker), None
            if title is not None:
                th = Chunk.text_hash(title)
                texts[th] = title
            planned.append((note, rows, th))
        # Similar lengths together, as the model batches them: steps cost no speed.
        missing = sorted(self.index.missing_embeddings(texts), key=lambda h: (len(texts[h]), h))
        total = sum(len(rows) + (th is not None) for _, rows, th in planned)
        stopped = False
        for i in range(0, len(missing), EMBED_STEP):
            if i and self.should_stop():
                stopped = True
                break
            step = missing[i : i + EMBED_STEP]
            self.index.add_embeddings(step, self.embedder.embed_batch([texts[h] for h in step]))
        left = self.index.missing_embeddings(texts) if stopped else set()
        done = []
        for note, rows, th in planned:
            if not stopped or left.isdisjoint([*(h for _, _, h in rows), th]):
                self.index.replace_note(note, rows, title=th)
                done.append(note)
        return Written(done, len(missing) - len(left), total - len(missing))

    # -- around the steps ---------------------------------------------------------------------

    def _write_batch(self, source: Source, batch: list[Note], report: SyncReport,
                     written: list[Note], unwritten: list[Note],
                     bar: Progress | Relay | None) -> None:
        out = self.write(source, batch)
        report.embedded += out.embedded
        report.reused += out.reused
        written += out.notes
        ids = {n.note_id for n in out.notes}
        unwritten += [n for n in batch if n.note_id not in ids]
        if bar:
            bar.advance(len(batch))

    def _bar(self, source: Source, progress: bool | ProgressBars,
             total: int) -> Progress | Relay | None:
        """A bar on stderr, or the caller's (``progress.Relay``); none without work."""
        if not progress or not total:
            return None
        label = f"indexing {source.name}"
        return (progress(label, total) if callable(progress)
                else Progress(label, total, clock=self.clock))

    def _carry(self, source: Source, listing: Listing, seen: Collection[str],
               report: SyncReport) -> None:
        """A rebuild: take the live index's rows of the notes this scan keeps unread."""
        if self.carry_from is None:
            return
        if not (listing.unreadable or listing.offloaded):
            report.carried_all = True
            return
        carried = self.index.carry_notes(self.carry_from, source.name,
                                         lambda n: n not in seen and listing.keeps(n))
        if carried is None:
            report.warnings.append(f"{source.name}: notes that cannot be read now could "
                                   "not be carried over from the live index")
            return
        report.carried, report.carried_all = carried, True

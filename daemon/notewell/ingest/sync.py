"""Bringing the index in line with the sources, doing no work twice.

Per source: a cheap scan gives every note's fingerprint; notes whose fingerprint is
unchanged are skipped without being read; a note whose fingerprint changed but whose
content hash did not only gets its new fingerprint; otherwise the note is re-chunked, only
chunks whose text hash has no stored vector are embedded, and the note's rows are replaced
in one transaction. Vectors are committed before the notes that use them, so a crash at
any point leaves a consistent index and the next sync re-embeds nothing already stored.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.index.database import Index
from notewell.ingest.chunking import ChunkSettings, note_chunks, title_text
from notewell.ingest.progress import Progress, Relay
from notewell.model.embedding import Embedder
from notewell.notes import Chunk, Note
from notewell.sources import Listing, Source, SourceError, SourceWarning
from notewell.sources.base import FolderUnreadable

log = logging.getLogger(__name__)

NOTES_PER_BATCH = 32
# Texts per model call while syncing. Each step is committed and a stop request is
# honoured between steps, so SIGTERM waits for one small model call at most; batches of
# 4 to 16 embed at the same rate (measured: 10.2-10.9 chunks/s on the loaded 2-core box).
EMBED_STEP = 8
_UNREADABLE = object()
# Per source object: note id -> (fingerprint, message, when) of a note that could not be
# read. It is not read again until it changes or RETRY_UNREADABLE passes, and the same
# failure is logged once, so each bad file costs one warning, not one per sync.
_UNREADABLE_SEEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
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
        return {k: getattr(self, k) for k in (
            "source", "added", "updated", "unchanged", "deleted", "embedded", "reused",
            "pending", "offloaded", "carried", "carried_all", "warnings", "error",
            "seconds")}


class Syncer:
    def __init__(self, index: Index, embedder: Embedder, chunker: ChunkSettings,
                 should_stop: Callable[[], bool] = lambda: False,
                 clock: Clock = SYSTEM_CLOCK, carry_from: str | None = None) -> None:
        self.index = index
        self.embedder = embedder
        self.chunker = chunker
        self.should_stop = should_stop
        self.clock = clock  # when an unreadable note is read again; the report's seconds
        # A rebuild writing a fresh index: the live index file, whose rows of the notes a
        # scan keeps but cannot read (offloaded, under an unreadable folder) are carried.
        self.carry_from = carry_from

    def sync(self, source: Source, progress: bool | ProgressBars = False) -> SyncReport:
        report = SyncReport(source.name)
        start = self.clock.monotonic()
        try:
            found = source.scan()
            stubs = {s.note_id: s for s in found}
        except SourceError as e:
            report.error = str(e)
            self.index.record_sync(source.name, source.kind, error=report.error)
            log.warning("%s", e if isinstance(e, FolderUnreadable) else
                        f"source {source.name}: {e}")
            return report
        listing = found if isinstance(found, Listing) else Listing()
        if listing.error is not None:
            # Some folders could not be listed: their notes stay, the rest is synced.
            report.error = str(listing.error)
            log.warning("%s", listing.error)
        self._carry(source, listing, stubs.keys(), report)
        stored = self.index.stored_notes(source.name)
        for note_id in stored.keys() - stubs.keys():
            if listing.keeps(note_id):  # not seen, not gone: unreadable or offloaded
                continue
            self.index.delete_note(note_id)
            report.deleted += 1
        report.offloaded = listing.offloaded_count(stored)
        todo = [s for s in stubs.values()
                if s.note_id not in stored or stored[s.note_id].fingerprint != s.fingerprint]
        report.unchanged = len(stubs) - len(todo)
        if todo:
            # `status` and the launcher's "behind" hint see this while the sync runs.
            self.index.mark_pending(source.name, source.kind, len(todo))
        bar = None
        if progress and todo:  # a bar on stderr, or the caller's (``progress.Relay``)
            label = f"indexing {source.name}"
            bar = (progress(label, len(todo)) if callable(progress)
                   else Progress(label, len(todo), clock=self.clock))
        batch: list[Note] = []
        done = 0
        unwritten = 0  # notes loaded but left for the next sync (stopped mid-embedding)
        unreadable = _unreadable_memo(source)
        for stub in todo:
            if self.should_stop():
                break
            done += 1
            seen = unreadable.get(stub.note_id)
            if (seen and seen[0] == stub.fingerprint
                    and self.clock.monotonic() - seen[2] < RETRY_UNREADABLE):
                if bar:
                    bar.advance()
                continue
            message = None
            try:
                note = source.load(stub.note_id)
            except SourceWarning as e:
                # An unreadable note keeps its old rows: dropping them would lose results.
                message, note = str(e), _UNREADABLE
            except Exception as e:  # a reader bug on one odd file must not stop the rest
                message = f"{stub.note_id}: could not be read ({type(e).__name__}); skipped"
                note = _UNREADABLE
            if message is not None:
                report.warnings.append(message)
                if not seen or seen[1] != message:
                    log.warning("%s", message)
                unreadable[stub.note_id] = (stub.fingerprint, message, self.clock.monotonic())
            else:
                unreadable.pop(stub.note_id, None)
            if note is None or note is _UNREADABLE:
                if note is None and stub.note_id in stored:
                    self.index.delete_note(stub.note_id)
                    report.deleted += 1
                if bar:
                    bar.advance()
                continue
            for problem in note.warnings:  # logged once per file where it was found
                report.warnings.append(problem)
            old = stored.get(note.note_id)
            if old and old.content_hash == note.content_hash:
                # Dates are not content: a note read again may bring one it lacked
                # (frontmatter ``created``, read since issue 19).
                self.index.touch_note(note.note_id, note.fingerprint, note.url,
                                      note.created, note.modified)
                report.unchanged += 1
                if bar:
                    bar.advance()
                continue
            if old:
                report.updated += 1
            else:
                report.added += 1
            batch.append(note)
            if len(batch) >= NOTES_PER_BATCH:
                unwritten += self._write(source, batch, report, stored)
                if bar:
                    bar.advance(len(batch))
                batch = []
        if batch:
            unwritten += self._write(source, batch, report, stored)
            if bar:
                bar.advance(len(batch))
        if bar:
            bar.close()
        self.index.prune_embeddings()
        report.pending = len(todo) - done + unwritten
        self.index.record_sync(source.name, source.kind, error=report.error,
                               pending=report.pending, offloaded=report.offloaded)
        report.seconds = round(self.clock.monotonic() - start, 3)
        return report

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

    def _write(self, source: Source, notes: list[Note], report: SyncReport,
               stored: dict) -> int:
        """Embed what is missing, then replace each note's rows; returns how many notes
        were left unwritten because a stop was requested while embedding."""
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
        report.embedded += len(missing)
        report.reused += total - len(missing)
        for i in range(0, len(missing), EMBED_STEP):
            if i and self.should_stop():
                break
            step = missing[i : i + EMBED_STEP]
            self.index.add_embeddings(step, self.embedder.embed_batch([texts[h] for h in step]))
        else:
            for note, rows, th in planned:
                self.index.replace_note(note, rows, title=th)
            return 0
        # Stopped: write the notes whose vectors are all stored; the rest keep their old
        # rows and fingerprint, so the next sync picks them up and reuses these vectors.
        left = self.index.missing_embeddings(texts)
        unwritten = 0
        for note, rows, th in planned:
            if left.isdisjoint([*(h for _, _, h in rows), th]):
                self.index.replace_note(note, rows, title=th)
                continue
            unwritten += 1
            if note.note_id in stored:
                report.updated -= 1
            else:
                report.added -= 1
        report.embedded -= len(left)
        return unwritten


def _unreadable_memo(source: Source) -> dict[str, tuple[str, str, float]]:
    try:
        return _UNREADABLE_SEEN.setdefault(source, {})
    except TypeError:  # a source that cannot be weakly referenced: warn every sync
        return {}


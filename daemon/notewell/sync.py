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
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .chunking import ChunkSettings, chunk_note
from .embedding import Embedder
from .index import Index
from .notes import Chunk, Note
from .progress import Progress
from .sources import Source, SourceError, SourceWarning

log = logging.getLogger(__name__)

NOTES_PER_BATCH = 32
_UNREADABLE = object()


@dataclass
class SyncReport:
    source: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    embedded: int = 0  # chunks sent to the model
    reused: int = 0  # chunks whose vector was already stored
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in (
            "source", "added", "updated", "unchanged", "deleted", "embedded", "reused",
            "warnings", "error", "seconds")}


class Syncer:
    def __init__(self, index: Index, embedder: Embedder, chunker: ChunkSettings,
                 should_stop: Callable[[], bool] = lambda: False) -> None:
        self.index = index
        self.embedder = embedder
        self.chunker = chunker
        self.should_stop = should_stop

    def sync(self, source: Source, progress: bool = False) -> SyncReport:
        report = SyncReport(source.name)
        start = time.monotonic()
        try:
            stubs = {s.note_id: s for s in source.scan()}
        except SourceError as e:
            report.error = str(e)
            self.index.record_sync(source.name, source.kind, error=report.error)
            log.warning("source %s: %s", source.name, e)
            return report
        stored = self.index.stored_notes(source.name)
        for note_id in stored.keys() - stubs.keys():
            self.index.delete_note(note_id)
            report.deleted += 1
        todo = [s for s in stubs.values()
                if s.note_id not in stored or stored[s.note_id].fingerprint != s.fingerprint]
        report.unchanged = len(stubs) - len(todo)
        bar = Progress(f"indexing {source.name}", len(todo)) if progress and todo else None
        batch: list[Note] = []
        for stub in todo:
            if self.should_stop():
                break
            try:
                note = source.load(stub.note_id)
            except SourceWarning as e:
                # An unreadable note keeps its old rows: dropping them would lose results.
                report.warnings.append(str(e))
                log.warning("%s", e)
                note = _UNREADABLE
            if note is None or note is _UNREADABLE:
                if note is None and stub.note_id in stored:
                    self.index.delete_note(stub.note_id)
                    report.deleted += 1
                if bar:
                    bar.advance()
                continue
            old = stored.get(note.note_id)
            if old and old.content_hash == note.content_hash:
                self.index.touch_note(note.note_id, note.fingerprint, note.url)
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
                self._write(source, batch, report)
                if bar:
                    bar.advance(len(batch))
                batch = []
        if batch:
            self._write(source, batch, report)
            if bar:
                bar.advance(len(batch))
        if bar:
            bar.close()
        self.index.prune_embeddings()
        self.index.record_sync(source.name, source.kind)
        report.seconds = round(time.monotonic() - start, 3)
        return report

    def _write(self, source: Source, notes: list[Note], report: SyncReport) -> None:
        planned: list[tuple[Note, list[tuple[Chunk, str, str]]]] = []
        texts: dict[str, str] = {}
        for note in notes:
            rows = []
            for chunk in chunk_note(note.title, note.text, self.chunker):
                text = chunk.embed_text(note.title)
                h = Chunk.text_hash(text)
                texts[h] = text
                rows.append((chunk, source.passage_url(note, chunk.anchor), h))
            planned.append((note, rows))
        missing = sorted(self.index.missing_embeddings(texts))
        total = sum(len(rows) for _, rows in planned)
        report.embedded += len(missing)
        report.reused += total - len(missing)
        if missing:
            vectors = self.embedder.embed_batch([texts[h] for h in missing])
            self.index.add_embeddings(missing, vectors)
        for note, rows in planned:
            self.index.replace_note(note, rows)


def sync_all(index: Index, embedder: Embedder, chunker: ChunkSettings,
             sources: Iterable[Source], progress: bool = False,
             should_stop: Callable[[], bool] = lambda: False) -> list[SyncReport]:
    syncer = Syncer(index, embedder, chunker, should_stop)
    return [syncer.sync(s, progress=progress) for s in sources]

"""The library behind every command: config, sources, embedder, index and searcher, wired.

The daemon holds one ``Engine`` for its lifetime; CLI commands that run without a daemon
make a short-lived one. Each CLI command is a thin wrapper over one method here.

The index and its searcher come as one ``Generation`` (``search.generation``), which the
engine's ``Generations`` owns; a switch to a new file retires the old one, closed when
its last reader lets go. A request reads through one ``ReadView`` (``with
engine.reading() as view``): it holds one generation and one read view of its index
(which side, an in-memory copy or SQLite, answers each read: decided once, at its start)
for all its reads; a one-shot caller takes one for its one read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import stat
import threading
from collections.abc import Callable, Collection, Iterator, Sequence

from notewell import __version__
from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.config import Config
from notewell.index import schema, store
from notewell.index.database import Index
from notewell.index.schema import SCHEMA_VERSION, BuildSettings
from notewell.ingest.chunking import ChunkSettings, heading_paths, section
from notewell.ingest.rebuild import rebuild
from notewell.ingest.selection import RELATED_FILE_TYPES, read_file_text, text_problem, text_vector
from notewell.ingest.sync import ProgressBars, Syncer, SyncReport, UnreadableNotes
from notewell.model.custom import open_folder
from notewell.model.embedding import Embedder
from notewell.model.runtime import custom_embedder, default_embedder
from notewell.notes import Hit, id_forms, nfc
from notewell.search import dates, filters
from notewell.search.generation import Generation, Generations
from notewell.search.query import Query, parse, typing_tag
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher, SearchResult
from notewell.sources import Source, SourceWarning, open_source
from notewell.wire import paths, requests
from notewell.wire.requests import ArgumentError

log = logging.getLogger(__name__)

DateBound = str | float | int | None


class NoteNotFound(LookupError):
    """No indexed note has this id (or its source no longer has it)."""


class HeadingNotFound(LookupError):
    """The note has no heading by this name; the message lists the ones it has."""


class Engine:
    def __init__(self, config: Config, embedder: Embedder | None = None,
                 chunker: ChunkSettings | None = None, ranking: Ranking | None = None,
                 index_dir: str | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock  # "now" for relative dates (7d, 3m)
        self.embedder = embedder or embedder_for(config)
        self.chunker = chunker or chunker_for(self.embedder)
        self.ranking = ranking
        self.index_dir = index_dir or paths.index_dir()
        self.settings = BuildSettings(self.embedder.fingerprint(), self.embedder.dim,
                                      self.chunker.fingerprint())
        # A file cut by another chunker still answers until ``sync`` has re-chunked it.
        index = store.open_current(self.settings, self.index_dir, other_chunker_ok=True)
        self.generations = Generations(self._generation(index), self.index_dir)
        self.sources: list[Source] = [open_source(s) for s in config.sources]
        self._sync_lock = threading.Lock()
        self._unreadable = UnreadableNotes()  # notes that failed: across syncs, one warning

    def close(self) -> None:
        self.generations.close()
        for src in self.sources:
            close = getattr(src, "close", None)  # Bear's long-lived read-only connection
            if close is not None:
                close()

    # -- generations ------------------------------------------------------------------------

    @property
    def index(self) -> Index:
        """The current generation's index: for one-thread callers (CLI, tests) and the
        sync thread, which switches. A request reads through ``reading()`` instead."""
        return self.generations.current.index

    @property
    def searcher(self) -> Searcher:
        """The current generation's searcher (unbound: each search takes its own view)."""
        return self.generations.current.searcher

    @contextlib.contextmanager
    def reading(self) -> Iterator[ReadView]:
        """A read view for the ``with`` block: it holds the current generation (open,
        whatever switch happens meanwhile) and reads its index through one view, taken
        now. A request takes one at its start and makes all its reads through it."""
        with self.generations.use() as gen:
            yield ReadView(self, gen)

    def _generation(self, index: Index) -> Generation:
        return Generation(index, Searcher(index, self.embedder, self.ranking,
                                          clock=self.clock))

    # -- writes -----------------------------------------------------------------------------

    def sync(self, progress: bool | ProgressBars = False,
             should_stop: Callable[[], bool] = lambda: False,
             only: str | Collection[str] | None = None,
             rebuild_all: bool = False) -> list[SyncReport]:
        """Bring the index up to date with every source (or those named in ``only``).
        An index cut by another chunker (an upgrade changed it) is rebuilt beside from
        every source instead, embedding only the passages whose text changed, and this
        engine switches to it (``reopen``); so is any index with ``rebuild_all``
        (``notewell index --rebuild`` sent to the daemon), unless a configured source
        cannot be read. The caller holds ``index.writer``'s lock."""
        if isinstance(only, str):
            only = {only}
        if rebuild_all or self.index.other_chunker is not None:
            if not rebuild_all:
                log.info("the index was cut by chunker %r; re-chunking it as %r beside the "
                         "live one (only changed passages are embedded)",
                         self.index.other_chunker, self.chunker.fingerprint())
            with self._sync_lock:
                # A source that cannot be read now keeps its notes in the live index, which
                # answers until a later try reads every source.
                keep = ({s.name for s in self.sources} if rebuild_all
                        else self.index.sql_view().sources())
                final, reports = rebuild(self.sources, self.embedder, self.chunker,
                                         self.index_dir, progress, should_stop,
                                         keep_if_failed=keep)
            if final is not None:
                self.reopen(final)
            return reports
        with self._sync_lock:
            syncer = Syncer(self.index, self.embedder, self.chunker, should_stop,
                            unreadable=self._unreadable)
            reports = [syncer.sync(src, progress=progress) for src in self.sources
                       if only is None or src.name in only]
            self._drop_unconfigured()
            return reports

    def _drop_unconfigured(self) -> None:
        configured = {s.name for s in self.sources}
        for name in self.index.sql_view().sources():
            if name not in configured:
                log.info("source %s is no longer configured; dropping its notes", name)
                self.index.drop_source(name)

    def reopen(self, path: str | None = None) -> None:
        """Switch to another index file: a new generation, in one swap. The old one is
        closed, and its file deleted, when the last request holding it lets go (at once
        if none does). Raises ``IndexMismatch`` (another model's file) and keeps the old."""
        old = self.generations.current.index
        index = Index(path or store.current_path(self.index_dir), self.settings,
                      old.copies.settings)  # a one-shot engine's copies stay off
        self.generations.switch(self._generation(index))

    def replace_damaged(self) -> str | None:
        """After a read or write of the live index raised a damage error (``failures
        .damaged``): if SQLite's quick check of the file agrees, move it aside as at start
        (``store.quarantine``, never deleted) and switch to a fresh, empty generation that
        the next sync fills (requests already reading the old one finish on it). Returns
        where the damaged file went, or None when the check finds nothing wrong. The
        caller holds the writer lock."""
        old = self.generations.current.index
        problems = schema.file_problems(old.path)
        if not problems:
            return None
        fresh_path = store.next_path(self.index_dir)  # before the move: a new number
        moved = store.quarantine(old.path)
        log.error("the index %s is damaged (%s); moved it aside to %s and rebuilding it "
                  "from the sources", old.path, problems[0], moved)
        index = Index(fresh_path, self.settings, old.copies.settings)
        index.recovered_from = moved
        self.generations.switch(self._generation(index))
        return moved

    def newer_generation(self) -> str | None:
        current = store.current_path(self.index_dir)
        return current if current != self.generations.current.index.path else None


class ReadView:
    """One request's reads (``Engine.reading``): one generation, held, and one read view
    of its index (``Index.view``: the freshness stamps read once, which side answers each
    read fixed then), through which every method here reads."""

    def __init__(self, engine: Engine, generation: Generation) -> None:
        self._engine = engine
        self.generation = generation
        self.clock = engine.clock
        self.reads = generation.index.view()
        self.searcher = generation.searcher.on(self.reads)

    @property
    def index_path(self) -> str:
        """The file this view reads (prepared answers are kept per file)."""
        return self.generation.index.path

    def new_notes(self, query: str) -> list[dict]:
        """How to create a note from ``query`` in each source's own app (its ``in:`` source
        only, when it names one): ``{source, kind, title, tags, url}``, the title being the
        query without its filters and the tags its ``#tags``. notewell writes nothing: the
        app does, through its URL scheme; a source without one is left out."""
        q = parse(query)
        title = q.text.strip()
        if not title:
            return []
        found = [(src, src.new_note_url(title, q.tags)) for src in self._engine.sources
                 if not q.sources or src.name in q.sources]
        return [{"source": src.name, "kind": src.kind, "title": title, "tags": list(q.tags),
                 "url": url} for src, url in found if url]

    def filtered(self, q: Query, tags: Sequence[str] = (), source: str | None = None,
                 modified_after: DateBound = None, modified_before: DateBound = None
                 ) -> Query:
        """``q`` with filters given as arguments added to those typed in it."""
        after = dates.bound(modified_after, self.clock, name="modified_after")
        before = dates.bound(modified_before, self.clock, name="modified_before")
        if after is not None and before is not None and after >= before:
            raise ArgumentError("modified_before", "is not later than modified_after, so "
                                "no note can match; swap them?")
        more_tags = tuple(nfc(t).strip().lstrip("#").lower().rstrip("/") for t in tags)
        # Bounds typed in the query (``after:``) are read later (``filters.with_dates``)
        # and tighten these.
        return dataclasses.replace(
            q, tags=q.tags + tuple(t for t in more_tags if t),
            sources=q.sources + ((nfc(source),) if source else ()),
            modified_after=after if after is not None else q.modified_after,
            modified_before=before if before is not None else q.modified_before)

    def search(self, query: str, limit: int = 20, mode: str = "hybrid", *,
               tags: Sequence[str] = (), source: str | None = None,
               modified_after: DateBound = None, modified_before: DateBound = None,
               passages: int = 1) -> SearchResult:
        """The launcher's search. ``tags`` and ``source`` add to the ``#tag`` and
        ``in:source`` typed in the query; ``modified_after`` / ``modified_before`` are
        dates as ``search.dates`` reads them (or Unix seconds): notes modified at or
        after the first's start and before the second's. Raises ``dates.DateError``.
        ``passages``: how many of each note's best passages a hit lists."""
        q = self.filtered(parse(query), tags, source, modified_after, modified_before)
        try:
            q = filters.with_dates(q, self.clock)
        except dates.DateError as e:
            # Typed in the box: a notice with the accepted forms, and no results rather
            # than results the filter would not have allowed.
            return SearchResult(q, [], [str(e)])
        return self.searcher.run(q, limit=limit, mode=mode, passages=passages)

    def similar(self, note_id: str, limit: int = 20) -> list[Hit]:
        return self.searcher.similar(note_id, limit)

    def related(self, text: str, limit: int = 20, *, tags: Sequence[str] = (),
                source: str | None = None, modified_after: DateBound = None,
                modified_before: DateBound = None, exclude: str | None = None,
                title: str = "", truncated: bool = False) -> SearchResult:
        """The notes nearest in meaning to any ``text`` (a selection, a file's content),
        within the filters, the note ``exclude`` (an id) left out: the text is embedded
        as notes' passages are (``text_vector``) and ranked as ``similar`` ranks a note's
        neighbours. Text over ``requests.MAX_RELATED_CHARS`` is cut there, with a notice
        (as when a client says it cut it: ``truncated``). Raises ``ArgumentError`` for
        blank or binary text, ``dates.DateError``."""
        notices = []
        if truncated or len(text) > requests.MAX_RELATED_CHARS:
            text = text[:requests.MAX_RELATED_CHARS]
            notices.append(f"only the first {requests.MAX_RELATED_CHARS:,} characters "
                           "were read")
        problem = text_problem(text)
        if problem:
            raise ArgumentError("text", problem)
        q = filters.with_dates(self.filtered(parse(""), tags, source, modified_after,
                                             modified_before), self.clock)
        allowed, found = self.searcher.allowed(q)
        notices += found
        if allowed is not None and not allowed:
            return SearchResult(q, [], notices)
        own = text_vector(self._engine.embedder, self._engine.chunker, text, title)
        row = None if exclude is None else next(
            (r for r in map(self.reads.note_row, id_forms(exclude)) if r is not None), None)
        return SearchResult(q, self.searcher.near(own, limit, allowed, exclude=row), notices)

    def related_file(self, path: str, limit: int = 20, **filters: object) -> SearchResult:
        """``related`` for a file's text (a Universal Action on a file), within
        ``related``'s filters: only Markdown, text and PDF files up to
        ``requests.MAX_RELATED_FILE_BYTES``; when the file is a note of a configured
        source, that note is read through it and left out of the answer. Raises
        ``ArgumentError`` saying what cannot be read."""
        note_id, title, text = self._file_text(path)
        indexed = note_id is not None and self.reads.note_record(note_id) is not None
        return self.related(text, limit, **filters, exclude=note_id if indexed else None,
                            title=title)

    def _file_text(self, path: str) -> tuple[str | None, str, str]:
        """(the note id the file has in a configured source, or None; title; text)."""
        real = os.path.realpath(os.path.expanduser(path))
        ext = os.path.splitext(real)[1].lower()
        if ext not in RELATED_FILE_TYPES:
            raise ArgumentError("path", f"{os.path.basename(real)[:200]!r} is not a Markdown, "
                                "text or PDF file (.md, .txt, .pdf); select one of those, "
                                "or some text")
        try:
            st = os.stat(real)
        except OSError as e:
            raise ArgumentError("path", f"{path[:300]}: {e.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            raise ArgumentError("path", f"{path[:300]}: not a regular file")
        if st.st_size > requests.MAX_RELATED_FILE_BYTES:
            raise ArgumentError("path", f"{path[:300]}: {st.st_size / 1e6:.1f} MB is over "
                                f"the {requests.MAX_RELATED_FILE_BYTES / 1e6:g} MB limit "
                                "for related notes; select part of its text instead")
        for src in self._engine.sources:
            root = getattr(src, "root", "")
            if not root or src.kind not in ("markdown", "obsidian"):
                continue
            rel = os.path.relpath(real, os.path.realpath(root))
            if rel.startswith(os.pardir + os.sep) or rel == os.pardir:
                continue
            note_id = f"{src.name}:{rel.replace(os.sep, '/')}"
            try:
                note = src.load(note_id)
            except SourceWarning:
                note = None  # excluded by the source, or unreadable there: read it here
            if note is not None:
                pages = ["\n\n".join(a.pages) for a in note.attachments]
                return note_id, note.title, note.text.strip() or "\n\n".join(pages)
        return None, *read_file_text(real, ext)

    def recent(self, limit: int = 10, source: str | None = None, tags: Sequence[str] = (),
               modified_after: DateBound = None, modified_before: DateBound = None
               ) -> SearchResult:
        """The most recently modified notes, newest first, within the filters."""
        q = self.filtered(parse(""), tags, source, modified_after, modified_before)
        return self.searcher.run(q, limit=limit)

    def note(self, note_id: str, heading: str | None = None, offset: int = 0,
             max_chars: int = requests.PAGE_CHARS) -> dict:
        """A note's text as Markdown, as its source holds it now (or only the section
        under ``heading``), one page of ``max_chars`` from ``offset``; ``next_offset``
        is where the next page starts, None on the last. Only notes in the index are
        read, through their configured source: nothing else on disk is reachable.
        The arguments' types and ranges are checked before (``wire.requests``). Raises
        ``NoteNotFound``, ``HeadingNotFound``, ``ArgumentError`` (past the end).
        """
        record = self.reads.note_record(note_id)
        src = next((s for s in self._engine.sources
                    if record and s.name == record.source), None)
        if record is None or src is None:
            raise NoteNotFound(f"no note with id {note_id[:200]!r}; note ids come from "
                               "search results (note_id)")
        try:
            note = src.load(note_id)
        except SourceWarning as e:
            raise NoteNotFound(f"note {note_id!r} cannot be read now: {e}") from None
        if note is None:
            raise NoteNotFound(f"note {note_id!r} is no longer in its source; the index "
                               "drops it at its next sync")
        text = note.text
        heading = nfc(heading) if heading is not None else None  # as the text is
        if heading is not None and not heading.strip():
            heading = None  # a hit without a heading path: the whole note
        if heading is not None:
            text = section(note.text, heading, note.title)
            if text is None:
                known = heading_paths(note.text, note.title)
                raise HeadingNotFound(
                    f"note {note_id!r} has no heading {heading[:200]!r}; its headings: "
                    + ("; ".join(known[:50]) if known else "none"))
        if offset and offset >= len(text):
            raise ArgumentError("offset", f"{offset} is past the end of the text "
                                f"({len(text)} characters)")
        page = text[offset:offset + max_chars]
        end = offset + len(page)
        if end < len(text):
            # End a page at a line break when one is in its last half: no cut words.
            cut = page.rfind("\n", max_chars // 2)
            if cut > 0:
                page = page[:cut + 1]
                end = offset + len(page)
        return {
            "note_id": note.note_id, "title": note.title, "source": note.source,
            "kind": note.kind, "url": note.url, "path": note.path, "tags": list(note.tags),
            "modified": note.modified if note.modified is not None else record.modified,
            "archived": note.archived, "heading": heading, "text": page,
            "offset": offset, "total_chars": len(text),
            "next_offset": end if end < len(text) else None,
            "headings": heading_paths(note.text, note.title),
        }

    def tags(self, prefix: str | None = None) -> list[dict]:
        """Every tag with the number of notes that carry it, a nested tag's parents
        (``work`` of ``work/project``) counting the notes of all their children once;
        by tag. ``prefix`` keeps the tags that start with it (any case, ``#`` ignored)."""
        notes: dict[str, set[int]] = {}
        for tag, note in self.reads.tag_notes():
            parts = tag.split("/")
            for n in range(1, len(parts) + 1):
                notes.setdefault("/".join(parts[:n]), set()).add(note)
        want = nfc(prefix or "").strip().lstrip("#").lower()
        return [{"tag": tag, "notes": len(ids)} for tag, ids in sorted(notes.items())
                if tag and tag.startswith(want)]

    def tag_completions(self, query: str, limit: int = 30) -> list[dict] | None:
        """For a query that is one tag being typed (``#``, ``#wor``): the tags that start
        with it, most used first, each ``{tag, notes, nested}`` (``nested``: it has tags
        under it); None for any other query, or when no tag starts so (the search then
        says so)."""
        prefix = typing_tag(query)
        if prefix is None:
            return None
        # Every keystroke of "#wor" asks: the counts are kept (by the generation, for
        # every thread) until the index changes, and never changed once made.
        every = self.generation.remember("tag_counts", self.reads.content_stamp(),
                                         self._tag_counts)
        found = [dict(t) for t in every if t["tag"].startswith(prefix)]
        return found[:limit] or None

    def _tag_counts(self) -> tuple[dict, ...]:
        every = self.tags()
        parents = {t["tag"].rsplit("/", 1)[0] for t in every if "/" in t["tag"]}
        for t in every:
            t["nested"] = t["tag"] in parents
        every.sort(key=lambda t: (-t["notes"], t["tag"]))
        return tuple(every)

    def status(self) -> dict:
        """The index's counts, model, chunker, file, sources and in-memory copies
        (``copies``: what each is doing, a failed load with its error and next retry)."""
        engine, index = self._engine, self.generation.index
        counts = index.counts()
        rows = {r["name"]: r for r in index.source_rows()}
        sources = []
        for src in engine.sources:
            row = rows.get(src.name, {})
            sources.append({
                "name": src.name, "type": src.kind, "path": src.config.path,
                "notes": row.get("notes", 0), "chunks": row.get("chunks", 0),
                "last_sync": row.get("last_sync"), "last_error": row.get("last_error"),
                "pending": row.get("pending", 0),
                "behind_since": row.get("behind_since"),
                "offloaded": row.get("offloaded", 0),  # in iCloud, not downloaded
                # Links out of the folder the last scan skipped, and one of them.
                "links_out": row.get("links_out", 0), "link_out": row.get("link_out"),
            })
        syncs = [s["last_sync"] for s in sources if s["last_sync"]]
        return {
            "version": __version__,
            "notes": counts["notes"],
            "chunks": counts["chunks"],
            "embeddings": counts["embeddings"],
            "model": engine.embedder.fingerprint(),
            # What cut the live index: until a sync re-chunks it, maybe not ``chunker``.
            "chunker": index.other_chunker or engine.chunker.fingerprint(),
            "re_chunking": index.other_chunker is not None,
            "index_version": SCHEMA_VERSION,
            "index_path": index.path,
            "index_bytes": _size(index.path),
            "sources": sources,
            "last_sync": max(syncs) if syncs else None,
            "in_memory": index.copies.nbytes(),
            "copies": index.copies.state(),
        }


def embedder_for(config: Config) -> Embedder:
    """The model ``config`` names in ``[model]``, else the shipped one; ``ModelError``
    saying what is wrong with a folder that does not load."""
    if config.model is None:
        return default_embedder()
    return custom_embedder(open_folder(config.model.path, **config.model.settings()))


def chunker_for(embedder: Embedder) -> ChunkSettings:
    """The chunker's budget for the embedder's maximum tokens (test doubles: the
    default)."""
    tokens = getattr(embedder, "max_tokens", None)
    return ChunkSettings.for_tokens(tokens) if isinstance(tokens, int) else ChunkSettings()


def _size(path: str) -> int:
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):
            total += os.path.getsize(path + suffix)
    return total

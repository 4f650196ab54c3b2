"""The library behind every command: config, sources, embedder, index and searcher, wired.

The daemon holds one ``Engine`` for its lifetime; CLI commands that run without a daemon
make a short-lived one. Each CLI command is a thin wrapper over one method here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Collection

from notewell import __version__
from notewell.config import Config
from notewell.index import store
from notewell.index.database import Index
from notewell.index.schema import SCHEMA_VERSION, BuildSettings
from notewell.ingest.chunking import ChunkSettings
from notewell.ingest.sync import Syncer, SyncReport
from notewell.model.custom import open_folder
from notewell.model.embedding import Embedder
from notewell.model.runtime import custom_embedder, default_embedder
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher, SearchResult
from notewell.sources import Source, open_source
from notewell.wire import paths

log = logging.getLogger(__name__)


class Engine:
    def __init__(self, config: Config, embedder: Embedder | None = None,
                 chunker: ChunkSettings | None = None, ranking: Ranking | None = None,
                 index_dir: str | None = None) -> None:
        self.config = config
        self.embedder = embedder or embedder_for(config)
        self.chunker = chunker or chunker_for(self.embedder)
        self.ranking = ranking
        self.index_dir = index_dir or paths.index_dir()
        self.settings = BuildSettings(self.embedder.fingerprint(), self.embedder.dim,
                                      self.chunker.fingerprint())
        self.index = store.open_current(self.settings, self.index_dir)
        self.searcher = Searcher(self.index, self.embedder, ranking)
        self.sources: list[Source] = [open_source(s) for s in config.sources]
        self._sync_lock = threading.Lock()

    def close(self) -> None:
        self.index.close()
        for src in self.sources:
            close = getattr(src, "close", None)  # Bear's long-lived read-only connection
            if close is not None:
                close()

    # -- reads ------------------------------------------------------------------------------

    def search(self, query: str, limit: int = 20, mode: str = "hybrid") -> SearchResult:
        return self.searcher.search(query, limit=limit, mode=mode)

    def similar(self, note_id: str, limit: int = 20):
        return self.searcher.similar(note_id, limit)

    def status(self) -> dict:
        counts = self.index.counts()
        rows = {r["name"]: r for r in self.index.source_rows()}
        sources = []
        for src in self.sources:
            row = rows.get(src.name, {})
            sources.append({
                "name": src.name, "type": src.kind, "path": src.config.path,
                "notes": row.get("notes", 0), "chunks": row.get("chunks", 0),
                "last_sync": row.get("last_sync"), "last_error": row.get("last_error"),
                "pending": row.get("pending", 0),
                "behind_since": row.get("behind_since"),
            })
        syncs = [s["last_sync"] for s in sources if s["last_sync"]]
        return {
            "version": __version__,
            "notes": counts["notes"],
            "chunks": counts["chunks"],
            "embeddings": counts["embeddings"],
            "model": self.embedder.fingerprint(),
            "chunker": self.chunker.fingerprint(),
            "index_version": SCHEMA_VERSION,
            "index_path": self.index.path,
            "index_bytes": _size(self.index.path),
            "sources": sources,
            "last_sync": max(syncs) if syncs else None,
            "in_memory": self.index.copies.nbytes(),
        }

    # -- writes -----------------------------------------------------------------------------

    def sync(self, progress: bool = False, should_stop: Callable[[], bool] = lambda: False,
             only: str | Collection[str] | None = None) -> list[SyncReport]:
        """Bring the index up to date with every source (or those named in ``only``)."""
        if isinstance(only, str):
            only = {only}
        with self._sync_lock:
            syncer = Syncer(self.index, self.embedder, self.chunker, should_stop)
            reports = []
            for src in self.sources:
                if only is not None and src.name not in only:
                    continue
                reports.append(syncer.sync(src, progress=progress))
            self._drop_unconfigured()
            return reports

    def _drop_unconfigured(self) -> None:
        configured = {s.name for s in self.sources}
        for name in self.index.reads.sources():
            if name not in configured:
                log.info("source %s is no longer configured; dropping its notes", name)
                self.index.drop_source(name)

    def rebuild(self, progress: bool = False) -> list[SyncReport]:
        """Rebuild beside the live index and swap it in; see ``rebuild``."""
        final, reports = rebuild(self.sources, self.embedder, self.chunker, self.index_dir,
                                 progress=progress)
        self.reopen(final)
        return reports

    def reopen(self, path: str | None = None, close_old: bool = True) -> None:
        """Switch to another index file. ``close_old=False`` leaves the old one open (and
        on disk) for queries still running on it; the caller closes it later (the daemon
        does: closing a connection another thread is using raises)."""
        old = self.index
        self.index = Index(path or store.current_path(self.index_dir), self.settings)
        self.searcher = Searcher(self.index, self.embedder, self.ranking)
        if close_old:
            old.close()
            store.remove_old(self.index_dir, keep=self.index.path)

    def newer_generation(self) -> str | None:
        current = store.current_path(self.index_dir)
        return current if current != self.index.path else None


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


def rebuild(sources: list[Source], embedder: Embedder, chunker: ChunkSettings,
            index_dir: str, progress: bool = False) -> tuple[str, list[SyncReport]]:
    """Build a fresh index beside the live one, then publish it atomically, so searches
    keep answering from the old one meanwhile. Works when the live index is unusable
    (other model, corrupt); vectors it holds from the same embedder are reused. After a
    switch of model the old model's vectors are kept (``store.keep_vectors``) and a
    model switched back to takes its kept vectors in: neither re-embeds what it had."""
    paths.ensure_private_dir(index_dir)
    settings = BuildSettings(embedder.fingerprint(), embedder.dim, chunker.fingerprint())
    building = store.building_path(index_dir)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(building + suffix):
            os.remove(building + suffix)
    current = store.current_path(index_dir)
    store.keep_vectors(current, index_dir, settings.embedder)
    fresh = Index(building, settings)
    fresh.import_vectors(current)
    kept = store.kept_vectors_path(index_dir, settings.embedder)
    fresh.import_vectors(kept)
    syncer = Syncer(fresh, embedder, chunker)
    reports = [syncer.sync(src, progress=progress) for src in sources]
    fresh.checkpoint()
    fresh.close()
    final = store.publish(building)
    store.forget_vectors(index_dir, settings.embedder)  # in the live index now
    return final, reports


def _size(path: str) -> int:
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):
            total += os.path.getsize(path + suffix)
    return total

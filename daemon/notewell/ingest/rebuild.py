"""A fresh index built beside the live one from every source and published atomically
(``notewell index --rebuild``, a model switch, a re-chunk after an upgrade), so searches
keep answering from the old one meanwhile. May import ``index``, ``ingest.sync``,
``model``, ``sources`` and ``wire.paths``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from notewell.index import store
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.ingest.chunking import ChunkSettings
from notewell.ingest.sync import ProgressBars, Syncer, SyncReport
from notewell.model.embedding import Embedder
from notewell.sources import Source
from notewell.wire import paths

log = logging.getLogger(__name__)


def rebuild(sources: list[Source], embedder: Embedder, chunker: ChunkSettings,
            index_dir: str, progress: bool | ProgressBars = False,
            should_stop: Callable[[], bool] = lambda: False,
            keep_if_failed: Collection[str] = (),
            before_publish: Callable[[], None] | None = None
            ) -> tuple[str | None, list[SyncReport]]:
    """Build a fresh index beside the live one, then publish it atomically, so searches
    keep answering from the old one meanwhile. Works when the live index is unusable
    (other model, corrupt); vectors it holds from the same embedder are reused. After a
    switch of model the old model's vectors are kept (``store.keep_vectors``) and a
    model switched back to takes its kept vectors in: neither re-embeds what it had.
    Notes a scan keeps but cannot read (offloaded to iCloud, under a folder it cannot
    list) keep their rows from the live index (``Index.carry_notes``), cut as they were.
    Stopped by ``should_stop``, or when a source named in ``keep_if_failed`` could not be
    read (its root, or rows that could not be carried over: another model's index), the
    build is not published (path None), and the next one takes its vectors in.
    ``before_publish`` runs just before the build becomes current (``notewell model use``
    writes ``[model]`` there); if it raises, nothing is published.
    The caller holds ``index.writer``'s lock: two builds would share the build path."""
    paths.ensure_private_dir(index_dir)
    settings = BuildSettings(embedder.fingerprint(), embedder.dim, chunker.fingerprint())
    build = store.begin_build(index_dir)
    current = store.current_path(index_dir)
    fresh: Index | None = None
    try:
        store.keep_vectors(current, index_dir, settings.embedder)
        fresh = Index(build.path, settings)
        fresh.import_vectors(current)
        fresh.import_vectors(store.kept_vectors_path(index_dir, settings.embedder))
        fresh.import_vectors(build.earlier)
        store.drop_earlier(build)
        # Notes a scan keeps but cannot read (offloaded, under an unreadable folder) take
        # their rows from the live index: the build then lacks nothing and is published.
        syncer = Syncer(fresh, embedder, chunker, should_stop, carry_from=current)
        reports = [syncer.sync(src, progress=progress) for src in sources]
        fresh.checkpoint()
    except Exception:
        # A failed build (a full disk, say) gives back what it took at once: no open
        # deleted WAL keeps the space, no building file stays.
        if fresh is not None:
            fresh.close()
        store.discard(build)
        raise
    except BaseException:  # Ctrl-C: kept, closed, for the next try to take its vectors in
        if fresh is not None:
            fresh.close()
        raise
    fresh.close()
    failed = [r.source for r in reports
              if r.error and not r.carried_all and r.source in keep_if_failed]
    if should_stop() or failed:
        log.warning("index not rebuilt (%s); the live index answers until the next try",
                    f"could not read {', '.join(failed)}" if failed else "stopped")
        return None, reports
    if before_publish is not None:
        before_publish()
    final = store.publish(build.path)
    store.forget_vectors(index_dir, settings.embedder)  # in the live index now
    return final, reports

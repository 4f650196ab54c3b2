"""The lifecycle of a resident process's in-memory copies of the index.

Three copies follow the file: the vectors (``vector_cache``), the keyword index
(``keywords``) and the vocabulary (``terms.Vocabulary``: the keyword copy's own when it is
current, else FTS5's). Each is tied to the file by stamps every write moves (the vectors
by ``vectors_epoch`` and the highest vector id, the others by ``chunks_epoch``), loaded on
the query's thread when that is cheap (a small index, a few new vectors, ":memory:" whose
rows no other connection sees) and otherwise in a background thread of its own, one per
copy at a time, while SQLite answers. ``Copies`` decides only whether a copy is current
enough to use; ``reads.Reads`` asks it, and answers from SQLite when it says no.

Threads: query threads, the sync thread (``follow``) and the loader threads all read and
replace the copies. A copy is never changed once published, except the vector copy's
appends (``VectorCache`` has its own lock); the references to them, and the loaders
running, are replaced under ``Copies._lock``, and read once into a local by each use.

May import ``index.sql`` (the rows a copy is read from), ``index.keywords``,
``index.terms``, ``index.vector_cache`` and ``memory``; never ``index.database`` (the
``Index`` hands in its connections).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import apsw
import numpy as np

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.index import keywords, sql
from notewell.index.keywords import COLUMN_WEIGHTS, KeywordIndex
from notewell.index.schema import connect
from notewell.index.terms import Tokens, Vocabulary, read_vocabulary
from notewell.index.vector_cache import VectorCache
from notewell.memory import release_memory
from notewell.priority import lower_this_thread


@dataclass
class CopySettings:
    """How an index uses its in-memory copies. Set by whoever opens the index, before its
    first query (a one-shot CLI engine turns the copies off); tests and benchmarks also
    switch a copy off on an open index, from their one thread, to compare with SQLite."""

    # Whether k-NN and vectors by id come from the vector copy (else sqlite-vec), and BM25,
    # ids and coverage from the keyword copy (else FTS5 and SQL). One-shot commands turn
    # both off: building them would cost more than their one query.
    vectors: bool = True
    keywords: bool = True
    # Up to this many vectors the copy is read on the query's own thread (a few
    # milliseconds, once); beyond, in the background while sqlite-vec's exact scan answers
    # (8 ms at 5,000 vectors, 75 at 100,000; the copy answers in 0.3-2 ms).
    vector_load_inline: int = 2_000
    # New vectors fetched on the query's own thread (an edit adds a few); more load behind.
    vector_pull_inline: int = 256
    # Up to this many vectors the copy holds float32 and is exact (``VectorCache``).
    exact_limit: int = 5_000
    # From this many vectors, k-NN re-scores its best ``exact_head`` with their float
    # vectors from SQLite (point lookups, ~40 us each in chunks of 64): on the synthetic
    # 1M corpus (100 noisy copies of each passage) int8 scores alone give recall@10 0.973;
    # at 100k 0.993 without.
    exact_head_from: int = 250_000
    exact_head: int = 20
    # A filtered k-NN over more allowed chunks than this is scored from the copies (each
    # allowed chunk's vector, a block at a time; when quantized, the best re-scored from
    # SQLite's float vectors); fewer stay with sqlite-vec's exact scan, which reads one
    # vector per allowed chunk (0.5 s at 10,000, 3-4 s at 100,000 under load).
    within_from: int = 2_000
    within_margin: int = 40  # candidates re-scored beyond k when the copy is quantized
    # Up to this many chunks the vocabulary is re-read on the query's thread after a
    # change (about 3 ms per 1,000 chunks); beyond, in the background.
    vocab_load_inline: int = 5_000
    # Seconds the chunks must stay unchanged before the keyword copy is rebuilt.
    keywords_quiet: float = 2.0


class Copies:
    """The in-memory copies of one index file. ``db`` gives this thread's connection to
    it; background loads open connections of their own."""

    def __init__(self, path: str, dim: int, db: Callable[[], apsw.Connection],
                 settings: CopySettings | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.path = path
        self.dim = dim
        self.settings = settings or CopySettings()
        self._clock = clock  # how long the chunks have stayed unchanged (keywords_quiet)
        self._db = db
        self._vectors: VectorCache | None = None
        self._keywords: KeywordIndex | None = None
        self._vocab: Vocabulary | None = None
        # Guards the three references above, _loading and _epoch_seen (see the module).
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Thread] = {}  # background loads by name
        self._epoch_seen: tuple[str, float] = ("", 0.0)
        self._closed = threading.Event()  # one way: once closed, never open again

    def close(self) -> None:
        """Stop using the copies; a background load stops at its next batch."""
        self._closed.set()

    def _publish(self, name: str, copy: object, replacing: object = None,
                 only_if: bool = False) -> None:
        """Make ``copy`` the one held as ``name`` (``_vectors``, ``_keywords``, ``_vocab``);
        with ``only_if``, only if ``replacing`` is still the one held (another thread may
        have published a newer one meanwhile). Nothing is published once closed."""
        with self._lock:
            if self._closed.is_set() or (only_if and getattr(self, name) is not replacing):
                return
            setattr(self, name, copy)

    @property
    def vector_copy(self) -> VectorCache | None:
        """The vector copy held now, current or not (None before the first load)."""
        return self._vectors

    def nbytes(self) -> dict[str, int | None]:
        """Bytes held by the copies (vectors, keywords); None where not loaded."""
        vectors, words = self._vectors, self._keywords
        return {"vectors": vectors.nbytes() if vectors is not None else None,
                "keywords": words.nbytes() if words is not None else None}

    # -- vectors ------------------------------------------------------------------------------

    def vectors(self) -> VectorCache | None:
        """The vector copy to answer from, or ``None`` for SQLite.

        Up to date after a few new vectors (an edit: fetched here, ~20 us each). After
        many (a bulk sync) it answers without the newest while they load in the
        background; after a deletion (a new epoch) it is not used until reloaded. A small
        index (or ":memory:") is read here and now."""
        if self._closed.is_set() or not self.settings.vectors:
            return None
        db = self._db()
        epoch, max_id = sql.vector_state(db)
        cache = self._vectors
        if cache is not None and cache.epoch == epoch:
            if cache.max_id == max_id:
                return cache
            if (max_id - cache.max_id <= self.settings.vector_pull_inline
                    and self._pull(cache, db)):
                return cache
        if self.path == ":memory:" or max_id <= self.settings.vector_load_inline:
            with self._lock:
                self._vectors = cache = self._read_vectors(db)
            return cache
        self.warm_vectors()
        return cache if cache is not None and cache.epoch == epoch else None

    def warm_vectors(self, wait: bool = False) -> None:
        """Load (or bring up to date) the vector copy in a background thread; a daemon
        calls this at start so the first query does not pay for it."""
        if self.path == ":memory:" or self._closed.is_set() or not self.settings.vectors:
            return
        self._in_background("vectors", self._load_vectors, wait)

    def _load_vectors(self, conn: apsw.Connection) -> None:
        cache = self._vectors
        epoch, _ = sql.vector_state(conn)
        if cache is None or cache.epoch != epoch or not self._pull(cache, conn):
            fresh = self._read_vectors(conn, self._closed.is_set)
            if fresh is not None:
                self._publish("_vectors", fresh)

    def _pull(self, cache: VectorCache, db: apsw.Connection) -> bool:
        """Append vectors newer than the cache's; ``False`` if the epoch moved meanwhile."""
        with self._lock:
            if cache.max_id >= sql.vector_state(db)[1]:
                return True
            with db:  # one read transaction: the state and the rows agree
                epoch, max_id = sql.vector_state(db)
                if epoch != cache.epoch:
                    return False
                rows = sql.vectors_between(db, cache.max_id, max_id)
            _append_rows(cache, rows, max_id)
            return True

    def _read_vectors(self, conn: apsw.Connection,
                      cancelled: Callable[[], bool] = lambda: False) -> VectorCache | None:
        """A new copy of every stored vector, read in one transaction (None if cancelled)."""
        cache = VectorCache(self.dim, exact_limit=self.settings.exact_limit)
        with conn:
            cache.epoch, max_id = sql.vector_state(conn)
            batch: list[tuple[int, bytes]] = []
            for row in sql.all_vectors(conn):
                batch.append(row)
                if len(batch) >= 8192:
                    _append_rows(cache, batch)
                    batch = []
                    if cancelled():
                        return None
            _append_rows(cache, batch, max_id)
        return cache

    # -- keywords -----------------------------------------------------------------------------

    def keywords(self) -> KeywordIndex | None:
        """The keyword copy if it matches the index now; else None (FTS5 answers) while a
        new one is built behind."""
        if self._closed.is_set() or not self.settings.keywords:
            return None
        epoch, now = sql.chunks_epoch(self._db()), self._clock.monotonic()
        copy = self._keywords
        if copy is not None and copy.epoch == epoch:
            return copy
        # Rebuild once the chunks have been still for a moment: during a burst of edits
        # a rebuild would compete with the syncs (one edit in 10,000 notes became
        # searchable in 0.76 s instead of 0.3) and be stale before it finished.
        with self._lock:
            if self._epoch_seen[0] != epoch:
                self._epoch_seen = (epoch, now)
            seen = self._epoch_seen[1]
        if copy is None or now - seen >= self.settings.keywords_quiet:
            self.warm_keywords()
        return None

    def warm_keywords(self, wait: bool = False) -> None:
        """Build the keyword copy (in the background unless ``wait``)."""
        if self._closed.is_set() or not self.settings.keywords:
            return
        if self.path == ":memory:":  # no other connection sees its rows: build here
            self._publish("_keywords", _read_keywords(self._db()))
            return
        self._in_background("keywords", self._load_keywords, wait)

    def _load_keywords(self, conn: apsw.Connection) -> None:
        copy = _read_keywords(conn, self._closed.is_set)
        if copy is not None:
            self._publish("_keywords", copy)

    def follow(self, before: str, removed: Sequence[int], added: Sequence[keywords.Row],
               gone_notes: Sequence[int] = (), new_titles: Sequence[tuple[int, int]] = ()
               ) -> None:
        """After a committed write that took the chunks from epoch ``before`` to now: bring
        a keyword copy that was current along (``KeywordIndex.with_changes``: chunks, and
        title vectors of notes gone and new), so a sync of a few notes does not cost a
        rebuild; a stale copy waits for one."""
        copy = self._keywords
        if copy is None or copy.epoch != before or self.path == ":memory:":
            return
        db = self._db()
        moved = copy.with_changes(removed, added, Tokens(db), sql.chunks_epoch(db),
                                  gone_notes, new_titles)
        if moved is not None:  # else too much changed: stale, rebuilt once writes settle
            self._publish("_keywords", moved, replacing=copy, only_if=True)

    def vocabulary(self) -> Vocabulary:
        """The indexed terms with their document frequencies (``terms.Vocabulary``).

        The keyword copy's when it is current, else read from FTS5 here after a change on
        a small index. A large one answers with the last it has (the copy's, or FTS5's
        read in the background): document frequencies that lag an edit by a moment weigh
        words all the same."""
        db = self._db()
        stamp = sql.chunks_epoch(db)
        copy = self._keywords if self.settings.keywords else None
        inline = self.settings.vocab_load_inline
        if copy is not None and (copy.epoch == stamp or copy.chunks > inline):
            if self._vocab is not None:  # the copy's own serves: no second list of terms
                self._publish("_vocab", None)
            return copy.vocabulary()
        vocab = self._vocab
        if vocab is not None and vocab.stamp == stamp:
            return vocab
        if vocab is None or vocab.chunks <= inline or self.path == ":memory:":
            vocab = read_vocabulary(db, stamp)
            self._publish("_vocab", vocab)
            return vocab
        self._in_background("vocabulary", self._load_vocabulary)
        return vocab

    def _load_vocabulary(self, conn: apsw.Connection) -> None:
        self._publish("_vocab", read_vocabulary(conn, sql.chunks_epoch(conn)))

    # -- background loads ---------------------------------------------------------------------

    def _in_background(self, what: str, load: Callable[[apsw.Connection], None],
                       wait: bool = False) -> None:
        """Run ``load`` on a connection of its own in a background thread, one per
        ``what`` at a time."""
        with self._lock:
            thread = self._loading.get(what)
            if thread is None:
                thread = self._loading[what] = threading.Thread(
                    target=self._run_loader, args=(what, load), name=f"notewell-{what}",
                    daemon=True)
                thread.start()
        if wait:
            thread.join()

    def _run_loader(self, what: str, load: Callable[[apsw.Connection], None]) -> None:
        lower_this_thread()  # no query waits for it: SQLite answers meanwhile
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
            with self._lock:
                self._loading.pop(what, None)


def _read_keywords(conn: apsw.Connection, cancelled: Callable[[], bool] = lambda: False
                   ) -> KeywordIndex | None:
    """A keyword copy of every chunk, read in one transaction (None if cancelled)."""
    with conn:  # the epoch and the rows agree
        epoch = sql.chunks_epoch(conn)
        return keywords.build(sql.keyword_rows(conn), Tokens(conn), COLUMN_WEIGHTS, epoch,
                              cancelled, titles=sql.title_rows(conn))


def _append_rows(cache: VectorCache, rows: list[tuple[int, bytes]], max_id: int = 0) -> None:
    if rows:
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        cache.append(ids, vectors.reshape(len(rows), cache.dim), max_id)
    elif max_id:
        cache.max_id = max(cache.max_id, max_id)

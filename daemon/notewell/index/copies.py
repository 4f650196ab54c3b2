"""The lifecycle of a resident process's in-memory copies of the index.

Three copies follow the file: the vectors (``vector_cache``), the keyword index
(``keywords``) and the vocabulary (``terms.Vocabulary``: the keyword copy's own when it is
current, else FTS5's). Each is tied to the file by stamps every write moves (the vectors
by ``vectors_epoch`` and the highest vector id, the others by ``chunks_epoch``), loaded on
the query's thread when that is cheap (a small index, a few new vectors, ":memory:" whose
rows no other connection sees) and otherwise in a background thread of its own, one per
copy at a time, while SQLite answers. A read view (``copy_reads.open_view``) reads the
stamps once (``sql.freshness``), asks ``ensure_loading`` to bring along what is cheap and
start what is not, then takes what is ``current`` as of those stamps, for its whole
request; nothing else starts a load but the explicit ``warm_*`` calls and the daemon's
sync thread (``ensure_loading`` again, at each wake).

A loader that fails is logged with its error, shown by ``state`` (``notewell status``,
``doctor``) and retried with a backoff the injected ``clock`` decides (``RETRY_FIRST``
doubling up to ``RETRY_MAX``): a daemon whose copies never load answers every keystroke
from SQLite, tens of times slower, and must say so.

Threads: query threads, the sync thread (``follow``) and the loader threads all read and
replace the copies. A copy is never changed once published, except the vector copy's
appends (``VectorCache`` has its own lock); the references to them, the loaders running
and their failures are replaced under ``Copies._lock``, and read once into a local by
each use.

May import ``index.sql`` (the rows a copy is read from), ``index.keywords``,
``index.terms``, ``index.vector_cache`` and ``memory``; never ``index.database`` (the
``Index`` hands in its connections).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import apsw
import numpy as np

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.index import keywords, sql
from notewell.index.keywords import COLUMN_WEIGHTS, KeywordIndex
from notewell.index.schema import connect
from notewell.index.sql import Freshness
from notewell.index.terms import Tokens, Vocabulary, read_vocabulary
from notewell.index.vector_cache import VectorCache
from notewell.memory import release_memory
from notewell.priority import lower_this_thread

log = logging.getLogger(__name__)

_LOADS = {"_vectors": "vectors", "_keywords": "keywords", "_vocab": "vocabulary"}

# Seconds before a failed load is tried again, doubling with each failure in a row.
RETRY_FIRST = 30.0
RETRY_MAX = 600.0


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


@dataclass(frozen=True)
class Held:
    """The copies one read view answers from, fixed at its start: None where SQLite
    answers (``vocabulary`` None: FTS5's, read when first asked)."""

    vectors: VectorCache | None
    keywords: KeywordIndex | None
    vocabulary: Vocabulary | None


@dataclass(frozen=True)
class LoadFailure:
    """The last failed load of a copy: its error, how many failed in a row, and when
    (``Clock.monotonic``) the next may start."""

    error: str
    failures: int
    retry_at: float


class Copies:
    """The in-memory copies of one index file. ``db`` gives this thread's connection to
    it; background loads open connections of their own, with ``connect`` (tests inject
    one that fails). ``clock`` decides the keyword copy's quiet time and the retries."""

    def __init__(self, path: str, dim: int, db: Callable[[], apsw.Connection],
                 settings: CopySettings | None = None, clock: Clock = SYSTEM_CLOCK,
                 connect: Callable[[str], apsw.Connection] = connect) -> None:
        self.path = path
        self.dim = dim
        self.settings = settings or CopySettings()
        self.clock = clock
        self.connect = connect
        self._db = db
        self._vectors: VectorCache | None = None
        self._keywords: KeywordIndex | None = None
        self._vocab: Vocabulary | None = None
        # Guards the three references above, _loading, _failed and _epoch_seen.
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Thread] = {}  # background loads by name
        self._failed: dict[str, LoadFailure] = {}  # by name, until a load succeeds
        self._epoch_seen: tuple[str, float] = ("", 0.0)
        self._closed = threading.Event()  # one way: once closed, never open again

    def close(self) -> None:
        """Stop using the copies; a background load stops at its next batch."""
        self._closed.set()

    def _publish(self, name: str, copy: object, replacing: object = None,
                 only_if: bool = False) -> None:
        """Make ``copy`` the one held as ``name`` (``_vectors``, ``_keywords``, ``_vocab``);
        with ``only_if``, only if ``replacing`` is still the one held (another thread may
        have published a newer one meanwhile). Nothing is published once closed. A copy
        published ends the record of its failed loads (it may come from this thread)."""
        with self._lock:
            if self._closed.is_set() or (only_if and getattr(self, name) is not replacing):
                return
            setattr(self, name, copy)
            if copy is not None:
                self._failed.pop(_LOADS[name], None)

    @property
    def vector_copy(self) -> VectorCache | None:
        """The vector copy held now, current or not (None before the first load)."""
        return self._vectors

    def nbytes(self) -> dict[str, int | None]:
        """Bytes held by the copies (vectors, keywords); None where not loaded."""
        vectors, words = self._vectors, self._keywords
        return {"vectors": vectors.nbytes() if vectors is not None else None,
                "keywords": words.nbytes() if words is not None else None}

    def state(self) -> dict[str, str]:
        """What each copy is doing, for ``status`` and ``doctor``: ``off`` (a one-shot
        command), ``loaded``, ``loading``, ``not loaded`` or ``failed: <error>, retrying in
        N s`` (the vocabulary only when its load failed)."""
        now = self.clock.monotonic()
        with self._lock:
            loading, failed = set(self._loading), dict(self._failed)
            held = {"vectors": self._vectors, "keywords": self._keywords}
        on = {"vectors": self.settings.vectors, "keywords": self.settings.keywords}
        out = {}
        for name in ("vectors", "keywords", "vocabulary"):
            failure = failed.get(name)
            if failure is not None:
                out[name] = f"failed: {failure.error}, " + (
                    "retrying now" if name in loading
                    else f"retrying in {max(0.0, failure.retry_at - now):.0f} s")
            elif name == "vocabulary":
                continue
            elif not on[name]:
                out[name] = "off"
            else:
                out[name] = ("loading" if name in loading
                             else "loaded" if held[name] is not None else "not loaded")
        return out

    # -- what a read view takes -----------------------------------------------------------

    def ensure_loading(self, fresh: Freshness, db: apsw.Connection) -> None:
        """Bring the copies along to ``fresh`` where that is cheap, here and now (a few new
        vectors, a small index, ":memory:"), and start a background load of each copy that
        is behind otherwise (the keyword copy once the chunks have been still for
        ``keywords_quiet``; a failed load once its retry is due)."""
        if self._closed.is_set():
            return
        if self.settings.vectors:
            self._ensure_vectors(fresh, db)
        if self.settings.keywords:
            self._ensure_keywords(fresh, db)
        self._ensure_vocabulary(fresh, db)

    def current(self, fresh: Freshness) -> Held:
        """The copies that answer as of ``fresh``, read once, no side effect: the vector
        copy of the same epoch (without the newest vectors while they load), the keyword
        copy of the same chunks, and the vocabulary (the keyword copy's when current, or
        on a large index the last one read while a newer one loads)."""
        if self._closed.is_set():
            return Held(None, None, None)
        s = self.settings
        cache = self._vectors if s.vectors else None
        if cache is not None and cache.epoch != fresh.vectors_epoch:
            cache = None
        copy = self._keywords if s.keywords else None
        inline = s.vocab_load_inline
        vocab: Vocabulary | None = None
        if copy is not None and (copy.epoch == fresh.chunks_epoch or copy.chunks > inline):
            vocab = copy.vocabulary()
        elif (found := self._vocab) is not None and (
                found.stamp == fresh.chunks_epoch
                or (found.chunks > inline and self.path != ":memory:")):
            vocab = found
        if copy is not None and copy.epoch != fresh.chunks_epoch:
            copy = None
        return Held(cache, copy, vocab)

    # -- vectors ------------------------------------------------------------------------------

    def _ensure_vectors(self, fresh: Freshness, db: apsw.Connection) -> None:
        """After a few new vectors (an edit) they are fetched here (~20 us each); after
        many (a bulk sync) or a deletion (a new epoch) the copy loads in the background,
        answering without the newest meanwhile (or not at all: a new epoch). A small index
        (or ":memory:") is read here."""
        s, cache = self.settings, self._vectors
        if cache is not None and cache.epoch == fresh.vectors_epoch:
            if cache.max_id >= fresh.max_vector:
                return
            if fresh.max_vector - cache.max_id <= s.vector_pull_inline and self._pull(cache, db):
                return
        if self.path == ":memory:" or fresh.max_vector <= s.vector_load_inline:
            self._publish("_vectors", self._read_vectors(db))  # a failed load's record: moot
            return
        self._in_background("vectors", self._load_vectors)

    def warm_vectors(self, wait: bool = False) -> None:
        """Load (or bring up to date) the vector copy in a background thread now, a failed
        load's backoff notwithstanding; a daemon calls this at start so the first query
        does not pay for it."""
        if self.path == ":memory:" or self._closed.is_set() or not self.settings.vectors:
            return
        self._in_background("vectors", self._load_vectors, wait, retry_now=True)

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
            with db:  # one read transaction: the state and the rows agree
                epoch, max_id = sql.vector_state(db)
                if epoch != cache.epoch:
                    return False
                if cache.max_id >= max_id:
                    return True
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

    def _ensure_keywords(self, fresh: Freshness, db: apsw.Connection) -> None:
        copy, epoch, now = self._keywords, fresh.chunks_epoch, self.clock.monotonic()
        if copy is not None and copy.epoch == epoch:
            return
        # Rebuild once the chunks have been still for a moment: during a burst of edits
        # a rebuild would compete with the syncs (one edit in 10,000 notes became
        # searchable in 0.76 s instead of 0.3) and be stale before it finished.
        with self._lock:
            if self._epoch_seen[0] != epoch:
                self._epoch_seen = (epoch, now)
            seen = self._epoch_seen[1]
        if copy is not None and now - seen < self.settings.keywords_quiet:
            return
        self._in_background("keywords", self._load_keywords)

    def warm_keywords(self, wait: bool = False) -> None:
        """Build the keyword copy (in the background unless ``wait``) now, a failed
        load's backoff notwithstanding."""
        if self._closed.is_set() or not self.settings.keywords:
            return
        self._in_background("keywords", self._load_keywords, wait, retry_now=True)

    def _load_keywords(self, conn: apsw.Connection) -> None:
        """A keyword copy of every chunk, read in one transaction, published unless the
        copies closed meanwhile."""
        with conn:  # the epoch and the rows agree
            copy = keywords.build(sql.keyword_rows(conn), Tokens(conn), COLUMN_WEIGHTS,
                                  sql.chunks_epoch(conn), self._closed.is_set,
                                  titles=sql.title_rows(conn))
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

    def _ensure_vocabulary(self, fresh: Freshness, db: apsw.Connection) -> None:
        """The indexed terms with their document frequencies (``terms.Vocabulary``): the
        keyword copy's when it is current, else read from FTS5 here after a change on a
        small index. A large one answers with the last it has (the copy's, or FTS5's read
        in the background): document frequencies that lag an edit by a moment weigh words
        all the same."""
        stamp = fresh.chunks_epoch
        copy = self._keywords if self.settings.keywords else None
        inline = self.settings.vocab_load_inline
        if copy is not None and (copy.epoch == stamp or copy.chunks > inline):
            if self._vocab is not None:  # the copy's own serves: no second list of terms
                self._publish("_vocab", None)
            return
        vocab = self._vocab
        if vocab is not None and vocab.stamp == stamp:
            return
        if vocab is None or vocab.chunks <= inline or self.path == ":memory:":
            self._publish("_vocab", read_vocabulary(db, stamp))
            return
        self._in_background("vocabulary", self._load_vocabulary)

    def _load_vocabulary(self, conn: apsw.Connection) -> None:
        self._publish("_vocab", read_vocabulary(conn, sql.chunks_epoch(conn)))

    # -- background loads ---------------------------------------------------------------------

    def _in_background(self, what: str, load: Callable[[apsw.Connection], None],
                       wait: bool = False, retry_now: bool = False) -> None:
        """Run ``load`` on a connection of its own in a background thread, one per
        ``what`` at a time; after a failure, not before its retry is due (unless
        ``retry_now``). ":memory:": here, on this thread's connection (no other one sees
        its rows)."""
        if self.path == ":memory:":
            load(self._db())
            return
        with self._lock:
            thread = self._loading.get(what)
            failure = self._failed.get(what)
            if (thread is None and failure is not None and not retry_now
                    and self.clock.monotonic() < failure.retry_at):
                return
            if thread is None:
                thread = self._loading[what] = threading.Thread(
                    target=self._run_loader, args=(what, load), name=f"notewell-{what}",
                    daemon=True)
                thread.start()
        if wait:
            thread.join()

    def _run_loader(self, what: str, load: Callable[[apsw.Connection], None]) -> None:
        lower_this_thread()  # no query waits for it: SQLite answers meanwhile
        with self._lock:
            before = self._failed.get(what)
        conn = None
        failed: Exception | None = None
        try:
            conn = self.connect(self.path)
            load(conn)
        except Exception as e:  # not closed meanwhile (a replaced index): say so, retry
            failed = None if self._closed.is_set() else e
        finally:
            if conn is not None:
                conn.close()
            release_memory()  # loading goes through batches several times a copy's size
            with self._lock:
                self._loading.pop(what, None)
                self._failed.pop(what, None)
                if failed is not None:
                    n = (before.failures if before is not None else 0) + 1
                    delay = min(RETRY_MAX, RETRY_FIRST * 2 ** (n - 1))
                    self._failed[what] = LoadFailure(f"{type(failed).__name__}: {failed}", n,
                                                     self.clock.monotonic() + delay)
        if failed is not None:
            log.warning("the in-memory %s copy of %s failed to load (%s: %s); SQLite answers "
                        "meanwhile, slower; retrying in %.0f s", what, self.path,
                        type(failed).__name__, failed, delay)
        elif before is not None and not self._closed.is_set():
            log.info("the in-memory %s copy loaded after %d failed tries", what,
                     before.failures)


def _append_rows(cache: VectorCache, rows: list[tuple[int, bytes]], max_id: int = 0) -> None:
    if rows:
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        cache.append(ids, vectors.reshape(len(rows), cache.dim), max_id)
    elif max_id:
        cache.max_id = max(cache.max_id, max_id)

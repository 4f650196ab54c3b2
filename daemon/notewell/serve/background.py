"""The daemon's background thread: the engine's start, then keeping the index in sync.

Owns the engine's states (``starting``, ``warming``, ``ready``, ``rebuilding`` after a
damaged index was moved aside, at start or when a read or sync met the damage
(``report_damage``, ``recover_damage``), ``error``), a full disk said in words
(``disk_full``: shown at once, not after ``BEHIND_AFTER``), the ``ChangeWatcher`` and its
debounce, sync rounds (one writer: ``notewell sync --wait`` waits for a round rather than
syncing itself), the retry backoff of failing sources, the lag behind the sources
(``lag``, shown once it exceeds ``BEHIND_AFTER``), and switching to a newer index
generation (``Engine.reopen``: the replaced one closes when the last request holding it
lets go). Every time it reads comes from an injectable ``Clock``, so tests drive debounce,
backoff and lag with a fake one; the thread itself only runs ``step`` whenever the
watcher, a request or its timeout (``next_wait``) wakes it.

Threads: this one writes everything here; handler threads read ``state``, ``problem``,
``last_reports`` (each replaced whole, never changed in place) and ``lag()`` and
``errors`` (the per-source dicts, read and written under ``_lock``).

May import ``engine`` and what is below it (``index``, ``ingest``, ``memory``,
``search.lexicon``); nothing else of ``serve``.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.engine import Engine
from notewell.index import failures, store, writer
from notewell.index.schema import IndexMismatch, IndexProblem
from notewell.ingest.progress import Relay
from notewell.ingest.sync import SyncReport
from notewell.ingest.watch import ChangeWatcher
from notewell.memory import release_memory
from notewell.priority import lower_this_thread
from notewell.search import lexicon
from notewell.wire import paths

log = logging.getLogger(__name__)

BEHIND_AFTER = 60.0  # seconds of unapplied changes (or failing syncs) before results say so
MAX_RETRY_DELAY = 60.0  # the longest a failing source waits for its next try
WRITER = "the notewell daemon"  # what a command waiting for the index's writer lock is told
# Idle, the loop wakes every IDLE_POLLS polls (a minute by default) to look for an index
# rebuilt by another process; for SETTLE_POLLS polls after a sync, every poll (its
# after-work: the keyword copy, once the chunks are still). Changes wake it themselves.
IDLE_POLLS = 12
SETTLE_POLLS = 2


class SyncError(Exception):
    """A sync someone waited for did not happen; ``code`` is the error reply's code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Background:
    def __init__(self, make_engine: Callable[[], Engine], stop_event: threading.Event, *,
                 poll_seconds: float = 5.0, debounce: float = 1.0, use_events: bool = True,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.make_engine = make_engine
        self.stop_event = stop_event
        self.poll_seconds = poll_seconds
        self.debounce = debounce
        self.use_events = use_events
        self.clock = clock
        self.engine: Engine | None = None
        self.state = "starting"
        self.problem: str | None = None
        self._other_model: str | None = None  # a generation built with another model
        self.watcher: ChangeWatcher | None = None
        self.last_reports: list[dict] = []
        # Per source: since when (wall clock) the index has lagged it (changes taken for a
        # sync that has not succeeded yet, or failing syncs), and the last sync error.
        # Written by this thread, read by handler threads (``lag``): under ``_lock``.
        self._lock = threading.Lock()
        self.behind: dict[str, float] = {}
        self.errors: dict[str, str] = {}
        self._failures: dict[str, int] = {}  # this thread's only
        self.sync_now = threading.Event()
        self.thread: threading.Thread | None = None  # this one, once started
        # Rounds of sync: `sync --wait` waits for one that starts after it asked, so the
        # index has one writer and the request holds no worker meanwhile. Under the same
        # condition: whether the next round rebuilds, and who gets its progress events.
        self._rounds = threading.Condition()
        self._round_started = 0
        self._round_done = 0
        self._rebuild_asked = False
        self._listeners: list[Callable[[dict], None]] = []
        self._writer_wait: str | None = None  # who holds the writer lock we wait for
        self._settle = (0, 0.0)  # (rounds done, until when) for next_wait
        # The last sync failed for want of space: the words for it, shown at once (lag).
        # Written by this thread, replaced whole.
        self.disk_full: str | None = None
        # A request read damaged pages (``report_damage``): this thread checks the file.
        self._damage_seen = threading.Event()

    # -- the thread -----------------------------------------------------------------------

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="notewell-sync", daemon=True)
        self.thread.start()

    def run(self) -> None:
        if not self.start_engine():
            return
        assert self.engine is not None
        lower_this_thread()  # after the engine: its onnxruntime threads answer keystrokes too
        # The word lists typo correction asks (half a second): read now, not by a keystroke
        # (which reads them itself if this failed).
        try:
            lexicon.shared()
        except Exception:
            log.exception("the word lists for typo correction failed to load")
        # The in-memory vector copy loads in the background now, so the first keystroke
        # does not pay for it. A load that fails is logged, shown by status and doctor,
        # and retried (index.copies); only starting the thread could raise here.
        self._warm(keywords=False)
        # Baselines first, then one full sync: a change made during that sync is seen.
        self.start_watching()
        self._sync_once()
        # The keyword copy after that first sync, not before: built earlier it would hold
        # an index the sync is still changing (FTS5 answers meanwhile).
        self._warm(keywords=True)
        while not self.stop_event.is_set():
            self.sync_now.wait(self.next_wait())
            self.sync_now.clear()
            if self.stop_event.is_set():
                break
            self.step()
        if self.watcher is not None:
            self.watcher.stop()

    def _warm(self, keywords: bool) -> None:
        """Start loading the vector copy (and with ``keywords``, the keyword copy) in the
        background now. A load that fails is logged and retried (``index.copies``);
        ``status`` shows it."""
        assert self.engine is not None
        try:
            self.engine.index.warm_vectors()
            if keywords:
                self.engine.index.warm_keywords()
        except Exception:
            log.exception("the in-memory copies could not start loading; SQLite answers, "
                          "slower, and the next wake tries again")

    def start_engine(self) -> bool:
        """Load the engine; False (with ``state`` "error" and the ``problem``) if it fails."""
        try:
            self.state = "warming"
            # What a crashed build left (only while no other process writes): on a full
            # disk that may be the room the index needs to open.
            try:
                store.clean_leftovers(paths.index_dir())
            except OSError as e:
                log.warning("could not clean up the index folder: %s", e)
            self.engine = self.make_engine()
            # A damaged index was moved aside for an empty one: say so until it is full.
            self.state = "rebuilding" if self.engine.index.recovered_from else "ready"
            log.info("engine ready: %s", self.engine.embedder.fingerprint())
            return True
        except IndexProblem as e:
            self.state, self.problem = "error", str(e)
            log.error("%s", e)
        except Exception as e:  # keep answering, with the reason, rather than dying
            if failures.disk_full(e):
                self.state, self.problem = "error", failures.disk_full_message(
                    paths.index_dir(), then="then restart notewell (`notewell agent restart`)")
                log.error("notewell could not open its index: %s", self.problem)
            else:
                self.state, self.problem = "error", f"{type(e).__name__}: {e}"
                log.exception("engine failed to start")
        return False

    def start_watching(self) -> None:
        assert self.engine is not None
        self.watcher = ChangeWatcher(self.engine.sources, debounce=self.debounce,
                                     poll_seconds=self.poll_seconds, use_events=self.use_events,
                                     on_change=self.sync_now.set, clock=self.clock)
        try:
            self.watcher.start()
            log.info("watching sources: %s", ", ".join(
                f"{n} ({m})" for n, m in self.watcher.mode.items()) or "none")
        except Exception:
            log.exception("change detection failed to start; syncing every %.0f s",
                          self.poll_seconds)
            self.watcher = None

    def next_wait(self) -> float:
        """How long to sleep: until a debounced change is due or, at the latest,
        ``poll_seconds`` soon after a sync (and always without a watcher), else
        ``IDLE_POLLS`` polls: an idle daemon must not wake the CPU every few seconds."""
        if self.watcher is None:
            return self.poll_seconds
        now = self.clock.monotonic()
        if self._settle[0] != self._round_done:  # a sync ran since: settle at poll pace
            self._settle = (self._round_done, now + SETTLE_POLLS * self.poll_seconds)
        limit = self.poll_seconds * (1 if now < self._settle[1] else IDLE_POLLS)
        wait = self.watcher.next_due_in()
        return limit if wait is None else min(wait, limit)

    def step(self) -> None:
        """One wake-up's work: sync what is due, or else look for a newer index."""
        assert self.engine is not None
        # Hand back what queries freed: glibc keeps it per thread (bench/memory.py:
        # 125 MB of 570 at 100k chunks under load); about 4 ms, at most every poll.
        release_memory()
        # Notes a change of the chunks, and rebuilds the keyword copy once they have
        # been still for a while, even when nobody is searching; a failed load is
        # retried once its backoff is over.
        try:
            self.engine.index.ensure_copies()
        except Exception:
            log.exception("checking the in-memory copies failed")
        if self._damage_seen.is_set() and self.recover_damage() and self.watcher is not None:
            self.watcher.take_due()  # every source syncs now, into the fresh index
            self._sync_once()
            return
        if self.watcher is None:
            self._sync_once()
            return
        due = self.watcher.take_due()
        if due:
            self._sync_once(due)
        else:
            self._switch_generation()

    def wake(self) -> None:
        self.sync_now.set()

    # -- syncs ----------------------------------------------------------------------------

    def request_sync(self) -> None:
        """Sync every source now, changed or not (``notewell sync``, SIGHUP)."""
        if self.watcher is not None:
            self.watcher.force()
        self.sync_now.set()

    def wait_for_sync(self, rebuild: bool = False,
                      on_progress: Callable[[dict], None] | None = None) -> list[dict]:
        """Ask for a sync of every source (with ``rebuild``, a fresh index built beside the
        live one) and wait until one that started after this call has finished; returns
        its reports. Asked while the engine loads, it is the first round. ``on_progress``
        gets, on this thread, the progress events of the rounds run meanwhile
        (``{"label", "done", "total"}``, or ``{"waiting": who}`` while another process
        holds the index's writer lock). Raises ``SyncError`` if it failed."""
        events: list[dict] = []
        listen = events.append
        with self._rounds:
            target = self._round_started + 1
            self._rebuild_asked = self._rebuild_asked or rebuild
            if on_progress is not None:
                self._listeners.append(listen)
                if self._writer_wait is not None:  # a round already waiting: say so
                    events.append({"waiting": self._writer_wait})
        before = self.last_reports
        self.request_sync()
        try:
            done = False
            while not done:
                with self._rounds:
                    while self._round_done < target and not events:
                        if self.stop_event.is_set():
                            raise SyncError("stopping", "notewell is stopping; the sync "
                                            "will resume when it starts again")
                        if self.thread is None or not self.thread.is_alive():
                            raise SyncError("unavailable", "the sync thread has stopped; "
                                            "see the log, then restart the daemon")
                        self._rounds.wait(0.25)
                    batch, events[:] = events[:], []
                    done = self._round_done >= target
                for event in batch:  # not under the condition: the sync thread never waits
                    on_progress(event)  # type: ignore[misc]  # events come only with it
        finally:
            with self._rounds:
                if on_progress is not None:
                    self._listeners.remove(listen)
        if self.last_reports is before:
            with self._lock:
                errors = "; ".join(f"{k}: {v}" for k, v in self.errors.items())
            raise SyncError("sync_failed", errors or "the sync failed; see the log")
        return self.last_reports

    def _sync_once(self, due: dict[str, float] | None = None) -> None:
        """Sync the sources ``due`` (name -> when its change was first seen), or all of
        them (as of now)."""
        engine = self.engine
        assert engine is not None
        reports_before, rebuild = self._begin_round()
        only = set(due) if due is not None and not rebuild else None
        names = only if only is not None else {s.name for s in engine.sources}
        now = self.clock.time()
        with self._lock:
            for name in names:
                first = (due or {}).get(name, now)
                self.behind[name] = min(self.behind.get(name, first), first)
        try:
            # The index's one writer: a command writing without the daemon (it started
            # meanwhile) finishes first, and its rebuild is switched to before writing.
            with writer.hold(engine.index_dir, WRITER, on_wait=self._waiting,
                             should_stop=self.stop_event.is_set):
                self._waiting(None)
                self._switch_generation()
                # Rebuilt or re-chunked, the index is a new generation (Engine.reopen).
                reports = engine.sync(progress=functools.partial(Relay, emit=self._emit),
                                      should_stop=self.stop_event.is_set, only=only,
                                      rebuild_all=rebuild)
            self.last_reports = [r.to_dict() for r in reports]
            self.note_reports(reports)
            for r in reports:
                if r.changed or r.error:
                    log.info("sync %s: +%d ~%d -%d, %d chunks embedded%s", r.source, r.added,
                             r.updated, r.deleted, r.embedded,
                             f", error: {r.error}" if r.error else "")
        except writer.Stopped:
            pass  # stopping while another process wrote: nothing done, nothing lost
        except Exception as e:
            self._sync_failed(e, names)
        else:
            self.disk_full = None
        self._end_round(reports_before, complete=names >= {s.name for s in engine.sources})

    def _sync_failed(self, e: Exception, names: set[str]) -> None:
        """A sync round raised: say why, in words for a full disk; a damaged index is
        moved aside and rebuilt (``recover_damage``); retried later either way."""
        engine = self.engine
        assert engine is not None
        if failures.disk_full(e):
            message = failures.disk_full_message(engine.index_dir)
            self.disk_full = message
            log.error("sync failed: %s", message)  # every retry: one line, no traceback
        else:
            message = f"{type(e).__name__}: {e}"
            log.exception("sync failed; will retry")
        with self._lock:
            for name in names:
                self.errors[name] = message
        if failures.damaged(e):
            self.recover_damage()
        self._retry_later(names)

    def report_damage(self) -> None:
        """A request read damaged pages of the live index (any thread): the sync thread
        checks the file and, if it is damaged, moves it aside and rebuilds."""
        self._damage_seen.set()
        self.sync_now.set()

    def recover_damage(self) -> bool:
        """This thread: check the live index; if damaged, move it aside for a fresh one
        (``Engine.replace_damaged``), say "rebuilding" and sync every source into it.
        True if it did."""
        engine = self.engine
        assert engine is not None
        self._damage_seen.clear()
        try:
            with writer.hold(engine.index_dir, WRITER, on_wait=self._waiting,
                             should_stop=self.stop_event.is_set):
                self._waiting(None)
                moved = engine.replace_damaged()
        except writer.Stopped:
            return False
        except Exception:
            log.exception("could not replace the damaged index; will retry")
            return False
        if moved is None:
            log.warning("a read reported damage, but the index passes SQLite's check")
            return False
        self.state = "rebuilding"
        with self._lock:
            self.errors.clear()
            self._failures.clear()
        self.request_sync()
        return True

    def note_reports(self, reports: Iterable[SyncReport]) -> None:
        """Record what a sync did: a failed source is retried later and lags from now on
        (if not already), a stopped one lags, a successful one no longer does."""
        failed = []
        with self._lock:
            for r in reports:
                if r.error:
                    self.errors[r.source] = r.error
                    self.behind.setdefault(r.source, self.clock.time())
                    failed.append(r.source)
                elif r.pending:
                    self.behind.setdefault(r.source, self.clock.time())
                else:
                    self.errors.pop(r.source, None)
                    self.behind.pop(r.source, None)
                    self._failures.pop(r.source, None)
        self._retry_later(failed)

    def _retry_later(self, names: Iterable[str]) -> None:
        # Backoff: poll_seconds after the first failure, doubling up to 16 times that, and
        # never more than MAX_RETRY_DELAY.
        if self.watcher is None:
            return
        for name in names:
            self._failures[name] = self._failures.get(name, 0) + 1
            delay = min(MAX_RETRY_DELAY,
                        self.poll_seconds * 2 ** min(self._failures[name] - 1, 4))
            self.watcher.mark_later([name], delay)

    def _begin_round(self) -> tuple[list[dict], bool]:
        """The reports before this round, and whether it rebuilds."""
        with self._rounds:
            self._round_started += 1
            rebuild, self._rebuild_asked = self._rebuild_asked, False
        return self.last_reports, rebuild

    def _emit(self, event: dict) -> None:
        """Hand a progress event to whoever waits for a round (``wait_for_sync``)."""
        with self._rounds:
            for listen in self._listeners:
                listen(event)
            if self._listeners:
                self._rounds.notify_all()

    def _waiting(self, holder: str | None) -> None:
        """Another process holds the index's writer lock (None: no longer)."""
        with self._rounds:
            self._writer_wait = holder
        if holder is not None:
            log.info("waiting for %s to finish writing the index", holder)
            self._emit({"waiting": holder})

    def _end_round(self, reports_before: list[dict], complete: bool) -> None:
        # ``_sync_once`` replaces ``last_reports`` only when the sync ran to its end.
        ran = self.last_reports is not reports_before
        if (self.state == "rebuilding" and ran and complete and not self.stop_event.is_set()
                and not any(r.get("pending") for r in self.last_reports)):
            self.state = "ready"
            log.info("index rebuilt after recovery")
        with self._rounds:
            self._round_done = self._round_started
            self._rounds.notify_all()

    # -- what the handlers report ----------------------------------------------------------

    def lag(self) -> dict | None:
        """How far behind its sources the index is, once that exceeds ``BEHIND_AFTER``:
        ``minutes``, the ``sources`` concerned and the last ``error`` among them."""
        with self._lock:  # the sync thread changes both dicts meanwhile
            since, known = dict(self.behind), dict(self.errors)
        if self.watcher is not None:
            for name, t in self.watcher.dirty_since().items():
                since[name] = min(t, since.get(name, t))
        now = self.clock.time()
        # A full disk does not clear by itself: said at once, not after BEHIND_AFTER.
        full = self.disk_full is not None
        late = {n: t for n, t in since.items()
                if now - t >= BEHIND_AFTER or (full and n in known)}
        if not late:
            return None
        errors = {n: known[n] for n in late if n in known}
        return {"minutes": int((now - min(late.values())) // 60),
                "sources": sorted(late),
                "error": next(iter(errors.items()), None)}

    def source_errors(self) -> dict[str, str]:
        """The last sync error of each failing source, as this thread knows it (newer
        than the index's record, which a full disk may not have let it write)."""
        with self._lock:
            return dict(self.errors)

    def rebuilding(self) -> dict | None:
        """While a damaged index is being rebuilt: how far it got and where the damaged
        file was moved; None otherwise."""
        engine = self.engine
        if self.state != "rebuilding" or engine is None:
            return None
        return {"notes": engine.index.counts()["notes"],
                "moved_to": engine.index.recovered_from}

    # -- index generations ----------------------------------------------------------------

    def _switch_generation(self) -> None:
        engine = self.engine
        assert engine is not None
        newer = engine.newer_generation()
        if newer and newer != self._other_model:
            log.info("switching to rebuilt index %s", newer)
            # Queries may be running on the old file: it is closed (and deleted) when the
            # last of them is done.
            try:
                engine.reopen(newer)
            except IndexMismatch as e:
                # Rebuilt with another model ([model] in config.toml): this daemon's model
                # cannot search it, so it keeps serving the index it has until restarted.
                self._other_model = newer
                log.warning("%s was rebuilt with another model; this daemon keeps serving "
                            "the previous index: run `notewell agent restart` (%s)", newer, e)
                return

"""Knowing which sources changed, without scanning them: the daemon's change detection.

Three ways to notice a change, cheapest first:

- file-system events (``watchdog``: FSEvents on macOS, inotify on Linux) on each source's
  ``watch_paths``, filtered to what can matter (Markdown files, folders, a vault's
  ``app.json``); an event in Bear's database folder (the database, its ``-wal``; not the
  ``-shm`` that readers, this one included, touch) prompts a read of its change token;
- a source's ``change_token`` (Bear: ``PRAGMA data_version``, one pragma): read on those
  events and once more ``token_seconds`` later, and every ``token_safety_seconds`` in
  case one was missed; every ``token_seconds`` only when its folder cannot be watched;
- a scan digest (a stat walk) for sources without events, every ``poll_seconds``, and for
  every file source every ``rescan_seconds`` in case the OS dropped events.

The poller sleeps until its next scheduled read (or an event pokes it), so an idle daemon
whose sources all have events wakes for it once per ``token_safety_seconds`` at most
(``bench/energy.py`` measures the idle daemon).

A change marks its source dirty; a dirty source is *due* once it has been quiet for
``debounce`` seconds (or has waited ``max_delay``), so a burst of saves is one sync. The
daemon asks ``next_due_in`` how long to sleep and ``take_due`` what to sync; ``force``
makes every source due now (``notewell sync``). ``dirty_since`` says since when each
source has had changes that nobody has picked up, for the "index is behind" hint.

Every timing decision reads a ``Clock`` (``SYSTEM_CLOCK`` unless one is passed in), so tests
drive debounce and ``max_delay`` with a fake clock instead of waiting them out.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterable

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.priority import lower_this_thread
from notewell.sources import Source, SourceError

log = logging.getLogger(__name__)

NOTE_SUFFIXES = (".md", ".markdown", ".pdf")  # PDFs: linked from notes, or notes of their own
IGNORED_PARTS = (f"{os.sep}.git{os.sep}", f"{os.sep}.hg{os.sep}", f"{os.sep}node_modules{os.sep}")


def scan_digest(source: Source) -> str:
    """A digest of what a scan sees: changes whenever a note is added, removed or its
    fingerprint changes. An unreadable source digests to its error."""
    h = hashlib.sha1()
    try:
        for stub in sorted(source.scan(), key=lambda s: s.note_id):
            h.update(f"{stub.note_id}\x00{stub.fingerprint}\x01".encode("utf-8",
                                                                         "surrogatepass"))
    except (SourceError, OSError) as e:
        return f"error:{e}"
    return h.hexdigest()


def relevant_path(path: str, is_directory: bool) -> bool:
    """Whether a file-system event at ``path`` can change a Markdown or Obsidian source."""
    if any(part in path + os.sep for part in IGNORED_PARTS):
        return False
    obsidian = f"{os.sep}.obsidian{os.sep}"
    if obsidian in path + os.sep:
        return path.endswith(f"{obsidian}app.json")  # the vault's excluded files
    return is_directory or path.lower().endswith(NOTE_SUFFIXES)


class ChangeWatcher:
    def __init__(self, sources: Iterable[Source], *, debounce: float = 1.0,
                 max_delay: float = 10.0, poll_seconds: float = 5.0,
                 token_seconds: float = 1.0, token_safety_seconds: float = 60.0,
                 rescan_seconds: float = 300.0,
                 use_events: bool = True, on_change: Callable[[], None] | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.sources = {s.name: s for s in sources}
        self.debounce = debounce
        self.max_delay = max_delay
        self.poll_seconds = poll_seconds
        self.token_seconds = token_seconds
        self.token_safety_seconds = token_safety_seconds
        self.rescan_seconds = rescan_seconds
        self.use_events = use_events
        self.on_change = on_change or (lambda: None)
        self.clock = clock
        self._lock = threading.Lock()
        self._dirty_since: dict[str, float] = {}  # wall clock, for people
        self._first: dict[str, float] = {}  # monotonic, for max_delay
        self._last: dict[str, float] = {}  # monotonic, for debounce
        self._forced: set[str] = set()
        self._tokens: dict[str, str | None] = {}
        self._digests: dict[str, str] = {}
        self._next_digest: dict[str, float] = {}
        self._next_token: dict[str, float] = {}
        self._evented: set[str] = set()  # sources whose file events are being delivered
        self._token_sources: set[str] = set()
        self._token_evented: set[str] = set()  # token sources whose folder sends events
        self._stop = threading.Event()
        self._poke = threading.Event()
        self._thread: threading.Thread | None = None
        self._observer = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Take baselines now (so a change made while the first sync runs is not folded
        into them), start file-system events where available, then the poller."""
        now = self.clock.monotonic()
        for name, src in self.sources.items():
            token = src.change_token()
            if token is not None:
                self._token_sources.add(name)
                self._tokens[name] = token
                self._next_token[name] = now + self.token_seconds
            else:
                self._digests[name] = scan_digest(src)
                self._next_digest[name] = now + self.poll_seconds
        if self.use_events:
            self._start_events()
        for name in self.sources:
            if name in self._evented and name not in self._token_sources:
                self._next_digest[name] = now + self.rescan_seconds
            if name in self._token_evented:
                self._next_token[name] = now + self.token_safety_seconds
        self._thread = threading.Thread(target=self._poll_loop, name="notewell-watch",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._poke.set()
        if self._observer is not None:
            try:
                self._observer.stop()
                self._observer.join(timeout=2.0)
            except Exception:  # stopping must never raise
                log.debug("stopping the file watcher failed", exc_info=True)
            self._observer = None
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    @property
    def mode(self) -> dict[str, str]:
        """How each source is watched: ``events``, ``token`` or ``polling``."""
        return {name: "token" if name in self._token_sources
                else "events" if name in self._evented else "polling"
                for name in self.sources}

    def _start_events(self) -> None:
        try:
            from watchdog.events import (
                DirCreatedEvent,
                DirDeletedEvent,
                DirMovedEvent,
                FileCreatedEvent,
                FileDeletedEvent,
                FileModifiedEvent,
                FileMovedEvent,
                FileSystemEventHandler,
            )
            from watchdog.observers import Observer
        except ImportError:
            log.info("watchdog is not installed; watching sources by polling every %.0f s",
                     self.poll_seconds)
            return
        watcher = self
        # Only changes: with inotify this is the kernel's mask, so the daemon's own reads
        # (a sync or rescan opening every note) wake no thread at all.
        changes = [FileCreatedEvent, FileDeletedEvent, FileModifiedEvent, FileMovedEvent,
                   DirCreatedEvent, DirDeletedEvent, DirMovedEvent]

        class Handler(FileSystemEventHandler):
            def __init__(self, name: str, token: bool) -> None:
                self.name, self.token = name, token

            def on_any_event(self, event) -> None:
                # Opening and closing (our own reads among them) change nothing.
                if event.event_type not in ("created", "deleted", "modified", "moved"):
                    return
                if event.is_directory and event.event_type == "modified":
                    return  # the file event inside says more
                if self.token:
                    # Readers (our token read among them) write the -shm index only.
                    if not os.fsdecode(event.src_path).endswith("-shm"):
                        watcher._poke.set()  # let the poller read the token now
                    return
                paths = [os.fsdecode(event.src_path)]
                if getattr(event, "dest_path", None):
                    paths.append(os.fsdecode(event.dest_path))
                if any(relevant_path(p, event.is_directory) for p in paths):
                    watcher.mark(self.name, f"{event.event_type} {paths[-1]}")

        try:
            observer = Observer()
        except Exception as e:
            log.warning("file-system events unavailable (%s); polling instead", e)
            return
        for name, src in self.sources.items():
            for path in src.watch_paths():
                if not os.path.isdir(path):
                    continue
                try:
                    observer.schedule(Handler(name, name in self._token_sources), path,
                                      recursive=name not in self._token_sources,
                                      event_filter=changes)
                except Exception as e:  # e.g. the inotify watch limit; polling still works
                    log.warning("cannot watch %s for events (%s); polling it instead", path, e)
                    continue
                if name in self._token_sources:
                    self._token_evented.add(name)
                else:
                    self._evented.add(name)
        try:
            observer.start()
        except Exception as e:
            log.warning("file-system events unavailable (%s); polling instead", e)
            self._evented.clear()
            self._token_evented.clear()
            return
        self._observer = observer

    # -- noticing changes -------------------------------------------------------------------

    def mark(self, name: str, why: str = "") -> None:
        """Record that source ``name`` may have changed now."""
        if name not in self.sources:
            return
        now = self.clock.monotonic()
        with self._lock:
            if name not in self._dirty_since:
                self._dirty_since[name] = self.clock.time()
                self._first[name] = now
                log.debug("change in %s: %s", name, why)
            self._last[name] = now
        self.on_change()

    def mark_later(self, names: Iterable[str], delay: float) -> None:
        """Make these sources due in ``delay`` seconds (a retry after a failed sync)."""
        now = self.clock.monotonic()
        with self._lock:
            for name in names:
                if name not in self.sources:
                    continue
                self._dirty_since.setdefault(name, self.clock.time())
                self._first.setdefault(name, now)
                # Due when quiet for `debounce`: pretend the last change is that far ahead.
                self._last[name] = max(self._last.get(name, now), now + delay - self.debounce)
                self._first[name] = max(self._first[name], now + delay - self.max_delay)

    def force(self, names: Iterable[str] | None = None) -> None:
        """Make these sources (all by default) due now, changed or not."""
        with self._lock:
            self._forced.update(self.sources if names is None else names)
        self.on_change()

    def check_now(self) -> None:
        """Poll every token and digest once, on the caller's thread (for tests)."""
        now = self.clock.monotonic()
        for name in list(self.sources):
            self._check(name, now, force=True)

    def next_check_in(self) -> float | None:
        """Seconds until the poller's next scheduled token read or scan digest (0 when one
        is due); ``None`` when only file-system events can tell it to look."""
        times = [*self._next_digest.values(), *self._next_token.values()]
        return max(0.0, min(times) - self.clock.monotonic()) if times else None

    def _poll_loop(self) -> None:
        lower_this_thread()  # scans and digests are background work
        while not self._stop.is_set():
            # Asleep until a read is due or an event of a token source pokes: no wake-up
            # on a timer when nothing is scheduled.
            poked = self._poke.wait(self.next_check_in())
            self._poke.clear()
            if self._stop.is_set():
                return
            now = self.clock.monotonic()
            for name in list(self.sources):
                try:
                    self._check(name, now, force=poked and name in self._token_sources)
                except Exception:  # a source bug must not kill change detection
                    log.exception("checking %s for changes failed", name)

    def _check(self, name: str, now: float, *, force: bool = False) -> None:
        """Read ``name``'s token or digest if it is due (or ``force``d), and schedule the
        next read."""
        src = self.sources[name]
        if name in self._token_sources:
            if not force and now < self._next_token.get(name, float("inf")):
                return
            # After an event, once more ``token_seconds`` later: the event may come from
            # the write just before the commit becomes visible (SQLite publishes it in the
            # -shm, which gives no event), and Bear writes in bursts.
            interval = (self.token_safety_seconds if name in self._token_evented and not force
                        else self.token_seconds)
            self._next_token[name] = now + interval
            token = src.change_token()
            if token != self._tokens.get(name):
                self._tokens[name] = token
                self.mark(name, "change token")
            return
        if not force and now < self._next_digest.get(name, float("inf")):
            return
        interval = self.rescan_seconds if name in self._evented else self.poll_seconds
        self._next_digest[name] = now + interval
        value = scan_digest(src)
        if value != self._digests.get(name):
            self._digests[name] = value
            self.mark(name, "scan digest")

    # -- what is due ------------------------------------------------------------------------

    def _is_due(self, name: str, now: float) -> bool:
        if name in self._forced:
            return True
        if name not in self._dirty_since:
            return False
        return (now - self._last[name] >= self.debounce
                or now - self._first[name] >= self.max_delay)

    def next_due_in(self) -> float | None:
        """Seconds until some dirty source is due (0 when one is), ``None`` if none is dirty."""
        now = self.clock.monotonic()
        with self._lock:
            if self._forced:
                return 0.0
            waits = [min(self._last[n] + self.debounce, self._first[n] + self.max_delay) - now
                     for n in self._dirty_since]
        return max(0.0, min(waits)) if waits else None

    def take_due(self) -> dict[str, float]:
        """The sources due for a sync, each with the time (wall clock) of its first
        unsynced change; they are no longer dirty (a later change marks them again)."""
        now = self.clock.monotonic()
        wall = self.clock.time()
        with self._lock:
            due = {n: self._dirty_since.get(n, wall) for n in self.sources
                   if self._is_due(n, now)}
            for n in due:
                self._dirty_since.pop(n, None)
                self._first.pop(n, None)
                self._last.pop(n, None)
            self._forced.difference_update(due)
        return due

    def dirty_since(self) -> dict[str, float]:
        with self._lock:
            return dict(self._dirty_since)

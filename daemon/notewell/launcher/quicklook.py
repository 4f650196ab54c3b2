"""Alfred's Quick Look of a hit: its passage as a small HTML page, the query's words
marked (``<mark>``, from ``Hit.spans``), in the daemon's cache folder
(``wire.paths.preview_dir``: under the home, 0700, never beside the notes).

A page is named by what it shows (a hash of title, place, passage and spans): the same
hit on the next keystroke names the same file, and two answers at once never write over
each other's pages. An answer only names its pages (``Job``: a hash per hit, no I/O);
``Writer``, the folder's one writer, a thread of its own, writes those not there yet
after the answer is rendered, so a keystroke never waits on the disk (writing twenty
files took 0.6 ms, and spikes of 5-9 ms, on this machine's ext4). It waits while the
daemon answers a read and sends the reply (``answering``), so its disk time and its hold
on the interpreter never land on an answer; typing faster than that skips the answers a
newer one replaced (Alfred shows only the newest).

The number of pages stays bounded: past ``MAX_PREVIEWS`` the least recently shown go. The
writer keeps which those are (the folder is listed once, at its first job), so a page
shown again costs a stat, not a write.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import logging
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from notewell.wire import paths

if TYPE_CHECKING:
    from notewell.notes import Hit

log = logging.getLogger(__name__)

MAX_PREVIEWS = 200  # about ten answers of twenty hits
_PRUNED_TO = MAX_PREVIEWS - 50  # room for a few answers' new pages before the next pruning
_STYLE = ("body{font:15px/1.5 -apple-system,system-ui,sans-serif;margin:2em;max-width:46em}"
          "h1{font-size:1.3em;margin:0}p.where{color:#777;margin:.2em 0 1.2em}"
          "div{white-space:pre-wrap}mark{background:#ffe066;color:inherit}")


class Page(NamedTuple):
    """What one preview shows: a copy, so the writer shares nothing with the answer."""

    title: str
    source: str
    heading: str
    passage: str
    spans: tuple[tuple[int, int], ...]

    @property
    def where(self) -> str:
        return " · ".join(p for p in (self.source, self.heading) if p)


def page_of(hit: Hit) -> Page:
    # Spans are (start, end) tuples of ints already (``search.spans``).
    return Page(hit.title, hit.source, hit.heading_path, hit.passage, tuple(hit.spans))


def render(page: Page) -> str:
    """The preview's HTML: title, where in the note, the passage with its spans marked;
    every text of the note escaped."""
    parts, at = [], 0
    for start, end in page.spans:
        if start < at or end > len(page.passage):
            continue  # spans are sorted and disjoint; anything else is not shown
        parts.append(html.escape(page.passage[at:start]))
        parts.append("<mark>" + html.escape(page.passage[start:end]) + "</mark>")
        at = end
    parts.append(html.escape(page.passage[at:]))
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>'
            f"{html.escape(page.title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(page.title)}</h1><p class=\"where\">"
            f"{html.escape(page.where)}</p><div>{''.join(parts)}</div></body></html>\n")


class Job:
    """The pages of one answer's hits, named without touching the disk: ``paths`` (None
    for all while the writer cannot make the folder: Quick Look then shows the file
    itself), written by ``Writer.submit``."""

    def __init__(self, hits: list[Hit], folder: str | None = None,
                 usable: bool = True) -> None:
        self.folder = folder or paths.preview_dir()
        self.pages = [page_of(h) for h in hits]
        prefix = self.folder + os.sep
        self.paths: list[str | None] = (
            [prefix + _name(p) for p in self.pages] if usable else [None] * len(hits))


def _name(page: Page) -> str:
    # One string hashed: the names are made for twenty hits on every keystroke.
    text = "\x00".join((page.title, page.source, page.heading, page.passage, repr(page.spans)))
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                           digest_size=16).hexdigest() + ".html"


class Writer:
    """The preview folder's one writer: a daemon thread, started on the first job."""

    def __init__(self) -> None:
        # False once the folder could not be made (the writer's to set): answers then
        # name no pages, until a job finds it usable again.
        self.usable = True
        self._jobs: queue.Queue[Job] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # The pages in the folder, the least recently shown first: the writing thread's,
        # listed from the folder once (oldest first) and kept since, so a page shown again
        # costs a stat, not a write.
        self._shown: OrderedDict[str, None] | None = None
        self._answering = 0  # reads being answered (``answering``'s to count)
        self._quiet = threading.Condition()

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Around each read the daemon answers, its reply sent: no page is written
        meanwhile."""
        with self._quiet:
            self._answering += 1
        try:
            yield
        finally:
            with self._quiet:
                self._answering -= 1
                if not self._answering:
                    self._quiet.notify_all()

    def _wait_quiet(self) -> None:
        with self._quiet:
            self._quiet.wait_for(lambda: not self._answering)

    def job(self, hits: list[Hit], folder: str | None = None) -> Job:
        """A job naming ``hits``' pages (none while the folder is unusable)."""
        return Job(hits, folder, self.usable)

    def submit(self, job: Job) -> None:
        if not job.pages:
            return
        self._jobs.put(job)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="notewell-previews",
                                                daemon=True)
                self._thread.start()

    def flush(self) -> None:
        """Wait until every job submitted so far is written (tests, benchmarks)."""
        self._jobs.join()

    def _run(self) -> None:
        # At normal priority, unlike the copies' loaders: lowered, it was descheduled
        # while holding the interpreter, and back-to-back requests waited on it
        # (bench/README.md, "The keystroke's new costs").
        while True:
            job = self._jobs.get()
            self._wait_quiet()
            while not self._jobs.empty():  # replaced in Alfred by a newer answer
                self._jobs.task_done()
                job = self._jobs.get()
            try:
                self.usable = ready(job.folder)
                if self.usable:
                    self.write(job, before_page=self._wait_quiet)
            except Exception:  # a cache: a page not written is shown as the file instead
                log.exception("Quick Look previews not written")
            finally:
                self._jobs.task_done()

    def write(self, job: Job, before_page: Callable[[], None] | None = None) -> int:
        """Write the job's pages not there yet (in a folder ``ready`` made); past
        ``MAX_PREVIEWS`` the least recently shown go, down to ``_PRUNED_TO``. The number
        written. ``before_page``: called before each page is written."""
        shown = self._shown
        if shown is None:
            shown = self._shown = OrderedDict.fromkeys(_listed(job.folder))
        wrote = 0
        for page, path in zip(job.pages, job.paths):
            if path is None:
                continue
            if path in shown and os.path.exists(path):  # another process may prune
                shown.move_to_end(path)
                continue
            if before_page is not None:
                before_page()
            try:
                _write_page(path, render(page).encode("utf-8", "replace"))
            except OSError as e:
                log.warning("Quick Look preview %s not written: %s", path, e)
                continue
            shown[path] = None
            shown.move_to_end(path)
            wrote += 1
        if len(shown) > MAX_PREVIEWS:
            while len(shown) > _PRUNED_TO:
                with contextlib.suppress(OSError):
                    os.remove(shown.popitem(last=False)[0])
        return wrote


def _write_page(path: str, data: bytes) -> None:
    """A new page, under its own name: no temporary file and rename (half the kernel time
    of a page; six pages a keystroke). A name says what the page shows, so one there
    already is the same page (another process wrote it); one cut short by a failed write
    is removed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.remove(path)
        raise
    os.close(fd)


def ready(folder: str) -> bool:
    """Whether the preview folder is there (made 0700 if not) and ours."""
    try:
        paths.ensure_private_dir(folder)
        return True
    except OSError as e:
        log.warning("no Quick Look previews: %s", e)
        return False


def _listed(folder: str) -> list[str]:
    """The previews in ``folder``, the oldest first."""
    try:
        found = [(e.stat().st_mtime_ns, e.path) for e in os.scandir(folder)
                 if e.name.endswith(".html") and e.is_file(follow_symlinks=False)]
    except OSError:
        return []
    return [path for _, path in sorted(found)]


_WRITER = Writer()


def writer() -> Writer:
    """The process's one writer of previews."""
    return _WRITER


def write_previews(hits: list[Hit], folder: str | None = None) -> list[str | None]:
    """Each hit's preview, written now (the one-shot callers; the daemon hands its jobs
    to ``writer``)."""
    job = Job(hits, folder)
    if not job.pages or not ready(job.folder):
        return [None] * len(hits)
    Writer().write(job)
    return job.paths

"""One writer for the index directory, across processes.

Whoever writes the index (the daemon's sync thread for one round, or a command running
without a daemon) holds an exclusive ``flock`` on ``<index dir>/writer.lock`` meanwhile,
so two writers never interleave and SQLite never answers "database is locked" to one of
them. The lock dies with its process, so a crash or a kill never leaves it held. The
holder writes its pid and what it is into the file, for the message a waiting writer
shows. Readers take no lock.

May import ``wire.paths``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator

from notewell.wire import paths

LOCK_NAME = "writer.lock"
# flock has no timed wait and nothing wakes a waiter but the lock itself, so a waiter that
# must stay stoppable (the daemon's sync thread) tries again this often.
RETRY_EVERY = 0.1


class Stopped(Exception):
    """``should_stop`` said stop while this writer was waiting for the lock."""


def lock_path(directory: str) -> str:
    return os.path.join(directory, LOCK_NAME)


@contextlib.contextmanager
def hold(directory: str, who: str, on_wait: Callable[[str], None] | None = None,
         should_stop: Callable[[], bool] | None = None) -> Iterator[None]:
    """Hold the index directory's writer lock for the ``with`` block. When another
    process holds it, ``on_wait`` is told once who does ("notewell index --rebuild (pid
    123)"), then this waits until it is free; with ``should_stop``, ``Stopped`` if it
    turns true first."""
    paths.ensure_private_dir(directory)
    fd = os.open(lock_path(directory), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        told = False
        while not _try_lock(fd):
            if not told:
                told = True
                if on_wait is not None:
                    on_wait(holder(fd))
            if should_stop is None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # a command: Ctrl-C interrupts the wait
                break
            if should_stop():
                raise Stopped("stopped while waiting for the index's writer lock")
            time.sleep(RETRY_EVERY)
        os.ftruncate(fd, 0)
        # Only for a waiter's message: a full disk must not stop the writer it names.
        with contextlib.suppress(OSError):
            os.pwrite(fd, f"{os.getpid()} {who}".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock, if held


@contextlib.contextmanager
def try_hold(directory: str) -> Iterator[bool]:
    """Hold the writer lock for the ``with`` block if nobody does (True), else hold
    nothing (False): for work that is only safe while no other process writes, and can
    wait for another time (cleaning up after a crash)."""
    fd = os.open(lock_path(directory), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        yield _try_lock(fd)
    finally:
        os.close(fd)


def holder(fd: int) -> str:
    """Who holds the lock open at ``fd``, as its holder wrote it: "WHO (pid N)"."""
    try:
        text = os.pread(fd, 512, 0).decode("utf-8", "replace")
    except OSError:
        text = ""
    pid, _, who = text.strip().partition(" ")
    if not pid.isdigit():
        return "another notewell process"  # between a new holder's truncate and write
    return f"{who or 'notewell'} (pid {pid})"


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise

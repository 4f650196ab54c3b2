"""Failures of the index's files told apart: a full disk, and a damaged file.

A full disk shows as ``OSError`` ENOSPC (or EDQUOT, a quota) from a file write and as
``apsw.FullError`` (SQLITE_FULL) from SQLite; damage as ``apsw.CorruptError`` or
``apsw.NotADBError`` (and ``schema.IndexCorrupt``, which wraps them at open). Each is
found anywhere in an exception's chain (a wrapped cause counts). ``disk_full_message``
says it in words, with the free space and what to do: the daemon's log and ``status``,
``doctor`` and the launcher all show that one text.

May import ``index.schema``.
"""

from __future__ import annotations

import errno
import os

import apsw

from notewell.index.schema import IndexCorrupt

_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
MB = 1024 * 1024


def _chain(e: BaseException | None):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def disk_full(e: BaseException) -> bool:
    """Whether ``e`` (or what caused it) is a write refused for want of space."""
    return any(isinstance(x, apsw.FullError)
               or (isinstance(x, OSError) and x.errno in _FULL_ERRNOS) for x in _chain(e))


def damaged(e: BaseException) -> bool:
    """Whether ``e`` (or what caused it) says an index file's pages are damaged."""
    return any(isinstance(x, (apsw.CorruptError, apsw.NotADBError, IndexCorrupt))
               for x in _chain(e))


def free_bytes(path: str) -> int | None:
    """Free space for this user on the file system holding ``path`` (or its nearest
    existing folder); None when it cannot be told."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def disk_full_words(folder: str) -> str:
    """"the disk holding FOLDER is full: free N MB"."""
    free = free_bytes(folder)
    amount = "an unknown amount" if free is None else f"{free / MB:.0f} MB"
    return f"the disk holding {folder} is full: free {amount}"


MAKE_ROOM = "make room on it (empty the Trash, delete large files)"


def disk_full_message(folder: str, then: str = "notewell carries on by itself once "
                      "there is room") -> str:
    """``disk_full_words`` with what to do; ``then`` says what happens once there is
    room."""
    return f"{disk_full_words(folder)}; {MAKE_ROOM}; {then}"

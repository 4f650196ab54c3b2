"""The interface every note source implements, and the errors they raise."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from typing import Protocol

from notewell.config import SourceConfig
from notewell.notes import Note, NoteStub


class SourceError(Exception):
    """The whole source cannot be read now (missing folder, locked or unknown database).
    The index keeps what it has; the message says what the user can do."""


DENIED = "not allowed to read"  # how a SourceDenied message starts (status shows it)


class SourceDenied(SourceError):
    """The source is there, but the system does not let this process read it: macOS
    privacy controls (EPERM) or file permissions (EACCES). ``path`` is what was refused;
    ``notewell doctor`` names the program that needs the grant."""

    def __init__(self, what: str, path: str, error: OSError) -> None:
        super().__init__(f"{DENIED} {what} {path} ({error.strerror or error}): "
                         "the system refuses this process (on macOS, privacy controls); "
                         "`notewell doctor` names the program to allow")
        self.path = path
        self.error = error


def is_denied(error: OSError) -> bool:
    return error.errno in (errno.EPERM, errno.EACCES)


def access_problem(path: str) -> OSError | None:
    """Why this process cannot read ``path`` (a file: opened; a folder: listed), or None.
    The errno says which: ENOENT not there, EPERM/EACCES not allowed."""
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            with os.scandir(path) as entries:
                next(entries, None)
        else:
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))  # a FIFO must not block
    except OSError as e:
        return e
    return None


class FolderUnreadable(SourceError):
    """Folders of a source cannot be listed (macOS privacy controls, permissions, a disk or
    share gone); the notes indexed from them are kept. ``denied``: refused permission."""

    def __init__(self, message: str, denied: bool) -> None:
        super().__init__(message)
        self.denied = denied


class SourceWarning(Exception):
    """One note cannot be read; it is skipped and reported, the rest are indexed."""


class LinkOut(SourceWarning):
    """The note's path resolves outside its source's folder (a symlink to ``/etc/shadow``
    or ``~/.ssh``): it is never read, so a shared or cloned vault cannot hand out a file
    from elsewhere."""

    def __init__(self, path: str, target: str) -> None:
        super().__init__(f"{path}: links to {target}, outside the source's folder; "
                         "not read (only files inside the folder are)")
        self.path = path
        self.target = target


class Listing(list[NoteStub]):
    """What a scan of a folder saw: the notes it could read (the list itself), and what it
    could not see but must not take for deleted. ``unreadable`` and ``offloaded`` hold
    note ids, or note-id prefixes ending in "/" for folders: under ``unreadable`` (with
    ``error`` saying which folders and what to do), folders that could not be listed; in
    ``offloaded``, notes a cloud drive keeps online only. The sync keeps their rows.
    ``links_out``: the paths in the folder (a folder's ending in "/") of the links that
    resolve outside it, skipped (never read, and their notes gone from the index)."""

    def __init__(self, stubs: Iterable[NoteStub] = (), unreadable: Iterable[str] = (),
                 offloaded: Iterable[str] = (), error: FolderUnreadable | None = None,
                 links_out: Iterable[str] = ()) -> None:
        super().__init__(stubs)
        self.unreadable = frozenset(unreadable)
        self.offloaded = frozenset(offloaded)
        self.error = error
        self.links_out = tuple(links_out)

    def keeps(self, note_id: str) -> bool:
        """Whether a note the scan did not list may still exist: keep its rows."""
        return _under(note_id, self.unreadable) or _under(note_id, self.offloaded)

    def offloaded_count(self, stored: Iterable[str]) -> int:
        """Offloaded notes: each listed one, and each stored one under an offloaded folder."""
        folders = {k for k in self.offloaded if k.endswith("/")}
        return (len(self.offloaded) - len(folders)
                + sum(1 for n in stored if folders and _under(n, folders)))


def _under(note_id: str, keys: frozenset[str] | set[str]) -> bool:
    if not keys:
        return False
    return note_id in keys or any(k.endswith("/") and note_id.startswith(k) for k in keys)


class Source(Protocol):
    config: SourceConfig

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    def scan(self) -> Iterable[NoteStub]:
        """Every note with a cheap fingerprint (a ``Listing`` says what it could not
        see); raises ``SourceError`` if the source cannot be read at all."""
        ...

    def load(self, note_id: str) -> Note | None:
        """The full note, ``None`` if it vanished; raises ``SourceWarning`` if unreadable."""
        ...

    def passage_url(self, note: Note, anchor: str | None, line: int | None = None) -> str:
        """The link that opens ``note`` at the heading ``anchor`` (or the file's ``line``,
        1-based) where the app can."""
        ...

    def new_note_url(self, title: str, tags: tuple[str, ...] = ()) -> str | None:
        """The link that asks the source's app to create a note titled ``title`` with
        ``tags``, or None when there is no such app (notewell never writes notes)."""
        ...

    def change_token(self) -> str | None:
        """A value that changes whenever the source may have changed, or ``None`` when
        only a scan can tell. Lets the daemon skip a scan of an unchanged Bear database."""
        ...

    def watch_paths(self) -> list[str]:
        """Folders or files whose change events should trigger a sync."""
        ...

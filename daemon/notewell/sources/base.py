"""The interface every note source implements, and the errors they raise."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from notewell.config import SourceConfig
from notewell.notes import Note, NoteStub


class SourceError(Exception):
    """The whole source cannot be read now (missing folder, locked or unknown database).
    The index keeps what it has; the message says what the user can do."""


class SourceWarning(Exception):
    """One note cannot be read; it is skipped and reported, the rest are indexed."""


class Source(Protocol):
    config: SourceConfig

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    def scan(self) -> Iterator[NoteStub]:
        """Every note with a cheap fingerprint; raises ``SourceError`` if unreadable."""
        ...

    def load(self, note_id: str) -> Note | None:
        """The full note, ``None`` if it vanished; raises ``SourceWarning`` if unreadable."""
        ...

    def passage_url(self, note: Note, anchor: str | None) -> str:
        """The link that opens ``note`` at the heading ``anchor`` where the app can."""
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

"""The records that flow through notewell: source -> Note -> Chunk -> (index rows) -> Hit.

Plain dataclasses (frozen up to the ranked ``Hit``) with little behaviour beyond hashing
and ``to_dict``, so every stage can be tested on its own and the daemon can hand them
between threads without copying.
"""

from __future__ import annotations

import dataclasses
import hashlib
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class NoteStub:
    """What a cheap scan of a source sees: enough to tell whether a note changed."""

    note_id: str
    fingerprint: str  # e.g. mtime+size for a file; modification date + Z_OPT for Bear


# The most of a note's fields that any reply carries, so that no note, however it is
# written (a 1 MB heading line, ten thousand #tags, a pasted image), pushes a reply over
# the frame limit (``wire.protocol.MAX_REPLY_BYTES``): a hit is at most about 20 KB of
# text, 50 hits (``wire.requests.MAX_LIMIT``) about 1 MB. Cut where notes are read and
# again where hits are made (an index cut before these bounds existed still answers).
MAX_TITLE_CHARS = 500
MAX_TAG_CHARS = 100
MAX_TAGS = 200  # per note
MAX_HEADING_CHARS = 200  # one heading of a heading path (up to six deep)
MAX_PASSAGE_CHARS = 4_000  # a passage: 170 word pieces of prose are about 1,000


def cut(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bounded_tags(tags) -> tuple[str, ...]:
    """A note's tags within ``MAX_TAGS`` of ``MAX_TAG_CHARS`` each (longer ones are no
    tags anyone types: dropped)."""
    return tuple(t for t in tags if len(t) <= MAX_TAG_CHARS)[:MAX_TAGS]


# The first heading of an attachment's passages starts with this mark: the launcher says
# "from an attachment" and the tokenizer reads it as a separator, not as a word.
ATTACHMENT_MARK = "\U0001f4ce "  # paperclip


@dataclass(frozen=True)
class Attachment:
    """Text of a file that belongs to a note (a PDF it links, an image Bear read): indexed
    as passages of the note, under the file's name in the heading path."""

    name: str  # the file name shown in the heading path
    pages: tuple[str, ...]  # the text, one entry per page ("page N" in the heading path
    # when there is more than one)
    url: str | None = None  # what Enter opens for its passages; None: the note's own link

    @property
    def heading(self) -> str:
        return ATTACHMENT_MARK + self.name


@dataclass(frozen=True)
class Note:
    """One note as its source gives it, before chunking."""

    note_id: str  # "<source name>:<key in the source>", stable across syncs
    source: str  # the configured source name
    kind: str  # "markdown" | "obsidian" | "bear"
    title: str
    text: str  # Markdown body, frontmatter removed
    url: str  # what Enter opens
    path: str | None = None  # the file, when there is one
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    created: float | None = None  # Unix seconds
    modified: float | None = None
    archived: bool = False
    fingerprint: str = ""
    attachments: tuple[Attachment, ...] = ()
    # Problems with the note's attachments (an encrypted PDF it links): reported by the
    # sync, while the note itself is indexed.
    warnings: tuple[str, ...] = ()
    # The line of the file where ``text`` starts (after frontmatter), for passages' lines.
    body_line: int = 1

    @property
    def content_hash(self) -> str:
        """Covers everything that reaches the index; the URL and dates do not."""
        h = hashlib.sha256()
        for part in (self.title, self.text, " ".join(self.tags), " ".join(self.aliases)):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        h.update(b"archived" if self.archived else b"")
        # Only notes with attachments hash them: every other note keeps its old hash.
        for a in self.attachments:
            for part in (a.name, a.url or "", *a.pages):
                h.update(b"\x01" + part.encode("utf-8", "surrogatepass"))
        # Passages' lines move with the frontmatter (their links may hold ``{line}``); only
        # notes with frontmatter hash it, the rest keep their old hash.
        if self.body_line != 1:
            h.update(b"\x02%d" % self.body_line)
        return h.hexdigest()


@dataclass(frozen=True)
class Chunk:
    """A passage of a note that is embedded and searched on its own."""

    seq: int
    heading_path: tuple[str, ...]  # headings above the passage, outermost first
    text: str
    anchor: str | None = None  # the nearest heading, for deep links
    # The passage's first line in the note's file (1-based; None: not known, an
    # attachment's): what ``{line}`` in a ``url_template`` opens at. Not compared: the same
    # passage elsewhere in the file is the same passage.
    line: int | None = dataclasses.field(default=None, compare=False)

    def embed_text(self, title: str) -> str:
        """The text the model reads: title and heading path give a passage its context."""
        context = " > ".join(p for p in (title, *self.heading_path) if p)
        return f"{context}\n{self.text}" if context else self.text

    @staticmethod
    def text_hash(embed_text: str) -> str:
        return hashlib.sha256(embed_text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Hit:
    """One ranked note in a result list, with its best passage."""

    note_id: str
    title: str
    source: str
    kind: str
    url: str
    path: str | None
    tags: list[str]
    heading_path: str
    snippet: str
    passage: str
    score: float
    modified: float | None = None
    archived: bool = False
    attachment: str | None = None  # the file the passage came from, when not the note
    # Where the query's words are in ``passage`` and in ``snippet``: [start, end) character
    # offsets (``search.spans``), for the launchers to mark.
    spans: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    snippet_spans: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    # The note's best passages, best first (the shown one first): {"text", "heading_path",
    # "spans", "score"}, when the search asked for more than the shown one (JSON clients);
    # else empty, and ``to_dict`` lists the shown one alone.
    passages: list[dict] = dataclasses.field(default_factory=list)

    def shown_passage(self) -> dict:
        return {"text": self.passage, "heading_path": self.heading_path,
                "spans": [list(s) for s in self.spans], "score": round(self.score, 6)}

    def to_dict(self) -> dict:
        return {
            "note_id": self.note_id,
            "title": self.title,
            "source": self.source,
            "kind": self.kind,
            "url": self.url,
            "path": self.path,
            "tags": list(self.tags),
            "heading_path": self.heading_path,
            "snippet": self.snippet,
            "passage": self.passage,
            "score": round(self.score, 6),
            "modified": self.modified,
            "archived": self.archived,
            "attachment": self.attachment,
            "spans": [list(s) for s in self.spans],
            "snippet_spans": [list(s) for s in self.snippet_spans],
            "passages": self.passages or [self.shown_passage()],
        }


def nfc(text: str) -> str:
    """``text`` composed (NFC). macOS hands out decomposed text (NFD): Alfred's queries,
    file names typed in Finder, some files' contents; the index and every query meet in
    NFC, so "서울" or "café" typed either way is the same word."""
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


def nfc_note(note: Note) -> Note:
    """``note`` with everything that is indexed in NFC (title, text, tags, aliases, its
    attachments' text), its title and tags within their bounds (``MAX_TITLE_CHARS``);
    its id, path and link stay as the source names them."""
    return dataclasses.replace(
        note, title=cut(nfc(note.title), MAX_TITLE_CHARS), text=nfc(note.text),
        tags=bounded_tags(nfc(t) for t in note.tags), aliases=tuple(nfc(a) for a in note.aliases),
        attachments=tuple(dataclasses.replace(a, name=nfc(a.name),
                                              pages=tuple(nfc(p) for p in a.pages))
                          for a in note.attachments))


def id_forms(note_id: str) -> tuple[str, ...]:
    """A note id as given, then composed and decomposed: an id that went through Alfred
    (``similar:ID``) may come back in the other form than the file name's."""
    return tuple(dict.fromkeys((note_id, nfc(note_id), unicodedata.normalize("NFD", note_id))))

"""Known-item queries from the user's own notes, and the corpus they are asked over.

A query is one heading of a note (3-12 words, never its title) or, for a note without a
usable one, its first sentence of 5-20 words (no code, no links); its answer is that
note. A query found in another note too is not asked (it has two answers). Nothing of
the query may be matched verbatim, nor any title: the corpus is every note with its
title, aliases and path left out (the Markdown source searches a note's path as a title
alias, and a title repeated as the note's first H1 is dropped too), and with the query's
own heading or sentence cut out of its note. Every other note stays as a distractor.
Notes are drawn by a hash of their ids with a fixed seed, never by ``random``, so the
same notes give the same queries on every machine and Python version.

Imports ``notes``, ``sources`` (reading notes, Markdown's fences) and
``evaluation.metrics``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from notewell.evaluation.metrics import EvalError, EvalQuery
from notewell.notes import Note, NoteStub
from notewell.sources import Source, SourceWarning
from notewell.sources.markdown_text import iter_fenced

SEED = "notewell-known-items-1"  # changing it changes every user's queries
QUERIES = 200  # default sample
MIN_NOTES = 20  # fewer, and a known item is found by elimination
MIN_QUERIES = 10
SENTENCE_WORDS = (5, 20)
HEADING_WORDS = (3, 12)  # "Setup" or "Notes" names no note
MIN_REST_WORDS = 20
KIND_NAMES = ("title", "heading", "sentence")
# What a query may be, tried in this order. A title is left out: as a query it is found
# by its words in the note's first lines (0.975 Recall@5 on til-jbranchaud's notes, see
# docs/search-quality.md), and most Dendron titles are one word.
KINDS = ("heading", "sentence")  # what must remain of a note once its query is cut out

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
# Tables, HTML, images, rules, footnotes and link definitions hold no sentence to ask for.
_NOT_PROSE = re.compile(r"^\s*(?:\||<|!\[|-{3,}\s*$|\*{3,}\s*$|_{3,}\s*$|\[\^|\[[^\]]*\]:)")
_CODE_OR_LINK = re.compile(r"`|://|www\.|\[\[|\]\(|[{}<>|=\\]")
# A sentence ends before a capital: "e.g. a file" is not cut after "e.g.".
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(]?[A-Z0-9])")
_WORD = re.compile(r"[^\W\d_]{2,}")
_EMPHASIS = re.compile(r"(?<!\w)[*_]+|[*_]+(?!\w)")


@dataclass(frozen=True)
class KnownItem:
    note_id: str
    text: str  # the query
    type: str  # "heading" | "sentence"


@dataclass
class KnownItems:
    """The queries and the corpus they are asked over (every note, titles left out)."""

    items: list[KnownItem]
    corpus: list[Note]

    def queries(self) -> list[EvalQuery]:
        return [EvalQuery(f"self-{i + 1:03d}", k.text, {k.note_id: 1}, k.type)
                for i, k in enumerate(self.items)]


@dataclass
class _Block:
    start: int
    end: int  # line numbers, end exclusive
    kind: str  # "heading" | "prose"
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.parts)


def read_notes(sources: Iterable[Source]) -> list[Note]:
    """Every note of ``sources`` that can be read (an unreadable one is skipped, as a
    sync skips it); ``SourceError`` when a source cannot be read at all."""
    notes = []
    for source in sources:
        for stub in source.scan():
            try:
                note = source.load(stub.note_id)
            except SourceWarning:
                continue
            if note is not None:
                notes.append(note)
    return notes


def pick(notes: list[Note], count: int = QUERIES, seed: str = SEED,
         source: str = "self", kinds: Sequence[str] = KINDS) -> KnownItems:
    """Up to ``count`` known items, at most one per note, and the corpus (notes renamed
    into the source ``source``). ``EvalError`` when the notes are too few to measure."""
    titles = {n.note_id: n.title for n in notes}
    untitled = {n.note_id: _untitled(n, source) for n in notes}
    with_text = [n for n in untitled.values() if _words(n.text) >= MIN_REST_WORDS]
    if len(with_text) < MIN_NOTES:
        raise EvalError(f"--self needs at least {MIN_NOTES} notes with some text to tell "
                        f"them apart, and found {len(with_text)}: point it at a bigger "
                        "folder (--notes DIR) or measure with a golden set (--golden FILE)")
    # Every note's words, space-separated, to tell a query held by one note only.
    flat = {note_id: _flat(n.text) for note_id, n in untitled.items()}
    everything = "\x00".join(flat.values())
    items: list[KnownItem] = []
    for note_id in sorted(untitled, key=lambda n: _digest(seed, n)):
        if len(items) >= count:
            break
        made = _known_item(untitled[note_id], titles[note_id], kinds,
                           _digest(seed, "choice", note_id), flat[note_id], everything)
        if made is not None:
            items.append(made[0])
            untitled[note_id] = made[1]
    if len(items) < min(count, MIN_QUERIES):
        wanted = " or a ".join(kinds)
        raise EvalError(f"only {len(items)} of {len(untitled)} notes hold a {wanted} "
                        f"to ask for (headings and titles of {HEADING_WORDS[0]}+ words, "
                        f"sentences of {SENTENCE_WORDS[0]}-{SENTENCE_WORDS[1]}, no code, no "
                        f"links, found in no other note); --self needs {MIN_QUERIES}: "
                        "measure with a golden set (--golden FILE) instead")
    return KnownItems(items, list(untitled.values()))


def _known_item(note: Note, title: str, kinds: Sequence[str], choice: int, flat: str,
                everything: str) -> tuple[KnownItem, Note] | None:
    """The note's query and the note without it, or None: nothing to ask for, or nothing
    left once it is cut out. ``kinds`` are tried in order."""
    lines = note.text.splitlines()
    blocks = _blocks(lines)
    for kind in kinds:
        candidates = _candidates(kind, title, blocks)
        for i in range(len(candidates)):
            block, raw = candidates[(choice + i) % len(candidates)]
            query = _clean(raw)
            needle = _flat(query)
            # In another note too, the query has two answers.
            if everything.count(needle) != flat.count(needle):
                continue
            if block is None:  # the title: out of the corpus already
                kept = lines
            elif block.kind == "heading":
                kept = lines[:block.start] + lines[block.end:]
            else:
                rest = " ".join(block.text.replace(raw, " ", 1).split())
                kept = lines[:block.start] + ([rest] if rest else []) + lines[block.end:]
            text = "\n".join(kept)
            if needle in _flat(text) or _words(text) < MIN_REST_WORDS:
                continue
            return KnownItem(note.note_id, query, kind), _with_text(note, text)
    return None


def _candidates(kind: str, title: str, blocks: list[_Block]
                ) -> list[tuple[_Block | None, str]]:
    if kind == "title":
        return [(None, title)] if _fits(_clean(title), HEADING_WORDS) else []
    if kind == "heading":
        return [(b, b.text) for b in blocks
                if b.kind == "heading" and _fits(_clean(b.text), HEADING_WORDS)]
    # The first sentence that fits: a note's lead says what it is about, as a person
    # remembers it; a sentence further on is as often "At this point I have none set."
    return [(b, s) for b in blocks if b.kind == "prose"
            for s in _sentences(b.text) if _sentence(_clean(s))][:1]


def _untitled(note: Note, source: str) -> Note:
    """The note as the corpus holds it: no title, aliases or path; the H1 that repeats
    its title dropped (the chunker leaves it out of headings only while it matches)."""
    lines = note.text.splitlines()
    for n, (line, code) in enumerate(iter_fenced(lines)):
        h = None if code else _HEADING.match(line)
        if h:
            if len(h.group(1)) == 1 and h.group(2).strip().lower() == note.title.strip().lower():
                lines = lines[:n] + lines[n + 1:]
            break
    return _with_text(replace(note, title="", aliases=(), path=None, source=source),
                      "\n".join(lines))


def _with_text(note: Note, text: str) -> Note:
    h = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    h.update("\x00".join(note.tags).encode())
    for a in note.attachments:
        h.update(b"\x01" + a.name.encode() + b"\x00" + "\x00".join(a.pages).encode())
    return replace(note, text=text, fingerprint=h.hexdigest()[:16])


def _blocks(lines: list[str]) -> list[_Block]:
    """Headings and prose (a paragraph, or one list item with its continuation lines),
    outside code fences; each with its line span."""
    blocks: list[_Block] = []
    current: _Block | None = None
    for n, (line, code) in enumerate(iter_fenced(lines)):
        if code or not line.strip() or _NOT_PROSE.match(line):
            current = None
            continue
        h = _HEADING.match(line)
        if h:
            current = None
            blocks.append(_Block(n, n + 1, "heading", [h.group(2).strip()]))
            continue
        unquoted = _QUOTE.sub("", line)
        content = _ITEM.sub("", unquoted).strip()
        if current is None or _ITEM.match(unquoted):
            current = _Block(n, n + 1, "prose", [content])
            blocks.append(current)
        else:
            current.end = n + 1
            current.parts.append(content)
    return blocks


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _sentence(text: str) -> bool:
    """A whole sentence: it starts with a capital (not the tail of a line cut by code) and
    does not lead into a list or code block with a colon."""
    return text[:1].isupper() and not text.endswith(":") and _fits(text, SENTENCE_WORDS)


def _fits(query: str, words: tuple[int, int]) -> bool:
    tokens = query.split()
    if not words[0] <= len(tokens) <= words[1] or _CODE_OR_LINK.search(query):
        return False
    # Mostly words, not paths, commands or numbers.
    return len(_WORD.findall(query)) >= max(words[0], int(0.8 * len(tokens)))


def _clean(text: str) -> str:
    """The query as a person would type it: emphasis marks and list markers gone."""
    return " ".join(_EMPHASIS.sub("", text).split())


def _flat(text: str) -> str:
    """Lower-cased words between spaces, to find a query in a text whatever its markup
    or line breaks."""
    return " " + " ".join(re.findall(r"\w+", text.lower())) + " "


def _words(text: str) -> int:
    return len(_WORD.findall(text))


def _digest(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x00".join(parts).encode()).digest()[:8], "big")


class NotesSource:
    """Notes held in memory as a ``Source`` (the corpus of ``pick``; a BEIR corpus is one,
    ``corpora.BeirSource``)."""

    kind = "self"

    def __init__(self, name: str, notes: Iterable[Note]) -> None:
        from notewell.config import SourceConfig

        self.config = SourceConfig(name, "self")
        self.notes = {n.note_id: n for n in notes}

    @property
    def name(self) -> str:
        return self.config.name

    def scan(self) -> Iterator[NoteStub]:
        for note in self.notes.values():
            yield NoteStub(note.note_id, note.fingerprint)

    def load(self, note_id: str) -> Note | None:
        return self.notes.get(note_id)

    def passage_url(self, note: Note, anchor: str | None, line: int | None = None) -> str:
        return note.url

    def new_note_url(self, title: str, tags: tuple[str, ...] = ()) -> str | None:
        return None

    def change_token(self) -> str | None:
        return None

    def watch_paths(self) -> list[str]:
        return []

"""Splitting a Markdown note into passages that follow the author's structure.

A note is cut at its headings (never inside fenced code), each passage keeps its heading
path ("Title > Section > Subsection"), tiny sections are merged into their neighbour, long
ones are packed paragraph by paragraph and, when a single paragraph is still too long, cut
into overlapping windows. Sizes are counted in word pieces (runs of letters/digits and
single punctuation marks), which is how BERT's pre-tokenizer splits text before WordPiece;
see ``ChunkSettings`` for the measured budget. A Chinese, Japanese or Korean character
counts as a piece (``index.cjk``), and a sentence ends at 。！？ too, so text without
spaces is cut to the same budget.

No passage is longer than ``notes.MAX_PASSAGE_CHARS``, whatever the note: a run of
base64 (a pasted data-URI image) or any other long run without spaces is read as
``[data]`` before cutting, neither embedded nor indexed as words, and a word still over
the bound is cut in pieces. Every step runs in linear time on any text (issue 36).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from notewell.index.cjk import CJK_CHARS
from notewell.notes import MAX_HEADING_CHARS, MAX_PASSAGE_CHARS, Attachment, Chunk, Note, cut
from notewell.sources.markdown import path_alias
from notewell.sources.markdown_text import atx_heading, iter_fenced

# A Chinese, Japanese or Korean character is a piece of its own: those scripts put no
# spaces between words, and a model reads about one token per character or two.
_PIECE = re.compile(rf"[{CJK_CHARS}]|(?:(?![{CJK_CHARS}])\w)+|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])(?=\S)")
# Base64 and hex runs (data URIs, keys, hashes dumped in bulk): only from a run's start, so
# each run is read once; so is any run of 1,000 characters without a space.
_BLOB = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{200,}")
_LONG_WORD = re.compile(r"(?<!\S)\S{1000,}")
BLOB_MARK = "[data]"


@dataclass(frozen=True)
class ChunkSettings:
    """Budget in word pieces. all-MiniLM-L6-v2 reads 256 tokens; WordPiece turns a piece
    into about 1.2 tokens on prose and up to 1.5 on code, and the title and heading path
    come first, so 170 pieces keeps nearly every chunk inside the window (see README).

    ``version`` 2 adds a title vector per note (``title_text``); an index cut by
    version 1 is re-chunked beside on upgrade, embedding only the titles. 3 reads blobs
    as ``[data]`` and bounds passages and headings in characters (``drop_blobs``): only
    the notes that hold such things get new passages."""

    max_pieces: int = 170
    min_pieces: int = 40
    overlap_pieces: int = 30
    version: int = 3

    @property
    def titles(self) -> bool:
        """Whether each note also gets a vector of its title alone (from version 2)."""
        return self.version >= 2

    def fingerprint(self) -> str:
        return ",".join(f"{k}={v}" for k, v in asdict(self).items())

    @classmethod
    def for_tokens(cls, max_tokens: int) -> ChunkSettings:
        """The budget for a model that reads ``max_tokens`` tokens: the measured one for
        the shipped model's 256, scaled in proportion for any other."""
        if max_tokens == REFERENCE_TOKENS:
            return cls()
        base, scale = cls(), max_tokens / REFERENCE_TOKENS
        top = max(16, int(base.max_pieces * scale))
        return cls(max_pieces=top, min_pieces=min(base.min_pieces, top // 4),
                   overlap_pieces=max(2, int(base.overlap_pieces * scale)))


REFERENCE_TOKENS = 256  # the tokens ``ChunkSettings``'s defaults were measured for


def count_pieces(text: str) -> int:
    return len(_PIECE.findall(text))


def drop_blobs(text: str) -> str:
    """``text`` with each run of 200+ base64/hex characters, and each run of 1,000+
    characters without a space, as ``[data]``: a pasted image is no words to find, and
    one such run made a 7.9 MB passage (issue 36)."""
    if len(text) < 200:
        return text
    return _LONG_WORD.sub(BLOB_MARK, _BLOB.sub(BLOB_MARK, text))


def _bounded(body: str) -> list[str]:
    """``body`` in parts of at most ``MAX_PASSAGE_CHARS``, cut at a line break or a space
    in the last quarter of the bound when there is one, else anywhere."""
    if len(body) <= MAX_PASSAGE_CHARS:
        return [body]
    parts, at, top = [], 0, MAX_PASSAGE_CHARS
    while len(body) - at > top:
        end = max(body.rfind("\n", at, at + top), body.rfind(" ", at, at + top))
        end = end if end >= at + top * 3 // 4 else at + top
        part = body[at:end].strip()
        if part:
            parts.append(part)
        at = end
    if body[at:].strip():
        parts.append(body[at:].strip())
    return parts


@dataclass
class _Section:
    path: tuple[str, ...]
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()


def split_sections(text: str, title: str = "") -> list[_Section]:
    """Cut at ATX headings outside code fences; each section knows its heading path."""
    sections = [_Section((), [])]
    heads = {n: path for n, _, path in _heading_lines(text, title, keep_title=True)}
    for n, line in enumerate(text.splitlines()):
        if n not in heads:
            sections[-1].lines.append(line)
        elif heads[n] is not None:  # None: the H1 that repeats the title, left out
            sections.append(_Section(heads[n], [line]))
    return [s for s in sections if s.text]


def _heading_lines(text: str, title: str = "", keep_title: bool = False
                   ) -> list[tuple[int, int, tuple[str, ...] | None]]:
    """(line number, level, heading path) of each ATX heading outside code fences. The
    first H1, when it repeats the note's title, adds nothing to the paths: it is left out,
    or with ``keep_title`` listed with the path None."""
    found: list[tuple[int, int, tuple[str, ...] | None]] = []
    stack: list[tuple[int, str]] = []
    first_heading = True
    for n, (line, in_code) in enumerate(iter_fenced(text.splitlines())):
        # No indentation, every trailing "#" dropped: the heading paths indexes hold.
        h = None if in_code else atx_heading(line, indent=0, closing=False)
        if not h:
            continue
        level, heading = h[0], cut(h[1].strip(), MAX_HEADING_CHARS)
        if first_heading and level == 1 and heading.lower() == title.strip().lower():
            first_heading = False
            if keep_title:
                found.append((n, level, None))
            continue
        first_heading = False
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        found.append((n, level, tuple(t for _, t in stack)))
    return found


def heading_paths(text: str, title: str = "") -> list[str]:
    """Every heading of a note as a path (``Setup > Linux``), in order."""
    return [" > ".join(path) for _, _, path in _heading_lines(text, title)]


def section(text: str, heading: str, title: str = "") -> str | None:
    """The part of ``text`` under ``heading``, its heading line and subsections included,
    up to the next heading of the same or a higher level; None when no heading matches.
    ``heading`` is a heading's text or its path as hits show it (``Setup > Linux``),
    matched without regard to case or spacing; the first match wins."""
    def norm(s: str) -> str:
        return " ".join(s.split()).lower()

    want = tuple(norm(p) for p in heading.split(">"))
    lines = text.splitlines()
    marks = _heading_lines(text, title)
    for i, (n, level, path) in enumerate(marks):
        have = tuple(norm(p) for p in path)
        if have == want or (len(want) == 1 and have[-1] == want[0]):
            end = next((m for m, lv, _ in marks[i + 1:] if lv <= level), len(lines))
            return "\n".join(lines[n:end]).strip("\n")
    return None


def chunk_note(title: str, text: str, settings: ChunkSettings | None = None,
               first_line: int = 1) -> list[Chunk]:
    """Passages of a note, in order, each with the line it starts on (``first_line``: the
    line of the file ``text`` starts on). An empty note still yields its title as one
    chunk."""
    settings = settings or ChunkSettings()
    if settings.version >= 3:
        text = drop_blobs(text)
    sections = split_sections(text, title)
    if not sections:
        return [Chunk(0, (), title.strip())] if title.strip() else []
    pieces: list[tuple[tuple[str, ...], str]] = []
    for path, body in _merge_small(sections, settings):
        for part in _split_long(body, settings):
            pieces.extend((path, p) for p in _bounded(part))
    lines = start_lines(text, [body for _, body in pieces], first_line)
    return [Chunk(i, path, body, path[-1] if path else None, line) for i, ((path, body), line)
            in enumerate(zip(pieces, lines))]


def start_lines(text: str, bodies: list[str], first_line: int = 1) -> list[int | None]:
    """The line of ``text`` (counted from ``first_line``) each passage starts on: its first
    line found in the text, after where the one before starts (passages come in order;
    windows overlap), else its first word; None when neither is there."""
    out: list[int | None] = []
    at = 0
    for body in bodies:
        head = body.lstrip().split("\n", 1)[0].strip()
        found = text.find(head, at) if head else -1
        if found < 0 and head.split():
            found = text.find(head.split()[0], at)
        if found < 0:
            out.append(None)
            continue
        out.append(first_line + text.count("\n", 0, found))
        at = found
    return out


def title_text(note: Note, settings: ChunkSettings | None = None) -> str | None:
    """What the model reads for the note's title vector (None: no title, or a chunker
    without title vectors): its title, and under it, for a note from a folder, its path
    there, which the keyword side searches with the title too (``path_alias``: a TIL
    note's topic folder, a Dendron page's dotted name). A vector only: never a passage
    shown, never a keyword row."""
    if not (settings or ChunkSettings()).titles:
        return None
    return "\n".join(p for p in (note.title.strip(), path_alias(note) or "") if p) or None


def note_chunks(note: Note, settings: ChunkSettings | None = None
                ) -> list[tuple[Chunk, str | None]]:
    """The note's passages, then its attachments' (each with the link Enter opens: None
    for the note's own). An attachment's passages sit under its name in the heading path,
    a page of several under "page N", so they never merge with the note's text."""
    settings = settings or ChunkSettings()
    out: list[tuple[Chunk, str | None]] = []
    if note.text.strip() or not note.attachments:  # a loose PDF is its pages only
        out = [(c, None) for c in chunk_note(note.title, note.text, settings, note.body_line)]
    for attachment in note.attachments:
        for path, body in attachment_passages(attachment, settings):
            out.append((Chunk(len(out), path, body, None), attachment.url))
    return out


def attachment_passages(attachment: Attachment, settings: ChunkSettings
                        ) -> list[tuple[tuple[str, ...], str]]:
    """(heading path, passage) of one attachment, chunked page by page."""
    pages = [(drop_blobs(p) if settings.version >= 3 else p).strip() for p in attachment.pages]
    several = sum(1 for p in pages if p) > 1
    out = []
    for number, text in enumerate(pages, 1):
        if not text:
            continue
        path = ((attachment.heading, f"page {number}") if several
                else (attachment.heading,))
        out.extend((path, p) for part in _split_long(text, settings) for p in _bounded(part))
    return out


def _merge_small(sections: list[_Section], s: ChunkSettings) -> list[tuple[tuple[str, ...], str]]:
    """Fold a section under ``min_pieces`` into the next one (or the previous, at the end).

    The merged passage keeps the outer heading path, and the inner heading lines stay in
    its text so their words remain searchable."""
    out: list[tuple[tuple[str, ...], str, int]] = []
    for sec in sections:
        body, n = sec.text, count_pieces(sec.text)
        if out:
            path, prev, pn = out[-1]
            if pn < s.min_pieces and pn + n <= s.max_pieces:
                out[-1] = (_common_path(path, sec.path), prev + "\n\n" + body, pn + n)
                continue
        out.append((sec.path, body, n))
    if len(out) > 1 and out[-1][2] < s.min_pieces and out[-2][2] + out[-1][2] <= s.max_pieces:
        path, body, n = out.pop()
        ppath, pbody, pn = out[-1]
        out[-1] = (_common_path(ppath, path), pbody + "\n\n" + body, pn + n)
    return [(path, body) for path, body, _ in out]


def _common_path(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    common = []
    for x, y in zip(a, b):
        if x != y:
            break
        common.append(x)
    # A section merged with its own child keeps the parent's path; siblings keep the parent.
    return tuple(common) if common or not a else a


def _split_long(body: str, s: ChunkSettings) -> list[str]:
    """Pack paragraphs up to ``max_pieces``; cut an oversized paragraph into windows."""
    if count_pieces(body) <= s.max_pieces:
        return [body]
    units: list[str] = []
    for para in _paragraphs(body):
        if count_pieces(para) <= s.max_pieces:
            units.append(para)
        else:
            units.extend(_windows(para, s))
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for unit in units:
        n = count_pieces(unit)
        if current and size + n > s.max_pieces:
            chunks.append("\n\n".join(current))
            tail = _tail(_SENTENCE_END.split(current[-1]), s.overlap_pieces)
            current, size = ([tail], count_pieces(tail)) if tail else ([], 0)
            if size + n > s.max_pieces:
                current, size = [], 0
        current.append(unit)
        size += n
    if current:
        chunks.append("\n\n".join(current))
    return chunks


def _paragraphs(body: str) -> list[str]:
    """Blank-line separated blocks, with a fenced code block kept whole."""
    paras: list[str] = []
    current: list[str] = []
    for line, in_code in iter_fenced(body.splitlines()):
        if not line.strip() and not in_code:
            if current:
                paras.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        paras.append("\n".join(current))
    return paras


def _windows(text: str, s: ChunkSettings) -> list[str]:
    """Windows of whole sentences (a sentence over budget is cut at words), each starting
    with the last ``overlap_pieces`` of the one before, so no thought is cut in half."""
    units: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        if count_pieces(sentence) > s.max_pieces // 2:
            units.extend(_word_runs(sentence, max(1, s.overlap_pieces // 2)))
        else:
            units.append(sentence)
    out, current, size = [], [], 0
    for unit in units:
        n = count_pieces(unit)
        if current and size + n > s.max_pieces:
            out.append(" ".join(current))
            tail = _tail(" ".join(current).split(), s.overlap_pieces)
            current, size = [tail], count_pieces(tail)
        current.append(unit)
        size += n
    if current:
        out.append(" ".join(current))
    return out


def _word_runs(text: str, pieces: int) -> list[str]:
    runs, current, size = [], [], 0
    for word in text.split():
        n = count_pieces(word)
        if current and size + n > pieces:
            runs.append(" ".join(current))
            current, size = [], 0
        current.append(word)
        size += n
    if current:
        runs.append(" ".join(current))
    return runs


def _tail(parts: list[str], pieces: int) -> str:
    """The last of ``parts`` (a text's sentences, or its words) that fit in ``pieces``
    together, joined by spaces: the overlap between chunks."""
    kept: list[str] = []
    size = 0
    for part in reversed(parts):
        size += count_pieces(part)
        if size > pieces:
            break
        kept.insert(0, part)
    return " ".join(kept)

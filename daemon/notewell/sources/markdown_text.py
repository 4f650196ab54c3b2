"""Markdown as notes write it, read the same way by every source that holds Markdown
(folders, Obsidian vaults, Bear): a note file's text decoded, the first heading as a
title, fenced code, comments, inline ``#tags`` outside code and headings, and wikilinks
rendered as their visible text. Every pattern here runs in time linear in the text
(``tests/test_hostile_notes.py``). May import ``sources.base`` and ``sources.frontmatter``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from notewell.sources.base import SourceWarning
from notewell.sources.frontmatter import meta_list


def decode_note(raw: bytes, path: str) -> str:
    if b"\x00" in raw[:8192] and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise SourceWarning(f"{path}: looks binary (NUL bytes), not a text note; skipped")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Old notes saved as Latin-1/Windows-1252 are still worth indexing.
        return raw.decode("cp1252", errors="replace")


_SETEXT_H1 = re.compile(r"^[ \t]{0,3}=+[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
# Lines that may stand above a note's title without being its content: a comment, an
# image, an embed, or tags only (``is_tag_line``: as a regex, nested repeats that slow
# down on a long line).
_PREAMBLE = re.compile(r"<!--.*-->|!\[[^\]]*\]\([^)]*\)|!\[\[[^\]]*\]\]")
_TAG_WORD = re.compile(r"\w[\w/\-]*")
TITLE_SEARCH_LINES = 12


def first_heading(body: str) -> str | None:
    """The H1 that titles a note: the first heading, if it is a level-1 heading (ATX or
    Setext) standing before any prose, after at most blank lines, comments, images and
    tag lines. A note that opens with prose, or whose first heading is an H2, has none:
    its H1s further down are section headings."""
    lines = body.splitlines()
    for i, line in enumerate(lines[:TITLE_SEARCH_LINES]):
        if not line.strip():
            continue
        if _FENCE.match(line):
            return None
        h = atx_heading(line)
        if h:
            return (h[1].strip() or None) if h[0] == 1 else None
        preamble = _is_preamble(line)
        if i + 1 < len(lines) and _SETEXT_H1.match(lines[i + 1]) and not preamble:
            return line.strip()
        if preamble:
            continue
        return None
    return None


def _is_preamble(line: str) -> bool:
    line = line.strip()
    return bool(_PREAMBLE.fullmatch(line)) or is_tag_line(line)


def is_tag_line(line: str) -> bool:
    """Whether ``line`` is nothing but ``#tags`` (``#a #b/c``, ``#a#b``)."""
    words = line.split()
    return bool(words) and all(
        w.startswith("#") and all(_TAG_WORD.fullmatch(p) for p in w[1:].split("#"))
        for w in words)


def atx_heading(line: str, indent: int = 3, closing: bool = True) -> tuple[int, str] | None:
    """(level, text) of an ATX heading line, else None: up to ``indent`` spaces, 1-6 ``#``,
    a space, the text; with ``closing`` a closing ``#`` run after a space is dropped
    (CommonMark), without it every trailing ``#`` (the chunker's older reading, kept so
    its heading paths stay). A scan, not a regex: a lazy ``(.+?)`` before an optional
    tail is quadratic on a long line of spaces."""
    if line[:1] not in ("#", " ", "\t"):  # most lines: no copy made
        return None
    start = len(line) - len(line.lstrip(" \t"))
    if start > indent or line[start:start + 1] != "#":
        return None
    hashes = len(line) - start - len(line[start:].lstrip("#"))
    mark = start + hashes
    if hashes > 6 or line[mark:mark + 1] not in (" ", "\t"):
        return None
    text_at = len(line) - len(line[mark:].lstrip(" \t"))
    if text_at == len(line):  # nothing after the spaces: the text is the last of them
        return (hashes, line[-1]) if text_at - mark >= 2 else None
    if not closing:
        end = max(len(line.rstrip(" \t#")), text_at + 1)
        return hashes, line[text_at:end]
    body = line.rstrip(" \t")
    end = len(body)
    bare = body.rstrip("#")
    if len(bare) < end and bare[-1:] in (" ", "\t"):
        end = max(len(bare.rstrip(" \t")), text_at)
        if end == text_at:
            end = len(body)
    return hashes, line[text_at:end]


def iter_fenced(lines: Iterable[str], fences: re.Pattern[str] = _FENCE
                ) -> Iterator[tuple[str, bool]]:
    """Each line with whether it is code: inside a fenced block, or a fence line itself.
    A fence closes only with the same character at least as many times (CommonMark)."""
    fence: str | None = None
    for line in lines:
        m = fences.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker[0] * len(marker)
            elif marker.startswith(fence):
                fence = None
            yield line, True
            continue
        yield line, fence is not None


_INLINE_CODE = re.compile(r"`[^`\n]*`")
# For tags, a fence at any indentation: one in a numbered list's item is indented four
# spaces (the Dendron vault's CSS examples, whose colours were read as tags).
_ANY_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
# After whitespace, a line start or an opening parenthesis, but not "](" (a link to an
# anchor, ``[see](#setup)``, is no tag).
_TAG = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[^\]]\())#([\w][\w/\-]*)", re.M)
_HTML_TAG = re.compile(r"<[A-Za-z/][^<>]*>")  # style="color: #ccc" holds no tags


def strip_comments(text: str, marks: tuple[tuple[str, str], ...] = (("<!--", "-->"),
                                                                    ("%%", "%%")),
                   repl: str = " ") -> str:
    """``text`` with each closed comment (HTML ``<!-- -->``, Obsidian ``%% %%``) replaced
    by ``repl``, the first opening mark winning (as ``<!--.*?-->|%%.*?%%`` with re.S, but
    in linear time: an opening mark left unclosed ends the search for its kind, since no
    later one can close either)."""
    out: list[str] = []
    at = 0
    found = {o: text.find(o) for o, _ in marks}
    closes = dict(marks)
    while True:
        live = [(pos, o) for o, pos in found.items() if pos >= 0]
        if not live:
            break
        pos, opener = min(live)
        end = text.find(closes[opener], pos + len(opener))
        if end < 0:
            found[opener] = -1
            continue
        end += len(closes[opener])
        out += (text[at:pos], repl)
        at = end
        found = {o: (p if p >= end else text.find(o, end)) for o, p in found.items()
                 if p >= 0}
    out.append(text[at:])
    return "".join(out)


def inline_tags(body: str) -> list[str]:
    """``#tag`` and ``#nested/tag`` outside code (fenced blocks, inline code) and heading
    lines (``# Using #find_or_create_by`` names a method); pure numbers (``#1``) are not
    tags."""
    if "#" not in body:
        return []
    lines = body.splitlines()
    if "```" in body or "~~~" in body:
        lines = [line for line, code in iter_fenced(lines, _ANY_FENCE) if not code]
    kept = [line for line in lines if not atx_heading(line)]
    text = _INLINE_CODE.sub(" ", "\n".join(kept))
    text = _HTML_TAG.sub(" ", strip_comments(text))
    tags = []
    for m in _TAG.finditer(text):
        tag = m.group(1).rstrip("/-")
        if tag and not tag.replace("/", "").isdigit():
            tags.append(tag)
    return tags


def _dedupe_tags(tags: list[str]) -> list[str]:
    """Tags are case-insensitive (``#Work`` is ``#work``); the first spelling wins."""
    seen: dict[str, str] = {}
    for t in tags:
        seen.setdefault(t.lower(), t)
    return list(seen.values())


def collect_tags(meta: dict, body: str) -> list[str]:
    return _dedupe_tags(meta_list(meta, "tags", "tag") + inline_tags(body))


# No run crosses a "[": the start of the next link (a link's names hold no brackets).
_EMBED = re.compile(r"!\[\[[^\[\]]*\]\]")
_WIKILINK = re.compile(r"\[\[([^\[\]|#]*)((?:#[^\[\]|]*)?)(?:\\?\|([^\[\]]*))?\]\]")
# Dendron writes [[label|target]], the reverse of Obsidian's [[target|label]].
_URL_TARGET = re.compile(r"[a-z][\w+.-]*://\S*")
_NAME_RUN = re.compile(r"[\w.-]+")
_ANCHOR_RUN = re.compile(r"[\w-]+")


def _is_link_target(text: str) -> bool:
    r"""A URL, or a Dendron note name with an anchor (``dendron.topic#setup``). A scan:
    ``[\w.-]+\.[\w.-]+#`` as a regex is quadratic on a long ``a.a.a.a``."""
    if _URL_TARGET.fullmatch(text):
        return True
    name, hash_, anchor = text.partition("#")
    return bool(hash_ and _NAME_RUN.fullmatch(name) and "." in name[1:-1]
                and _ANCHOR_RUN.fullmatch(anchor))


def render_links(body: str) -> str:
    """Wikilinks as the text a reader sees; embeds (``![[...]]``) dropped.

    ``[[Note]]`` reads "Note", ``[[Note|shown]]`` reads "shown", ``[[Note#A#B]]`` reads
    "Note > A > B" (as Obsidian shows it), ``[[Note#^block]]`` reads "Note"."""

    def visible(m: re.Match[str]) -> str:
        target, anchor, alias = m.group(1).strip().rstrip("\\"), m.group(2), m.group(3)
        if alias and alias.strip() and not (_is_link_target(alias.strip()) and target):
            return alias.strip()
        headings = [h.strip() for h in anchor.split("#") if h.strip()
                    and not h.strip().startswith("^")]
        return " > ".join(p for p in (target, *headings) if p)

    return _WIKILINK.sub(visible, _EMBED.sub("", body))

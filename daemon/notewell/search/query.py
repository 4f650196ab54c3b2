"""Reading what the user typed: filters (``#tag``, ``in:source``, dates: ``after:``,
``before:``, ``since:``, ``created:``) and the words to search.

A launcher has only a text box, so filters live in the query. This module is pure string
work, shared by the daemon, the CLI and the evaluation."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from notewell.index import cjk
from notewell.notes import nfc
from notewell.wire.protocol import MAX_QUERY_CHARS

_WORD = re.compile(r"\w+", re.UNICODE)
_FILTER = re.compile(r"(?:(?<=\s)|^)(#[\w][\w/\-]*|in:[\w.\-]+|similar:\S+"
                     r"|(?i:after|before|since|created):\S+)(?=\s|$)")
# Typed date filters: ``after:X`` and ``since:X`` keep notes modified from X's start on,
# ``before:X`` those modified before it, ``created:X`` those created within X's span
# (``search.filters.with_dates`` reads X with ``search.dates``).
DATE_FILTERS = ("after", "before", "since", "created")


@dataclass(frozen=True)
class Query:
    raw: str
    text: str  # the query without its filters
    tags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    similar_to: str | None = None
    words: tuple[str, ...] = field(default=())
    # The last word is still being typed when the query does not end with a space.
    partial: bool = False
    # Modified in [modified_after, modified_before), Unix seconds: given as arguments
    # (``search.dates``), never typed.
    modified_after: float | None = None
    modified_before: float | None = None
    # The date filters as typed, (name, text) in order: read into the bounds above and
    # the created ones below once a clock is at hand (``filters.with_dates``).
    dates: tuple[tuple[str, str], ...] = ()
    created_after: float | None = None
    created_before: float | None = None
    # Emoji and other pictographs in the text ("🍞"). FTS5's unicode61 reads them as
    # separators and the shipped model as one unknown token, so a query of nothing else
    # searches for what they are named ("bread": ``symbol_words``).
    symbols: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.words and not self.symbols and self.similar_to is None

    @property
    def dated(self) -> bool:
        """A date filter is set (typed or given)."""
        return bool(self.dates) or any(v is not None for v in (
            self.modified_after, self.modified_before, self.created_after,
            self.created_before))

    @property
    def filtered(self) -> bool:
        return bool(self.tags or self.sources) or self.dated


def parse(raw: str) -> Query:
    raw = clean(raw)
    tags, sources, similar, dates = [], [], None, []
    for m in _FILTER.finditer(raw):
        token = m.group(1)
        name, _, value = token.partition(":")
        if token.startswith("#"):
            tags.append(token[1:].lower().rstrip("/"))
        elif name.lower() == "in":
            sources.append(value)
        elif name.lower() in DATE_FILTERS:
            dates.append((name.lower(), value))
        else:
            similar = token[len("similar:"):]
    text = " ".join(_FILTER.sub(" ", raw).split())
    words = _words(text)
    partial = bool(words) and not raw.endswith((" ", "\t")) and bool(_WORD.search(raw[-1:]))
    shown = symbols(text)
    if not words and shown:
        text = symbol_words(shown)
        words = _words(text)
    return Query(raw, text, tuple(tags), tuple(sources), similar, words, partial,
                 dates=tuple(dates), symbols=shown)


def symbols(text: str) -> tuple[str, ...]:
    """The pictographs of ``text`` (Unicode "Symbol, other": emoji, ✓, ♥), in order;
    not a flag's letters (REGIONAL INDICATOR SYMBOL LETTER F names no thing)."""
    return tuple(ch for ch in text if not ch.isascii() and unicodedata.category(ch) == "So"
                 and not 0x1F1E6 <= ord(ch) <= 0x1F1FF)


def symbol_words(shown: tuple[str, ...]) -> str:
    """What the pictographs are named, once each: "🔥🔥" reads "fire", "☕" "hot beverage"."""
    names = (unicodedata.name(ch, "").lower() for ch in dict.fromkeys(shown))
    return " ".join(n for n in names if n)


_TYPING_TAG = re.compile(r"#([\w/\-]*)")


def typing_tag(raw: str) -> str | None:
    """The part after ``#`` when the whole query is one tag still being typed (``#`` or
    ``#wor``, no space after it), else None: the launcher then lists the tags."""
    m = _TYPING_TAG.fullmatch(clean(raw).lstrip())
    return m.group(1).lower() if m else None


def literal(text: str) -> Query:
    """A finished query read as plain text: no filters, no word still being typed (for
    benchmark queries, which may contain ``#`` or ``in:`` as ordinary words)."""
    text = " ".join(clean(text).split())
    return Query(text, text, words=_words(text))


def _words(text: str) -> tuple[str, ...]:
    """The words to search for; a run of Chinese, Japanese or Korean characters, written
    without spaces, is its overlapping character pairs (``index.cjk``), each a word of its
    own, so a query need not appear verbatim (``红烧肉怎么做`` finds ``红烧肉``)."""
    words = _WORD.findall(text.lower())
    if not any(cjk.has_cjk(w) for w in words):
        return tuple(words)
    return tuple(p for w in words for p in cjk.segment_query(w).split())


def clean(raw: str) -> str:
    """Control characters out, length capped, composed (NFC, as the index is: Alfred
    hands scripts decomposed text): what reaches FTS5 and the model is text."""
    raw = nfc(raw.encode("utf-8", "replace").decode("utf-8"))
    raw = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", " ", raw)
    return raw[:MAX_QUERY_CHARS]


def fts_terms(words: tuple[str, ...], partial: bool, max_terms: int = 32) -> list[str]:
    """One FTS5 phrase per distinct word: a quoted string (so ``NEAR``, ``AND``, ``*`` and
    ``-`` are searched as text, never read as syntax), the last one a prefix while it is
    still being typed (from two letters on: one letter would match half the index)."""
    terms = list(dict.fromkeys(w for w in words if w))[:max_terms]
    typing = words[-1] if partial and words and len(words[-1]) >= 2 else None
    # A CJK word is a character pair (``parse``); one CJK character, a prefix of pairs.
    return [f'"{w}"*' if w == typing or cjk.is_single(w) else f'"{w}"' for w in terms]

"""Where a hit matched: the spans of its passage the launchers mark.

A span is ``[start, end)`` in characters of the text it was found in. Keyword matches
are the passage's words as FTS5 itself reads them (``index.terms``: Porter stems,
diacritics folded), so what is marked is what BM25 matched: a term of a query word
("running" for "runs"), one starting with the word being typed ("postgres" while
"postg" is typed), a typo's correction ("recieve" marks "receive"); Chinese, Japanese
and Korean pairs (``index.cjk``) are found as the characters they are. A passage that
holds none of them (found by meaning alone, or by its note's title) gets one span: its
sentence sharing the most word beginnings with the query (``nearest_sentence``), else
its first; no model call (embedding each hit's sentences would cost a batch of model
calls per keystroke).

Cost: an ASCII passage tokenizes only its words that start like a query term (found with
``str.find``; a stem keeps its word's first letters but the last), each word once per
thread (``Reads.word_terms``), others whole, kept by text; a snippet's spans are the
passage's marked words found again in it. Typing shows the same hits keystroke after
keystroke, so those finds and the nearest sentences are kept by text and words
(bench/README.md, "The keystroke's new costs").

Owns ``SpanFinder``, ``marked`` (a hit's spans) and ``more_passages`` (a note's next best
passages, for JSON clients). May import ``notes``, ``index.cjk``, ``search.terms``,
``search.presentation`` and the read interface (``index.reads.Reads``); no SQL: a passage's
terms come from its tokenizer (``Reads.located_terms``, ``Reads.word_terms``).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable

from notewell.index.cjk import has_cjk
from notewell.index.reads import Reads
from notewell.notes import Hit
from notewell.search.presentation import clean_passage
from notewell.search.terms import QueryTerm

Span = tuple[int, int]
Located = Callable[[str], list[tuple[int, int, str]]]  # (byte start, byte end, term)
WordTerms = Callable[[str], tuple[tuple[int, int, str], ...]]  # one word's, kept

_SENTENCE_BREAK = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_WORD_AT = re.compile(r"[a-z0-9_]+")
_ROOT = 4  # the letters of a word's beginning that ``nearest_sentence`` compares


class _Terms:
    """A passage's terms with where each stands (UTF-8 byte offsets, as FTS5 gives them),
    and the terms sorted (a prefix's completions are one run of them)."""

    __slots__ = ("at", "ordered", "raw")

    def __init__(self, at: dict[str, list[Span]], raw: bytes | None) -> None:
        self.at = at
        self.ordered = sorted(at)
        self.raw = raw  # the text's bytes when they are not its characters (not ASCII)

    def starting_with(self, prefix: str) -> list[str]:
        lo = bisect.bisect_left(self.ordered, prefix)
        hi = lo
        while hi < len(self.ordered) and self.ordered[hi].startswith(prefix):
            hi += 1
        return self.ordered[lo:hi]

    def in_characters(self, spans: list[Span]) -> list[Span]:
        """Byte spans as character spans (only the few that matched are converted)."""
        if self.raw is None or not spans:
            return spans
        raw, out = self.raw, []
        byte_at = char_at = 0
        for start, end in sorted(spans):
            char_at += len(raw[byte_at:start].decode("utf-8", "replace"))
            width = len(raw[start:end].decode("utf-8", "replace"))
            out.append((char_at, char_at + width))
            char_at, byte_at = char_at + width, end
        return out


@functools.lru_cache(maxsize=1024)
def _terms_at(text: str, located: Located) -> _Terms:
    """The terms of ``text``. Typing shows the same passages keystroke after keystroke:
    kept by text (an edited passage is another key)."""
    found: dict[str, list[Span]] = {}
    for start, end, term in located(text):
        at = found.get(term)
        if at is None:
            found[term] = [(start, end)]
        else:
            at.append((start, end))
    return _Terms(found, None if text.isascii() else text.encode("utf-8", "replace"))


@functools.lru_cache(maxsize=1024)
def sentences(text: str) -> tuple[Span, ...]:
    """The spans of ``text``'s sentences (cut as snippets cut them), whitespace trimmed."""
    out, at = [], 0
    for m in [*_SENTENCE_BREAK.finditer(text), None]:
        end = m.start() if m else len(text)
        part = text[at:end]
        lead = len(part) - len(part.lstrip())
        if part.strip():
            out.append((at + lead, at + len(part.rstrip())))
        at = m.end() if m else at
    return tuple(out)


class SpanFinder:
    """The spans of the query's words in a passage; built once per query from its terms
    (``search.terms.query_terms``, corrections included) and its ``words``."""

    def __init__(self, found: Iterable[QueryTerm], words: tuple[str, ...] = ()) -> None:
        self.exact: set[str] = set()
        prefixes: list[str] = []
        self.cjk: list[str] = []  # pairs (or one character) found as written
        for t in found:
            if has_cjk(t.word):
                self.cjk.append(t.word)
                continue
            if t.prefix:
                self.exact.update(t.tokens[:-1])
                prefixes.append(t.tokens[-1])
            else:
                self.exact.update(t.tokens)
        self.prefixes = list(dict.fromkeys(prefixes))
        # A term's first letters are its word's (stemming only changes endings): an ASCII
        # passage holding none of them holds no term, and is not tokenized at all.
        # In ASCII text, only the words that start like a term are worth tokenizing: a
        # stem is its word's start but for its last letter ("day" is "dai").
        self.needles = tuple(sorted({t if len(t) <= 2 else t[:min(3, len(t) - 1)]
                                     for t in (*self.exact, *self.prefixes)
                                     if t.isascii() and t}))
        self.starts = tuple(self.prefixes)
        self.words = words
        # Word beginnings for ``nearest_sentence``: "organise" and "organization" share one.
        self.roots = tuple(sorted({w[:_ROOT] for w in words if len(w) >= 3
                                   and not has_cjk(w)}))

    def keyword_spans(self, text: str, reads: Reads) -> list[Span]:
        """Where the query's words stand in ``text``, merged, in order."""
        if not text or not (self.exact or self.prefixes or self.cjk):
            return []
        spans: list[Span] = []
        if (self.exact or self.prefixes) and text.isascii():
            spans = self._ascii_spans(text, reads.word_terms)
        elif self.exact or self.prefixes:
            terms = _terms_at(text, reads.located_terms)
            for term in self.exact:
                spans.extend(terms.at.get(term, ()))
            for prefix in self.prefixes:
                for term in terms.starting_with(prefix):
                    if term not in self.exact:
                        spans.extend(terms.at[term])
            spans = terms.in_characters(spans)
        for pair in self.cjk:
            at = text.find(pair)
            while at >= 0:
                spans.append((at, at + len(pair)))
                at = text.find(pair, at + 1)
        return merged(spans)

    def _ascii_spans(self, text: str, word_terms: WordTerms) -> list[Span]:
        """The terms' spans in an ASCII ``text``: only its words that start like a term
        (``needles``, ``_starting``) are tokenized, each word once (``Reads.word_terms``
        keeps them), and those that are a term (or start with a prefix) kept."""
        exact, starts = self.exact, self.starts
        spans = []
        for needle in self.needles:
            for at, word in _starting(text, needle):
                for start, end, term in word_terms(word):
                    if term in exact or (starts and term.startswith(starts)):
                        spans.append((at + start, at + end))
        return spans

    def or_nearest(self, found: list[Span], text: str) -> list[Span]:
        """``found`` (the words' spans in ``text``), or for a text holding none of them,
        the span of its sentence nearest the query (``nearest_sentence``)."""
        if found or not text.strip() or not self.words:
            return found  # no words (recent notes, similar ones): nothing to mark
        return [self.nearest_sentence(text)]

    def nearest_sentence(self, text: str) -> Span:
        """The sentence of ``text`` that shares the most word beginnings (their first four
        letters) with the query's words, the first on a tie or when none shares any. The
        cheap stand-in for the sentence nearest in meaning: a hit found by meaning alone
        holds none of the query's terms, and embedding its sentences would cost model
        calls on every keystroke."""
        return _nearest_sentence(text, self.roots)


# Typing shows the same snippets, and its words keep their beginnings, keystroke after
# keystroke: kept by text and needle.
@functools.lru_cache(maxsize=4096)
def _starting(text: str, needle: str) -> tuple[tuple[int, str], ...]:
    """(where, the word) of each word of ASCII ``text`` that starts with ``needle``,
    lower-cased (str.find: no regex step at every character)."""
    low = text.lower()
    found = []
    at = low.find(needle)
    while at >= 0:
        # A term starts after a character that is no letter or digit.
        if at == 0 or not low[at - 1].isalnum():
            found.append((at, _WORD_AT.match(low, at).group()))
        at = low.find(needle, at + 1)
    return tuple(found)


# Typing shows the same passages, and its words keep their beginnings, keystroke after
# keystroke: kept by text and beginnings.
@functools.lru_cache(maxsize=1024)
def _nearest_sentence(text: str, roots: tuple[str, ...]) -> Span:
    found = sentences(text) or ((0, len(text)),)
    if not roots or len(found) == 1:
        return found[0]
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, roots)) + ")", re.IGNORECASE)
    if pattern.search(text) is None:
        return found[0]
    starts = [s for s, _ in found]
    shared: list[set[str]] = [set() for _ in found]
    for m in pattern.finditer(text):
        i = bisect.bisect_right(starts, m.start()) - 1
        if i >= 0 and m.start() < found[i][1]:
            shared[i].add(m.group(0).lower())
    best = max(range(len(found)), key=lambda i: (len(shared[i]), -i))
    return found[best]


def nearest_sentence(text: str, words: tuple[str, ...]) -> Span:
    """``SpanFinder.nearest_sentence`` for ``words``."""
    return SpanFinder((), words).nearest_sentence(text)


def merged(spans: list[Span]) -> list[Span]:
    """Spans sorted, overlapping and touching ones joined (CJK pairs overlap)."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def marked(hit: Hit, finder: SpanFinder, reads: Reads, whole: bool = True) -> Hit:
    """``hit`` with the spans of its passage and snippet (the snippet's words are the
    passage's: found as the words marked there, not tokenized again). Not ``whole`` (a
    launcher's list, every keystroke): only the snippet is tokenized, and the passage
    marks the same words as written, found by ``str.find`` (a form of a word that only
    the passage holds goes unmarked there)."""
    if not whole:
        hit.snippet_spans = finder.keyword_spans(hit.snippet, reads)
        words = list(same_words(hit.passage, frozenset(
            hit.snippet[s:e] for s, e in hit.snippet_spans)))
    else:
        words = finder.keyword_spans(hit.passage, reads)
        hit.snippet_spans = list(same_words(hit.snippet, frozenset(
            hit.passage[s:e] for s, e in words)))
    hit.spans = finder.or_nearest(words, hit.passage)
    return hit


# Kept by text and words: typing shows most of the same hits marking the same words
# keystroke after keystroke.
@functools.lru_cache(maxsize=1024)
def same_words(text: str, surfaces: frozenset[str]) -> tuple[Span, ...]:
    """Where each of ``surfaces`` (words as written) stands in ``text`` as a whole word
    (a CJK pair anywhere)."""
    spans: list[Span] = []
    for word in surfaces:
        anywhere = not word.isascii() and has_cjk(word)
        at = text.find(word)
        while at >= 0:
            end = at + len(word)
            if anywhere or ((at == 0 or not text[at - 1].isalnum())
                            and (end == len(text) or not text[end].isalnum())):
                spans.append((at, end))
            at = text.find(word, at + 1)
    return tuple(merged(spans))


def more_passages(hits: list[Hit], shown: list[tuple[int, int]], scores: dict[int, float],
                  owners: list[tuple[int, int, int]], most: int, finder: SpanFinder,
                  reads: Reads) -> list[Hit]:
    """``hits`` (showing the passages ``shown``: note row, chunk) with up to ``most``
    passages each: after the shown one, the note's other passages that either retriever
    found (``scores``: chunk -> fused score; ``owners``: chunk, note, vector), best first.
    A passage neither retriever found is no match to show."""
    if most <= 1 or not hits:
        return hits
    shown_chunk = dict(shown)
    by_note: dict[int, list[int]] = {}
    for chunk_id, note, _ in owners:
        if note in shown_chunk and chunk_id != shown_chunk[note]:
            by_note.setdefault(note, []).append(chunk_id)
    # One more than needed: a passage may repeat the shown one's text.
    ranked = {n: sorted(cs, key=lambda c: (-scores[c], c))[:most]
              for n, cs in by_note.items()}
    rows = {p.chunk_id: p for p in reads.passages([c for cs in ranked.values() for c in cs])}
    for hit, (note, _) in zip(hits, shown):
        hit.passages = [hit.shown_passage()]
        # The words the shown passage marks, as written, are found again in the others
        # (``str.find``): no passage but the shown one is tokenized.
        surfaces = frozenset(hit.passage[s:e] for s, e in hit.spans if e - s < 60)
        for chunk_id in ranked.get(note, ()):
            p = rows.get(chunk_id)
            if len(hit.passages) >= most or p is None:
                continue
            text = clean_passage(p.text)
            if not text or text == hit.passage:
                continue
            hit.passages.append({"text": text, "heading_path": p.heading,
                                 "spans": [list(s) for s in _spans_as(text, surfaces,
                                                                       finder)],
                                 "score": round(scores[chunk_id], 6)})
    return hits


def _spans_as(text: str, surfaces: frozenset[str], finder: SpanFinder) -> list[Span]:
    """The words ``surfaces`` in ``text``, else (a passage found by meaning) its sentence
    nearest the query."""
    if text.isascii():  # a word capitalised in one passage and not in another
        found = same_words(text.lower(), frozenset(w.lower() for w in surfaces))
    else:
        found = same_words(text, surfaces)
    return finder.or_nearest(list(found), text)

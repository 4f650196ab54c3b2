"""What a search shows: one hit per note with its best passage, near-duplicates folded,
the passage cleaned and the sentence that matches as snippet.

Owns ``best_chunks`` (a note is as good as its best passage), ``Signatures`` (each note's
mean passage vector, what near-duplicates share), ``Shown`` (spotting a near-duplicate of a
note already shown), ``title_key``, ``clean_passage`` and ``SnippetPicker``. May import
``notes``, ``search.ranking``, ``index.cjk`` and the read interface (``index.reads.Reads``);
no SQL.
"""

from __future__ import annotations

import functools
import json
import re

import numpy as np

from notewell.index.cjk import has_cjk
from notewell.index.lru import SharedLRU
from notewell.index.reads import Passage, Reads
from notewell.notes import (
    ATTACHMENT_MARK,
    MAX_HEADING_CHARS,
    MAX_PASSAGE_CHARS,
    MAX_TITLE_CHARS,
    Hit,
    bounded_tags,
    cut,
)
from notewell.search.ranking import Ranking

_SIGNATURES_CACHED = 2_000  # notes' mean vectors, shared by the worker threads: 3 MB
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_HEADING_LINE = re.compile(r"^#{1,6}\s")
_TAGS_ONLY_LINE = re.compile(r"^\s*(?:#[\w][\w/\-]*\s*)+$")  # shown as tags, not as text
_MD_NOISE = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*|```\w*|~~~\w*)")


def best_chunks(scores: dict[int, float], owners: list[tuple[int, int, int]]
                ) -> list[tuple[int, int]]:
    """(note, its best chunk) for the notes of the scored chunks (``owners``: chunk, note,
    vector), best first; equal scores in chunk order, a stable order for callers and
    tests. A note is as good as its best passage (adding its other passages' scores was
    measured and lost: SciFact train nDCG@10 0.739 -> 0.734 at a quarter weight)."""
    best: dict[int, int] = {}  # note -> its best chunk
    for chunk_id, note, _ in owners:
        if note not in best or scores[chunk_id] > scores[best[note]]:
            best[note] = chunk_id
    return sorted(best.items(), key=lambda item: (-scores[item[1]], item[1]))


def to_hit(p: Passage, snippet: str, passage: str, score: float) -> Hit:
    # Within the bounds of ``notes`` again: an index cut before them still answers.
    return Hit(note_id=p.note_id, title=cut(p.title, MAX_TITLE_CHARS), source=p.source,
               kind=p.kind, url=p.url, path=p.path, tags=list(bounded_tags(json.loads(p.tags))),
               heading_path=cut(p.heading, 6 * (MAX_HEADING_CHARS + 3)), snippet=snippet,
               passage=cut(passage, MAX_PASSAGE_CHARS), score=score, modified=p.modified,
               archived=bool(p.archived), attachment=attachment_of(p.heading))


def attachment_of(heading: str) -> str | None:
    """The file a passage came from (its heading path starts with the attachment mark)."""
    if not heading.startswith(ATTACHMENT_MARK):
        return None
    return heading[len(ATTACHMENT_MARK):].split(" > ", 1)[0]


class Signatures:
    """Each note's mean passage vector, unit length: what near-duplicates share. Kept for
    typing's next keystrokes, shared by the worker threads; ``clear`` when the index
    changes (note rows may be reused)."""

    def __init__(self, size: int = _SIGNATURES_CACHED) -> None:
        self._cache: SharedLRU[int, np.ndarray] = SharedLRU(size)

    def clear(self) -> None:
        self._cache.clear()

    def of(self, reads: Reads, notes: list[int]) -> dict[int, np.ndarray]:
        """The signatures of those of ``notes`` with stored vectors, read through
        ``reads`` (the request's view)."""
        if not notes:
            return {}
        found = self._cache.get_many(notes)
        missing = [n for n in notes if n not in found]
        if missing:
            notes_of, vectors = reads.note_vectors(missing)
            stored, matrix = reads.vector_matrix(vectors)
            fresh = {}
            if len(matrix):
                owners = notes_of[stored]
                starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
                sums = np.add.reduceat(matrix, starts, axis=0)
                sums /= np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
                # A row of its own for each: a view would keep its whole batch alive for as
                # long as the cache keeps any one note of it.
                fresh = dict(zip(owners[starts].tolist(), (row.copy() for row in sums)))
            self._cache.put_many(fresh)
            found.update(fresh)
        return found


class Shown:
    """The notes already shown for a query, to spot near-duplicates of them: their mean
    passage vectors as rows of one matrix (one product per candidate) and title keys."""

    def __init__(self, ranking: Ranking, limit: int) -> None:
        self.ranking = ranking
        self.vectors: np.ndarray | None = None
        self.limit = limit
        self.titles: list[str] = []  # one per row of ``vectors`` filled so far

    def add(self, signature: np.ndarray, title: str) -> None:
        if self.vectors is None:
            self.vectors = np.empty((self.limit, len(signature)), dtype=np.float32)
        n = len(self.titles)
        if n < self.limit:
            self.vectors[n] = signature
            self.titles.append(title_key(title))

    def near_duplicate(self, signature: np.ndarray, title: str) -> bool:
        if not self.titles:
            return False
        r = self.ranking
        sims = self.vectors[: len(self.titles)] @ signature
        if float(sims.max()) >= r.duplicate_similarity:
            return True
        key = title_key(title)
        if not key:  # no title (``eval --self`` hides them all): no copy by its title
            return False
        return any(other == key and sim >= r.duplicate_similarity_same_title
                   for other, sim in zip(self.titles, sims.tolist()))


# " (1)", " copy", " copy 2" at the end; found from their start ("(", "copy"), since
# ``(?:\s*\(\d+\)|\s+copy(?:\s+\d+)?)$`` is quadratic on a long run of spaces.
_NUMBER_SUFFIX = re.compile(r"\(\d+\)$")
_COPY_SUFFIX = re.compile(r"\scopy(?:\s+\d+)?$")


@functools.lru_cache(maxsize=4096)
def title_key(title: str) -> str:
    """A title as a duplicated import keeps it: case, punctuation and " (1)" dropped."""
    title = title.strip().lower()
    m = _NUMBER_SUFFIX.search(title) or _COPY_SUFFIX.search(title)
    if m:
        title = title[:m.start()].rstrip()
    return " ".join(re.findall(r"\w+", title))


# Typing shows the same passages keystroke after keystroke: their cleaned text and
# sentences are kept (by text, so an edited passage is simply another key).
@functools.lru_cache(maxsize=512)
def clean_passage(text: str) -> str:
    """The passage as a reader wants it copied: heading lines (already in the heading
    path), lines of nothing but tags, and Markdown list/quote/fence markers dropped."""
    lines = [_MD_NOISE.sub("", line).rstrip() for line in text.splitlines()
             if not _HEADING_LINE.match(line) and not _TAGS_ONLY_LINE.match(line)]
    return "\n".join(line for line in lines if line.strip())


def snippet(text: str, words: tuple[str, ...], partial: bool, width: int = 180,
            weights: dict[str, float] | None = None) -> str:
    """The sentence of ``text`` that matches the query best (see ``SnippetPicker``)."""
    return SnippetPicker(words, partial, weights).pick(clean_passage(text), width)


@functools.lru_cache(maxsize=512)
def _sentences(passage: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in _SENTENCE.split(passage) if s.strip())


class SnippetPicker:
    """Picks the sentence of a passage that matches the query best, not the passage's start.

    A sentence scores the summed ``weights`` (IDF; 1 each without them) of the query words
    it holds, a word matching by its stem (or as a prefix while typed); ties go to the
    shorter sentence, no match at all to the first. Built once per query: the patterns
    are compiled once for the twenty passages shown."""

    def __init__(self, words: tuple[str, ...], partial: bool,
                 weights: dict[str, float] | None = None) -> None:
        typing = words[-1] if partial and words else None
        self.patterns = []
        for term in dict.fromkeys(w for w in words if len(w) > 1):
            stem = term if term == typing else term[: max(4, len(term) - 2)]
            # CJK has no word boundaries: a character pair is found anywhere.
            edge = "" if has_cjk(term) else r"\b"
            self.patterns.append((stem, re.compile(edge + re.escape(stem), re.IGNORECASE),
                                  (weights or {}).get(term, 1.0)))

    def pick(self, passage: str, width: int = 180) -> str:
        """The snippet of ``passage`` (already ``clean_passage``d), at most ``width``."""
        sentences = _sentences(passage)
        if not sentences:
            return ""
        best = 0
        if self.patterns:
            scores = [(self._score(s), -len(s)) for s in sentences]
            best = max(range(len(sentences)), key=scores.__getitem__)
            if scores[best][0] == 0:
                best = 0
        out = sentences[best]
        # Fill the line with what follows, so a short sentence still gives context.
        for extra in sentences[best + 1:]:
            if len(out) + len(extra) + 1 > width:
                break
            out += " " + extra
        return out if len(out) <= width else out[: width - 1].rsplit(" ", 1)[0] + "…"

    def _score(self, sentence: str) -> float:
        # A plain substring test first: most sentences hold none of the words, and the
        # word-boundary regex was 90% of a keystroke's snippet time (bench/keystroke.py).
        low = sentence.lower()
        return sum(w for stem, rx, w in self.patterns if stem in low and rx.search(sentence))

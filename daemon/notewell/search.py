"""Ranking: from a typed query to a list of notes, each once, with its best passage.

Hybrid from the start: dense k-NN over chunk vectors (sqlite-vec) and BM25 over chunk text
(FTS5) are fused with weighted reciprocal rank fusion at chunk level, then grouped so each
note appears once with its best chunk. Filters from the query (``#tag``, ``in:source``)
restrict both retrievers before ranking, never after, so a filtered search is exact.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from .embedding import Embedder
from .index import Index
from .notes import Hit
from .query import Query, fts_match, fts_terms, parse

_POSTINGS_CACHED = 64
_LAST_WORD = re.compile(r"\w+\W*$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_HEADING_LINE = re.compile(r"^#{1,6}\s")
_MD_NOISE = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*|```\w*|~~~\w*)")


@dataclass(frozen=True)
class Ranking:
    """Fusion knobs; defaults were chosen on the demo golden set and SciFact's train split."""

    dense_k: int = 80
    bm25_k: int = 80
    rrf_k: float = 60.0
    dense_weight: float = 1.0
    bm25_weight: float = 1.0
    # BM25 votes are scaled by query coverage ** this (0: plain RRF); see ``_fuse``.
    coverage_power: float = 2.0
    # FTS5 column weights: title, heading path, passage, tags.
    bm25_columns: tuple[float, float, float, float] = (4.0, 2.0, 1.0, 2.0)
    # A fragment this short is too ambiguous to embed while it is being typed, unless
    # it can be completed from the words of this many top keyword hits.
    min_partial_for_dense: int = 4
    complete_from: int = 20
    # Note score = best passage + note_spread * the other passages' scores.
    note_spread: float = 0.0
    # Notes whose mean passage vectors are this close are one note shown twice; with
    # the same title (an import's " (1)" ignored), a lower bar is enough.
    duplicate_similarity: float = 0.97
    duplicate_similarity_same_title: float = 0.9


@dataclass
class SearchResult:
    query: Query
    hits: list[Hit]
    notices: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"hits": [h.to_dict() for h in self.hits], "notices": self.notices}


class Searcher:
    def __init__(self, index: Index, embedder: Embedder, ranking: Ranking | None = None,
                 cache_size: int = 256) -> None:
        self.index = index
        self.embedder = embedder
        self.ranking = ranking or Ranking()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()
        self._local = threading.local()

    # -- public ---------------------------------------------------------------------------

    def search(self, raw: str, limit: int = 20, mode: str = "hybrid") -> SearchResult:
        return self.run(parse(raw), limit, mode)

    def run(self, q: Query, limit: int = 20, mode: str = "hybrid") -> SearchResult:
        """Search for an already parsed query (``query.parse`` or ``query.literal``)."""
        allowed, notices = self.allowed(q)
        if allowed is not None and not allowed:
            return SearchResult(q, [], notices)
        if q.similar_to:
            return SearchResult(q, self.similar(q.similar_to, limit, allowed), notices)
        if q.empty:
            return SearchResult(q, self.recent(limit, allowed), notices)
        lexical = self._bm25(q, allowed) if mode in ("hybrid", "bm25") else []
        dense = self._dense(q, allowed, lexical) if mode in ("hybrid", "dense") else []
        scores, ranks = self._fuse(q, dense, lexical)
        return SearchResult(q, self._hits(scores, ranks, q, limit), notices)

    def recent(self, limit: int = 20, allowed: set[int] | None = None) -> list[Hit]:
        rows = self.index.db.execute(
            "SELECT id FROM notes ORDER BY modified DESC NULLS LAST LIMIT ?",
            (limit if allowed is None else 1_000_000,),
        )
        ids = [r[0] for r in rows if allowed is None or r[0] in allowed][:limit]
        chunk_ids = [self._first_chunk(i) for i in ids]
        scores = {c: 1.0 / (n + 1) for n, c in enumerate(chunk_ids) if c is not None}
        return self._hits(scores, {}, parse(""), limit)

    def similar(self, note_id: str, limit: int = 20, allowed: set[int] | None = None
                ) -> list[Hit]:
        """Notes closest in meaning to ``note_id``, itself excluded: candidates are the
        notes of the passages nearest to its mean passage vector, ranked by how close
        their own mean vector is (note to note, so one stray passage does not decide)."""
        row = self.index.db.execute("SELECT id FROM notes WHERE note_id = ?",
                                    (note_id,)).fetchone()
        if row is None:
            return []
        own = self._signatures([row[0]]).get(row[0])
        if own is None:
            return []
        own_chunks = self.index.db.execute("SELECT count(*) FROM chunks WHERE note = ?",
                                           (row[0],)).fetchone()[0]
        nearest = self._knn(own, self.ranking.dense_k + own_chunks, allowed)
        chunk_note = dict(self.index.db.execute(
            "SELECT id, note FROM chunks WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps([c for c, _ in nearest]),)).fetchall())
        first: dict[int, int] = {}  # candidate note -> its passage nearest to ``own``
        for chunk_id, _ in nearest:
            note = chunk_note.get(chunk_id)
            if note is not None and note != row[0]:
                first.setdefault(note, chunk_id)
        signatures = self._signatures(list(first))
        scores = {chunk_id: float(signatures[note] @ own) for note, chunk_id in first.items()
                  if note in signatures}
        return self._hits(scores, {}, parse(""), limit, exclude={row[0]})

    def embed_query(self, text: str) -> np.ndarray:
        """Query vectors, cached: typing re-sends the same prefixes again and again."""
        with self._cache_lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        vec = self.embedder.embed_batch([text])[0]
        with self._cache_lock:
            self._cache[text] = vec
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vec

    # -- retrieval --------------------------------------------------------------------------

    def allowed(self, q: Query) -> tuple[set[int] | None, list[str]]:
        """The note rows the query's filters allow (``None``: no filter) and notices for
        filters that match nothing."""
        if not q.tags and not q.sources:
            return None, []
        db = self.index.db
        allowed: set[int] | None = None
        notices = []
        for tag in q.tags:
            ids = {r[0] for r in db.execute(
                "SELECT note FROM note_tags WHERE tag = ? OR tag LIKE ? ESCAPE '\\'",
                (tag, _like_prefix(tag) + "/%"))}
            if not ids:
                notices.append(f"No notes are tagged #{tag}.")
            allowed = ids if allowed is None else allowed & ids
        if q.sources:
            known = {r[0] for r in db.execute("SELECT DISTINCT source FROM notes")}
            for name in q.sources:
                if name not in known:
                    notices.append(f"No source is named {name!r} (in:{name}).")
            ids = set()
            for name in q.sources:
                ids |= {r[0] for r in db.execute("SELECT id FROM notes WHERE source = ?",
                                                 (name,))}
            allowed = ids if allowed is None else allowed & ids
        if allowed is not None and not allowed and not notices:
            notices.append("No note matches all of these filters together.")
        return allowed, notices

    def dense_text(self, q: Query, lexical: list[int] = ()) -> str:
        """What the model reads for a query. A word still being typed is completed from
        the keyword hits ("delete remote bra" -> "delete remote branch"): the model would
        read "bra" as a word of its own. Without a completion, a fragment shorter than
        ``min_partial_for_dense`` is left out rather than embedded."""
        if not q.partial or not q.words:
            return q.text
        fragment = q.words[-1]
        cut = _LAST_WORD.search(q.text)
        head = q.text[: cut.start()] if cut else q.text
        completion = self._complete(fragment, lexical) if len(fragment) >= 2 else None
        if completion:
            return head + completion
        if len(fragment) < self.ranking.min_partial_for_dense and head.strip():
            return head.strip()
        return q.text

    def _complete(self, fragment: str, lexical: list[int]) -> str | None:
        """The commonest word starting with ``fragment`` in the best keyword hits, unless
        the fragment is itself a word there (a finished query stays as typed)."""
        top = list(lexical[: self.ranking.complete_from])
        if not top:
            return None
        pattern = re.compile(r"\b" + re.escape(fragment) + r"\w*", re.IGNORECASE)
        counts: dict[str, int] = {}
        for title, text in self.index.db.execute(
                "SELECT n.title, c.text FROM chunks c JOIN notes n ON n.id = c.note "
                "WHERE c.id IN (SELECT value FROM json_each(?))", (json.dumps(top),)):
            for word in pattern.findall(f"{title}\n{text}"):
                word = word.lower()
                counts[word] = counts.get(word, 0) + 1
        if not counts or fragment in counts:
            return None  # nothing to complete to, or the fragment is already a word here
        return min(counts, key=lambda w: (-counts[w], len(w), w))

    def _dense(self, q: Query, allowed: set[int] | None, lexical: list[int] = ()
               ) -> list[int]:
        text = self.dense_text(q, lexical)
        if not text.strip():
            return []
        return [c for c, _ in self._knn(self.embed_query(text), self.ranking.dense_k, allowed)]

    def _knn(self, vec: np.ndarray, k: int, allowed: set[int] | None
             ) -> list[tuple[int, float]]:
        """(chunk id, distance) nearest first; exact over the allowed notes when filtered."""
        db = self.index.db
        blob = np.asarray(vec, dtype=np.float32).tobytes()
        if allowed is not None:
            rows = db.execute(
                "SELECT c.id, vec_distance_cosine(v.embedding, ?) AS d FROM chunks c "
                "JOIN vectors v ON v.rowid = c.embedding "
                "WHERE c.note IN (SELECT value FROM json_each(?)) ORDER BY d LIMIT ?",
                (blob, json.dumps(sorted(allowed)), k))
            return [(r[0], r[1]) for r in rows]
        nearest = self.index.knn(vec, k)
        if not nearest:
            return []
        dist = dict(nearest)
        rows = db.execute(
            "SELECT id, embedding FROM chunks WHERE embedding IN "
            "(SELECT value FROM json_each(?))", (json.dumps(list(dist)),))
        return sorted(((r[0], dist[r[1]]) for r in rows), key=lambda x: (x[1], x[0]))

    def _bm25(self, q: Query, allowed: set[int] | None) -> list[int]:
        match = fts_match(q.words, q.partial)
        if match is None:
            return []
        r = self.ranking
        if allowed is None:
            return [c for c, _ in self.index.bm25(match, r.bm25_k, r.bm25_columns)]
        weights = ", ".join(str(float(x)) for x in r.bm25_columns)
        rows = self.index.db.execute(
            f"SELECT rowid, bm25(chunks_fts, {weights}) AS s FROM chunks_fts "
            "WHERE chunks_fts MATCH ? AND rowid IN (SELECT id FROM chunks WHERE note IN "
            "(SELECT value FROM json_each(?))) ORDER BY s LIMIT ?",
            (match, json.dumps(sorted(allowed)), r.bm25_k))
        return [row[0] for row in rows]

    def coverage(self, q: Query, chunk_ids: list[int]) -> dict[int, float]:
        """For each chunk, the share of the query's IDF mass that it matches (0..1).

        A chunk that holds every query word scores 1; one that holds only a common word
        scores near 0. This is what separates a real keyword hit from the noise an
        OR-of-words query drags in when the words are the user's, not the note's."""
        terms = fts_terms(q.words, q.partial)
        if not terms or not chunk_ids:
            return {}
        postings = [self._postings(t) for t in terms]
        total = sum(idf for _, idf in postings) or 1.0
        covered = dict.fromkeys(chunk_ids, 0.0)
        for rows, idf in postings:
            for chunk_id in rows.intersection(chunk_ids):
                covered[chunk_id] += idf / total
        return covered

    def _postings(self, term: str) -> tuple[frozenset[int], float]:
        """The chunks that match an FTS5 phrase, and its BM25 IDF over chunks.

        Reading a phrase's whole row list and intersecting in Python is several times
        faster than asking FTS5 about a list of rowids. Kept per thread (each thread reads
        through its own connection) for the last few phrases, since typing repeats them,
        until that connection sees the index change."""
        db = self.index.db
        generation = (id(db), db.execute("PRAGMA data_version").fetchone()[0],
                      db.total_changes())
        cache: OrderedDict | None = getattr(self._local, "postings", None)
        if cache is None or self._local.generation != generation:
            cache = self._local.postings = OrderedDict()
            self._local.generation = generation
            self._local.chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        found = cache.get(term)
        if found is None:
            rows = frozenset(r[0] for r in db.execute(
                "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (term,)))
            n, df = self._local.chunks, len(rows)
            found = cache[term] = (rows, math.log(1.0 + (n - df + 0.5) / (df + 0.5)))
            while len(cache) > _POSTINGS_CACHED:
                cache.popitem(last=False)
        else:
            cache.move_to_end(term)
        return found

    def _fuse(self, q: Query, dense: list[int], lexical: list[int]
              ) -> tuple[dict[int, float], dict[int, dict]]:
        """Weighted reciprocal rank fusion, each BM25 vote scaled by the chunk's query
        coverage raised to ``coverage_power``: a keyword hit on every word counts fully,
        a hit on one common word hardly at all, so keyword noise cannot push the right
        note down on a paraphrase, while exact matches keep their full weight."""
        r = self.ranking
        scores: dict[int, float] = {}
        ranks: dict[int, dict] = {}
        for rank, chunk_id in enumerate(dense):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + r.dense_weight / (r.rrf_k + rank + 1)
            ranks.setdefault(chunk_id, {})["dense"] = rank + 1
        cover = self.coverage(q, lexical) if dense and r.coverage_power else {}
        for rank, chunk_id in enumerate(lexical):
            weight = r.bm25_weight
            if cover:
                weight *= cover.get(chunk_id, 0.0) ** r.coverage_power
            scores[chunk_id] = scores.get(chunk_id, 0.0) + weight / (r.rrf_k + rank + 1)
            ranks.setdefault(chunk_id, {})["bm25"] = rank + 1
        return scores, ranks

    # -- grouping and presentation -------------------------------------------------------

    def _first_chunk(self, note_rowid: int) -> int | None:
        row = self.index.db.execute(
            "SELECT id FROM chunks WHERE note = ? ORDER BY seq LIMIT 1", (note_rowid,)
        ).fetchone()
        return row[0] if row else None

    def _hits(self, scores: dict[int, float], ranks: dict[int, dict], q: Query, limit: int,
              exclude: set[int] | frozenset = frozenset()) -> list[Hit]:
        if not scores:
            return []
        rows = self.index.db.execute(
            "SELECT c.id, c.note, c.heading_path, c.url, c.text, c.embedding, n.note_id, "
            "n.title, n.source, n.kind, n.path, n.tags, n.modified, n.archived, "
            "n.content_hash FROM chunks c JOIN notes n ON n.id = c.note "
            "WHERE c.id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(scores)),))
        best: dict[int, tuple] = {}
        others: dict[int, float] = {}
        for row in rows:
            note = row[1]
            if note in exclude:
                continue
            score = scores[row[0]]
            if note not in best:
                best[note] = row
                continue
            if score > scores[best[note][0]]:
                score, best[note] = scores[best[note][0]], row
            others[note] = others.get(note, 0.0) + score
        # A note is as good as its best passage, plus a little for each other passage
        # that also matched (``note_spread``).
        beta = self.ranking.note_spread
        note_score = {n: scores[row[0]] + beta * others.get(n, 0.0) for n, row in best.items()}
        ordered = sorted(best.values(), key=lambda row: (-note_score[row[1]], row[6]))
        signatures = self._signatures([row[1] for row in ordered[: 2 * limit + 10]])
        hits: list[Hit] = []
        seen: set[str] = set()
        shown: list[tuple[np.ndarray, str]] = []
        for row in ordered:
            (chunk_id, note, heading, url, text, embedding, note_id, title, source, kind, path,
             tags, modified, archived, content_hash) = row
            # Identical and near-identical notes (the same import twice) show once.
            dup_keys = {f"c:{content_hash}", f"e:{embedding}"}
            if dup_keys & seen:
                continue
            signature = signatures.get(note)
            if signature is not None and self._near_duplicate(signature, title, shown):
                continue
            seen |= dup_keys
            if signature is not None:
                shown.append((signature, _title_key(title)))
            hits.append(Hit(
                note_id=note_id, title=title, source=source, kind=kind, url=url, path=path,
                tags=json.loads(tags), heading_path=heading,
                snippet=snippet(text, q.words, q.partial), passage=clean_passage(text),
                score=note_score[note], modified=modified, archived=bool(archived),
                why=ranks.get(chunk_id, {}),
            ))
            if len(hits) >= limit:
                break
        return hits

    def _signatures(self, notes: list[int]) -> dict[int, np.ndarray]:
        """Each note's mean passage vector, unit length: what near-duplicates share."""
        if not notes:
            return {}
        sums: dict[int, np.ndarray] = {}
        for note, blob in self.index.db.execute(
                "SELECT c.note, v.embedding FROM chunks c JOIN vectors v "
                "ON v.rowid = c.embedding WHERE c.note IN (SELECT value FROM json_each(?))",
                (json.dumps(notes),)):
            vec = np.frombuffer(blob, dtype=np.float32)
            sums[note] = sums[note] + vec if note in sums else vec.copy()
        return {n: v / max(float(np.linalg.norm(v)), 1e-12) for n, v in sums.items()}

    def _near_duplicate(self, signature: np.ndarray, title: str,
                        shown: list[tuple[np.ndarray, str]]) -> bool:
        r = self.ranking
        key = _title_key(title)
        for other, other_key in shown:
            similarity = float(signature @ other)
            if similarity >= r.duplicate_similarity or (
                    key == other_key and similarity >= r.duplicate_similarity_same_title):
                return True
        return False


_COPY_SUFFIX = re.compile(r"(?:\s*\(\d+\)|\s+copy(?:\s+\d+)?)$")


def _title_key(title: str) -> str:
    """A title as a duplicated import keeps it: case, punctuation and " (1)" dropped."""
    return " ".join(re.findall(r"\w+", _COPY_SUFFIX.sub("", title.strip().lower())))


def _like_prefix(tag: str) -> str:
    return tag.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def clean_passage(text: str) -> str:
    """The passage as a reader wants it copied: heading lines (already in the heading
    path) and Markdown list/quote/fence markers dropped."""
    lines = [_MD_NOISE.sub("", line).rstrip() for line in text.splitlines()
             if not _HEADING_LINE.match(line)]
    return "\n".join(line for line in lines if line.strip())


def snippet(text: str, words: tuple[str, ...], partial: bool, width: int = 180) -> str:
    """The sentence of the passage that matches the query best, not the passage's start."""
    sentences = [s.strip() for s in _SENTENCE.split(clean_passage(text)) if s.strip()]
    if not sentences:
        return ""
    terms = [w for w in words if len(w) > 1]
    if terms:
        def score(sentence: str) -> tuple[int, int]:
            toks = re.findall(r"\w+", sentence.lower())
            hits = 0
            for i, term in enumerate(terms):
                prefix = partial and i == len(terms) - 1
                stem = term if prefix else term[: max(4, len(term) - 2)]
                hits += any(t.startswith(stem) for t in toks)
            return hits, -len(sentence)

        best = max(range(len(sentences)), key=lambda i: score(sentences[i]))
        if score(sentences[best])[0] == 0:
            best = 0
    else:
        best = 0
    out = sentences[best]
    # Fill the line with what follows, so a short sentence still gives context.
    for extra in sentences[best + 1:]:
        if len(out) + len(extra) + 1 > width:
            break
        out += " " + extra
    return out if len(out) <= width else out[: width - 1].rsplit(" ", 1)[0] + "…"

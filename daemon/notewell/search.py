"""Ranking: from a typed query to a list of notes, each once, with its best passage.

Hybrid from the start: dense k-NN over chunk vectors (sqlite-vec) and BM25 over chunk text
(FTS5) are fused with weighted reciprocal rank fusion at chunk level, then grouped so each
note appears once with its best chunk. Filters from the query (``#tag``, ``in:source``)
restrict both retrievers before ranking, never after, so a filtered search is exact.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from .embedding import Embedder
from .index import Index
from .notes import Hit
from .query import Query, fts_match, parse

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
    # A fragment this short is too ambiguous to embed while it is being typed.
    min_partial_for_dense: int = 4


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

    # -- public ---------------------------------------------------------------------------

    def search(self, raw: str, limit: int = 20, mode: str = "hybrid") -> SearchResult:
        q = parse(raw)
        allowed, notices = self._filter(q)
        if allowed is not None and not allowed:
            return SearchResult(q, [], notices)
        if q.similar_to:
            return SearchResult(q, self.similar(q.similar_to, limit, allowed), notices)
        if q.empty:
            return SearchResult(q, self.recent(limit, allowed), notices)
        dense = self._dense(q, allowed) if mode in ("hybrid", "dense") else []
        lexical = self._bm25(q, allowed) if mode in ("hybrid", "bm25") else []
        scores, ranks = self._fuse(dense, lexical)
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
        """Notes closest in meaning to ``note_id`` (its mean chunk vector), itself excluded."""
        row = self.index.db.execute("SELECT id FROM notes WHERE note_id = ?",
                                    (note_id,)).fetchone()
        if row is None:
            return []
        vectors = [np.frombuffer(r[0], dtype=np.float32) for r in self.index.db.execute(
            "SELECT v.embedding FROM chunks c JOIN vectors v ON v.rowid = c.embedding "
            "WHERE c.note = ?", (row[0],))]
        if not vectors:
            return []
        centre = np.mean(vectors, axis=0)
        centre /= max(float(np.linalg.norm(centre)), 1e-12)
        dense = self._knn(centre, self.ranking.dense_k, allowed)
        scores: dict[int, float] = {}
        for chunk_id, distance in dense:
            scores.setdefault(chunk_id, 1.0 - distance)
        hits = self._hits(scores, {}, parse(""), limit + 1, exclude={row[0]})
        return hits[:limit]

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

    def _filter(self, q: Query) -> tuple[set[int] | None, list[str]]:
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

    def _dense_text(self, q: Query) -> str:
        words = q.text.split()
        if q.partial and len(words) > 1 and len(q.words[-1]) < self.ranking.min_partial_for_dense:
            return " ".join(words[:-1])
        return q.text

    def _dense(self, q: Query, allowed: set[int] | None) -> list[int]:
        text = self._dense_text(q)
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
        if allowed is None:
            return [c for c, _ in self.index.bm25(match, self.ranking.bm25_k)]
        rows = self.index.db.execute(
            "SELECT rowid, bm25(chunks_fts, 4.0, 2.0, 1.0, 2.0) AS s FROM chunks_fts "
            "WHERE chunks_fts MATCH ? AND rowid IN (SELECT id FROM chunks WHERE note IN "
            "(SELECT value FROM json_each(?))) ORDER BY s LIMIT ?",
            (match, json.dumps(sorted(allowed)), self.ranking.bm25_k))
        return [r[0] for r in rows]

    def _fuse(self, dense: list[int], lexical: list[int]
              ) -> tuple[dict[int, float], dict[int, dict]]:
        r = self.ranking
        scores: dict[int, float] = {}
        ranks: dict[int, dict] = {}
        for name, ids, weight in (("dense", dense, r.dense_weight),
                                  ("bm25", lexical, r.bm25_weight)):
            for rank, chunk_id in enumerate(ids):
                scores[chunk_id] = scores.get(chunk_id, 0.0) + weight / (r.rrf_k + rank + 1)
                ranks.setdefault(chunk_id, {})[name] = rank + 1
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
        for row in rows:
            note = row[1]
            if note in exclude:
                continue
            if note not in best or scores[row[0]] > scores[best[note][0]]:
                best[note] = row
        ordered = sorted(best.values(), key=lambda row: (-scores[row[0]], row[6]))
        hits: list[Hit] = []
        seen: set[str] = set()
        for row in ordered:
            (chunk_id, _, heading, url, text, embedding, note_id, title, source, kind, path,
             tags, modified, archived, content_hash) = row
            # Near-identical notes (the same import twice) show once.
            dup_keys = {f"c:{content_hash}", f"e:{embedding}"}
            if dup_keys & seen:
                continue
            seen |= dup_keys
            hits.append(Hit(
                note_id=note_id, title=title, source=source, kind=kind, url=url, path=path,
                tags=json.loads(tags), heading_path=heading,
                snippet=snippet(text, q.words, q.partial), passage=clean_passage(text),
                score=scores[chunk_id], modified=modified, archived=bool(archived),
                why=ranks.get(chunk_id, {}),
            ))
            if len(hits) >= limit:
                break
        return hits


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

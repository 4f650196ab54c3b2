"""Ranking: from a typed query to a list of notes, each once, with its best passage.

Two retrievers, run at chunk level: BM25 over FTS5 (the OR of the query's words, the word
still being typed as a prefix) and dense k-NN over the chunk vectors. Their candidates are
scored together by a convex combination of the cosine and of BM25 scaled by how far the
keyword match can be trusted (``Searcher._fuse``): a match on most of the query's
information counts fully, a match on one word of a short paraphrase hardly at all, so
fusion keeps what either side alone gets right. Each note then appears once, with its best
chunk and the sentence that matches as snippet; near-identical notes (the same import
twice) show once. The unfinished last word is completed from the keyword hits before the
model reads it. Filters from the query (``#tag``, ``in:source``) restrict both retrievers
before ranking, never after, so a filtered search is exact. The defaults were tuned on
SciFact's train split and the demo golden set (see README, "Search quality").
"""

from __future__ import annotations

import functools
import json
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np

from notewell.index.database import Index
from notewell.index.keywords import COLUMN_WEIGHTS, KeywordIndex
from notewell.index.terms import Tokens
from notewell.model.embedding import Embedder
from notewell.notes import Hit
from notewell.search.query import Query, fts_terms, like_escape, parse

_CHUNK_TERMS_CACHED = 2_000  # chunks' index terms, shared by the worker threads: ~5 MB
_SIGNATURES_CACHED = 2_000  # notes' mean vectors, shared by the worker threads: 3 MB
K = TypeVar("K")
V = TypeVar("V")
_LAST_WORD = re.compile(r"\w+\W*$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_HEADING_LINE = re.compile(r"^#{1,6}\s")
_TAGS_ONLY_LINE = re.compile(r"^\s*(?:#[\w][\w/\-]*\s*)+$")  # shown as tags, not as text
_MD_NOISE = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*|```\w*|~~~\w*)")


@dataclass(frozen=True)
class Ranking:
    """Ranking knobs; defaults tuned on SciFact's train split and the demo golden set
    (``notewell eval``), where a broad range of them scores within 0.003 nDCG@10."""

    dense_k: int = 80
    bm25_k: int = 80
    # Weight of the (min-max scaled) cosine; BM25 gets the rest.
    dense_share: float = 0.6
    # Trust in a keyword match (see ``Searcher._fuse``): it rises from 0 at this share of
    # the query's IDF mass to 1 at all of it, raised to ``coverage_power`` ...
    coverage_floor: float = 0.4
    coverage_power: float = 2.0
    # ... or from 0 to 1 as the matched IDF mass itself goes from low to high (about 2
    # and 4 rare words), whichever is larger.
    matched_idf_low: float = 8.0
    matched_idf_high: float = 20.0
    # FTS5 column weights: title, heading path, passage, tags.
    bm25_columns: tuple[float, float, float, float] = COLUMN_WEIGHTS
    # A fragment this short is too ambiguous to embed while it is being typed, unless
    # it can be completed from the words of this many top keyword hits.
    min_partial_for_dense: int = 4
    complete_from: int = 20
    # The BM25 query leaves out the commonest words once the chunks holding the words
    # exceed this many (coverage still counts them): see ``Searcher._bm25``.
    bm25_row_budget: int = 40_000
    # The same for the in-memory keyword copy, where a chunk costs ~50x less to score.
    keyword_row_budget: int = 200_000
    # Notes whose mean passage vectors are this close are one note shown twice; with
    # the same title (an import's " (1)" ignored), a lower bar is enough.
    duplicate_similarity: float = 0.97
    duplicate_similarity_same_title: float = 0.9


@dataclass(frozen=True)
class QueryTerm:
    """One distinct query word: its FTS5 phrase, the index terms it stands for (the last
    one a prefix while typed), and how many chunks hold it (``df``; for several terms, the
    rarest's) as IDF."""

    word: str
    phrase: str
    tokens: tuple[str, ...]
    prefix: bool
    df: int
    idf: float

    def held_by(self, terms: frozenset[str], completions: frozenset[str]) -> bool:
        """Whether a chunk with index ``terms`` holds this word; ``completions``: the
        indexed terms a word being typed may stand for."""
        if self.prefix:
            return (not completions.isdisjoint(terms)
                    and all(t in terms for t in self.tokens[:-1]))
        return all(t in terms for t in self.tokens)


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
        # Typing re-sends the same text again and again (the completed word stays the
        # same for several keystrokes): its vector, and its nearest passages while the
        # index's vectors are unchanged.
        self._query_vectors: SharedLRU[str, np.ndarray] = SharedLRU(cache_size)
        self._nearest: SharedLRU[tuple, list[tuple[int, float]]] = SharedLRU(64)
        self._local = threading.local()
        self._chunk_term_cache: SharedLRU[int, frozenset[str]] = SharedLRU(
            _CHUNK_TERMS_CACHED)
        self._signature_cache: SharedLRU[int, np.ndarray] = SharedLRU(_SIGNATURES_CACHED)

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
        vector = None
        if mode in ("hybrid", "dense"):
            text = self.dense_text(q, [c for c, _ in lexical])
            vector = self.embed_query(text) if text.strip() else None
        dense = self.nearest(text, allowed) if vector is not None else []
        scores = self._fuse(q, vector, dense, lexical)
        return SearchResult(q, self._hits(scores, q, limit), notices)

    def recent(self, limit: int = 20, allowed: set[int] | None = None) -> list[Hit]:
        rows = self.index.db.execute(
            "SELECT id FROM notes ORDER BY modified DESC NULLS LAST LIMIT ?",
            (limit if allowed is None else 1_000_000,),
        )
        ids = [r[0] for r in rows if allowed is None or r[0] in allowed][:limit]
        chunk_ids = [self._first_chunk(i) for i in ids]
        scores = {c: 1.0 / (n + 1) for n, c in enumerate(chunk_ids) if c is not None}
        return self._hits(scores, parse(""), limit)

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
        chunk_note = {c: n for c, n, _ in self._owners([c for c, _ in nearest])}
        first: dict[int, int] = {}  # candidate note -> its passage nearest to ``own``
        for chunk_id, _ in nearest:
            note = chunk_note.get(chunk_id)
            if note is not None and note != row[0]:
                first.setdefault(note, chunk_id)
        signatures = self._signatures(list(first))
        scores = {chunk_id: float(signatures[note] @ own) for note, chunk_id in first.items()
                  if note in signatures}
        return self._hits(scores, parse(""), limit)

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector (kept for the next keystrokes)."""
        vec = self._query_vectors.get(text)
        if vec is None:
            vec = self.embedder.embed_batch([text])[0]
            self._query_vectors.put_many({text: vec})
        return vec

    def nearest(self, text: str, allowed: set[int] | None) -> list[tuple[int, float]]:
        """The passages nearest in meaning to ``text`` (chunk id, cosine distance), kept
        for the next keystrokes until the index changes."""
        self._thread_caches()  # empties the kept ones if another process changed it
        key = (text, None if allowed is None else frozenset(allowed),
               self.index.content_stamp())
        found = self._nearest.get(key)
        if found is None:
            found = self._knn(self.embed_query(text), self.ranking.dense_k, allowed)
            self._nearest.put_many({key: found})
        return found

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
                (tag, like_escape(tag) + "/%"))}
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
        return sorted(((c, dist[e]) for c, e in self._vector_chunks(list(dist))),
                      key=lambda x: (x[1], x[0]))

    def _bm25(self, q: Query, allowed: set[int] | None) -> list[tuple[int, float]]:
        """(chunk id, BM25 score, higher is better) for the OR of the query's words, from
        the in-memory keyword copy when it can answer, else from FTS5; the commonest words
        are left out once the chunks holding them exceed a budget."""
        terms = self.query_terms(q)
        if not terms:
            return []
        r = self.ranking
        copy = self._keyword_copy(terms) if allowed is None else None
        # FTS5 scores every chunk that holds any of the words: the commonest cost the most
        # and weigh the least (FTS5 floors the IDF of a word in half the chunks near
        # zero). Rarest first, words join while the chunks they hold fit the budget.
        budget = r.keyword_row_budget if copy is not None else r.bm25_row_budget
        kept, rows = [], 0
        for t in sorted(terms, key=lambda t: t.df):
            if kept and rows + t.df > budget:
                break
            kept.append(t)
            rows += t.df
        if copy is not None:
            return copy.bm25([(t.tokens[0], t.prefix) for t in kept], r.bm25_k)
        match = " OR ".join(t.phrase for t in kept)
        return [(c, -s) for c, s in self.index.bm25(match, r.bm25_k, r.bm25_columns,
                                                     notes=allowed)]

    def _keyword_copy(self, terms: list[QueryTerm]) -> KeywordIndex | None:
        """The in-memory keyword copy, when it scores as FTS5 would for these words: built
        with this ranking's column weights, and every word a single term."""
        copy = self.index.keywords()
        if copy is None or copy.weights != tuple(self.ranking.bm25_columns):
            return None
        return copy if all(len(t.tokens) == 1 for t in terms) else None

    def query_terms(self, q: Query) -> list[QueryTerm]:
        """The query's distinct words as FTS5 indexed them, with how rare each is."""
        local = self._thread_caches()
        if local.terms_for is not None and local.terms_for[0] == q:
            return local.terms_for[1]
        vocab = self.index.vocabulary()
        tokens = local.tokens
        out = []
        for word, phrase in zip(dict.fromkeys(w for w in q.words if w),
                                fts_terms(q.words, q.partial)):
            prefix = phrase.endswith("*")
            found = tuple(tokens.prefix(word) if prefix else tokens.terms(word, query=True))
            if not found:
                continue
            dfs = [vocab.df(t) for t in found[:-1]]
            dfs.append(vocab.prefix_df(found[-1]) if prefix else vocab.df(found[-1]))
            out.append(QueryTerm(word, phrase, found, prefix, min(dfs), vocab.idf(min(dfs))))
        local.terms_for = (q, out)
        return out

    def coverage(self, q: Query, chunk_ids: list[int]) -> tuple[dict[int, float], float]:
        """For each chunk, the share of the query's IDF mass that it matches (0..1), and
        that mass (the sum of the IDFs of the query's words).

        A chunk that holds every query word scores 1; one that holds only a common word
        scores near 0. This is what separates a real keyword hit from the noise an
        OR-of-words query drags in when the words are the user's, not the note's."""
        terms = self.query_terms(q)
        if not terms or not chunk_ids:
            return {}, 0.0
        total = sum(t.idf for t in terms) or 1.0
        copy = self._keyword_copy(terms)
        if copy is not None:  # from the posting lists: no passage read or tokenized
            share = np.zeros(len(chunk_ids))
            positions = copy.positions(chunk_ids)
            for t in terms:
                share += copy.holds(positions, t.tokens[0], t.prefix) * (t.idf / total)
            return dict(zip(chunk_ids, share.tolist())), total
        # Without the copy: from the chunks' tokenized text (only here are a typed word's
        # completions needed, so only here are they listed).
        held = self._chunk_terms(chunk_ids)
        vocab = self.index.vocabulary()
        completions = {t.word: frozenset(vocab.starting_with(t.tokens[-1]))
                       for t in terms if t.prefix}
        cover = {}
        for chunk_id in chunk_ids:
            words = held.get(chunk_id, frozenset())
            cover[chunk_id] = sum(t.idf for t in terms
                                  if t.held_by(words, completions.get(t.word, frozenset()))
                                  ) / total
        return cover, total

    def _chunk_terms(self, chunk_ids: list[int]) -> dict[int, frozenset[str]]:
        """The index terms of each chunk, as FTS5 tokenized its four columns (terms
        interned, kept for typing's next keystrokes; see ``_thread_caches``)."""
        tokens = self._thread_caches().tokens
        found = self._chunk_term_cache.get_many(chunk_ids)
        missing = [c for c in chunk_ids if c not in found]
        if missing:
            fresh = {chunk_id: frozenset(map(sys.intern, tokens.terms("\n".join(columns))))
                     for chunk_id, *columns in self.index.keyword_columns(missing)}
            self._chunk_term_cache.put_many(fresh)
            found.update(fresh)
        return found

    def _thread_caches(self) -> threading.local:
        """This thread's view of the index: its tokenizer and the last query's terms.

        When this thread's connection sees the index change, the caches of what typing
        asks for again and again (chunks' terms, notes' signatures, nearest passages;
        shared by all threads, since per-thread copies grew the daemon by 130 MB under
        load at 100k chunks) are emptied: chunk and note ids may be reused. Per thread,
        because each thread reads through its own connection and ``data_version`` counts
        per connection."""
        db = self.index.db
        generation = (id(db), db.execute("PRAGMA data_version").fetchone()[0],
                      db.total_changes())
        local = self._local
        if getattr(local, "generation", None) != generation:
            if getattr(local, "db", None) is not db:
                local.db, local.tokens = db, Tokens(db)
            local.generation = generation
            self._chunk_term_cache.clear()
            self._signature_cache.clear()
            self._nearest.clear()
            local.terms_for = None
        return local

    def _fuse(self, q: Query, vector: np.ndarray | None, dense: list[tuple[int, float]],
              lexical: list[tuple[int, float]]) -> dict[int, float]:
        """Chunk scores from both retrievers (see ``Ranking``).

        Convex combination over the union of both candidate lists:
        ``dense_share * cosine (min-max scaled over the candidates) + (1 - dense_share) *
        BM25 / best BM25 * trust``. ``trust`` is how much a keyword match is worth: full
        when the chunk holds most of the query's information (coverage near 1: the exact
        words), or a lot of it in absolute terms (a long query matched on many rare
        words), and nothing for a match on one word of a short paraphrase, so keyword
        noise cannot push down the note the model found."""
        if not lexical:
            return {c: 1.0 - d for c, d in dense}
        best_bm25 = max(s for _, s in lexical) or 1.0
        if vector is None:
            return {c: s / best_bm25 for c, s in lexical}
        r = self.ranking
        cosine = {c: 1.0 - d for c, d in dense}
        cosine.update(self._cosines(vector, [c for c, _ in lexical if c not in cosine]))
        if not cosine:
            return {c: s / best_bm25 for c, s in lexical}
        low, high = min(cosine.values()), max(cosine.values())
        spread = (high - low) or 1.0
        scores = {c: r.dense_share * (v - low) / spread for c, v in cosine.items()}
        cover, mass = self.coverage(q, [c for c, _ in lexical])
        for chunk_id, score in lexical:
            if chunk_id not in scores:
                # Gone since the keyword side found it (a sync committed in between):
                # nothing to rank or show.
                continue
            share = cover.get(chunk_id, 0.0)
            trust = max(ramp(share, r.coverage_floor, 1.0) ** r.coverage_power,
                        ramp(share * mass, r.matched_idf_low, r.matched_idf_high))
            scores[chunk_id] += (1.0 - r.dense_share) * score / best_bm25 * trust
        return scores

    def _cosines(self, vector: np.ndarray, chunk_ids: list[int]) -> dict[int, float]:
        """Exact cosine to the query for chunks the k-NN search did not return."""
        if not chunk_ids:
            return {}
        rows = [(c, e) for c, _, e in self._owners(chunk_ids)]
        found, matrix = self.index.vector_matrix([r[1] for r in rows])
        if not len(matrix):
            return {}
        sims = matrix @ np.asarray(vector, dtype=np.float32)
        return dict(zip((r[0] for r, f in zip(rows, found) if f), sims.tolist()))

    # -- ids: from the keyword copy when it is current, else from SQLite ------------------

    def _vector_chunks(self, vector_ids: list[int]) -> Iterable[tuple[int, int]]:
        """(chunk id, embedding id) of every chunk stored with one of ``vector_ids``."""
        copy = self.index.keywords()
        if copy is not None:
            at = copy.chunks_of_vectors(vector_ids)
            return zip(copy.chunk_ids[at].tolist(), copy.vectors[at].tolist())
        return self.index.db.execute(
            "SELECT id, embedding FROM chunks WHERE embedding IN "
            "(SELECT value FROM json_each(?))", (json.dumps(vector_ids),))

    def _owners(self, chunk_ids: list[int]) -> list[tuple[int, int, int]]:
        """(chunk id, note row, embedding id) of those of ``chunk_ids`` still indexed."""
        copy = self.index.keywords()
        if copy is not None:
            notes, vectors = copy.owners(chunk_ids)
            return [(c, n, e) for c, n, e in zip(chunk_ids, notes.tolist(), vectors.tolist())
                    if n >= 0]
        return self.index.db.execute(
            "SELECT id, note, embedding FROM chunks WHERE id IN "
            "(SELECT value FROM json_each(?))", (json.dumps(chunk_ids),)).fetchall()

    def _note_vectors(self, notes: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(note row, embedding id) of every chunk of ``notes``, grouped by note, so each
        note's passages are one run of rows."""
        copy = self.index.keywords()
        if copy is not None:
            at = copy.chunks_of_notes(notes)
            return copy.notes[at], copy.vectors[at]
        rows = self.index.db.execute(
            "SELECT note, embedding FROM chunks WHERE note IN "
            "(SELECT value FROM json_each(?)) ORDER BY note", (json.dumps(notes),)
        ).fetchall()
        return (np.array([r[0] for r in rows], dtype=np.int64),
                np.array([r[1] for r in rows], dtype=np.int64))

    # -- grouping and presentation -------------------------------------------------------

    def _first_chunk(self, note_rowid: int) -> int | None:
        row = self.index.db.execute(
            "SELECT id FROM chunks WHERE note = ? ORDER BY seq LIMIT 1", (note_rowid,)
        ).fetchone()
        return row[0] if row else None

    def _hits(self, scores: dict[int, float], q: Query, limit: int) -> list[Hit]:
        if not scores:
            return []
        # A note is as good as its best passage (adding its other passages' scores was
        # measured and lost: SciFact train nDCG@10 0.739 -> 0.734 at a quarter weight).
        best: dict[int, int] = {}  # note -> its best chunk
        for chunk_id, note, _ in self._owners(list(scores)):
            if note not in best or scores[chunk_id] > scores[best[note]]:
                best[note] = chunk_id
        # Equal scores in chunk order: a stable order for callers and tests.
        ordered = sorted(best.items(), key=lambda item: (-scores[item[1]], item[1]))
        position = {note: i for i, (note, _) in enumerate(ordered)}
        # Mean vectors for the notes of each batch of hit rows as it is read: most
        # searches stop within the first (0.9 ms for 50 notes at 100k chunks).
        signatures: dict[int, np.ndarray | None] = {}
        hits: list[Hit] = []
        seen: set[str] = set()
        shown = _Shown(self.ranking, limit)
        # Snippets favour the sentence with the query's rarer words.
        weights = {t.word: t.idf for t in self.query_terms(q)}
        picker = SnippetPicker(q.words, q.partial, weights)
        for row in self._hit_rows([chunk for _, chunk in ordered], limit + 5):
            (chunk_id, note, heading, url, text, embedding, note_id, title, source, kind, path,
             tags, modified, archived, content_hash) = row
            # Identical and near-identical notes (the same import twice) show once.
            dup_keys = {f"c:{content_hash}", f"e:{embedding}"}
            if dup_keys & seen:
                continue
            if note not in signatures:
                at = position.get(note)  # None: the chunk moved note since (a sync)
                window = [note] if at is None else [
                    n for n, _ in ordered[at:at + limit + 5] if n not in signatures]
                found = self._signatures(window)
                signatures.update({n: found.get(n) for n in window})
            signature = signatures[note]
            if signature is not None and shown.near_duplicate(signature, title):
                continue
            seen |= dup_keys
            if signature is not None:
                shown.add(signature, title)
            passage = clean_passage(text)
            hits.append(Hit(
                note_id=note_id, title=title, source=source, kind=kind, url=url, path=path,
                tags=json.loads(tags), heading_path=heading, snippet=picker.pick(passage),
                passage=passage, score=scores[chunk_id], modified=modified,
                archived=bool(archived),
            ))
            if len(hits) >= limit:
                break
        return hits

    def _hit_rows(self, chunk_ids: list[int], batch: int) -> Iterator[tuple]:
        """Everything a hit shows, for ``chunk_ids`` in order, read a batch at a time:
        most searches stop after the first (only duplicates make them read on)."""
        for start in range(0, len(chunk_ids), batch):
            part = chunk_ids[start:start + batch]
            rows = {r[0]: r for r in self.index.db.execute(
                "SELECT c.id, c.note, c.heading_path, c.url, c.text, c.embedding, n.note_id, "
                "n.title, n.source, n.kind, n.path, n.tags, n.modified, n.archived, "
                "n.content_hash FROM chunks c JOIN notes n ON n.id = c.note "
                "WHERE c.id IN (SELECT value FROM json_each(?))", (json.dumps(part),))}
            yield from (rows[c] for c in part if c in rows)

    def _signatures(self, notes: list[int]) -> dict[int, np.ndarray]:
        """Each note's mean passage vector, unit length: what near-duplicates share."""
        if not notes:
            return {}
        self._thread_caches()
        found = self._signature_cache.get_many(notes)
        missing = [n for n in notes if n not in found]
        if missing:
            notes_of, vectors = self._note_vectors(missing)
            stored, matrix = self.index.vector_matrix(vectors)
            fresh = {}
            if len(matrix):
                owners = notes_of[stored]
                starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
                sums = np.add.reduceat(matrix, starts, axis=0)
                sums /= np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
                # A row of its own for each: a view would keep its whole batch alive for as
                # long as the cache keeps any one note of it.
                fresh = dict(zip(owners[starts].tolist(), (row.copy() for row in sums)))
            self._signature_cache.put_many(fresh)
            found.update(fresh)
        return found


class SharedLRU(Generic[K, V]):
    """A small least-recently-used map, safe to share between the worker threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def get_many(self, keys: Iterable[K]) -> dict[K, V]:
        with self._lock:
            found = {k: self._items[k] for k in keys if k in self._items}
            for k in found:
                self._items.move_to_end(k)
        return found

    def put_many(self, items: dict[K, V]) -> None:
        with self._lock:
            self._items.update(items)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class _Shown:
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
            self.titles.append(_title_key(title))

    def near_duplicate(self, signature: np.ndarray, title: str) -> bool:
        if not self.titles:
            return False
        r = self.ranking
        sims = self.vectors[: len(self.titles)] @ signature
        if float(sims.max()) >= r.duplicate_similarity:
            return True
        key = _title_key(title)
        return any(other == key and sim >= r.duplicate_similarity_same_title
                   for other, sim in zip(self.titles, sims.tolist()))


_COPY_SUFFIX = re.compile(r"(?:\s*\(\d+\)|\s+copy(?:\s+\d+)?)$")


@functools.lru_cache(maxsize=4096)
def _title_key(title: str) -> str:
    """A title as a duplicated import keeps it: case, punctuation and " (1)" dropped."""
    return " ".join(re.findall(r"\w+", _COPY_SUFFIX.sub("", title.strip().lower())))


def ramp(x: float, low: float, high: float) -> float:
    """0 below ``low``, 1 above ``high``, linear between."""
    return min(1.0, max(0.0, (x - low) / (high - low)))


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
            self.patterns.append((stem, re.compile(r"\b" + re.escape(stem), re.IGNORECASE),
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

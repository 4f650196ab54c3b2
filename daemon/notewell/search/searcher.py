"""Ranking: from a typed query to a list of notes, each once, with its best passage.

Two retrievers, run at chunk level: BM25 over FTS5 (the OR of the query's words, the word
still being typed as a prefix) and dense k-NN over the chunk vectors and the notes' title
vectors (a note's best passage gains half its title's lead over it: ``with_titles``).
Their candidates are scored together (``fusion``); each note then appears once, with its
best chunk and the sentence that matches as snippet, and near-identical notes (the same
import twice) show once (``presentation``). The unfinished last word is completed from the
keyword hits before the model reads it (``terms``). Filters from the query (``#tag``,
``in:source``, dates) restrict both retrievers before ranking, so a filtered search is
exact (``filters``); a filter that admits most passages (``since:1y``) is applied to the
unfiltered retrievers' best, fetched deeper, which finds the same (``broad``). The
defaults were tuned on SciFact's train split and the demo golden set (see README, "Search
quality").

``Searcher`` orchestrates these and keeps what typing asks for again and again; every
read goes through one read view of the index (``index.reads.Reads``), taken at the start
of a request, which fixed then whether an in-memory copy or SQLite answers each read: a
request binds the generation's searcher to its view (``on``); an unbound one takes a view
at the start of each ``run``/``similar``/``recent`` (one-shot callers, tests). May import
the other modules of ``search``, ``index.reads``, ``index.lru``, ``notes``, ``clock`` and
the ``model.embedding.Embedder`` interface.
"""

from __future__ import annotations

import copy
import math
import threading
from dataclasses import dataclass, field

import numpy as np

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.index.database import Index
from notewell.index.lru import SharedLRU
from notewell.index.reads import Reads, RowBudget
from notewell.model.embedding import Embedder, embed_queries
from notewell.notes import Hit, id_forms
from notewell.search import filters, fusion, lexicon, terms
from notewell.search.presentation import (
    Shown,
    Signatures,
    SnippetPicker,
    best_chunks,
    clean_passage,
    to_hit,
)
from notewell.search.query import Query, parse
from notewell.search.ranking import Ranking
from notewell.search.spans import SpanFinder, marked, more_passages
from notewell.search.terms import QueryTerm

# The k-NN's passages (chunk id, cosine distance) and titles (note row, cosine distance).
Nearest = tuple[list[tuple[int, float]], list[tuple[int, float]]]


@dataclass
class SearchResult:
    query: Query
    hits: list[Hit]
    notices: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"hits": [h.to_dict() for h in self.hits], "notices": self.notices}


class Searcher:
    def __init__(self, index: Index, embedder: Embedder, ranking: Ranking | None = None,
                 cache_size: int = 256, words: lexicon.Lexicon | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.index = index
        self.clock = clock  # "now" for typed relative dates (7d): the engine's
        self._bound: Reads | None = None  # the request's view (``on``)
        self.embedder = embedder
        self.ranking = ranking or Ranking()
        # Typing re-sends the same text again and again (the completed word stays the
        # same for several keystrokes): its vector, and its nearest passages while the
        # index's vectors are unchanged.
        self._query_vectors: SharedLRU[str, np.ndarray] = SharedLRU(cache_size)
        self._nearest: SharedLRU[tuple, Nearest] = SharedLRU(64)
        self._signatures = Signatures()
        self._local = threading.local()
        # How common words are, for typos: the process's (``lexicon.shared``, read when a
        # query first holds a word that may be a typo) unless given.
        self.words = words

    # -- the read view ----------------------------------------------------------------------

    @property
    def reads(self) -> Reads:
        """The request's read view when bound (``on``); else a fresh view at each use."""
        return self._bound if self._bound is not None else self.index.view()

    def on(self, reads: Reads) -> Searcher:
        """This searcher for one request: every read through ``reads`` (a view of
        ``index``), the caches shared with this one."""
        bound = copy.copy(self)
        bound._bound = reads
        return bound

    # -- public ---------------------------------------------------------------------------

    def run(self, q: Query, limit: int = 20, mode: str = "hybrid", passages: int = 1
            ) -> SearchResult:
        """Search for an already parsed query (``query.parse`` or ``query.literal``).
        Typed dates not read yet are read on ``clock``; one that cannot be read raises
        ``dates.DateError`` (``Engine.search`` makes it a notice). ``passages``: how many
        of each note's best passages its hit lists (``Hit.passages``; the launcher's
        keystroke shows one)."""
        if self._bound is None:
            return self.on(self.index.view()).run(q, limit, mode, passages)
        if q.dates:
            q = filters.with_dates(q, self.clock)
        allowed, notices = self.allowed(q)
        if allowed is not None and not allowed:
            return SearchResult(q, [], notices)
        if q.similar_to:
            return SearchResult(q, self.similar(q.similar_to, limit, allowed), notices)
        if q.empty:
            return SearchResult(q, self.recent(limit, allowed), notices)
        share = self.broad(allowed)
        lexical = self.bm25(q, allowed, share) if mode in ("hybrid", "bm25") else []
        vector = None
        if mode in ("hybrid", "dense"):
            text = self.dense_text(q, [c for c, _ in lexical])
            vector = self.embed_query(text) if text.strip() else None
        dense, titles = self.nearest(text, allowed, share) if vector is not None else ([], [])
        scores = self._fuse(q, vector, dense, lexical, titles)
        return SearchResult(q, self._hits(scores, q, limit, passages), notices)

    def recent(self, limit: int = 20, allowed: set[int] | None = None) -> list[Hit]:
        if self._bound is None:
            return self.on(self.index.view()).recent(limit, allowed)
        chunk_ids = [self.reads.first_chunk(n) for n in self.reads.recent_notes(limit, allowed)]
        scores = {c: 1.0 / (n + 1) for n, c in enumerate(chunk_ids) if c is not None}
        return self._hits(scores, parse(""), limit)

    def similar(self, note_id: str, limit: int = 20, allowed: set[int] | None = None
                ) -> list[Hit]:
        """Notes closest in meaning to ``note_id``, itself excluded: candidates are the
        notes of the passages nearest to its mean passage vector, ranked by how close
        their own mean vector is (note to note, so one stray passage does not decide)."""
        if self._bound is None:
            return self.on(self.index.view()).similar(note_id, limit, allowed)
        row = next((r for r in map(self.reads.note_row, id_forms(note_id)) if r is not None),
                   None)
        own = None if row is None else self.signatures([row]).get(row)
        if own is None:
            return []
        return self.near(own, limit, allowed, exclude=row)

    def near(self, own: np.ndarray, limit: int = 20, allowed: set[int] | None = None,
             exclude: int | None = None) -> list[Hit]:
        """Notes closest in meaning to ``own`` (a unit vector: a note's mean passage
        vector, or a text's, ``Engine.related``), the note row ``exclude`` left out; the
        ranking ``similar`` describes."""
        extra = self.reads.chunk_count(exclude) if exclude is not None else 0
        nearest = self.reads.nearest_chunks(own, self.ranking.dense_k + extra, allowed)
        chunk_note = {c: n for c, n, _ in self.reads.owners([c for c, _ in nearest])}
        first: dict[int, int] = {}  # candidate note -> its passage nearest to ``own``
        for chunk_id, _ in nearest:
            note = chunk_note.get(chunk_id)
            if note is not None and note != exclude:
                first.setdefault(note, chunk_id)
        signatures = self.signatures(list(first))
        scores = {chunk_id: float(signatures[note] @ own) for note, chunk_id in first.items()
                  if note in signatures}
        return self._hits(scores, parse(""), limit)

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector (kept for the next keystrokes)."""
        vec = self._query_vectors.get(text)
        if vec is None:
            vec = embed_queries(self.embedder, [text])[0]
            self._query_vectors.put_many({text: vec})
        return vec

    def nearest(self, text: str, allowed: set[int] | None, share: float | None = None
                ) -> Nearest:
        """The passages nearest in meaning to ``text`` (chunk id, cosine distance) and the
        notes whose title vectors are (note row, cosine distance), of the ``allowed``
        notes when given (``share``: of the passages they hold, when broad enough to
        filter the unfiltered search's best, see ``broad``), kept for the next
        keystrokes until the index changes."""
        k = self.ranking.dense_k
        if allowed is not None and share is not None:
            deep = self._deep(k, share)
            chunks, titles = self._nearest_of(text, None, deep)
            # Titles took some of the ``deep`` vectors: only fewer of both is all there was.
            kept = self._survivors(chunks, allowed, k, deep, len(chunks) + len(titles))
            if kept is not None:  # distances as exact as the filtered k-NN's
                vector = self.embed_query(text)
                chunks = self.reads.exact_nearest(vector, kept, k)
                titles = self.reads.exact_titles(vector, [t for t in titles if t[0] in allowed])
                return chunks, _within_reach(titles, chunks, k)
        chunks, titles = self._nearest_of(text, allowed, k)
        return chunks, titles if allowed is None else _within_reach(titles, chunks, k)

    def _nearest_of(self, text: str, allowed: set[int] | None, k: int) -> Nearest:
        self._thread_caches()  # empties the kept ones if another process changed it
        key = (text, None if allowed is None else frozenset(allowed), k,
               self.reads.content_stamp())
        found = self._nearest.get(key)
        if found is None:
            found = self.reads.nearest(self.embed_query(text), k, allowed,
                                       titles=self.ranking.title_lead > 0)
            self._nearest.put_many({key: found})
        return found

    # -- retrieval --------------------------------------------------------------------------

    def allowed(self, q: Query) -> tuple[set[int] | None, list[str]]:
        """The note rows the query's filters allow (``None``: no filter) and notices for
        filters that match nothing."""
        return filters.allowed(q, self.reads)

    def dense_text(self, q: Query, lexical: list[int] = ()) -> str:
        """What the model reads for ``q``: see ``terms.dense_text``."""
        return terms.dense_text(q, lexical, self.reads, self.ranking, self.query_terms(q))

    def broad(self, allowed: set[int] | None) -> float | None:
        """The share of the notes ``allowed`` when a filter admits so many
        (``Ranking.post_filter_share``) that the unfiltered retrievers' best, filtered,
        are cheaper than the filtered retrievers; else None. Notes, not passages: a
        share of notes costs nothing to count, and a wrong guess only costs a fallback."""
        if allowed is None:
            return None
        share = self.reads.note_share(allowed)
        return share if share is not None and share >= self.ranking.post_filter_share else None

    def bm25(self, q: Query, allowed: set[int] | None = None, share: float | None = None
             ) -> list[tuple[int, float]]:
        """(chunk id, BM25 score, higher is better) for the OR of the query's words, over
        the ``allowed`` notes when given (``share``: see ``nearest``); the commonest
        words are left out once the chunks holding them exceed the budget
        (``Ranking.*_row_budget``)."""
        r = self.ranking
        found = self.query_terms(q)
        if allowed is not None and share is not None:
            deep = self._deep(r.bm25_k, share)
            # The filtered path's budget (FTS5's), so the same words are scored.
            budget = RowBudget(r.bm25_row_budget, r.bm25_row_budget)
            kept = self._survivors(self.reads.bm25(found, deep, r.bm25_columns, budget),
                                   allowed, r.bm25_k, deep)
            if kept is not None:
                return kept[:r.bm25_k]
        return self.reads.bm25(found, r.bm25_k, r.bm25_columns,
                               RowBudget(r.keyword_row_budget, r.bm25_row_budget), allowed)

    def _deep(self, k: int, share: float) -> int:
        """How deep to fetch unfiltered for ``k`` survivors of a filter admitting
        ``share`` of the passages."""
        return math.ceil(k / share * self.ranking.post_filter_margin)

    def _survivors(self, found: list[tuple[int, float]], allowed: set[int], k: int,
                   deep: int, fetched: int | None = None) -> list[tuple[int, float]] | None:
        """Those of ``found`` (an unfiltered retriever's best ``deep``, best first) that
        belong to ``allowed`` notes: their best ``k`` are the filtered retriever's when
        at least ``k`` survive, or when what was ``fetched`` (default: ``found``) is all
        there was. Else None."""
        note = {c: n for c, n, _ in self.reads.owners([c for c, _ in found])}
        kept = [(c, s) for c, s in found if note.get(c) in allowed]
        fetched = len(found) if fetched is None else fetched
        return kept if len(kept) >= k or fetched < deep else None

    def query_terms(self, q: Query) -> list[QueryTerm]:
        """The query's distinct words as FTS5 indexed them, with how rare each is (kept
        for the last query on each thread: a search asks several times)."""
        local = self._thread_caches()
        if local.terms_for is not None and local.terms_for[0] == q:
            return local.terms_for[1]
        words = self.words
        found = terms.query_terms(q, self.reads, self.ranking,
                                  getattr(self.embedder, "knows", None),
                                  lexicon.shared if words is None else lambda: words)
        local.terms_for = (q, found)
        return found

    def coverage(self, q: Query, chunk_ids: list[int]) -> tuple[dict[int, float], float]:
        """For each chunk, the share of the query's IDF mass that it matches (0..1), and
        that mass (the sum of the IDFs of the query's words).

        A chunk that holds every query word scores 1; one that holds only a common word
        scores near 0. This is what separates a real keyword hit from the noise an
        OR-of-words query drags in when the words are the user's, not the note's."""
        found = self.query_terms(q)
        if not found or not chunk_ids:
            return {}, 0.0
        return fusion.coverage(found, self.reads.holds(found, chunk_ids), chunk_ids)

    def cosines(self, vector: np.ndarray, chunk_ids: list[int]) -> dict[int, float]:
        """Exact cosine to the query for chunks the k-NN search did not return."""
        if not chunk_ids:
            return {}
        return self._cosines(vector, [(c, e) for c, _, e in self.reads.owners(chunk_ids)])

    def _cosines(self, vector: np.ndarray, rows: list[tuple[int, int]]) -> dict[int, float]:
        """Cosine to the query of each (key, vector id) in ``rows`` whose vector is stored."""
        if not rows:
            return {}
        found, matrix = self.reads.vector_matrix([r[1] for r in rows])
        if not len(matrix):
            return {}
        sims = matrix @ np.asarray(vector, dtype=np.float32)
        return dict(zip((r[0] for r, f in zip(rows, found) if f), sims.tolist()))

    def with_titles(self, vector: np.ndarray, cosine: dict[int, float],
                    titles: list[tuple[int, float]]) -> dict[int, float]:
        """``cosine`` (chunk -> cosine) with the title vectors the k-NN found (``titles``:
        note row, cosine distance) counted: each such note's best passage's cosine raised
        by ``Ranking.title_lead`` of the title's lead over it, a note found by its title
        alone joining with its best passage. The title itself is never a candidate: what
        is ranked and shown is a passage. The titles of other candidates are farther than
        every vector found; counting their leads too (an exact cosine each) changed no
        ranking on the golden sets or SciFact, and cost 0.4 ms at 100k chunks."""
        lead = self.ranking.title_lead
        if not lead or not titles:
            return cosine
        title = {n: 1.0 - d for n, d in titles}
        best: dict[int, int] = {}  # titled note -> its passage of the highest cosine
        for chunk_id, note, _ in self.reads.owners(list(cosine)):
            if note in title and (note not in best or cosine[chunk_id] > cosine[best[note]]):
                best[note] = chunk_id
        out = dict(cosine)
        unseen = [n for n in title if n not in best]
        if unseen:  # found by their titles alone: their passages' cosines
            rows = self.reads.note_chunks(unseen)
            sims = self._cosines(vector, [(c, e) for c, _, e in rows])
            for chunk_id, note, _ in rows:
                if chunk_id in sims and (note not in best or sims[chunk_id] > out[best[note]]):
                    best[note] = chunk_id
                    out[chunk_id] = sims[chunk_id]
            # Only each note's best passage joins: the others would widen the cosines'
            # range that fusion scales by.
            keep = {best[n] for n in unseen if n in best}
            out = {c: v for c, v in out.items() if c in cosine or c in keep}
        for note, chunk_id in best.items():
            if title[note] > out[chunk_id]:
                out[chunk_id] += lead * (title[note] - out[chunk_id])
        return out

    def _fuse(self, q: Query, vector: np.ndarray | None, dense: list[tuple[int, float]],
              lexical: list[tuple[int, float]], titles: list[tuple[int, float]] = ()
              ) -> dict[int, float]:
        """Chunk scores from both retrievers: ``fusion.combine`` over the union of both
        candidate lists, with exact cosines for the keyword-only ones and each note's
        title vector counted (``with_titles``)."""
        if vector is None:
            return fusion.keyword_only(lexical) if lexical else {}
        cosine = {c: 1.0 - d for c, d in dense}
        if lexical:
            cosine.update(self.cosines(vector, [c for c, _ in lexical if c not in cosine]))
        cosine = self.with_titles(vector, cosine, list(titles))
        if not lexical:
            return cosine
        if not cosine:
            return fusion.keyword_only(lexical)
        cover, mass = self.coverage(q, [c for c, _ in lexical])
        return fusion.combine(self.ranking, cosine, lexical, cover, mass)

    def _thread_caches(self) -> threading.local:
        """This thread's last query terms; and, when this thread sees the index change,
        the caches of what typing asks for again and again (notes' signatures, nearest
        passages; shared by all threads) emptied: chunk and note ids may be reused."""
        stamp = self.reads.stamp()
        local = self._local
        if getattr(local, "stamp", None) != stamp:
            local.stamp = stamp
            self._signatures.clear()
            self._nearest.clear()
            local.terms_for = None
        return local

    # -- grouping and presentation -------------------------------------------------------

    def signatures(self, notes: list[int]) -> dict[int, np.ndarray]:
        """Each note's mean passage vector, unit length: what near-duplicates share."""
        if not notes:
            return {}
        self._thread_caches()
        return self._signatures.of(self.reads, notes)

    def _hits(self, scores: dict[int, float], q: Query, limit: int, passages: int = 1
              ) -> list[Hit]:
        if not scores:
            return []
        owners = self.reads.owners(list(scores))
        ordered = best_chunks(scores, owners)
        position = {note: i for i, (note, _) in enumerate(ordered)}
        # Mean vectors for the notes of each batch of hit rows as it is read: most
        # searches stop within the first (0.9 ms for 50 notes at 100k chunks).
        signatures: dict[int, np.ndarray | None] = {}
        hits: list[Hit] = []
        showing: list[tuple[int, int]] = []  # each hit's note row and passage
        seen: set[str] = set()
        shown = Shown(self.ranking, limit)
        # Snippets favour the sentence with the query's rarer words (a typo's as meant).
        found = self.query_terms(q)
        weights = {t.word: t.idf for t in found}
        words = q.words
        fixes = [t for t in found if t.correction]
        if fixes:
            weights.update({t.correction: t.idf for t in fixes})
            typed = next((t.correction for t in fixes if t.prefix), None)
            words = (tuple(t.correction for t in fixes if not t.prefix)
                     + ((*q.words[:-1], typed) if typed else q.words))
        picker = SnippetPicker(words, q.partial, weights)
        marks = SpanFinder(found, words)
        chunks, batch = [chunk for _, chunk in ordered], limit + 5
        # Read a batch of passages at a time: most searches stop after the first (only
        # duplicates make them read on).
        for start in range(0, len(chunks), batch):
            for p in self.reads.passages(chunks[start:start + batch]):
                # Identical and near-identical notes (the same import twice) show once.
                dup_keys = {f"c:{p.content_hash}", f"e:{p.vector}"}
                if dup_keys & seen:
                    continue
                if p.note not in signatures:
                    at = position.get(p.note)  # None: the chunk moved note since (a sync)
                    window = [p.note] if at is None else [
                        n for n, _ in ordered[at:at + batch] if n not in signatures]
                    found = self.signatures(window)
                    signatures.update({n: found.get(n) for n in window})
                signature = signatures[p.note]
                if signature is not None and shown.near_duplicate(signature, p.title):
                    continue
                seen |= dup_keys
                if signature is not None:
                    shown.add(signature, p.title)
                passage = clean_passage(p.text)
                showing.append((p.note, p.chunk_id))
                # One passage a hit is the launcher's list: its snippet tokenized, not
                # the whole passage (``marked``), on every keystroke.
                hits.append(marked(to_hit(p, picker.pick(passage), passage,
                                          scores[p.chunk_id]), marks, self.reads,
                                   whole=passages > 1))
                if len(hits) >= limit:
                    break
            if len(hits) >= limit:
                break
        return more_passages(hits, showing, scores, owners, passages, marks, self.reads)


def _within_reach(titles: list[tuple[int, float]], chunks: list[tuple[int, float]], k: int
                  ) -> list[tuple[int, float]]:
    """A filter's title candidates, the same whichever path found them: nearer than its
    ``k``-th passage (all of them when it has fewer), at most ``k``. Strictly nearer: at
    a tie the paths may have cut different vectors."""
    if len(chunks) >= k:
        titles = [t for t in titles if t[1] < chunks[k - 1][1]]
    return titles[:k]

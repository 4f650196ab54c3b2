"""Retrieval evaluation: metrics, golden sets and BEIR datasets, four rankers side by side.

Owns what ``notewell eval`` reports: Recall@5, Recall@10, MRR@10 and nDCG@10 (with
trec_eval semantics), overall and per query type, for the full pipeline (``notewell``),
dense only, FTS5 BM25 only and a naive keyword baseline (each query word matched with
``LIKE``, notes ranked by how many words they contain).

Corpora are indexed through the normal sync path into throw-away indexes under
``$NOTEWELL_HOME/eval/<key>/`` that are kept and reused: vectors are content-addressed,
so a second run embeds nothing, and a chunker change re-chunks without re-embedding
passages whose text did not change. A BEIR corpus becomes notes (title plus text) through
``BeirSource``, an in-memory implementation of the ``Source`` protocol.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from notewell.config import SourceConfig
from notewell.index import store
from notewell.index.database import BuildSettings, Index, IndexMismatch
from notewell.ingest.chunking import ChunkSettings
from notewell.ingest.sync import Syncer
from notewell.model.embedding import Embedder
from notewell.model.files import sha256_file
from notewell.notes import Note, NoteStub
from notewell.search.query import Query, like_escape, literal, parse
from notewell.search.searcher import Ranking, Searcher
from notewell.sources import Source
from notewell.wire import paths

METHODS = ("notewell", "dense", "bm25", "keyword")
MODES = {"notewell": "hybrid", "dense": "dense", "bm25": "bm25"}
METRICS = ("ndcg@10", "recall@5", "recall@10", "mrr@10")
DEPTH = 10  # every reported metric is cut at 10


class EvalError(Exception):
    """The evaluation input cannot be used as given; the message says what to fix."""


@dataclass(frozen=True)
class EvalQuery:
    id: str
    text: str
    relevant: dict[str, int]  # document key -> graded relevance (> 0)
    type: str = "all"


# -- metrics (trec_eval semantics) ------------------------------------------------------------


def ndcg_at(ranked: Sequence[str], qrels: dict[str, int], k: int = DEPTH) -> float:
    """trec_eval ``ndcg_cut.k``: gain is the judged relevance itself (not 2^rel - 1),
    discount log2(rank + 1), and the ideal ranking is built from every judged relevant
    document, retrieved or not. Documents ranked twice count once."""
    gains = [g for g in qrels.values() if g > 0]
    if not gains:
        return 0.0
    dcg = sum(qrels.get(doc, 0) / math.log2(i + 2)
              for i, doc in enumerate(_unique(ranked)[:k]) if qrels.get(doc, 0) > 0)
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(gains, reverse=True)[:k]))
    return dcg / ideal


def recall_at(ranked: Sequence[str], qrels: dict[str, int], k: int) -> float:
    relevant = {d for d, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant & set(_unique(ranked)[:k])) / len(relevant)


def mrr_at(ranked: Sequence[str], qrels: dict[str, int], k: int = DEPTH) -> float:
    """Reciprocal rank of the first relevant document within the top ``k``, else 0."""
    for i, doc in enumerate(_unique(ranked)[:k]):
        if qrels.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def query_metrics(ranked: Sequence[str], qrels: dict[str, int]) -> dict[str, float]:
    return {
        "ndcg@10": ndcg_at(ranked, qrels, 10),
        "recall@5": recall_at(ranked, qrels, 5),
        "recall@10": recall_at(ranked, qrels, 10),
        "mrr@10": mrr_at(ranked, qrels, 10),
    }


def aggregate(per_query: dict[str, dict[str, float]], queries: Sequence[EvalQuery]
              ) -> dict[str, dict[str, float]]:
    """Means over all queries and per query type; a query with no results counts as 0
    (as in BEIR, unlike trec_eval's default of averaging only over answered queries)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for q in queries:
        groups["all"].append(q.id)
        if q.type != "all":
            groups[q.type].append(q.id)
    out = {}
    for name, ids in groups.items():
        out[name] = {m: sum(per_query[i][m] for i in ids) / len(ids) for m in METRICS}
    return out


def _unique(ranked: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


# -- inputs ------------------------------------------------------------------------------------


def load_golden(path: str) -> list[EvalQuery]:
    """``{"id", "query", "relevant": [note ids or paths], "type"}`` per line."""
    queries = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    relevant = row["relevant"]
                    if isinstance(relevant, str):
                        relevant = [relevant]
                    queries.append(EvalQuery(str(row.get("id", n)), str(row["query"]),
                                             {str(r): 1 for r in relevant},
                                             str(row.get("type") or "all")))
                except (ValueError, KeyError, TypeError) as e:
                    raise EvalError(f"{path}:{n}: not a golden-set line ({e}); each line is "
                                    '{"id", "query", "relevant": [...], "type"}') from None
    except FileNotFoundError:
        raise EvalError(f"{path} does not exist; pass a golden set with --golden FILE") from None
    if not queries:
        raise EvalError(f"{path} holds no queries")
    return queries


def load_beir_queries(directory: str, split: str) -> list[EvalQuery]:
    qrels_path = os.path.join(directory, "qrels", f"{split}.tsv")
    if not os.path.exists(qrels_path):
        raise EvalError(f"{qrels_path} is missing: is {directory} a BEIR dataset directory "
                        "(corpus.jsonl, queries.jsonl, qrels/<split>.tsv)?")
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with open(qrels_path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or parts[0] == "query-id":
                continue
            qrels[parts[0]][parts[1]] = int(parts[2])
    texts = {}
    for row in _jsonl(os.path.join(directory, "queries.jsonl")):
        if row["_id"] in qrels:
            texts[row["_id"]] = row["text"]
    missing = set(qrels) - set(texts)
    if missing:
        raise EvalError(f"{len(missing)} queries in {qrels_path} are not in queries.jsonl")
    return [EvalQuery(qid, texts[qid], qrels[qid]) for qid in sorted(qrels, key=_natural)]


def _natural(s: str) -> tuple:
    return (0, int(s), "") if s.isdigit() else (1, 0, s)


def _jsonl(path: str) -> Iterator[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)
    except FileNotFoundError:
        raise EvalError(f"{path} is missing: not a BEIR dataset directory") from None


class BeirSource:
    """A BEIR ``corpus.jsonl`` as a note source: one note per document, titled with the
    document's title, ``note_id`` ``<name>:<doc id>``. Read once, held in memory."""

    kind = "beir"

    def __init__(self, directory: str, name: str = "beir") -> None:
        self.config = SourceConfig(name, "beir", os.path.abspath(directory))
        self.corpus_path = os.path.join(directory, "corpus.jsonl")
        self._docs: dict[str, Note] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def _load_all(self) -> dict[str, Note]:
        if self._docs is None:
            docs = {}
            for row in _jsonl(self.corpus_path):
                note_id = f"{self.name}:{row['_id']}"
                title, text = str(row.get("title") or ""), str(row.get("text") or "")
                fingerprint = hashlib.sha256(f"{title}\x00{text}".encode()).hexdigest()[:16]
                docs[note_id] = Note(note_id=note_id, source=self.name, kind=self.kind,
                                     title=title or row["_id"], text=text,
                                     url=f"beir:{row['_id']}", fingerprint=fingerprint)
            self._docs = docs
        return self._docs

    def scan(self) -> Iterator[NoteStub]:
        for note in self._load_all().values():
            yield NoteStub(note.note_id, note.fingerprint)

    def load(self, note_id: str) -> Note | None:
        return self._load_all().get(note_id)

    def passage_url(self, note: Note, anchor: str | None) -> str:
        return note.url

    def change_token(self) -> str | None:
        return None

    def watch_paths(self) -> list[str]:
        return []


def eval_dir(key: str) -> str:
    return os.path.join(paths.home(), "eval", key)


def eval_index(source: Source, embedder: Embedder, key: str,
               chunker: ChunkSettings | None = None, progress: bool = False) -> Index:
    """The throw-away index for ``source`` under ``$NOTEWELL_HOME/eval/<key>/``, brought up
    to date. Reused across runs; rebuilt beside (keeping its vectors) after a model or
    chunker change."""
    from notewell.engine import rebuild

    chunker = chunker or ChunkSettings()
    directory = paths.ensure_private_dir(eval_dir(key))
    settings = BuildSettings(embedder.fingerprint(), embedder.dim, chunker.fingerprint())
    try:
        index = store.open_current(settings, directory)
    except IndexMismatch:
        final, _ = rebuild([source], embedder, chunker, directory, progress=progress)
        store.remove_old(directory, keep=final)
        index = Index(final, settings)
    else:
        Syncer(index, embedder, chunker).sync(source, progress=progress)
    # As a warm daemon has them, so every query is ranked the same way.
    index.warm_vectors(wait=True)
    index.warm_keywords(wait=True)
    return index


# -- rankers -----------------------------------------------------------------------------------


def keyword_ranking(index: Index, words: Sequence[str], limit: int = DEPTH,
                    allowed: set[int] | None = None) -> list[str]:
    """The naive baseline: each query word matched with ``LIKE '%word%'`` against a note's
    title and passages, notes ranked by how many of the words they contain."""
    words = list(dict.fromkeys(w for w in words if w))[:32]
    if not words:
        return []
    hit = "max(n.title || ' ' || c.text LIKE ? ESCAPE '\\')"
    where = ""
    args: list = [f"%{like_escape(w)}%" for w in words]
    if allowed is not None:
        where = "WHERE c.note IN (SELECT value FROM json_each(?)) "
        args.append(json.dumps(sorted(allowed)))
    rows = index.db.execute(
        f"SELECT n.note_id, {' + '.join([hit] * len(words))} AS hits FROM chunks c "
        f"JOIN notes n ON n.id = c.note {where}GROUP BY c.note HAVING hits > 0 "
        "ORDER BY hits DESC, n.note_id LIMIT ?", (*args, limit))
    return [r[0] for r in rows]


def rank(searcher: Searcher, method: str, q: Query, limit: int = DEPTH) -> list[str]:
    """Note ids, best first, as ``method`` ranks them for ``q``."""
    if method == "keyword":
        allowed, _ = searcher.allowed(q)
        if allowed is not None and not allowed:
            return []
        return keyword_ranking(searcher.index, q.words, limit, allowed)
    if method not in MODES:
        raise EvalError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    return [h.note_id for h in searcher.run(q, limit=limit, mode=MODES[method]).hits]


Identify = Callable[[str], Iterable[str]]


def evaluate(searcher: Searcher, queries: Sequence[EvalQuery],
             methods: Sequence[str] = METHODS, read: Callable[[str], Query] = parse,
             identify: Identify = lambda note_id: (note_id,),
             ) -> dict[str, dict[str, dict[str, float]]]:
    """``{method: {"all" | type: {metric: mean}}}``. ``identify`` maps a ranked note id to
    the keys a qrels file may use for it (a note id, a path); ``read`` turns a query text
    into a ``Query`` (``parse`` for typed queries, ``literal`` for benchmark claims)."""
    results = {}
    parsed = {q.id: read(q.text) for q in queries}
    for method in methods:
        per_query = {}
        for q in queries:
            ranked = [_match(identify(n), q.relevant) for n in rank(searcher, method,
                                                                     parsed[q.id])]
            per_query[q.id] = query_metrics(ranked, q.relevant)
        results[method] = aggregate(per_query, queries)
    return results


def _match(keys: Iterable[str], relevant: dict[str, int]) -> str:
    keys = list(keys)
    return next((k for k in keys if k in relevant), keys[0])


def path_keys(index: Index) -> Identify:
    """A note answers to its note id, its key inside the source (the path relative to a
    Markdown folder) and its absolute path, so golden sets may name notes any of these ways."""
    paths_by_id = dict(index.db.execute("SELECT note_id, path FROM notes").fetchall())

    def identify(note_id: str) -> list[str]:
        keys = [note_id, note_id.split(":", 1)[-1]]
        if paths_by_id.get(note_id):
            keys.append(paths_by_id[note_id])
        return keys

    return identify


# -- runners -----------------------------------------------------------------------------------


def folder_source(directory: str, name: str = "notes",
                  exclude: tuple[str, ...] = ("private/**",)) -> Source:
    from notewell.sources.markdown import MarkdownSource

    if not os.path.isdir(directory):
        raise EvalError(f"{directory} is not a folder of Markdown notes")
    return MarkdownSource(SourceConfig(name, "markdown", os.path.abspath(directory), exclude))


def run_golden(golden: str, index: Index, embedder: Embedder,
               methods: Sequence[str] = METHODS, ranking: Ranking | None = None
               ) -> dict[str, dict[str, dict[str, float]]]:
    queries = load_golden(golden)
    searcher = Searcher(index, embedder, ranking, cache_size=4 * len(queries))
    return evaluate(searcher, queries, methods, parse, path_keys(index))


def run_folder_golden(golden: str, notes_dir: str, embedder: Embedder,
                      methods: Sequence[str] = METHODS, ranking: Ranking | None = None,
                      name: str = "notes", progress: bool = False
                      ) -> dict[str, dict[str, dict[str, float]]]:
    """A golden set over a Markdown folder, indexed into a reused throw-away index."""
    index = folder_index(notes_dir, embedder, name, progress)
    try:
        return run_golden(golden, index, embedder, methods, ranking)
    finally:
        index.close()


def folder_index(notes_dir: str, embedder: Embedder, name: str = "notes",
                 progress: bool = False) -> Index:
    """The reused throw-away index of a Markdown folder (``private/**`` excluded)."""
    key = f"{name}-" + hashlib.sha256(os.path.abspath(notes_dir).encode()).hexdigest()[:16]
    return eval_index(folder_source(notes_dir, name), embedder, key, progress=progress)


def run_demo(embedder: Embedder, methods: Sequence[str] = METHODS,
             ranking: Ranking | None = None, progress: bool = False
             ) -> dict[str, dict[str, dict[str, float]]]:
    """The bundled golden set over the bundled demo notes (source ``demo``)."""
    from notewell.ops.demo import demo_golden_path, demo_notes_dir

    return run_folder_golden(demo_golden_path(), demo_notes_dir(), embedder, methods,
                             ranking, name="demo", progress=progress)


def beir_index(directory: str, embedder: Embedder, progress: bool = False) -> Index:
    name = os.path.basename(os.path.normpath(directory)) or "beir"
    corpus = os.path.join(directory, "corpus.jsonl")
    if not os.path.exists(corpus):
        raise EvalError(f"{corpus} is missing: --beir wants a BEIR dataset directory "
                        "(corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    key = f"{name}-{sha256_file(corpus)[:16]}"
    return eval_index(BeirSource(directory, name), embedder, key, progress=progress)


def run_beir(directory: str, split: str, embedder: Embedder,
             methods: Sequence[str] = METHODS, ranking: Ranking | None = None,
             progress: bool = False) -> dict[str, dict[str, dict[str, float]]]:
    """Rank the whole corpus for every query of ``split``; qrels name documents by id."""
    queries = load_beir_queries(directory, split)
    index = beir_index(directory, embedder, progress=progress)
    try:
        searcher = Searcher(index, embedder, ranking, cache_size=2 * len(queries))
        return evaluate(searcher, queries, methods, literal,
                        lambda note_id: (note_id.split(":", 1)[-1],))
    finally:
        index.close()


# -- output ------------------------------------------------------------------------------------


def to_json(results: dict[str, dict[str, dict[str, float]]]) -> dict:
    return {method: {group: {m: round(v, 4) for m, v in values.items()}
                     for group, values in groups.items()}
            for method, groups in results.items()}


def format_table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """One block per query group, one row per method."""
    lines = []
    groups = list(dict.fromkeys(g for groups in results.values() for g in groups))
    for group in groups:
        lines.append(f"{group}:")
        lines.append(f"  {'method':<10}" + "".join(f"{m:>11}" for m in METRICS))
        for method, values in results.items():
            if group in values:
                lines.append(f"  {method:<10}" + "".join(
                    f"{values[group][m]:>11.3f}" for m in METRICS))
    return "\n".join(lines)


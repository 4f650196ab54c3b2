"""``notewell eval``: the rankers side by side over a corpus and its queries, and the tables.

Four rankers: the full pipeline (``notewell``), dense only, BM25 only and a naive keyword
baseline (each query word matched with ``LIKE``, notes ranked by how many words they
contain). Metrics and query sets are ``metrics``'s, corpora and their indexes
``corpora``'s. May import ``evaluation``'s own modules, ``index``, ``search`` and
``model``; the caller names the files to read (the demo corpus belongs to ``ops``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from notewell.evaluation.corpora import beir_index, folder_index
from notewell.evaluation.metrics import (
    DEPTH,
    METRICS,
    EvalError,
    EvalQuery,
    aggregate,
    load_beir_queries,
    load_golden,
    query_metrics,
)
from notewell.index.database import Index
from notewell.model.embedding import Embedder
from notewell.search.query import Query, literal, parse
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher

METHODS = ("notewell", "dense", "bm25", "keyword")
MODES = {"notewell": "hybrid", "dense": "dense", "bm25": "bm25"}
Identify = Callable[[str], Iterable[str]]
# How a set is scored once its index is ready: (index, embedder, queries, methods, read,
# identify, ranking) -> a JSON-able report (``rank_all``; ``typos.compare``).
Judge = Callable[..., dict]


# -- rankers -----------------------------------------------------------------------------------


def keyword_ranking(index: Index, words: Sequence[str], limit: int = DEPTH,
                    allowed: set[int] | None = None) -> list[str]:
    """The naive baseline: each query word matched with ``LIKE '%word%'`` against a note's
    title and passages, notes ranked by how many of the words they contain."""
    words = list(dict.fromkeys(w for w in words if w))[:32]
    if not words:
        return []
    return index.reads.keyword_baseline(words, limit, allowed)


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


def evaluate(searcher: Searcher, queries: Sequence[EvalQuery],
             methods: Sequence[str] = METHODS, read: Callable[[str], Query] = parse,
             identify: Identify = lambda note_id: (note_id,),
             ) -> dict[str, dict[str, dict[str, float]]]:
    """``{method: {"all" | type: {metric: mean}}}``. ``identify`` maps a ranked note id to
    the keys a qrels file may use for it (a note id, a path); ``read`` turns a query text
    into a ``Query`` (``parse`` for typed queries, ``literal`` for benchmark claims)."""
    return {method: aggregate(per_query, queries) for method, per_query in
            rank_queries(searcher, queries, methods, read, identify).items()}


def rank_queries(searcher: Searcher, queries: Sequence[EvalQuery], methods: Sequence[str],
                 read: Callable[[str], Query], identify: Identify
                 ) -> dict[str, dict[str, dict[str, float]]]:
    """``{method: {query id: {metric: value}}}``: each query's own scores."""
    parsed = {q.id: read(q.text) for q in queries}

    def scores(method: str, q: EvalQuery) -> dict[str, float]:
        ranked = [key_for(identify(n), q.relevant) for n in rank(searcher, method, parsed[q.id])]
        return query_metrics(ranked, q.relevant)

    return {method: {q.id: scores(method, q) for q in queries} for method in methods}


def key_for(keys: Iterable[str], relevant: dict[str, int]) -> str:
    """The key a qrels file knows a ranked note by: the first of ``keys`` it judged."""
    keys = list(keys)
    return next((k for k in keys if k in relevant), keys[0])


def path_keys(index: Index) -> Identify:
    """A note answers to its note id, its key inside the source (the path relative to a
    Markdown folder) and its absolute path, so golden sets may name notes any of these ways."""
    paths_by_id = index.reads.note_paths()

    def identify(note_id: str) -> list[str]:
        keys = [note_id, note_id.split(":", 1)[-1]]
        if paths_by_id.get(note_id):
            keys.append(paths_by_id[note_id])
        return keys

    return identify


def beir_ids(note_id: str) -> tuple[str]:
    """A BEIR document answers to its id (``BeirSource`` notes are ``<name>:<id>``)."""
    return (note_id.split(":", 1)[-1],)


# -- runners -----------------------------------------------------------------------------------


def run_golden(golden: str, index: Index, embedder: Embedder,
               methods: Sequence[str] = METHODS, ranking: Ranking | None = None,
               judge: Judge | None = None) -> dict:
    """A golden set over ``index``; ``judge``: how to score it (default ``rank_all``)."""
    queries = load_golden(golden)
    return (judge or rank_all)(index, embedder, queries, methods, parse, path_keys(index),
                               ranking)


def run_folder_golden(golden: str, notes_dir: str, embedder: Embedder,
                      methods: Sequence[str] = METHODS, ranking: Ranking | None = None,
                      name: str = "notes", progress: bool = False,
                      judge: Judge | None = None) -> dict:
    """A golden set over a Markdown folder, indexed into a reused throw-away index."""
    index = folder_index(notes_dir, embedder, name, progress)
    try:
        return run_golden(golden, index, embedder, methods, ranking, judge)
    finally:
        index.close()


def run_beir(directory: str, split: str, embedder: Embedder,
             methods: Sequence[str] = METHODS, ranking: Ranking | None = None,
             progress: bool = False, judge: Judge | None = None) -> dict:
    """Rank the whole corpus for every query of ``split``; qrels name documents by id."""
    queries = load_beir_queries(directory, split)
    index = beir_index(directory, embedder, progress=progress)
    try:
        return (judge or rank_all)(index, embedder, queries, methods, literal, beir_ids,
                                   ranking)
    finally:
        index.close()


def rank_all(index: Index, embedder: Embedder, queries: Sequence[EvalQuery],
             methods: Sequence[str], read: Callable[[str], Query], identify: Identify,
             ranking: Ranking | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """The default ``Judge``: every method over ``queries``, as ``evaluate`` reports."""
    searcher = Searcher(index, embedder, ranking, cache_size=4 * len(queries))
    return evaluate(searcher, queries, methods, read, identify)


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


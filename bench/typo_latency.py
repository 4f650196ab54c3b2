"""What typos cost a keystroke: daemon search p50/p95 at 10k and 100k chunks for the
same queries clean and with one or two typos each (``typo_queries.py``), as
``search_latency.py`` times a search (``Searcher.search`` + Alfred rendering, warm
in-memory copies, a fresh query-vector cache per pass).

    .venv/bin/python bench/typo_latency.py [--sizes 10k,100k] [--queries 40] [--passes 2]
    .venv/bin/python bench/compare.py --old ../notewell-old -- typo_latency.py --sizes 10k

Uses only what an older notewell also has, so ``compare.py`` can run it in an old
checkout (copy this file and ``typo_queries.py`` into its ``bench/``): there the typo
queries show what a typo cost before typo tolerance.

``--dated`` also times the clean queries with ``since:1y`` typed in (a filter that admits
every note of the corpus): as notewell searches them (the unfiltered retrievers' best,
filtered, ``Searcher.broad``) and, in alternation, through the filtered retrievers, and
counts the queries whose 20 hits are the same either way.

    .venv/bin/python bench/typo_latency.py --sizes 10k,100k --queries 20 --passes 3 --dated
"""

from __future__ import annotations

import argparse
import time

import common
from typo_queries import typo_query


def _timed(searcher, q: str) -> float:
    from notewell.launcher import alfred

    t0 = time.perf_counter()
    result = searcher.search(q, limit=20)
    alfred.results_feedback(result.hits, result.notices, q)
    return (time.perf_counter() - t0) * 1000


def _filtered_path():
    """A ranking that never applies a date filter after retrieval (``Searcher.broad``),
    or None where notewell has no such choice (before issue 19's follow-up)."""
    import dataclasses

    from notewell.search.ranking import Ranking

    if "post_filter_share" not in {f.name for f in dataclasses.fields(Ranking)}:
        return None
    return Ranking(post_filter_share=float("inf"))


def _same_hits(index, embedder, queries: list[str], filtered) -> float:
    """The share of ``queries`` whose 20 hits (notes, in order) are the same either way."""
    from notewell.search.searcher import Searcher

    broad, narrow = Searcher(index, embedder), Searcher(index, embedder, filtered)
    same = [[h.note_id for h in broad.search(q, limit=20).hits]
            == [h.note_id for h in narrow.search(q, limit=20).hits] for q in queries]
    return sum(same) / max(1, len(same))


def measure(size: str, n_queries: int, passes: int, vectors: str = "real",
            dated: bool = False) -> dict:
    from notewell.index.database import Index
    from notewell.index.schema import BuildSettings
    from notewell.ingest.chunking import ChunkSettings
    from notewell.model.runtime import default_embedder
    from notewell.search.searcher import Searcher

    corpus = common.build_corpus(size, random_vectors=vectors == "random")
    embedder = default_embedder()
    settings = BuildSettings(embedder.fingerprint(), embedder.dim,
                             ChunkSettings().fingerprint())
    index = Index(corpus.index_path(), settings)
    clean = common.queries(n_queries)
    typos = [typo_query(q, str(i))[0] for i, q in enumerate(clean)]
    res: dict = {"size": size, "chunks": corpus.chunks}
    try:
        index.warm_vectors(wait=True)
        index.warm_keywords(wait=True)
        Searcher(index, embedder).search(clean[0])  # warm the model and SQLite
        times: dict[str, list[float]] = {"clean": [], "typos": []}
        sets = [("clean", clean, None), ("typos", typos, None)]
        filtered = _filtered_path()
        if dated:  # a date filter typed in (notewell with issue 19 only)
            sets.append(("dated", [q + " since:1y" for q in clean], None))
            if filtered is not None:  # the same through the filtered retrievers
                sets.append(("dated_filtered", sets[-1][1], filtered))
        for _ in range(passes):
            for name, qs, ranking in sets:
                searcher = Searcher(index, embedder, ranking)
                times.setdefault(name, []).extend(_timed(searcher, q) for q in qs)
        if dated and filtered is not None:
            res["dated_same"] = _same_hits(index, embedder, sets[-1][1], filtered)
            print(f"{size} dated: same 20 hits as the filtered path for "
                  f"{res['dated_same']:.0%} of the queries")
        for name, found in times.items():
            res[name] = common.pct(found)
            print(f"{size} {name:6} {common.fmt(res[name])}")
        # The query's words as the index reads them, typo correction included, with
        # nothing kept from an earlier query: what typos add, without the model's time
        # and the rest of the search (less at the mercy of a busy machine).
        from notewell.search.query import parse

        searcher = Searcher(index, embedder)
        for name, qs in (("clean", clean), ("typos", typos)):
            spent = []
            for _ in range(passes):
                for q in qs:
                    memo = getattr(searcher.reads.vocabulary(), "corrections", None)
                    if memo is not None:
                        memo.clear()
                    t0 = time.perf_counter()
                    searcher.query_terms(parse(q))
                    spent.append((time.perf_counter() - t0) * 1000)
            res[f"terms_{name}"] = common.pct(spent)
            print(f"{size} words of {name:6} {common.fmt(res[f'terms_{name}'])}")
    finally:
        index.close()
    return res


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10k,100k")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--vectors", choices=("real", "random"), default="real",
                    help="random: unit vectors (smoke runs)")
    ap.add_argument("--dated", action="store_true",
                    help="also time the queries with since:1y typed in (and, where notewell "
                    "applies a broad filter after retrieval, through the filtered path)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    from notewell.memory import limit_heaps

    limit_heaps()
    info = common.print_machine("search latency with and without typos")
    results = {"machine": info, "sizes": {}}
    for size in common.parse_sizes(args.sizes):
        results["sizes"][size] = measure(size, args.queries, args.passes, args.vectors,
                                         args.dated)
    return common.finish(args.json, results)


if __name__ == "__main__":
    main()

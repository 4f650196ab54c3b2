"""Daemon search latency at 1k, 10k, 100k and 1M chunks: what one keystroke costs inside
the daemon (query embedding, hybrid search, Alfred rendering), and whether the fast k-NN
path agrees with exact search.

    .venv/bin/python bench/search_latency.py                      # 1k,10k,100k,1m
    .venv/bin/python bench/search_latency.py --sizes 1k,10k --queries 30
    .venv/bin/python bench/search_latency.py --sizes 300 --vectors random --queries 5  # smoke
    .venv/bin/python bench/search_latency.py --sizes 10k,100k --gap-ms 100  # typing pace

1k and 10k are real texts with real vectors; 100k and 1M repeat the real texts with
noisy copies of their real vectors (see ``common``), or random unit vectors with
``--vectors random``. Corpora are built once (the 1M one takes a while) and cached.

Per size it prints p50/p95 over distinct queries (each query once per pass, a fresh
query-vector cache per pass, so every query pays for its embedding) of: the full search
as the daemon runs it (``Searcher.run`` + ``alfred.results_feedback``) and its parts
(embedding, k-NN, BM25), the exact sqlite-vec k-NN for comparison, recall@10 and
recall@80 of ``Reads.knn`` against exact brute force, and the time to load the
in-memory vector copy. Searches run back to back; ``--gap-ms 100`` also times a pass
with the daemon idle that long before each one, as between keystrokes. The process takes
the daemon's malloc settings (``memory.limit_heaps``) first, as ``notewell serve`` does.
"""

from __future__ import annotations

import argparse
import time

import common
import numpy as np


def _one_search(searcher, q: str) -> tuple[float, float]:
    """One keystroke's work in the daemon, as (whole, Alfred rendering) in ms."""
    from notewell.launcher import alfred
    from notewell.search.query import parse

    t0 = time.perf_counter()
    result = searcher.run(parse(q), limit=20)
    t1 = time.perf_counter()
    alfred.results_feedback(result.hits, result.notices, q)
    t2 = time.perf_counter()
    return (t2 - t0) * 1000, (t2 - t1) * 1000


def measure_size(size: str, vectors: str, n_queries: int, passes: int,
                 exact_runs: int, gap_ms: float = 0.0) -> dict:
    from notewell.index.database import Index
    from notewell.index.schema import BuildSettings
    from notewell.model.runtime import default_embedder
    from notewell.search.query import fts_terms, parse
    from notewell.search.searcher import Searcher

    corpus = common.build_corpus(size, random_vectors=vectors == "random")
    print(f"\n-- {size}: {corpus.describe()}")
    embedder = default_embedder()
    from notewell.ingest.chunking import ChunkSettings

    settings = BuildSettings(embedder.fingerprint(), embedder.dim,
                             ChunkSettings().fingerprint())
    index = Index(corpus.index_path(), settings)
    queries = common.queries(n_queries)
    res: dict = {"size": size, "corpus": corpus.describe(), "chunks": corpus.chunks,
                 "vectors": corpus.vectors}
    try:
        start = time.perf_counter()
        index.warm_vectors(wait=True)
        res["vector_copy_load_s"] = round(time.perf_counter() - start, 2)
        start = time.perf_counter()
        index.warm_keywords(wait=True)
        res["keyword_copy_load_s"] = round(time.perf_counter() - start, 2)
        res["keyword_copy_mb"] = round(index.copies.nbytes()["keywords"] / 2**20)
        cache = index.copies.vector_copy
        res["vector_copy"] = ("none (exact sqlite-vec)" if cache is None else
                              f"{'int8+bits' if cache.quantized else 'float32'}, "
                              f"{cache.nbytes() / 2**20:.0f} MB")
        qvecs = embedder.embed_batch(queries)
        # Warm the model, SQLite's page cache and the FTS index.
        Searcher(index, embedder).run(parse(queries[0]))
        full, render, few_words, sentences = [], [], [], []
        for _ in range(passes):
            searcher = Searcher(index, embedder)
            for q in queries:
                whole, rendering = _one_search(searcher, q)
                full.append(whole)
                render.append(rendering)
                # The model's time grows with the query's length (0.13 ms a token).
                (few_words if len(q.split()) <= 5 else sentences).append(full[-1])
        res["search"] = common.pct(full)
        res["search_few_words"] = common.pct(few_words) if few_words else None
        res["search_sentences"] = common.pct(sentences) if sentences else None
        res["render"] = common.pct(render)
        if gap_ms:
            # As when typing: the daemon idles between keystrokes, and whatever the idle
            # time costs (cold caches, parked threads, a halted core) lands on the search.
            idle = []
            searcher = Searcher(index, embedder)
            for q in queries:
                time.sleep(gap_ms / 1000)
                idle.append(_one_search(searcher, q)[0])
            res["search_after_idle"] = {"gap_ms": gap_ms, **common.pct(idle)}
        fresh = iter([q + " x" for q in queries * 2])  # not in any cache yet
        res["embed"] = common.pct(common.timed(
            lambda: embedder.embed_batch([next(fresh)]), len(queries)))
        res["knn80"] = common.pct([t for v in qvecs for t in common.timed(
            lambda v=v: index.reads.knn(v, 80), 1, warmup=0)])
        # Keyword retrieval as the daemon runs it (the in-memory keyword copy, commonest
        # words left out beyond Ranking.keyword_row_budget), and FTS5 over every word.
        keyword = Searcher(index, embedder)
        parsed = [parse(q) for q in queries]
        res["bm25"] = common.pct([t for pq in parsed for t in common.timed(
            lambda pq=pq: keyword.bm25(pq), 1, warmup=0)])
        matches = [" OR ".join(t) for t in (fts_terms(pq.words, pq.partial) for pq in parsed)
                   if t]
        res["bm25_all_words"] = common.pct([t for m in matches for t in common.timed(
            lambda m=m: index.reads.fts5_bm25(m, 80), 1, warmup=0)])
        # Exact sqlite-vec k-NN, the path used without the in-memory copy.
        index.copies.settings.vectors = False
        res["knn80_sqlite_vec"] = common.pct([t for v in qvecs[:exact_runs] for t in
                                              common.timed(lambda v=v: index.reads.knn(v, 80), 1,
                                                           warmup=0)])
        index.copies.settings.vectors = True
        index.warm_vectors(wait=True)
        ids, allv = common.all_vectors(corpus.index_path())
        r10, r80 = [], []
        for v in qvecs:
            exact = ids[np.argsort(-(allv @ v), kind="stable")[:80]].tolist()
            got = [i for i, _ in index.reads.knn(v, 80)]
            got10 = [i for i, _ in index.reads.knn(v, 10)]
            r10.append(common.recall_at(exact, got10, 10))
            r80.append(common.recall_at(exact, got, 80))
        res["recall@10"] = round(float(np.mean(r10)), 4)
        res["recall@80"] = round(float(np.mean(r80)), 4)
    finally:
        index.close()
    s = res
    print(f"vector copy: {s['vector_copy']} (loaded in {s['vector_copy_load_s']} s); "
          f"keyword copy: {s['keyword_copy_mb']} MB (built in {s['keyword_copy_load_s']} s)")
    print(f"search + render (daemon): {common.fmt(s['search'])}")
    if s.get("search_after_idle"):
        idle = dict(s["search_after_idle"])
        print(f"  after {idle.pop('gap_ms'):g} ms idle each: {common.fmt(idle)}")
    for key, label in (("search_few_words", "queries of 2-5 words"),
                       ("search_sentences", "longer queries (claims)")):
        if s[key]:
            print(f"  {label + ':':23} {common.fmt(s[key])}")
    print(f"  query embedding:        {common.fmt(s['embed'])}")
    print(f"  k-NN (k=80):            {common.fmt(s['knn80'])}")
    print(f"  BM25 (k=80):            {common.fmt(s['bm25'])}")
    print(f"  FTS5 bm25(), every word: {common.fmt(s['bm25_all_words'])} (without the copy)")
    print(f"  Alfred rendering:       {common.fmt(s['render'])}")
    print(f"exact sqlite-vec k-NN:    {common.fmt(s['knn80_sqlite_vec'])}")
    print(f"recall@10 {s['recall@10']:.4f}, recall@80 {s['recall@80']:.4f} vs exact brute "
          "force")
    return res


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1k,10k,100k,1m",
                    help="comma-separated: 1k, 10k, 100k, 1m or a number of chunks")
    ap.add_argument("--vectors", choices=("real", "random"), default="real",
                    help="real: real vectors (noisy copies above 10k); random: unit vectors")
    ap.add_argument("--queries", type=int, default=60, help="distinct queries per pass")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--exact-runs", type=int, default=10,
                    help="queries timed on the exact sqlite-vec path (slow at 1M)")
    ap.add_argument("--gap-ms", type=float, default=0.0,
                    help="also time one pass with this much idle time before each search "
                         "(typing: ~100)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    from notewell.memory import limit_heaps

    limit_heaps()  # as the daemon: temporaries from 128 KB are mapped, and faulted in
    info = common.print_machine("search latency inside the daemon")
    results = {"machine": info, "sizes": []}
    for size in common.parse_sizes(args.sizes):
        results["sizes"].append(measure_size(size,
                                             args.vectors, args.queries, args.passes,
                                             args.exact_runs, args.gap_ms))
    return common.finish(args.json, results)


if __name__ == "__main__":
    main()

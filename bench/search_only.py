"""Search time with the model's time taken out: ranking, retrieval and hits, in-process.

    .venv/bin/python bench/search_only.py --sizes 10k,100k

A daemon search includes embedding the query, which on a busy 2-core machine moves by
more than the rest of the search does between two runs of the same code. Here every text
the model would read for the benchmark's queries is embedded first (a warm-up pass), then
each query is searched once per pass with a fresh searcher (so no per-query cache
answers), with both in-memory copies loaded as in a warm daemon.
"""

from __future__ import annotations

import argparse
import statistics
import time

import common
import numpy as np


def measure(size: int, n_queries: int, passes: int) -> dict:
    from notewell import config
    from notewell.engine import Engine
    from notewell.model.runtime import default_embedder
    from notewell.search.searcher import Searcher

    corpus = common.build_corpus(size)
    real = default_embedder()
    vectors: dict[str, np.ndarray] = {}

    class Remembered:
        """The real model's vectors, each text embedded once."""

        id, dim = real.id, real.dim

        def fingerprint(self) -> str:
            return real.fingerprint()

        def embed_batch(self, texts: list[str]) -> np.ndarray:
            for text in texts:
                if text not in vectors:
                    vectors[text] = real.embed_batch([text])[0]
            return np.stack([vectors[t] for t in texts])

    queries = common.queries(n_queries)
    with common.env(NOTEWELL_HOME=str(corpus.home)):
        engine = Engine(config.load(), embedder=Remembered())
        engine.index.warm_vectors(wait=True)
        engine.index.warm_keywords(wait=True)
        for q in queries:  # every text the model reads for these queries, embedded once
            engine.search(q, limit=20)
        times = []
        for _ in range(passes):  # a fresh searcher each pass: its caches start empty
            searcher = Searcher(engine.index, engine.embedder, engine.ranking)
            for q in queries:
                start = time.perf_counter()
                searcher.search(q, limit=20)
                times.append((time.perf_counter() - start) * 1000)
        engine.close()
    result = {"chunks": corpus.chunks, "n": len(times), "p50": statistics.median(times),
              "mean": statistics.mean(times)}
    print(f"{corpus.describe()}: search alone p50 {result['p50']:.2f} ms, "
          f"mean {result['mean']:.2f} ms (n={len(times)})")
    return result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10k,100k")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    info = common.print_machine("search alone, model time excluded")
    res: dict = {"machine": info, "sizes": []}
    for size in common.parse_sizes(args.sizes):
        res["sizes"].append(measure(size, args.queries, args.passes))
    return common.finish(args.json, res)


if __name__ == "__main__":
    main()

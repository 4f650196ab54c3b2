"""notewell against ChromaDB and LanceDB: k-NN query latency on the same vectors, same
machine, same run, at 10k and 100k chunks.

    pip install -e '.[bench]'                  # chromadb, lancedb (never runtime deps)
    .venv/bin/python bench/peers.py             # 10k,100k
    .venv/bin/python bench/peers.py --sizes 300 --vectors random --queries 5   # smoke

Every store gets the vectors of the same notewell index (``common.build_corpus``) and the
same query vectors (the real model on ``common.queries``); each query asks for the 10
nearest by cosine, in-process, timed from call to Python result:
- notewell: ``Reads.knn`` as the daemon runs it (the in-memory copy of the vectors), and
  sqlite-vec's exact scan (what the index does without the copy);
- ChromaDB: a persistent collection, HNSW, cosine space (its defaults otherwise), asking
  only for ids and distances; then a second collection searched wider (ef_search 400)
  for a recall nearer notewell's;
- LanceDB: a table on disk with no vector index (its recommendation below ~100k rows, an
  exact scan), and with ``--lance-index`` an IVF-PQ index too.
Recall@10 against exact brute force is printed next to each, since HNSW and IVF-PQ are
approximate. The peers' collections are built in a temporary folder and removed.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time

import common
import numpy as np

K = 10


def _time(fn, qvecs: np.ndarray) -> tuple[dict, list[list[int]]]:
    for v in qvecs[:3]:
        fn(v)
    times, results = [], []
    for v in qvecs:
        start = time.perf_counter()
        ids = fn(v)
        times.append((time.perf_counter() - start) * 1000)
        results.append(ids)
    return common.pct(times), results


def notewell_rows(corpus, qvecs: np.ndarray) -> list[dict]:
    from notewell.index.database import Index
    from notewell.index.schema import BuildSettings
    from notewell.ingest.chunking import ChunkSettings
    from notewell.model.embedding import SHIPPED_FINGERPRINT
    from notewell.model.files import DIM

    index = Index(corpus.index_path(), BuildSettings(SHIPPED_FINGERPRINT, DIM,
                                                     ChunkSettings().fingerprint()))
    rows = []
    try:
        start = time.perf_counter()
        index.warm_vectors(wait=True)
        build = time.perf_counter() - start
        lat, res = _time(lambda v: [i for i, _ in index.reads.knn(v, K)], qvecs)
        copy = index.copies.vector_copy
        kind = "in-memory " + copy.layout
        rows.append({"store": f"notewell ({kind})", "latency": lat, "results": res,
                     "build_s": build})
        index.copies.settings.vectors = False
        lat, res = _time(lambda v: [i for i, _ in index.reads.knn(v, K)], qvecs)
        rows.append({"store": "notewell, exact sqlite-vec scan", "latency": lat,
                     "results": res, "build_s": 0.0})
    finally:
        index.close()
    return rows


def chroma_rows(ids: np.ndarray, vecs: np.ndarray, qvecs: np.ndarray, folder: str
                ) -> list[dict]:
    import chromadb

    client = chromadb.PersistentClient(path=os.path.join(folder, "chroma"),
                                       settings=chromadb.Settings(anonymized_telemetry=False))
    rows = []
    # Its default search breadth, then a wider one for a recall closer to notewell's. The
    # breadth is set when the collection is made: ``modify`` records a new ef_search but
    # the index already loaded in this process keeps searching with the old one.
    for ef, label in ((100, f"ChromaDB {chromadb.__version__} (HNSW, ef_search 100: "
                            "default)"), (400, "ChromaDB (HNSW, ef_search 400)")):
        col = client.create_collection(f"notewell-bench-{ef}", configuration={
            "hnsw": {"space": "cosine", "ef_search": ef}})
        step = client.get_max_batch_size()
        start = time.perf_counter()
        for i in range(0, len(ids), step):
            col.add(ids=[str(x) for x in ids[i:i + step]], embeddings=vecs[i:i + step])
        build = time.perf_counter() - start

        def query(v: np.ndarray, col=col) -> list[int]:
            r = col.query(query_embeddings=[v], n_results=K, include=["distances"])
            return [int(x) for x in r["ids"][0]]

        lat, res = _time(query, qvecs)
        rows.append({"store": label, "latency": lat, "results": res, "build_s": build})
    return rows


def lance_rows(ids: np.ndarray, vecs: np.ndarray, qvecs: np.ndarray, folder: str,
               with_index: bool) -> list[dict]:
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(os.path.join(folder, "lance"))
    start = time.perf_counter()
    table = db.create_table("vectors", data=pa.table({
        "id": pa.array(ids),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), vecs.shape[1])}))
    build = time.perf_counter() - start

    def query(v: np.ndarray) -> list[int]:
        r = (table.search(v).metric("cosine").select(["id", "_distance"]).limit(K)
             .to_arrow())
        return r["id"].to_pylist()

    lat, res = _time(query, qvecs)
    rows = [{"store": f"LanceDB {lancedb.__version__} (no index: exact scan)", "latency": lat,
             "results": res, "build_s": build}]
    if with_index:
        start = time.perf_counter()
        from lancedb.index import IvfPq

        partitions = max(1, min(int(np.sqrt(len(ids))), len(ids) // 256))
        table.create_index("vector", config=IvfPq(distance_type="cosine",
                                                  num_partitions=partitions,
                                                  num_sub_vectors=48))
        build = time.perf_counter() - start

        def query_ivf(v: np.ndarray) -> list[int]:
            r = (table.search(v).metric("cosine").nprobes(20).refine_factor(10)
                 .select(["id", "_distance"]).limit(K).to_arrow())
            return r["id"].to_pylist()

        lat, res = _time(query_ivf, qvecs)
        rows.append({"store": "LanceDB (IVF-PQ, nprobes 20, refine 10)", "latency": lat,
                     "results": res, "build_s": build})
    return rows


def measure(size, vectors: str, n_queries: int, lance_index: bool) -> dict:
    from notewell.model.runtime import default_embedder

    corpus = common.build_corpus(size, random_vectors=vectors == "random")
    print(f"\n-- {corpus.describe()}, {corpus.vectors:,} vectors")
    ids, vecs = common.all_vectors(corpus.index_path())
    qvecs = default_embedder().embed_batch(common.queries(n_queries))
    exact = [ids[np.argsort(-(vecs @ v), kind="stable")[:K]].tolist() for v in qvecs]
    rows = notewell_rows(corpus, qvecs)
    folder = tempfile.mkdtemp(prefix="notewell-peers-")
    try:
        try:
            rows += chroma_rows(ids, vecs, qvecs, folder)
        except ImportError:
            print("ChromaDB is not installed: pip install -e '.[bench]'")
        try:
            rows += lance_rows(ids, vecs, qvecs, folder, lance_index)
        except ImportError:
            print("LanceDB is not installed: pip install -e '.[bench]'")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for r in rows:
        r["recall@10"] = round(float(np.mean([common.recall_at(e, g, K)
                                              for e, g in zip(exact, r.pop("results"))])), 4)
    ours = rows[0]["latency"]["p50"]
    print(f"{'store':58} {'p50 ms':>7} {'p95 ms':>7} {'recall@10':>9} {'build s':>8} "
          f"{'vs notewell':>11}")
    for r in rows:
        ratio = r["latency"]["p50"] / ours if ours else float("nan")
        r["ratio_to_notewell"] = round(ratio, 2)
        print(f"{r['store']:58} {r['latency']['p50']:7.2f} {r['latency']['p95']:7.2f} "
              f"{r['recall@10']:9.4f} {r['build_s']:8.1f} {ratio:10.1f}x")
    return {"size": str(size), "corpus": corpus.describe(), "rows": rows}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10k,100k")
    ap.add_argument("--vectors", choices=("real", "random"), default="real")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--lance-index", action="store_true",
                    help="also build and query an IVF-PQ index in LanceDB")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    logging.getLogger("chromadb").setLevel(logging.ERROR)
    os.environ.setdefault("RUST_LOG", "error")  # LanceDB's deprecation chatter
    info = common.print_machine("peers: k-NN (k=10) query latency on the same vectors")
    out = {"machine": info, "sizes": []}
    for size in common.parse_sizes(args.sizes):
        out["sizes"].append(measure(size, args.vectors,
                                    args.queries, args.lance_index))
    return common.finish(args.json, out)


if __name__ == "__main__":
    main()

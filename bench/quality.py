"""Do the speed-ups change what is found? ``notewell eval`` under three k-NN paths.

    .venv/bin/python bench/quality.py                   # demo golden set and SciFact test
    .venv/bin/python bench/quality.py --skip-beir       # demo golden set only (seconds)

The same evaluation (``notewell.evaluation.runner``: nDCG@10, Recall@5/10, MRR@10 for the full
pipeline and dense only) runs with k-NN answered by
- ``sqlite-vec``: the exact scan in SQLite (notewell without the in-memory copy);
- ``copy``: what the daemon does by default (the in-memory copy: exact float32 up to 5,000
  vectors, quantized beyond);
- ``quantized``: the quantized copy (sign bits + int8) forced at every size, to show what
  it would cost in quality where the default keeps exact search.
SciFact's index is built on first use under ``$NOTEWELL_BENCH_CACHE/eval-home`` (5,183
notes, 11,413 chunks: several minutes with the real model) and reused.
"""

from __future__ import annotations

import argparse
import os

import common

MODES = ("sqlite-vec", "copy", "quantized")


def run(mode: str, beir: str | None) -> dict:
    from notewell.evaluation import runner as evaluate
    from notewell.evaluation.corpora import beir_index, folder_index
    from notewell.evaluation.metrics import load_beir_queries
    from notewell.index.copies import CopySettings
    from notewell.index.database import Index
    from notewell.model.runtime import default_embedder
    from notewell.ops.demo import demo_golden_path, demo_notes_dir

    copies = {"sqlite-vec": CopySettings(vectors=False), "copy": CopySettings(),
              "quantized": CopySettings(exact_limit=0)}[mode]

    def reopened(index: Index) -> Index:
        """The same file, its k-NN answered this mode's way; its copies loaded before the
        first query, as a warm daemon has them."""
        index.close()
        index = Index(index.path, index.settings, copies)
        index.warm_vectors(wait=True)
        index.warm_keywords(wait=True)
        return index

    embedder = default_embedder()
    methods = ["notewell", "dense"]
    index = reopened(folder_index(demo_notes_dir(), embedder, "demo"))
    try:
        out = {"demo": evaluate.to_json(evaluate.run_golden(demo_golden_path(), index,
                                                            embedder, methods))}
    finally:
        index.close()
    if beir:
        queries = load_beir_queries(beir, "test")
        index = reopened(beir_index(beir, embedder, progress=True))
        try:
            out["scifact"] = evaluate.to_json(evaluate.rank_all(
                index, embedder, queries, methods, evaluate.literal, evaluate.beir_ids))
        finally:
            index.close()
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-beir", action="store_true")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    info = common.print_machine("retrieval quality under each k-NN path")
    beir = None if args.skip_beir else str(common.shared_data() / "scifact")
    if beir and not os.path.isdir(beir):
        beir = None
    home = common.cache_dir() / "eval-home"
    home.mkdir(mode=0o700, exist_ok=True)
    results = {}
    with common.env(NOTEWELL_HOME=str(home)):
        for mode in MODES:
            results[mode] = run(mode, beir)
    print(f"\n{'set':8} {'method':9} {'metric':10} " + " ".join(f"{m:>11}" for m in MODES))
    for dataset in results[MODES[0]]:
        for method in results[MODES[0]][dataset]:
            for metric in ("ndcg@10", "recall@10", "mrr@10"):
                values = [results[m][dataset][method]["all"][metric] for m in MODES]
                print(f"{dataset:8} {method:9} {metric:10} " +
                      " ".join(f"{v:11.4f}" for v in values))
    print(common.load_note())
    common.write_json(args.json, {"machine": info, "results": results})
    return results


if __name__ == "__main__":
    main()

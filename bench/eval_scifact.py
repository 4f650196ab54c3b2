"""SciFact (BEIR) with the real model: our four rankers beside the published numbers.

    .venv/bin/python bench/eval_scifact.py [--split test|train] [--data DIR] [--json]
                                           [--no-typos]

The corpus is indexed once into ``$NOTEWELL_HOME/eval/scifact-<hash>/`` (5,183 abstracts,
about 10,000 passages: many minutes on a laptop's CPU the first time) and reused after
that, so later runs take about a minute. Tune on ``--split train``; the published numbers
are all on ``test``. Prints a Markdown table (the README's) and the per-query latency.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))

import common
from notewell.evaluation import runner as evaluate
from notewell.evaluation.corpora import beir_index
from notewell.evaluation.metrics import load_beir_queries

DEFAULT_DATA = common.shared_data() / "scifact"
LABELS = {
    "notewell": "notewell: hybrid, coverage-weighted fusion (MiniLM-L6 + FTS5)",
    "dense": "notewell dense only (all-MiniLM-L6-v2, int8)",
    "bm25": "notewell BM25 only (FTS5, porter)",
    "keyword": "naive keyword baseline (LIKE per word)",
}


def published(data: Path) -> list[tuple[str, float]]:
    """The test-split nDCG@10 numbers shipped with the dataset copy (reference_scores.tsv)."""
    path = data / "reference_scores.tsv"
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [(r["system"], float(r["ndcg@10"])) for r in rows
            if r.get("split") == "test" and not r["system"].startswith("this-copy")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(DEFAULT_DATA), help="BEIR SciFact directory")
    p.add_argument("--split", default="test", choices=("test", "train"))
    p.add_argument("--json", action="store_true", help="print notewell eval's JSON instead")
    p.add_argument("--no-typos", action="store_true",
                   help="without typo correction (Ranking(typos=False))")
    args = p.parse_args()
    data = Path(args.data)
    if not (data / "corpus.jsonl").exists():
        print(f"no BEIR SciFact at {data}; pass --data DIR", file=sys.stderr)
        return 1
    from notewell.model.runtime import default_embedder

    embedder = default_embedder()
    start = time.monotonic()
    index = beir_index(str(data), embedder, progress=True)
    index.close()
    indexed = time.monotonic() - start
    queries = len(load_beir_queries(str(data), args.split))
    start = time.monotonic()
    from notewell.search.ranking import Ranking

    ranking = Ranking(typos=False) if args.no_typos else None
    results = evaluate.run_beir(str(data), args.split, embedder, ranking=ranking)
    seconds = time.monotonic() - start
    if args.json:
        print(json.dumps(evaluate.to_json(results), indent=2))
        return 0
    print(f"SciFact {args.split}: {queries} queries; index ready in {indexed:.0f}s; "
          f"4 rankers in {seconds:.0f}s, {seconds / max(1, 4 * queries) * 1000:.0f} ms per "
          f"query and ranker (home {os.environ.get('NOTEWELL_HOME', 'default')})\n")
    print("| system | nDCG@10 | Recall@10 | MRR@10 |")
    print("|---|---:|---:|---:|")
    for method, groups in results.items():
        m = groups["all"]
        print(f"| {LABELS[method]} | **{m['ndcg@10']:.3f}** | {m['recall@10']:.3f} | "
              f"{m['mrr@10']:.3f} |")
    if args.split == "test":
        for system, ndcg in published(data):
            print(f"| published: {system} | {ndcg:.3f} | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

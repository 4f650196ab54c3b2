"""Typo tolerance, measured: Recall@5 of clean queries and of the same queries with one or
two typos each (``bench/typo_queries.py``), for notewell, dense only and BM25 only, with
typo tolerance on and off.

    .venv/bin/python bench/typo_eval.py [--scifact DIR] [--split test] [--skip-scifact]
                                        [--json]

The demo golden set (typed queries: the last word is read as still being typed) over the
demo notes, and SciFact's claims (finished queries) over its abstracts, with the real
model. Indexes are notewell eval's reused ones under ``$NOTEWELL_HOME/eval/``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))

import common
from notewell.evaluation import runner
from notewell.evaluation.corpora import beir_index, folder_index
from notewell.evaluation.metrics import load_beir_queries, load_golden
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher
from typo_queries import DEMO_TYPOS, typo_query

METHODS = ("notewell", "dense", "bm25")
METRIC = "recall@5"


def typo_set(queries, seed: int):
    return [dataclasses.replace(q, text=typo_query(q.text, q.id, seed)[0]) for q in queries]


def score(index, embedder, queries, ranking: Ranking, read, identify) -> dict:
    searcher = Searcher(index, embedder, ranking, cache_size=4 * len(queries))
    found = runner.evaluate(searcher, queries, METHODS, read, identify)
    return {m: found[m]["all"] for m in METHODS}


def measure(index, embedder, clean, typos, read, identify) -> dict:
    off = Ranking(typos=False)
    return {
        "clean": score(index, embedder, clean, Ranking(), read, identify),
        "clean, tolerance off": score(index, embedder, clean, off, read, identify),
        "typos": score(index, embedder, typos, Ranking(), read, identify),
        "typos, tolerance off": score(index, embedder, typos, off, read, identify),
    }


def table(name: str, rows: dict) -> str:
    lines = [f"{name} ({METRIC}; nDCG@10 in brackets)", "",
             "| queries | " + " | ".join(METHODS) + " |", "|---|" + "---:|" * len(METHODS)]
    for label, found in rows.items():
        lines.append(f"| {label} | " + " | ".join(
            f"{found[m][METRIC]:.3f} ({found[m]['ndcg@10']:.3f})" for m in METHODS) + " |")
    clean, typos = rows["clean"], rows["typos"]
    lines.append("| typos / clean | " + " | ".join(
        f"{typos[m][METRIC] / max(clean[m][METRIC], 1e-9):.1%}" for m in METHODS) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scifact", default=str(common.shared_data() / "scifact"))
    p.add_argument("--split", default="test")
    p.add_argument("--skip-scifact", action="store_true")
    p.add_argument("--seed", type=int, default=19)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    from notewell.model.runtime import default_embedder
    from notewell.ops.demo import demo_golden_path, demo_notes_dir

    common.print_machine("typo tolerance: Recall@5 with and without typos")
    embedder = default_embedder()
    out = {}
    index = folder_index(demo_notes_dir(), embedder, "demo")
    try:
        typo_ids = {q.id for q in load_golden(str(DEMO_TYPOS))}
        # The same queries clean: the typo set leaves out the per-language queries.
        clean = [q for q in load_golden(demo_golden_path()) if q.id in typo_ids]
        typos = load_golden(str(DEMO_TYPOS))
        out["demo"] = measure(index, embedder, clean, typos, runner.parse,
                              runner.path_keys(index))
    finally:
        index.close()
    if not args.skip_scifact and (Path(args.scifact) / "corpus.jsonl").exists():
        index = beir_index(args.scifact, embedder)
        try:
            clean = load_beir_queries(args.scifact, args.split)
            out[f"scifact {args.split}"] = measure(index, embedder, clean,
                                                   typo_set(clean, args.seed),
                                                   runner.literal, runner.beir_ids)
        finally:
            index.close()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print("\n\n".join(table(name, rows) for name, rows in out.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The golden sets on the real collections (``bench/golden/``) with the real model: one
Markdown table per collection, one row per ranker, one column per query type.

    .venv/bin/python bench/eval_golden.py [--sets til-jbranchaud,dendron-vault] [--json]

Each collection in ``../shared/data/<name>/notes`` is indexed once into
``$NOTEWELL_HOME/eval/`` (the same reused index ``notewell eval --golden FILE --notes DIR``
keeps; many minutes on a laptop's CPU the first time) and reused after that. Cells are
Recall@5 / nDCG@10; the query counts are in the header.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))

import common
from notewell.evaluation import runner as evaluate
from notewell.evaluation.metrics import load_golden

GOLDEN = Path(__file__).resolve().parent / "golden"
TYPES = ("exact", "paraphrase", "synonym", "vague", "partial")


def table(results: dict, counts: Counter) -> list[str]:
    groups = ["all", *(t for t in TYPES if t in counts)]
    head = ["method", *(f"{g} ({counts[g] if g != 'all' else sum(counts.values())})"
                        for g in groups)]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for method, values in results.items():
        cells = [f"{values[g]['recall@5']:.3f} / {values[g]['ndcg@10']:.3f}" for g in groups]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default="til-jbranchaud,dendron-vault")
    p.add_argument("--methods", default=",".join(evaluate.METHODS))
    p.add_argument("--json", action="store_true", help="print notewell eval's JSON instead")
    args = p.parse_args()
    from notewell.model.runtime import default_embedder

    embedder = default_embedder()
    methods = args.methods.split(",")
    out = {}
    for name in args.sets.split(","):
        notes = common.shared_data() / name / "notes"
        golden = GOLDEN / f"{name}.jsonl"
        if not notes.is_dir():
            print(f"no {notes}; is ../shared/data present?", file=sys.stderr)
            return 1
        start = time.monotonic()
        results = evaluate.run_folder_golden(str(golden), str(notes), embedder, methods,
                                             progress=not args.json)
        out[name] = evaluate.to_json(results)
        if not args.json:
            counts = Counter(q.type for q in load_golden(str(golden)))
            print(f"\n{name}: {sum(counts.values())} queries, {time.monotonic() - start:.0f}s; "
                  "Recall@5 / nDCG@10")
            print("\n".join(table(results, counts)))
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What ``notewell eval`` measures and over which queries: trec_eval's metrics and the
query sets (a golden set of typed queries, a BEIR dataset's queries and judgements).

Recall@5, Recall@10, MRR@10 and nDCG@10 with trec_eval semantics, averaged overall and per
query type. Imports nothing of notewell.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

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
    return {name: {m: sum(per_query[i][m] for i in ids) / len(ids) for m in METRICS}
            for name, ids in groups.items()}


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
    texts = {row["_id"]: row["text"] for row in jsonl(os.path.join(directory, "queries.jsonl"))
             if row["_id"] in qrels}
    missing = set(qrels) - set(texts)
    if missing:
        raise EvalError(f"{len(missing)} queries in {qrels_path} are not in queries.jsonl")
    return [EvalQuery(qid, texts[qid], qrels[qid]) for qid in sorted(qrels, key=_natural)]


def _natural(s: str) -> tuple:
    return (0, int(s), "") if s.isdigit() else (1, 0, s)


def jsonl(path: str) -> Iterator[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)
    except FileNotFoundError:
        raise EvalError(f"{path} is missing: not a BEIR dataset directory") from None

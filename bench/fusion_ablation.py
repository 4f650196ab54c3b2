"""What each ranking choice buys: fusion variants on the same candidates, side by side.

    .venv/bin/python bench/fusion_ablation.py [--scifact DIR] [--split train]

Collects, once per query, what ``search.Searcher`` sees before fusing (BM25 and dense
candidates, 200 deep, exact cosines, query coverage), then ranks notes with each variant:
plain and coverage-weighted reciprocal rank fusion, score fusion with and without the
trust weighting ``search.Ranking`` ships, and the shipped one without exact cosines for
keyword-only candidates or at other candidate depths. Runs on the demo golden set and on
SciFact's train split (never tune on test); reuses the indexes ``notewell eval`` keeps
under ``$NOTEWELL_HOME/eval/``. Duplicates are not folded here, so demo figures run a
little above ``notewell eval``'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))

import common
from notewell.evaluation import metrics
from notewell.evaluation import runner as evaluate
from notewell.evaluation.corpora import beir_index, folder_index
from notewell.ops.demo import demo_golden_path
from notewell.search.fusion import ramp
from notewell.search.query import Query, literal, parse
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher

DEFAULT_SCIFACT = common.shared_data() / "scifact"
DEPTH = 200


@dataclass
class Candidates:
    dense: list[int]  # chunk ids, nearest first
    bm25: list[tuple[int, float]]  # (chunk id, BM25 score), best first
    cosine: dict[int, float]  # every candidate's exact cosine to the query
    cover: dict[int, float]  # BM25 candidates' share of the query's IDF mass
    mass: float


def collect(searcher: Searcher, q: Query) -> Candidates:
    lexical = searcher.bm25(q)
    text = searcher.dense_text(q, [c for c, _ in lexical])
    vector = searcher.embed_query(text)
    dense = searcher.reads.nearest_chunks(vector, DEPTH)
    cosine = {c: 1.0 - d for c, d in dense}
    cosine.update(searcher.cosines(vector, [c for c, _ in lexical if c not in cosine]))
    cover, mass = searcher.coverage(q, [c for c, _ in lexical])
    return Candidates([c for c, _ in dense], lexical, cosine, cover, mass)


Fusion = Callable[[Candidates], dict[int, float]]


def rrf(k: float, coverage_power: float = 0.0) -> Fusion:
    def fuse(c: Candidates) -> dict[int, float]:
        scores: dict[int, float] = {}
        for rank, chunk in enumerate(c.dense[:80]):
            scores[chunk] = scores.get(chunk, 0.0) + 1.0 / (k + rank + 1)
        for rank, (chunk, _) in enumerate(c.bm25[:80]):
            weight = c.cover.get(chunk, 0.0) ** coverage_power if coverage_power else 1.0
            scores[chunk] = scores.get(chunk, 0.0) + weight / (k + rank + 1)
        return scores
    return fuse


def score_fusion(r: Ranking, trust: bool = True, exact_cosines: bool = True,
                 depth: int = 80) -> Fusion:
    def fuse(c: Candidates) -> dict[int, float]:
        dense, lexical = c.dense[:depth], c.bm25[:depth]
        cosine = {x: c.cosine[x] for x in dense}
        floor = min(cosine.values()) if cosine else 0.0
        for x, _ in lexical:
            if x not in cosine:
                cosine[x] = c.cosine.get(x, floor) if exact_cosines else floor
        low, high = min(cosine.values()), max(cosine.values())
        scores = {x: r.dense_share * (v - low) / ((high - low) or 1.0)
                  for x, v in cosine.items()}
        best = max((s for _, s in lexical), default=1.0) or 1.0
        for x, s in lexical:
            share = c.cover.get(x, 0.0)
            weight = 1.0
            if trust:
                weight = max(ramp(share, r.coverage_floor, 1.0) ** r.coverage_power,
                             ramp(share * c.mass, r.matched_idf_low, r.matched_idf_high))
            scores[x] += (1.0 - r.dense_share) * s / best * weight
        return scores
    return fuse


def variants() -> dict[str, Fusion]:
    shipped = Ranking()
    return {
        "dense only": lambda c: {x: c.cosine[x] for x in c.dense[:80]},
        "BM25 only": lambda c: dict(c.bm25[:80]),
        "plain RRF, k=60": rrf(60),
        "RRF, k=10": rrf(10),
        "RRF, BM25 votes x coverage^2": rrf(60, 2.0),
        "score fusion 0.5/0.5, no trust": score_fusion(Ranking(dense_share=0.5), trust=False),
        "score fusion with trust (shipped)": score_fusion(shipped),
        "  without exact cosines": score_fusion(shipped, exact_cosines=False),
        "  candidate depth 40": score_fusion(shipped, depth=40),
        "  candidate depth 200": score_fusion(shipped, depth=200),
    }


def evaluate_variants(searcher: Searcher, queries: list[metrics.EvalQuery],
                      read: Callable[[str], Query], identify: evaluate.Identify
                      ) -> dict[str, dict[str, dict[str, float]]]:
    collected = {q.id: collect(searcher, read(q.text)) for q in queries}
    candidates = {x for c in collected.values() for x in [*c.dense, *(x for x, _ in c.bm25)]}
    chunk_note = {p.chunk_id: p.note_id for p in searcher.reads.passages(sorted(candidates))}
    out = {}
    for name, fuse in variants().items():
        per_query = {}
        for q in queries:
            best: dict[str, float] = {}
            for chunk, score in fuse(collected[q.id]).items():
                note = chunk_note[chunk]
                best[note] = max(score, best.get(note, score))
            ranked = sorted(best, key=lambda n: (-best[n], n))[: metrics.DEPTH]
            keys = [evaluate.key_for(identify(n), q.relevant) for n in ranked]
            per_query[q.id] = metrics.query_metrics(keys, q.relevant)
        out[name] = metrics.aggregate(per_query, queries)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scifact", default=str(DEFAULT_SCIFACT), help="BEIR SciFact directory")
    p.add_argument("--split", default="train", help="SciFact split (default train)")
    args = p.parse_args()
    from notewell.model.runtime import default_embedder
    from notewell.ops.demo import demo_notes_dir

    embedder = default_embedder()
    index = folder_index(demo_notes_dir(), embedder, "demo")
    golden = metrics.load_golden(demo_golden_path())
    demo = evaluate_variants(Searcher(index, embedder), golden, parse, evaluate.path_keys(index))
    index.close()
    science = None
    if (Path(args.scifact) / "corpus.jsonl").exists():
        index = beir_index(args.scifact, embedder, progress=True)
        queries = metrics.load_beir_queries(args.scifact, args.split)
        science = evaluate_variants(Searcher(index, embedder, cache_size=2 * len(queries)),
                                    queries, literal, evaluate.beir_ids)
        index.close()
    print(f"| ranking | SciFact {args.split} | demo: paraphrase | demo: synonym | demo: all |")
    print("|---|---:|---:|---:|---:|")
    for name in demo:
        sci = f"{science[name]['all']['ndcg@10']:.3f}" if science else "-"
        d = demo[name]
        print(f"| {name} | {sci} | {d['paraphrase']['ndcg@10']:.3f} | "
              f"{d['synonym']['ndcg@10']:.3f} | {d['all']['ndcg@10']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`notewell eval`: metrics against hand-computed values, golden and BEIR inputs, the
keyword baseline, reuse of the throw-away index, and the CLI's JSON (fake embedder)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from helpers import notewell_command, subprocess_env
from notewell.evaluation import corpora, metrics
from notewell.evaluation import runner as evaluate
from notewell.evaluation.metrics import EvalQuery, mrr_at, ndcg_at, recall_at
from notewell.ingest.chunking import ChunkSettings
from notewell.ops.demo import demo_golden_path
from notewell.search.query import parse
from notewell.search.searcher import Searcher

# -- metrics -------------------------------------------------------------------------------


def test_ndcg_uses_judged_relevance_as_gain_and_all_relevant_docs_for_the_ideal():
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; ideal over 3 relevant = 1 + 1/log2(3) + 1/log2(4)
    assert ndcg_at(["a", "x", "b"], {"a": 1, "b": 1, "c": 1}) == pytest.approx(
        1.5 / (1 + 1 / math.log2(3) + 0.5))
    assert ndcg_at(["a", "x", "b"], {"a": 1, "b": 1, "c": 1}) == pytest.approx(0.70394, 1e-4)
    # graded: trec_eval's gain is the grade itself, not 2^grade - 1
    assert ndcg_at(["b", "a"], {"a": 2, "b": 1}) == pytest.approx(
        (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert ndcg_at(["a", "b"], {"a": 2, "b": 1}) == pytest.approx(1.0)
    assert ndcg_at([], {"a": 1}) == 0.0
    assert ndcg_at(["a"], {}) == 0.0


def test_ndcg_is_cut_at_ten_and_counts_a_repeated_document_once():
    ranked = [f"x{i}" for i in range(10)] + ["a"]
    assert ndcg_at(ranked, {"a": 1}) == 0.0
    assert ndcg_at(["a", "a", "b"], {"a": 1, "b": 1}) == pytest.approx(1.0)
    # eleven relevant documents: the ideal DCG is cut at ten too
    qrels = {f"r{i}": 1 for i in range(11)}
    assert ndcg_at([f"r{i}" for i in range(10)], qrels) == pytest.approx(1.0)


def test_recall_and_mrr():
    ranked = ["x1", "x2", "x3", "x4", "a", "b"]
    qrels = {"a": 1, "b": 1}
    assert recall_at(ranked, qrels, 5) == 0.5
    assert recall_at(ranked, qrels, 10) == 1.0
    assert mrr_at(ranked, qrels) == pytest.approx(0.2)
    assert mrr_at([f"x{i}" for i in range(10)] + ["a"], qrels) == 0.0
    assert mrr_at(["x", "x", "a"], qrels) == pytest.approx(0.5)
    assert recall_at(["a"], {"a": 0}, 5) == 0.0


def test_aggregate_averages_over_every_query_per_type_and_overall():
    queries = [EvalQuery("1", "", {"a": 1}, "exact"), EvalQuery("2", "", {"b": 1}, "exact"),
               EvalQuery("3", "", {"c": 1}, "vague")]
    per_query = {"1": metrics.query_metrics(["a"], {"a": 1}),
                 "2": metrics.query_metrics([], {"b": 1}),  # nothing found counts as 0
                 "3": metrics.query_metrics(["x", "c"], {"c": 1})}
    out = metrics.aggregate(per_query, queries)
    assert set(out) == {"all", "exact", "vague"}
    assert out["exact"]["ndcg@10"] == pytest.approx(0.5)
    assert out["vague"]["mrr@10"] == pytest.approx(0.5)
    assert out["all"]["recall@5"] == pytest.approx(2 / 3)
    assert list(out["all"]) == list(metrics.METRICS)


# -- inputs ----------------------------------------------------------------------------------


def test_golden_loader_reads_the_bundled_set_and_rejects_bad_lines(tmp_path):
    queries = metrics.load_golden(demo_golden_path())
    assert len(queries) >= 50
    assert {q.type for q in queries} == {"exact", "paraphrase", "synonym", "vague",
                                         "de", "es", "zh", "ja"}  # languages: their own type
    assert all(q.relevant for q in queries)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "query": "x", "relevant": ["a.md"]}\n{"id": 2}\n')
    with pytest.raises(metrics.EvalError, match=r"bad.jsonl:2"):
        metrics.load_golden(str(bad))
    with pytest.raises(metrics.EvalError, match="does not exist"):
        metrics.load_golden(str(tmp_path / "missing.jsonl"))


def write_beir(root: Path) -> Path:
    docs = [
        ("d1", "Vitamin D and bone density", "Vitamin D supplements increase bone mineral "
         "density in elderly women."),
        ("d2", "Statins and muscle pain", "Statin therapy is associated with muscle pain in "
         "a minority of patients."),
        ("d3", "Coffee consumption", "Moderate coffee drinking is not linked to heart "
         "disease."),
        ("d4", "Sleep and memory", "Sleep deprivation impairs memory consolidation in "
         "students."),
    ]
    root.mkdir(parents=True)
    (root / "qrels").mkdir()
    with open(root / "corpus.jsonl", "w") as f:
        for i, t, x in docs:
            f.write(json.dumps({"_id": i, "title": t, "text": x, "metadata": {}}) + "\n")
    with open(root / "queries.jsonl", "w") as f:
        for i, x in (("1", "statins cause muscle pain"), ("2", "vitamin d bone density"),
                     ("3", "sleep loss hurts memory #1 in:class")):
            f.write(json.dumps({"_id": i, "text": x, "metadata": {}}) + "\n")
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n1\td2\t1\n2\td1\t1\n3\td4\t1\n")
    return root


def test_beir_run_indexes_once_and_reuses_the_index(home, tmp_path, fake_embedder):
    data = write_beir(tmp_path / "tiny")
    results = evaluate.run_beir(str(data), "test", fake_embedder)
    assert set(results) == set(evaluate.METHODS)
    # benchmark text is literal: "#1" and "in:class" are words, not filters
    assert results["bm25"]["all"]["recall@10"] == 1.0
    assert results["notewell"]["all"]["mrr@10"] == 1.0
    assert sum(fake_embedder.calls[:1]) == 8  # the corpus (passages, titles), once
    eval_dirs = list((home / "eval").iterdir())
    assert len(eval_dirs) == 1 and eval_dirs[0].name.startswith("tiny-")
    fake_embedder.calls.clear()
    again = evaluate.run_beir(str(data), "test", fake_embedder)
    assert again == results
    assert sum(fake_embedder.calls) <= 3  # only the queries, never the corpus again
    with pytest.raises(evaluate.EvalError, match="qrels"):
        evaluate.run_beir(str(data), "dev", fake_embedder)


def test_a_chunker_change_rebuilds_the_eval_index_without_re_embedding(home, tmp_path,
                                                                      fake_embedder):
    data = write_beir(tmp_path / "tiny")
    source = corpora.BeirSource(str(data), "tiny")
    corpora.eval_index(source, fake_embedder, "k").close()
    fake_embedder.calls.clear()
    index = corpora.eval_index(source, fake_embedder, "k",
                               chunker=ChunkSettings(max_pieces=160))
    assert index.counts()["notes"] == 4
    assert sum(fake_embedder.calls) == 0  # every passage is short: same text, same vector
    index.close()


# -- rankers -----------------------------------------------------------------------------------


def test_keyword_baseline_ranks_by_how_many_words_a_note_contains(engine):
    index = engine.index
    ranked = evaluate.keyword_ranking(index, ["bake", "bananas", "remote"])
    assert ranked[0] == "notes:kitchen/banana-bread.md"
    assert set(ranked) == {"notes:kitchen/banana-bread.md", "notes:git/undo-commit.md"}
    # LIKE wildcards in a word are literal
    assert evaluate.keyword_ranking(index, ["v_cuum"]) == []
    assert evaluate.keyword_ranking(index, []) == []


def test_methods_rank_notes_and_filters_apply_to_the_baseline_too(engine):
    searcher = Searcher(engine.index, engine.embedder)
    q = parse("#recipes bananas")
    for method in evaluate.METHODS:
        assert evaluate.rank(searcher, method, q) == ["notes:kitchen/banana-bread.md"]
    assert evaluate.rank(searcher, "keyword", parse("#nosuch bananas")) == []
    with pytest.raises(evaluate.EvalError):
        evaluate.rank(searcher, "bogus", q)


def test_golden_relevant_entries_may_be_paths_or_note_ids(engine, tmp_path):
    golden = tmp_path / "g.jsonl"
    golden.write_text(
        '{"id": "a", "query": "tram pastel de nata", "relevant": ["travel/lisbon.md"], '
        '"type": "exact"}\n'
        '{"id": "b", "query": "vacuum analyze", "relevant": ["notes:db/postgres-vacuum.md"], '
        '"type": "exact"}\n')
    results = evaluate.run_golden(str(golden), engine.index, engine.embedder)
    assert results["bm25"]["exact"]["mrr@10"] == 1.0
    assert results["notewell"]["all"]["recall@5"] == 1.0


# -- command line ----------------------------------------------------------------------------


def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(notewell_command("eval", *args),
                          capture_output=True, text=True, timeout=120,
                          env=subprocess_env(home))


def test_cli_json_has_the_documented_shape(home, tmp_path):
    data = write_beir(tmp_path / "tiny")
    out = run_cli(home, "--beir", str(data), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert list(doc) == ["notewell", "dense", "bm25", "keyword"]
    for groups in doc.values():
        assert list(groups) == ["all"]
        assert set(groups["all"]) == {"ndcg@10", "recall@5", "recall@10", "mrr@10"}
        assert all(0.0 <= v <= 1.0 for v in groups["all"].values())


def test_cli_defaults_to_the_demo_golden_set_with_types(home):
    out = run_cli(home, "--json", "--methods", "bm25,keyword")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert list(doc) == ["bm25", "keyword"]
    assert set(doc["bm25"]) == {"all", "exact", "paraphrase", "synonym", "vague",
                                "de", "es", "zh", "ja"}
    assert doc["bm25"]["zh"]["recall@10"] > 0.5 and doc["bm25"]["ja"]["recall@10"] > 0.5
    assert doc["bm25"]["exact"]["recall@10"] > 0.9
    table = run_cli(home, "--methods", "bm25")
    assert table.returncode == 0 and "ndcg@10" in table.stdout and "paraphrase:" in table.stdout


def test_cli_errors_say_what_to_do(home, tmp_path):
    out = run_cli(home, "--methods", "bm25,magic")
    assert out.returncode == 2 and "magic" in out.stderr
    out = run_cli(home, "--beir", str(tmp_path / "nowhere"))
    assert out.returncode == 1 and "BEIR dataset directory" in out.stderr

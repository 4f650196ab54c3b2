"""``notewell eval --self``: models and rankers side by side on known-item queries built
from the user's own notes (``known_items``), without a query written by hand.

Each model's corpus is indexed into its own throw-away index under
``$NOTEWELL_HOME/eval/self-<corpus>-<model>/``, kept and reused: the corpus key names the
sources (not the sample), so asking for more queries re-embeds only the notes whose
query was cut out. ``model_for`` is the one place a ``--models`` entry becomes a model.
May import ``evaluation``'s own modules, ``config``, ``model``, ``search`` and
``sources``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from notewell.config import SourceConfig
from notewell.evaluation.corpora import eval_index
from notewell.evaluation.known_items import KINDS, QUERIES, NotesSource, pick
from notewell.evaluation.metrics import EvalError
from notewell.evaluation.runner import evaluate
from notewell.evaluation.runner import to_json as rounded
from notewell.model.embedding import Embedder
from notewell.notes import Note
from notewell.search.query import literal
from notewell.search.ranking import Ranking
from notewell.search.searcher import Searcher

MakeModel = Callable[[], Embedder]
METHODS = ("notewell", "dense", "bm25")
Results = dict[str, dict[str, dict[str, float]]]  # method -> group -> metric -> mean


@dataclass
class SelfEval:
    queries: int
    notes: int
    types: dict[str, int]  # "heading" | "sentence" -> queries
    models: dict[str, tuple[str, Results]]  # label -> (model id, results)


def model_for(spec: str, current: MakeModel) -> MakeModel:
    """What one ``--models`` entry names: ``current`` (the model ``config.toml`` names,
    else the shipped one), ``shipped``, a catalog model (``notewell model list``) that was
    downloaded, or a model folder (``model.onnx`` and ``tokenizer.json``, as ``[model]``
    takes it)."""
    if spec == "current":
        return current
    from notewell.model import catalog, runtime

    if spec == "shipped" or (spec in catalog.CATALOG and catalog.CATALOG[spec].shipped):
        return runtime.default_embedder
    if spec in catalog.CATALOG:
        if catalog.installed(spec) is None:
            raise EvalError(f"--models: {spec} is not downloaded; `notewell model get {spec}` "
                            "downloads and checks it without switching to it")
        return lambda: catalog.embedder(spec)
    path = os.path.abspath(os.path.expanduser(spec))
    if not os.path.isdir(path):
        raise EvalError(f"--models: {spec!r} is not a model folder; name a folder holding "
                        "model.onnx and tokenizer.json, or current (the model config.toml "
                        "names) or shipped")
    from notewell.model.custom import open_folder

    folder = open_folder(path)  # its files checked now, before any model is run
    return lambda: runtime.custom_embedder(folder)


def corpus_key(sources: Sequence[SourceConfig]) -> str:
    """Names the corpus by its sources (kind, place, name), not their contents: an edited
    note is synced into the same index."""
    ids = sorted(f"{s.type}\x00{os.path.abspath(s.path) if s.path else ''}\x00{s.name}"
                 for s in sources)
    return hashlib.sha256("\x01".join(ids).encode()).hexdigest()[:12]


def run_self(notes: list[Note], models: Sequence[tuple[str, MakeModel]], corpus: str,
             count: int = QUERIES, methods: Sequence[str] = METHODS,
             ranking: Ranking | None = None, progress: bool = False,
             kinds: Sequence[str] = KINDS) -> SelfEval:
    """Every model's metrics on the same known items from ``notes``."""
    known = pick(notes, count, kinds=kinds)
    queries = known.queries()
    source = NotesSource("self", known.corpus)
    out: dict[str, tuple[str, Results]] = {}
    for label, make in models:
        embedder = make()
        if progress:
            print(f"notewell: {label} ({embedder.id}): {len(known.corpus)} notes, "
                  f"{len(queries)} queries", file=sys.stderr, flush=True)
        fingerprint = hashlib.sha256(embedder.fingerprint().encode()).hexdigest()[:12]
        index = eval_index(source, embedder, f"self-{corpus}-{fingerprint}",
                           progress=progress)
        try:
            searcher = Searcher(index, embedder, ranking, cache_size=4 * len(queries))
            out[label] = (embedder.id, evaluate(searcher, queries, methods, literal))
        finally:
            index.close()
    return SelfEval(len(queries), len(known.corpus),
                    dict(Counter(q.type for q in queries)), out)


def to_json(result: SelfEval) -> dict:
    return {"queries": result.queries, "notes": result.notes, "types": result.types,
            "models": {label: {"model": model, "methods": rounded(results)}
                       for label, (model, results) in result.models.items()}}


def format_table(result: SelfEval) -> str:
    """One row per ranker, one column per model; cells Recall@5 / MRR@10, overall and
    per query type."""
    labels = list(result.models)
    width = max(15, *(len(label) + 2 for label in labels))
    types = ", ".join(f"{n} {t}s" for t, n in sorted(result.types.items()))
    lines = [f"{result.queries} known-item queries ({types}) over {result.notes} notes; "
             "Recall@5 / MRR@10"]
    groups = ["all", *sorted(result.types)] if len(result.types) > 1 else ["all"]
    for group in groups:
        count = result.queries if group == "all" else result.types[group]
        lines.append(f"{group} ({count}):")
        lines.append(f"  {'ranker':<10}" + "".join(f"{label:>{width}}" for label in labels))
        methods = dict.fromkeys(m for _, res in result.models.values() for m in res)
        for method in methods:
            cells = [f"{v['recall@5']:.3f} / {v['mrr@10']:.3f}"
                     for v in (result.models[label][1][method][group] for label in labels)]
            lines.append(f"  {method:<10}" + "".join(f"{c:>{width}}" for c in cells))
    # Two systems on the same queries: a gap under about 1/sqrt(n) is within the usual
    # 95% interval of a paired difference (see docs/search-quality.md).
    lines.append(f"a gap under {1 / result.queries ** 0.5:.2f} between two cells may be "
                 "chance; more queries (--queries) narrow it")
    return "\n".join(lines)

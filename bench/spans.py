"""What showing why a note matched costs the daemon (issue 35.3), at 10k passages: one
search as Alfred's keystroke asks it (hits with their spans, Quick Look previews written,
Alfred's JSON) and as a JSON client asks it (Raycast, MCP: three passages per note, the
hits as JSON), this checkout against another in alternating processes.

    .venv/bin/python bench/spans.py --old ../notewell-old --rounds 3
    .venv/bin/python bench/spans.py --size 1k --queries 10 --rounds 1   # smoke

``--old`` is a checkout from before (``git worktree add ../notewell-old f1199d2``; its
``.venv`` may be a link to this one's: each run imports the code of its own checkout).
Per checkout and round it times each query once per pass (a fresh searcher per pass,
so typing's caches start empty), each keystroke of ``keystroke.py``'s typed queries
(``alfred_typing``: what the zsh client waits for in the daemon), wall time and the
thread's CPU, and, in a checkout that has them, the parts alone:
the spans of twenty hits (their passages' terms not yet kept, then kept), naming their
previews (the keystroke's share) and writing them (the writer thread's), a note's next
passages (a JSON search's extra). Prints medians over rounds, old and new, and new - old.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(checkout: Path, size: str, n_queries: int, passes: int) -> dict:
    import common

    sys.path.insert(0, str(checkout / "daemon"))  # this checkout's code, not the bench's
    from notewell.memory import limit_heaps

    limit_heaps()  # as the daemon does
    import inspect

    from notewell.index.database import Index
    from notewell.index.schema import BuildSettings
    from notewell.ingest.chunking import ChunkSettings
    from notewell.launcher import alfred
    from notewell.model.runtime import default_embedder
    from notewell.search.searcher import Searcher

    assert Path(alfred.__file__).is_relative_to(checkout), alfred.__file__
    try:
        from notewell.launcher import quicklook
    except ImportError:
        quicklook = None
    corpus = common.build_corpus(common.parse_sizes(size)[0], random_vectors=True)
    embedder = default_embedder()
    settings = BuildSettings(embedder.fingerprint(), embedder.dim,
                             ChunkSettings().fingerprint())
    index = Index(corpus.index_path(), settings)
    index.warm_vectors(wait=True)
    index.warm_keywords(wait=True)
    queries = common.queries(n_queries)
    passages = "passages" in inspect.signature(Searcher.run).parameters
    previews = tempfile.mkdtemp(prefix="notewell-previews-")

    def alfred_search(searcher, q: str) -> None:
        # As the daemon answers a keystroke: pages named, the answer rendered, the pages
        # handed to the writer thread (which writes them after: not timed here).
        result = searcher.search(q, limit=20)
        if quicklook is None:
            alfred.results_feedback(result.hits, result.notices, q)
            return
        job = quicklook.writer().job(result.hits, previews)
        alfred.results_feedback(result.hits, result.notices, q, previews=job.paths)
        quicklook.writer().submit(job)

    def json_search(searcher, q: str) -> None:
        from notewell.search.query import parse

        more = {"passages": 3} if passages else {}
        result = searcher.run(parse(q), limit=20, **more)
        json.dumps(result.to_dict())

    out: dict = {"chunks": corpus.chunks}
    try:
        Searcher(index, embedder).search(queries[0])  # the model, caches, pages warm
        from keystroke import TYPED, prefixes

        typed = prefixes(TYPED, 0)  # each keystroke of a few queries, as Alfred sends them
        for name, fn, asked in (("alfred", alfred_search, queries),
                                ("json", json_search, queries),
                                ("alfred_typing", alfred_search, typed)):
            times, cpu = [], []
            for _ in range(passes):
                searcher = Searcher(index, embedder)
                for q in asked:
                    start, busy = time.perf_counter(), time.thread_time()
                    fn(searcher, q)
                    times.append((time.perf_counter() - start) * 1000)
                    # This thread's CPU: what the other processes' load does not add (the
                    # model's own threads are left out, the same for both checkouts).
                    cpu.append((time.thread_time() - busy) * 1000)
                    if quicklook is not None:
                        quicklook.writer().flush()  # its writes never overlap the next
            out[name] = common.pct(times)
            out[name + "_thread_cpu"] = common.pct(cpu)
        if passages:
            out.update(parts(index, embedder, queries, previews))
    finally:
        index.close()
    return out


def parts(index, embedder, queries: list[str], previews: str) -> dict:
    """The new steps alone, on each query's twenty hits."""
    import common
    from notewell.launcher import quicklook
    from notewell.search import spans
    from notewell.search.query import parse
    from notewell.search.searcher import Searcher

    searcher = Searcher(index, embedder)
    marks, cold, named, written, again, more = [], [], [], [], [], []
    for q in queries:
        parsed = parse(q)
        hits = searcher.run(parsed, limit=20).hits
        finder = spans.SpanFinder(searcher.query_terms(parsed), parsed.words)
        spans._terms_at.cache_clear()
        start = time.perf_counter()
        for h in hits:
            spans.marked(h, finder, index.reads)
        cold.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        for h in hits:
            spans.marked(h, finder, index.reads)
        marks.append((time.perf_counter() - start) * 1000)
        folder = tempfile.mkdtemp(dir=previews)
        start = time.perf_counter()
        job = quicklook.Job(hits, folder)  # what the keystroke pays
        quicklook.ready(folder)
        named.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        quicklook.write(job)  # the writer thread's work
        written.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        quicklook.write(job)
        again.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        searcher.run(parsed, limit=20, passages=3)
        with_more = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        searcher.run(parsed, limit=20)
        more.append(with_more - (time.perf_counter() - start) * 1000)
    return {"spans_20_hits_cold": common.pct(cold), "spans_20_hits_kept": common.pct(marks),
            "previews_named": common.pct(named), "previews_written_by_thread":
            common.pct(written), "previews_again_by_thread": common.pct(again),
            "three_passages_extra": common.pct(more)}


def flatten(d: dict, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        elif isinstance(v, int | float) and not isinstance(v, bool):
            out[prefix + k] = float(v)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, help="the checkout to compare with")
    ap.add_argument("--checkout", type=Path, help=argparse.SUPPRESS)  # one run, one tree
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", default="10k")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--json", help="also write the figures to this file")
    opts = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    if opts.checkout:
        found = measure(opts.checkout.resolve(), opts.size, opts.queries, opts.passes)
        Path(opts.json).write_text(json.dumps(found))
        return 0
    import common

    info = common.print_machine("why a note matched: spans, previews, passages (issue 35.3)")
    sides = {"old": opts.old, "new": HERE.parent} if opts.old else {"new": HERE.parent}
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
    for _ in range(opts.rounds):
        for side, checkout in sides.items():
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                subprocess.run([sys.executable, __file__, "--checkout", str(checkout),
                                "--size", opts.size, "--queries", str(opts.queries),
                                "--passes", str(opts.passes), "--json", f.name], check=True)
                runs[side].append(flatten(json.loads(Path(f.name).read_text())))
    medians = {side: {k: statistics.median(r[k] for r in rs if k in r)
                      for k in rs[0]} for side, rs in runs.items()}
    keys = [k for k in medians["new"] if k.endswith(".p50") or k.endswith(".p95")]
    print(f"{'figure (ms)':34} {'old':>8} {'new':>8} {'new-old':>8}")
    for k in keys:
        old = medians.get("old", {}).get(k)
        new = medians["new"][k]
        delta = f"{new - old:+8.2f}" if old is not None else ""
        print(f"{k:34} {old if old is not None else '':>8.2f} {new:8.2f} {delta}"
              if old is not None else f"{k:34} {'':>8} {new:8.2f}")
    print(common.load_note())
    if opts.json:
        Path(opts.json).write_text(json.dumps({"machine": info, "rounds": opts.rounds,
                                               "medians": medians}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

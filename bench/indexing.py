"""Indexing speed and the model: batch size, threads, memory, and edit-to-search.

    .venv/bin/python bench/indexing.py                 # everything (about 15 minutes)
    .venv/bin/python bench/indexing.py --skip-grid --skip-concurrent     # the headline rows
    .venv/bin/python bench/indexing.py --sample 8 --batches 4 --threads 1 \
        --full-size 0 --skip-edit --skip-concurrent                      # smoke run

Parts (each configuration runs in a fresh process, so memory figures are its own):
1. Batch size x intra-op threads, arena and thread spinning, for the model that runs
   (chunks/s on a sample of real chunks, load time, resident memory, one-query latency);
   Core ML is added on macOS when onnxruntime offers it (``NOTEWELL_COREML``).
2. A query while a sync embeds: the same session, or a second one kept for queries.
3. End to end: notewell's own sync of a fresh index of real notes with the real model.
4. Edit to search: a one-note edit in a 10,000-note corpus, from the start of the sync
   that notices it until a search finds the new text.

The model's accuracy against the float all-MiniLM-L6-v2 is a test
(``tests/test_perf_embedding.py``), not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import common
import numpy as np
from notewell.model.embedding import BATCH_SIZE, SPIN

SHORT_QUERIES = ["undo a commit", "postgres vacuum", "daily notes", "git hooks",
                 "schema templates", "publish site", "lookup", "vault sync", "refactor",
                 "banana bread", "tram in lisbon", "keyboard shortcuts"]


# -- one configuration, in its own process -----------------------------------------------------


def make_embedder(cfg: dict):
    from notewell.model.embedding import OnnxEmbedder
    from notewell.model.files import MODEL_SHA256, ModelFiles, locate_model_files
    from notewell.model.runtime import runtime_model

    files = locate_model_files()  # the file that runs: the int8 rewrite, as the daemon's
    running = runtime_model(files.model, files.tokenizer, MODEL_SHA256)
    return OnnxEmbedder(ModelFiles(running, files.tokenizer),
                        threads=cfg.get("threads"), batch_size=cfg.get("batch", BATCH_SIZE),
                        arena=cfg.get("arena", False), spin=cfg.get("spin", False),
                        providers=cfg.get("providers"))


def query_latency(embedder, runs: int = 36) -> dict:
    qs = [f"{q} {i}" for i in range(runs) for q in SHORT_QUERIES][:runs]
    it = iter(qs + qs)
    return common.pct(common.timed(lambda: embedder.embed_batch([next(it)]), runs, warmup=2))


def worker(cfg: dict) -> dict:
    texts = json.loads(Path(cfg["texts"]).read_text())
    start = time.perf_counter()
    embedder = make_embedder(cfg)
    out: dict = {"load_s": round(time.perf_counter() - start, 2),
                 "rss_loaded_mb": round(common.rss_mb()[0])}
    embedder.embed_batch(texts[:4])
    if cfg.get("mode") == "concurrent":
        out.update(concurrent(embedder, texts, cfg))
        return out
    start = time.perf_counter()
    embedder.embed_batch(texts)
    seconds = time.perf_counter() - start
    out["chunks_per_s"] = round(len(texts) / seconds, 1)
    out["rss_after_mb"], out["rss_peak_mb"] = (round(x) for x in common.rss_mb())
    out["query"] = query_latency(embedder)
    return out


def concurrent(embedder, texts: list[str], cfg: dict) -> dict:
    """Query latency while another thread embeds batches, as a sync does in the daemon;
    idle and busy both measured on the session that answers the queries."""
    queries = make_embedder({**cfg, "threads": 1}) if cfg.get("separate") else embedder
    idle = query_latency(queries)
    stop = threading.Event()

    def index_forever() -> None:
        while not stop.is_set():
            embedder.embed_batch(texts[:32])

    thread = threading.Thread(target=index_forever, daemon=True)
    thread.start()
    time.sleep(0.5)
    busy = query_latency(queries)
    stop.set()
    thread.join()
    return {"idle": idle, "busy": busy, "rss_after_mb": round(common.rss_mb()[0])}


def run_worker(cfg: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", json.dumps(cfg)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"worker {cfg} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the parts -------------------------------------------------------------------------------------


def grid_part(args, texts_file: str) -> list[dict]:
    rows = []
    threads = sorted({int(t) for t in args.threads.split(",")})
    for t in threads:
        for b in (int(x) for x in args.batches.split(",")):
            r = run_worker({"texts": texts_file, "threads": t, "batch": b})
            rows.append({"threads": t, "batch": b, **r})
    print("\nthe model that runs: batch size x intra-op threads (arena off, no spinning)")
    print(f"{'threads':>7} {'batch':>5} {'chunks/s':>8} {'peak RSS MB':>11} {'RSS after':>9}")
    for r in rows:
        print(f"{r['threads']:7d} {r['batch']:5d} {r['chunks_per_s']:8.1f} "
              f"{r['rss_peak_mb']:11d} {r['rss_after_mb']:9d}")
    best = max(rows, key=lambda r: r["chunks_per_s"])
    print(f"fastest: threads {best['threads']}, batch {best['batch']}: "
          f"{best['chunks_per_s']} chunks/s")
    options = []
    import onnxruntime as ort

    labelled: list[tuple[str, dict]] = [("arena on", {"arena": True}),
                                        ("spinning on", {"spin": True}),
                                        ("arena off, spinning off", {})]
    if "CoreMLExecutionProvider" in ort.get_available_providers():
        labelled.append(("Core ML", {"providers": ["CoreMLExecutionProvider",
                                                   "CPUExecutionProvider"]}))
    for label, extra in labelled:
        r = run_worker({"texts": texts_file, "threads": args.cores, "batch": BATCH_SIZE,
                        **extra})
        options.append({"option": label, **r})
    print(f"\nsession options (batch {BATCH_SIZE}, threads = cores)")
    for r in options:
        print(f"{r['option']:12} {r['chunks_per_s']:8.1f} chunks/s, peak {r['rss_peak_mb']} MB, "
              f"after {r['rss_after_mb']} MB, query {common.fmt(r['query'])}")
    queries = []
    for t in threads:
        for spin in (False, True):
            r = run_worker({"texts": texts_file, "threads": t, "batch": BATCH_SIZE,
                            "spin": spin})
            queries.append({"threads": t, "spin": spin, "query": r["query"]})
    print("\none short query (tokenizer + session.run + pooling)")
    for r in queries:
        print(f"threads {r['threads']}, spinning {'on ' if r['spin'] else 'off'}: "
              f"{common.fmt(r['query'])}")
    return rows + options + queries


def concurrent_part(args, texts_file: str) -> list[dict]:
    rows = []
    for separate in (False, True):
        # Spinning as the daemon's sessions spin (embedding.SPIN).
        r = run_worker({"texts": texts_file, "threads": args.cores, "batch": BATCH_SIZE,
                        "mode": "concurrent", "separate": separate, "spin": SPIN})
        rows.append({"separate": separate, **r})
    print("\na query while a sync embeds batches in another thread")
    for r in rows:
        label = "second 1-thread session" if r["separate"] else "same session"
        print(f"{label:24} idle {common.fmt(r['idle'])}; busy {common.fmt(r['busy'])}; "
              f"RSS {r['rss_after_mb']} MB")
    return rows


def full_sync_part(args) -> dict:
    """Notewell's own sync of ~``full_size`` real chunks into a fresh index, real model."""
    corpus = common.build_corpus(args.full_size)  # the texts; its index is not used
    out = subprocess.run([sys.executable, __file__, "--sync-worker", str(corpus.notes_dir)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\nnotewell sync, fresh index, real model: {r['chunks']} chunks of {r['notes']} "
          f"notes in {r['seconds']:.1f} s = {r['chunks_per_s']:.1f} embedded chunks/s; peak RSS "
          f"{r['rss_peak_mb']} MB")
    return r


def sync_worker(notes_dir: str) -> dict:
    from notewell.model.runtime import default_embedder

    with tempfile.TemporaryDirectory() as tmp:
        embedder = default_embedder()
        start = time.perf_counter()
        counts = common.index_corpus(Path(tmp) / "home", Path(notes_dir), embedder,
                                     progress=False)
        seconds = time.perf_counter() - start
    return {"notes": counts["notes"], "chunks": counts["chunks"], "seconds": seconds,
            "chunks_per_s": counts["embeddings"] / seconds,
            "rss_peak_mb": round(common.rss_mb()[1])}


def edit_part(args) -> dict:
    """Edit one note of a 10,000-note corpus; time the sync and the search that finds it."""
    from notewell import config as nconfig
    from notewell.engine import Engine
    from notewell.model.runtime import default_embedder

    corpus = common.build_corpus(args.edit_notes * 10, notes=args.edit_notes)
    print(f"\nedit to search: {corpus.describe()}")
    files = sorted(corpus.notes_dir.rglob("*.md"))
    picks = [files[i * len(files) // args.edits] for i in range(args.edits)]
    times, syncs = [], []
    with common.env(NOTEWELL_HOME=str(corpus.home)):
        engine = Engine(nconfig.load(), embedder=default_embedder(),
                        index_dir=str(corpus.home / "index"))
        originals = {}
        try:
            engine.sync()  # settle: nothing to do
            with engine.reading() as view:
                view.search("warm up")
            # As a warm daemon has them: the in-memory copies loaded.
            engine.index.warm_vectors(wait=True)
            engine.index.warm_keywords(wait=True)
            for n, path in enumerate(picks):
                word = f"zqxedit{n}{int(time.time())}"
                originals[path] = path.read_text(encoding="utf-8")
                path.write_text(originals[path] + f"\nA new line about {word}.\n",
                                encoding="utf-8")
                start = time.perf_counter()
                engine.sync()
                synced = time.perf_counter()
                with engine.reading() as view:
                    view.search(word, limit=5)  # what the daemon runs for the query
                found = time.perf_counter()
                # Searchable: BM25 returns the edited chunk. (The hit list itself may show a
                # synthetic copy of the note instead: search folds near-duplicates.)
                chunk = engine.index.reads.fts5_bm25(f'"{word}"', 1)
                hit = engine.index.reads.passages([chunk[0][0]]) if chunk else []
                if not hit or Path(hit[0].path) != path:
                    raise RuntimeError(f"the edited note {path} was not found for {word!r}")
                syncs.append((synced - start) * 1000)
                times.append((found - start) * 1000)
        finally:
            for path, text in originals.items():
                path.write_text(text, encoding="utf-8")
            engine.sync()
            engine.close()
    r = {"notes": corpus.notes, "chunks": corpus.chunks, "sync": common.pct(syncs),
         "edit_to_search": common.pct(times)}
    print(f"sync that applies the edit: {common.fmt(r['sync'])}")
    print(f"edit -> searchable:         {common.fmt(r['edit_to_search'])} "
          f"(target: under 1000 ms)")
    return r


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=256, help="chunks per throughput run")
    ap.add_argument("--threads", default="", help="comma-separated; default 1,cores")
    ap.add_argument("--batches", default="1,4,8,16,32,64")
    ap.add_argument("--full-size", type=int, default=1000,
                    help="chunks for the end-to-end sync run; 0 skips it")
    ap.add_argument("--edit-notes", type=int, default=10_000)
    ap.add_argument("--edits", type=int, default=5)
    ap.add_argument("--skip-grid", action="store_true")
    ap.add_argument("--skip-concurrent", action="store_true")
    ap.add_argument("--skip-edit", action="store_true")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--sync-worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return {}
    if args.sync_worker:
        print(json.dumps(sync_worker(args.sync_worker)))
        return {}
    args.cores = os.cpu_count() or 1
    args.threads = args.threads or f"1,{args.cores}"
    info = common.print_machine("indexing: batches, threads, memory, edit to search")
    res: dict = {"machine": info}
    with tempfile.TemporaryDirectory() as tmp:
        texts = common.sample_chunks(args.sample)
        texts_file = os.path.join(tmp, "texts.json")
        Path(texts_file).write_text(json.dumps(texts))
        print(f"sample: {len(texts)} real chunks (mean {np.mean([len(t) for t in texts]):.0f}"
              " characters)")
        if not args.skip_grid:
            res["grid"] = grid_part(args, texts_file)
        if not args.skip_concurrent:
            res["concurrent"] = concurrent_part(args, texts_file)
    if args.full_size:
        res["full_sync"] = full_sync_part(args)
    if not args.skip_edit:
        res["edit"] = edit_part(args)
    return common.finish(args.json, res)


if __name__ == "__main__":
    main()

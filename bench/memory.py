"""Daemon resident memory at 10k and 100k chunks: idle, under query load, after a sync.

    .venv/bin/python bench/memory.py                  # 10k,100k
    .venv/bin/python bench/memory.py --sizes 300 --vectors random --seconds 2   # smoke

For each size the real daemon (``notewell serve``, real model) is started on the corpus
(``common.build_corpus``; 100k is synthetic, see there) and its resident set size is read
from the operating system:
- idle: ready, first sync done, no query yet;
- under load: while 4 threads send typed queries for ``--seconds`` (peak and at the end);
- after a sync: once 40 edited notes have been re-embedded by a sync the daemon is asked
  for;
- peak: the high-water mark over the whole run (Linux ``VmHWM``).
Edited notes are restored before the daemon stops (and synced back).
"""

from __future__ import annotations

import argparse
import threading
import time

import common

EDITS = 40


def measure(size, vectors: str, seconds: float) -> dict:
    corpus = common.build_corpus(size, random_vectors=vectors == "random")
    print(f"\n-- {corpus.describe()}")
    daemon = common.DaemonProcess(corpus.home)
    res: dict = {"size": str(size), "corpus": corpus.describe(), "chunks": corpus.chunks}
    edited: dict = {}
    try:
        # Idle means ready with both in-memory copies (vectors, keywords) loaded.
        copies = daemon.wait_warm()
        res["in_memory_mb"] = {k: round((v or 0) / 2**20) for k, v in copies.items()}
        res["idle_mb"] = round(common.rss_mb(daemon.pid)[0])
        queries = [q[:i] for q in common.queries(20) for i in range(3, len(q) + 1, 2)]
        stop = threading.Event()
        samples: list[float] = []
        errors: list[str] = []

        def typist(offset: int) -> None:
            n = offset
            while not stop.is_set():
                try:
                    reply = daemon.ask("search", query=queries[n % len(queries)],
                                       format="alfred")
                except Exception as e:  # a typist that stops must stop the benchmark
                    errors.append(f"{type(e).__name__}: {e}")
                    return
                if not reply.get("ok"):
                    errors.append(str(reply.get("error")))
                n += 4

        threads = [threading.Thread(target=typist, args=(i,), daemon=True) for i in range(4)]
        for t in threads:
            t.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            samples.append(common.rss_mb(daemon.pid)[0])
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError(f"searches failed: {errors[:3]}")
        res["load_peak_mb"] = round(max(samples))
        res["load_end_mb"] = round(samples[-1])
        # A sync that embeds: edit notes, then have the daemon sync and embed them.
        files = sorted(corpus.notes_dir.rglob("*.md"))
        for n, path in enumerate(files[:: max(1, len(files) // EDITS)][:EDITS]):
            edited[path] = path.read_text(encoding="utf-8")
            path.write_text(edited[path] + f"\nEdited for the memory benchmark ({n}).\n",
                            encoding="utf-8")
        before = daemon.ask("status")["result"]["last_sync"]
        daemon.ask("sync_now")
        after = daemon.ask("status")["result"]
        if after["last_sync"] == before:
            raise RuntimeError("the daemon did not sync the edits")
        res["after_sync_mb"] = round(common.rss_mb(daemon.pid)[0])
        res["peak_mb"] = round(common.rss_mb(daemon.pid)[1])
    finally:
        for path, text in edited.items():
            path.write_text(text, encoding="utf-8")
        if edited:
            try:
                daemon.ask("sync_now")
            finally:
                daemon.stop()
        else:
            daemon.stop()
    print(f"idle (ready, no query yet):       {res['idle_mb']} MB "
          f"(in-memory copies: {res['in_memory_mb']} MB)")
    print(f"under query load (4 typists):     {res['load_peak_mb']} MB peak, "
          f"{res['load_end_mb']} MB at the end")
    print(f"after a sync that embedded {EDITS} notes: {res['after_sync_mb']} MB")
    print(f"high-water mark over the run:     {res['peak_mb']} MB")
    return res


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10k,100k")
    ap.add_argument("--vectors", choices=("real", "random"), default="real")
    ap.add_argument("--seconds", type=float, default=15.0, help="query load duration")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    info = common.print_machine("daemon resident memory")
    out = {"machine": info, "sizes": []}
    for size in common.parse_sizes(args.sizes):
        out["sizes"].append(measure(size,
                                    args.vectors, args.seconds))
    return common.finish(args.json, out)


if __name__ == "__main__":
    main()

"""Hostile notes (issue 36): the issue's cases, reading speed on the shared collections, and
a daemon's memory around an 8 MB data-URI note, for the notewell in DAEMON_DIR (default
this checkout's), so old and new code run in alternating processes:

    git archive f1199d2 daemon | tar -x -C /tmp/old
    for i in 1 2 3; do
        .venv/bin/python bench/hostile_notes.py cases /tmp/old/daemon
        .venv/bin/python bench/hostile_notes.py cases
    done                      # likewise `read` and `memory` (`memory --prose`: 8 MB of prose)

Figures: bench/README.md, "Hostile notes (issue 36)". Uses the fake embedder only.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("NOTEWELL_BENCH_DATA") or REPO.parent / "shared" / "data")
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E"


def cases(label: str) -> None:
    from notewell.config import SourceConfig
    from notewell.ingest.chunking import note_chunks
    from notewell.sources.markdown import MarkdownSource, render_links

    root = tempfile.mkdtemp()
    src = MarkdownSource(SourceConfig("n", "markdown", root, (), {}))

    def load_chunk(text: str) -> float:
        Path(root, "x.md").write_text(text)
        start = time.perf_counter()
        note_chunks(src.load("n:x.md"))
        return time.perf_counter() - start

    out = [f"8 KB of [[ load+chunk {load_chunk('[[' * 4096):.3f} s",
           f"12 KB of ![[ load+chunk {load_chunk('![[' * 4096):.3f} s"]
    start = time.perf_counter()
    render_links("[[" * 4000)
    out.append(f"render_links('[[' * 4000) {time.perf_counter() - start:.3f} s")
    if "--all" in sys.argv:  # minutes on the old code: 83 s for this one alone
        start = time.perf_counter()
        render_links("[[" * 16000)
        out.append(f"render_links('[[' * 16000) {time.perf_counter() - start:.3f} s")
        out.append(f"24 KB of [[ load+chunk {load_chunk('[[' * 12288):.3f} s")
    shutil.rmtree(root)
    print(label, " | ".join(out))


def read(label: str) -> None:
    """Load and cut every note of the shared collections, best of three."""
    from notewell.config import SourceConfig
    from notewell.ingest.chunking import note_chunks
    from notewell.sources.markdown import MarkdownSource

    out = []
    for name in ("til-jbranchaud", "dendron-vault"):
        src = MarkdownSource(SourceConfig("x", "markdown", str(DATA / name), (), {}))
        ids = [s.note_id for s in src.scan()]
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for note_id in ids:
                note = src.load(note_id)
                if note:
                    note_chunks(note)
            best = min(best, time.perf_counter() - start)
        out.append(f"{name} ({len(ids)} notes) {best:.3f} s")
    print(label, " | ".join(out))


def memory(label: str) -> None:
    """RSS of a daemon (in this process, fake embedder) on til-jbranchaud: ready, with an
    8 MB note (a data-URI image, or prose with ``--prose``) searched, and after it went."""
    tmp = tempfile.mkdtemp(prefix="nw-rss-")
    os.environ["NOTEWELL_HOME"] = tmp + "/home"
    from notewell import config
    from notewell.engine import Engine
    from notewell.model.fake import FakeEmbedder
    from notewell.serve import daemon
    from notewell.wire import client, protocol

    notes = Path(tmp, "notes")
    shutil.copytree(DATA / "til-jbranchaud", notes, ignore=shutil.ignore_patterns(".git"))
    cfg = config.Config(sources=(config.SourceConfig("n", "markdown", str(notes), (), {}),))
    config.save(cfg)
    d = daemon.Daemon(cfg, engine_factory=lambda c: Engine(c, embedder=FakeEmbedder()),
                      poll_seconds=0.5, use_events=False)
    d.start()
    threading.Thread(target=d.serve_forever, daemon=True).start()
    while d.state != "ready" or not d.last_reports:
        time.sleep(0.1)

    def ask(op: str, **args) -> dict:
        return client.ask(protocol.request(op, **args), timeout=60)

    def rss() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS"))

    def wait_for(count: int) -> None:
        while ask("status")["result"]["notes"] != count:
            time.sleep(0.5)

    first = ask("status")["result"]["notes"]
    ask("search", query="git rebase", format="alfred")
    time.sleep(2)
    ready = rss()
    body = (("The kestrel hovers over the meadow. " * 250_000) if "--prose" in sys.argv
            else f"![x](data:image/png;base64,{PIXEL * 100_000})")[:8_000_000]
    (notes / "pasted.md").write_text(f"# Pasted git screenshot\n\n{body}\n")
    wait_for(first + 1)
    replies = []
    for fmt in ("alfred", "json"):
        try:
            reply = ask("search", query="pasted git screenshot", format=fmt)
            replies.append(f"{fmt} {'ok' if reply['ok'] else 'error'}")
        except (OSError, protocol.ProtocolError) as e:
            replies.append(f"{fmt} failed: {e}")
    time.sleep(2)
    held = rss()
    (notes / "pasted.md").unlink()
    wait_for(first)
    ask("search", query="git rebase", format="alfred")
    time.sleep(3)
    print(label, f"RSS ready {ready} MB, with the note {held} MB, after it went {rss()} MB;",
          "; ".join(replies))
    d.request_stop()
    shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    what = sys.argv[1] if len(sys.argv) > 1 else "cases"
    where = next((a for a in sys.argv[2:] if not a.startswith("--")), str(REPO / "daemon"))
    sys.path.insert(0, where)
    label = "this" if Path(where).resolve() == (REPO / "daemon").resolve() else where
    {"cases": cases, "read": read, "memory": memory}[what](label)


if __name__ == "__main__":
    main()

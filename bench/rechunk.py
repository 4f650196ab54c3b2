"""What an upgrade that changes the chunker costs: a Markdown folder indexed with today's
chunker, then opened with another one, whose first sync re-chunks it beside the live file
(``Engine.sync``) while the old file answers. Prints the seconds, the passages embedded
and those reused, and the next sync's cost (nothing left to do).

    .venv/bin/python bench/rechunk.py --to max_pieces=120,overlap_pieces=20
    .venv/bin/python bench/rechunk.py --fake --notes ../shared/data/dendron-vault/notes \\
        --to max_pieces=60                                                  # smoke run

``--to`` names ``ChunkSettings`` fields and their new values (``--from``, the same for the
chunker before the upgrade, when it is not today's). The folder is indexed once
with today's chunker into ``--home`` (default: the bench cache) and copied for each run,
so every run starts from the same file.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

import common
from notewell.config import Config, SourceConfig
from notewell.engine import Engine, chunker_for
from notewell.ingest.chunking import ChunkSettings


def changed(base: ChunkSettings, spec: str) -> ChunkSettings:
    """``base`` with the ``field=value`` pairs of ``spec`` (comma-separated)."""
    values = {}
    for pair in filter(None, (p.strip() for p in spec.split(","))):
        name, _, raw = pair.partition("=")
        if name not in {f.name for f in dataclasses.fields(base)}:
            raise SystemExit(f"--to: ChunkSettings has no field {name!r}")
        kind = type(getattr(base, name))
        values[name] = raw.lower() in ("1", "true", "yes") if kind is bool else kind(raw)
    return dataclasses.replace(base, **values)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--notes", default=str(common.shared_data() / "til-jbranchaud" / "notes"))
    p.add_argument("--to", required=True, help="e.g. max_pieces=120,overlap_pieces=20")
    p.add_argument("--from", dest="start", default="",
                   help="the same, for the chunker before the upgrade (default: today's)")
    p.add_argument("--home", help="where the index with today's chunker is kept")
    p.add_argument("--fake", action="store_true", help="the fake model (a smoke run)")
    args = p.parse_args()
    if not Path(args.notes).is_dir():
        print(f"no {args.notes}; is ../shared/data present?", file=sys.stderr)
        return 1
    if args.fake:
        from notewell.model.fake import FakeEmbedder

        embedder = FakeEmbedder()
    else:
        from notewell.model.runtime import default_embedder

        embedder = default_embedder()
    before = changed(chunker_for(embedder), args.start)
    after = changed(before, args.to)
    common.print_machine(f"re-chunking {args.notes} after an upgrade")
    print(f"chunker: {before.fingerprint()}\n     to: {after.fingerprint()}")
    config = Config(sources=(SourceConfig("notes", "markdown", args.notes),))
    home = Path(args.home or common.cache_dir() / "rechunk") / embedder.fingerprint().replace(
        ":", "-") / before.fingerprint().replace(",", "_")
    start = time.monotonic()
    first = Engine(config, embedder=embedder, chunker=before, index_dir=str(home))
    first.sync(progress=True)
    first.close()
    print(f"index with today's chunker: {time.monotonic() - start:.1f} s (reused if kept)")
    with tempfile.TemporaryDirectory() as scratch:
        index_dir = shutil.copytree(home, Path(scratch) / "index")
        engine = Engine(config, embedder=embedder, chunker=after, index_dir=str(index_dir))
        notes, chunks = engine.status()["notes"], engine.status()["chunks"]
        start = time.monotonic()
        reports = engine.sync(progress=True)
        took = time.monotonic() - start
        status = engine.status()
        start = time.monotonic()
        again = engine.sync()
        next_sync = time.monotonic() - start
        engine.close()
    print(f"re-chunked {notes} notes in {took:.1f} s: {chunks} -> {status['chunks']} passages, "
          f"{sum(r.embedded for r in reports)} embedded, {sum(r.reused for r in reports)} "
          f"reused; re-chunking now: {status['re_chunking']}")
    print(f"next sync: {next_sync:.2f} s, {sum(r.embedded for r in again)} embedded")
    return 0


if __name__ == "__main__":
    sys.exit(main())

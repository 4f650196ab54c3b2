"""Indexing with the fake embedder: a fresh index of a folder of notes, then a rebuild
beside it; the model's cost left out, so what is measured is notewell's own work (scan,
chunking, SQLite writes, the build's files).

    PYTHONPATH=OTHER_CHECKOUT/daemon .venv/bin/python bench/index_fake.py [FOLDER]

Run it alternately against two checkouts (``PYTHONPATH``) in one session: the machine's
load moves more than the code does.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import notewell
from notewell import config
from notewell.engine import Engine
from notewell.model.fake import FakeEmbedder

FOLDER = "/work/shared/data/til-jbranchaud"


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else FOLDER
    home = tempfile.mkdtemp()
    os.environ["NOTEWELL_HOME"] = home
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", folder),))
    engine = Engine(cfg, embedder=FakeEmbedder(), index_dir=os.path.join(home, "index"))
    start = time.perf_counter()
    engine.sync()
    synced = time.perf_counter() - start
    start = time.perf_counter()
    engine.sync(rebuild_all=True)
    rebuilt = time.perf_counter() - start
    print(f"{os.path.dirname(notewell.__file__)}: {engine.status()['notes']} notes, "
          f"sync {synced:.2f} s, rebuild {rebuilt:.2f} s")
    engine.close()


if __name__ == "__main__":
    main()

"""What keywords in Chinese, Japanese and Korean cost: index size, indexing and search
time with character pairs (``index.cjk``) against without, on a mixed corpus built here.

    .venv/bin/python bench/cjk_keywords.py [--english 3000] [--cjk 1000] [--queries 40]

The corpus: the first ``--english`` real English notes (Dendron, TIL, SciFact, as
``common.base_notes`` reads them) and ``--cjk`` synthetic notes, half Chinese-like, half
Japanese-like: words of one to three characters drawn with Zipf frequencies from the
3,000 commonest-coded Han characters, katakana words and hiragana particles, in
sentences without spaces. Synthetic text has no real meaning, but its runs, characters
and pair statistics are what the index pays for. Two indexes of the same notes with the
same fake vectors: one as notewell writes it (pairs), one with pairs switched off (whole
runs as terms, as before). Printed: the FTS5 table's size in each (``dbstat``), the time
to index, and keyword search time (``mode="bm25"`` in-process, a fresh searcher per pass,
from FTS5 and from the daemon's keyword copy) for English queries in both and for CJK
queries (2-4 characters cut from the notes) with pairs. Without pairs a CJK query finds
only notes holding it as a whole run, so its time there is not comparable.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import common

HAN = [chr(0x4E00 + i) for i in range(0, 20_000, 6)][:3000]
KATAKANA = [chr(c) for c in range(0x30A1, 0x30F6)]
PARTICLES = ["の", "は", "を", "に", "が", "で", "と", "も", "から", "まで"]


def zipf_choice(rng: random.Random, items: list[str]) -> str:
    # Rank r with probability ~ 1/r: the commonest characters dominate, as in real text.
    r = int(len(items) ** rng.random()) - 1
    return items[min(r, len(items) - 1)]


def han_word(rng: random.Random) -> str:
    return "".join(zipf_choice(rng, HAN) for _ in range(rng.choice((1, 2, 2, 2, 3))))


def sentence(rng: random.Random, japanese: bool) -> str:
    words = []
    for _ in range(rng.randint(6, 16)):
        if japanese and rng.random() < 0.25:
            words.append("".join(rng.choice(KATAKANA) for _ in range(rng.randint(2, 5))))
        else:
            words.append(han_word(rng))
        if japanese and rng.random() < 0.5:
            words.append(rng.choice(PARTICLES))
    return "".join(words) + ("。" if japanese else "，" if rng.random() < 0.3 else "。")


def cjk_note(rng: random.Random, japanese: bool) -> tuple[str, str]:
    title = "".join(han_word(rng) for _ in range(rng.randint(2, 3)))
    paras = ["".join(sentence(rng, japanese) for _ in range(rng.randint(3, 6)))
             for _ in range(rng.randint(2, 5))]
    body = "\n\n".join(f"## {han_word(rng)}{han_word(rng)}\n\n{p}" if i else p
                       for i, p in enumerate(paras))
    return title, body


def write_corpus(root: Path, english: int, cjk: int, seed: int = 20) -> list[str]:
    """The notes as Markdown files; returns CJK queries cut from them."""
    rng = random.Random(seed)
    for written, note in enumerate(common.base_notes()):
        if written >= english:
            break
        path = root / "en" / f"{written:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {note.title}\n\n{note.text}\n", encoding="utf-8")
    queries: list[str] = []
    for i in range(cjk):
        japanese = i % 2 == 1
        title, body = cjk_note(rng, japanese)
        path = root / ("ja" if japanese else "zh") / f"{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
        runs = [r for r in body.replace("，", "。").split("。") if len(r) >= 4]
        if runs and len(queries) < 4 * cjk:
            run = rng.choice(runs)
            at = rng.randrange(0, len(run) - 3)
            queries.append(run[at : at + rng.randint(2, 4)])
    return queries


def fts_bytes(path: str) -> int:
    import apsw

    db = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return db.execute("SELECT coalesce(sum(pgsize), 0) FROM dbstat "
                          "WHERE name LIKE 'chunks_fts%'").fetchone()[0]
    finally:
        db.close()


def build(home: Path, notes: Path, pairs: bool) -> tuple[float, str]:
    """Index ``notes`` into ``home``, pairs on or off; (seconds, index path)."""
    from notewell import config
    from notewell.engine import Engine
    from notewell.index import keywords
    from notewell.model.fake import FakeEmbedder

    home.mkdir(parents=True)
    with common.env(NOTEWELL_HOME=str(home)):
        common.write_config(home, notes)
        original = keywords.segment
        if not pairs:
            keywords.segment = lambda text: text  # whole runs, as notewell wrote before
        try:
            engine = Engine(config.load(), embedder=FakeEmbedder())
            start = time.perf_counter()
            engine.sync()
            seconds = time.perf_counter() - start
            engine.index.checkpoint()
            path = engine.index.path
            engine.close()
        finally:
            keywords.segment = original
    return seconds, path


def search_times(home: Path, queries: list[str], passes: int, copy: bool) -> list[float]:
    from notewell import config
    from notewell.engine import Engine
    from notewell.model.fake import FakeEmbedder
    from notewell.search.searcher import Searcher

    with common.env(NOTEWELL_HOME=str(home)):
        engine = Engine(config.load(), embedder=FakeEmbedder())
        if copy:
            engine.index.warm_keywords(wait=True)
        else:
            engine.index.copies.settings.keywords = False
        warm = Searcher(engine.index, engine.embedder)
        for q in queries:  # the vocabulary and the pages these queries read, once
            warm.search(q + " ", mode="bm25")
        times = []
        for _ in range(passes):
            searcher = Searcher(engine.index, engine.embedder)
            for q in queries:
                start = time.perf_counter()
                searcher.search(q + " ", mode="bm25")
                times.append((time.perf_counter() - start) * 1000)
        engine.close()
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--english", type=int, default=3000, help="English notes")
    p.add_argument("--cjk", type=int, default=1000, help="synthetic CJK notes")
    p.add_argument("--queries", type=int, default=40, help="queries of each kind")
    p.add_argument("--passes", type=int, default=5)
    args = p.parse_args()
    common.print_machine("CJK keywords: character pairs against whole runs")
    with tempfile.TemporaryDirectory(prefix="nw-cjk-") as tmp:
        root = Path(tmp)
        cjk_queries = write_corpus(root / "notes", args.english, args.cjk)
        english = common.queries(2 * args.queries)[: args.queries]
        cjk_queries = random.Random(1).sample(cjk_queries, min(args.queries, len(cjk_queries)))
        built = {}
        for pairs in (False, True):  # off first: pairs on is measured second, page cache warm
            seconds, path = build(root / ("pairs" if pairs else "runs"), root / "notes", pairs)
            built[pairs] = (seconds, path, fts_bytes(path))
        print(f"corpus: {args.english} English notes, {args.cjk} synthetic CJK notes "
              f"(half Chinese-like, half Japanese-like)")
        for pairs, (seconds, path, size) in built.items():
            label = "pairs     " if pairs else "whole runs"
            print(f"{label}: FTS5 tables {size / 1e6:.2f} MB, index file "
                  f"{Path(path).stat().st_size / 1e6:.2f} MB, indexed in {seconds:.1f} s "
                  "(fake vectors)")
        extra = built[True][2] - built[False][2]
        print(f"pairs add {extra / 1e6:.2f} MB to FTS5 ({extra / built[False][2]:+.0%})")
        for copy in (False, True):
            where = "keyword copy" if copy else "FTS5        "
            results = {}
            # Alternate the two indexes pass by pass so load on the machine hits both.
            for _ in range(2):
                for pairs in (False, True):
                    home = root / ("pairs" if pairs else "runs")
                    results.setdefault(("en", pairs), []).extend(
                        search_times(home, english, max(1, args.passes // 2), copy))
            results[("cjk", True)] = search_times(root / "pairs", cjk_queries, args.passes,
                                                  copy)
            for (kind, pairs), times in results.items():
                label = f"{kind} queries, {'pairs' if pairs else 'whole runs'}"
                print(f"{where} {label:<26} {common.fmt(common.pct(times))}, "
                      f"mean {statistics.fmean(times):.2f} ms")
    print(common.load_note())
    return 0


if __name__ == "__main__":
    sys.exit(main())

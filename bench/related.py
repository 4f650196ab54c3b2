"""Related notes for a long text: read whole (passages, averaged) or only its first window?

    .venv/bin/python bench/related.py                # the demo notes, real model (~3 min)
    .venv/bin/python bench/related.py --fake --pairs 3 --runs 1   # a smoke run (seconds)

Over the bundled demo notes, indexed with the shipped model, two ways to turn a selection
into the vector ``Searcher.near`` ranks notes by:
- ``chunks``: what ``engine.text_vector`` does: the text cut into passages as a note is,
  each embedded as a passage, their mean at unit length (a note's own signature);
- ``cut``: the text embedded as one passage, so the model reads only its first 256 tokens.
Selections: two demo notes' texts one after the other (pairs drawn with a fixed seed):
where each ranks (A@1, B in the top 2 and top 5, both in the top 2, MRR of B); and the
second half of every note over 1,500 characters (its note @1). Then the time to read a
text of 2,000 and of ``MAX_RELATED_CHARS`` characters each way.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile

import common


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--runs", type=int, default=3, help="timed reads of each length")
    ap.add_argument("--fake", action="store_true", help="the fake embedder (smoke runs)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()

    from notewell.engine import text_vector
    from notewell.evaluation.corpora import folder_source
    from notewell.index.database import Index
    from notewell.index.schema import BuildSettings
    from notewell.ingest.chunking import ChunkSettings, chunk_note
    from notewell.ingest.sync import Syncer
    from notewell.model.fake import FakeEmbedder
    from notewell.model.runtime import default_embedder
    from notewell.ops.demo import demo_notes_dir
    from notewell.search.searcher import Searcher
    from notewell.wire.requests import MAX_RELATED_CHARS

    info = common.print_machine("related notes: a long text read whole or cut")
    embedder = FakeEmbedder() if args.fake else default_embedder()
    chunker = ChunkSettings()
    folder = tempfile.mkdtemp(prefix="notewell-related-")
    index = Index(f"{folder}/index.sqlite", BuildSettings(
        embedder.fingerprint(), embedder.dim, chunker.fingerprint()))
    source = folder_source(demo_notes_dir(), "demo")
    Syncer(index, embedder, chunker).sync(source)
    searcher = Searcher(index, embedder)
    notes = {}
    for stub in source.scan():
        note = source.load(stub.note_id)
        if note is not None and note.text.strip():
            notes[note.note_id] = note.text
    ids = sorted(notes)

    ways = {"chunks": lambda text: text_vector(embedder, chunker, text),
            "cut": lambda text: embedder.embed_batch([text])[0]}

    def rank(vector, note_id: str) -> int:
        found = [h.note_id for h in searcher.near(vector, 20)]
        return found.index(note_id) + 1 if note_id in found else 10_000

    rng = random.Random(35)
    pairs = [tuple(rng.sample(ids, 2)) for _ in range(args.pairs)]
    halves = [i for i in ids if len(notes[i]) > 1500]
    long_text = "".join(notes[i] + "\n\n" for i in ids)
    result: dict = {"machine": info, "notes": len(ids), "pairs": len(pairs),
                    "halves": len(halves), "ways": {}}
    print(f"\n{len(ids)} demo notes, {len(pairs)} pairs, {len(halves)} second halves")
    for name, vector_of in ways.items():
        a, b = [], []
        for first, second in pairs:
            vector = vector_of(notes[first] + "\n\n" + notes[second])
            a.append(rank(vector, first))
            b.append(rank(vector, second))
        half = [rank(vector_of(notes[i][len(notes[i]) // 2:]), i) for i in halves]
        n = len(pairs)
        figures = {
            "a_at_1": sum(r == 1 for r in a) / n,
            "b_top2": sum(r <= 2 for r in b) / n,
            "b_top5": sum(r <= 5 for r in b) / n,
            "both_top2": sum(max(x, y) <= 2 for x, y in zip(a, b)) / n,
            "mrr_b": statistics.fmean(1 / r for r in b),
            "half_at_1": sum(r == 1 for r in half) / max(1, len(half)),
            "read_ms": {},
        }
        for chars in (2_000, MAX_RELATED_CHARS):
            text = long_text[:chars]
            figures["read_ms"][chars] = common.pct(common.timed(lambda t=text, f=vector_of: f(t),
                                                                args.runs, warmup=1))
        passages = len(chunk_note("", long_text[:MAX_RELATED_CHARS], chunker))
        result["ways"][name] = figures
        print(f"{name:6}  pairs: A@1 {figures['a_at_1']:.2f}, B in top 2 "
              f"{figures['b_top2']:.2f}, B in top 5 {figures['b_top5']:.2f}, both in top 2 "
              f"{figures['both_top2']:.2f}, MRR(B) {figures['mrr_b']:.3f}; second halves @1 "
              f"{figures['half_at_1']:.2f}")
        for chars, p in figures["read_ms"].items():
            print(f"        read {chars:,} characters: {common.fmt(p)}"
                  + (f" ({passages} passages)" if name == "chunks" and
                     chars == MAX_RELATED_CHARS else ""))
    index.close()
    common.finish(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

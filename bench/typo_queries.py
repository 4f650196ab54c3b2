"""Typo query sets: golden queries with one or two realistic typos each, made the same way
on every machine (seeded per query).

    .venv/bin/python bench/typo_queries.py [--golden FILE] [--out FILE] [--seed N]

A typo is one of: a letter dropped ("vacum"), doubled ("vaccuum"), swapped with its
neighbour ("vacuum" -> "vacuum" with two letters exchanged: "vcauum"), or replaced by a
key next to it on a QWERTY keyboard ("vacuun"). Words of four letters or more get them;
a query with three or more such words gets two typos, else one. Each query's typos come
from its own ``random.Random(f"{seed}:{id}")``, so adding a query changes no other.
Without options it rewrites ``bench/typos/demo-golden-typos.jsonl`` from the demo golden
set (the SciFact set is made at run time by ``bench/typo_eval.py``: its claims are not
ours to copy into the repository).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO_GOLDEN = ROOT / "daemon" / "notewell" / "ops" / "demo_corpus" / "golden.jsonl"
LANGUAGE_TYPES = {"de", "es", "zh", "ja"}  # the demo set's non-English query types
DEMO_TYPOS = ROOT / "bench" / "typos" / "demo-golden-typos.jsonl"
SEED = 19
KINDS = ("drop", "double", "swap", "neighbour")

_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
NEIGHBOURS: dict[str, str] = {}
for r, row in enumerate(_ROWS):
    for c, ch in enumerate(row):
        near = [row[i] for i in (c - 1, c + 1) if 0 <= i < len(row)]
        for other in (r - 1, r + 1):  # the keys above and below, staggered rows
            if 0 <= other < len(_ROWS):
                near += [_ROWS[other][i] for i in (c - 1, c, c + 1) if 0 <= i < len(_ROWS[other])]
        NEIGHBOURS[ch] = "".join(dict.fromkeys(near))

_WORD = re.compile(r"[A-Za-z]+")


def typo(word: str, kind: str, rng: random.Random) -> str:
    """``word`` with one typo of ``kind`` at a random place (always a different word)."""
    for _ in range(20):
        i = rng.randrange(len(word))
        if kind == "drop":
            out = word[:i] + word[i + 1:]
        elif kind == "double":
            out = word[:i] + word[i] + word[i:]
        elif kind == "swap":
            i = min(i, len(word) - 2)
            out = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        else:
            low = word[i].lower()
            if low not in NEIGHBOURS:
                continue
            key = rng.choice(NEIGHBOURS[low])
            out = word[:i] + (key.upper() if word[i].isupper() else key) + word[i + 1:]
        if out.lower() != word.lower():
            return out
    return word[:-1]  # a word of one repeated letter: drop one


def typo_query(text: str, key: str, seed: int = SEED) -> tuple[str, list[dict]]:
    """``text`` with one or two typos, and what was changed."""
    rng = random.Random(f"{seed}:{key}")
    spans = [m for m in _WORD.finditer(text) if len(m.group()) >= 4]
    if not spans:
        return text, []
    picked = sorted(rng.sample(spans, 2 if len(spans) >= 3 else 1), key=lambda m: m.start())
    out, last, changes = [], 0, []
    for m in picked:
        kind = rng.choice(KINDS)
        new = typo(m.group(), kind, rng)
        out += [text[last:m.start()], new]
        last = m.end()
        changes.append({"word": m.group(), "typo": new, "kind": kind})
    out.append(text[last:])
    return "".join(out), changes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--golden", default=str(DEMO_GOLDEN))
    p.add_argument("--out", default=str(DEMO_TYPOS))
    p.add_argument("--seed", type=int, default=SEED)
    args = p.parse_args(argv)
    with open(args.golden, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    # The typos are an English QWERTY typist's; the per-language queries keep their own set.
    rows = [r for r in rows if r.get("type") not in LANGUAGE_TYPES]
    with open(args.out, "w", encoding="utf-8") as f:
        for row in rows:
            text, changes = typo_query(row["query"], row["id"], args.seed)
            f.write(json.dumps({**row, "query": text, "clean": row["query"],
                                "typos": changes}, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} queries to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

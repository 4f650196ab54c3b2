"""Old against new, side by side: one benchmark in two checkouts, in alternating processes.

    .venv/bin/python bench/compare.py --old ../notewell-old --rounds 3 -- keystroke.py --runs 60

A figure measured yesterday, or in another hour of a busy machine, is no baseline: this
runs ``SCRIPT ARGS --json FILE`` with each checkout's own ``.venv`` (old, new, old, new,
...), so both see the same load, then prints every number both runs reported as the
median over the rounds, old and new, and new/old. Make the old checkout with
``git worktree add ../notewell-old <commit>`` and ``make -C ../notewell-old install``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def flatten(value: object, prefix: str = "") -> dict[str, float]:
    """Every number in a JSON document, by its path (``a.b.0.c``)."""
    if isinstance(value, bool):
        return {}
    if isinstance(value, int | float):
        return {prefix: float(value)}
    items = (value.items() if isinstance(value, dict)
             else enumerate(value) if isinstance(value, list) else ())
    out: dict[str, float] = {}
    for key, inner in items:
        out.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
    return out


def run(checkout: Path, script: str, args: list[str]) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        python = checkout / ".venv" / "bin" / "python"
        done = subprocess.run([str(python), str(checkout / "bench" / script), *args,
                               "--json", out.name], cwd=checkout, check=False)
        if done.returncode:
            raise SystemExit(f"{script} failed in {checkout} (exit {done.returncode})")
        return flatten(json.loads(Path(out.name).read_text() or "{}"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, type=Path, help="the other checkout")
    ap.add_argument("--new", type=Path, default=REPO, help="default: this checkout")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--match", default="", help="only figures whose path holds this")
    ap.add_argument("script", help="a bench/ script, e.g. keystroke.py")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="its arguments (after --)")
    opts = ap.parse_args(argv)
    args = [a for a in opts.args if a != "--"]
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for n in range(opts.rounds):
        for side in ("old", "new"):
            print(f"-- round {n + 1}/{opts.rounds}: {side}", file=sys.stderr, flush=True)
            runs[side].append(run(getattr(opts, side).resolve(), opts.script, args))
    keys = [k for k in runs["new"][0] if opts.match in k
            and all(k in r for side in runs.values() for r in side)]
    print(f"{opts.script} {' '.join(args)}: median of {opts.rounds} alternating rounds")
    print(f"{'figure':60} {'old':>12} {'new':>12} {'new/old':>8}")
    for key in keys:
        old = statistics.median(r[key] for r in runs["old"])
        new = statistics.median(r[key] for r in runs["new"])
        ratio = f"{new / old:8.3f}" if old else "       -"
        print(f"{key[:60]:60} {old:12.4g} {new:12.4g} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Every benchmark runs end to end on a tiny input and prints its figures and machine.

All of it is ``bench`` (not in the default run: it starts daemons and builds corpora).
The real runs take minutes and check the targets that do not depend on how busy the
machine is (recall, the one-shot ratio)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, SHARED

BENCH = REPO / "bench"
pytestmark = [pytest.mark.bench,
              pytest.mark.skipif(not (SHARED / "dendron-vault").is_dir(),
                                 reason="../shared/data is absent")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("bench-cache")


def run(script: str, *args: str, cache=None, timeout: float = 240) -> str:
    # Smoke runs get a throw-away cache; the slow ones the user's own (~/.cache), so the
    # corpora built once are reused and nothing lands in the checkout.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cache or Path.home())}
    if cache is not None:
        env["NOTEWELL_BENCH_CACHE"] = str(cache)
    out = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True,
                         text=True, env=env, timeout=timeout, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "machine:" in out.stdout and "onnxruntime" in out.stdout
    return out.stdout


def test_keystroke_smoke(cache):
    out = run("keystroke.py", "--fake", "--notes", "8", "--runs", "4", "--oneshot-runs", "1",
              cache=cache)
    for label in ("bare python", "python client, typing", "one-shot", "x bare"):
        assert label in out


def test_search_latency_smoke(cache, tmp_path):
    out = run("search_latency.py", "--sizes", "150", "--vectors", "random", "--queries", "3",
              "--passes", "1", "--exact-runs", "1", "--gap-ms", "5", "--json",
              str(tmp_path / "r.json"), cache=cache)
    assert "recall@10 1.0000" in out  # under the copy threshold k-NN is exact
    assert "after 5 ms idle each" in out
    import json

    size = json.loads((tmp_path / "r.json").read_text())["sizes"][0]
    assert size["chunks"] >= 150 and size["search"]["n"] == 3
    assert size["search_after_idle"]["gap_ms"] == 5 and size["search_after_idle"]["n"] == 3


def test_memory_smoke(cache):
    out = run("memory.py", "--sizes", "150", "--vectors", "random", "--seconds", "1",
              cache=cache)
    assert "idle (ready, no query yet)" in out and "after a sync" in out


def test_indexing_smoke(cache):
    out = run("indexing.py", "--sample", "4", "--batches", "2", "--threads", "1",
              "--skip-concurrent", "--full-size", "0", "--skip-edit", cache=cache)
    assert "batch size x intra-op threads" in out and "fastest: threads 1, batch 2" in out


@pytest.mark.bench
def test_search_latency_recall_at_100k():
    out = run("search_latency.py", "--sizes", "100k", "--queries", "40", "--exact-runs", "3",
              timeout=3600)
    recall = float(out.split("recall@10 ")[1].split(",")[0])
    assert recall >= 0.98


@pytest.mark.bench
def test_keystroke_is_20x_faster_than_one_shot():
    out = run("keystroke.py", "--runs", "50", timeout=3600)
    line = next(ln for ln in out.splitlines() if ln.startswith("one-shot"))
    speedups = [float(part.split("x the ")[0]) for part in line.split("= ")[1].split(", ")]
    assert speedups and min(speedups) >= 20, line


def test_compare_smoke(cache):
    """``compare.py`` runs a script in two checkouts (here this one twice) in turns and
    prints every figure both reported, old and new, side by side."""
    if not (REPO / ".venv" / "bin" / "python").exists():
        pytest.skip("compare.py runs each checkout's own .venv; this one has none")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cache), "NOTEWELL_BENCH_CACHE": str(cache)}
    out = subprocess.run(
        [sys.executable, str(BENCH / "compare.py"), "--old", str(REPO), "--rounds", "1",
         "search_latency.py", "--", "--sizes", "150", "--vectors", "random", "--queries", "3",
         "--passes", "1", "--exact-runs", "1", "--gap-ms", "0"],
        capture_output=True, text=True, env=env, timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "recall@10 1.0000" in out.stdout  # the script's own output, from both runs
    table = out.stdout.split("median of 1 alternating rounds", 1)[1]
    row = next(line for line in table.splitlines() if line.startswith("sizes.0.search.n "))
    assert row.split()[1:] == ["3", "3", "1.000"]


def test_mcp_smoke(cache, tmp_path):
    out = run("mcp.py", "--fake", "--notes", "8", "--starts", "1", "--queries", "3",
              "--transcript", str(tmp_path / "t.txt"), cache=cache)
    for label in ("start-up to tools/list", "CPU time", "search_notes via stdio",
                  "search_notes answer, 8 hits", "example session", "memory per session",
                  "one-time growth for the MCP SDK", "while 4 sessions search in a loop"):
        assert label in out
    transcript = (tmp_path / "t.txt").read_text()
    assert transcript.startswith("> search_notes(") and "> get_note(note_id=" in transcript




def test_energy_smoke(cache, tmp_path):
    out = run("energy.py", "--notes", "20", "--minutes", "0.05", "--settle", "0", "--json",
              str(tmp_path / "e.json"), cache=cache)
    assert "CPU per idle minute:" in out and "wake-ups per idle minute" in out
    import json

    r = json.loads((tmp_path / "e.json").read_text())
    assert r["notes"] == 20 and r["threads"] > 1 and r["cpu_s_per_min"] >= 0
